package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/wire"
)

// startNode runs a real node in process on a loopback port.
func startNode(t *testing.T) *node.Node {
	t.Helper()
	return startNodeWith(t, node.Config{DataDir: t.TempDir(), API: api.Config{Addr: "127.0.0.1:0"}})
}

// runCLI runs the CLI in process and returns its exit code and outputs.
func runCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(t.Context(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestCLI_AppendReadInfoCheckpoint(t *testing.T) {
	n := startNode(t)
	srv := "--server=" + n.URL()

	code, out, errs := runCLI(t, "", "append", "orders-1", "--type", "OrderPlaced", "--data", `{"qty":3}`, "--expected-version", "no_stream", srv)
	if code != exitOK || !strings.Contains(out, "orders-1@0 position 0") {
		t.Fatalf("append: %d %q %q", code, out, errs)
	}
	// JSONL on stdin is one atomic append.
	code, out, errs = runCLI(t, `{"type":"A","data":{"i":1}}`+"\n"+`{"type":"B","data":{"i":2}}`+"\n", "append", "orders-1", "--expected-version", "0", "--json", srv)
	if code != exitOK {
		t.Fatalf("append jsonl: %d %s", code, errs)
	}
	var ao wire.AppendOut
	if err := json.Unmarshal([]byte(out), &ao); err != nil || len(ao.Events) != 2 || ao.Events[1].Version != 2 {
		t.Fatalf("append jsonl out: %s %v", out, err)
	}

	code, out, _ = runCLI(t, "", "read", "orders-1", "--json", srv)
	var ro wire.ReadOut
	if err := json.Unmarshal([]byte(out), &ro); code != exitOK || err != nil || len(ro.Events) != 3 || compact(ro.Events[0].Data) != `{"qty":3}` {
		t.Fatalf("read: %d %s", code, out)
	}
	code, out, _ = runCLI(t, "", "read", "--all", "--backward", "--limit", "1", srv)
	if code != exitOK || !strings.Contains(out, "orders-1@2") {
		t.Fatalf("read --all --backward: %d %q", code, out)
	}
	code, out, _ = runCLI(t, "", "info", "--json", srv)
	var info wire.InfoOut
	if err := json.Unmarshal([]byte(out), &info); code != exitOK || err != nil || info.Head.Size != 3 || len(info.VerifierKeys) != 1 {
		t.Fatalf("info: %d %s", code, out)
	}
	code, out, _ = runCLI(t, "", "checkpoint", "--json", srv)
	var cp struct {
		Size   uint64 `json:"size"`
		Origin string `json:"origin"`
	}
	if err := json.Unmarshal([]byte(out), &cp); code != exitOK || err != nil || cp.Size != 3 || cp.Origin != info.Origin {
		t.Fatalf("checkpoint: %d %s", code, out)
	}
}

func TestCLI_ExitCodes(t *testing.T) {
	n := startNode(t)
	srv := "--server=" + n.URL()
	tests := []struct {
		name    string
		args    []string
		want    int
		errText string
	}{
		{"refused by a condition", []string{"append", "s", "--type", "A", "--expected-version", "5", srv}, exitRefused, "wrong_expected_version"},
		{"reserved stream", []string{"append", "approval-x", "--type", "A", srv}, exitRefused, "reserved_stream"},
		{"bad data", []string{"append", "s", "--type", "A", "--data", "[1]", srv}, exitRefused, "data_not_object"},
		{"unknown flag", []string{"append", "s", "--nope"}, exitCannot, "unknown flag"},
		{"missing argument", []string{"read", srv}, exitCannot, "give a STREAM or --all"},
		{"unreachable node", []string{"info", "--server=http://127.0.0.1:1"}, exitCannot, "connection refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errs := runCLI(t, "", tc.args...)
			if code != tc.want || !strings.Contains(errs, tc.errText) {
				t.Fatalf("exit %d stderr %q, want %d containing %q", code, errs, tc.want, tc.errText)
			}
		})
	}
}

func compact(b []byte) string {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return string(b)
	}
	return out.String()
}
