package node

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events"
)

var leaseT0 = time.Date(2026, 9, 6, 10, 0, 0, 0, time.UTC)

// openLeaseNode opens a node on dir with a manual clock (so Open starts no
// watcher) and starts a watcher on it that polls every few milliseconds:
// the clock is the handler's, injected.
func openLeaseNode(t *testing.T, dir string, clock *commands.ManualClock) *Node {
	t.Helper()
	n, err := Open(Config{DataDir: dir, API: api.Config{Addr: "127.0.0.1:0"}, Clock: clock.Now, SetClock: clock.Set})
	if err != nil {
		t.Fatal(err)
	}
	lw := startLeaseWatcher(n.Store, n.Commands, n.cfg.Logger, 5*time.Millisecond, nil)
	n.closers = append([]func() error{lw.Close}, n.closers...)
	return n
}

func handle(t *testing.T, n *Node, name string, data any) {
	t.Helper()
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Commands.Handle(t.Context(), commands.Request{Command: name, ID: uuid.NewString(), Principal: aggregates.Anonymous, Data: b}); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// waitUncertain follows the store (bounded) until measurement id is marked
// uncertain, and returns the mark.
func waitUncertain(t *testing.T, n *Node, id string) aggregates.MeasurementUncertain {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	var d aggregates.MeasurementUncertain
	found := errors.New("found")
	err := n.Store.Subscribe(ctx, 0, events.Filter{StreamPrefix: aggregates.MeasurementStream(id), Types: []string{aggregates.TypeMeasurementUncertain}},
		func(e events.Event) error {
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return err
			}
			if e.Actor != leaseWatcherActor {
				t.Errorf("marked by %q", e.Actor)
			}
			return found
		})
	if !errors.Is(err, found) {
		t.Fatalf("measurement %s never marked uncertain: %v", id, err)
	}
	return d
}

// claimed registers an executor, requests measurement id and claims it
// until leaseT0 + lease.
func claimed(t *testing.T, n *Node, id string, lease time.Duration) {
	t.Helper()
	pub := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	handle(t, n, "GrantApproval", aggregates.GrantApproval{ApprovalID: aggregates.ID("reg-" + id), Approver: "owner", Action: aggregates.ActionActivation,
		Subject: aggregates.ShortText(aggregates.ExecutorStream("gpu-" + id)), Uses: 1, ExpiresAt: leaseT0.Add(time.Hour)})
	handle(t, n, "RegisterExecutorKey", aggregates.RegisterExecutorKey{ExecutorID: aggregates.ID("gpu-" + id), Host: "spark-1", PublicKey: aggregates.Ed25519PublicKey(pub), ApprovalID: aggregates.OptionalID("reg-" + id)})
	handle(t, n, "RequestMeasurement", aggregates.RequestMeasurement{MeasurementID: aggregates.ID(id), Host: "spark-1", Kind: aggregates.MeasurementRun,
		Argv: []string{"true"}, Timeout: aggregates.PositiveDuration(aggregates.D(time.Minute)), OutputCapBytes: 1024})
	handle(t, n, "ClaimMeasurement", aggregates.ClaimMeasurement{MeasurementID: aggregates.ID(id), ExecutorID: aggregates.ID("gpu-" + id), LeaseUntil: leaseT0.Add(lease)})
}

// TestLeaseWatcher_MarksExpiredLeases: once the node's clock passes a
// lease (its latest renewal) without a result, the watcher marks the
// measurement uncertain, as the node's principal.
func TestLeaseWatcher_MarksExpiredLeases(t *testing.T) {
	clock := commands.NewManualClock(leaseT0)
	n := openLeaseNode(t, t.TempDir(), clock)
	defer n.Close()
	claimed(t, n, "m1", 30*time.Second)
	clock.Set(leaseT0.Add(20 * time.Second))
	handle(t, n, "RenewMeasurementLease", aggregates.RenewMeasurementLease{MeasurementID: "m1", ExecutorID: "gpu-m1", LeaseUntil: leaseT0.Add(50 * time.Second)})
	clock.Set(leaseT0.Add(51 * time.Second))
	got := waitUncertain(t, n, "m1")
	want := aggregates.MeasurementUncertain{MeasurementID: "m1", ExecutorID: "gpu-m1", LeaseUntil: leaseT0.Add(50 * time.Second),
		Reason: "lease expired without a result", At: leaseT0.Add(51 * time.Second)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestLeaseWatcher_AfterRestart: a node restarted with a claim still open
// finds it in the log and marks it when its lease has passed.
func TestLeaseWatcher_AfterRestart(t *testing.T) {
	dir := t.TempDir()
	clock := commands.NewManualClock(leaseT0)
	n := openLeaseNode(t, dir, clock)
	claimed(t, n, "m2", time.Minute)
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	clock.Set(leaseT0.Add(2 * time.Minute))
	n = openLeaseNode(t, dir, clock)
	defer n.Close()
	if got := waitUncertain(t, n, "m2"); !got.LeaseUntil.Equal(leaseT0.Add(time.Minute)) {
		t.Errorf("marked lease %s", got.LeaseUntil)
	}
}
