package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// TestCLI_VerifiedReadOmissions (#20, finding 11): read --verified refuses
// (exit 1, event_omitted) a node that serves an older version of a stream
// as its newest, every proof valid (a proxy in front of a real node
// rewrites the read); the same read of the node passes. A stream end the
// client cannot prove within --max-end-scan exits 2 (stream_end_unproven).
func TestCLI_VerifiedReadOmissions(t *testing.T) {
	n := startNode(t)
	c := client.New(n.URL(), "")
	for _, s := range []string{"s", "s", "s", "t", "t", "t"} {
		if _, err := c.Append(t.Context(), s, events.ExpectAny, []wire.EventIn{{Type: "T"}}); err != nil {
			t.Fatal(err)
		}
	}
	u, _ := url.Parse(n.URL())
	rp := httputil.NewSingleHostReverseProxy(u)
	director := rp.Director
	rp.Director = func(r *http.Request) {
		director(r)
		if strings.HasPrefix(r.URL.Path, "/v1/streams/") {
			q := r.URL.Query()
			q.Set("from", "0") // the first version, served as the newest
			r.URL.RawQuery = q.Encode()
		}
	}
	liar := httptest.NewServer(rp)
	t.Cleanup(liar.Close)

	newest := []string{"read", "s", "--verified", "--backward", "--limit", "1", "--json"}
	code, out, errs := runCLI(t, "", append(newest, "--server="+liar.URL)...)
	if code != exitRefused || !strings.Contains(errs, "event_omitted") || !strings.Contains(errs, "version 1 of stream s") {
		t.Fatalf("the newest of s through a lying node: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "", append(newest, "--server="+n.URL())...)
	if code != exitOK || !strings.Contains(out, `"version": 2`) {
		t.Fatalf("the newest of s: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "", append(newest, "--server="+n.URL(), "--max-end-scan", "2")...)
	if code != exitCannot || !strings.Contains(errs, "stream_end_unproven") {
		t.Fatalf("the newest of s, three events after it, --max-end-scan 2: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := runCLI(t, "", "read", "s", "--server="+n.URL(), "--max-end-scan", "2"); code != exitCannot || !strings.Contains(errs, "--verified") {
		t.Fatalf("--max-end-scan without --verified: exit %d %s", code, errs)
	}
}
