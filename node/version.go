package node

import (
	"runtime"
	"runtime/debug"
	"time"

	"github.com/greffe/greffe/events/pebblelog/layout"
	"github.com/greffe/greffe/wire"
)

// stampedVersion and stampedCommit are written by the linker at a release
// build, never by the program (so they are not the mutable state STYLE.md
// rules out):
//
//	go build -ldflags "-X github.com/greffe/greffe/node.stampedVersion=v0.2.0 \
//	    -X github.com/greffe/greffe/node.stampedCommit=$(git rev-parse HEAD)" ./cmd/greffe
//
// Empty: not stamped; Build falls back on the Go toolchain's build
// information (docs/OPERATIONS.md, "Install").
var (
	stampedVersion string
	stampedCommit  string
)

// APIVersion is the HTTP API's version, the /v1 of every route
// (docs/API.md).
const APIVersion = "v1"

// Build returns what this binary is: its version, commit, Go version, API
// version and the store formats it writes and reads. The version is the
// one stamped with -ldflags, else the module's own (`go install
// github.com/greffe/greffe/cmd/greffe@v0.2.0` records it), else Version
// with "-dev" (a build from a checkout). The commit is the stamped one,
// else the VCS revision the go command records when it builds a main
// package inside a checkout.
func Build() wire.VersionOut {
	out := wire.VersionOut{Version: Version + "-dev", GoVersion: runtime.Version(), APIVersion: APIVersion,
		StoreFormat: layout.StoreFormat, StoreFormatsRead: layout.ReadFormats()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			out.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				out.Commit = s.Value
			case "vcs.time":
				out.CommitTime, _ = time.Parse(time.RFC3339, s.Value)
			case "vcs.modified":
				out.Modified = s.Value == "true"
			}
		}
	}
	if stampedVersion != "" {
		out.Version = stampedVersion
	}
	if stampedCommit != "" && stampedCommit != out.Commit {
		// A stamp that disagrees with the toolchain's record wins; the
		// time and modified bit were the other commit's.
		out.Commit, out.CommitTime, out.Modified = stampedCommit, time.Time{}, false
	}
	return out
}
