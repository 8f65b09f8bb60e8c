package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/node/nodetest"
	"github.com/greffe/greffe/wire"
	"github.com/greffe/greffe/witness"
)

// TestCLI_WitnessedNode: greffe witness cosigns a node started with
// serve's --witness; verify --witness-quorum and read --verified
// --witness-quorum accept its checkpoint, and refuse (exit 1, naming the
// checkpoint) a node whose checkpoints no witness cosigned. The witness's
// metrics say what it cosigned.
func TestCLI_WitnessedNode(t *testing.T) {
	data := t.TempDir()
	// A first start creates the ledger and its keys: the witness follows
	// that origin with that key.
	n0, err := node.Open(node.Config{DataDir: data, API: api.Config{Addr: "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	origin, vkey := n0.Store.Origin(), n0.Keys.Verifiers[0]
	if err := n0.Close(); err != nil {
		t.Fatal(err)
	}

	wdir := t.TempDir()
	key := filepath.Join(wdir, "witness.key")
	ctx, cancel := context.WithCancel(t.Context())
	var wout, werr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"witness", "--data", filepath.Join(wdir, "state"), "--key", key, "--new-key", "witness.test/w1",
			"--http", "127.0.0.1:0", "--log", origin + "=" + vkey, "--json"}, strings.NewReader(""), &wout, &werr)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("greffe witness exited %d: %s", code, werr.String())
		}
	})
	var started struct{ URL, VKey string }
	waitUntil(t, "greffe witness to start", 15*time.Second, func() bool { return json.Unmarshal([]byte(wout.String()), &started) == nil && started.URL != "" })

	w, err := witness.ParseWitness(started.URL + "=" + started.VKey)
	if err != nil {
		t.Fatal(err)
	}
	n := startNodeWith(t, node.Config{DataDir: data, API: api.Config{Addr: "127.0.0.1:0"}, Witness: node.WitnessConfig{Witnesses: []witness.Witness{w}, Quorum: 1}})
	c := client.New(n.URL(), "")
	for range 3 {
		if _, err := c.Append(t.Context(), "s", events.ExpectAny, []wire.EventIn{{Type: "T", Data: json.RawMessage(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	srv := "--server=" + n.URL()
	waitUntil(t, "the witness's cosignature of size 3", 15*time.Second, func() bool {
		b, err := c.Get(t.Context(), "/v1/checkpoint")
		return err == nil && strings.Contains(string(b), "\n3\n") && strings.Contains(string(b), "— witness.test/w1 ")
	})

	code, out, errs := runCLI(t, "", "verify", srv, "--witness", started.VKey, "--witness-quorum", "1")
	if code != exitOK || !strings.Contains(out, "VERIFIED") {
		t.Fatalf("verify --witness-quorum 1 of a witnessed node: %d\n%s%s", code, out, errs)
	}
	state := filepath.Join(t.TempDir(), "state.json")
	code, out, errs = runCLI(t, "", "read", "--all", srv, "--verified", "--state", state, "--witness", started.VKey, "--witness-quorum", "1")
	if code != exitOK || strings.Count(out, "\n") != 3 {
		t.Fatalf("read --verified --witness-quorum 1: %d\n%s%s", code, out, errs)
	}
	if st, err := audit.ReadState(state); err != nil || st == nil || st.Size != 3 {
		t.Fatalf("the state file after a verified read: %+v %v", st, err)
	}
	mission := `{"mission_id":"m-w","task_class":"code","mode":"proposal","confidential":false,"allow_connected":false,"declared_provider":"glm-local",` +
		`"starts_runtime":false,"allowed_files":["bin/*.sh"],"acceptance_checks":[{"id":"c01","argv":["bash","tests/run_case.sh","c01"]}],"budgets":{}}`
	code, out, errs = runCLI(t, "", "cmd", "SubmitMission", srv, "--verified", "--state", state, "--witness", started.VKey, "--witness-quorum", "1", "--data", mission)
	if code != exitOK || !strings.Contains(out, "MissionSubmitted") {
		t.Fatalf("cmd --verified: %d\n%s%s", code, out, errs)
	}

	metrics, err := c.Get(t.Context(), "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`greffe_witness_cosigned_size_events{url="` + started.URL + `",witness="witness.test/w1"}`, "greffe_witness_conflicts_total{"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("GET /metrics lacks %s", want)
		}
	}

	// A node without witnesses: its checkpoint carries no cosignature.
	bare := startNode(t)
	if _, err := client.New(bare.URL(), "").Append(t.Context(), "s", events.ExpectAny, []wire.EventIn{{Type: "T"}}); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runCLI(t, "", "verify", "--server="+bare.URL(), "--witness", started.VKey, "--witness-quorum", "1")
	if code != exitRefused || !strings.Contains(out, audit.KindCheckpointNotWitnessed) || !strings.Contains(out, "checkpoint of size 1") {
		t.Fatalf("verify --witness-quorum 1 of an unwitnessed node: %d\n%s%s", code, out, errs)
	}
	code, _, errs = runCLI(t, "", "read", "--all", "--server="+bare.URL(), "--verified", "--witness", started.VKey, "--witness-quorum", "1")
	if code != exitRefused || !strings.Contains(errs, audit.KindCheckpointNotWitnessed) || !strings.Contains(errs, "checkpoint of size 1") {
		t.Fatalf("read --verified --witness-quorum 1 of an unwitnessed node: %d %s", code, errs)
	}
}

// TestCLI_VerifiedReadRollback: a state file that trusts a larger tree
// than the node now serves is a rollback: exit 1, naming both sizes.
func TestCLI_VerifiedReadRollback(t *testing.T) {
	n := startNode(t)
	srv := "--server=" + n.URL()
	c := client.New(n.URL(), "")
	for range 2 {
		if _, err := c.Append(t.Context(), "s", events.ExpectAny, []wire.EventIn{{Type: "T"}}); err != nil {
			t.Fatal(err)
		}
	}
	state := filepath.Join(t.TempDir(), "state.json")
	if code, out, errs := runCLI(t, "", "read", "s", srv, "--verified", "--state", state); code != exitOK || strings.Count(out, "\n") != 2 {
		t.Fatalf("read --verified: %d %s %s", code, out, errs)
	}
	st, err := audit.ReadState(state)
	if err != nil || st == nil {
		t.Fatal(err)
	}
	st.Size = 9 // as if the node had shown this auditor 9 events before
	if err := audit.WriteState(state, st); err != nil {
		t.Fatal(err)
	}
	code, _, errs := runCLI(t, "", "read", "s", srv, "--verified", "--state", state)
	if code != exitRefused || !strings.Contains(errs, audit.KindRollback) || !strings.Contains(errs, "size 2") || !strings.Contains(errs, "9") {
		t.Fatalf("read --verified after a rollback: %d %s", code, errs)
	}
	if code, _, errs := runCLI(t, "", "read", "s", srv, "--state", state); code != exitCannot || !strings.Contains(errs, "--verified") {
		t.Fatalf("--state without --verified: %d %s", code, errs)
	}
}

func startNodeWith(t *testing.T, cfg node.Config) *node.Node {
	t.Helper()
	n, _ := nodetest.Serve(t, cfg)
	return n
}

// TestCLI_BenchReads: greffe bench --reads prints the three kinds of
// read, each with a verified rate (the verified reads succeeded).
func TestCLI_BenchReads(t *testing.T) {
	code, out, errs := runCLI(t, "", "bench", "--reads", "--embedded", "--duration", "200ms", "--fsync-baseline", "10ms", "--json")
	var got struct {
		Reads []readFigure `json:"reads"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || len(got.Reads) != 3 {
		t.Fatalf("bench --reads: %d %s %s", code, out, errs)
	}
	for _, f := range got.Reads {
		if f.ReadsPerSec <= 0 || f.VerifiedPerSec <= 0 {
			t.Errorf("%s of %d: %+v", f.What, f.Events, f)
		}
	}
}

// TestCLI_WitnessLostState (#20, finding 15): greffe witness cosigns a
// checkpoint, stops, and loses its --data folder while its key (and the
// record beside it, KEY.state) survives: the next start exits 2 naming the
// log and --accept-lost-state, where it used to start empty and cosign a
// fork of what it had cosigned. With --accept-lost-state it starts and
// logs the loss at error level.
func TestCLI_WitnessLostState(t *testing.T) {
	skey, vkey, err := note.GenerateKey(rand.Reader, events.Origin("00000000-0000-4000-8000-0000000000e1"))
	if err != nil {
		t.Fatal(err)
	}
	logSigner, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	origin := logSigner.Name()
	cp, err := events.SignCheckpoint(origin, 1, events.LeafHash([]byte("a")), logSigner)
	if err != nil {
		t.Fatal(err)
	}
	fork, err := events.SignCheckpoint(origin, 1, events.LeafHash([]byte("fork")), logSigner)
	if err != nil {
		t.Fatal(err)
	}
	wdir := t.TempDir()
	key, data := filepath.Join(wdir, "witness.key"), filepath.Join(wdir, "state")
	args := []string{"witness", "--data", data, "--key", key, "--new-key", "witness.test/w1", "--http", "127.0.0.1:0", "--log", vkey, "--json"}

	// start runs greffe witness until the returned stop is called, and
	// returns its URL, or "" and its exit code when it did not start.
	start := func(extra ...string) (url string, code int, stderr *syncBuffer, stop func()) {
		ctx, cancel := context.WithCancel(t.Context())
		var wout syncBuffer
		werr := &syncBuffer{}
		done := make(chan int, 1)
		go func() { done <- run(ctx, append(slices.Clone(args), extra...), strings.NewReader(""), &wout, werr) }()
		var started struct{ URL string }
		exited := -1
		waitUntil(t, "greffe witness to start or exit", 15*time.Second, func() bool {
			select {
			case exited = <-done:
				return true
			default:
			}
			return json.Unmarshal([]byte(wout.String()), &started) == nil && started.URL != ""
		})
		if exited >= 0 {
			cancel()
			return "", exited, werr, func() {}
		}
		return started.URL, exitOK, werr, func() {
			cancel()
			if code := <-done; code != exitOK {
				t.Errorf("greffe witness exited %d: %s", code, werr.String())
			}
		}
	}
	add := func(url string, old uint64, n []byte) int {
		resp, err := http.Post(url+witness.AddCheckpointPath, "text/plain", bytes.NewReader(witness.AddCheckpointRequest{OldSize: old, Checkpoint: n}.Marshal()))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}

	url, _, _, stop := start()
	if got := add(url, 0, cp.Note); got != http.StatusOK {
		t.Fatalf("the first checkpoint: %d", got)
	}
	stop()
	if _, err := os.Stat(key + ".state"); err != nil {
		t.Fatalf("the state marker beside the key: %v", err)
	}
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	url, code, errs, _ := start()
	if e := errs.String(); url != "" || code != exitCannot || !strings.Contains(e, "state lost") || !strings.Contains(e, origin) || !strings.Contains(e, "--accept-lost-state") {
		t.Fatalf("a witness whose --data was lost: started %q, exit %d, %s", url, code, e)
	}

	url, _, errs, stop = start("--accept-lost-state")
	defer stop()
	if e := errs.String(); !strings.Contains(e, "level=ERROR") || !strings.Contains(e, "STARTING WITH LOST STATE") || !strings.Contains(e, origin) {
		t.Errorf("--accept-lost-state did not log the loss at error level: %s", e)
	}
	// Trusted on first use again, as the operator accepted.
	if got := add(url, 0, fork.Note); got != http.StatusOK {
		t.Fatalf("the first checkpoint after starting anew: %d", got)
	}
}
