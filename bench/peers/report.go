package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// report is the table of a run: per shape, each system's median events/s
// and range over the rounds, greffe's ratios to the others' medians, and
// whether the target is met.
type report struct {
	// Header holds the run's context: command, date, machine, load,
	// versions and what each system runs with.
	Header  header        `json:"header"`
	Systems []string      `json:"systems"`
	Shapes  []shapeRow    `json:"shapes"`
	Runs    []measurement `json:"runs"`
	// Failures lists every failed run (also in Runs, with its error).
	Failures []string `json:"failures,omitempty"`
}

// header is what the table says about its run.
type header struct {
	Command   string `json:"command"`
	Date      string `json:"date"`
	CPUs      int    `json:"cpus"`
	LoadStart string `json:"load_average_start"`
	LoadEnd   string `json:"load_average_end"`
	// LoadRuns is the range of the 1-minute load average as the runs
	// ended (measurement.Load).
	LoadRuns string            `json:"load_1min_after_runs"`
	Rounds   int               `json:"rounds"`
	Duration string            `json:"duration"`
	Read     int               `json:"read_events"`
	Payload  int               `json:"payload_bytes"`
	With     map[string]string `json:"with"`
}

// shapeRow is one shape's line of the table.
type shapeRow struct {
	Shape string `json:"shape"`
	What  string `json:"what"`
	// Results are by system name.
	Results map[string]summary `json:"results"`
	// Ratios are greffe's median ÷ each other system's (for E: the
	// cluster's ÷ one node's C), where both have one.
	Ratios map[string]float64 `json:"ratios"`
	// Target is the issue's: Against is the divisor (etcd, or greffe C for
	// E), Min the least ratio; Met is unset when the ratio is unknown.
	Target target `json:"target"`
}

type target struct {
	Against string  `json:"against"`
	Min     float64 `json:"min"`
	Ratio   float64 `json:"ratio,omitempty"`
	Met     *bool   `json:"met,omitempty"`
}

// againstOneNode is shape E's divisor: one greffe node's median at C.
const againstOneNode = "greffe C"

// summary is one system's runs of one shape.
type summary struct {
	Median float64   `json:"median_events_per_sec"`
	Min    float64   `json:"min_events_per_sec"`
	Max    float64   `json:"max_events_per_sec"`
	Rates  []float64 `json:"events_per_sec"`
	Failed int       `json:"failed_runs,omitempty"`
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// summarize builds the table's rows from the runs.
func summarize(shs []shape, systems []string, readEvents int, runs []measurement) ([]shapeRow, []string) {
	var failures []string
	by := map[[2]string]*summary{}
	for _, m := range runs {
		k := [2]string{m.Shape, m.System}
		s := by[k]
		if s == nil {
			s = &summary{}
			by[k] = s
		}
		if m.Error != "" {
			s.Failed++
			failures = append(failures, m.String())
			continue
		}
		s.Rates = append(s.Rates, m.EventsPerSec)
	}
	for _, s := range by {
		if len(s.Rates) > 0 {
			s.Median, s.Min, s.Max = median(s.Rates), slices.Min(s.Rates), slices.Max(s.Rates)
		}
	}
	get := func(sh, sys string) (summary, bool) {
		s, ok := by[[2]string{sh, sys}]
		if !ok {
			return summary{}, false
		}
		return *s, true
	}
	var rows []shapeRow
	for _, sh := range shs {
		row := shapeRow{Shape: sh.Name, What: sh.What, Results: map[string]summary{}, Ratios: map[string]float64{}}
		if sh.Read {
			row.What = fmt.Sprintf("read %s events in order", thousands(float64(readEvents)))
		}
		names := systems
		if sh.Cluster {
			names = []string{"greffe-3"}
		}
		for _, n := range names {
			if s, ok := get(sh.Name, n); ok {
				row.Results[n] = s
			}
		}
		if sh.Cluster {
			row.Target.Against = againstOneNode
			e, okE := get(sh.Name, "greffe-3")
			c, okC := get("C", "greffe")
			if okE && okC && e.Median > 0 && c.Median > 0 {
				row.Ratios[againstOneNode] = e.Median / c.Median
			}
		} else {
			row.Target.Against = "etcd"
			g, ok := get(sh.Name, "greffe")
			for _, n := range systems {
				if n == "greffe" {
					continue
				}
				if p, okP := get(sh.Name, n); ok && okP && g.Median > 0 && p.Median > 0 {
					row.Ratios[n] = g.Median / p.Median
				}
			}
		}
		row.Target.Min = sh.Target
		if r, ok := row.Ratios[row.Target.Against]; ok {
			met := r >= sh.Target
			row.Target.Ratio, row.Target.Met = r, &met
		}
		rows = append(rows, row)
	}
	return rows, failures
}

// loadRange is "min–max" of the runs' 1-minute load averages.
func loadRange(runs []measurement) string {
	var ls []float64
	for _, m := range runs {
		if f := strings.Fields(m.Load); len(f) > 0 {
			if v, err := strconv.ParseFloat(f[0], 64); err == nil {
				ls = append(ls, v)
			}
		}
	}
	if len(ls) == 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.2f–%.2f", slices.Min(ls), slices.Max(ls))
}

// writeText prints the report as a table.
func (r report) writeText(w io.Writer) error {
	h := r.Header
	fmt.Fprintf(w, "greffe against etcd and NATS JetStream (issue #14): %d-byte payloads, durable acknowledgements, client and server in separate processes on loopback\n", h.Payload)
	fmt.Fprintf(w, "command: %s\n", h.Command)
	fmt.Fprintf(w, "date: %s; %d CPUs; load average at start %s, at end %s; 1-minute load after each run %s\n", h.Date, h.CPUs, h.LoadStart, h.LoadEnd, h.LoadRuns)
	fmt.Fprintf(w, "%d rounds, writes %s per run, reads of %d events; a fresh server per run, systems alternating\n", h.Rounds, h.Duration, h.Read)
	for _, n := range slices.Sorted(maps.Keys(h.With)) {
		fmt.Fprintf(w, "  %s: %s\n", n, h.With[n])
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	cols := slices.Clone(r.Systems)
	hasCluster := false
	for _, row := range r.Shapes {
		if _, ok := row.Results["greffe-3"]; ok {
			hasCluster = true
		}
	}
	if hasCluster {
		cols = append(cols, "greffe-3")
	}
	head := []string{"shape", ""}
	for _, c := range cols {
		head = append(head, c+" events/s median (range)")
	}
	var others []string
	for _, s := range r.Systems {
		if s != "greffe" {
			others = append(others, s)
		}
	}
	for _, o := range others {
		head = append(head, "greffe÷"+o)
	}
	head = append(head, "target")
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for _, row := range r.Shapes {
		line := []string{row.Shape, row.What}
		for _, c := range cols {
			s, ok := row.Results[c]
			switch {
			case !ok:
				line = append(line, "")
			case len(s.Rates) == 0:
				line = append(line, fmt.Sprintf("failed (%d)", s.Failed))
			default:
				cell := fmt.Sprintf("%s (%s–%s)", thousands(s.Median), thousands(s.Min), thousands(s.Max))
				if s.Failed > 0 {
					cell += fmt.Sprintf(", %d failed", s.Failed)
				}
				line = append(line, cell)
			}
		}
		for _, o := range others {
			if v, ok := row.Ratios[o]; ok {
				line = append(line, fmt.Sprintf("%.2f×", v))
			} else {
				line = append(line, "")
			}
		}
		t := row.Target
		verdict := "unknown"
		if t.Met != nil {
			verdict = "not met"
			if *t.Met {
				verdict = "met"
			}
		}
		if t.Against == againstOneNode {
			r := "—"
			if t.Met != nil {
				r = fmt.Sprintf("%.2f", t.Ratio)
			}
			line = append(line, fmt.Sprintf("%s of greffe C (≥ %.1f): %s", r, t.Min, verdict))
		} else {
			line = append(line, fmt.Sprintf("÷etcd ≥ %.1f×: %s", t.Min, verdict))
		}
		fmt.Fprintln(tw, strings.Join(line, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Failures) > 0 {
		fmt.Fprintln(w, "\nfailed runs:")
		for _, f := range r.Failures {
			fmt.Fprintln(w, "  "+f)
		}
	}
	return nil
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// thousands formats v rounded to a whole number with comma separators.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
