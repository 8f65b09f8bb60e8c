package pebbleslog_test

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/greffe/greffe/internal/pebbleslog"
)

var _ pebble.Logger = pebbleslog.Logger{}

// TestLogger_Levels: Pebble's informational lines go to debug, its errors
// to error, and a fatal error panics with the prefix after it is logged.
func TestLogger_Levels(t *testing.T) {
	var out bytes.Buffer
	l := pebbleslog.Logger{L: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})), Prefix: "pebble: "}
	l.Infof("flushed %d", 1)
	l.Errorf("background %s", "error")
	func() {
		defer func() {
			if r := recover(); r != "pebble: gave up at 7" {
				t.Errorf("panic %v", r)
			}
		}()
		l.Fatalf("gave up at %d", 7)
	}()
	for _, want := range []string{"level=DEBUG msg=\"flushed 1\"", "level=ERROR msg=\"background error\"", "level=ERROR msg=\"pebble: gave up at 7\""} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, out.String())
		}
	}
}

// TestLogger_Fatal: with Fatal set, it receives the error (wrapping what
// the format wraps) and logs nothing itself.
func TestLogger_Fatal(t *testing.T) {
	cause := errors.New("sync failed")
	var got error
	l := pebbleslog.Logger{Prefix: "pebble: ", Fatal: func(err error) { got = err; panic("parked") }}
	func() {
		defer func() { _ = recover() }()
		l.Fatalf("MANIFEST: %w", cause)
	}()
	if got == nil || got.Error() != "pebble: MANIFEST: sync failed" || !errors.Is(got, cause) {
		t.Errorf("Fatal got %v", got)
	}
	pebbleslog.Logger{}.Infof("discarded")
}
