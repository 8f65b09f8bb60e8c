package projections

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/config"
)

// Source is what the runners need from the log; *pebblelog.Store
// implements it. Every method is called concurrently by the runners.
type Source interface {
	// Subscribe delivers events from position from, first those in the
	// log then live ones, with no gap and no duplicate, until ctx ends
	// (events.Subscriber).
	Subscribe(ctx context.Context, from uint64, f events.Filter, fn func(events.Event) error) error
	// ReadAll reads a page of the log (events.Reader); as-of renders use it.
	ReadAll(ctx context.Context, o events.ReadOptions) ([]events.Event, error)
	// Head returns the acknowledged end of the log.
	Head() events.Head
}

// Config configures a Set.
type Config struct {
	// Store keeps the rows and checkpoints (projections/pebblestore on
	// <data>/projections). Required; the Set closes it.
	Store Store
	// Source is the log. Required.
	Source Source
	// LedgerID is the ledger the rows are folded from; rows of another
	// ledger are dropped and folded again. Empty skips the check.
	LedgerID string
	// Env is what the models need from the node (its policy).
	Env Env
	// Clock is the time a timed model is judged at when the query names
	// none. Default time.Now.
	Clock func() time.Time
	// CommitEvery bounds the events folded between two Store batches while
	// a model catches up. Default 4096. A model that has caught up commits
	// after every page of events it receives.
	CommitEvery int
	// Passive opens the stored models without following the log (offline
	// verification of a stopped node).
	Passive bool
	// Logger receives the runners' errors. Default: discard.
	Logger *slog.Logger
}

// Set is the node's read models, kept up to date by one reader of the log
// that folds each event into every model (follow). Open starts it; Close
// stops it, commits and waits. Safe for concurrent use.
type Set struct {
	cfg     Config
	db      Store
	runners []*runner
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once
}

// runner is one model and where it stands in the log.
type runner struct {
	spec Spec

	// mu guards model and applied: readers render under RLock, so a
	// render always sees the rows of exactly the first applied events.
	mu      sync.RWMutex
	model   Model
	applied uint64

	// pending counts the events folded since the last commit.
	pending atomic.Int64
	// commitMu serialises commits (the runner's and the flusher's).
	commitMu sync.Mutex
	// lastCommit is when the last commit started (Unix nanoseconds); read
	// without the lock by the runner after every event at the head.
	lastCommit atomic.Int64

	committed atomic.Uint64

	// sig is closed and replaced whenever applied advances (or the runner
	// stops), waking WaitFor. Guarded by sigMu.
	sigMu sync.Mutex
	sig   chan struct{}

	// waiters counts the WaitFor calls in progress: the runner wakes them
	// after every event only when there are some (a wake-up allocates).
	waiters atomic.Int32

	failure atomic.Pointer[error]
	stopped atomic.Bool
}

// Status is where one projection stands.
type Status struct {
	Name string `json:"name"`
	// Position is the number of events folded; Committed the number stored.
	Position  uint64 `json:"position"`
	Committed uint64 `json:"committed"`
	// Head is the log's size and Lag how many events the projection has
	// still to fold.
	Head  uint64 `json:"head"`
	Lag   uint64 `json:"lag"`
	Error string `json:"error,omitempty"`
}

// ErrInvalidConfig wraps configuration problems.
var ErrInvalidConfig = errors.New("projections: invalid config")

func (c *Config) setDefaults() {
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.CommitEvery <= 0 {
		c.CommitEvery = 4096
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Validate reports, all at once, the parts Open cannot do without: the
// Store the rows live in and the Source they are folded from.
func (c *Config) Validate() error {
	var p config.Problems
	if c.Store == nil {
		p.Addf("Store is required")
	}
	if c.Source == nil {
		p.Addf("Source is required")
	}
	return p.Err(ErrInvalidConfig)
}

// Keys of the projections' Store, per model name:
//
//	v/<name>          "<version>/<ledger id>": the rows' version
//	c/<name>          8-byte big-endian position: the events folded
//	r/<name>/<row>    a row, as the model's Flush wrote it
func versionKey(name string) []byte    { return []byte("v/" + name) }
func checkpointKey(name string) []byte { return []byte("c/" + name) }
func rowPrefix(name string) []byte     { return []byte("r/" + name + "/") }

// Open takes the projections' Store (and closes it when it fails), loads
// every model's rows and checkpoint, and (unless Passive) starts one
// runner per model.
func Open(cfg Config) (*Set, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		if cfg.Store != nil {
			_ = cfg.Store.Close()
		}
		return nil, err
	}
	db := cfg.Store
	s := &Set{cfg: cfg, db: db}
	for _, spec := range Specs() {
		r := &runner{spec: spec, model: spec.New(cfg.Env), sig: make(chan struct{})}
		if err := s.load(r); err != nil {
			_ = db.Close()
			return nil, err
		}
		s.runners = append(s.runners, r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	if !cfg.Passive {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.follow(ctx)
		}()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.flushLoop(ctx)
		}()
	}
	return s, nil
}

// commitInterval bounds how often a caught-up runner stores its rows. A
// runner at the head used to commit after every batch of the log: six
// Pebble commits per ledger fsync, a twentieth of a command's CPU under
// load (BenchmarkCommands). The rows are derived; a crash loses at most
// this interval of folding, which the restart folds again.
const commitInterval = 100 * time.Millisecond

// flushLoop commits what caught-up runners folded since their last commit
// and did not store at once (commitInterval).
func (s *Set) flushLoop(ctx context.Context) {
	t := time.NewTicker(commitInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, r := range s.runners {
			if r.dirty() && !r.stopped.Load() {
				if err := s.commit(r, false); err != nil {
					s.cfg.Logger.Error("projection commit", "projection", r.spec.Name, "err", err)
				}
			}
		}
	}
}

// load restores a model's rows and checkpoint, or resets it when its rows
// were written by another version of the model or for another ledger, or
// are ahead of the log.
func (s *Set) load(r *runner) error {
	name := r.spec.Name
	want := fmt.Sprintf("%d/%s", r.spec.Version, s.cfg.LedgerID)
	got, _, err := s.db.Get(versionKey(name))
	if err != nil {
		return err
	}
	var pos uint64
	if cp, ok, err := s.db.Get(checkpointKey(name)); err == nil && ok && len(cp) == 8 {
		pos = binary.BigEndian.Uint64(cp)
	}
	ver, ledger, _ := strings.Cut(string(got), "/")
	if ver != strconv.Itoa(r.spec.Version) || s.cfg.LedgerID != "" && ledger != s.cfg.LedgerID || pos > s.cfg.Source.Head().Size {
		return s.reset(r, want)
	}
	lo := rowPrefix(name)
	hi := append(bytes.Clone(lo[:len(lo)-1]), '/'+1)
	err = s.db.Scan(lo, hi, func(key, value []byte) error {
		if err := r.model.Load(string(key[len(lo):]), value); err != nil {
			return fmt.Errorf("projection %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.applied = pos
	r.committed.Store(pos)
	return nil
}

func (s *Set) reset(r *runner, version string) error {
	name := r.spec.Name
	lo := rowPrefix(name)
	hi := append(bytes.Clone(lo[:len(lo)-1]), '/'+1)
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(lo, hi); err != nil {
		return err
	}
	if err := b.Delete(checkpointKey(name)); err != nil {
		return err
	}
	if err := b.Set(versionKey(name), []byte(version)); err != nil {
		return err
	}
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("reset projection %s: %w", name, err)
	}
	r.model = r.spec.New(s.cfg.Env)
	r.applied = 0
	r.committed.Store(0)
	return nil
}

// follow reads the log once for every model: one subscription from the
// position of the model furthest behind, each event decoded once and folded
// into every model that has reached it. Six subscriptions, each reading and
// decoding every event, were 30 % of a node's CPU under an append load
// (issue #14); the models are cheap next to that, and most events are of no
// stream they read. A model whose fold fails stops (Status, WaitFor say
// why); the others go on. It returns when ctx ends or every model stopped.
func (s *Set) follow(ctx context.Context) {
	from := uint64(math.MaxUint64)
	for _, r := range s.runners {
		r.mu.RLock()
		from = min(from, r.applied)
		r.mu.RUnlock()
	}
	live := len(s.runners)
	defer func() {
		for _, r := range s.runners {
			s.finish(r)
		}
	}()
	errAllStopped := errors.New("every projection stopped")
	err := s.cfg.Source.Subscribe(ctx, from, events.Filter{}, func(e events.Event) error {
		for _, r := range s.runners {
			if r.stopped.Load() {
				continue
			}
			if err := s.fold(r, &e); err != nil {
				r.failure.Store(&err)
				s.cfg.Logger.Error("projection stopped", "projection", r.spec.Name, "err", err)
				s.finish(r)
				if live--; live == 0 {
					return errAllStopped
				}
			}
		}
		return nil
	})
	if ctx.Err() == nil && err != nil && !errors.Is(err, errAllStopped) {
		for _, r := range s.runners {
			if !r.stopped.Load() {
				r.failure.Store(&err)
			}
		}
		s.cfg.Logger.Error("projections stopped", "err", err)
	}
}

// fold folds e into r's model if r has reached it (a model reset at open
// starts behind the others, which skip the events they hold already), and
// commits when it is due.
func (s *Set) fold(r *runner, e *events.Event) error {
	r.mu.Lock()
	switch {
	case e.Position < r.applied:
		r.mu.Unlock()
		return nil
	case e.Position > r.applied:
		r.mu.Unlock()
		return fmt.Errorf("projection %s: event at position %d after %d events: %w", r.spec.Name, e.Position, r.applied, events.ErrCorrupt)
	}
	err := r.model.Apply(e)
	if err == nil {
		r.applied = e.Position + 1
	}
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("projection %s: %w", r.spec.Name, err)
	}
	n := r.pending.Add(1)
	if n >= int64(s.cfg.CommitEvery) || e.Position+1 >= s.cfg.Source.Head().Size && r.commitDue() {
		if err := s.commit(r, false); err != nil {
			return err
		}
		r.signal()
	} else if r.waiters.Load() > 0 {
		r.signal()
	}
	return nil
}

// finish stops r once: what was folded is kept, whatever stopped it (the
// rows and the checkpoint stay one batch).
func (s *Set) finish(r *runner) {
	if r.stopped.Load() {
		return
	}
	if r.dirty() {
		if cerr := s.commit(r, true); cerr != nil {
			s.cfg.Logger.Error("projection commit", "projection", r.spec.Name, "err", cerr)
		}
	}
	r.stop()
}

// commit stores the changed rows and the checkpoint in one batch.
func (s *Set) commit(r *runner, sync bool) error {
	r.commitMu.Lock()
	defer r.commitMu.Unlock()
	r.lastCommit.Store(time.Now().UnixNano())
	b := s.db.NewBatch()
	defer b.Close()
	prefix := rowPrefix(r.spec.Name)
	r.mu.Lock()
	err := r.model.Flush(func(key string, value []byte) error {
		return b.Set(append(bytes.Clone(prefix), key...), value)
	})
	pos := r.applied
	r.mu.Unlock()
	if err != nil {
		return fmt.Errorf("projection %s: flush: %w", r.spec.Name, err)
	}
	if err := b.Set(checkpointKey(r.spec.Name), binary.BigEndian.AppendUint64(nil, pos)); err != nil {
		return err
	}
	if err := b.Commit(sync); err != nil {
		return fmt.Errorf("projection %s: commit: %w", r.spec.Name, err)
	}
	r.pending.Store(0)
	r.committed.Store(pos)
	return nil
}

// dirty reports whether events were folded since the last commit.
func (r *runner) dirty() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.applied != r.committed.Load()
}

// commitDue reports whether commitInterval has passed since the last commit.
func (r *runner) commitDue() bool {
	return time.Since(time.Unix(0, r.lastCommit.Load())) >= commitInterval
}

func (r *runner) signal() {
	r.sigMu.Lock()
	close(r.sig)
	r.sig = make(chan struct{})
	r.sigMu.Unlock()
}

func (r *runner) stop() {
	r.stopped.Store(true)
	r.signal()
}

func (r *runner) waitChan() <-chan struct{} {
	r.sigMu.Lock()
	defer r.sigMu.Unlock()
	return r.sig
}

func (r *runner) err() error {
	if p := r.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// Close stops the runners, commits what they folded and closes the Store.
// Idempotent.
func (s *Set) Close() error {
	var err error
	s.once.Do(func() {
		s.cancel()
		s.wg.Wait()
		err = s.db.Close()
	})
	return err
}

func (s *Set) runner(name string) (*runner, error) {
	for _, r := range s.runners {
		if r.spec.Name == name {
			return r, nil
		}
	}
	return nil, &UnknownError{Name: name}
}

// Status returns where every projection stands, sorted by name.
func (s *Set) Status() []Status {
	head := s.cfg.Source.Head().Size
	out := make([]Status, 0, len(s.runners))
	for _, r := range s.runners {
		r.mu.RLock()
		pos := r.applied
		r.mu.RUnlock()
		st := Status{Name: r.spec.Name, Position: pos, Committed: r.committed.Load(), Head: head}
		if head > pos {
			st.Lag = head - pos
		}
		if err := r.err(); err != nil {
			st.Error = err.Error()
		}
		out = append(out, st)
	}
	return out
}

// FailedError is a projection whose runner stopped on an event it could
// not fold.
type FailedError struct {
	Name string
	Err  error
}

// Error says which projection stopped and why.
func (e *FailedError) Error() string { return fmt.Sprintf("projection %s stopped: %v", e.Name, e.Err) }

// CodedError describes the error: projection_failed, a failure of the
// node (its rows stay at the last good position).
func (e *FailedError) CodedError() *events.Error {
	return &events.Error{Code: CodeProjectionFailed, Kind: events.KindFailed, Message: e.Error(), Err: e}
}

// Unwrap returns the cause.
func (e *FailedError) Unwrap() error { return e.Err }

// Render renders the live projection name for q. A zero q.Time is the
// Set's clock. It returns the JSON bytes and the position rendered.
func (s *Set) Render(name string, q Query) ([]byte, uint64, error) {
	r, err := s.runner(name)
	if err != nil {
		return nil, 0, err
	}
	if err := r.err(); err != nil {
		return nil, 0, &FailedError{Name: name, Err: err}
	}
	if q.Time.IsZero() {
		q.Time = s.cfg.Clock()
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	b, err := render(r.spec, r.model, r.applied, q)
	return b, r.applied, err
}

// LaggingError is returned by WaitFor when the projection did not reach
// the position in time.
type LaggingError struct {
	Name             string
	Position, Wanted uint64
}

// Error says how far the projection is.
func (e *LaggingError) Error() string {
	return fmt.Sprintf("projection %s has folded %d events, not yet %d; retry", e.Name, e.Position, e.Wanted)
}

// CodedError describes the error: projection_lagging, a failure that a
// retry may not meet.
func (e *LaggingError) CodedError() *events.Error {
	return &events.Error{Code: CodeProjectionLagging, Kind: events.KindFailed, Message: e.Error(), Err: e}
}

// WaitFor waits until the projection name has folded the first position
// events (a command's Result.Position: read your own writes), or ctx ends
// (then it returns a *LaggingError).
func (s *Set) WaitFor(ctx context.Context, name string, position uint64) error {
	r, err := s.runner(name)
	if err != nil {
		return err
	}
	r.waiters.Add(1)
	defer r.waiters.Add(-1)
	for {
		ch := r.waitChan()
		r.mu.RLock()
		pos := r.applied
		r.mu.RUnlock()
		if pos >= position {
			return nil
		}
		if err := r.err(); err != nil {
			return &FailedError{Name: name, Err: err}
		}
		if r.stopped.Load() {
			return &LaggingError{Name: name, Position: pos, Wanted: position}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return &LaggingError{Name: name, Position: pos, Wanted: position}
		}
	}
}

// Clock returns the time a zero Query.Time stands for.
func (s *Set) Clock() time.Time { return s.cfg.Clock() }

// Env returns the models' environment.
func (s *Set) Env() Env { return s.cfg.Env }
