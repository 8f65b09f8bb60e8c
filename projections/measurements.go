package projections

import (
	"slices"
	"strings"
	"time"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// The measurements read model: per host, the requests and where they stand
// (an executor that vanished leaves its request uncertain, never failed;
// a request its host's policy refused is recorded, and listed as refused:
// it measured nothing, so it is no point of a series), and the signed
// results as time series per model resident on the GPU:
// VRAM used, RAM available and every metric the executor parsed
// ("metric tokens_per_second 41.2"). The model is the resident model the
// result observed (several joined with "+", "none" when the GPU held none,
// "unobserved" when the executor could not tell).
//
// The signature of a result is not checked again here: the gate verified
// it before it was appended, and `greffe verify` checks every signature of
// the log.

type measurementRow struct {
	ID         string    `json:"id"`
	Host       string    `json:"host"`
	Kind       string    `json:"kind"`
	Purpose    string    `json:"purpose"`
	MissionID  string    `json:"mission_id"`
	Executor   string    `json:"executor"`
	LeaseUntil time.Time `json:"lease_until"`
	Claimed    bool      `json:"claimed"`
	Uncertain  bool      `json:"uncertain"`
	// Refused: the result is a signed refusal of the host's policy
	// (outcome refused_by_host, issue #20).
	Refused bool                `json:"refused,omitempty"`
	Result  *Point              `json:"result"`
	Request aggregates.EventRef `json:"request"`
}

// Point is one signed result in a series.
type Point struct {
	MeasurementID     string             `json:"measurement_id"`
	ExecutorID        string             `json:"executor_id"`
	Position          uint64             `json:"position"`
	StartedAt         time.Time          `json:"started_at"`
	EndedAt           time.Time          `json:"ended_at"`
	ExitCode          int                `json:"exit_code"`
	GPU               string             `json:"gpu,omitempty"`
	VRAMUsedBytes     *uint64            `json:"vram_used_bytes,omitempty"`
	VRAMTotalBytes    *uint64            `json:"vram_total_bytes,omitempty"`
	RAMAvailableBytes *uint64            `json:"ram_available_bytes,omitempty"`
	Metrics           map[string]float64 `json:"metrics,omitempty"`
	// Late: recorded after its lease expired, beside the uncertainty.
	Late bool `json:"late"`
	// Model is the series the point belongs to.
	Model string `json:"model"`
}

type measurements struct {
	interner
	rows *table[measurementRow]
}

func newMeasurements(Env) Model { return &measurements{rows: newTable[measurementRow]("m/")} }

var (
	requestKeys = []string{"host", "kind", "purpose", "mission_id"}
	claimKeys   = []string{"executor_id", "lease_until"}
	resultKeys  = []string{"executor_id", "started_at", "ended_at", "exit_code", "gpu", "ram_available_bytes", "resident_models", "resident_models_observed", "metrics", "outcome"}
	gpuKeys     = []string{"name", "memory_total_bytes", "memory_used_bytes"}
)

// Model names of a result whose resident models are absent.
const (
	ModelNone       = "none"
	ModelUnobserved = "unobserved"
)

func (m *measurements) Apply(e *events.Event) error {
	if !strings.HasPrefix(e.Stream, aggregates.MeasurementPrefix) {
		return nil
	}
	id := strings.TrimPrefix(e.Stream, aggregates.MeasurementPrefix)
	r := m.rows.upsert(id)
	r.ID = id
	var v [10][]byte
	switch e.Type {
	case aggregates.TypeMeasurementRequested:
		fields(e.Data, requestKeys, v[:])
		r.Host, r.Kind, r.Purpose, r.MissionID, r.Request = str(v[0]), str(v[1]), str(v[2]), str(v[3]), m.ref(e)
	case aggregates.TypeMeasurementClaimed:
		fields(e.Data, claimKeys, v[:])
		r.Claimed, r.Executor, r.LeaseUntil = true, str(v[0]), tm(v[1])
	case aggregates.TypeMeasurementLeaseRenewed:
		fields(e.Data, claimKeys, v[:])
		r.LeaseUntil = tm(v[1])
	case aggregates.TypeMeasurementUncertain:
		r.Uncertain = true
	case aggregates.TypeMeasurementRecorded:
		fields(e.Data, resultKeys, v[:])
		p := &Point{MeasurementID: id, ExecutorID: str(v[0]), Position: e.Position, StartedAt: tm(v[1]), EndedAt: tm(v[2]),
			ExitCode: int(i64(v[3])), Late: r.Uncertain}
		if len(v[4]) > 0 && v[4][0] == '{' {
			var g [3][]byte
			fields(v[4], gpuKeys, g[:])
			total, used := u64(g[1]), u64(g[2])
			p.GPU, p.VRAMTotalBytes, p.VRAMUsedBytes = str(g[0]), &total, &used
		}
		if len(v[5]) > 0 && v[5][0] != 'n' {
			ram := u64(v[5])
			p.RAMAvailableBytes = &ram
		}
		switch models := strs(v[6]); {
		case !boolean(v[7]):
			p.Model = ModelUnobserved
		case len(models) == 0:
			p.Model = ModelNone
		default:
			slices.Sort(models)
			p.Model = strings.Join(models, "+")
		}
		members(v[8], func(k string, val []byte) {
			if p.Metrics == nil {
				p.Metrics = map[string]float64{}
			}
			p.Metrics[k] = f64(val)
		})
		r.Result, r.Refused = p, is(v[9], aggregates.ResultRefusedByHost)
	default:
		// A type this model does not read (one a later decider added):
		// nothing it shows depends on it.
		return nil
	}
	return nil
}

func (m *measurements) Flush(put func(string, []byte) error) error { return m.rows.flush(put) }

func (m *measurements) Load(key string, value []byte) error {
	return loadTables(key, value, m.rows.load)
}

// HostRow is one host of the measurements read model.
type HostRow struct {
	Key  string `json:"key"`
	Host string `json:"host"`
	// Requests counts the host's requests by status: requested, claimed,
	// recorded, uncertain, late.
	Requests  map[string]int `json:"requests"`
	Uncertain []string       `json:"uncertain"`
	// Refused lists the requests whose result is a signed refusal of the
	// host's policy (refused_by_host): recorded, counted as such in
	// Requests, and in no series (they measured nothing).
	Refused []string `json:"refused"`
	Series  []Series `json:"series"`
}

// Series is the results on one host with one resident model, in log order.
type Series struct {
	Model  string  `json:"model"`
	Points []Point `json:"points"`
}

func (m *measurements) View(q Query) any {
	hosts := map[string]*HostRow{}
	series := map[string]map[string][]Point{}
	for _, k := range m.rows.keys() {
		r := m.rows.get(k)
		if q.Key != "" && r.Host != q.Key {
			continue
		}
		h := hosts[r.Host]
		if h == nil {
			h = &HostRow{Key: r.Host, Host: r.Host, Uncertain: []string{}, Refused: []string{}, Series: []Series{},
				Requests: map[string]int{aggregates.MeasurementStatusRequested: 0, aggregates.MeasurementStatusClaimed: 0,
					aggregates.MeasurementStatusRecorded: 0, aggregates.MeasurementStatusUncertain: 0, aggregates.MeasurementStatusLate: 0}}
			hosts[r.Host] = h
			series[r.Host] = map[string][]Point{}
		}
		switch {
		case r.Result != nil && r.Result.Late:
			h.Requests[aggregates.MeasurementStatusLate]++
		case r.Result != nil:
			h.Requests[aggregates.MeasurementStatusRecorded]++
		case r.Uncertain:
			h.Requests[aggregates.MeasurementStatusUncertain]++
			h.Uncertain = append(h.Uncertain, k)
		case r.Claimed:
			h.Requests[aggregates.MeasurementStatusClaimed]++
		default:
			h.Requests[aggregates.MeasurementStatusRequested]++
		}
		if r.Refused {
			h.Refused = append(h.Refused, k)
		}
		if r.Result != nil && !r.Refused {
			model := r.Result.Model
			series[r.Host][model] = append(series[r.Host][model], *r.Result)
		}
	}
	rows := []HostRow{}
	for _, host := range sortedMapKeys(hosts) {
		h := hosts[host]
		for _, model := range sortedMapKeys(series[host]) {
			pts := series[host][model]
			slices.SortFunc(pts, func(a, b Point) int { return cmpU64(a.Position, b.Position) })
			h.Series = append(h.Series, Series{Model: model, Points: pts})
		}
		rows = append(rows, *h)
	}
	return rows
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
