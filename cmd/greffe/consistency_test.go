package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// recorder is a reverse proxy in front of a real node that records the
// path and query of every request it passes on.
type recorder struct {
	url  string
	mu   sync.Mutex
	seen []string // guarded by mu: "GET /v1/info?consistency=leader"
}

func newRecorder(t *testing.T, base string) *recorder {
	t.Helper()
	u, _ := url.Parse(base)
	rp := httputil.NewSingleHostReverseProxy(u)
	rec := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.seen = append(rec.seen, r.Method+" "+r.URL.RequestURI())
		rec.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	rec.url = srv.URL
	return rec
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.seen
	r.seen = nil
	return out
}

// TestCLI_ConsistencyOnEveryReader: backup, export kafka, mirror kurrentdb
// and cluster status take --consistency (issue #16) as the other reading
// commands do, through the binary: a bad value exits 2 before anything is
// sent, and a good one reaches the node as ?consistency= on the command's
// reads. export kafka and mirror stop at the head before touching their
// target (--from above it), so no broker or KurrentDB is needed.
func TestCLI_ConsistencyOnEveryReader(t *testing.T) {
	n := startNode(t)
	rec := newRecorder(t, n.URL())
	tests := []struct {
		name string
		args []string
		exit int    // with a good value
		want string // a request the node must see with it
	}{
		{"backup", []string{"backup", "--out", "OUT"}, exitOK, "GET /v1/backup?consistency=leader"},
		{"export kafka", []string{"export", "kafka", "--brokers", "127.0.0.1:1", "--topic", "t", "--from", "100"}, exitOK, "GET /v1/info?consistency=leader"},
		{"mirror kurrentdb", []string{"mirror", "kurrentdb", "--url", "esdb://127.0.0.1:1?tls=false", "--from", "100"}, exitOK, "GET /v1/info?consistency=leader"},
		// A single node answers not_clustered (exit 1), having been asked.
		{"cluster status", []string{"cluster", "status"}, exitRefused, "GET /v1/cluster/status?consistency=leader"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := slices.Clone(tc.args)
			for i, a := range args {
				if a == "OUT" {
					args[i] = filepath.Join(t.TempDir(), "backup")
				}
			}
			args = append(args, "--server", rec.url)
			code, out, errs := runBin(t, append(slices.Clone(args), "--consistency", "eventual")...)
			if code != exitCannot || !strings.Contains(errs, `--consistency "eventual": use local, leader or linearizable`) {
				t.Errorf("--consistency eventual: exit %d, want %d\n%s%s", code, exitCannot, out, errs)
			}
			if seen := rec.take(); len(seen) != 0 {
				t.Errorf("--consistency eventual sent %v, want nothing", seen)
			}
			code, out, errs = runBin(t, append(args, "--consistency", "leader")...)
			if code != tc.exit {
				t.Errorf("--consistency leader: exit %d, want %d\n%s%s", code, tc.exit, out, errs)
			}
			if seen := rec.take(); !slices.Contains(seen, tc.want) {
				t.Errorf("the node saw %v, want %q among them", seen, tc.want)
			}
		})
	}
}
