package events

import (
	"context"
	"strings"

	"github.com/google/uuid"
)

// Direction of a read.
type Direction uint8

const (
	// Forward reads increasing positions (or versions) starting at From.
	Forward Direction = iota
	// Backward reads decreasing positions (or versions) starting at From.
	Backward
)

// FromEnd, as a read's From, starts a backward read at the last event.
const FromEnd = ^uint64(0)

// ReadOptions bound a read. Limit 0 means 100; reads return at most 10,000.
type ReadOptions struct {
	From      uint64
	Limit     int
	Direction Direction
	// MaxBytes, when positive, also bounds the page in bytes: the read
	// stops before the event that would take the encoded size of its
	// events (EncodedSize, the stored bytes) above MaxBytes, but returns
	// at least one event. 0: the page is bounded by Limit alone. The API
	// sets it at the edge, so that a page of large events holds what a
	// client may make the node allocate to a bounded amount (issue #20);
	// readers inside the node leave it 0 and page by count. Full tells a
	// page that may have stopped short from one that reached the end.
	MaxBytes int
}

// DefaultReadLimit and MaxReadLimit bound one read call.
const (
	DefaultReadLimit = 100
	MaxReadLimit     = 10000
)

// EffectiveLimit returns the limit a read applies.
func (o ReadOptions) EffectiveLimit() int {
	switch {
	case o.Limit <= 0:
		return DefaultReadLimit
	case o.Limit > MaxReadLimit:
		return MaxReadLimit
	}
	return o.Limit
}

// Full reports whether a page read with o may have stopped before the end
// of what it reads, so that the next page (from after its last event) may
// hold more: it holds the limit's count of events, or, with MaxBytes, its
// events came within one event's largest size (MaxEncodedSize) of
// MaxBytes, so that the read may have left the next one out. A page that
// is not full ended where the log (or the stream) did when it was read.
func (o ReadOptions) Full(page []Event) bool {
	if len(page) >= o.EffectiveLimit() {
		return true
	}
	if o.MaxBytes <= 0 || len(page) == 0 {
		return false
	}
	n := 0
	for i := range page {
		n += EncodedSize(&page[i])
	}
	return n > o.MaxBytes-MaxEncodedSize
}

// Filter selects events for a subscription. The zero Filter selects all.
type Filter struct {
	// StreamPrefix keeps events whose stream starts with it ("" keeps all).
	StreamPrefix string
	// Types keeps events whose type is one of them (empty keeps all).
	Types []string
}

// Match reports whether e passes the filter.
func (f *Filter) Match(e *Event) bool {
	if f.StreamPrefix != "" && !strings.HasPrefix(e.Stream, f.StreamPrefix) {
		return false
	}
	if len(f.Types) == 0 {
		return true
	}
	for _, t := range f.Types {
		if t == e.Type {
			return true
		}
	}
	return false
}

// Head describes the acknowledged end of the log: every event below Size is
// durable, and Root is the RFC 6962 root of those Size leaves.
type Head struct {
	Size       uint64
	Root       [32]byte
	RecordedAt int64 // Unix nanoseconds of the last event, 0 for an empty log
}

// Appender appends atomically. AppendChecked takes an append whose bounds
// were checked (Check) and checks nothing again; Append is Check then
// AppendChecked, for a caller that did not check. Both fix nothing
// non-deterministic themselves beyond the batch time, and return once the
// events are durable (fsynced, or committed by a quorum). On a
// *ConditionError or an *Error nothing was written. ErrOutcomeUnknown means
// the append may have been written; retrying with the same ids is safe.
// Safe for concurrent use; concurrent appends are coalesced into one commit.
type Appender interface {
	Append(ctx context.Context, r AppendRequest) (Outcome, error)
	AppendChecked(ctx context.Context, v Validated) (Outcome, error)
}

// Reader reads acknowledged events. Reads never return an event above the
// acknowledged head. Returned slices belong to the caller. A stream without
// events returns ErrNotFound; an empty page past the end returns no error.
type Reader interface {
	ReadStream(ctx context.Context, stream string, o ReadOptions) ([]Event, error)
	ReadAll(ctx context.Context, o ReadOptions) ([]Event, error)
	EventByID(ctx context.Context, id uuid.UUID) (Event, error)
	Head() Head
}

// Subscriber delivers events in position order: first those already in the
// log from position from, then live ones, with no gap and no duplicate.
// Subscribe blocks until ctx is done or fn returns an error, and returns that
// error (ctx.Err() on cancellation). fn runs on the subscriber's goroutine; a
// slow fn never blocks writers: the subscription reads from disk as it goes.
type Subscriber interface {
	Subscribe(ctx context.Context, from uint64, f Filter, fn func(Event) error) error
}

// Log is the contract every greffe store implements.
type Log interface {
	Appender
	Reader
	Subscriber
}
