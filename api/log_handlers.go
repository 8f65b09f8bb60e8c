package api

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/semaphore"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

func (s *Server) routes() {
	s.HandlePublic("GET /healthz", http.HandlerFunc(s.healthz))
	s.Handle("GET /v1/openapi.json", s.openAPI, readerRoles()...)
	s.Handle("GET /v1/info", s.info, readerRoles()...)
	s.Handle("POST /v1/streams/{stream}", s.appendStream, RoleWriter)
	s.Handle("POST /v1/append", s.appendMulti, RoleWriter)
	s.Handle("GET /v1/streams/{stream}", s.readStream, readerRoles()...)
	s.Handle("GET /v1/all", s.readAll, readerRoles()...)
	s.Handle("GET /v1/events/{id}", s.eventByID, readerRoles()...)
	s.Handle("GET /v1/subscribe", s.subscribe, readerRoles()...)
	s.Handle("GET /v1/checkpoint", s.checkpoint, readerRoles()...)
	s.proofRoutes()
	s.streamRoutes() // api/streams.go
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &wire.Error{Code: events.CodeNotFound, Message: fmt.Sprintf("no route %s %s; see docs/API.md", r.Method, r.URL.Path)})
	})
}

// FailingLedger is the capability of a Ledger that can fail (a
// *pebblelog.Store after a write or sync error): Failure returns why it
// refuses writes, or nil while it accepts them. It is safe for concurrent
// use and does no I/O.
type FailingLedger interface {
	Failure() error
}

// healthz is liveness: 200 while the process serves HTTP, whatever the
// store's state. A store that failed is reported in the body (status
// "store_failed" and why) but keeps the answer 200: the node still serves
// every event it acknowledged, and whether to restart it (which replays
// the log, and may refuse a damaged one) is the operator's call, told by
// /readyz and greffe_store_failed (docs/OPERATIONS.md).
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	body := map[string]any{"status": "ok", "head": s.ledger.Head().Size}
	if f, ok := s.ledger.(FailingLedger); ok {
		if err := f.Failure(); err != nil {
			body["status"], body["error"] = events.CodeStoreFailed, err.Error()
		}
	}
	writeJSON(w, http.StatusOK, body)
}

// ToProposed converts request events into proposals for stream, generating
// missing ids and setting the actor. Ids in the commands' space are
// refused (events.IsReservedEventID). Errors carry the JSON path under
// base.
func ToProposed(base string, in []wire.EventIn, actor string) ([]events.Proposed, error) {
	out := make([]events.Proposed, len(in))
	for i, e := range in {
		id := uuid.New()
		if e.ID != "" {
			var err error
			if id, err = uuid.Parse(e.ID); err != nil || id == uuid.Nil {
				return nil, &events.Error{Code: events.CodeInvalidEventID, Field: fmt.Sprintf("%s[%d].id", base, i), Message: fmt.Sprintf("event id %q is not a UUID", e.ID)}
			}
			if events.IsReservedEventID(id) {
				return nil, events.CheckRawEventID(fmt.Sprintf("%s[%d].id", base, i), id)
			}
		}
		data, meta := e.Data, e.Metadata
		if len(data) == 0 {
			data = json.RawMessage("{}")
		}
		if len(meta) == 0 {
			meta = json.RawMessage("{}")
		}
		out[i] = events.Proposed{ID: id, Type: e.Type, Data: data, Metadata: meta,
			CorrelationID: e.CorrelationID, CausationID: e.CausationID, Actor: actor, Envelope: e.Envelope}
	}
	return out, nil
}

func (s *Server) appendStream(w http.ResponseWriter, r *http.Request) {
	var body wire.StreamAppendIn
	if err := decodeStreamAppend(w, r, &body); err != nil { // api/appendbody.go
		writeError(w, err)
		return
	}
	stream := r.PathValue("stream")
	if body.Stream != "" && body.Stream != stream {
		writeError(w, &wire.Error{Code: events.CodeInvalidStreamName, Field: "stream", Message: fmt.Sprintf("body names stream %q but the path names %q; drop the body field", body.Stream, stream)})
		return
	}
	body.Stream = stream
	s.doAppend(w, r, []wire.StreamAppendIn{body}, false)
}

func (s *Server) appendMulti(w http.ResponseWriter, r *http.Request) {
	var body wire.AppendIn
	if err := decodeBody(w, r, &body); err != nil {
		writeError(w, err)
		return
	}
	s.doAppend(w, r, body.Appends, true)
}

// doAppend appends the entries of a body: one entry that is the body
// itself (multi false: POST /v1/streams/{stream}), or those of
// {"appends": [...]}.
func (s *Server) doAppend(w http.ResponseWriter, r *http.Request, in []wire.StreamAppendIn, multi bool) {
	actor := PrincipalFrom(r.Context()).Name
	req := events.AppendRequest{Streams: make([]events.StreamAppend, len(in))}
	for i, sa := range in {
		// The entry's path, which every refusal of its fields starts with,
		// the log's too (events.AppendRequest.Validate): appends[i], or
		// none for the single-stream body, which is the entry itself.
		entry := &req.Streams[i]
		if multi {
			entry.Path = fmt.Sprintf("appends[%d]", i)
		}
		ps, err := ToProposed(entry.FieldPath("events"), sa.Events, actor)
		if err != nil {
			writeError(w, err)
			return
		}
		entry.Stream, entry.Expected, entry.Events = sa.Stream, sa.ExpectedVersion, ps
	}
	// The log's bounds, checked once: the store takes the checked append
	// as it is (events.Validated).
	checked, err := events.Check(req)
	if err != nil {
		writeError(w, err)
		return
	}
	for i := range req.Streams {
		if err := rawAppendable(&req.Streams[i]); err != nil {
			writeError(w, err)
			return
		}
	}
	if err := s.checkEnvelopes(r, &req); err != nil { // api/signed.go
		writeError(w, err)
		return
	}
	o, err := s.ledger.AppendChecked(r.Context(), checked)
	if err != nil {
		writeError(w, err)
		return
	}
	if s.proven(w, r, appendOut(o), appendedPositions(o), true) { // ?prove=1: api/proven.go
		return
	}
	writeAppendOut(w, o) // api/appendout.go: writeJSON(w, http.StatusOK, appendOut(o)), by hand
}

// rawAppendable refuses an entry whose stream a raw append may not write:
// KurrentDB's system streams, and the domain aggregates' (written by
// commands only). Its name is valid (events.Check ran).
func rawAppendable(entry *events.StreamAppend) error {
	switch {
	case events.IsSystemStream(entry.Stream):
		return &wire.Error{Code: events.CodeReservedStreamName, Field: entry.FieldPath("stream"),
			Message: fmt.Sprintf("stream names starting with \"$\" are reserved (KurrentDB's $all and system streams); %q cannot be appended to, choose a name without the leading \"$\"", entry.Stream)}
	case events.IsReserved(entry.Stream):
		return &wire.Error{Code: events.CodeReservedStream, Field: entry.FieldPath("stream"),
			Message: fmt.Sprintf("stream %q belongs to a domain aggregate; change it with POST /v1/commands", entry.Stream)}
	}
	return nil
}

func appendOut(o events.Outcome) wire.AppendOut {
	out := wire.AppendOut{Duplicate: o.Duplicate, Events: make([]wire.AppendedEvent, len(o.Events))}
	for i, e := range o.Events {
		out.Events[i] = wire.AppendedEvent{ID: e.ID, Stream: e.Stream, Version: e.Version, Position: e.Position, LeafHash: e.LeafHash[:], RecordedAt: e.RecordedAt}
	}
	return out
}

func parseRead(r *http.Request) (events.ReadOptions, error) {
	q := r.URL.Query()
	var o events.ReadOptions
	switch d := q.Get("direction"); d {
	case "", "forward":
	case "backward":
		o.Direction = events.Backward
		o.From = events.FromEnd
	default:
		return o, &wire.Error{Code: wire.CodeInvalidQuery, Field: "direction", Message: fmt.Sprintf("direction %q: use forward or backward", d)}
	}
	if f := q.Get("from"); f != "" && f != "end" {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return o, &wire.Error{Code: wire.CodeInvalidQuery, Field: "from", Message: fmt.Sprintf("from %q: use a non-negative integer or \"end\"", f)}
		}
		o.From = v
	} else if f == "end" {
		o.From = events.FromEnd
	}
	if l := q.Get("limit"); l != "" {
		v, err := strconv.Atoi(l)
		if err != nil || v < 1 || v > events.MaxReadLimit {
			return o, &wire.Error{Code: wire.CodeInvalidQuery, Field: "limit", Message: fmt.Sprintf("limit %q: use 1 to %d", l, events.MaxReadLimit)}
		}
		o.Limit = v
	}
	o.MaxBytes = maxPageBytes // api/limits.go
	return o, nil
}

// readOut is a page's answer. next, where the following page starts, is
// set when this one may have stopped before the end (events.ReadOptions.
// Full): it holds its limit of events, or it reached the byte budget.
func readOut(evs []events.Event, o events.ReadOptions, key func(events.Event) uint64) wire.ReadOut {
	out := wire.ReadOut{Events: evs}
	if out.Events == nil {
		out.Events = []events.Event{}
	}
	if o.Full(evs) {
		last := key(evs[len(evs)-1])
		if o.Direction == events.Forward {
			n := last + 1
			out.Next = &n
		} else if last > 0 {
			n := last - 1
			out.Next = &n
		}
	}
	return out
}

func (s *Server) readStream(w http.ResponseWriter, r *http.Request) {
	o, err := parseRead(r)
	if err != nil {
		writeError(w, err)
		return
	}
	release, ok := s.provenRead(w, r, &o, false) // ?prove: capped (api/proven.go)
	if !ok {
		return
	}
	defer release()
	evs, err := s.ledger.ReadStream(r.Context(), r.PathValue("stream"), o)
	if err != nil {
		writeError(w, err)
		return
	}
	out := readOut(evs, o, func(e events.Event) uint64 { return e.Version })
	if s.proven(w, r, out, positionsOf(evs), false) { // ?prove=1: api/proven.go
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) readAll(w http.ResponseWriter, r *http.Request) {
	if wantsEntries(r) {
		s.readAllEntries(w, r)
		return
	}
	o, err := parseRead(r)
	if err != nil {
		writeError(w, err)
		return
	}
	release, ok := s.provenRead(w, r, &o, true) // ?prove: capped (api/proven.go)
	if !ok {
		return
	}
	defer release()
	evs, err := s.ledger.ReadAll(r.Context(), o)
	if err != nil {
		writeError(w, err)
		return
	}
	out := readOut(evs, o, func(e events.Event) uint64 { return e.Position })
	if s.proven(w, r, out, positionsOf(evs), false) { // ?prove=1: api/proven.go
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) eventByID(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		writeError(w, &wire.Error{Code: events.CodeInvalidEventID, Field: "id", Message: "the event id in the path is not a UUID"})
		return
	}
	release, ok := s.provenRead(w, r, nil, false) // ?prove: capped (api/proven.go)
	if !ok {
		return
	}
	defer release()
	e, err := s.ledger.EventByID(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	if s.proven(w, r, e, []uint64{e.Position}, false) { // ?prove=1: api/proven.go
		return
	}
	writeJSON(w, http.StatusOK, e)
}

// sseHeartbeat keeps idle subscriptions alive through proxies; ssePending is
// how many events may wait between the subscription and the client's
// socket, and ssePendingBytes how many of their bytes (events.EncodedSize):
// what waits pins the store's pages it came from, so 256 events of 8 KB
// held four pages per stalled subscriber (2 MiB; issue #20), where 256 KiB
// keep it to the page being read and the one before. 64 events are enough
// for the writer to batch its flushes.
const (
	sseHeartbeat    = 15 * time.Second
	ssePending      = 64
	ssePendingBytes = 256 << 10
)

// subscribe streams events as Server-Sent Events: "id" is the position (so a
// reconnecting EventSource resumes with Last-Event-ID), "event" the type,
// "data" the event JSON.
//
// from is the first position to send; Last-Event-ID, when present, wins
// and resumes just after it. 2^64-1 (events.FromEnd, as from or as
// Last-Event-ID) and from=end mean the end, as KurrentDB's End position
// (-1 unsigned) does: the subscription starts at the head and sends what
// comes next. It used to be taken as a Last-Event-ID like any other, and
// its + 1 overflowed to 0: the whole log replayed. Any other position at
// or beyond the head waits until the log reaches it: a client resuming on
// a node that is behind the one it read (a follower) gets no event twice.
func (s *Server) subscribe(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var from uint64
	switch f := q.Get("from"); f {
	case "":
	case "end":
		from = events.FromEnd
	default:
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			writeError(w, &wire.Error{Code: wire.CodeInvalidQuery, Field: "from",
				Message: fmt.Sprintf("from %q: use a position (a decimal integer below 2^64) or \"end\"", f)})
			return
		}
		from = v
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		v, err := strconv.ParseUint(last, 10, 64)
		if err != nil {
			writeError(w, &wire.Error{Code: wire.CodeInvalidQuery, Field: "Last-Event-ID",
				Message: fmt.Sprintf("Last-Event-ID %q: send the id of the last event received, a position (a decimal integer below 2^64; %d means the end)", last, uint64(events.FromEnd))})
			return
		}
		from = v + 1
		if v == events.FromEnd {
			from = events.FromEnd // not + 1: that would wrap to 0
		}
	}
	if from == events.FromEnd {
		from = s.ledger.Head().Size
	}
	f := events.Filter{StreamPrefix: q.Get("stream_prefix")}
	if t := q.Get("types"); t != "" {
		f.Types = strings.Split(t, ",")
	}
	if _, ok := w.(http.Flusher); !ok {
		writeError(w, &wire.Error{Code: wire.CodeInternal, Message: "streaming unsupported by this connection"})
		return
	}
	release, ok := acquire(w, r, s.quotas.subscriptions, retryAfterSubscriptions, wire.CodeTooManySubscriptions, "SSE subscriptions",
		"greffe serve --max-subscriptions-per-principal and --max-subscriptions") // api/limits.go
	if !ok {
		return
	}
	defer release()
	// Tracked (for the metrics) before the client sees the response.
	pos, untrack := s.subs.add(from)
	defer untrack()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	rc := http.NewResponseController(w)
	// flush sends what is buffered to the client, and reports a client
	// that took nothing within the write timeout (internal/progress) as an
	// error, as it reports one that left.
	flush := func() error {
		if err := bw.Flush(); err != nil {
			return err
		}
		return rc.Flush()
	}
	fmt.Fprintf(bw, ": greffe subscription from %d\n\n", from)
	if err := flush(); err != nil {
		s.subscriberGone(r, pos, err)
		return
	}

	// The subscription runs on its own goroutine and hands events over a
	// bounded channel; this goroutine alone writes the response (a
	// ResponseWriter is not safe for concurrent use) and adds heartbeats when
	// idle. A slow client fills the channel and blocks its own subscription
	// only: writers never wait for it. The handler owns the goroutine: it
	// cancels it and waits for it before returning, so that nothing the
	// subscription holds (its page of the log) outlives the request.
	ctx, cancel := context.WithCancel(r.Context())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	done := make(chan error, 1)
	pending := make(chan events.Event, ssePending)
	room := semaphore.NewWeighted(ssePendingBytes) // the bytes pending may hold
	weight := func(e *events.Event) int64 { return int64(min(events.EncodedSize(e), ssePendingBytes)) }
	// The filter is applied here rather than by the store (which reads
	// every event either way) so that pos, the metrics' view of how far
	// behind the head this subscription is, advances past skipped events.
	wg.Add(1)
	go func() {
		defer wg.Done()
		done <- s.ledger.Subscribe(ctx, from, events.Filter{}, func(e events.Event) error {
			pos.Store(e.Position + 1)
			if !f.Match(&e) {
				return nil
			}
			if err := room.Acquire(ctx, weight(&e)); err != nil {
				return err
			}
			select {
			case pending <- e:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	hb := time.NewTicker(sseHeartbeat)
	defer hb.Stop()
	for {
		select {
		case e := <-pending:
			err := writeSSE(bw, e)
			room.Release(weight(&e))
			if err != nil {
				s.subscriberGone(r, pos, err)
				return
			}
			// Flush when nothing else is immediately pending.
			if len(pending) == 0 {
				if err := flush(); err != nil {
					s.subscriberGone(r, pos, err)
					return
				}
			}
		case <-hb.C:
			fmt.Fprint(bw, ": heartbeat\n\n")
			if err := flush(); err != nil {
				s.subscriberGone(r, pos, err)
				return
			}
		case err := <-done:
			if err != nil && ctx.Err() == nil {
				fmt.Fprintf(bw, "event: error\ndata: %q\n\n", err.Error())
				_ = flush()
			}
			return
		case <-ctx.Done():
			return
		}
	}
}

// subscriberGone notes why a subscription's write failed: a client that
// took nothing within the write timeout is dropped, and counted
// (greffe_quota_dropped_total{quota="sse_subscriptions"}); one that left
// is not.
func (s *Server) subscriberGone(r *http.Request, pos *atomic.Uint64, err error) {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return
	}
	s.quotas.subscriptions.Dropped()
	s.cfg.Logger.Info("dropped an SSE subscriber that stopped reading; it resumes with Last-Event-ID",
		"principal", PrincipalFrom(r.Context()).Name, "remote", r.RemoteAddr, "next", pos.Load(), "write_timeout", s.cfg.WriteTimeout)
}

// writeSSE writes one event's frame; its data line is the event's JSON
// with data and metadata as stored, on one line (events.Event.AppendJSONLine).
func writeSSE(bw *bufio.Writer, e events.Event) error {
	_, err := fmt.Fprintf(bw, "id: %d\nevent: %s\ndata: %s\n\n", e.Position, sanitizeSSE(e.Type), e.AppendJSONLine(nil))
	return err
}

// sanitizeSSE keeps a field on one line (types are printable, but a field
// must never break the framing).
func sanitizeSSE(s string) string { return strings.NewReplacer("\n", " ", "\r", " ").Replace(s) }

func (s *Server) checkpoint(w http.ResponseWriter, r *http.Request) {
	var cp events.Checkpoint
	var err error
	if sz := r.URL.Query().Get("size"); sz != "" {
		n, perr := strconv.ParseUint(sz, 10, 64)
		if perr != nil {
			writeError(w, &wire.Error{Code: wire.CodeInvalidQuery, Field: "size", Message: "size must be a non-negative integer"})
			return
		}
		cp, err = s.ledger.CheckpointAt(r.Context(), n)
	} else {
		cp, err = s.ledger.LatestCheckpoint(r.Context())
	}
	if err != nil {
		writeError(w, err)
		return
	}
	b, err := s.servedNote(r, cp, r.URL.Query().Get("size") == "") // with the witnesses' cosignatures: api/proven.go
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	h := s.ledger.Head()
	out := wire.InfoOut{LedgerID: s.ledger.LedgerID(), Origin: s.ledger.Origin(), NodeID: s.cfg.NodeID, Version: s.cfg.Version,
		VerifierKeys: s.cfg.Verifiers(), Head: wire.HeadOut{Size: h.Size, Root: base64.StdEncoding.EncodeToString(h.Root[:])}, Build: s.cfg.Build}
	if h.RecordedAt != 0 {
		out.Head.RecordedAt = time.Unix(0, h.RecordedAt).UTC()
	}
	if out.VerifierKeys == nil {
		out.VerifierKeys = []string{}
	}
	writeJSON(w, http.StatusOK, out)
}
