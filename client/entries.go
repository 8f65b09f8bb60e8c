package client

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/greffe/greffe/events"
)

// EntriesContentType is the media type of the node's stored-bytes read
// (GET /v1/all?format=entries, api/entries.go, docs/API.md).
const EntriesContentType = "application/x-greffe-entries"

// ReadEntries reads the global log from position from, at most limit events
// (0: as many as the node streams in one answer, up to a million), as the
// node stores them, and calls fn for each in order. raw is the event's
// canonical encoding, exactly the bytes its leaf hash covers
// (events.LeafHash(raw)); e is raw decoded, without its LeafHash. Both are
// valid only during fn: the reader reuses the buffer. It returns the
// position after the last event read: the from of the next call, which is
// the head when the answer was made once it returns fewer than limit.
//
// It is the fast way to read the log in order: no JSON on either side
// (docs/PERFORMANCE.md). An answer cut short is an error naming how many
// events it held of how many announced.
func (c *Client) ReadEntries(ctx context.Context, from uint64, limit int, fn func(raw []byte, e events.Event) error) (next uint64, err error) {
	path := "/v1/all?format=entries&from=" + strconv.FormatUint(from, 10)
	if limit > 0 {
		path += "&limit=" + strconv.Itoa(limit)
	}
	resp, err := c.raw(ctx, "GET", path, nil)
	if err != nil {
		return from, err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != EntriesContentType {
		return from, fmt.Errorf("GET %s: answered %q, not %s (a node before this format?)", path, ct, EntriesContentType)
	}
	first, err1 := strconv.ParseUint(resp.Header.Get("Greffe-From"), 10, 64)
	n, err2 := strconv.ParseUint(resp.Header.Get("Greffe-Entries"), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return from, fmt.Errorf("GET %s: bad Greffe-From or Greffe-Entries header: %w", path, err)
	}
	br := bufio.NewReaderSize(resp.Body, 256<<10)
	buf := make([]byte, events.MaxEncodedSize)
	var lenb [2]byte
	next = first
	for i := uint64(0); i < n; i++ {
		if _, err := io.ReadFull(br, lenb[:]); err != nil {
			return next, fmt.Errorf("GET %s: the answer ends after %d of %d events: %w", path, i, n, err)
		}
		raw := buf[:binary.BigEndian.Uint16(lenb[:])]
		if _, err := io.ReadFull(br, raw); err != nil {
			return next, fmt.Errorf("GET %s: the answer ends inside event %d of %d: %w", path, i, n, err)
		}
		e, err := events.DecodeShared(raw)
		if err != nil {
			return next, fmt.Errorf("GET %s: event %d of the answer: %w", path, i, err)
		}
		if e.Position != next {
			return next, fmt.Errorf("GET %s: event %d of the answer is at position %d, want %d: %w", path, i, e.Position, next, events.ErrCorrupt)
		}
		if err := fn(raw, e); err != nil {
			return next, err
		}
		next++
	}
	return next, nil
}
