package metrics_test

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/metrics"
)

// refusals gathers greffe_commands_refused_total by code.
func refusals(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	fams, err := m.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "greffe_commands_refused_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			out[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
		}
	}
	return out
}

// refuse appends CommandRefused events with the given codes to the
// refusals stream, as the command handler does.
func refuse(t *testing.T, s *pebblelog.Store, codes ...string) {
	t.Helper()
	for _, code := range codes {
		data, _ := json.Marshal(commands.CommandRefused{Command: "GrantApproval", Code: code, Message: "refused"})
		_, err := s.Append(t.Context(), events.AppendRequest{Streams: []events.StreamAppend{{Stream: commands.RefusalsStream, Expected: events.ExpectAny,
			Events: []events.Proposed{{ID: uuid.New(), Type: commands.TypeCommandRefused, Data: data, Metadata: json.RawMessage(`{}`)}}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestRefusals_CountedFromTheStream: the counter is the refusals stream's
// count by code, read incrementally; scrapes that overlap never count an
// event twice.
func TestRefusals_CountedFromTheStream(t *testing.T) {
	s, err := pebblelog.Open(pebblelog.Config{Dir: t.TempDir(), CheckpointInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m, err := metrics.New(metrics.Config{Store: s, NodeID: "n1", Version: "test", LedgerID: s.LedgerID()})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name  string
		codes []string
		want  map[string]float64
	}{
		{"nothing refused", nil, map[string]float64{}},
		{"first refusals", []string{"approval_missing", "approval_missing", "limits_unknown"}, map[string]float64{"approval_missing": 2, "limits_unknown": 1}},
		{"more", []string{"limits_unknown", "approval_expired"}, map[string]float64{"approval_missing": 2, "limits_unknown": 2, "approval_expired": 1}},
	}
	for _, st := range steps {
		refuse(t, s, st.codes...)
		// Overlapping scrapes read the same new events; one counts them.
		var wg sync.WaitGroup
		got := make([]map[string]float64, 4)
		for i := range got {
			wg.Go(func() { got[i] = refusals(t, m) })
		}
		wg.Wait()
		got = append(got, refusals(t, m))
		if d := cmp.Diff(st.want, got[len(got)-1]); d != "" {
			t.Errorf("%s (-want +got):\n%s", st.name, d)
		}
		for i, g := range got[:len(got)-1] {
			for code, n := range g {
				if n > st.want[code] {
					t.Errorf("%s: scrape %d counted %v %s, more than the %v refused", st.name, i, n, code, st.want[code])
				}
			}
		}
	}
	if _, err := metrics.New(metrics.Config{}); err == nil {
		t.Error("New without a store: no error")
	}
}
