package kurrentgrpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/protos/gossip"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/serverfeatures"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/shared"
	"github.com/EventStore/EventStore-Client-Go/v4/protos/streams"
	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/config"
	"github.com/greffe/greffe/internal/netpolicy"
	"github.com/greffe/greffe/internal/progress"
	"github.com/greffe/greffe/internal/quota"
)

// Config configures the gRPC surface. Zero values mean defaults.
type Config struct {
	// Addr is the listen address, e.g. 127.0.0.1:2113. Default
	// 127.0.0.1:2113 (KurrentDB's port). Without both TLS and Authenticate
	// only loopback addresses are accepted (ErrInsecure).
	Addr string
	// TLS, when set, serves TLS (clients connect with ?tls=true).
	TLS *tls.Config
	// Authenticate, when set, checks every Streams call's credentials
	// (auth.go); the principal's name is recorded as the actor of what it
	// appends. Nil: no authentication, every call appends as Actor.
	Authenticate Authenticator
	// Version is reported by ServerFeatures.GetSupportedMethods. Clients
	// parse it as MAJOR.MINOR.PATCH numbers, so it must be one. Default
	// "0.1.0"; the node sets greffe's version.
	Version string
	// Actor is recorded as the actor of events appended through this
	// surface. Default "anonymous", as for the HTTP API without tokens.
	Actor string
	// ShutdownGrace bounds how long Close lets unary calls finish before it
	// cuts every connection. Subscriptions end at once. Default 5 s.
	ShutdownGrace time.Duration
	// Logger receives errors of calls. Default: discard.
	Logger *slog.Logger
	// MaxConcurrentStreams caps the calls one connection may have open at
	// once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): a client waits for
	// one to end before it starts the next. Default
	// DefaultMaxConcurrentStreams. Fixed at New.
	MaxConcurrentStreams int
	// MaxReads caps the Read calls (reads and subscriptions) served at
	// once, MaxReadsPerPrincipal those of one principal (the
	// authenticated name; every caller is Actor without an Authenticator):
	// one past either is refused with RESOURCE_EXHAUSTED and the code
	// too_many_streams. Defaults DefaultMaxReads and
	// DefaultMaxReadsPerPrincipal; the cap per principal may not exceed
	// the total. Fixed at New.
	MaxReads, MaxReadsPerPrincipal int
	// WriteTimeout bounds how long a send to a client may wait: a Read
	// whose client takes no message for that long (its stream's window is
	// full) is ended and what it held released, and a connection whose
	// peer takes no bytes for that long is closed. Default 30 s.
	// Negative: no bound. Fixed at New.
	WriteTimeout time.Duration
}

// Defaults of the caps (Config); the memory they bound is measured in
// docs/PERFORMANCE.md ("Stalled readers").
const (
	// DefaultMaxConcurrentStreams: the KurrentDB clients multiplex every
	// call of an application over one connection; 128 let a busy one
	// append and read at once (HTTP/2 recommends no fewer than 100), while
	// one connection can no longer open the unbounded number grpc allows
	// by default (80 streams on one connection took 2.4 GB, issue #20).
	DefaultMaxConcurrentStreams = 128
	// DefaultMaxReads: a Read holds at most one page of readPageBytes
	// (512 KiB) and its stream's buffers while its client is slow: 256 of
	// them stay under ~300 MiB (docs/PERFORMANCE.md).
	DefaultMaxReads = 256
	// DefaultMaxReadsPerPrincipal: an application follows a few streams
	// and reads a few more; 32 leave room for several sharing a token,
	// while one cannot take more than an eighth of the node's reads.
	DefaultMaxReadsPerPrincipal = 32
	// DefaultWriteTimeout is Config.WriteTimeout's default, the HTTP
	// API's (api.DefaultWriteTimeout): a client that took nothing for
	// 30 s is not reading.
	DefaultWriteTimeout = 30 * time.Second
)

// KeepaliveMinTime is the shortest interval between client pings the server
// accepts. The EventStore clients ping every 10 s by default (and refuse
// anything shorter), with or without an active call; gRPC's default policy
// (5 min, no pings without calls) would answer them with GOAWAY
// "too_many_pings" and drop idle connections.
const KeepaliveMinTime = 5 * time.Second

// ErrInsecure is returned by New for a non-loopback address without both TLS
// and Authenticate: credentials would travel in clear, or not be asked.
var ErrInsecure = errors.New("kurrentgrpc: refusing to listen on a non-loopback address without TLS and authentication (serve --tls-cert, --tls-key and --tokens)")

// ErrInvalidConfig wraps every configuration problem.
var ErrInvalidConfig = errors.New("kurrentgrpc: invalid config")

var versionRE = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`)

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:2113"
	}
	if c.Version == "" {
		c.Version = "0.1.0"
	}
	if c.Actor == "" {
		c.Actor = "anonymous"
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.MaxConcurrentStreams == 0 {
		c.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if c.MaxReads == 0 {
		c.MaxReads = DefaultMaxReads
	}
	if c.MaxReadsPerPrincipal == 0 {
		c.MaxReadsPerPrincipal = DefaultMaxReadsPerPrincipal
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
}

// Validate reports every problem of c at once. Call it after defaults are
// applied (New does both).
func (c *Config) Validate() error {
	var p config.Problems
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		p.Addf("Addr %q: %v", c.Addr, err)
	}
	if !versionRE.MatchString(c.Version) {
		p.Addf("Version %q: clients parse MAJOR.MINOR.PATCH numbers", c.Version)
	}
	if c.ShutdownGrace < 0 {
		p.Addf("ShutdownGrace %s must be >= 0", c.ShutdownGrace)
	}
	if err := events.ValidateStreamName("Actor", c.Actor); err != nil {
		p = append(p, err.Error())
	}
	if c.MaxConcurrentStreams < 0 {
		p.Addf("MaxConcurrentStreams %d: a cap is positive (0: the default)", c.MaxConcurrentStreams)
	}
	switch {
	case c.MaxReads < 0 || c.MaxReadsPerPrincipal < 0:
		p.Addf("MaxReads %d and MaxReadsPerPrincipal %d: a cap is positive (0: the default)", c.MaxReads, c.MaxReadsPerPrincipal)
	case c.MaxReadsPerPrincipal > c.MaxReads:
		p.Addf("MaxReadsPerPrincipal %d is above MaxReads %d: one principal cannot hold more than the surface", c.MaxReadsPerPrincipal, c.MaxReads)
	}
	return p.Err(ErrInvalidConfig)
}

// Server is the gRPC surface over a log. New builds it, Listen binds, Serve
// serves until Close. Safe for concurrent use.
type Server struct {
	cfg      Config
	log      events.Log
	grpc     *grpc.Server
	instance uuid.UUID

	mu       sync.Mutex
	listener net.Listener // guarded by mu; set by Listen

	// base is the parent of every subscription; Close cancels it so that
	// live subscriptions end instead of holding GracefulStop forever.
	base       context.Context
	cancelBase context.CancelFunc
	closeOnce  sync.Once

	reads *quota.Quota // the Read calls being served (limits.go)
}

// New builds the server and registers the Streams, ServerFeatures and Gossip
// services. It does not listen yet.
func New(cfg Config, log events.Log) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !netpolicy.IsLoopback(cfg.Addr) && (cfg.TLS == nil || cfg.Authenticate == nil) {
		return nil, fmt.Errorf("%w (%s)", ErrInsecure, cfg.Addr)
	}
	s := &Server{cfg: cfg, log: log, instance: uuid.New(), reads: quota.New("grpc_reads", cfg.MaxReadsPerPrincipal, cfg.MaxReads)}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	opts := []grpc.ServerOption{
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.UnaryInterceptor(s.unaryAuth),
		grpc.StreamInterceptor(s.streamAuth),
		grpc.MaxConcurrentStreams(uint32(cfg.MaxConcurrentStreams)),
		grpc.InTapHandle(cancellableStream), // limits.go
	}
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	s.grpc = grpc.NewServer(opts...)
	streams.RegisterStreamsServer(s.grpc, &streamsService{s: s})
	serverfeatures.RegisterServerFeaturesServer(s.grpc, &featuresService{s: s})
	gossip.RegisterGossipServer(s.grpc, &gossipService{s: s})
	return s, nil
}

// Listen binds the configured address and returns the bound address (useful
// with port 0).
func (s *Server) Listen() (net.Addr, error) {
	l, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("grpc listen %s: %w", s.cfg.Addr, err)
	}
	if s.cfg.WriteTimeout > 0 {
		// A peer that takes no bytes for WriteTimeout loses its connection
		// (every call on it ends), as on the HTTP API.
		l = progress.Listener{Listener: l, Timeout: s.cfg.WriteTimeout}
	}
	s.mu.Lock()
	s.listener = l
	s.mu.Unlock()
	return l.Addr(), nil
}

// Addr returns the bound address, or nil before Listen.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listener == nil {
		return nil
	}
	return s.listener.Addr()
}

// Serve serves on the bound listener until Close; it returns nil after
// Close. REQUIRES: Listen succeeded.
func (s *Server) Serve() error {
	s.mu.Lock()
	l := s.listener
	s.mu.Unlock()
	if l == nil {
		return errors.New("kurrentgrpc: Serve before Listen")
	}
	if err := s.grpc.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("grpc serve: %w", err)
	}
	return nil
}

// Close ends subscriptions, lets unary calls finish within ShutdownGrace,
// then closes every connection. Idempotent; always returns nil.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancelBase()
		done := make(chan struct{})
		go func() {
			s.grpc.GracefulStop()
			close(done)
		}()
		t := time.NewTimer(s.cfg.ShutdownGrace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			s.grpc.Stop()
			<-done
		}
	})
	return nil
}

// callContext returns a context that ends with the call or with Close.
func (s *Server) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.base, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// featuresService answers GetSupportedMethods. Clients call it right after
// connecting; its version must parse as numbers or the connection fails.
type featuresService struct {
	serverfeatures.UnimplementedServerFeaturesServer
	s *Server
}

// The methods this surface implements, in the lowercase form clients match.
var supportedMethods = []*serverfeatures.SupportedMethod{
	{ServiceName: "event_store.client.streams.streams", MethodName: "read"},
	{ServiceName: "event_store.client.streams.streams", MethodName: "append"},
	{ServiceName: "event_store.client.server_features.serverfeatures", MethodName: "getsupportedmethods"},
	{ServiceName: "event_store.client.gossip.gossip", MethodName: "read"},
}

func (f *featuresService) GetSupportedMethods(context.Context, *shared.Empty) (*serverfeatures.SupportedMethods, error) {
	return &serverfeatures.SupportedMethods{Methods: supportedMethods, EventStoreServerVersion: f.s.cfg.Version}, nil
}

// gossipService answers cluster discovery (esdb://a,b,c or esdb+discover)
// with this node alone, as leader: greffe's replication sits behind the log,
// and any node's surface forwards nothing.
type gossipService struct {
	gossip.UnimplementedGossipServer
	s *Server
}

func (g *gossipService) Read(context.Context, *shared.Empty) (*gossip.ClusterInfo, error) {
	addr := g.s.Addr()
	if addr == nil {
		addr, _ = net.ResolveTCPAddr("tcp", g.s.cfg.Addr)
	}
	host, portStr, _ := net.SplitHostPort(addr.String())
	port, _ := strconv.ParseUint(portStr, 10, 32)
	return &gossip.ClusterInfo{Members: []*gossip.MemberInfo{{
		InstanceId:   protoUUID(g.s.instance, false),
		TimeStamp:    time.Now().UnixNano() / 100,
		State:        gossip.MemberInfo_Leader,
		IsAlive:      true,
		HttpEndPoint: &gossip.EndPoint{Address: host, Port: uint32(port)},
	}}}, nil
}
