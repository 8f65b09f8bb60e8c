// Package lint holds greffe's repo-wide lint test (lint_test.go), after
// Pebble's internal/lint: the import table of ARCHITECTURE.md and the house
// rules of STYLE.md, checked over every package of the module, so that a
// change that breaks one fails `go test ./...` in CI.
//
// It holds no code and imports nothing: nothing may import it.
package lint
