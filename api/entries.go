package api

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// The global log as stored bytes (GET /v1/all?format=entries).
//
// A page of JSON re-encodes every event (its data and metadata re-compacted
// by encoding/json) and the client decodes it again with reflection: that
// was three quarters of the node's CPU when a client read the log in order
// (issue #14). This format serves the events as they are stored and hashed,
// framed like the entry bundles of C2SP tlog-tiles: for each event, a
// uint16 big-endian length, then its canonical bytes (docs/FORMAT.md). A
// reader decodes them with events.Decode (the client does: ReadEntries) and
// can check each one against the tree by hashing exactly those bytes.
//
// The response names the range it holds before the body: Greffe-From (the
// first position) and Greffe-Entries (how many events follow), taken from
// the head when the request began; a body cut short holds fewer, which the
// reader must treat as an error. Greffe-Head is that head.

// EntriesContentType is the media type of the stored-bytes format.
const EntriesContentType = "application/x-greffe-entries"

// MaxEntriesLimit bounds one streamed read: a million events, about 350 MB
// of 256-byte events, streamed in chunks of entriesChunk.
const MaxEntriesLimit = 1 << 20

// entriesChunk is how many events are copied out of the store under one
// iterator before they are written to the network, which happens outside
// the store's lock: a slow reader never holds the store. entriesChunkBytes
// bounds the copy in bytes: 4,096 events of 64 KiB were 256 MiB held for
// one reader (issue #20); 1 MiB still holds the 4,096 events of a few
// hundred bytes a chunk usually carries.
const (
	entriesChunk      = 4096
	entriesChunkBytes = 1 << 20
)

// errChunkFull stops a chunk's scan at entriesChunkBytes.
var errChunkFull = errors.New("api: entries chunk full")

// rawScanner is what the stored-bytes read needs of the ledger;
// *pebblelog.Store has it. Without it, ReadRaw serves (one allocation per
// event).
type rawScanner interface {
	ScanRaw(ctx context.Context, lo, hi uint64, fn func(pos uint64, b []byte) error) error
}

// wantsEntries reports whether a read of the global log asks for stored
// bytes: ?format=entries, or an Accept header naming the media type; an
// unknown format is answered by readAllEntries with its refusal.
func wantsEntries(r *http.Request) bool {
	switch r.URL.Query().Get("format") {
	case "json":
		return false
	case "":
		return r.Header.Get("Accept") == EntriesContentType
	}
	return true
}

func (s *Server) readAllEntries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if f := q.Get("format"); f != "" && f != "entries" && f != "json" {
		writeError(w, &wire.Error{Code: wire.CodeInvalidQuery, Field: "format", Message: fmt.Sprintf("format %q: use json (the default) or entries", f)})
		return
	}
	if d := q.Get("direction"); d != "" && d != "forward" {
		writeError(w, &wire.Error{Code: wire.CodeInvalidQuery, Field: "direction", Message: "format=entries reads forward only"})
		return
	}
	var from uint64
	if f := q.Get("from"); f != "" {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			writeError(w, &wire.Error{Code: wire.CodeInvalidQuery, Field: "from", Message: fmt.Sprintf("from %q: use a non-negative integer", f)})
			return
		}
		from = v
	}
	limit := uint64(MaxEntriesLimit)
	if l := q.Get("limit"); l != "" {
		v, err := strconv.ParseUint(l, 10, 64)
		if err != nil || v < 1 || v > MaxEntriesLimit {
			writeError(w, &wire.Error{Code: wire.CodeInvalidQuery, Field: "limit", Message: fmt.Sprintf("limit %q: use 1 to %d", l, MaxEntriesLimit)})
			return
		}
		limit = v
	}
	head := s.ledger.Head().Size
	lo := min(from, head)
	hi := lo + min(limit, head-lo)
	h := w.Header()
	h.Set("Content-Type", EntriesContentType)
	h.Set("Greffe-Head", strconv.FormatUint(head, 10))
	h.Set("Greffe-From", strconv.FormatUint(lo, 10))
	h.Set("Greffe-Entries", strconv.FormatUint(hi-lo, 10))
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	buf := make([]byte, 0, 1<<20)
	scan, _ := s.ledger.(rawScanner)
	for pos := lo; pos < hi; {
		end := min(pos+entriesChunk, hi)
		buf = buf[:0]
		next := pos // the position after the last event copied
		add := func(p uint64, b []byte) error {
			if len(buf) > 0 && len(buf)+2+len(b) > entriesChunkBytes {
				return errChunkFull // the rest of the chunk is the next one's
			}
			buf = binary.BigEndian.AppendUint16(buf, uint16(len(b)))
			buf = append(buf, b...)
			next = p + 1
			return nil
		}
		var err error
		if scan != nil {
			if err = scan.ScanRaw(r.Context(), pos, end, add); errors.Is(err, errChunkFull) {
				err, end = nil, next
			}
		} else {
			var raws [][]byte
			raws, err = s.ledger.ReadRaw(r.Context(), pos, end)
			for i, b := range raws {
				if add(pos+uint64(i), b) != nil {
					break
				}
			}
			end = next
		}
		if err != nil {
			// The status is sent: cut the body short, which the reader
			// sees as fewer entries than announced.
			s.cfg.Logger.Warn("stored-bytes read failed", "from", pos, "err", err)
			return
		}
		if _, err := bw.Write(buf); err != nil {
			return // the reader went away
		}
		pos = end
	}
	_ = bw.Flush()
}

// The frame's uint16 length holds any event: this does not compile if an
// event may grow past it.
const _ = uint16(events.MaxEncodedSize)
