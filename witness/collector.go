package witness

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/config"
)

// Witness is one witness a log sends its checkpoints to.
type Witness struct {
	// URL is the witness's base URL (its submission prefix); requests go
	// to URL + "/add-checkpoint".
	URL string
	// VKey is its cosignature/v1 verifier key as given
	// (ParseCosignatureVerifier), and Key the verifier read from it.
	VKey string
	Key  note.Verifier
}

// ParseWitness reads a witness as `greffe serve --witness` takes it:
// URL=VKEY, the URL without "=" (the key's base64 may end in "=").
func ParseWitness(s string) (Witness, error) {
	u, vkey, ok := strings.Cut(s, "=")
	if !ok {
		return Witness{}, fmt.Errorf("witness %q: want URL=VKEY", s)
	}
	pu, err := url.Parse(u)
	if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
		return Witness{}, fmt.Errorf("witness %q: %q is not an http(s) URL", s, u)
	}
	v, err := ParseCosignatureVerifier(vkey)
	if err != nil {
		return Witness{}, err
	}
	return Witness{URL: strings.TrimRight(u, "/"), VKey: strings.TrimSpace(vkey), Key: v}, nil
}

// CheckpointLog is what the collector needs from the ledger
// (*pebblelog.Store): its newest signed checkpoint, and the stored nodes
// consistency proofs are built from. Safe for concurrent use.
type CheckpointLog interface {
	// LatestCheckpoint returns a signed checkpoint of the acknowledged
	// head, signing one when the log grew since the last.
	LatestCheckpoint(ctx context.Context) (events.Checkpoint, error)
	events.HashReader
}

// CollectorConfig configures a Collector. Zero values mean defaults;
// nothing can change while it runs.
type CollectorConfig struct {
	// Origin is the log's checkpoint origin. Required.
	Origin string
	// Log signs the checkpoints and serves the proofs. Required.
	Log CheckpointLog
	// Witnesses are the witnesses to send checkpoints to, each once (by
	// key). Required: at least one.
	Witnesses []Witness
	// Quorum is how many of them must cosign a checkpoint before it is
	// served as the log's latest (Quorum method; the API reads it). 0 (the
	// default) serves the newest checkpoint at once, with the cosignatures
	// it has; at most len(Witnesses).
	Quorum int
	// StateFile keeps, across restarts, each witness's last cosigned size
	// and the cosignatures of the newest checkpoints (collectorFile).
	// Required.
	StateFile string
	// HTTP sends the requests. Default: a client of its own; each request
	// is bounded by RequestTimeout either way.
	HTTP *http.Client
	// RequestTimeout bounds one add-checkpoint request, answer included.
	// Default 10 s.
	RequestTimeout time.Duration
	// PollInterval is how often the collector asks the log for a newer
	// checkpoint (the store signs one every 500 ms while it grows), besides
	// the moments a caller waits for a cosigned one (WaitCosigned). Default
	// 500 ms.
	PollInterval time.Duration
	// MinBackoff and MaxBackoff bound the wait before retrying a witness
	// that failed (unreachable, an error status, an answer that does not
	// verify): MinBackoff, doubled after each failure up to MaxBackoff,
	// back to MinBackoff after a success. A witness that recovers is
	// caught up within MaxBackoff + RequestTimeout, new appends or not.
	// Defaults 1 s and 10 s.
	MinBackoff, MaxBackoff time.Duration
	// Logger receives refusals and failures. Default: discard.
	Logger *slog.Logger
	// Clock stamps cosignatures received. Default time.Now.
	Clock func() time.Time
}

// Defaults of CollectorConfig.
const (
	DefaultRequestTimeout = 10 * time.Second
	DefaultPollInterval   = 500 * time.Millisecond
	DefaultMinBackoff     = time.Second
	DefaultMaxBackoff     = 10 * time.Second
)

// maxQuickRetries bounds the immediate resends after a 409 that told the
// witness's size (each builds a proof from that size): more in a row means
// something else answers, which then waits its backoff.
const maxQuickRetries = 3

// ErrQuorumUnreachable is returned by WaitCosigned when more cosignatures
// are asked for than there are witnesses.
var ErrQuorumUnreachable = errors.New("witness: quorum above the number of witnesses")

// Collector sends the log's checkpoints to its witnesses and keeps their
// cosignatures. OpenCollector starts it; Close stops it. Safe for
// concurrent use.
//
// One goroutine asks the log for its newest checkpoint (every
// PollInterval, and at once when WaitCosigned needs one); one goroutine per
// witness sends it the newest checkpoint it has not cosigned, with the
// consistency proof from the size it last cosigned. Each witness goes at its
// own pace: one that is slow or down delays only its own cosignatures, and
// no append ever waits for a witness. A witness's answers:
//
//   - 200: the cosignature line is checked against its key and kept with
//     the checkpoint; its size moves to the checkpoint's.
//   - 409 with its size (text/x.tlog.size): the collector did not know what
//     it had cosigned (a first contact, a lost state file); it resends at
//     once with a proof from that size.
//   - 409 without a size, or 422: the witness holds a checkpoint this log's
//     history does not extend: a fork, or a witness that was fed another
//     log under this origin. It is logged, counted (Status.Conflicts), and
//     the witness is sent nothing more until the node restarts: resending
//     cannot change its answer.
//   - anything else (unreachable, 403, 404, 429, 5xx, a cosignature that
//     does not verify): a failure, retried after a capped backoff.
type Collector struct {
	cfg    CollectorConfig
	client *http.Client
	peers  []*peer
	kick   chan struct{} // cap 1: a request for a LatestCheckpoint now
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	// persistMu serializes writes of the state file, each of a snapshot
	// taken after it is held, so the last write is of the newest state.
	// Taken before mu, never while holding it.
	persistMu sync.Mutex

	mu sync.Mutex
	// Guarded by mu.
	latest  *events.Checkpoint     // the newest checkpoint the log gave
	kept    map[uint64]*cosignedCP // the newest cosigned checkpoints, by size
	changed chan struct{}          // closed (and replaced) on every change
}

// peer is one witness and what the collector knows of it. Its mutable
// fields are guarded by Collector.mu.
type peer struct {
	w Witness

	size       uint64    // the size it last cosigned (or told, on a 409)
	root       []byte    // the root at size; nil when unknown (told by a 409)
	cosignedAt time.Time // when it last cosigned; zero: never (or not known)
	cosigs     uint64
	failures   uint64
	conflicts  uint64
	halted     bool
	lastErr    string
	retryAt    time.Time
	backoff    time.Duration
}

// cosignedCP is a checkpoint and the cosignature lines received for it,
// by witness key.
type cosignedCP struct {
	size  uint64
	root  [32]byte
	note  []byte
	lines map[string]string
}

// Status is what the collector knows of one witness (metrics, tests).
type Status struct {
	// Name and Key are the witness's name and verifier key; URL its base URL.
	Name, Key, URL string
	// Size is the size of the newest checkpoint it cosigned (0: none
	// known); CosignedAt when (zero: not since the state file began).
	Size       uint64
	CosignedAt time.Time
	// Cosignatures, Failures and Conflicts count, since the collector
	// started, the cosignatures received, the failed requests and the
	// refusals saying the witness saw another history.
	Cosignatures, Failures, Conflicts uint64
	// Halted is true after a conflict: nothing more is sent to it until
	// restart.
	Halted bool
	// LastError is the last failure or conflict ("" after a success).
	LastError string
}

// OpenCollector reads the state file and starts the collector.
func OpenCollector(cfg CollectorConfig) (*Collector, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f, err := readCollectorFile(cfg.StateFile)
	if err != nil {
		return nil, err
	}
	if f.Origin != "" && f.Origin != cfg.Origin {
		return nil, fmt.Errorf("witness state %s is for the log %q, this log is %q", cfg.StateFile, f.Origin, cfg.Origin)
	}
	c := &Collector{cfg: cfg, client: cfg.HTTP, kick: make(chan struct{}, 1), kept: map[uint64]*cosignedCP{}, changed: make(chan struct{})}
	if c.client == nil {
		c.client = &http.Client{Timeout: cfg.RequestTimeout}
	}
	known := map[string]bool{}
	for _, w := range cfg.Witnesses {
		p := &peer{w: w, backoff: cfg.MinBackoff}
		for _, r := range f.Witnesses {
			if r.Key == w.VKey {
				p.size, p.root, p.cosignedAt = r.Size, r.Root, r.CosignedAt
			}
		}
		c.peers = append(c.peers, p)
		known[w.VKey] = true
	}
	for _, r := range f.Checkpoints {
		if len(r.Root) != 32 {
			return nil, fmt.Errorf("witness state %s: checkpoint %d has a root of %d bytes", cfg.StateFile, r.Size, len(r.Root))
		}
		k := &cosignedCP{size: r.Size, root: [32]byte(r.Root), note: []byte(r.Note), lines: map[string]string{}}
		for key, line := range r.Cosignatures {
			if known[key] {
				k.lines[key] = line
			}
		}
		c.kept[r.Size] = k
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1 + len(c.peers))
	go func() {
		defer c.wg.Done()
		c.poll(ctx)
	}()
	for _, p := range c.peers {
		go func() {
			defer c.wg.Done()
			c.work(ctx, p)
		}()
	}
	return c, nil
}

func (cfg *CollectorConfig) setDefaults() {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
}

// Validate reports every problem of cfg at once (OpenCollector applies
// defaults first).
func (cfg *CollectorConfig) Validate() error {
	var p config.Problems
	if cfg.Origin == "" {
		p.Addf("Origin is required")
	}
	if cfg.Log == nil {
		p.Addf("Log is required")
	}
	if cfg.StateFile == "" {
		p.Addf("StateFile is required")
	}
	if len(cfg.Witnesses) == 0 {
		p.Addf("Witnesses: at least one is required")
	}
	seen := map[string]bool{}
	for i, w := range cfg.Witnesses {
		if w.Key == nil || w.URL == "" {
			p.Addf("Witnesses[%d]: URL and Key are required", i)
			continue
		}
		if seen[w.VKey] {
			p.Addf("Witnesses[%d]: the key %s is given twice", i, w.VKey)
		}
		seen[w.VKey] = true
	}
	if cfg.Quorum < 0 || cfg.Quorum > len(cfg.Witnesses) {
		p.Addf("Quorum %d: must be 0 to the number of witnesses (%d)", cfg.Quorum, len(cfg.Witnesses))
	}
	if cfg.MinBackoff > cfg.MaxBackoff {
		p.Addf("MinBackoff %s is above MaxBackoff %s", cfg.MinBackoff, cfg.MaxBackoff)
	}
	return p.Err(ErrInvalidConfig)
}

// Close stops the collector and waits for its goroutines; a request in
// flight is cancelled. Idempotent.
func (c *Collector) Close() error {
	c.once.Do(func() {
		c.cancel()
		c.wg.Wait()
	})
	return nil
}

// Quorum returns CollectorConfig.Quorum.
func (c *Collector) Quorum() int { return c.cfg.Quorum }

// Witnesses returns how many witnesses the collector sends to.
func (c *Collector) Witnesses() int { return len(c.peers) }

// Changed returns a channel closed at the collector's next change (a
// newer checkpoint, a cosignature, a failure, a conflict). Waiters take a
// new one after each.
func (c *Collector) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// notifyLocked wakes everything waiting on a change. REQUIRES: c.mu held.
func (c *Collector) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Status returns what the collector knows of each witness, in the
// configured order.
func (c *Collector) Status() []Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Status, len(c.peers))
	for i, p := range c.peers {
		out[i] = Status{Name: p.w.Key.Name(), Key: p.w.VKey, URL: p.w.URL, Size: p.size, CosignedAt: p.cosignedAt,
			Cosignatures: p.cosigs, Failures: p.failures, Conflicts: p.conflicts, Halted: p.halted, LastError: p.lastErr}
	}
	return out
}

// Cosigned returns cp's note followed by the cosignature lines received
// for it (the same size and root), in the witnesses' configured order:
// the note GET /v1/checkpoint serves. It is cp.Note when none was.
func (c *Collector) Cosigned(cp events.Checkpoint) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.kept[cp.Size]
	if !ok || k.root != cp.Root {
		return cp.Note
	}
	return c.noteLocked(cp.Note, k)
}

// noteLocked appends k's lines to n. REQUIRES: c.mu held.
func (c *Collector) noteLocked(n []byte, k *cosignedCP) []byte {
	out := append([]byte(nil), n...)
	for _, p := range c.peers {
		out = append(out, k.lines[p.w.VKey]...)
	}
	return out
}

// NewestCosigned returns the newest checkpoint that at least quorum
// witnesses cosigned, its note carrying their cosignatures; ok is false
// when there is none.
func (c *Collector) NewestCosigned(quorum int) (cp events.Checkpoint, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.newestLocked(quorum)
}

func (c *Collector) newestLocked(quorum int) (events.Checkpoint, bool) {
	var best *cosignedCP
	for _, k := range c.kept {
		if len(k.lines) >= quorum && (best == nil || k.size > best.size) {
			best = k
		}
	}
	if best == nil {
		return events.Checkpoint{}, false
	}
	return events.Checkpoint{Origin: c.cfg.Origin, Size: best.size, Root: best.root, Note: c.noteLocked(best.note, best)}, true
}

// WaitCosigned returns the newest checkpoint of at least size that at
// least quorum witnesses cosigned (as NewestCosigned), waiting for one
// until ctx ends: it has the log sign its head and the witnesses be sent
// it at once. ErrQuorumUnreachable when quorum is above the number of
// witnesses; ctx.Err() when ctx ends first.
func (c *Collector) WaitCosigned(ctx context.Context, size uint64, quorum int) (events.Checkpoint, error) {
	if quorum > len(c.peers) {
		return events.Checkpoint{}, fmt.Errorf("%w: %d asked for, %d witnesses", ErrQuorumUnreachable, quorum, len(c.peers))
	}
	for {
		c.mu.Lock()
		cp, ok := c.newestLocked(quorum)
		ch := c.changed
		c.mu.Unlock()
		if ok && cp.Size >= size {
			return cp, nil
		}
		select {
		case c.kick <- struct{}{}:
		default:
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return events.Checkpoint{}, ctx.Err()
		}
	}
}

// poll asks the log for its newest checkpoint every PollInterval, and at
// once when kicked.
func (c *Collector) poll(ctx context.Context) {
	t := time.NewTicker(c.cfg.PollInterval)
	defer t.Stop()
	for {
		cp, err := c.cfg.Log.LatestCheckpoint(ctx)
		switch {
		case err == nil:
			c.offer(cp)
		case ctx.Err() == nil:
			c.cfg.Logger.Debug("witness: no checkpoint to send", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-c.kick:
		}
	}
}

// offer records cp as the newest checkpoint when it is.
func (c *Collector) offer(cp events.Checkpoint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.latest != nil && cp.Size <= c.latest.Size {
		return
	}
	c.latest = &cp
	c.notifyLocked()
}

// due reports whether p should be sent cp: it has not cosigned it, and
// cp does not stand below what it cosigned. REQUIRES: c.mu held.
func (p *peer) due(cp *events.Checkpoint) bool {
	if cp == nil || p.halted {
		return false
	}
	return cp.Size > p.size || (cp.Size == p.size && !bytes.Equal(p.root, cp.Root[:]))
}

// work sends p the newest checkpoint it has not cosigned, for as long as
// the collector runs.
func (c *Collector) work(ctx context.Context, p *peer) {
	quick := 0
	for {
		c.mu.Lock()
		cp, due, retryAt, ch, old := c.latest, p.due(c.latest), p.retryAt, c.changed, p.size
		c.mu.Unlock()
		if !due {
			select {
			case <-ctx.Done():
				return
			case <-ch:
				continue
			}
		}
		if wait := time.Until(retryAt); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
				continue
			}
		}
		res := c.send(ctx, p, *cp, old)
		if ctx.Err() != nil {
			return
		}
		if res.kind == answerStale && res.size <= cp.Size && quick < maxQuickRetries {
			quick++
		} else {
			quick = 0
		}
		c.record(p, *cp, res, quick > 0)
	}
}

// answer kinds of one add-checkpoint request.
type answerKind int

const (
	answerCosigned answerKind = iota // 200 with a cosignature that verifies
	answerStale                      // 409 with the witness's size
	answerConflict                   // 409 without a size, 422
	answerFailed                     // anything else
)

type answer struct {
	kind answerKind
	line string // answerCosigned: the cosignature line by the witness's key
	size uint64 // answerStale: the witness's size
	err  error  // why, for every kind but answerCosigned
}

// send posts cp to p with the consistency proof from old.
func (c *Collector) send(ctx context.Context, p *peer, cp events.Checkpoint, old uint64) answer {
	var prf [][]byte
	if old > 0 && old < cp.Size {
		var err error
		if prf, err = events.ConsistencyProof(ctx, c.cfg.Log, old, cp.Size); err != nil {
			return answer{kind: answerFailed, err: fmt.Errorf("consistency proof from %d to %d: %w", old, cp.Size, err)}
		}
	}
	body := AddCheckpointRequest{OldSize: old, Proof: prf, Checkpoint: cp.Note}.Marshal()
	rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, p.w.URL+AddCheckpointPath, bytes.NewReader(body))
	if err != nil {
		return answer{kind: answerFailed, err: err}
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := c.client.Do(req)
	if err != nil {
		return answer{kind: answerFailed, err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return answer{kind: answerFailed, err: fmt.Errorf("reading the answer: %w", err)}
	}
	if len(b) > MaxResponseBytes {
		return answer{kind: answerFailed, err: fmt.Errorf("the answer is over %d bytes", MaxResponseBytes)}
	}
	switch resp.StatusCode {
	case http.StatusOK:
		n, err := note.Open(append(append([]byte(nil), cp.Note...), b...), note.VerifierList(p.w.Key))
		if err != nil {
			return answer{kind: answerFailed, err: fmt.Errorf("200 without a valid cosignature by %s: %v", p.w.VKey, err)}
		}
		return answer{kind: answerCosigned, line: cosignatureLine(n, p.w.Key)}
	case http.StatusConflict:
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == ContentTypeSize {
			n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
			if err != nil {
				return answer{kind: answerFailed, err: fmt.Errorf("409 with a size that does not parse: %q", b)}
			}
			return answer{kind: answerStale, size: n, err: fmt.Errorf("409: the witness last cosigned size %d, not %d", n, old)}
		}
		return answer{kind: answerConflict, err: fmt.Errorf("409 without its size: %s", snippet(b))}
	case http.StatusUnprocessableEntity:
		return answer{kind: answerConflict, err: fmt.Errorf("422: %s", snippet(b))}
	}
	return answer{kind: answerFailed, err: fmt.Errorf("%s: %s", resp.Status, snippet(b))}
}

// snippet returns the start of an answer's body, for logs.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return strconv.Quote(s)
}

// record applies one answer of p about cp. quick means a stale answer is
// retried at once.
func (c *Collector) record(p *peer, cp events.Checkpoint, res answer, quick bool) {
	log := c.cfg.Logger.With("witness", p.w.Key.Name(), "url", p.w.URL, "size", cp.Size)
	persist := false
	c.mu.Lock()
	switch res.kind {
	case answerCosigned:
		p.size, p.root, p.cosignedAt = cp.Size, cp.Root[:], c.cfg.Clock().UTC()
		p.cosigs++
		p.lastErr, p.retryAt, p.backoff = "", time.Time{}, c.cfg.MinBackoff
		k, ok := c.kept[cp.Size]
		if !ok || k.root != cp.Root {
			k = &cosignedCP{size: cp.Size, root: cp.Root, note: cp.Note, lines: map[string]string{}}
			c.kept[cp.Size] = k
			c.trimLocked()
		}
		k.lines[p.w.VKey] = res.line
		persist = true
	case answerStale:
		log.Info("witness: it cosigned another size; sending a proof from it", "witness_size", res.size)
		p.size, p.root = res.size, nil
		p.lastErr = res.err.Error()
		if !quick {
			c.backoffLocked(p)
		}
	case answerConflict:
		p.conflicts++
		p.halted = true
		p.lastErr = res.err.Error()
		log.Error("witness: refused the checkpoint as inconsistent with what it cosigned: it holds another history of this log (a fork, or another log under this origin); nothing more is sent to it until the node restarts",
			"old_size", p.size, "err", res.err)
	case answerFailed:
		if p.lastErr == "" {
			log.Warn("witness: request failed; retrying with backoff", "err", res.err)
		} else {
			log.Debug("witness: request failed again", "err", res.err)
		}
		p.failures++
		p.lastErr = res.err.Error()
		c.backoffLocked(p)
	}
	c.notifyLocked()
	c.mu.Unlock()
	if persist {
		if err := c.persist(); err != nil {
			log.Error("witness: cannot write the state file; cosignatures are served but not kept across a restart", "err", err)
		}
	}
}

// backoffLocked schedules p's next attempt. REQUIRES: c.mu held.
func (c *Collector) backoffLocked(p *peer) {
	p.retryAt = time.Now().Add(p.backoff)
	p.backoff = min(2*p.backoff, c.cfg.MaxBackoff)
}

// trimLocked keeps the newest maxKept checkpoints. REQUIRES: c.mu held.
func (c *Collector) trimLocked() {
	for len(c.kept) > maxKept {
		delete(c.kept, slices.Min(slices.Collect(maps.Keys(c.kept))))
	}
}

// persist writes the state file from a snapshot of the current state.
func (c *Collector) persist() error {
	c.persistMu.Lock()
	defer c.persistMu.Unlock()
	c.mu.Lock()
	f := &collectorFile{Origin: c.cfg.Origin}
	for _, p := range c.peers {
		f.Witnesses = append(f.Witnesses, witnessRecord{Key: p.w.VKey, URL: p.w.URL, Size: p.size, Root: p.root, CosignedAt: p.cosignedAt})
	}
	for _, k := range c.kept {
		r := cosignedRecord{Size: k.size, Root: append([]byte(nil), k.root[:]...), Note: string(k.note), Cosignatures: map[string]string{}}
		for key, line := range k.lines {
			r.Cosignatures[key] = line
		}
		f.Checkpoints = append(f.Checkpoints, r)
	}
	c.mu.Unlock()
	slices.SortFunc(f.Checkpoints, func(a, b cosignedRecord) int { return cmp.Compare(a.Size, b.Size) })
	return writeCollectorFile(c.cfg.StateFile, f)
}
