// Package node wires a greffe node: the data folder, the Pebble store, the
// signing keys, the HTTP API and (as they are configured) commands,
// projections and the raft replicator. cmd/greffe only parses flags into a
// Config and calls Open and Serve, so every command can be run from a test
// without cobra.
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/backup"
	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/projections"
	"github.com/greffe/greffe/witness"
)

// The parts the node hands to api, which defines what it needs of each and
// imports none of them (no store, no raft): pinned here, where they meet.
var (
	_ api.Ledger        = (*pebblelog.Store)(nil)
	_ api.FailingLedger = (*pebblelog.Store)(nil)
	_ api.StreamLister  = (*pebblelog.Store)(nil)
	_ api.Backups       = (*backup.Taker)(nil)
	_ backup.Ledger     = (*pebblelog.Store)(nil)
	_ api.ReadModels    = (*projections.Set)(nil)
	_ api.Cosignatures  = (*witness.Collector)(nil)
	_ api.KeyRing       = (*KeyRing)(nil)
)

// Version is the greffe version reported by nodes and executors.
const Version = "0.1.0"

// Config configures a node. Zero values mean defaults.
type Config struct {
	// DataDir holds everything the node stores. Default ./greffe-data.
	DataDir string
	// NodeID names the node. Default "n1".
	NodeID string
	// API configures the HTTP server (its Addr defaults to 127.0.0.1:7070).
	API api.Config
	// Store tunes the Pebble store; Dir, Signers and LedgerID are set by the
	// node.
	Store pebblelog.Config
	// LedgerID is the identity of a new ledger (default: random). An
	// existing data folder keeps its own; a mismatch refuses to start.
	LedgerID string
	// Logger receives the node's logs. Default: discard.
	Logger *slog.Logger
	// Clock is the node's clock: the time of every command and the time the
	// read models are judged at. Default: the system clock.
	Clock func() time.Time
	// SetClock, when set, sets Clock and lets a command carry its own time
	// ("at"; a commands.ManualClock's Set): for tests, fixtures and
	// `greffe demo` only, never for a ledger that is evidence.
	SetClock func(time.Time)
	// Policy is the node's policy (budgets, freshness windows, screens).
	// Nil means aggregates.DefaultPolicy(); an invalid one refuses to start.
	Policy *aggregates.Policy
	// Ecosystem turns on the Kafka export and the KurrentDB gRPC surface
	// (node/ecosystem.go). Zero: both off.
	Ecosystem EcosystemConfig
	// Cluster makes the node a raft cluster member (node/cluster.go); the
	// zero value is a single node.
	Cluster ClusterConfig
	// Witness sends the node's checkpoints to witnesses
	// (node/witnesses.go); the zero value: none.
	Witness WitnessConfig
}

// Node is a running greffe node. Open starts it; Close stops it.
type Node struct {
	cfg   Config
	Store *pebblelog.Store
	API   *api.Server
	Keys  *KeySet
	// Commands decides and appends commands; Projections keeps the read
	// models (node/domain.go).
	Commands    *commands.Handler
	Projections *projections.Set
	// Ecosystem holds the Kafka exporter and the gRPC surface, when on.
	Ecosystem *Ecosystem
	// Witnesses collects the witnesses' cosignatures (nil: no witnesses).
	Witnesses *witness.Collector

	closers []func() error
	wg      sync.WaitGroup
	once    sync.Once
	addr    net.Addr
	cluster *clusterMember // nil for a single node (node/cluster.go)
}

// DefaultDataDir is where `greffe serve` keeps its data by default.
const DefaultDataDir = "greffe-data"

// setDefaults gives the node's own fields left zero their defaults; each
// part's Config (API, Store, Cluster) is defaulted and validated by the
// part, the API's before anything is created (Open).
func (c *Config) setDefaults() {
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.NodeID == "" {
		c.NodeID = "n1"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Open opens the data folder (creating it on first start), the store and
// the keys, builds the API and binds its address. Call Serve to serve.
//
// The HTTP address is checked and bound first: an address in use, or one
// beyond loopback without tokens, is refused before anything is created
// (issue #16: serve used to create the folder and its keys, then fail).
// A data folder Open created is removed again when Open fails.
func Open(cfg Config) (*Node, error) {
	cfg.setDefaults()
	if err := cfg.API.Check(); err != nil {
		return nil, err
	}
	if cfg.API.Listener == nil {
		addr := cfg.API.Addr
		if addr == "" {
			addr = "127.0.0.1:7070"
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("listen %s: %w; another process (a greffe node?) uses that address: stop it, or choose another with --http", addr, err)
		}
		cfg.API.Listener = ln
	}
	created, err := makeDataDir(cfg.DataDir)
	if err != nil {
		cfg.API.Listener.Close()
		return nil, err
	}
	n, err := open(cfg)
	if err != nil { // n is nil
		// Never served, so no server closed it (http.Server closes only
		// the listeners it serves).
		cfg.API.Listener.Close()
		// Only a folder this call made, and never one another process
		// holds: two nodes started at once on a new folder both see it
		// missing, and the one that loses the lock must not delete the
		// ledger the other is writing.
		if created && !errors.Is(err, inspect.ErrLocked) {
			_ = os.RemoveAll(cfg.DataDir)
		}
		return nil, err
	}
	return n, nil
}

// makeDataDir makes dir (and its parents) and reports whether this call
// made dir itself: os.Mkdir is atomic, so of several processes starting on
// a new folder at once only one is told it created it.
func makeDataDir(dir string) (created bool, err error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return false, fmt.Errorf("data dir: %w", err)
	}
	switch err := os.Mkdir(dir, 0o700); {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrExist):
		return false, nil
	default:
		return false, fmt.Errorf("data dir: %w", err)
	}
}

func open(cfg Config) (*Node, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	n := &Node{cfg: cfg}
	sc := cfg.Store
	sc.Dir = filepath.Join(cfg.DataDir, "ledger")
	sc.LedgerID = cfg.LedgerID
	sc.Logger = cfg.Logger
	if err := n.prepareCluster(&sc); err != nil {
		return nil, err
	}
	st, err := pebblelog.Open(sc)
	if err != nil {
		return nil, err
	}
	n.Store = st
	n.closers = append(n.closers, st.Close)
	// Backup copies a crash left next to the ledger (GET /v1/backup),
	// removed once the store opened: a store refused as damaged leaves
	// the data folder as it found it, for the operator (issue #13).
	if err := pebblelog.RemoveBackupLeftovers(sc.Dir, sc.FS); err != nil {
		n.Close()
		return nil, err
	}
	ks, err := LoadOrCreateKeys(cfg.DataDir, st.Origin())
	if err != nil {
		n.Close()
		return nil, err
	}
	n.Keys = ks
	switch {
	case ks.Created != "" && len(ks.Verifiers) > 1:
		cfg.Logger.Warn("no key of the data folder could sign (restored without private keys?): created a new checkpoint signing key; give its verifier key to witnesses and auditors",
			"verifier", ks.Created)
	case ks.Created != "":
		cfg.Logger.Info("created the node's checkpoint signing key", "verifier", ks.Created)
	}
	if err := st.SetSigners(ks.Signers); err != nil {
		n.Close()
		return nil, err
	}
	if err := n.openWitnesses(); err != nil {
		n.Close()
		return nil, err
	}
	ac := cfg.API
	if n.Witnesses != nil {
		ac.Cosignatures = n.Witnesses
	}
	ac.NodeID = cfg.NodeID
	build := Build()
	ac.Version, ac.Build = build.Version, &build
	ac.Logger = cfg.Logger
	if err := n.openCluster(&ac); err != nil {
		n.Close()
		return nil, err
	}
	if ac.Verifiers == nil {
		ac.Verifiers = func() []string { return append([]string(nil), ks.Verifiers...) }
	}
	srv, err := api.New(ac, st)
	if err != nil {
		n.Close()
		return nil, err
	}
	n.API = srv
	// GET /v1/backup: a consistent copy of the ledger and the verifier
	// keys, its manifest signed by the node's keys; the private keys only
	// for an admin who asks (issue #20).
	srv.MountBackup(&backup.Taker{Ledger: st, KeysDir: keysDir(cfg.DataDir), Signers: ks.Signers, NodeID: cfg.NodeID}, api.BackupConfig{})
	n.startKeyRing() // signed appends are checked against the key ring (keyring.go)
	if err := n.openDomain(); err != nil {
		n.Close()
		return nil, err
	}
	n.watchLeases() // leases.go
	if err := n.openEcosystem(); err != nil {
		n.Close()
		return nil, err
	}
	if err := n.openObserve(); err != nil { // metrics, /readyz, dashboard (observe.go)
		n.Close()
		return nil, err
	}
	addr, err := srv.Listen()
	if err != nil {
		n.Close()
		return nil, err
	}
	n.addr = addr
	// The API closes first so that no request reaches a closed store.
	n.closers = append([]func() error{srv.Close}, n.closers...)
	if err := n.startCluster(); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// Addr returns the bound HTTP address.
func (n *Node) Addr() net.Addr { return n.addr }

// URL returns the node's base URL.
func (n *Node) URL() string {
	scheme := "http"
	if n.cfg.API.TLSCert != "" {
		scheme = "https"
	}
	return scheme + "://" + n.addr.String()
}

// Serve serves until ctx ends, then closes the node.
func (n *Node) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		errc <- n.API.Serve()
	}()
	n.cfg.Logger.Info("serving", "url", n.URL(), "data", n.cfg.DataDir, "ledger", n.Store.LedgerID(), "head", n.Store.Head().Size)
	select {
	case <-ctx.Done():
		return n.Close()
	case err := <-errc:
		cerr := n.Close()
		return errors.Join(err, cerr)
	case <-n.clusterDone():
		return errors.Join(n.clusterStopped(), n.Close())
	}
}

// Close stops everything in order and waits. Idempotent.
func (n *Node) Close() error {
	var err error
	n.once.Do(func() {
		for _, c := range n.closers {
			err = errors.Join(err, c())
		}
		n.wg.Wait()
	})
	return err
}
