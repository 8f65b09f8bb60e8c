package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// startHint follows "no node answers at …": what a new user does next.
const startHint = "start one with \"greffe serve\" (or \"greffe demo\"), or point --server (or GREFFE_SERVER) at a running node"

// noNodeMessage describes an endpoint's failure for endpoint health and
// status: no node answers at it, or what it answered.
func noNodeMessage(ep string, err error) string {
	var ue *client.UnreachableError
	if errors.As(err, &ue) {
		return fmt.Sprintf("no node answers (%v)", errors.Join(ue.Errs...))
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return fmt.Sprintf("no node answers (%v)", err)
	}
	return describeAPI(err)
}

// describeAPI prints an API error as its code, its sentence (once: a
// message that repeats its code loses the repetition) and its field.
func describeAPI(err error) string {
	var ae *wire.Error
	if !errors.As(err, &ae) {
		return err.Error()
	}
	s := fmt.Sprintf("%s: %s", ae.Code, strings.TrimPrefix(ae.Message, ae.Code+": "))
	if ae.Field != "" {
		s += " (field " + ae.Field + ")"
	}
	return s
}

// parseTimeFlag parses the RFC 3339 time of a flag, or says how to write
// one (time.Parse's own error quotes Go's layout string, which a user
// cannot act on).
func parseTimeFlag(flag, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return t, usageError{fmt.Errorf("%s %q: use an RFC 3339 time, e.g. %s (UTC) or 2026-03-01T10:00:00+01:00", flag, v, events.RFC3339Example)}
	}
	return t, nil
}

// parseLogLevel parses --log-level, or lists the levels (slog's own error,
// `level string "verbose": unknown name`, names none).
func parseLogLevel(v string) (slog.Level, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(v)); err != nil {
		return lv, usageError{fmt.Errorf("--log-level %q: use debug, info, warn or error", v)}
	}
	return lv, nil
}
