package metrics_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/internal/quota"
	"github.com/greffe/greffe/metrics"
)

// surface holds real quotas, as a surface does.
type surface []*quota.Quota

func (s surface) Quotas() []quota.Stats {
	out := make([]quota.Stats, len(s))
	for i, q := range s {
		out[i] = q.Stats()
	}
	return out
}

// TestQuotas_Reported: each quota's holders, caps, refusals by cap and
// drops are exported under greffe_quota_*.
func TestQuotas_Reported(t *testing.T) {
	st, err := pebblelog.Open(pebblelog.Config{Dir: t.TempDir(), CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	subs := quota.New("sse_subscriptions", 1, 2)
	reads := quota.New("grpc_reads", 2, 4)
	m, err := metrics.New(metrics.Config{Store: st, Quotas: []metrics.Quotas{surface{subs}, surface{reads}}})
	if err != nil {
		t.Fatal(err)
	}
	subs.Acquire("a")
	subs.Acquire("a") // refused: a holds its one
	subs.Acquire("b")
	subs.Acquire("c") // refused: the node holds its two
	subs.Dropped()
	reads.Acquire("a")
	fams, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			key := f.GetName()
			for _, l := range s.GetLabel() {
				key += " " + l.GetValue()
			}
			switch f.GetName() {
			case "greffe_quota_held", "greffe_quota_limit":
				got[key] = s.GetGauge().GetValue()
			case "greffe_quota_refused_total", "greffe_quota_dropped_total":
				got[key] = s.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{
		"greffe_quota_held sse_subscriptions":                    2,
		"greffe_quota_held grpc_reads":                           1,
		"greffe_quota_limit sse_subscriptions principal":         1,
		"greffe_quota_limit sse_subscriptions total":             2,
		"greffe_quota_limit grpc_reads principal":                2,
		"greffe_quota_limit grpc_reads total":                    4,
		"greffe_quota_refused_total sse_subscriptions principal": 1,
		"greffe_quota_refused_total sse_subscriptions total":     1,
		"greffe_quota_refused_total grpc_reads principal":        0,
		"greffe_quota_refused_total grpc_reads total":            0,
		"greffe_quota_dropped_total sse_subscriptions":           1,
		"greffe_quota_dropped_total grpc_reads":                  0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("greffe_quota_* (-want +got):\n%s", diff)
	}
}
