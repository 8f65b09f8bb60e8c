package kurrentgrpc

import (
	"context"
	"errors"
	"regexp"
	"strings"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
)

// readPage is how many events one log read asks for, and readPageBytes how
// many of their stored bytes (events.ReadOptions.MaxBytes): reads of any
// count are served page by page, so memory stays bounded whatever the
// client asks, whatever the events' size. 512 events of 64 KiB were 32 MiB
// held per call while its client was slow (issue #20); 512 KiB still hold
// 512 typical events (a few hundred bytes each).
const (
	readPage      = 512
	readPageBytes = 512 << 10
)

// defaultCheckpointWindow is the search window of a filtered subscription
// whose client asked for no maximum: a checkpoint every 32 events scanned,
// KurrentDB's default.
const defaultCheckpointWindow = 32

// Read serves reads (a count) and catch-up subscriptions (then live) of one
// stream or of $all.
//
// A plain read sends only events (and StreamNotFound): the Go client panics
// on any other message there. A subscription sends a confirmation first,
// then the events already in the log, then CaughtUp, then live events;
// filtered $all subscriptions also send checkpoints.
func (svc *streamsService) Read(req *streams.ReadReq, out streams.Streams_ReadServer) error {
	release, err := svc.s.acquireRead(out.Context()) // limits.go
	if err != nil {
		return svc.s.toStatus(out.Context(), err)
	}
	defer release()
	out, bound := svc.s.boundSends(out)
	ctx, cancel := svc.s.callContext(out.Context())
	defer cancel()
	err = svc.read(ctx, req, out)
	if bound.stop() {
		svc.s.reads.Dropped()
		svc.s.cfg.Logger.Info("ended a gRPC read whose client stopped reading", "principal", svc.s.principal(out.Context()).Name, "write_timeout", svc.s.cfg.WriteTimeout)
		return errStalled
	}
	if err != nil && out.Context().Err() == nil && ctx.Err() != nil {
		// The server is closing, not the client: say so rather than
		// "canceled", which the client would take as its own doing.
		return svc.s.toStatus(out.Context(), events.ErrClosed)
	}
	return svc.s.toStatus(out.Context(), err)
}

// reader carries one Read call's settings.
type reader struct {
	log      events.Log
	out      streams.Streams_ReadServer
	asString bool
	match    *matcher // nil: every event
}

func (svc *streamsService) read(ctx context.Context, req *streams.ReadReq, out streams.Streams_ReadServer) error {
	o := req.GetOptions()
	if o == nil {
		return refusef(CodeInvalidRequest, "a read needs options")
	}
	m, err := newMatcher(o.GetFilter())
	if err != nil {
		return err
	}
	r := &reader{log: svc.s.log, out: out, asString: o.GetUuidOption().GetString_() != nil, match: m}
	backward := o.GetReadDirection() == streams.ReadReq_Options_Backwards
	_, subscribe := o.GetCountOption().(*streams.ReadReq_Options_Subscription)
	count, counted := o.GetCountOption().(*streams.ReadReq_Options_Count)
	if !subscribe && !counted {
		return refusef(CodeInvalidRequest, "a read needs a count or subscription options")
	}
	if subscribe && backward {
		return refusef(CodeInvalidRequest, "subscriptions go forwards")
	}
	switch so := o.GetStreamOption().(type) {
	case *streams.ReadReq_Options_Stream:
		stream := string(so.Stream.GetStreamIdentifier().GetStreamName())
		if err := events.ValidateStreamName("stream", stream); err != nil {
			return err
		}
		if subscribe {
			return r.subscribeStream(ctx, stream, so.Stream)
		}
		return r.readStream(ctx, stream, so.Stream, backward, count.Count)
	case *streams.ReadReq_Options_All:
		if subscribe {
			return r.subscribeAll(ctx, so.All, checkpointEvery(o.GetFilter()))
		}
		return r.readAll(ctx, so.All, backward, count.Count)
	}
	return refusef(CodeInvalidRequest, "a read names a stream or $all")
}

func (r *reader) send(e *events.Event) error { return r.out.Send(eventResp(e, r.asString)) }

// readStream sends up to count events of stream. Forwards and backwards
// both include the starting revision; forwards from End sends nothing.
func (r *reader) readStream(ctx context.Context, stream string, so *streams.ReadReq_Options_StreamOptions, backward bool, count uint64) error {
	o := events.ReadOptions{Direction: events.Forward}
	if backward {
		o.Direction = events.Backward
	}
	switch rv := so.GetRevisionOption().(type) {
	case *streams.ReadReq_Options_StreamOptions_Start:
		o.From = 0
	case *streams.ReadReq_Options_StreamOptions_End:
		o.From = events.FromEnd // backwards: the last event; forwards: past the end
	case *streams.ReadReq_Options_StreamOptions_Revision:
		o.From = rv.Revision
	default:
		return refusef(CodeInvalidRequest, "a stream read starts at start, end or a revision")
	}
	first := true
	o.MaxBytes = readPageBytes
	for count > 0 {
		o.Limit = int(min(count, readPage))
		evs, err := r.log.ReadStream(ctx, stream, o)
		if first && errors.Is(err, events.ErrNotFound) {
			return r.out.Send(&streams.ReadResp{Content: &streams.ReadResp_StreamNotFound_{StreamNotFound: &streams.ReadResp_StreamNotFound{
				StreamIdentifier: &shared.StreamIdentifier{StreamName: []byte(stream)},
			}}})
		}
		if err != nil {
			return err
		}
		first = false
		for i := range evs {
			if err := r.send(&evs[i]); err != nil {
				return err
			}
		}
		count -= uint64(len(evs))
		if !o.Full(evs) {
			return nil
		}
		last := evs[len(evs)-1].Version
		if backward {
			if last == 0 {
				return nil
			}
			o.From = last - 1
		} else {
			o.From = last + 1
		}
	}
	return nil
}

// readAll sends up to count events of $all that pass the filter. Forwards
// from a position includes it; backwards from a position starts just below
// it, as KurrentDB does, so a position read from an event can be passed back
// in either direction to continue.
func (r *reader) readAll(ctx context.Context, ao *streams.ReadReq_Options_AllOptions, backward bool, count uint64) error {
	o := events.ReadOptions{Direction: events.Forward}
	switch p := ao.GetAllOption().(type) {
	case *streams.ReadReq_Options_AllOptions_Start:
		if backward {
			return nil
		}
		o.From = 0
	case *streams.ReadReq_Options_AllOptions_End:
		if !backward {
			return nil
		}
		o.From = events.FromEnd
	case *streams.ReadReq_Options_AllOptions_Position:
		o.From = p.Position.GetCommitPosition()
		if backward {
			if o.From == 0 {
				return nil
			}
			o.From--
		}
	default:
		return refusef(CodeInvalidRequest, "a $all read starts at start, end or a position")
	}
	if backward {
		o.Direction = events.Backward
	}
	o.Limit, o.MaxBytes = readPage, readPageBytes
	for count > 0 {
		evs, err := r.log.ReadAll(ctx, o)
		if err != nil {
			return err
		}
		for i := range evs {
			if !r.match.Match(&evs[i]) {
				continue
			}
			if err := r.send(&evs[i]); err != nil {
				return err
			}
			if count--; count == 0 {
				return nil
			}
		}
		if !o.Full(evs) {
			return nil
		}
		last := evs[len(evs)-1].Position
		if backward {
			if last == 0 {
				return nil
			}
			o.From = last - 1
		} else {
			o.From = last + 1
		}
	}
	return nil
}

func (r *reader) confirm() error {
	return r.out.Send(&streams.ReadResp{Content: &streams.ReadResp_Confirmation{Confirmation: &streams.ReadResp_SubscriptionConfirmation{
		SubscriptionId: uuid.NewString(),
	}}})
}

func (r *reader) caughtUp() error {
	return r.out.Send(&streams.ReadResp{Content: &streams.ReadResp_CaughtUp_{CaughtUp: &streams.ReadResp_CaughtUp{}}})
}

// subscribeStream follows one stream: from Start (revision 0), after a
// revision (exclusive, as KurrentDB), or from End (new events only).
//
// Catch-up reads the stream's pages; each page is read after noting the
// log's head h, and events at h or above are left to the live phase, which
// subscribes to the log from h. So every event is sent once: below h by the
// catch-up, at or above h by the live phase (which also skips versions the
// catch-up already passed).
func (r *reader) subscribeStream(ctx context.Context, stream string, so *streams.ReadReq_Options_StreamOptions) error {
	var next uint64 // the next version to send
	fromEnd := false
	switch rv := so.GetRevisionOption().(type) {
	case *streams.ReadReq_Options_StreamOptions_Start:
	case *streams.ReadReq_Options_StreamOptions_End:
		fromEnd = true
	case *streams.ReadReq_Options_StreamOptions_Revision:
		// After 2^64-1 is the end, as for $all.
		if rv.Revision == ^uint64(0) {
			fromEnd = true
		} else {
			next = rv.Revision + 1
		}
	default:
		return refusef(CodeInvalidRequest, "a stream subscription starts at start, end or after a revision")
	}
	if err := r.confirm(); err != nil {
		return err
	}
	h := r.log.Head().Size
	for !fromEnd {
		h = r.log.Head().Size
		o := events.ReadOptions{From: next, Limit: readPage, MaxBytes: readPageBytes}
		evs, err := r.log.ReadStream(ctx, stream, o)
		if err != nil && !errors.Is(err, events.ErrNotFound) {
			return err
		}
		reachedHead := false
		for i := range evs {
			if evs[i].Position >= h {
				reachedHead = true
				break
			}
			if err := r.send(&evs[i]); err != nil {
				return err
			}
			next = evs[i].Version + 1
		}
		if reachedHead || !o.Full(evs) || len(evs) == 0 {
			break
		}
	}
	if err := r.caughtUp(); err != nil {
		return err
	}
	return r.log.Subscribe(ctx, h, events.Filter{StreamPrefix: stream}, func(e events.Event) error {
		if e.Stream != stream || e.Version < next {
			return nil
		}
		return r.send(&e)
	})
}

// subscribeAll follows $all: from Start, after a position (exclusive), or
// from End. With a filter, a checkpoint (the position of the last event
// scanned) is sent every `every` events scanned, so that a client whose
// filter rarely matches can still save its progress.
func (r *reader) subscribeAll(ctx context.Context, ao *streams.ReadReq_Options_AllOptions, every uint64) error {
	var next uint64
	switch p := ao.GetAllOption().(type) {
	case *streams.ReadReq_Options_AllOptions_Start:
	case *streams.ReadReq_Options_AllOptions_End:
		next = r.log.Head().Size
	case *streams.ReadReq_Options_AllOptions_Position:
		// After 2^64-1 is the end (KurrentDB's End is -1 unsigned); + 1
		// would wrap to 0 and replay the whole log.
		if c := p.Position.GetCommitPosition(); c == events.FromEnd {
			next = r.log.Head().Size
		} else {
			next = c + 1
		}
	default:
		return refusef(CodeInvalidRequest, "a $all subscription starts at start, end or after a position")
	}
	if err := r.confirm(); err != nil {
		return err
	}
	var scanned uint64
	scan := func(e *events.Event) error {
		if r.match.Match(e) {
			if err := r.send(e); err != nil {
				return err
			}
		}
		if r.match == nil {
			return nil
		}
		if scanned++; scanned >= every {
			scanned = 0
			return r.out.Send(&streams.ReadResp{Content: &streams.ReadResp_Checkpoint_{Checkpoint: &streams.ReadResp_Checkpoint{
				CommitPosition: e.Position, PreparePosition: e.Position,
			}}})
		}
		return nil
	}
	for {
		h := r.log.Head().Size
		if next >= h {
			break
		}
		evs, err := r.log.ReadAll(ctx, events.ReadOptions{From: next, Limit: int(min(h-next, readPage)), MaxBytes: readPageBytes})
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			break
		}
		for i := range evs {
			if err := scan(&evs[i]); err != nil {
				return err
			}
		}
		next = evs[len(evs)-1].Position + 1
	}
	if err := r.caughtUp(); err != nil {
		return err
	}
	return r.log.Subscribe(ctx, next, events.Filter{}, func(e events.Event) error { return scan(&e) })
}

// matcher is a KurrentDB server-side filter: on the stream name or the event
// type, by prefixes (any of them) or by a regular expression.
type matcher struct {
	onType   bool
	prefixes []string
	re       *regexp.Regexp
}

func newMatcher(f *streams.ReadReq_Options_FilterOptions) (*matcher, error) {
	if f == nil {
		return nil, nil
	}
	m := &matcher{}
	var x *streams.ReadReq_Options_FilterOptions_Expression
	switch v := f.GetFilter().(type) {
	case *streams.ReadReq_Options_FilterOptions_StreamIdentifier:
		x = v.StreamIdentifier
	case *streams.ReadReq_Options_FilterOptions_EventType:
		m.onType, x = true, v.EventType
	default:
		return nil, refusef(CodeInvalidFilter, "a filter applies to the stream name or the event type")
	}
	m.prefixes = x.GetPrefix()
	if x.GetRegex() != "" {
		re, err := regexp.Compile(x.GetRegex())
		if err != nil {
			return nil, refusef(CodeInvalidFilter, "filter regex %q: %v", x.GetRegex(), err)
		}
		m.re = re
	}
	if m.re == nil && len(m.prefixes) == 0 {
		return nil, refusef(CodeInvalidFilter, "a filter needs prefixes or a regex")
	}
	return m, nil
}

// Match reports whether e passes; a nil matcher passes everything.
func (m *matcher) Match(e *events.Event) bool {
	if m == nil {
		return true
	}
	s := e.Stream
	if m.onType {
		s = e.Type
	}
	if m.re != nil && !m.re.MatchString(s) {
		return false
	}
	if len(m.prefixes) == 0 {
		return true
	}
	for _, p := range m.prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// checkpointEvery returns how many scanned events separate two checkpoints:
// the search window times the multiplier, as KurrentDB computes it.
func checkpointEvery(f *streams.ReadReq_Options_FilterOptions) uint64 {
	window := uint64(defaultCheckpointWindow)
	if w := f.GetMax(); w > 0 {
		window = uint64(w)
	}
	return window * uint64(max(f.GetCheckpointIntervalMultiplier(), 1))
}
