package executor

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCapture_Excerpt(t *testing.T) {
	cases := []struct {
		name          string
		writes        []string
		limit         int64
		wantExcerpt   string
		wantTruncated bool
	}{
		{name: "whole", writes: []string{"hello ", "world\n"}, limit: 64, wantExcerpt: "hello world\n"},
		{name: "empty", limit: 64},
		{name: "cut at the cap", writes: []string{"0123456789"}, limit: 4, wantExcerpt: "0123", wantTruncated: true},
		{name: "cut at a rune boundary", writes: []string{"aé"}, limit: 2, wantExcerpt: "a", wantTruncated: true},
		{name: "invalid UTF-8 is replaced and said so", writes: []string{"a\xffb"}, limit: 64, wantExcerpt: "a\uFFFDb", wantTruncated: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCapture(tc.limit, nil)
			for _, w := range tc.writes {
				if n, err := c.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			got, truncated := c.excerpt()
			if diff := cmp.Diff(tc.wantExcerpt, got); diff != "" {
				t.Errorf("excerpt (-want +got):\n%s", diff)
			}
			if truncated != tc.wantTruncated {
				t.Errorf("truncated = %v, want %v", truncated, tc.wantTruncated)
			}
			whole := strings.Join(tc.writes, "")
			sum := sha256.Sum256([]byte(whole))
			if diff := cmp.Diff(hex.EncodeToString(sum[:]), c.digest()); diff != "" {
				t.Errorf("digest covers the whole stream (-want +got):\n%s", diff)
			}
			if c.n != int64(len(whole)) || int64(len(got)) > tc.limit {
				t.Errorf("n = %d, excerpt %d bytes for a cap of %d", c.n, len(got), tc.limit)
			}
		})
	}
}

func TestMetricParser(t *testing.T) {
	long := "metric " + strings.Repeat("x", maxMetricLine) + " 1\n"
	cases := []struct {
		name      string
		writes    []string
		wantVals  map[string]float64
		wantUnits map[string]string
	}{
		{name: "one metric with a unit", writes: []string{"metric tflops 41.5 TFLOP/s\n"},
			wantVals: map[string]float64{"tflops": 41.5}, wantUnits: map[string]string{"tflops": "TFLOP/s"}},
		{name: "split across writes and no final newline", writes: []string{"noise\nmet", "ric tokens_per_second 12", "0.25"},
			wantVals: map[string]float64{"tokens_per_second": 120.25}, wantUnits: map[string]string{}},
		{name: "the last value of a name wins", writes: []string{"metric a 1 s\nmetric a 2\n"},
			wantVals: map[string]float64{"a": 2}, wantUnits: map[string]string{}},
		{name: "not metrics", writes: []string{"metric\nmetric a\nmetric a b\nmetric a NaN\nmetric a +Inf\nmetric a 1 2 3\nmetrics a 1\nmetric a$ 1\n"},
			wantVals: map[string]float64{}, wantUnits: map[string]string{}},
		{name: "an overlong line is skipped, the next one read", writes: []string{long, "metric b 3\n"},
			wantVals: map[string]float64{"b": 3}, wantUnits: map[string]string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := newMetricParser()
			for _, w := range tc.writes {
				m.write([]byte(w))
			}
			m.flush()
			if diff := cmp.Diff(tc.wantVals, m.values); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantUnits, m.units); diff != "" {
				t.Errorf("units (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMetricParser_Bounded(t *testing.T) {
	m := newMetricParser()
	var sb strings.Builder
	for i := range maxMetrics + 10 {
		sb.WriteString("metric m")
		sb.WriteString(strings.Repeat("x", i%3))
		sb.WriteString(string(rune('a' + i%26)))
		sb.WriteString(strings.Repeat("y", i/26))
		sb.WriteString(" 1\n")
	}
	m.write([]byte(sb.String()))
	if len(m.values) != maxMetrics || m.dropped == 0 {
		t.Fatalf("%d metrics kept, %d dropped; want %d kept and the rest counted", len(m.values), m.dropped, maxMetrics)
	}
}
