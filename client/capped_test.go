package client

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/wire"
)

// TestClient_RetriesCappedReads: a GET refused for a full cap (429 with
// Retry-After, as a node's proven reads are: api/limits.go) is sent again
// after the wait; a 429 without Retry-After, or to a POST, is the caller's
// (issue #20: a verified client with eight workers sharing one token got
// too_many_proven_reads on a node that capped a principal at four).
func TestClient_RetriesCappedReads(t *testing.T) {
	for _, tc := range []struct {
		name       string
		method     string
		retryAfter string
		refusals   int64
		wantCalls  int64
		wantStatus int // 0: success
	}{
		{"a read refused once is read again", http.MethodGet, "1", 1, 2, 0},
		{"without Retry-After it is not", http.MethodGet, "", 1, 1, http.StatusTooManyRequests},
		{"a POST is not sent again", http.MethodPost, "1", 1, 1, http.StatusTooManyRequests},
		{"the retries are bounded", http.MethodGet, "1", 100, maxCappedRetries + 1, http.StatusTooManyRequests},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wantCalls > 2 && testing.Short() {
				t.Skip("waits maxCappedRetries seconds")
			}
			var calls atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) <= tc.refusals {
					if tc.retryAfter != "" {
						w.Header().Set("Retry-After", tc.retryAfter)
					}
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusTooManyRequests)
					_, _ = w.Write([]byte(`{"error":{"code":"too_many_proven_reads","message":"full"}}`))
					return
				}
				_, _ = w.Write([]byte(`{}`))
			}))
			defer srv.Close()
			c := New(srv.URL, "")
			start := time.Now()
			var out map[string]any
			var body any // a GET has none
			if tc.method == http.MethodPost {
				body = map[string]any{}
			}
			err := c.Do(t.Context(), tc.method, "/v1/all?prove=1", body, &out)
			var e *wire.Error
			status := 0
			if errors.As(err, &e) {
				status = e.Status
			} else if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]int64{tc.wantCalls, int64(tc.wantStatus)}, []int64{calls.Load(), int64(status)}); diff != "" {
				t.Errorf("calls and final status (-want +got):\n%s", diff)
			}
			if tc.wantCalls == 2 && time.Since(start) < time.Second {
				t.Errorf("read again after %s, before the Retry-After of 1 s", time.Since(start))
			}
		})
	}
}
