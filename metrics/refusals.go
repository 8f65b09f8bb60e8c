package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events"
)

// refusalsReadTimeout bounds the refusals read of one scrape. The first
// scrape of a node reads the whole refusals stream; if that takes longer,
// the next scrape carries on from where it stopped (the counter only grows
// late, never wrong).
const refusalsReadTimeout = 5 * time.Second

// refusalCollector counts refused commands by code. It derives them from
// the refusals stream, which the command handler writes one CommandRefused
// event to for every refusal, rather than counting inside the handler:
// reading the stream through its index at scrape time costs nothing on
// the command path, and the count is exact and the same on every node of a
// cluster (it is the ledger's count, from position 0, so it also survives
// restarts). Each scrape reads only the refusals recorded since the last.
type refusalCollector struct {
	store  Store
	logger *slog.Logger
	desc   *prometheus.Desc

	mu sync.Mutex
	// next is the version of the refusals stream the next read starts
	// at, and byCode what the versions before it counted. Guarded by mu,
	// which is never held during a read.
	next   uint64
	byCode map[string]uint64
}

func newRefusalCollector(store Store, logger *slog.Logger) *refusalCollector {
	return &refusalCollector{store: store, logger: logger, byCode: map[string]uint64{},
		desc: prometheus.NewDesc("greffe_commands_refused_total",
			"Commands refused, by refusal code: the CommandRefused events of the refusals stream (the ledger's count, identical on every node).",
			[]string{"code"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *refusalCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *refusalCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), refusalsReadTimeout)
	defer cancel()
	c.refresh(ctx)
	c.mu.Lock()
	counts := maps.Clone(c.byCode)
	c.mu.Unlock()
	for code, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), code)
	}
}

// refresh reads the refusals recorded since the last read. Two scrapes
// may read the same versions at once; only the first to finish adds them.
func (c *refusalCollector) refresh(ctx context.Context) {
	c.mu.Lock()
	from := c.next
	c.mu.Unlock()
	next, seen := from, map[string]uint64{}
	for {
		evs, err := c.store.ReadStream(ctx, commands.RefusalsStream, events.ReadOptions{From: next, Limit: events.MaxReadLimit})
		if errors.Is(err, events.ErrNotFound) {
			break // nothing refused yet
		}
		if err != nil {
			c.logger.Warn("metrics: read the refusals stream", "from", next, "err", err)
			break
		}
		for _, e := range evs {
			seen[refusalCode(e)]++
			next = e.Version + 1
		}
		if len(evs) < events.MaxReadLimit {
			break
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next != from {
		return // another scrape counted these first
	}
	for code, n := range seen {
		c.byCode[code] += n
	}
	c.next = next
}

// refusalCode returns the code of a CommandRefused event; "unknown" for an
// event of another type or without a code (the stream is written only by
// the command handler, so neither should happen).
func refusalCode(e events.Event) string {
	var r struct {
		Code string `json:"code"`
	}
	if e.Type != commands.TypeCommandRefused || json.Unmarshal(e.Data, &r) != nil || r.Code == "" {
		return "unknown"
	}
	return r.Code
}
