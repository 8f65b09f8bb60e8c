package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/internal/config"
	"github.com/greffe/greffe/projections"
	"github.com/greffe/greffe/wire"
)

// Store is what the collectors read from the ledger (*pebblelog.Store).
// Every method is called at scrape time, concurrently with writers.
type Store interface {
	// Stats returns the cumulative counters, the head and the last signed
	// checkpoint.
	Stats() pebblelog.Stats
	// Histograms returns the append, fsync and batch-size distributions.
	Histograms() pebblelog.Histograms
	// DiskUsage returns the bytes the ledger uses on disk (0 when closed).
	DiskUsage() uint64
	// Failure returns why the store refuses writes (a write or sync error),
	// or nil while it accepts them.
	Failure() error
	// ReadStream reads the refusals stream (events.ErrNotFound while no
	// command was refused).
	ReadStream(ctx context.Context, stream string, o events.ReadOptions) ([]events.Event, error)
}

// Raft is the node's raft member (*replicator.Replicator). Status is called
// with an already cancelled context: a scrape wants this node's own view,
// which Status fills in before it asks the other members, and must not
// wait on them (they answer as unreachable, which the collector ignores).
type Raft interface {
	Status(ctx context.Context) (wire.Status, error)
}

// Projections are the node's read models (*projections.Set).
type Projections interface {
	// Status returns every projection's position, lag and failure.
	Status() []projections.Status
}

// Exporter is the Kafka exporter (*kafka.Exporter). Its methods read
// atomics.
type Exporter interface {
	// Lag is how many events of the log are not exported yet.
	Lag() uint64
	// Exported is the end (exclusive) of the exported positions.
	Exported() uint64
	// Resyncs counts resumes after write errors; Skipped the events found
	// already at a partition's tail on a resume.
	Resyncs() uint64
	Skipped() uint64
}

// Subscriptions are the SSE subscriptions being served (*api.Server).
type Subscriptions interface {
	// SubscriptionPositions returns the next position each subscription
	// will read.
	SubscriptionPositions() []uint64
}

// Config says what a node's metrics read. Store is required; a nil
// component is one the node does not run, and its metrics are absent.
type Config struct {
	Store         Store
	Raft          Raft
	Projections   Projections
	Exporter      Exporter
	Subscriptions Subscriptions
	// Witnesses is the node's witness collector (nil: no --witness).
	Witnesses Witnesses
	// Quotas are the surfaces whose caps on what callers hold are
	// reported (the HTTP API, the gRPC surface when it runs).
	Quotas []Quotas
	// NodeID, Version and LedgerID label greffe_node_info.
	NodeID, Version, LedgerID string
	// Clock gives the time the checkpoint's age is measured at. Default
	// time.Now.
	Clock func() time.Time
	// Logger receives scrape problems (a refusals read that failed).
	// Default: discard.
	Logger *slog.Logger
}

// ErrInvalidConfig wraps configuration problems.
var ErrInvalidConfig = errors.New("metrics: invalid config")

func (c *Config) setDefaults() {
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Validate reports what New refuses: a registry with no Store to read
// (every other component is optional).
func (c *Config) Validate() error {
	var p config.Problems
	if c.Store == nil {
		p.Addf("Store is required")
	}
	return p.Err(ErrInvalidConfig)
}

// Metrics is a node's registry: the greffe collectors plus the Go runtime
// and process collectors. Safe for concurrent use (scrapes may overlap).
type Metrics struct {
	reg *prometheus.Registry
}

// New builds a node's registry. Nothing runs until a scrape.
func New(cfg Config) (*Metrics, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	cs := []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newStoreCollector(cfg),
		newRefusalCollector(cfg.Store, cfg.Logger),
	}
	if cfg.Subscriptions != nil {
		cs = append(cs, newSubscriptionCollector(cfg.Subscriptions, cfg.Store))
	}
	if cfg.Projections != nil {
		cs = append(cs, newProjectionCollector(cfg.Projections))
	}
	if cfg.Raft != nil {
		cs = append(cs, newRaftCollector(cfg.Raft))
	}
	if cfg.Exporter != nil {
		cs = append(cs, newExporterCollector(cfg.Exporter))
	}
	if cfg.Witnesses != nil {
		cs = append(cs, newWitnessCollector(cfg.Witnesses, cfg))
	}
	if len(cfg.Quotas) > 0 {
		cs = append(cs, newQuotaCollector(cfg.Quotas))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
	}
	return &Metrics{reg: reg}, nil
}

// Handler serves the registry in the Prometheus text format (or
// OpenMetrics when the scraper asks for it). A collector that fails is
// reported in the scrape's errors and the others are still served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling:     promhttp.ContinueOnError,
		Registry:          m.reg, // promhttp_metric_handler_errors_total
		EnableOpenMetrics: true,
	})
}

// Gatherer returns the registry, for tests and for embedding the node's
// metrics elsewhere.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }
