package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/greffe/greffe/witness"
)

// Witnesses is the node's witness collector (*witness.Collector).
type Witnesses interface {
	// Status returns what the collector knows of each witness; safe for
	// concurrent use.
	Status() []witness.Status
}

// witnessCollector reads the witness collector: per witness (labelled by
// its name and base URL) the size it last cosigned and how long ago, and
// its counters. An operator alerts on a cosigned age that grows (a witness
// down, or refusing) and on any conflict (a witness that saw another
// history: docs/AUDIT.md).
type witnessCollector struct {
	w                                 Witnesses
	clock                             func() float64
	size, age, cosigs, fails, conflit *prometheus.Desc
	halted                            *prometheus.Desc
}

func newWitnessCollector(w Witnesses, cfg Config) *witnessCollector {
	l := []string{"witness", "url"}
	return &witnessCollector{
		w:     w,
		clock: func() float64 { return float64(cfg.Clock().UnixNano()) / 1e9 },
		size: prometheus.NewDesc("greffe_witness_cosigned_size_events",
			"Tree size of the newest checkpoint of this log the witness cosigned; 0 before its first cosignature.", l, nil),
		age: prometheus.NewDesc("greffe_witness_cosigned_age_seconds",
			"Seconds since the witness last cosigned a checkpoint; absent before its first cosignature.", l, nil),
		cosigs: prometheus.NewDesc("greffe_witness_cosignatures_total",
			"Cosignatures received from the witness since the node started.", l, nil),
		fails: prometheus.NewDesc("greffe_witness_failures_total",
			"Failed add-checkpoint requests to the witness (unreachable, an error status, a cosignature that does not verify); each is retried after a capped backoff.", l, nil),
		conflit: prometheus.NewDesc("greffe_witness_conflicts_total",
			"Refusals by the witness saying it cosigned another history of this log (409 without a size, or 422): never retried; look at once.", l, nil),
		halted: prometheus.NewDesc("greffe_witness_halted",
			"1 after a conflict: nothing more is sent to the witness until the node restarts; 0 otherwise.", l, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *witnessCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.size, c.age, c.cosigs, c.fails, c.conflit, c.halted} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *witnessCollector) Collect(ch chan<- prometheus.Metric) {
	now := c.clock()
	for _, s := range c.w.Status() {
		l := []string{s.Name, s.URL}
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(s.Size), l...)
		if !s.CosignedAt.IsZero() {
			ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, now-float64(s.CosignedAt.UnixNano())/1e9, l...)
		}
		ch <- prometheus.MustNewConstMetric(c.cosigs, prometheus.CounterValue, float64(s.Cosignatures), l...)
		ch <- prometheus.MustNewConstMetric(c.fails, prometheus.CounterValue, float64(s.Failures), l...)
		ch <- prometheus.MustNewConstMetric(c.conflit, prometheus.CounterValue, float64(s.Conflicts), l...)
		halted := 0.0
		if s.Halted {
			halted = 1
		}
		ch <- prometheus.MustNewConstMetric(c.halted, prometheus.GaugeValue, halted, l...)
	}
}
