package replicator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/internal/netpolicy"
)

// The Replicator itself: its state, Open (which wires the raft log and
// snapshot stores, the transport and the FSM over the ledger), the
// maintain loop that establishes leadership and notices a removal, and
// Close. The rest has files of its own: config.go (Config), propose.go
// (batches in, outcomes out, and how raft is stopped), trailing.go (how
// much raft log to keep), hclog.go (raft's logs into slog), membership.go,
// read.go, snapshots.go, seed.go, transport.go, logstore.go, fsm.go and
// errors.go.

// Replicator runs this node's raft member in front of the ledger. It is the
// store's Proposer: the leader's group-commit batches become raft entries.
// Open starts it; Close stops it. Safe for concurrent use.
type Replicator struct {
	cfg    Config
	ledger Ledger
	fsm    *fsm
	raft   *raft.Raft
	rptr   atomic.Pointer[raft.Raft] // for the info protocol, which may run before Open returns
	logs   *LogStore
	mux    *muxLayer
	trans  *authTransport
	res    resolver
	// refusals logs and counts refused raft connections and RPCs.
	refusals *refusalLog
	// watch follows the committed configurations, to tell a removal
	// (removal.go).
	watch *removalWatch
	obs   *raft.Observer
	obsCh chan raft.Observation
	// hadState is whether raft state existed when the node started (a
	// member restarting, not a new node).
	hadState bool
	// lastEntries and lastBytes are the FSM's counters at the last
	// adaptTrailingLogs; owned by the maintain loop.
	lastEntries, lastBytes uint64
	// ticks counts the maintain loop's ticks (tests wait on it).
	ticks atomic.Uint64

	pending chan *proposal
	fatalCh chan error
	// apply orders handing futures to raft against stopping it. Raft
	// queues proposals and barriers (BatchApplyCh) and leadership checks
	// in buffered channels, and a future still queued when raft stops is
	// never answered (hashicorp/raft#498): the wait loop, or the maintain
	// loop, would wait for it forever, and Close with them. So raft is only
	// ever stopped by stopRaft, which first refuses new futures (stopping,
	// under mu; toRaft holds mu for reading while it hands one over) and
	// waits until raft has answered every future it was handed (inRaft).
	apply struct {
		mu       sync.RWMutex
		stopping bool
		inRaft   sync.WaitGroup
		once     sync.Once
	}
	// ready is the term in which this node, as leader, has seen an entry of
	// its own term applied (a barrier); 0 when not established.
	ready   atomic.Uint64
	readyMu struct {
		sync.Mutex
		ch chan struct{} // closed and replaced when ready changes
	}

	peersMu sync.Mutex
	peers   map[string]NodeInfo // guarded by peersMu: the latest answer of each member
	// knownKeys are the verifier keys every other node ever announced, by
	// node id, kept in the raft stable store (peerKeysKey) so that /v1/info
	// still lists a node's keys while it is down, after a restart of this
	// one: its checkpoints stay verifiable. Guarded by peersMu.
	knownKeys map[string][]string
	leader    struct {
		sync.Mutex
		id, addr, url string
		at            time.Time
	}

	done     chan struct{} // closed when the member stopped on its own
	doneErr  atomic.Pointer[error]
	doneOnce sync.Once
	closing  atomic.Bool

	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

var _ pebblelog.Proposer = (*Replicator)(nil)

// Queue and timing constants.
const (
	// proposalQueue holds proposals between Propose and the goroutine that
	// waits on them in order. The store keeps very few batches in flight
	// (its pipeline depth); a full queue slows the sequencer, which is the
	// backpressure we want.
	proposalQueue = 64
	// observerQueue buffers raft state observations; raft drops (and
	// counts) what does not fit, and only the Shutdown state matters here.
	observerQueue = 16
	// infoTimeout bounds one node-information query.
	infoTimeout = time.Second
	// leaderURLTTL is how long a learned leader HTTP URL is trusted without
	// asking again (a forward that fails to dial forgets it at once).
	leaderURLTTL = 2 * time.Second
	// promoteLag is how far (in raft entries) a non-voter may trail the
	// leader's commit index and still be promoted.
	promoteLag = 64
	// Bounds of the derived TrailingLogs (Config.TrailingLogs zero), and
	// its value before the first measurement.
	minTrailingLogs     = 1024
	maxTrailingLogs     = 1 << 18
	initialTrailingLogs = 10240
	// minSample is how many entries a maintain tick must see before their
	// average size moves TrailingLogs.
	minSample = 16
)

// ErrRemoved is the reason Done reports when this node was removed from the
// cluster: a committed configuration lacks it (removal.go).
var ErrRemoved = errors.New("replicator: this node was removed from the cluster")

// errRaftStopped is the reason Done reports when raft stopped without this
// replicator stopping it (it never should: ShutdownOnRemove is off).
var errRaftStopped = errors.New("replicator: raft stopped on its own")

// Open starts this node's raft member over ledger and makes the replicator
// the ledger's proposer. When the newest local snapshot is ahead of the
// ledger (a crash during a snapshot install), it is restored first.
func Open(cfg Config, ledger Ledger) (*Replicator, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("component", "raft")
	// Before anything in the folder is written.
	recorded, err := readNodeID(cfg.FS, cfg.Dir, cfg.NodeID)
	if err != nil {
		return nil, err
	}
	if err := mkdirAllSynced(cfg.FS, cfg.Dir); err != nil {
		return nil, fmt.Errorf("raft dir: %w", err)
	}
	hlog := newHCLogger(log)
	logs, err := OpenLogStore(cfg.FS.PathJoin(cfg.Dir, "log"), cfg.FS, log)
	if err != nil {
		return nil, err
	}
	since, err := loadMemberSince(logs)
	if err != nil {
		_ = logs.Close()
		return nil, err
	}
	watch := newRemovalWatch(cfg.NodeID, since, func(i uint64) error { return storeMemberSince(logs, i) })
	snaps, err := OpenSnapshotStore(cfg.FS.PathJoin(cfg.Dir, "snapshots"), cfg.FS, cfg.SnapshotRetain, log)
	if err != nil {
		_ = logs.Close()
		return nil, fmt.Errorf("raft snapshots: %w", err)
	}
	// Before anything reads the snapshots: it removes one the ledger
	// refuses.
	refusedAtStart, err := catchUpFromSnapshot(snaps, logs, ledger, log)
	if err != nil {
		_ = logs.Close()
		return nil, err
	}
	// A snapshot's configuration is the committed one at its index:
	// the newest one's now, every later one's when it is stored.
	snaps.stored = func(m raft.SnapshotMeta) { watch.committed(m.ConfigurationIndex, m.Configuration) }
	if metas, err := snaps.List(); err == nil && len(metas) > 0 {
		watch.committed(metas[0].ConfigurationIndex, metas[0].Configuration)
	}
	hadState, err := raft.HasExistingState(logs, logs, snaps)
	if err != nil {
		_ = logs.Close()
		return nil, fmt.Errorf("raft state: %w", err)
	}
	if !recorded {
		if err := recordNodeID(cfg.FS, cfg.Dir, cfg.NodeID); err != nil {
			_ = logs.Close()
			return nil, err
		}
	}
	if cfg.TLS != nil {
		// Whatever built the config: every peer, in and out, must present
		// a certificate that names a node id.
		tc := cfg.TLS.Clone()
		tc.ClientAuth, tc.VerifyConnection = tls.RequireAndVerifyClientCert, verifyPeerNode
		cfg.TLS = tc
	} else if !netpolicy.IsLoopback(cfg.RaftAddr) || cfg.Advertise != "" && !netpolicy.IsLoopback(cfg.Advertise) {
		log.Warn("INSECURE: raft runs on plain TCP beyond loopback (--raft-insecure): anyone who reaches this raft port can write events "+
			"that this node will sign, remove members and read the ledger's state; use mutual TLS (greffe cluster certs, --raft-tls-*) "+
			"unless every host of this network is trusted", "raft_addr", cfg.RaftAddr, "advertise", cfg.Advertise)
	}
	ln, err := net.Listen("tcp", cfg.RaftAddr)
	if err != nil {
		_ = logs.Close()
		return nil, fmt.Errorf("raft listen %s: %w", cfg.RaftAddr, err)
	}
	if cfg.Advertise == "" {
		cfg.Advertise = cfg.RaftAddr
		if _, port, _ := net.SplitHostPort(cfg.RaftAddr); port == "0" {
			cfg.Advertise = ln.Addr().String()
		}
	}
	adv, err := net.ResolveTCPAddr("tcp", cfg.Advertise)
	if err != nil {
		_ = ln.Close()
		_ = logs.Close()
		return nil, fmt.Errorf("raft advertise %s: %w", cfg.Advertise, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Replicator{cfg: cfg, ledger: ledger, logs: logs, hadState: hadState, res: resolver{}, watch: watch,
		refusals: newRefusalLog(log),
		pending:  make(chan *proposal, proposalQueue), fatalCh: make(chan error, 1),
		obsCh: make(chan raft.Observation, observerQueue), peers: map[string]NodeInfo{},
		done: make(chan struct{}), ctx: ctx, cancel: cancel}
	p.readyMu.ch = make(chan struct{})
	if p.knownKeys, err = loadPeerKeys(logs); err != nil {
		cancel()
		_ = ln.Close()
		_ = logs.Close()
		return nil, err
	}
	for id, a := range cfg.Peers {
		p.res[raft.ServerID(id)] = raft.ServerAddress(a)
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	// Before the mux layer: it answers the info protocol (p.info reads the
	// FSM's counters) as soon as it accepts, before Open returns.
	p.fsm = newFSM(ledger, log, p.setFatal, watch.committed)
	p.fsm.snaps = snaps
	p.fsm.refused.Add(refusedAtStart)
	p.mux = newMuxLayer(ln, adv, cfg.TLS, p.info, p.refusals)
	var provider raft.ServerAddressProvider
	if len(p.res) > 0 {
		// Only with overrides: raft warns on every dial the provider does
		// not resolve.
		provider = p.res
	}
	p.trans = newAuthTransport(p.mux, cfg.NodeID, hlog, p.refusals, provider)
	p.fsm.sender = p.trans.takeInstallSender
	// Raft connections are served from now on; their RPCs wait until
	// raft runs (p.trans.start).
	p.mux.start(p.trans.serve, p.memberAt)
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.HeartbeatTimeout, rc.ElectionTimeout = cfg.HeartbeatTimeout, cfg.ElectionTimeout
	rc.LeaderLeaseTimeout, rc.CommitTimeout = cfg.LeaderLeaseTimeout, cfg.CommitTimeout
	rc.TrailingLogs, rc.SnapshotThreshold, rc.SnapshotInterval = cfg.TrailingLogs, cfg.SnapshotThreshold, cfg.SnapshotInterval
	if cfg.TrailingLogs == 0 {
		// Until entries have been measured: 10240 (raft's default).
		rc.TrailingLogs = initialTrailingLogs
	}
	// Apply hands a proposal over without waiting for raft's main loop,
	// which may be in an fsync: the store's pipeline keeps the next batch
	// coming, and raft logs the queued ones in one write.
	rc.BatchApplyCh = true
	// Raft would stop itself, behind stopRaft's back, when a leader
	// commits its own removal; it steps down instead, and the maintain
	// loop, which notices a removal within MaintainInterval, stops it.
	rc.ShutdownOnRemove = false
	// The ledger is durable by itself: every batch is stored with its raft
	// index, and everything up to the newest snapshot was synced when it
	// was taken; raft replays the rest of its log. Restoring the newest
	// snapshot at each start would copy the whole ledger for nothing.
	// catchUpFromSnapshot covers the one case where the ledger is behind
	// its snapshot.
	rc.NoSnapshotRestoreOnStart = true
	rc.NoLegacyTelemetry = true
	rc.Logger = hlog
	// A ledger that already holds events when its node bootstraps a new
	// cluster (a single node's ledger, or one restored from a backup)
	// seeds it with a snapshot instead of an empty log (seed.go).
	seeded := false
	if cfg.Bootstrap && !hadState && (ledger.Head().Size > 0 || ledger.AppliedIndex() > 0) {
		self := raft.Server{Suffrage: raft.Voter, ID: rc.LocalID, Address: p.trans.LocalAddr()}
		if err := seedCluster(snaps, ledger, self, p.trans, log); err != nil {
			p.closePartial()
			return nil, err
		}
		seeded = true
	}
	cache, err := raft.NewLogCache(cfg.LogCacheEntries, logs)
	if err != nil {
		p.closePartial()
		return nil, err
	}
	r, err := raft.NewRaft(rc, p.fsm, cache, logs, snaps, p.trans)
	if err != nil {
		p.closePartial()
		return nil, fmt.Errorf("start raft: %w", err)
	}
	p.raft = r
	p.rptr.Store(r)
	// Before RPCs reach raft: installs are checked against its state
	// (snapindex.go).
	snaps.vet, p.fsm.raftApplied = p.vetReceived, r.AppliedIndex
	p.trans.start(func() raft.Configuration { return r.GetConfiguration().Configuration() })
	if cfg.Bootstrap && !hadState && !seeded {
		f := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: p.trans.LocalAddr()}}})
		if err := f.Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			_ = r.Shutdown().Error()
			p.closePartial()
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
	}
	p.obs = raft.NewObserver(p.obsCh, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.RaftState)
		return ok
	})
	r.RegisterObserver(p.obs)
	ledger.SetProposer(p)
	p.wg.Add(2)
	go func() { defer p.wg.Done(); p.waitLoop() }()
	go func() { defer p.wg.Done(); p.maintainLoop() }()
	return p, nil
}

func (p *Replicator) closePartial() {
	_ = p.mux.Close()
	_ = p.trans.Close()
	_ = p.logs.Close()
	p.cancel()
}

// catchUpFromSnapshot restores the newest snapshot when it is ahead of the
// ledger: a crash between raft saving an installed snapshot and the ledger
// swapping it in. Raft will not replay entries below its snapshot.
//
// A snapshot the ledger refuses there (isRefusal) was never this cluster's
// history: it is what a crash left of a forged install, between raft
// saving it and the ledger refusing it (or a node of an earlier version
// kept). It is removed, logged and counted (refused), and the next newest
// is considered, so that the node starts on its own ledger, with raft
// taking its applied index from a snapshot it took or installed
// (refused.go). Unless the raft log no longer holds the entries after that
// next snapshot (the refused one took the place of the node's own, reaped
// by an earlier version): raft could not replay them, the node cannot
// start on its own ledger, and the error says so, with the refused
// snapshot left in place.
func catchUpFromSnapshot(snaps *SnapshotStore, logs raft.LogStore, ledger Ledger, log *slog.Logger) (refused uint64, err error) {
	for {
		metas, err := snaps.newest(2)
		if err != nil || len(metas) == 0 {
			return refused, err
		}
		m := metas[0]
		err = restoreIfAhead(snaps, m, ledger, log)
		if err == nil || !isRefusal(err) {
			return refused, err
		}
		next := uint64(0) // raft's applied index at its start, without m
		if len(metas) > 1 {
			next = metas[1].Index
		}
		first, ferr := logs.FirstIndex()
		if ferr != nil {
			return refused, fmt.Errorf("raft log: %w", ferr)
		}
		if first > next+1 {
			return refused, fmt.Errorf("raft snapshot %s (index %d) is refused by the ledger, and the raft log starts at index %d, "+
				"after the next newest snapshot (index %d): without the refused one this node cannot replay the entries between them, "+
				"so it cannot start on its own ledger; remove its data folder and add it to the cluster again (docs/CLUSTER.md, Snapshots): %w",
				m.ID, m.Index, first, next, err)
		}
		log.Error("removing a raft snapshot the ledger refuses (a forged or faulty install left by a crash): the node starts on its own ledger",
			"snapshot", m.ID, "index", m.Index, "term", m.Term, "applied", ledger.AppliedIndex(), "err", err)
		if err := snaps.discard(m.ID); err != nil {
			return refused, err
		}
		refused++
	}
}

// restoreIfAhead restores the snapshot m when it is ahead of the ledger.
// One received from a leader that the ledger never took (a crash came
// between raft saving it and the ledger's answer) is checked even when it
// is not ahead: its name was vetted before it was put in place
// (snapindex.go), but not its content, which must then be the ledger's own
// state (the ledger installed it before the crash, or already held it: the
// answer to the install was lost, and the leader sent it again); the
// ledger checks that it is. Once the ledger took it, it is a snapshot like
// the others.
func restoreIfAhead(snaps *SnapshotStore, m *raft.SnapshotMeta, ledger Ledger, log *slog.Logger) error {
	_, rc, err := snaps.Open(m.ID)
	if err != nil {
		return fmt.Errorf("open snapshot %s: %w", m.ID, err)
	}
	info, err := pebblelog.ReadSnapshotInfo(rc)
	_ = rc.Close()
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", m.ID, err)
	}
	received := snaps.received(m.ID)
	applied := ledger.AppliedIndex()
	switch {
	case info.Applied > applied:
		log.Warn("the ledger is behind the newest snapshot: restoring it", "snapshot", m.ID, "snapshot_index", info.Applied, "applied", applied)
	case !received:
		return nil
	case info.Applied < applied:
		return fmt.Errorf("%w: a received snapshot its ledger never took holds the ledger's state at raft index %d, the ledger is at %d",
			ErrSnapshotIndex, info.Applied, applied)
	default:
		log.Info("checking a received snapshot its ledger never took (a crash came before the ledger's answer)", "snapshot", m.ID,
			"snapshot_index", info.Applied, "applied", applied)
	}
	_, rc, err = snaps.Open(m.ID)
	if err != nil {
		return fmt.Errorf("open snapshot %s: %w", m.ID, err)
	}
	defer rc.Close()
	if err := ledger.Restore(rc); err != nil {
		return err
	}
	if received {
		return snaps.markTaken(m.ID)
	}
	return nil
}

// Addr returns the advertised raft address.
func (p *Replicator) Addr() string { return p.cfg.Advertise }

// HadState reports whether this node already was a cluster member when it
// started (so it must not ask to join again).
func (p *Replicator) HadState() bool { return p.hadState }

// NodeID returns this node's id.
func (p *Replicator) NodeID() string { return p.cfg.NodeID }

// setFatal is called by the FSM when the ledger cannot apply a committed
// entry; the maintain loop shuts raft down (raft cannot be shut down from
// its own FSM goroutine).
func (p *Replicator) setFatal(err error) {
	select {
	case p.fatalCh <- err:
	default:
	}
}

// Done is closed when this node's member stopped on its own: it was removed
// from the cluster (Err is ErrRemoved) or its ledger failed to apply a
// committed entry. The node should then exit.
func (p *Replicator) Done() <-chan struct{} { return p.done }

// Err returns why Done was closed, or nil.
func (p *Replicator) Err() error {
	if e := p.doneErr.Load(); e != nil {
		return *e
	}
	return nil
}

func (p *Replicator) stopped(err error) {
	if p.closing.Load() {
		return
	}
	p.doneOnce.Do(func() {
		p.doneErr.Store(&err)
		close(p.done)
	})
}

// maintainLoop establishes leadership (a barrier in each new term), notices
// that raft stopped, refreshes peers and promotes caught-up non-voters.
func (p *Replicator) maintainLoop() {
	tick := time.NewTicker(p.cfg.MaintainInterval)
	defer tick.Stop()
	leaderCh := p.raft.LeaderCh()
	p.refreshPeers()
	for {
		select {
		case <-p.ctx.Done():
			return
		case isLeader := <-leaderCh:
			p.setReady(0)
			if isLeader {
				p.establish()
			}
		case o := <-p.obsCh:
			if st, ok := o.Data.(raft.RaftState); ok && st == raft.Shutdown {
				p.stopped(errRaftStopped)
			}
		case err := <-p.fatalCh:
			p.cfg.Logger.Error("the ledger failed to apply a committed raft entry: stopping this member", "err", err)
			_ = p.stopRaft()
			p.stopped(err)
		case <-tick.C:
			p.adaptTrailingLogs()
			if removed := p.refreshPeers(); removed || p.watch.removed() {
				p.cfg.Logger.Warn("this node was removed from the cluster by a committed configuration: stopping", "node", p.cfg.NodeID,
					"configuration_index", p.watch.removedAt())
				_ = p.stopRaft()
				p.stopped(ErrRemoved)
				continue
			}
			p.ticks.Add(1)
			if p.raft.State() == raft.Leader {
				if p.ready.Load() != p.raft.CurrentTerm() {
					p.establish() // a previous barrier failed: try again
				}
				p.promote()
			}
		}
	}
}

// establish commits and applies a barrier in the current term. Until it
// has, the leader does not know that its commit index covers every entry
// committed by earlier leaders, and linearizable reads wait.
func (p *Replicator) establish() {
	term := p.raft.CurrentTerm()
	var f raft.Future
	if !p.toRaft(func() { f = p.raft.Barrier(p.cfg.ApplyTimeout) }) {
		return // stopping
	}
	err := f.Error()
	p.apply.inRaft.Done()
	if err != nil {
		p.cfg.Logger.Debug("leadership barrier", "term", term, "err", err)
		return
	}
	if p.raft.State() != raft.Leader || p.raft.CurrentTerm() != term {
		return
	}
	if ixf, ok := f.(raft.IndexFuture); ok {
		// Raft applied every entry up to the barrier before answering it;
		// no-ops and barriers never reach the FSM, so say so here.
		p.fsm.advance(ixf.Index())
	}
	p.setReady(term)
	p.cfg.Logger.Info("leading", "term", term, "node", p.cfg.NodeID)
}

func (p *Replicator) setReady(term uint64) {
	p.ready.Store(term)
	p.readyMu.Lock()
	close(p.readyMu.ch)
	p.readyMu.ch = make(chan struct{})
	p.readyMu.Unlock()
}

// Close stops raft, the transport and the raft log, and waits for its
// goroutines. Proposals in flight end with events.ErrOutcomeUnknown.
// Idempotent.
func (p *Replicator) Close() error {
	p.closeOnce.Do(func() {
		p.closing.Store(true)
		err := p.stopRaft()
		p.raft.DeregisterObserver(p.obs)
		p.cancel()
		p.wg.Wait()
		err = errors.Join(err, p.trans.Close(), p.mux.Close(), p.logs.Close())
		p.closeErr = err
	})
	return p.closeErr
}

// info is what this node answers on its raft port.
func (p *Replicator) info() NodeInfo {
	in := p.cfg.Info()
	in.NodeID = p.cfg.NodeID
	in.RaftAddr = p.cfg.Advertise
	in.LedgerID = p.ledger.LedgerID()
	in.HeadSize = p.ledger.Head().Size
	if r := p.rptr.Load(); r != nil {
		in.State = r.State().String()
		in.Term = r.CurrentTerm()
		in.LastIndex = r.LastIndex()
		if f := r.GetConfiguration(); f.Error() == nil {
			for _, s := range f.Configuration().Servers {
				in.Members = append(in.Members, string(s.ID))
			}
		}
	}
	in.AppliedIndex = p.fsm.applied.Load()
	in.Restores = p.fsm.restores.Load()
	in.CommittedConfigIndex, in.CommittedMembers = p.watch.view()
	return in
}

// memberAt returns the id of the member of the latest configuration that
// this node dials at addr (its configured address or its override), or ""
// when none is: with TLS, the certificate of whoever answers at addr must
// name that id.
func (p *Replicator) memberAt(addr string) string {
	r := p.rptr.Load()
	if r == nil {
		return ""
	}
	for _, s := range r.GetConfiguration().Configuration().Servers {
		if string(s.Address) == addr || p.res.dialAddr(s.ID, s.Address) == addr {
			return string(s.ID)
		}
	}
	return ""
}
