package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/api/kurrentgrpc"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/export/kurrent"
	"github.com/greffe/greffe/node"
)

// startGRPCNode runs a node with the KurrentDB gRPC surface on.
func startGRPCNode(t *testing.T) *node.Node {
	t.Helper()
	n, err := node.Open(node.Config{DataDir: t.TempDir(), API: api.Config{Addr: "127.0.0.1:0"},
		Ecosystem: node.EcosystemConfig{GRPC: kurrentgrpc.Config{Addr: "127.0.0.1:0"}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return n
}

type logRow struct {
	Stream, Type string
	Version      uint64
	ID           string
	Data         string
}

func logRows(t *testing.T, c *client.Client) []logRow {
	t.Helper()
	out, err := c.ReadAll(t.Context(), events.ReadOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var rows []logRow
	for _, e := range out.Events {
		rows = append(rows, logRow{e.Stream, e.Type, e.Version, e.ID.String(), string(e.Data)})
	}
	return rows
}

// TestCLI_MirrorKurrentDB mirrors one node into another node's gRPC surface
// with the official client, then resumes after more appends.
func TestCLI_MirrorKurrentDB(t *testing.T) {
	src := startNode(t)
	dst := startGRPCNode(t)
	srcC, dstC := client.New(src.URL(), ""), client.New(dst.URL(), "")
	url := "--url=esdb://" + dst.Ecosystem.GRPC.Addr().String() + "?tls=false"
	mirror := func(wantCode int, args ...string) (map[string]uint64, string) {
		t.Helper()
		code, out, errs := runCLI(t, "", append([]string{"mirror", "kurrentdb", "--json", "--server=" + src.URL()}, args...)...)
		if code != wantCode {
			t.Fatalf("mirror %v: exit %d, want %d\n%s%s", args, code, wantCode, out, errs)
		}
		var r map[string]uint64
		if code == exitOK {
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("mirror output %q: %v", out, err)
			}
		}
		return r, errs
	}
	appendEvents(t, srcC, 30)
	if r, _ := mirror(exitOK, url); r["from"] != 0 || r["mirrored"] != 30 {
		t.Errorf("first mirror: %v", r)
	}
	appendEvents(t, srcC, 12)
	if r, _ := mirror(exitOK, url); r["from"] != 30 || r["mirrored"] != 42 {
		t.Errorf("resumed mirror: %v, want from 30 to 42", r)
	}
	if diff := cmp.Diff(logRows(t, srcC), logRows(t, dstC)); diff != "" {
		t.Errorf("target differs (-source +target):\n%s", diff)
	}

	// A domain stream stays read-only on the target's gRPC surface.
	if _, err := src.Store.Append(t.Context(), events.AppendRequest{Streams: []events.StreamAppend{{Stream: "approval-7",
		Events: []events.Proposed{{ID: [16]byte{1}, Type: "ApprovalGranted", Data: []byte(`{}`), Metadata: []byte(`{}`)}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, errs := mirror(exitRefused, url); !strings.Contains(errs, kurrent.CodeTargetRefused) || !strings.Contains(errs, events.CodeReservedStream) {
		t.Errorf("mirror of a domain stream: stderr %q", errs)
	}
	if _, errs := mirror(exitCannot); !strings.Contains(errs, "--url") {
		t.Errorf("no --url: stderr %q", errs)
	}
}
