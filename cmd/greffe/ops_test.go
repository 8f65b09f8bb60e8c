package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/layout"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/wire"
)

// Operating greffe (issue #16): the operator's commands and the errors a
// new user meets, through the binary built by TestMain where the exit code
// or the process matters.

// runBin runs the built binary (greffeBin), bounded, and returns its exit
// code and outputs.
func runBin(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, greffeBin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("greffe %v did not exit within 30s", args)
	}
	var ee *exec.ExitError
	if err != nil && !errorsAs(err, &ee) {
		t.Fatalf("greffe %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errb.String()
}

func errorsAs(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*target = e
	}
	return ok
}

// startNodeIn runs a real node in process on data.
func startNodeIn(t *testing.T, data string) *node.Node {
	t.Helper()
	return startNodeWith(t, node.Config{DataDir: data, API: api.Config{Addr: "127.0.0.1:0"}})
}

// deadURL is a loopback URL nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String()
	ln.Close()
	return u
}

func postJSON(t *testing.T, u, body string) (int, wire.ErrorBody) {
	t.Helper()
	resp, err := http.Post(u, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var eb wire.ErrorBody
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		if err := json.Unmarshal(b, &eb); err != nil || eb.Error == nil {
			t.Fatalf("POST %s: %d %s, not an error body", u, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, eb
}

func TestOps_Version(t *testing.T) {
	// A release build: the version and commit stamped with -ldflags.
	bin := filepath.Join(t.TempDir(), "greffe-release")
	ld := "-X github.com/greffe/greffe/node.stampedVersion=v9.8.7 -X github.com/greffe/greffe/node.stampedCommit=0123abcd"
	if out, err := exec.Command("go", "build", "-ldflags", ld, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("release build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v wire.VersionOut
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("version --json: %v\n%s", err, out)
	}
	want := wire.VersionOut{Version: "v9.8.7", Commit: "0123abcd", GoVersion: v.GoVersion, APIVersion: "v1",
		StoreFormat: layout.StoreFormat, StoreFormatsRead: layout.ReadFormats()}
	if diff := cmp.Diff(want, v); diff != "" || !strings.HasPrefix(v.GoVersion, "go1.") {
		t.Errorf("version --json (-want +got):\n%s(go %q)", diff, v.GoVersion)
	}
	if len(v.StoreFormatsRead) < 2 || v.StoreFormatsRead[0] != v.StoreFormat {
		t.Errorf("store formats read %q: want the written one first, then the upgradable ones", v.StoreFormatsRead)
	}
	// The test binary's text output, unstamped: the source's version.
	code, text, _ := runBin(t, "version")
	if code != exitOK || !strings.Contains(text, "greffe "+node.Version+"-dev") || !strings.Contains(text, "store writes "+layout.StoreFormat) {
		t.Errorf("version: exit %d\n%s", code, text)
	}
	// A node reports the same under "build" in GET /v1/info.
	n := startNode(t)
	info, err := client.New(n.URL(), "").Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Build == nil || info.Build.APIVersion != "v1" || info.Build.StoreFormat != layout.StoreFormat || info.Build.Version != info.Version {
		t.Errorf("GET /v1/info build = %+v (version %q)", info.Build, info.Version)
	}
}

func TestOps_StreamsReadExport(t *testing.T) {
	n := startNode(t)
	srv := "--server=" + n.URL()
	c := client.New(n.URL(), "")
	for _, s := range []string{"orders-1", "orders-2", "orders-1", "ledger-eu", "orders-10"} {
		if _, err := c.Append(t.Context(), s, events.ExpectAny, []wire.EventIn{{Type: "T"}}); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := runCLI(t, "", "streams", "--prefix", "orders", "--json", srv)
	var so wire.StreamsOut
	if err := json.Unmarshal([]byte(out), &so); code != exitOK || err != nil {
		t.Fatalf("streams: %d %v %s %s", code, err, out, errs)
	}
	want := []events.StreamInfo{{Name: "orders-1", Version: 1, Position: 2}, {Name: "orders-10", Version: 0, Position: 4}, {Name: "orders-2", Version: 0, Position: 1}}
	if diff := cmp.Diff(want, so.Streams); diff != "" {
		t.Errorf("streams --prefix orders (-want +got):\n%s", diff)
	}
	// Pages: limit and after.
	page, err := c.Streams(t.Context(), "", "", 2)
	if err != nil || len(page.Streams) != 2 || page.Next != "orders-1" {
		t.Fatalf("first page: %+v %v", page, err)
	}
	page, err = c.Streams(t.Context(), "", page.Next, 2)
	if err != nil || len(page.Streams) != 2 || page.Streams[0].Name != "orders-10" || page.Next != "orders-2" {
		t.Fatalf("second page: %+v %v", page, err)
	}
	if _, err := c.Streams(t.Context(), "", "", events.MaxListStreams+1); client.CodeOf(err) != wire.CodeInvalidQuery {
		t.Errorf("limit beyond the bound: %v, want %s", err, wire.CodeInvalidQuery)
	}

	// read --all: a range, as JSON Lines.
	code, out, _ = runCLI(t, "", "read", "--all", "--from", "1", "--to", "3", "--jsonl", srv)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || len(lines) != 2 {
		t.Fatalf("read --all --from 1 --to 3 --jsonl: %d\n%s", code, out)
	}
	for i, l := range lines {
		var e events.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil || e.Position != uint64(1+i) {
			t.Errorf("line %d: %v %s", i, err, l)
		}
	}
	// The default limit stops before the head and says how to go on; 0
	// reads to the head and says nothing.
	code, out, errs = runCLI(t, "", "read", "--all", "--limit", "2", srv)
	if code != exitOK || strings.Count(out, "\n") != 2 || !strings.Contains(errs, "more events from position 2: --from 2") {
		t.Errorf("read --all --limit 2: %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "", "read", "--all", "--limit", "0", srv)
	if code != exitOK || strings.Count(out, "\n") != 5 || errs != "" {
		t.Errorf("read --all --limit 0: %d\n%s\n%s", code, out, errs)
	}
	code, _, errs = runCLI(t, "", "read", "--all", "--limit", "5", srv)
	if code != exitOK || errs != "" {
		t.Errorf("read --all --limit 5 (the whole log): a hint %q", errs)
	}

	// export jsonl: every event, leaf hashes as the node serves them.
	path := filepath.Join(t.TempDir(), "log.jsonl")
	code, out, errs = runCLI(t, "", "export", "jsonl", "--out", path, "--json", srv)
	if code != exitOK || !strings.Contains(out, `"events": 5`) {
		t.Fatalf("export jsonl: %d %s %s", code, out, errs)
	}
	all, err := c.ReadAll(t.Context(), events.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []events.Event
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e events.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("exported line: %v %s", err, sc.Bytes())
		}
		got = append(got, e)
	}
	if diff := cmp.Diff(all.Events, got); diff != "" {
		t.Errorf("exported events differ from GET /v1/all (-want +got):\n%s", diff)
	}
	if code, _, errs := runCLI(t, "", "export", "jsonl", "--out", path, srv); code != exitCannot || !strings.Contains(errs, "exists") {
		t.Errorf("export onto an existing file: %d %s", code, errs)
	}
}

func TestOps_Endpoints(t *testing.T) {
	n := startNode(t)
	dead := deadURL(t)
	// Several endpoints: the dead one first is passed over; a URL without
	// a scheme is http://.
	bare := strings.TrimPrefix(n.URL(), "http://")
	code, out, errs := runCLI(t, "", "info", "--json", "--server", dead+","+bare)
	var info wire.InfoOut
	if err := json.Unmarshal([]byte(out), &info); code != exitOK || err != nil || info.NodeID != "n1" {
		t.Fatalf("info over %s,%s: %d %s %s", dead, bare, code, out, errs)
	}
	// GREFFE_SERVER holds the list as --server does.
	t.Setenv("GREFFE_SERVER", dead+","+n.URL())
	if code, _, errs := runCLI(t, "", "append", "s", "--type", "A"); code != exitOK {
		t.Fatalf("append through GREFFE_SERVER: %d %s", code, errs)
	}

	code, out, _ = runCLI(t, "", "endpoint", "status", "--json", "--server", n.URL()+","+dead)
	var st []endpointStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != exitRefused || len(st) != 2 {
		t.Fatalf("endpoint status: %d %v %s", code, err, out)
	}
	if s := st[0]; !s.IsLeader || s.Leader != "n1" || s.Head != 1 || s.Lag == nil || *s.Lag != 0 || s.Error != "" || s.Took <= 0 {
		t.Errorf("live endpoint: %+v", s)
	}
	if s := st[1]; !strings.Contains(s.Error, "no node answers") || s.Lag != nil {
		t.Errorf("dead endpoint: %+v", s)
	}
	code, out, _ = runCLI(t, "", "endpoint", "health", "--json", "--server", n.URL()+","+dead)
	var hs []endpointHealth
	if err := json.Unmarshal([]byte(out), &hs); err != nil || code != exitRefused || len(hs) != 2 {
		t.Fatalf("endpoint health: %d %v %s", code, err, out)
	}
	if !hs[0].Healthy || hs[0].Error != "" || hs[1].Healthy || !strings.Contains(hs[1].Error, "no node answers") {
		t.Errorf("endpoint health: %+v", hs)
	}
	if code, out, _ := runCLI(t, "", "endpoint", "health", "--server", n.URL()); code != exitOK || !strings.Contains(out, "is healthy") {
		t.Errorf("endpoint health of a live node: %d %s", code, out)
	}

	// --consistency: the values the API takes, checked before sending.
	if code, _, errs := runCLI(t, "", "read", "s", "--consistency", "linearizable", "--server", n.URL()); code != exitOK {
		t.Errorf("read --consistency linearizable on a single node: %d %s", code, errs)
	}
	if code, _, errs := runCLI(t, "", "matrix", "--consistency", "eventual", "--server", n.URL()); code != exitCannot || !strings.Contains(errs, "use local, leader or linearizable") {
		t.Errorf("matrix --consistency eventual: %d %s", code, errs)
	}
}

// TestOps_ErrorsSayWhatToDo runs, through the binary, each error a new
// user met in issue #16 and checks that it says what to do.
func TestOps_ErrorsSayWhatToDo(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	n := startNodeIn(t, data)
	srv := "--server=" + n.URL()
	fresh := func() string { return filepath.Join(t.TempDir(), "new-data") }
	tests := []struct {
		name    string
		args    []string
		want    int
		has     []string
		hasNot  []string
		noDir   string // a folder that must not exist afterwards
		wantOut []string
	}{
		{name: "a stopped node", args: []string{"info", "--server", deadURL(t)}, want: exitCannot,
			has: []string{"no node answers at http://127.0.0.1:", "connection refused", `start one with "greffe serve"`}},
		{name: "a URL without a scheme", args: []string{"info", "--server", strings.TrimPrefix(n.URL(), "http://")}, want: exitOK,
			wantOut: []string{"ledger   " + n.Store.LedgerID()}},
		{name: "the code once", args: []string{"append", "s", "--type", "A", "--expected-version", "5", srv}, want: exitRefused,
			has: []string{"greffe: wrong_expected_version: stream \"s\" expected 5"}, hasNot: []string{"wrong_expected_version: wrong_expected_version"}},
		{name: "a bad time", args: []string{"cmd", "GrantApproval", "--at", "tomorrow", srv}, want: exitCannot,
			has: []string{`--at "tomorrow": use an RFC 3339 time, e.g. 2026-03-01T09:00:00Z`}, hasNot: []string{"2006"}},
		{name: "a bad log level", args: []string{"serve", "--data", fresh(), "--log-level", "verbose"}, want: exitCannot,
			has: []string{`--log-level "verbose": use debug, info, warn or error`}},
		{name: "serve on an address in use creates nothing", args: []string{"serve", "--data", "NODIR", "--http", n.Addr().String()}, want: exitCannot,
			has: []string{"address already in use", "choose another with --http"}, noDir: "NODIR"},
		{name: "serve beyond loopback without tokens creates nothing", args: []string{"serve", "--data", "NODIR", "--http", "0.0.0.0:0"}, want: exitCannot,
			has: []string{"without --tokens", "give --tokens FILE"}, noDir: "NODIR"},
		{name: "a second node on a folder in use", args: []string{"demo", "--data", data, "--http", "127.0.0.1:0"}, want: exitCannot,
			has: []string{"is in use by another process", "stop it first"}, hasNot: []string{"resource temporarily unavailable\n"}},
		{name: "keys list on a missing folder", args: []string{"keys", "list", "--data", "NODIR"}, want: exitCannot,
			has: []string{"--data", "no such file or directory", "give the data folder of a node"}},
		{name: "verify names what it counted and whose keys it trusts", args: []string{"verify", srv}, want: exitOK,
			wantOut: []string{"event signatures (DSSE) checked", "trust on first use", "--verifier or --verifiers", "VERIFIED"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			noDir := ""
			for i, a := range tc.args {
				if a == "NODIR" {
					noDir = fresh()
					tc.args[i] = noDir
				}
			}
			code, out, errs := runBin(t, tc.args...)
			if code != tc.want {
				t.Errorf("exit %d, want %d\nstdout %s\nstderr %s", code, tc.want, out, errs)
			}
			for _, s := range tc.has {
				if !strings.Contains(errs, s) {
					t.Errorf("stderr does not say %q:\n%s", s, errs)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(errs, s) {
					t.Errorf("stderr says %q:\n%s", s, errs)
				}
			}
			for _, s := range tc.wantOut {
				if !strings.Contains(out, s) {
					t.Errorf("stdout does not say %q:\n%s", s, out)
				}
			}
			if noDir != "" {
				if _, err := os.Stat(noDir); err == nil {
					t.Errorf("%s was created", noDir)
				}
			}
		})
	}
}

// TestOps_HTTPErrorsSayWhatToDo: the API's answers to the bodies of issue
// #16, and the ledger unchanged after each.
func TestOps_HTTPErrorsSayWhatToDo(t *testing.T) {
	n := startNode(t)
	tests := []struct {
		name, path, body string
		code, field      string
		has              []string
		hasNot           []string
		problems         []string // details.problems' fields, when several
	}{
		{name: "nostream", path: "/v1/streams/o", body: `{"expected_version":"nostream","events":[{"type":"A"}]}`,
			code: events.CodeInvalidExpectedVersion, field: "expected_version",
			has: []string{`"any", "no_stream", "exists"`, `got "nostream"`}, hasNot: []string{"expected_version: expected_version"}},
		{name: "an array body", path: "/v1/streams/o", body: `[{"type":"A"}]`, code: events.CodeMalformedJSON,
			has: []string{"must be an object"}, hasNot: []string{"client.", "StreamAppendIn"}},
		{name: "a bad time in a command", path: "/v1/commands",
			body: `{"id":"6f9619ff-8b86-d011-b42d-00c04fc964ff","command":"GrantApproval","data":{"approval_id":"a1","approver":"owner","action":"startup","subject":"provider-strata","uses":1,"expires_at":"tomorrow"}}`,
			code: "invalid_command", field: "data.expires_at", has: []string{"RFC 3339", "2026-03-01T09:00:00Z", `got "tomorrow"`}, hasNot: []string{"2006-01-02"}},
		{name: "a command without id and with bad data", path: "/v1/commands",
			body: `{"command":"GrantApproval","data":{"approval_id":"a1","uses":"one"}}`,
			code: "invalid_command_id", field: "id", has: []string{"and 1 more problem: see details.problems"},
			problems: []string{"id", "data.uses"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, eb := postJSON(t, n.URL()+tc.path, tc.body)
			if status != http.StatusBadRequest || eb.Error.Code != tc.code || eb.Error.Field != tc.field {
				t.Fatalf("%d %+v, want 400 %s at %q", status, eb.Error, tc.code, tc.field)
			}
			for _, s := range tc.has {
				if !strings.Contains(eb.Error.Message, s) {
					t.Errorf("message does not say %q: %s", s, eb.Error.Message)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(eb.Error.Message, s) {
					t.Errorf("message says %q: %s", s, eb.Error.Message)
				}
			}
			if tc.problems != nil {
				var got []string
				list, _ := eb.Error.Details["problems"].([]any)
				for _, p := range list {
					m, _ := p.(map[string]any)
					f, _ := m["field"].(string)
					got = append(got, f)
				}
				if diff := cmp.Diff(tc.problems, got); diff != "" {
					t.Errorf("details.problems' fields (-want +got):\n%s\n%v", diff, eb.Error.Details)
				}
			}
			if h := n.Store.Head().Size; h != 0 {
				t.Errorf("the ledger holds %d events after a refusal", h)
			}
		})
	}
}
