// Package pebbleslog is the one adapter from Pebble's Logger to log/slog,
// for every Pebble database of the module (the ledger store, its read-only
// inspection, the projections' rows, the raft log). It implements
// pebble.Logger by its method set alone and imports the standard library
// only (internal/lint), so that a package can name it without linking
// Pebble.
package pebbleslog

import (
	"fmt"
	"log/slog"
)

// Logger sends Pebble's logs to slog: Infof at debug level (Pebble's
// informational lines are its own housekeeping: flushes, compactions,
// WAL recycling), Errorf at error level. The zero Logger discards both.
//
// Fatalf is where Pebble cannot go on. Its error (Prefix, then the
// message) goes to Fatal when set, which must not return; otherwise it is
// logged at error level and Fatalf panics with its text, which a reader
// that expects damage may recover (events/pebblelog/inspect does).
//
// Safe for concurrent use, as Pebble requires.
type Logger struct {
	// L receives the logs. nil discards them.
	L *slog.Logger
	// Prefix starts the message of a fatal error ("pebble: ", "pebble
	// (raft log): "), so that a panic names the database. Default: none.
	Prefix string
	// Fatal, when set, receives Fatalf's error and must not return.
	Fatal func(error)
}

// Infof logs at debug level.
func (l Logger) Infof(format string, args ...any) {
	if l.L != nil {
		l.L.Debug(fmt.Sprintf(format, args...))
	}
}

// Errorf logs at error level.
func (l Logger) Errorf(format string, args ...any) {
	if l.L != nil {
		l.L.Error(fmt.Sprintf(format, args...))
	}
}

// Fatalf hands the error to Fatal, or logs it and panics.
func (l Logger) Fatalf(format string, args ...any) {
	err := fmt.Errorf(l.Prefix+format, args...)
	if l.Fatal != nil {
		l.Fatal(err)
	} else if l.L != nil {
		l.L.Error(err.Error())
	}
	panic(err.Error())
}
