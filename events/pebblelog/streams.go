package pebblelog

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/layout"
)

// ListStreams returns, in name order, the streams whose name starts with
// prefix and sorts after after ("" for the first page), at most limit of
// them (at most events.MaxListStreams; 0 or less: events.DefaultListStreams),
// each with its last acknowledged version and position. A stream whose
// events are all above the acknowledged head is not listed yet. The
// returned slice belongs to the caller; safe for concurrent use.
//
// It walks the stream index (layout): one seek to a stream's last run and
// one to the next stream's first key, so a page costs 2·limit seeks
// whatever the streams hold.
func (s *Store) ListStreams(ctx context.Context, prefix, after string, limit int) (_ []events.StreamInfo, err error) {
	defer s.noteDamage(&err)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = events.DefaultListStreams
	}
	limit = min(limit, events.MaxListStreams)
	size := s.Head().Size
	lower := append([]byte{byte(layout.SpaceStreams)}, prefix...)
	upper := prefixSuccessor(lower)
	if after != "" {
		if _, afterHi := layout.StreamBounds(after); string(afterHi) > string(lower) {
			lower = afterHi
		}
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []events.StreamInfo
	for ok := it.First(); ok && len(out) < limit; {
		k := it.Key()
		if len(k) < 1+1+9 || k[len(k)-9] != 0 {
			return nil, fmt.Errorf("stream index key %x: %w", k, events.ErrCorrupt)
		}
		name := string(k[1 : len(k)-9])
		lo, hi := layout.StreamBounds(name)
		// The stream's last acknowledged event: its last run below the
		// head (a run is written by one batch, so acknowledged whole, but
		// the head may cut the newest ones off).
		found := false
		var info events.StreamInfo
		for ok = it.SeekLT(hi); ok && bytes.HasPrefix(it.Key(), lo); ok = it.Prev() {
			pos, n, valid := layout.ParseStreamRun(it.Value())
			if !valid || len(it.Key()) != len(lo)+8 {
				return nil, fmt.Errorf("stream index of %q: entry %x -> %x: %w", name, it.Key(), it.Value(), events.ErrCorrupt)
			}
			if pos >= size {
				continue
			}
			n = min(n, size-pos)
			first := binary.BigEndian.Uint64(it.Key()[len(lo):])
			info, found = events.StreamInfo{Name: name, Version: first + n - 1, Position: pos + n - 1}, true
			break
		}
		if found {
			out = append(out, info)
		}
		ok = it.SeekGE(hi)
	}
	if err := it.Error(); err != nil {
		return nil, err
	}
	return out, nil
}

// prefixSuccessor returns the smallest key above every key starting with
// p (p is never all 0xff: it starts with a key-space byte).
func prefixSuccessor(p []byte) []byte {
	out := append([]byte(nil), p...)
	for i := len(out) - 1; i >= 0; i-- {
		if out[i] < 0xff {
			out[i]++
			return out[:i+1]
		}
	}
	return nil
}
