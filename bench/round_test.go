package bench

import (
	"context"
	"testing"
	"time"
)

// TestRoundOver: an append that fails once the round's deadline has passed
// is the round ending, even while the context has not yet said so (its
// timer not run yet on a loaded machine); one that fails before the
// deadline is a failure.
func TestRoundOver(t *testing.T) {
	deadline := time.Now().Add(time.Hour)
	live, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	done, stop := context.WithCancel(context.Background())
	stop()
	tests := []struct {
		name string
		ctx  context.Context
		now  time.Time
		want bool
	}{
		{"before the deadline", live, deadline.Add(-time.Millisecond), false},
		{"at the deadline, context not yet done", live, deadline, true},
		{"after the deadline, context not yet done", live, deadline.Add(time.Millisecond), true},
		{"context cancelled, no deadline", done, time.Now(), true},
		{"no deadline, not done", context.Background(), time.Now(), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if live.Err() != nil {
				t.Fatal("the test's context ended early")
			}
			if got := roundOver(tc.ctx, tc.now); got != tc.want {
				t.Errorf("roundOver = %v, want %v", got, tc.want)
			}
		})
	}
}
