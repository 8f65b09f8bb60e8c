package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/transparency-dev/merkle/compact"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/config"
	"github.com/greffe/greffe/internal/netpolicy"
	"github.com/greffe/greffe/internal/progress"
	"github.com/greffe/greffe/wire"
)

// Ledger is what the HTTP API needs from the store (pebblelog.Store
// implements it). Every method is safe for concurrent use.
type Ledger interface {
	events.Log
	// LedgerID and Origin identify the ledger and its checkpoints.
	LedgerID() string
	Origin() string
	// LatestCheckpoint signs the acknowledged head if it grew since the last
	// checkpoint; CheckpointAt returns (or signs) the checkpoint of a size.
	LatestCheckpoint(ctx context.Context) (events.Checkpoint, error)
	CheckpointAt(ctx context.Context, size uint64) (events.Checkpoint, error)
	// ReadHashes serves proofs; ReadLevel and ReadRaw serve tlog tiles.
	ReadHashes(ctx context.Context, ids []compact.NodeID) ([][]byte, error)
	ReadLevel(ctx context.Context, level uint, lo, hi uint64) ([][]byte, error)
	ReadRaw(ctx context.Context, lo, hi uint64) ([][]byte, error)
}

// Config configures the HTTP server. Zero values mean defaults.
type Config struct {
	// Addr is the listen address. Default 127.0.0.1:7070. Without tokens,
	// only loopback addresses are accepted.
	Addr string
	// Listener, when set, is the bound socket to serve instead of binding
	// Addr (node.Open binds first, before creating anything); the Server
	// owns and closes it.
	Listener net.Listener
	// Tokens enables bearer-token authentication. Nil: none (loopback only).
	Tokens *Tokens
	// TLSCert and TLSKey enable TLS when both are set (PEM files).
	TLSCert, TLSKey string
	// NodeID names this node in /v1/info and logs.
	NodeID string
	// Version is the binary's version, reported in /v1/info.
	Version string
	// Build is what the binary is, reported in /v1/info as "build"
	// (nil: left out).
	Build *wire.VersionOut
	// Verifiers are the note verifier keys of the checkpoint signers,
	// published in /v1/info (the cluster adds every node's keys).
	Verifiers func() []string
	// Logger receives request errors. Default: discard.
	Logger *slog.Logger
	// ShutdownGrace bounds graceful shutdown. Default 5 s.
	ShutdownGrace time.Duration
	// BodyReadTimeout bounds the time to receive a request's body, counted
	// from when its handler starts (the headers before it are bounded by
	// ReadHeaderTimeout, 10 s). A client that has not sent the whole body
	// by then gets 408 body_timeout and its connection is closed, instead
	// of holding a goroutine and its buffer for as long as it keeps the
	// connection. It applies only to requests that carry a body, and stops
	// once the body has been read, so neither subscriptions (GETs that
	// stream for hours) nor a slow append after its body arrived are cut.
	// Default 30 s (the largest body, 6 MiB, takes 25 s over a 2 Mbit/s
	// link). Negative: no bound. Fixed at New.
	BodyReadTimeout time.Duration
	// Cosignatures are the witnesses' cosignatures of the node's
	// checkpoints (*witness.Collector), served on GET /v1/checkpoint and
	// in proven answers (api/proven.go). Nil: the node has no witnesses.
	Cosignatures Cosignatures
	// WriteTimeout bounds how long the node waits for a client to take
	// each piece of an answer: every write to the connection, of at most
	// 64 KiB, must complete within it (api/limits.go). A client that
	// stops reading (a subscriber that never reads, a reader sitting on a
	// page) has its connection closed when it passes, and what its
	// request held is released; a subscriber resumes with Last-Event-ID.
	// Default 30 s (64 KiB take a quarter of a second at 2 Mbit/s).
	// Negative: no bound. Fixed at New.
	WriteTimeout time.Duration
	// MaxSubscriptions caps the SSE subscriptions (GET /v1/subscribe)
	// served at once, MaxSubscriptionsPerPrincipal those of one principal
	// (a token's name; without tokens every caller is the one principal
	// "anonymous"). One past either cap is refused with 429
	// too_many_subscriptions and Retry-After. Defaults
	// DefaultMaxSubscriptions and DefaultMaxSubscriptionsPerPrincipal;
	// the cap per principal may not exceed the total. Fixed at New.
	MaxSubscriptions, MaxSubscriptionsPerPrincipal int
	// MaxProvenReads caps the proven reads (a GET with ?prove) being
	// answered at once, MaxProvenReadsPerPrincipal those of one principal:
	// one past either is refused with 429 too_many_proven_reads and
	// Retry-After. Defaults DefaultMaxProvenReads and
	// DefaultMaxProvenReadsPerPrincipal. Fixed at New.
	MaxProvenReads, MaxProvenReadsPerPrincipal int
}

// Check reports what would make New or Listen refuse cfg, without binding
// or creating anything: a non-loopback address without tokens, half a TLS
// pair, a cap that cannot hold, a certificate that does not load.
// node.Open calls it before it creates the data folder (issue #16).
func (cfg Config) Check() error {
	cfg.setDefaults()
	addr := cfg.Addr
	if cfg.Listener != nil {
		addr = cfg.Listener.Addr().String()
	}
	if !cfg.Tokens.Enabled() && !netpolicy.IsLoopback(addr) {
		return fmt.Errorf("%w (%s); give --tokens FILE, or listen on 127.0.0.1", ErrInsecure, addr)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.TLSCert != "" {
		if _, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey); err != nil {
			return fmt.Errorf("tls: %w", err)
		}
	}
	return nil
}

// ErrInvalidConfig wraps every problem of a Config (a
// *config.ValidationError).
var ErrInvalidConfig = errors.New("api: invalid config")

// Validate reports every problem of cfg at once, after defaults (New
// applies them; Check calls it): half a TLS pair, a cap that is negative
// or whose cap per principal exceeds its total.
func (cfg *Config) Validate() error {
	var p config.Problems
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		p.Addf("--tls-cert and --tls-key go together")
	}
	for _, c := range []struct {
		name, flags         string
		perPrincipal, total int
	}{
		{"MaxSubscriptions", "greffe serve --max-subscriptions-per-principal, --max-subscriptions", cfg.MaxSubscriptionsPerPrincipal, cfg.MaxSubscriptions},
		{"MaxProvenReads", "lower the one or raise the other", cfg.MaxProvenReadsPerPrincipal, cfg.MaxProvenReads},
	} {
		switch {
		case c.perPrincipal < 0 || c.total < 0:
			p.Addf("%s %d and %sPerPrincipal %d: a cap is positive (0: the default)", c.name, c.total, c.name, c.perPrincipal)
		case c.perPrincipal > c.total:
			p.Addf("%sPerPrincipal %d is above %s %d: one principal cannot hold more than the node (%s)", c.name, c.perPrincipal, c.name, c.total, c.flags)
		}
	}
	return p.Err(ErrInvalidConfig)
}

// setDefaults gives the fields left zero their defaults.
func (cfg *Config) setDefaults() {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:7070"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 5 * time.Second
	}
	if cfg.BodyReadTimeout == 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if cfg.Verifiers == nil {
		cfg.Verifiers = func() []string { return nil }
	}
	for _, f := range []struct {
		v   *int
		def int
	}{
		{&cfg.MaxSubscriptions, DefaultMaxSubscriptions},
		{&cfg.MaxSubscriptionsPerPrincipal, DefaultMaxSubscriptionsPerPrincipal},
		{&cfg.MaxProvenReads, DefaultMaxProvenReads},
		{&cfg.MaxProvenReadsPerPrincipal, DefaultMaxProvenReadsPerPrincipal},
	} {
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
}

// ErrInsecure is returned when the server would listen beyond loopback
// without authentication.
var ErrInsecure = errors.New("api: refusing to listen on a non-loopback address without --tokens")

// Server is greffe's HTTP API. Create it with New, add routes with Handle
// before Serve, stop it with Close.
type Server struct {
	cfg    Config
	ledger Ledger
	mux    *http.ServeMux
	srv    *http.Server

	mu       sync.Mutex
	listener net.Listener

	// base is the parent of every request context; Close cancels it so that
	// subscriptions end instead of holding shutdown until its deadline.
	base       context.Context
	cancelBase context.CancelFunc

	subs   subscriptions // the SSE subscriptions being served (subscriptions.go)
	quotas quotas        // the caps on what callers hold (limits.go)

	// handler is what the http.Server serves below the browser checks:
	// the mux with its body bounds, and the forwarder in front of them in
	// a cluster (UseRouter). Set before Serve.
	handler http.Handler

	// openapiDoc builds the OpenAPI document once (api/openapi.go).
	openapiDoc func() ([]byte, error)

	// table lists every route mounted, in order (Routes); guarded by mu.
	table []Route
}

// Route is one mounted route: its pattern ("GET /v1/info") and the roles
// that may call it (none for a public route). The route table is what
// docs/openapi.json's paths are checked against (api/openapi.go).
type Route struct {
	Pattern string
	Roles   []Role
	Public  bool
}

// Routes returns the routes mounted so far, in the order they were added.
// The slice is a copy.
func (s *Server) Routes() []Route {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.table)
}

func (s *Server) record(r Route) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.table = append(s.table, r)
}

// New builds the server and its routes. It does not listen yet.
func New(cfg Config, ledger Ledger) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.Check(); err != nil { // Validate, and what only a listener checks
		return nil, err
	}
	s := &Server{cfg: cfg, ledger: ledger, mux: http.NewServeMux(), openapiDoc: sync.OnceValues(OpenAPI), quotas: newQuotas(cfg)}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	s.routes()
	s.handler = s.boundBodies(s.mux)
	s.srv = &http.Server{
		Handler:           s.guardBrowsers(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) })),
		ReadHeaderTimeout: 10 * time.Second,
		// No WriteTimeout: subscriptions stream for as long as the client
		// stays; each write is bounded instead (Config.WriteTimeout,
		// internal/progress). No ReadTimeout either: it would also end a
		// subscription, whose connection the server reads to notice the
		// client leave. Request bodies are bounded in size by
		// MaxBytesReader and in time by boundBodies instead.
		IdleTimeout: 2 * time.Minute,
		ErrorLog:    slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
		BaseContext: func(net.Listener) context.Context { return s.base },
	}
	return s, nil
}

// Handle adds a route admitting the given roles (admin always). Call it
// before Serve. Other packages' surfaces (commands, projections, cluster)
// are mounted this way.
func (s *Server) Handle(pattern string, h http.HandlerFunc, roles ...Role) {
	s.record(Route{Pattern: pattern, Roles: slices.Clone(roles)})
	s.mux.HandleFunc(pattern, s.authorize(h, roles...))
}

// HandlePublic adds a route without authentication (health, dashboard
// assets).
func (s *Server) HandlePublic(pattern string, h http.Handler) {
	s.record(Route{Pattern: pattern, Public: true})
	s.mux.Handle(pattern, h)
}

// ReaderRoles returns the roles that may read.
func ReaderRoles() []Role { return readerRoles() }

// Listen binds the address (so that tests can learn the port) without
// serving yet.
func (s *Server) Listen() (net.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener != nil {
		return s.listener.Addr(), nil
	}
	ln := s.cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.cfg.Addr); err != nil {
			return nil, fmt.Errorf("listen %s: %w", s.cfg.Addr, err)
		}
	}
	if s.cfg.WriteTimeout > 0 {
		ln = progress.Listener{Listener: ln, Timeout: s.cfg.WriteTimeout} // under TLS: its records are the writes
	}
	if s.cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(s.cfg.TLSCert, s.cfg.TLSKey)
		if err != nil {
			ln.Close()
			return nil, fmt.Errorf("tls: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	s.listener = ln
	return ln.Addr(), nil
}

// Serve serves until Close. It returns nil after Close.
func (s *Server) Serve() error {
	if _, err := s.Listen(); err != nil {
		return err
	}
	err := s.srv.Serve(s.listener)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close shuts down gracefully within ShutdownGrace, then forcibly.
func (s *Server) Close() error {
	s.cancelBase()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		return s.srv.Close()
	}
	return nil
}

// Handler returns the server's handler (for in-process tests): what
// Serve serves, but the bound on writes, which is the connection's.
func (s *Server) Handler() http.Handler { return s.srv.Handler }

// DefaultBodyReadTimeout is Config.BodyReadTimeout's default.
const DefaultBodyReadTimeout = 30 * time.Second

// boundBodies puts Config.BodyReadTimeout on the connection of every
// request that carries a body: a read deadline set when the handler
// starts. A deadline reached makes the body's Read fail with an *Error
// (408 body_timeout) that the decoders return as it is; it stays in place,
// so that net/http, which tries to drain an unread body before reusing
// the connection, fails at once and closes the connection instead of
// waiting. net/http clears the deadline itself when the body ends (it then
// reads the connection in the background to notice a client that leaves),
// so a handler that works longer once its body has arrived is not cut
// (TestAPI_StalledBodyTimesOut checks both).
//
// Requests without a body (every GET, subscriptions included) are left
// alone, as are connections that cannot take a deadline.
func (s *Server) boundBodies(next http.Handler) http.Handler {
	d := s.cfg.BodyReadTimeout
	if d < 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || http.NewResponseController(w).SetReadDeadline(time.Now().Add(d)) != nil {
			next.ServeHTTP(w, r)
			return
		}
		// A shallow copy: net/http keeps its own reference to the
		// request and drains the original body itself.
		r2 := r.WithContext(r.Context())
		r2.Body = &deadlineBody{ReadCloser: r.Body, limit: d}
		next.ServeHTTP(w, r2)
	})
}

// deadlineBody is a request body read under a connection read deadline
// (boundBodies): it turns the deadline's error into the API's.
type deadlineBody struct {
	io.ReadCloser
	limit time.Duration
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		err = &wire.Error{Code: wire.CodeBodyTimeout,
			Message: fmt.Sprintf("the request body did not arrive within %s of its headers; send the whole body without pausing", b.limit)}
	}
	return n, err
}
