package verify

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"golang.org/x/sync/errgroup"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/events"
)

// Replaying the log. A source (the store's event key space, or a server's
// entry bundles) feeds stored event bytes in position order; workers hash
// and decode them in parallel; one consumer checks them in order (positions,
// stream versions, recorded_at, signatures against the key ring at that
// position) and grows the recomputed tree. Sources are read sequentially:
// no random reads.
//
//	source ──chunks──► hash workers (leaf hashes, tile folds, decode)
//	   │                    │ done
//	   └──in order──► consumer ──signature jobs──► signature workers
//
// Chunks are recycled through a free list, so memory is bounded by
// chunksInFlight chunks plus the per-position arrays below.

const (
	// chunkSlots is the number of positions per chunk: four leaf tiles, so
	// that workers fold whole tiles.
	chunkSlots = 1024
	// chunksInFlight bounds the chunks between the source and the consumer
	// (about 400 KiB each with 256-byte payloads): enough to keep both
	// cores busy while the source reads ahead.
	chunksInFlight = 8
	// sigQueue bounds the signature jobs waiting for a worker; the consumer
	// blocks when they fall behind (backpressure).
	sigQueue = 256
)

// Stream numbers of positions without a decodable event.
const (
	noStream    = ^uint32(0)     // stored bytes that do not decode
	missingSlot = ^uint32(0) - 1 // nothing stored at the position
)

// slim is what the consumer needs of a decoded event. Strings and slices
// alias the chunk's arena and are valid until the chunk is recycled.
type slim struct {
	position   uint64
	version    uint64
	id         [16]byte
	recordedAt int64
	stream     string
	typ        string
	data       []byte
	env        *events.Envelope
	err        error // decode error
}

type chunk struct {
	first   uint64 // position of slot 0
	n       int
	starts  []int // per slot: offset of the event's bytes in arena
	offs    []int // per slot: offset of the end of the event's bytes
	missing []bool
	arena   []byte
	// Filled by a worker.
	leaves []byte    // 32 per slot
	nodes  [9][]byte // levels 1..8 over the chunk's full tiles
	evs    []slim    // one per slot
	done   chan struct{}
}

func (c *chunk) reset(first uint64) {
	c.first, c.n = first, 0
	c.starts = c.starts[:0]
	c.offs = c.offs[:0]
	c.missing = c.missing[:0]
	c.arena = c.arena[:0]
	c.leaves = c.leaves[:0]
	for i := range c.nodes {
		c.nodes[i] = c.nodes[i][:0]
	}
	c.evs = c.evs[:0]
	c.done = make(chan struct{})
}

// Feeder turns a source's events into chunks: a source's feed function
// calls Event for each stored event, in key order. It is used by the
// source's goroutine only.
type Feeder struct {
	ctx      context.Context
	free     chan *chunk
	work     chan *chunk
	ordered  chan *chunk
	cur      *chunk
	next     uint64 // next expected position
	maxSlots uint64 // positions at or above are not replayed
	head     uint64 // the recorded head: gaps below it are missing events
	faults   *faults
	dropped  uint64 // events at or above maxSlots
}

// Event feeds the stored bytes of the event keyed at pos. Keys must come in
// increasing order; a gap is recorded as missing events.
func (f *Feeder) Event(pos uint64, raw []byte) error {
	if pos >= f.maxSlots {
		f.dropped++
		return nil
	}
	if pos < f.next {
		return fmt.Errorf("source fed position %d after %d", pos, f.next)
	}
	if pos > f.next {
		// A gap below the head is events deleted; beyond it, the events
		// themselves are the fault (reported by the source).
		if f.next < f.head {
			end := min(pos, f.head)
			f.faults.add(audit.Fault{Kind: audit.KindEventMissing, Position: int64(f.next), End: int64(end),
				Detail: fmt.Sprintf("no event stored at positions [%d, %d): deleted, while later positions exist", f.next, end)})
		}
		if err := f.Placeholders(pos); err != nil {
			return err
		}
	}
	return f.slot(raw, false)
}

// Placeholders fills the positions up to end with nothing: they are
// replayed as missing (their fault is reported by the caller).
func (f *Feeder) Placeholders(end uint64) error {
	for f.next < min(end, f.maxSlots) {
		if err := f.slot(nil, true); err != nil {
			return err
		}
	}
	return nil
}

// MissingTail records the positions up to size not fed yet as missing (a
// truncated log), why being the fault's reason.
func (f *Feeder) MissingTail(size uint64, why string) error {
	size = min(size, f.maxSlots)
	if f.next >= size {
		return nil
	}
	f.faults.add(audit.Fault{Kind: audit.KindEventMissing, Position: int64(f.next), End: int64(size),
		Detail: fmt.Sprintf("no event stored at positions [%d, %d): %s", f.next, size, why)})
	return f.Placeholders(size)
}

func (f *Feeder) slot(raw []byte, missing bool) error {
	if f.cur == nil {
		select {
		case c := <-f.free:
			c.reset(f.next)
			f.cur = c
		case <-f.ctx.Done():
			return f.ctx.Err()
		}
	}
	c := f.cur
	// Each event is preceded by the RFC 6962 leaf prefix 0x00, so that its
	// leaf hash is one SHA-256 over contiguous bytes.
	c.arena = append(c.arena, 0)
	c.starts = append(c.starts, len(c.arena))
	c.arena = append(c.arena, raw...)
	c.offs = append(c.offs, len(c.arena))
	c.missing = append(c.missing, missing)
	c.n++
	f.next++
	if c.n == chunkSlots {
		return f.flush()
	}
	return nil
}

func (f *Feeder) flush() error {
	c := f.cur
	if c == nil {
		return nil
	}
	f.cur = nil
	for _, ch := range []chan *chunk{f.work, f.ordered} {
		select {
		case ch <- c:
		case <-f.ctx.Done():
			return f.ctx.Err()
		}
	}
	return nil
}

// hashChunk is a worker's job: leaf hashes, tile folds, decoding.
func hashChunk(c *chunk) {
	c.leaves = c.leaves[:0]
	for i := 0; i < c.n; i++ {
		var s slim
		if c.missing[i] {
			var zero [32]byte
			c.leaves = append(c.leaves, zero[:]...)
			s.err = errMissing
			c.evs = append(c.evs, s)
			continue
		}
		start, end := c.starts[i], c.offs[i]
		raw := c.arena[start:end:end]
		h := sha256.Sum256(c.arena[start-1 : end]) // = events.LeafHash(raw), without allocating
		c.leaves = append(c.leaves, h[:]...)
		e, err := events.DecodeShared(raw)
		if err != nil {
			s.err = err
		} else {
			s = slim{position: e.Position, version: e.Version, id: e.ID, recordedAt: e.RecordedAt.UnixNano(),
				stream: e.Stream, typ: e.Type, data: e.Data, env: e.Envelope}
		}
		c.evs = append(c.evs, s)
	}
	for t := 0; (t+1)*256 <= c.n; t++ {
		foldTile(c.leaves[t*256*32:(t+1)*256*32], &c.nodes)
	}
	close(c.done)
}

var errMissing = errors.New("missing")

// sigJob is one signature to verify: the key was resolved against the ring
// at the event's position by the consumer, in order.
type sigJob struct {
	pos   uint64
	keyID string
	pub   ed25519.PublicKey
	pae   []byte
	sig   []byte
}

// ReplayConfig parameterises Replay.
type ReplayConfig struct {
	// Workers hash, decode and check signatures (0: GOMAXPROCS).
	Workers int
	// SizeHint is the number of positions expected, to size the arrays.
	SizeHint uint64
	// Head is the recorded head: gaps below it are missing events.
	Head uint64
	// MaxSlots: positions at or above are not replayed (counted as
	// Replayed.Dropped), so that a tampered key cannot make the auditor
	// allocate for it.
	MaxSlots uint64
	// Progress, when set, is called with the positions replayed so far.
	Progress func(done uint64)
}

// Replay runs the pipeline: feed is the source, run on its own goroutine;
// it calls f.Event for each stored event in key order and returns. Faults
// go to the run; the returned error means the replay could not run.
func (run *Run) Replay(ctx context.Context, cfg ReplayConfig, feed func(ctx context.Context, f *Feeder) error) (*Replayed, error) {
	return replay(ctx, cfg, run.faults, feed)
}

func replay(ctx context.Context, cfg ReplayConfig, fs *faults, feed func(ctx context.Context, f *Feeder) error) (*Replayed, error) {
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	g, ctx := errgroup.WithContext(ctx)
	free := make(chan *chunk, chunksInFlight)
	for range chunksInFlight {
		free <- &chunk{}
	}
	work := make(chan *chunk, chunksInFlight)
	ordered := make(chan *chunk, chunksInFlight)
	jobs := make(chan sigJob, sigQueue)
	fd := &Feeder{ctx: ctx, free: free, work: work, ordered: ordered, maxSlots: cfg.MaxSlots, head: cfg.Head, faults: fs}

	g.Go(func() error {
		defer close(work)
		defer close(ordered)
		if err := feed(ctx, fd); err != nil {
			return err
		}
		return fd.flush()
	})
	for range workers {
		g.Go(func() error {
			for c := range work {
				hashChunk(c)
			}
			return nil
		})
	}
	var sigFailures atomic.Int64
	sigDone := make(chan struct{})
	sg := errgroup.Group{}
	for range workers {
		sg.Go(func() error {
			for j := range jobs {
				if len(j.pub) != ed25519.PublicKeySize || !ed25519.Verify(j.pub, j.pae, j.sig) {
					sigFailures.Add(1)
					fs.add(audit.Fault{Kind: audit.KindSignatureInvalid, Position: int64(j.pos), Reason: events.SigBadSignature, KeyID: j.keyID,
						Detail: fmt.Sprintf("the signature by %s over the event's data does not verify with the registered key", j.keyID)})
				}
			}
			return nil
		})
	}
	go func() { _ = sg.Wait(); close(sigDone) }()

	r := &Replayed{
		tree:      newTree(cfg.SizeHint),
		streamOf:  make([]uint32, 0, cfg.SizeHint),
		versionOf: make([]uint64, 0, cfg.SizeHint),
		idOf:      make([][16]byte, 0, cfg.SizeHint),
		byName:    map[string]uint32{},
	}
	g.Go(func() error {
		defer close(jobs)
		c := consumer{r: r, fs: fs, ring: events.NewKeyRing(), jobs: jobs, ctx: ctx}
		for ch := range ordered {
			select {
			case <-ch.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			if err := c.chunk(ch); err != nil {
				return err
			}
			if cfg.Progress != nil {
				cfg.Progress(r.Size())
			}
			free <- ch
		}
		return nil
	})
	err := g.Wait()
	<-sigDone
	if err != nil {
		return nil, err
	}
	r.dropped = fd.dropped
	r.tree.complete()
	return r, nil
}

// consumer checks events in position order. It runs on one goroutine.
type consumer struct {
	ctx  context.Context
	r    *Replayed
	fs   *faults
	ring *events.KeyRing
	jobs chan<- sigJob
	next []uint64 // per stream: the version the next event must have
}

func (c *consumer) chunk(ch *chunk) error {
	r := c.r
	// The tree: leaves, and the nodes of the chunk's full tiles (chunks are
	// tile-aligned, and only the last one is partial).
	r.tree.levels[0] = append(r.tree.levels[0], ch.leaves...)
	for l := uint(1); l <= 8; l++ {
		if len(ch.nodes[l]) > 0 {
			dst := r.tree.level(l)
			*dst = append(*dst, ch.nodes[l]...)
		}
	}
	for i := range ch.evs {
		if err := c.event(ch.first+uint64(i), &ch.evs[i]); err != nil {
			return err
		}
	}
	return nil
}

func (c *consumer) event(pos uint64, s *slim) error {
	r := c.r
	if s.err != nil {
		sid := noStream
		if s.err == errMissing {
			sid = missingSlot
		}
		r.streamOf = append(r.streamOf, sid)
		r.versionOf = append(r.versionOf, 0)
		r.idOf = append(r.idOf, [16]byte{})
		if s.err != errMissing {
			c.fs.add(audit.Fault{Kind: audit.KindEventUndecodable, Position: int64(pos), Detail: fmt.Sprintf("the stored bytes are not a canonical event: %v", s.err)})
		}
		return nil
	}
	if s.position != pos {
		c.fs.add(audit.Fault{Kind: audit.KindPositionMismatch, Position: int64(pos),
			Detail: fmt.Sprintf("the event stored at position %d encodes position %d (events moved or swapped)", pos, s.position)})
	}
	if s.recordedAt < r.lastAt {
		c.fs.add(audit.Fault{Kind: audit.KindRecordedAtBackwards, Position: int64(pos),
			Detail: fmt.Sprintf("recorded_at %d ns is before the previous event's %d ns", s.recordedAt, r.lastAt)})
	}
	r.lastAt = max(r.lastAt, s.recordedAt)
	sid, ok := r.byName[s.stream]
	if !ok {
		sid = uint32(len(r.names))
		name := strings.Clone(s.stream)
		r.names = append(r.names, name)
		r.byName[name] = sid
		r.counts = append(r.counts, 0)
		c.next = append(c.next, 0)
	}
	if want := c.next[sid]; s.version != want {
		c.fs.add(audit.Fault{Kind: audit.KindStreamVersion, Position: int64(pos),
			Detail: fmt.Sprintf("stream %q: version %d, but the stream's next version is %d", s.stream, s.version, want)})
	}
	// Resynchronise on the event's own version, so that one missing or
	// extra event is one fault, not one per later event of the stream.
	c.next[sid] = s.version + 1
	r.counts[sid]++
	r.streamOf = append(r.streamOf, sid)
	r.versionOf = append(r.versionOf, s.version)
	r.idOf = append(r.idOf, s.id)
	if s.env != nil {
		if err := c.signatures(pos, s); err != nil {
			return err
		}
	}
	// The ring changes after this position: an event is never verified by
	// a key it registers itself.
	if events.IsKeyEvent(s.stream, s.typ) {
		e := events.Event{Stream: s.stream, Type: s.typ, Data: s.data}
		c.ring.Apply(&e)
	}
	return nil
}

// signatures resolves each signature's key in the ring as it stands at pos
// and queues the cryptographic check.
func (c *consumer) signatures(pos uint64, s *slim) error {
	var pae []byte
	for _, sg := range s.env.Signatures {
		c.r.sigs++
		pub, revoked, ok := c.ring.Lookup(sg.KeyID)
		switch {
		case !ok:
			c.fs.add(audit.Fault{Kind: audit.KindSignatureInvalid, Position: int64(pos), Reason: events.SigUnknownKey, KeyID: sg.KeyID,
				Detail: fmt.Sprintf("signed by %s, which no ExecutorKeyRegistered event before this position registers", sg.KeyID)})
			continue
		case revoked:
			c.fs.add(audit.Fault{Kind: audit.KindSignatureInvalid, Position: int64(pos), Reason: events.SigRevokedKey, KeyID: sg.KeyID,
				Detail: fmt.Sprintf("signed by %s, revoked before this position", sg.KeyID)})
			continue
		}
		if pae == nil {
			pae = dsse.PAE(s.env.PayloadType, s.data)
		}
		select {
		case c.jobs <- sigJob{pos: pos, keyID: sg.KeyID, pub: pub, pae: pae, sig: append([]byte(nil), sg.Sig...)}:
		case <-c.ctx.Done():
			return c.ctx.Err()
		}
	}
	return nil
}
