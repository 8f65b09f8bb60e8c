package witness_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/witness"
)

// openCollector starts a collector of the log s sending to ws, with short
// backoffs so that a recovered witness is retried within the test.
func openCollector(t testing.TB, s *pebblelog.Store, state string, quorum int, ws ...*greffeWitness) *witness.Collector {
	t.Helper()
	cfg := witness.CollectorConfig{Origin: s.Origin(), Log: s, Quorum: quorum, StateFile: state,
		PollInterval: time.Hour, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	for _, w := range ws {
		cfg.Witnesses = append(cfg.Witnesses, w.config(t))
	}
	c, err := witness.OpenCollector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func waitCosigned(t testing.TB, c *witness.Collector, size uint64, quorum int) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cp, err := c.WaitCosigned(ctx, size, quorum)
	if err != nil {
		t.Fatalf("WaitCosigned(%d, %d): %v; status %+v", size, quorum, err, c.Status())
	}
	return cp.Note
}

// sigNames opens n with vs and returns the names of the signatures that
// verified.
func sigNames(t testing.TB, n []byte, vs ...note.Verifier) []string {
	t.Helper()
	opened, err := note.Open(n, note.VerifierList(vs...))
	if err != nil {
		t.Fatalf("open %q: %v", n, err)
	}
	var out []string
	for _, s := range opened.Sigs {
		out = append(out, s.Name)
	}
	return out
}

// TestCollector_CosignsAndRemembers: two greffe witnesses cosign the log's
// checkpoints; the note the collector serves carries the log's signature
// and both cosignatures, and a collector reopened on the state file serves
// them again without asking.
func TestCollector_CosignsAndRemembers(t *testing.T) {
	key := newLogKey(t, testOrigin)
	s := openLog(t, key)
	w1, w2 := startWitness(t, "witness.test/w1", key), startWitness(t, "witness.test/w2", key)
	state := filepath.Join(t.TempDir(), "witness-state.json")
	c := openCollector(t, s, state, 2, w1, w2)
	appendN(t, s, "a", 0, 3)
	got := sigNames(t, waitCosigned(t, c, 3, 2), key.verifier, w1.verifier, w2.verifier)
	if diff := cmp.Diff([]string{testOrigin, "witness.test/w1", "witness.test/w2"}, got); diff != "" {
		t.Fatalf("signatures (-want +got)\n%s", diff)
	}
	appendN(t, s, "a", 3, 4)
	waitCosigned(t, c, 7, 2)
	st := c.Status()
	for _, w := range st {
		if w.Size != 7 || w.Cosignatures < 1 || w.Failures != 0 || w.Conflicts != 0 || w.CosignedAt.IsZero() {
			t.Fatalf("status after two checkpoints: %+v", st)
		}
	}
	c.Close()

	c2 := openCollector(t, s, state, 2, w1, w2)
	cp, ok := c2.NewestCosigned(2)
	if !ok || cp.Size != 7 {
		t.Fatalf("after a restart: newest cosigned %d %v", cp.Size, ok)
	}
	if diff := cmp.Diff([]string{testOrigin, "witness.test/w1", "witness.test/w2"}, sigNames(t, c2.Cosigned(latest(t, s)), key.verifier, w1.verifier, w2.verifier)); diff != "" {
		t.Fatalf("served note after a restart (-want +got)\n%s", diff)
	}
	if st := c2.Status(); st[0].Size != 7 || st[1].Size != 7 {
		t.Fatalf("sizes after a restart: %+v", st)
	}
}

// TestCollector_WitnessDownDelaysNothing: while one witness answers 503,
// the other's cosignatures keep coming and a quorum of one is reached; the
// failures are counted; once it is back the collector catches it up by
// itself, with no new append.
func TestCollector_WitnessDownDelaysNothing(t *testing.T) {
	key := newLogKey(t, testOrigin)
	s := openLog(t, key)
	up, down := startWitness(t, "witness.test/up", key), startWitness(t, "witness.test/down", key)
	down.down.Store(true)
	c := openCollector(t, s, filepath.Join(t.TempDir(), "state.json"), 1, up, down)
	appendN(t, s, "a", 0, 5)
	n := waitCosigned(t, c, 5, 1)
	if diff := cmp.Diff([]string{testOrigin, "witness.test/up"}, sigNames(t, n, key.verifier, up.verifier, down.verifier)); diff != "" {
		t.Fatalf("with one witness down (-want +got)\n%s", diff)
	}
	waitFor(t, c, "failures of the witness that is down", func(st []witness.Status) bool {
		return st[1].Failures >= 2 && st[1].Size == 0 && strings.Contains(st[1].LastError, "503")
	})
	down.down.Store(false)
	st := waitFor(t, c, "the recovered witness to catch up", func(st []witness.Status) bool { return st[1].Size == 5 })
	if st[1].LastError != "" || st[1].Conflicts != 0 {
		t.Fatalf("after recovery: %+v", st[1])
	}
	if got := sigNames(t, c.Cosigned(latest(t, s)), key.verifier, up.verifier, down.verifier); len(got) != 3 {
		t.Fatalf("after recovery the note carries %v", got)
	}
}

// TestCollector_StaleSizeCatchesUp: a collector that lost its state file
// sends a proof from the empty tree; the witness answers 409 with the size
// it cosigned, and the collector resends at once with a proof from it.
func TestCollector_StaleSizeCatchesUp(t *testing.T) {
	key := newLogKey(t, testOrigin)
	s := openLog(t, key)
	w := startWitness(t, "witness.test/w1", key)
	state := filepath.Join(t.TempDir(), "state.json")
	c := openCollector(t, s, state, 1, w)
	appendN(t, s, "a", 0, 4)
	waitCosigned(t, c, 4, 1)
	c.Close()
	if err := os.Remove(state); err != nil {
		t.Fatal(err)
	}
	appendN(t, s, "a", 4, 3)
	c2 := openCollector(t, s, state, 1, w)
	waitCosigned(t, c2, 7, 1)
	if st := c2.Status()[0]; st.Size != 7 || st.Conflicts != 0 || st.Failures != 0 {
		t.Fatalf("status: %+v", st)
	}
}

// TestCollector_ConflictIsNeverRetried: the witness cosigned a fork of the
// log (same key, other events); the log's own checkpoint is inconsistent
// with it, the witness answers 422, and the collector logs it, counts it
// and sends that witness nothing more.
func TestCollector_ConflictIsNeverRetried(t *testing.T) {
	key := newLogKey(t, testOrigin)
	fork := openLog(t, key)
	w := startWitness(t, "witness.test/w1", key)
	appendN(t, fork, "fork", 0, 6)
	cf := openCollector(t, fork, filepath.Join(t.TempDir(), "fork.json"), 1, w)
	waitCosigned(t, cf, 6, 1)
	cf.Close()

	s := openLog(t, key)
	appendN(t, s, "a", 0, 9)
	c := openCollector(t, s, filepath.Join(t.TempDir(), "state.json"), 1, w)
	st := waitFor(t, c, "the conflict", func(st []witness.Status) bool { return st[0].Halted })
	if st[0].Conflicts != 1 || st[0].Size != 6 || !strings.Contains(st[0].LastError, "422") {
		t.Fatalf("status after the conflict: %+v", st[0])
	}
	requests := w.requests.Load()
	appendN(t, s, "a", 9, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := c.WaitCosigned(ctx, 11, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a cosigned checkpoint after the conflict: %v", err)
	}
	if got := w.requests.Load(); got != requests {
		t.Fatalf("the collector sent %d more requests to a witness that saw another history", got-requests)
	}
	if _, err := c.WaitCosigned(context.Background(), 1, 2); !errors.Is(err, witness.ErrQuorumUnreachable) {
		t.Fatalf("a quorum above the witnesses: %v", err)
	}
}
