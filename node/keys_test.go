package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/audit/offline"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/node"
)

func asError(err error, target any) bool { return errors.As(err, target) }

// appendAndSign opens a node on data (not serving), appends one event and
// signs a checkpoint of the head; it returns the note and closes the node.
func appendAndSign(t *testing.T, data string) []byte {
	t.Helper()
	cfg := node.Config{DataDir: data}
	cfg.API.Addr = "127.0.0.1:0"
	cfg.Store.CheckpointInterval = -1
	n, err := node.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx := context.Background()
	if _, err := n.Store.Append(ctx, events.AppendRequest{Streams: []events.StreamAppend{{Stream: "rot",
		Events: []events.Proposed{{ID: uuid.New(), Type: "T", Data: json.RawMessage(`{}`), Metadata: json.RawMessage(`{}`)}}}}}); err != nil {
		t.Fatal(err)
	}
	cp, err := n.Store.LatestCheckpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return cp.Note
}

func sigLines(note []byte) int { return strings.Count(string(note), "\n— ") }

func verifiersOf(t *testing.T, keys ...string) []note.Verifier {
	t.Helper()
	vs, err := audit.ParseVerifiers(keys)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// TestKeys_Rotation walks docs/AUDIT.md's procedure: add a key (both sign
// every checkpoint during the overlap), retire the old one (it signs no
// more but stays published), and verify with a configured verifier set.
func TestKeys_Rotation(t *testing.T) {
	data := t.TempDir()
	appendAndSign(t, data)
	keys, err := node.ListKeys(data)
	if err != nil || len(keys) != 1 || !keys[0].Active {
		t.Fatalf("first start: %+v %v", keys, err)
	}
	old := keys[0]
	origin, err := node.KeysOrigin(data)
	if err != nil || origin != old.Name {
		t.Fatalf("origin %q %v", origin, err)
	}

	// 1. Add: both keys sign.
	newV, err := node.AddKey(data, origin)
	if err != nil {
		t.Fatal(err)
	}
	cp2 := appendAndSign(t, data)
	if sigLines(cp2) != 2 {
		t.Fatalf("overlap checkpoint carries %d signatures, want 2:\n%s", sigLines(cp2), cp2)
	}
	for _, v := range []string{old.Verifier, newV} {
		if _, _, err := events.OpenCheckpoint(cp2, origin, verifiersOf(t, v)...); err != nil {
			t.Errorf("overlap checkpoint with %s alone: %v", v, err)
		}
	}

	// 3. Retire the old key: only the new one signs; the old is published.
	if err := node.RetireKey(data, origin, old.Hash); err != nil {
		t.Fatal(err)
	}
	if err := node.RetireKey(data, origin, strings.Split(newV, "+")[1]); err == nil {
		t.Error("retired the last active key")
	}
	cp3 := appendAndSign(t, data)
	if sigLines(cp3) != 1 {
		t.Fatalf("after retirement %d signatures, want 1", sigLines(cp3))
	}
	if _, _, err := events.OpenCheckpoint(cp3, origin, verifiersOf(t, old.Verifier)...); err == nil {
		t.Error("a checkpoint after retirement verifies with the retired key")
	}
	ks, err := node.LoadKeys(data, origin)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{newV, old.Verifier}, ks.Verifiers); diff != "" {
		t.Errorf("published verifiers (-want +got):\n%s", diff)
	}
	all, err := node.VerifierKeys(data)
	if err != nil || len(all) != 2 {
		t.Fatalf("verifier keys %v %v", all, err)
	}

	// Verify accepts the configured set: the whole history verifies with
	// both keys; with the new key alone, the checkpoint signed only by the
	// old key does not.
	for _, tc := range []struct {
		name     string
		keys     []string
		verified bool
	}{
		{"old and new", []string{old.Verifier, newV}, true},
		{"new only", []string{newV}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := offline.VerifyDir(t.Context(), node.LedgerDir(data), audit.Config{Verifiers: verifiersOf(t, tc.keys...)})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Verified != tc.verified || rep.Checkpoints != 3 {
				t.Fatalf("verified %t with %d checkpoints: %v", rep.Verified, rep.Checkpoints, rep.Faults)
			}
			if !tc.verified && (rep.First.Kind != audit.KindCheckpointSignature || *rep.First.Checkpoint != 1) {
				t.Errorf("first fault %s, want the old-key-only checkpoint of size 1", rep.First)
			}
		})
	}
}

func TestKeys_NoKeys(t *testing.T) {
	if _, err := node.KeysOrigin(t.TempDir()); !errors.Is(err, node.ErrNoKeys) {
		t.Errorf("empty folder: %v, want ErrNoKeys", err)
	}
}
