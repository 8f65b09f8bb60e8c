package online

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/google/uuid"
	"github.com/transparency-dev/tessera/api/layout"
	"golang.org/x/sync/errgroup"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/audit/internal/verify"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// VerifyServer verifies a running node through what it serves to anyone:
// the signed checkpoint, the C2SP entry bundles and hash tiles under
// /tlog/, the proof API, and the read API for the indexes. It trusts
// nothing the node says about itself beyond the verifier keys (and those
// only when cfg.Verifiers is empty): every entry is hashed, the tree is
// rebuilt and compared with the served tiles, the checkpoint's signature
// and root are checked, a sample of served proofs must reach the signed
// root, and a sample of events is looked up by id and by stream.
//
// The verification covers the log up to the node's latest checkpoint. A
// returned error means it could not run (exit code 2). The client's idle
// connections are closed on return.
func VerifyServer(ctx context.Context, c *client.Client, cfg audit.Config) (*audit.Report, error) {
	run := verify.New(cfg, c.Base)
	cfg = run.Config()
	// Concurrent requests make the transport dial connections that may end
	// up never used; a server waits 5 s for such connections on a graceful
	// shutdown. Close them when done.
	if c.HTTP != nil {
		defer c.HTTP.CloseIdleConnections()
	}
	rep := run.Report()
	info, err := c.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("info: %w", err)
	}
	origin := info.Origin
	rep.LedgerID, rep.Origin = info.LedgerID, origin
	if origin != events.Origin(info.LedgerID) {
		run.Fault(audit.Fault{Kind: audit.KindStoreIdentity, Position: audit.NoPosition, Detail: fmt.Sprintf("the node serves origin %q for ledger %q", origin, info.LedgerID)})
	}
	vs := cfg.Verifiers
	if len(vs) == 0 {
		if vs, err = audit.ParseVerifiers(info.VerifierKeys); err != nil {
			return nil, err
		}
		if len(vs) == 0 {
			return nil, fmt.Errorf("%w: the node publishes no verifier key; pass --verifier", audit.ErrConfig)
		}
	}
	if err := audit.CheckVerifiers(vs, origin); err != nil {
		return nil, err
	}
	witnesses := audit.CheckpointPolicy{Origin: origin, Verifiers: vs, Witnesses: cfg.Witnesses, Quorum: cfg.WitnessQuorum}
	if err := witnesses.Validate(); err != nil {
		return nil, err
	}
	raw, err := c.Get(ctx, checkpointPath(cfg.WitnessQuorum))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	oc := audit.OpenCheckpoint(raw, origin, vs)
	size := info.Head.Size
	if oc.Parsed {
		size = oc.Size
	}
	if size > maxOnlineEvents {
		return nil, fmt.Errorf("%w: the node claims a log of %d events, more than an online verification fetches (%d); verify its data offline", audit.ErrConfig, size, uint64(maxOnlineEvents))
	}

	o := &online{c: c, cfg: cfg, run: run, size: size}
	rc := verify.ReplayConfig{Workers: cfg.Workers, SizeHint: size, Head: size, MaxSlots: size}
	if cfg.Progress != nil {
		rc.Progress = func(done uint64) { cfg.Progress(done, size) }
	}
	r, err := run.Replay(ctx, rc, o.feed)
	if err != nil {
		return nil, err
	}
	o.r = r
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return o.checkTiles(gctx) })
	g.Go(func() error { return o.checkProofs(gctx, oc) })
	g.Go(func() error { return o.checkIndexes(gctx) })
	if err := g.Wait(); err != nil {
		return nil, err
	}
	cps := []verify.StoredCheckpoint{{Size: oc.Size, Note: raw}}
	if !oc.Parsed {
		cps[0].Size = size
	}
	nc, latest, err := run.CheckCheckpoints(ctx, r, cps, origin, vs)
	if err != nil {
		return nil, err
	}
	if oc.Parsed {
		run.CheckWitnessed(witnesses, raw, oc.Size, r)
	}
	if root := r.Root(size); info.Head.Size == size && info.Head.Root != base64.StdEncoding.EncodeToString(root[:]) {
		run.Fault(audit.Fault{Kind: audit.KindStateMismatch, Position: 0, End: int64(max(size, 1)), Approximate: true,
			Detail: fmt.Sprintf("the node's head root %s differs from the root recomputed from its entries", info.Head.Root)})
	}
	rep.Checkpoints = nc
	rep.Events, rep.Streams, rep.Signatures = r.Size(), r.Streams(), r.Signatures()
	rep.Size = size
	root := r.Root(size)
	rep.Root = root[:]
	if cfg.StateFile != "" {
		out, err := run.CheckState(ctx, r, latest, origin, serverProofs{c})
		if err != nil {
			return nil, err
		}
		rep.State = out
	}
	return run.Finish(), nil
}

// checkpointPath is where a verification reads the node's checkpoint: the
// C2SP tlog-tiles path, asking for the newest checkpoint that quorum of
// the node's witnesses cosigned when one is required (GET /v1/checkpoint
// takes the same parameter).
func checkpointPath(quorum int) string {
	if quorum > 0 {
		return "/tlog/checkpoint?witness_quorum=" + strconv.Itoa(quorum)
	}
	return "/tlog/checkpoint"
}

// maxOnlineEvents bounds the log an online verification fetches (and
// holds in memory, about 150 bytes per event): a node claiming more is
// verified offline, from its data.
const maxOnlineEvents = 1 << 32

// online holds one server verification.
type online struct {
	c    *client.Client
	cfg  audit.Config
	run  *verify.Run
	size uint64
	r    *verify.Replayed
}

// answered reports whether err is the node's answer (an HTTP status) rather
// than a failure to reach it: an answer is evidence about the node.
func answered(err error) (*wire.Error, bool) {
	var ae *wire.Error
	return ae, errors.As(err, &ae)
}

// feed fetches the entry bundles of [0, size), Concurrency at a time, and
// feeds their entries in order.
func (o *online) feed(ctx context.Context, f *verify.Feeder) error {
	bundles := (o.size + layout.EntryBundleWidth - 1) / layout.EntryBundleWidth
	window := uint64(o.cfg.Concurrency)
	for lo := uint64(0); lo < bundles; lo += window {
		hi := min(bundles, lo+window)
		got := make([][]byte, hi-lo)
		errs := make([]error, hi-lo)
		g, gctx := errgroup.WithContext(ctx)
		for i := lo; i < hi; i++ {
			g.Go(func() error {
				p := layout.PartialTileSize(0, i, o.size)
				b, err := o.c.Get(gctx, "/tlog/"+layout.EntriesPath(i, p))
				if _, ok := answered(err); err != nil && !ok {
					return fmt.Errorf("entry bundle %d: %w", i, err)
				}
				got[i-lo], errs[i-lo] = b, err
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		for i := lo; i < hi; i++ {
			first := i * layout.EntryBundleWidth
			end := min(o.size, first+layout.EntryBundleWidth)
			if err := errs[i-lo]; err != nil {
				if ae, _ := answered(err); ae.Code == wire.CodeCorrupt {
					o.run.Fault(audit.Fault{Kind: audit.KindServerCorrupt, Position: int64(first), End: int64(end),
						Detail: fmt.Sprintf("the node answers that entry bundle %d is corrupt: %v", i, err)})
					if err := f.Placeholders(end); err != nil {
						return err
					}
					continue
				}
				if err := f.MissingTail(end, fmt.Sprintf("the node did not serve entry bundle %d: %v", i, err)); err != nil {
					return err
				}
				continue
			}
			entries, rest := audit.ParseEntryBundle(got[i-lo], int(end-first))
			for k, e := range entries {
				if err := f.Event(first+uint64(k), e); err != nil {
					return err
				}
			}
			if uint64(len(entries)) < end-first || rest > 0 {
				why := fmt.Sprintf("entry bundle %d holds %d entries, %d expected, and %d bytes that are not entries", i, len(entries), end-first, rest)
				if err := f.MissingTail(end, why); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkTiles fetches every hash tile of the checkpoint's tree and compares
// it with the rebuilt tree.
func (o *online) checkTiles(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(o.cfg.Concurrency)
	r := o.r
	for level := uint64(0); o.size>>(8*level) > 0; level++ {
		count := o.size >> (8 * level) // nodes at the tile's base level
		for idx := uint64(0); idx*layout.TileWidth < count; idx++ {
			g.Go(func() error {
				p := layout.PartialTileSize(level, idx, o.size)
				path := "/tlog/" + layout.TilePath(level, idx, p)
				b, err := o.c.Get(ctx, path)
				base := uint(8 * level)
				first := idx * layout.TileWidth
				width := min(layout.TileWidth, count-first)
				lo, hi := first<<base, (first+width)<<base
				if err != nil {
					if _, ok := answered(err); !ok {
						return fmt.Errorf("%s: %w", path, err)
					}
					kind := audit.KindLeafTileMissing
					if level > 0 {
						kind = audit.KindNodeMissing
					}
					o.run.Fault(audit.Fault{Kind: kind, Position: int64(lo), End: int64(hi), Detail: fmt.Sprintf("the node did not serve %s: %v", path, err)})
					return nil
				}
				if uint64(len(b)) != 32*width {
					o.run.Fault(audit.Fault{Kind: audit.KindNodeHashMismatch, Position: int64(lo), End: int64(hi), Approximate: true, Detail: fmt.Sprintf("%s holds %d bytes, %d expected", path, len(b), 32*width)})
					return nil
				}
				for j := uint64(0); j < width; j++ {
					ours := r.Node(base, first+j)
					if bytes.Equal(ours, b[32*j:32*j+32]) {
						continue
					}
					if level == 0 {
						if r.Missing(first + j) {
							continue
						}
						o.run.Fault(audit.Fault{Kind: audit.KindLeafHashMismatch, Position: int64(first + j),
							Detail: fmt.Sprintf("the leaf hash of the served entry is %x…, %s serves %x…", ours[:6], path, b[32*j:32*j+6])})
						continue
					}
					n := first + j
					o.run.Fault(audit.Fault{Kind: audit.KindNodeHashMismatch, Position: int64(n << base), End: int64((n + 1) << base), Approximate: true,
						Detail: fmt.Sprintf("node %d/%d served in %s differs from the node rebuilt from the entries", base, n, path)})
				}
				return nil
			})
		}
	}
	return g.Wait()
}

// spread returns up to n distinct values in [0, size), the first and last
// included, evenly spaced; n < 0 means all of them.
func spread(size uint64, n int) []uint64 {
	if size == 0 || n == 0 {
		return nil
	}
	if n < 0 || uint64(n) >= size {
		out := make([]uint64, size)
		for i := range out {
			out[i] = uint64(i)
		}
		return out
	}
	if n == 1 {
		return []uint64{size - 1}
	}
	out := make([]uint64, 0, n)
	for i := 0; i < n; i++ {
		v := uint64(i) * (size - 1) / uint64(n-1)
		if len(out) == 0 || out[len(out)-1] != v {
			out = append(out, v)
		}
	}
	return out
}

// checkProofs fetches a sample of inclusion and consistency proofs at the
// checkpoint's size and checks them against the rebuilt tree and the
// signed root.
func (o *online) checkProofs(ctx context.Context, oc audit.OpenedCheckpoint) error {
	if o.cfg.ProofSample < 0 || o.size == 0 {
		return nil
	}
	root := o.r.Root(o.size)
	if oc.Parsed && oc.Size == o.size {
		root = oc.Root
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(o.cfg.Concurrency)
	for _, p := range spread(o.size, o.cfg.ProofSample) {
		g.Go(func() error {
			var out wire.InclusionOut
			err := o.c.Do(ctx, http.MethodGet, fmt.Sprintf("/v1/proof/inclusion?position=%d&size=%d", p, o.size), nil, &out)
			if err != nil {
				if _, ok := answered(err); !ok {
					return err
				}
				o.run.Fault(audit.Fault{Kind: audit.KindProofInvalid, Position: int64(p), Detail: fmt.Sprintf("no inclusion proof of position %d at size %d: %v", p, o.size, err)})
				return nil
			}
			// The proof must take the node's own leaf hash to the signed
			// root: a failure is the proof API's. (Entries that differ from
			// the tiles are the tile check's business.)
			if verr := audit.VerifyInclusionProof(p, o.size, out.LeafHash, out.Hashes, root[:]); verr != nil {
				o.run.Fault(audit.Fault{Kind: audit.KindProofInvalid, Position: int64(p), Detail: fmt.Sprintf("GET /v1/proof/inclusion: %v", verr)})
			}
			return nil
		})
	}
	froms := append([]uint64{0}, spread(o.size, o.cfg.ProofSample)...)
	for _, from := range froms {
		g.Go(func() error {
			var out wire.ConsistencyOut
			err := o.c.Do(ctx, http.MethodGet, fmt.Sprintf("/v1/proof/consistency?from=%d&to=%d", from, o.size), nil, &out)
			if err != nil {
				if _, ok := answered(err); !ok {
					return err
				}
				o.run.Fault(audit.Fault{Kind: audit.KindProofInvalid, Position: int64(from), Detail: fmt.Sprintf("no consistency proof from %d to %d: %v", from, o.size, err)})
				return nil
			}
			// The proof must take the node's own root of size from to the
			// signed root; whether that root is the entries' is the
			// checkpoint check's business.
			if verr := audit.VerifyConsistencyProof(from, o.size, out.Hashes, out.RootFrom, root[:]); verr != nil {
				o.run.Fault(audit.Fault{Kind: audit.KindProofInvalid, Position: int64(from), Detail: fmt.Sprintf("GET /v1/proof/consistency: %v", verr)})
			}
			return nil
		})
	}
	return g.Wait()
}

// checkIndexes looks a sample of events up through the read API: by id
// (the event-id index) and by stream and version (the stream index), and
// reads the last event of each sampled stream.
func (o *online) checkIndexes(ctx context.Context) error {
	r := o.r
	sample := spread(r.Size(), o.cfg.IndexSample)
	want := make(map[uint64]bool, len(sample))
	streams := map[uint32]bool{}
	for _, p := range sample {
		if r.Decoded(p) {
			want[p] = true
			streams[r.Stream(p)] = true
		}
	}
	// The last event of each sampled stream, in position order.
	last := make(map[uint32]uint64, len(streams))
	for p := range r.Size() {
		if s := r.Stream(p); streams[s] {
			last[s] = p
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(o.cfg.Concurrency)
	for _, p := range sample {
		if !want[p] {
			continue
		}
		g.Go(func() error {
			id := uuid.UUID(r.ID(p))
			var e events.Event
			err := o.c.Do(ctx, http.MethodGet, "/v1/events/"+id.String(), nil, &e)
			switch ae, ok := answered(err); {
			case err != nil && !ok:
				return err
			case err != nil && ae.Status == http.StatusNotFound:
				o.run.Fault(audit.Fault{Kind: audit.KindIDIndexMissing, Position: int64(p), Detail: fmt.Sprintf("GET /v1/events/%s: %v", id, err)})
			case err != nil:
				o.run.Fault(audit.Fault{Kind: audit.KindServerCorrupt, Position: int64(p), Detail: fmt.Sprintf("GET /v1/events/%s: %v", id, err)})
			case e.Position != p || !bytes.Equal(e.LeafHash[:], r.Node(0, p)):
				o.run.Fault(audit.Fault{Kind: audit.KindIDIndexMismatch, Position: int64(p),
					Detail: fmt.Sprintf("GET /v1/events/%s answers position %d (leaf %x…), the entry is at %d", id, e.Position, e.LeafHash[:6], p)})
			}
			return nil
		})
		g.Go(func() error {
			name := r.StreamName(r.Stream(p))
			v := r.Version(p)
			var out wire.ReadOut
			path := "/v1/streams/" + url.PathEscape(name) + "?from=" + strconv.FormatUint(v, 10) + "&limit=1"
			err := o.c.Do(ctx, http.MethodGet, path, nil, &out)
			switch ae, ok := answered(err); {
			case err != nil && !ok:
				return err
			case err != nil && ae.Status != http.StatusNotFound:
				o.run.Fault(audit.Fault{Kind: audit.KindServerCorrupt, Position: int64(p), Detail: fmt.Sprintf("GET %s: %v", path, err)})
			case err != nil || len(out.Events) == 0:
				o.run.Fault(audit.Fault{Kind: audit.KindStreamIndexMissing, Position: int64(p), Detail: fmt.Sprintf("GET %s answers no event for %s@%d", path, name, v)})
			case out.Events[0].Position != p || out.Events[0].Version != v:
				o.run.Fault(audit.Fault{Kind: audit.KindStreamIndexMismatch, Position: int64(p),
					Detail: fmt.Sprintf("GET %s answers %s@%d at position %d; %s@%d is at position %d", path, name, out.Events[0].Version, out.Events[0].Position, name, v, p)})
			}
			return nil
		})
	}
	for s := range streams {
		g.Go(func() error {
			name, lastPos := r.StreamName(s), last[s]
			lastV := r.Version(lastPos)
			var out wire.ReadOut
			path := "/v1/streams/" + url.PathEscape(name) + "?direction=backward&limit=1"
			err := o.c.Do(ctx, http.MethodGet, path, nil, &out)
			if _, ok := answered(err); err != nil && !ok {
				return err
			}
			if err != nil || len(out.Events) == 0 {
				o.run.Fault(audit.Fault{Kind: audit.KindStreamIndexMissing, Position: int64(lastPos), Detail: fmt.Sprintf("GET %s: no last event (%v)", path, err)})
				return nil
			}
			// Events appended after the checkpoint may follow the entries'
			// last one; nothing else may.
			e := out.Events[0]
			if (e.Version == lastV && e.Position != lastPos) || e.Version < lastV || (e.Version > lastV && e.Position < o.size) {
				o.run.Fault(audit.Fault{Kind: audit.KindStreamIndexMismatch, Position: int64(min(lastPos, e.Position)),
					Detail: fmt.Sprintf("GET %s answers %s@%d at position %d; the entries end the stream at %s@%d, position %d", path, name, e.Version, e.Position, name, lastV, lastPos)})
			}
			return nil
		})
	}
	return g.Wait()
}

// serverProofs asks the node's proof API (verify.Prover).
type serverProofs struct{ c *client.Client }

func (s serverProofs) ConsistencyProof(ctx context.Context, from, to uint64) ([][]byte, error) {
	var out wire.ConsistencyOut
	err := s.c.Do(ctx, http.MethodGet, fmt.Sprintf("/v1/proof/consistency?from=%d&to=%d", from, to), nil, &out)
	if _, ok := answered(err); ok {
		return nil, verify.Refused(err) // the node's answer: evidence
	}
	if err != nil {
		return nil, err
	}
	return out.Hashes, nil
}
