package offline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/audit/internal/verify"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/events/pebblelog/layout"
)

// slackSlots is how far beyond the recorded head (or the largest
// checkpoint) stored events are still replayed: enough to show events
// written behind the state's back, bounded so that a tampered key such as
// position 2^60 cannot make the auditor allocate for it.
const slackSlots = 1 << 16

// eventWindow is how many positions one iterator of the event scan covers
// (see inspect.Inspector.ScanEvents): 64 Ki events, about 22 MiB.
const eventWindow = 1 << 16

// VerifyDir verifies the store of a stopped node offline: dir is the
// Pebble folder (<data>/ledger). It opens it read-only (failing with
// inspect.ErrLocked while a node holds it) and re-derives everything from
// the stored event bytes, scanning each key space once in key order.
//
// A returned error means the verification could not run (exit code 2); the
// ledger's faults are in the report (exit code 1 when any). Damaged storage
// (a file of the store that does not read back, inspect.DamageError) is a
// fault, audit.KindStorageCorrupt, one per damaged file: the verification stops
// where it showed, and the report holds what was verified until then.
func VerifyDir(ctx context.Context, dir string, cfg audit.Config) (*audit.Report, error) {
	run := verify.New(cfg, dir)
	cfg = run.Config()
	rep := run.Report()
	// stop ends the verification on err: a report when err is damage,
	// else err (could not run).
	stop := func(err error) (*audit.Report, error) {
		var de *inspect.DamageError
		if !errors.As(err, &de) {
			return nil, err
		}
		if err := storageFaults(ctx, dir, de, run); err != nil {
			return nil, err
		}
		return run.Finish(), nil
	}
	in, err := inspect.Open(inspect.Config{Dir: dir})
	if err != nil {
		return stop(err)
	}
	defer in.Close()

	meta := in.Meta()
	switch {
	case meta.FormatErr != nil:
		run.Fault(audit.Fault{Kind: audit.KindStoreIdentity, Position: audit.NoPosition, Detail: fmt.Sprintf("format record: %v", meta.FormatErr)})
	case !layout.Known(meta.Format):
		return nil, fmt.Errorf("%w: store format %q, this binary verifies %q", audit.ErrConfig, meta.Format, layout.StoreFormat)
	}
	origin := events.Origin(meta.LedgerID)
	if meta.LedgerErr != nil {
		run.Fault(audit.Fault{Kind: audit.KindStoreIdentity, Position: audit.NoPosition, Detail: fmt.Sprintf("ledger id record: %v", meta.LedgerErr)})
		if len(cfg.Verifiers) > 0 {
			origin = cfg.Verifiers[0].Name()
		}
	}
	rep.LedgerID, rep.Origin = meta.LedgerID, origin
	if err := audit.CheckVerifiers(cfg.Verifiers, origin); err != nil {
		return nil, err
	}
	if meta.StateErr != nil {
		run.Fault(audit.Fault{Kind: audit.KindStateMismatch, Position: audit.NoPosition, Detail: fmt.Sprintf("state record: %v", meta.StateErr)})
	}
	state := meta.State

	var cps []verify.StoredCheckpoint
	var maxCheckpoint uint64
	err = in.Scan(ctx, layout.SpaceCheckpoints, func(e inspect.Entry) error {
		size, ok := layout.ParseCheckpointKey(e.Key)
		if !ok {
			run.Fault(audit.Fault{Kind: audit.KindMalformedKey, Position: audit.NoPosition, Detail: fmt.Sprintf("checkpoint key %x", e.Key)})
			return nil
		}
		cps = append(cps, verify.StoredCheckpoint{Size: size, Note: bytes.Clone(e.Value)})
		maxCheckpoint = max(maxCheckpoint, size)
		return nil
	})
	if err != nil {
		return stop(err)
	}
	if len(cps) > 0 && len(cfg.Verifiers) == 0 {
		return nil, fmt.Errorf("%w: the store holds %d checkpoints and no verifier key is configured", audit.ErrConfig, len(cps))
	}

	// The index scans do not depend on the events: they run while the
	// events are replayed, and are compared with them afterwards.
	ig, ictx := errgroup.WithContext(ctx)
	var se verify.StreamEntries
	var ids []verify.IDEntry
	ig.Go(func() error {
		se.Grow(state.Size)
		return in.Scan(ictx, layout.SpaceStreams, func(e inspect.Entry) error {
			stream, version, ok := layout.ParseStreamKey(e.Key)
			pos, n, okv := layout.ParseStreamRun(e.Value)
			if !ok || !okv {
				run.Fault(audit.Fault{Kind: audit.KindMalformedKey, Position: blameValue(pos, okv), Detail: fmt.Sprintf("stream index entry %x -> %x", e.Key, e.Value)})
				return nil
			}
			// A run maps versions [version, version+n) to positions
			// [pos, pos+n): checked as n entries, as the store reads it.
			for i := range n {
				se.Add(stream, version+i, pos+i)
			}
			return nil
		})
	})
	ig.Go(func() error {
		ids = make([]verify.IDEntry, 0, state.Size)
		return in.Scan(ictx, layout.SpaceIDs, func(e inspect.Entry) error {
			id, ok := layout.ParseIDKey(e.Key)
			pos, okv := layout.ParsePosition(e.Value)
			if !ok || !okv {
				run.Fault(audit.Fault{Kind: audit.KindMalformedKey, Position: blameValue(pos, okv), Detail: fmt.Sprintf("event-id index entry %x -> %x", e.Key, e.Value)})
				return nil
			}
			ids = append(ids, verify.IDEntry{ID: id, Pos: pos})
			return nil
		})
	})

	// Replay the events.
	var lastKey int64 = -1
	head := state.Size
	if meta.StateErr != nil {
		head = maxCheckpoint // the best evidence of the head left
	}
	rc := verify.ReplayConfig{Workers: cfg.Workers, SizeHint: head, Head: head, MaxSlots: max(head, maxCheckpoint) + slackSlots}
	if cfg.Progress != nil {
		rc.Progress = func(done uint64) { cfg.Progress(done, state.Size) }
	}
	r, err := run.Replay(ctx, rc, func(ctx context.Context, f *verify.Feeder) error {
		err := in.ScanEvents(ctx, eventWindow, func(e inspect.Entry) error {
			pos, ok := layout.ParseEventKey(e.Key)
			if !ok {
				run.Fault(audit.Fault{Kind: audit.KindMalformedKey, Position: audit.NoPosition, Detail: fmt.Sprintf("event key %x", e.Key)})
				return nil
			}
			lastKey = int64(pos)
			rep.Events++
			return f.Event(pos, e.Value)
		})
		if err != nil {
			return err
		}
		return f.MissingTail(state.Size, fmt.Sprintf("the state records %d events (the log was truncated)", state.Size))
	})
	if ierr := ig.Wait(); err == nil {
		err = ierr
	}
	if err != nil {
		return stop(err)
	}
	if stored := uint64(lastKey + 1); meta.StateErr == nil && stored > state.Size {
		run.Fault(audit.Fault{Kind: audit.KindEventBeyondHead, Position: int64(state.Size), End: int64(stored),
			Detail: fmt.Sprintf("events stored up to position %d, beyond the recorded head of %d events", lastKey, state.Size)})
	}
	if r.Dropped() > 0 {
		run.Fault(audit.Fault{Kind: audit.KindEventBeyondHead, Position: int64(r.Size()),
			Detail: fmt.Sprintf("%d events stored far beyond the recorded head of %d events were not replayed", r.Dropped(), state.Size)})
	}
	// n is the size of the log the stored tree should describe.
	n := r.Size()
	if meta.StateErr == nil {
		n = min(n, state.Size)
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { run.CheckStreamIndex(r, &se); return nil })
	g.Go(func() error { run.CheckIDIndex(r, ids); return nil })
	g.Go(func() error { return checkStoredTree(gctx, in, r, n, run) })
	rep.Events, rep.Streams, rep.Signatures = r.Size(), r.Streams(), r.Signatures()
	if err := g.Wait(); err != nil {
		return stop(err)
	}
	// The scans read the newest version of every key; a table that holds
	// only versions a newer table shadows is never read by them, and a
	// compaction would fail on it later. Every table is read against its
	// checksums too (tables hold keys and small values: the blob files
	// the replay read in full hold the events). TestVerifyDir_DamagedStorage
	// once met such a table, flushed under load, reported as verified.
	damaged, err := inspect.CheckTables(ctx, nil, dir)
	if err != nil {
		return nil, err
	}
	for _, d := range damaged {
		run.Fault(storageFault(dir, d))
	}

	if meta.StateErr == nil && state.Size <= r.Size() {
		if lo, hi, differs := r.CompareRange(state.Size, state.Range); differs {
			run.Fault(audit.Fault{Kind: audit.KindStateMismatch, Position: int64(lo), End: int64(hi), Approximate: true,
				Detail: fmt.Sprintf("the recorded head's compact range differs from the recomputed one over positions [%d, %d)", lo, hi)})
		}
		if state.Size == r.Size() && state.LastRecorded != r.LastRecorded() {
			run.Fault(audit.Fault{Kind: audit.KindStateMismatch, Position: int64(max(state.Size, 1) - 1),
				Detail: fmt.Sprintf("the recorded head says the last event was recorded at %d ns, the events say %d ns", state.LastRecorded, r.LastRecorded())})
		}
	}
	nc, latest, err := run.CheckCheckpoints(ctx, r, cps, origin, cfg.Verifiers)
	if err != nil {
		return nil, err
	}
	rep.Checkpoints = nc
	rep.Size = n
	root := r.Root(n)
	rep.Root = root[:]
	if cfg.StateFile != "" {
		out, err := run.CheckState(ctx, r, latest, origin, r)
		if err != nil {
			return nil, err
		}
		rep.State = out
	}
	return run.Finish(), nil
}

// storageFaults reports damaged storage: the damage that showed, where it
// showed, and every other damaged file inspect.CheckFiles finds (it names
// the file when Pebble did not).
func storageFaults(ctx context.Context, dir string, shown *inspect.DamageError, run *verify.Run) error {
	found, err := inspect.CheckFiles(ctx, nil, dir)
	if err != nil && ctx.Err() != nil {
		return err
	}
	// A folder the checks cannot read through (an I/O error) still has
	// the damage that showed: it is reported alone.
	// Without a file named, the damage is pinned on the one file the
	// checks find, if they find one.
	if shown.File == dir && len(found) == 1 {
		named := *shown
		named.File, named.Offset = found[0].File, found[0].Offset
		named.Err = fmt.Errorf("%w (%v)", shown.Err, found[0].Err)
		shown, found = &named, nil
	}
	run.Fault(storageFault(dir, shown))
	for _, d := range found {
		if d.File != shown.File {
			run.Fault(storageFault(dir, d))
		}
	}
	return nil
}

// storageFault is the fault of one damaged file.
func storageFault(dir string, d *inspect.DamageError) audit.Fault {
	f := audit.Fault{Kind: audit.KindStorageCorrupt, Position: audit.NoPosition, File: relPath(dir, d.File)}
	if d.Offset >= 0 {
		f.Offset = &d.Offset
	}
	var where string
	if d.Space != 0 {
		f.KeySpace = d.Space.String()
		where = fmt.Sprintf("the %s key space does not read back", d.Space)
		switch pos, ok := layout.ParseEventKey(d.Key); {
		case d.Space == layout.SpaceEvents && ok:
			f.Position = int64(pos)
		case d.Space == layout.SpaceEvents && d.After == nil:
			f.Position = 0
		case d.Space == layout.SpaceEvents:
			if pos, ok := layout.ParseEventKey(d.After); ok {
				f.Position = int64(pos + 1)
			}
		}
		switch {
		case d.Key != nil:
			where += fmt.Sprintf(" at key %x", d.Key)
		case d.After != nil:
			where += fmt.Sprintf(" after key %x", d.After)
		}
		if f.Position != audit.NoPosition {
			where += fmt.Sprintf(" (the events from position %d on are not verified)", f.Position)
		}
		where += ": "
	}
	f.Detail = where + d.Err.Error()
	return f
}

// relPath is path relative to dir when it is inside it.
func relPath(dir, path string) string {
	if rel, err := filepath.Rel(dir, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

func blameValue(pos uint64, ok bool) int64 {
	if ok {
		return verify.BlamePosition(pos)
	}
	return audit.NoPosition
}

// checkStoredTree compares the stored leaf tiles and tile-base nodes with
// the recomputed tree of n positions.
func checkStoredTree(ctx context.Context, in *inspect.Inspector, r *verify.Replayed, n uint64, run *verify.Run) error {
	tileW := uint64(layout.TileWidth)
	want := uint64(0) // next expected tile index
	err := in.Scan(ctx, layout.SpaceLeafTiles, func(e inspect.Entry) error {
		idx, ok := layout.ParseLeafTileKey(e.Key)
		if !ok {
			run.Fault(audit.Fault{Kind: audit.KindMalformedKey, Position: audit.NoPosition, Detail: fmt.Sprintf("leaf tile key %x", e.Key)})
			return nil
		}
		first := idx * tileW
		if (idx+1)*tileW > n {
			run.Fault(audit.Fault{Kind: audit.KindUnexpectedEntry, Position: int64(first), End: int64(first + tileW),
				Detail: fmt.Sprintf("leaf tile %d is stored, but the log holds %d events", idx, n)})
			return nil
		}
		for ; want < idx; want++ {
			run.Fault(audit.Fault{Kind: audit.KindLeafTileMissing, Position: int64(want * tileW), End: int64((want + 1) * tileW),
				Detail: fmt.Sprintf("leaf tile %d is not stored", want)})
		}
		want = idx + 1
		if len(e.Value) != int(tileW)*32 {
			run.Fault(audit.Fault{Kind: audit.KindLeafHashMismatch, Position: int64(first), End: int64(first + tileW),
				Detail: fmt.Sprintf("leaf tile %d holds %d bytes, not %d", idx, len(e.Value), tileW*32)})
			return nil
		}
		ours := r.LeafHashes(first, first+tileW)
		if bytes.Equal(ours, e.Value) {
			return nil
		}
		for i := uint64(0); i < tileW; i++ {
			p := first + i
			if r.Missing(p) {
				continue // reported as missing
			}
			if !bytes.Equal(ours[i*32:i*32+32], e.Value[i*32:i*32+32]) {
				run.Fault(audit.Fault{Kind: audit.KindLeafHashMismatch, Position: int64(p),
					Detail: fmt.Sprintf("the leaf hash of the stored bytes is %x…, leaf tile %d records %x…", ours[i*32:i*32+6], idx, e.Value[i*32:i*32+6])})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for ; want < n/tileW; want++ {
		run.Fault(audit.Fault{Kind: audit.KindLeafTileMissing, Position: int64(want * tileW), End: int64((want + 1) * tileW),
			Detail: fmt.Sprintf("leaf tile %d is not stored", want)})
	}

	// Nodes at levels 8, 16, …, in key order: by level, then index.
	var level uint
	var next uint64
	endLevel := func() {
		if level == 0 {
			return
		}
		for ; next < n>>level; next++ {
			run.Fault(audit.Fault{Kind: audit.KindNodeMissing, Position: int64(next << level), End: int64((next + 1) << level),
				Detail: fmt.Sprintf("node %d/%d is not stored", level, next)})
		}
	}
	err = in.Scan(ctx, layout.SpaceNodes, func(e inspect.Entry) error {
		l, idx, ok := layout.ParseNodeKey(e.Key)
		if !ok || l == 0 || l%layout.TileHeight != 0 || l >= 64 {
			run.Fault(audit.Fault{Kind: audit.KindMalformedKey, Position: audit.NoPosition, Detail: fmt.Sprintf("node key %x", e.Key)})
			return nil
		}
		if l != level {
			endLevel()
			level, next = l, 0
		}
		lo, hi := idx<<l, (idx+1)<<l
		if hi > n || hi>>l != idx+1 {
			run.Fault(audit.Fault{Kind: audit.KindUnexpectedEntry, Position: int64(min(lo, n)),
				Detail: fmt.Sprintf("node %d/%d is stored, but the log holds %d events", l, idx, n)})
			return nil
		}
		for ; next < idx; next++ {
			run.Fault(audit.Fault{Kind: audit.KindNodeMissing, Position: int64(next << l), End: int64((next + 1) << l),
				Detail: fmt.Sprintf("node %d/%d is not stored", l, next)})
		}
		next = idx + 1
		if !bytes.Equal(r.Node(l, idx), e.Value) {
			run.Fault(audit.Fault{Kind: audit.KindNodeHashMismatch, Position: int64(lo), End: int64(hi), Approximate: true,
				Detail: fmt.Sprintf("stored node %d/%d differs from the node recomputed from the events of positions [%d, %d)", l, idx, lo, hi)})
		}
		return nil
	})
	if err != nil {
		return err
	}
	endLevel()
	// Levels with no stored node at all.
	for l := level + layout.TileHeight; l < 64 && n>>l > 0; l += layout.TileHeight {
		level, next = l, 0
		endLevel()
	}
	return nil
}
