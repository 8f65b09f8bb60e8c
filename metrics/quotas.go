package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/greffe/greffe/internal/quota"
)

// Quotas are a surface's caps on what callers hold at once (*api.Server:
// SSE subscriptions and proven reads; *kurrentgrpc.Server: gRPC reads).
type Quotas interface {
	// Quotas returns each cap's counts; safe for concurrent use.
	Quotas() []quota.Stats
}

// quotaCollector reads the surfaces' caps (issue #20): how much of each is
// held, its caps, the requests refused at each, and the holders dropped
// for not reading. An operator alerts on refusals that grow (a cap too low
// for the load, or a caller holding too much) and on drops (clients that
// stop reading: stalled, or an attack).
type quotaCollector struct {
	qs                            []Quotas
	held, limit, refused, dropped *prometheus.Desc
}

func newQuotaCollector(qs []Quotas) *quotaCollector {
	l := []string{"quota"}
	return &quotaCollector{
		qs: qs,
		held: prometheus.NewDesc("greffe_quota_held",
			"Resources of this kind held at once by callers: sse_subscriptions, proven_reads (HTTP), grpc_reads (the KurrentDB surface).", l, nil),
		limit: prometheus.NewDesc("greffe_quota_limit",
			"The cap of this kind of resource, per principal (scope=principal) and for the node (scope=total).", []string{"quota", "scope"}, nil),
		refused: prometheus.NewDesc("greffe_quota_refused_total",
			"Requests refused at this cap since the node started (HTTP 429 too_many_subscriptions or too_many_proven_reads; gRPC RESOURCE_EXHAUSTED too_many_streams), by the cap they hit.", []string{"quota", "scope"}, nil),
		dropped: prometheus.NewDesc("greffe_quota_dropped_total",
			"Holders ended because their client took nothing for the write timeout (serve --write-timeout): stalled subscribers and readers, since the node started.", l, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.held
	ch <- c.limit
	ch <- c.refused
	ch <- c.dropped
}

// Collect implements prometheus.Collector.
func (c *quotaCollector) Collect(ch chan<- prometheus.Metric) {
	for _, qs := range c.qs {
		for _, q := range qs.Quotas() {
			ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(q.Held), q.Name)
			ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(q.PerPrincipal), q.Name, string(quota.ScopePrincipal))
			ch <- prometheus.MustNewConstMetric(c.limit, prometheus.GaugeValue, float64(q.Total), q.Name, string(quota.ScopeTotal))
			ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(q.RefusedPrincipal), q.Name, string(quota.ScopePrincipal))
			ch <- prometheus.MustNewConstMetric(c.refused, prometheus.CounterValue, float64(q.RefusedTotal), q.Name, string(quota.ScopeTotal))
			ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.CounterValue, float64(q.Dropped), q.Name)
		}
	}
}
