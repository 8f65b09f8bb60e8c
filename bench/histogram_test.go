package bench

import (
	"testing"
	"time"
)

func TestHistogram_Quantiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Millisecond)
	}
	tests := []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.99, 990 * time.Millisecond}, {0.999, 999 * time.Millisecond}, {0, time.Millisecond}}
	for _, tc := range tests {
		got := h.quantile(tc.q)
		// Buckets are about 3 % wide and report their lower bound.
		if got > tc.want || float64(got) < 0.96*float64(tc.want) {
			t.Errorf("q%.3f = %s, want within 4 %% below %s", tc.q, got, tc.want)
		}
	}
	for _, d := range []time.Duration{time.Microsecond, 37 * time.Microsecond, time.Second, time.Hour} {
		lo := lowerBound(bucketOf(d))
		if lo > d || float64(d) > 1.04*float64(lo)+float64(time.Microsecond) {
			t.Errorf("%s in a bucket starting at %s", d, lo)
		}
	}
}
