//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package witness

// lockDir is a no-op where flock is not available: run one witness per
// folder.
func lockDir(string) (func() error, error) { return func() error { return nil }, nil }
