package audit_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/audit/offline"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/layout"
)

func verifyDir(t *testing.T, f *fixture) *audit.Report {
	t.Helper()
	rep, err := offline.VerifyDir(t.Context(), f.dir, audit.Config{Verifiers: []note.Verifier{f.verifier}})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// first is the part of the first fault a test pins down.
type first struct {
	Kind     string
	Position int64
	End      int64
}

func firstOf(r *audit.Report) first {
	if r.First == nil {
		return first{}
	}
	return first{r.First.Kind, r.First.Position, r.First.End}
}

func TestVerifyDir_CleanLog(t *testing.T) {
	f := buildLog(t, 700, 100, 256, 300, 512)
	rep := verifyDir(t, f)
	if !rep.Verified {
		t.Fatalf("clean log not verified: %+v", rep.Faults)
	}
	got := []any{rep.Events, rep.Checkpoints, rep.Streams, rep.Size}
	if diff := cmp.Diff([]any{uint64(700), 5, 7, uint64(700)}, got); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

func TestVerifyDir_EmptyLog(t *testing.T) {
	f := buildLog(t, 0)
	rep := verifyDir(t, f)
	if !rep.Verified || rep.Events != 0 || !bytes.Equal(rep.Root, events.EmptyRoot[:]) || rep.Checkpoints != 1 {
		t.Fatalf("empty log: %+v", rep)
	}
}

// TestVerifyDir_Tampering is the auditor's contract: each kind of tampering
// of issue #3, done with Pebble's own API (so Pebble's checksums stay
// valid), is detected and attributed to the right position.
func TestVerifyDir_Tampering(t *testing.T) {
	const n = 700 // two full tiles and a partial one
	tests := []struct {
		name   string
		tamper func(t *testing.T, db *pebble.DB)
		want   first
	}{
		{
			name: "one byte of an event's data changed",
			tamper: func(t *testing.T, db *pebble.DB) {
				k := layout.EventKey(57)
				set(t, db, k, flipData(get(t, db, k)))
			},
			want: first{Kind: audit.KindLeafHashMismatch, Position: 57},
		},
		{
			name: "one byte changed in the partial tile, located by the checkpoints around it",
			tamper: func(t *testing.T, db *pebble.DB) {
				k := layout.EventKey(650)
				set(t, db, k, flipData(get(t, db, k)))
			},
			// The checkpoints at 648 (matches) and 656 (does not) bound the
			// change to [648, 656): no tile records these leaves yet.
			want: first{Kind: audit.KindCheckpointRoot, Position: 648, End: 656},
		},
		{
			name: "an event deleted",
			tamper: func(t *testing.T, db *pebble.DB) {
				if err := db.Delete(layout.EventKey(300), pebble.Sync); err != nil {
					t.Fatal(err)
				}
			},
			want: first{Kind: audit.KindEventMissing, Position: 300},
		},
		{
			name: "two events swapped",
			tamper: func(t *testing.T, db *pebble.DB) {
				a, b := get(t, db, layout.EventKey(120)), get(t, db, layout.EventKey(480))
				set(t, db, layout.EventKey(120), b)
				set(t, db, layout.EventKey(480), a)
			},
			want: first{Kind: audit.KindPositionMismatch, Position: 120},
		},
		{
			name: "the log truncated, the recorded head left as it was",
			tamper: func(t *testing.T, db *pebble.DB) {
				if err := db.DeleteRange(layout.EventKey(600), layout.EventKey(1<<40), pebble.Sync); err != nil {
					t.Fatal(err)
				}
			},
			want: first{Kind: audit.KindEventMissing, Position: 600, End: 700},
		},
		{
			name: "a stream-index entry pointing to the wrong position",
			tamper: func(t *testing.T, db *pebble.DB) {
				// Point the entry of the event at 203 to position 205.
				e, err := events.Decode(get(t, db, layout.EventKey(203)))
				if err != nil {
					t.Fatal(err)
				}
				set(t, db, layout.StreamKey(e.Stream, e.Version), u64(205))
			},
			want: first{Kind: audit.KindStreamIndexMismatch, Position: 203},
		},
		{
			name: "an event-id index entry deleted",
			tamper: func(t *testing.T, db *pebble.DB) {
				raw := get(t, db, layout.EventKey(42))
				e, err := events.Decode(raw)
				if err != nil {
					t.Fatal(err)
				}
				if err := db.Delete(layout.IDKey(e.ID), pebble.Sync); err != nil {
					t.Fatal(err)
				}
			},
			want: first{Kind: audit.KindIDIndexMissing, Position: 42},
		},
		{
			name: "the ledger id record deleted",
			tamper: func(t *testing.T, db *pebble.DB) {
				if err := db.Delete([]byte("mledger_id"), pebble.Sync); err != nil {
					t.Fatal(err)
				}
			},
			want: first{Kind: audit.KindStoreIdentity, Position: audit.NoPosition},
		},
		{
			name: "a malformed event key",
			tamper: func(t *testing.T, db *pebble.DB) {
				set(t, db, []byte("e\x00\x01"), []byte("x"))
			},
			want: first{Kind: audit.KindMalformedKey, Position: audit.NoPosition},
		},
		{
			name: "an event stored beyond the recorded head",
			tamper: func(t *testing.T, db *pebble.DB) {
				set(t, db, layout.EventKey(n), get(t, db, layout.EventKey(5)))
			},
			want: first{Kind: audit.KindEventBeyondHead, Position: n},
		},
		{
			name: "an event's bytes replaced by garbage",
			tamper: func(t *testing.T, db *pebble.DB) {
				set(t, db, layout.EventKey(99), []byte("garbage"))
			},
			want: first{Kind: audit.KindEventUndecodable, Position: 99},
		},
		{
			name: "a leaf tile deleted",
			tamper: func(t *testing.T, db *pebble.DB) {
				if err := db.Delete(layout.LeafTileKey(1), pebble.Sync); err != nil {
					t.Fatal(err)
				}
			},
			want: first{Kind: audit.KindLeafTileMissing, Position: 256, End: 512},
		},
		{
			name: "a tile-base node deleted",
			tamper: func(t *testing.T, db *pebble.DB) {
				if err := db.Delete(layout.NodeKey(8, 0), pebble.Sync); err != nil {
					t.Fatal(err)
				}
			},
			want: first{Kind: audit.KindNodeMissing, Position: 0, End: 256},
		},
		{
			name: "a leaf tile stored beyond the log",
			tamper: func(t *testing.T, db *pebble.DB) {
				set(t, db, layout.LeafTileKey(5), make([]byte, 256*32))
			},
			want: first{Kind: audit.KindUnexpectedEntry, Position: 1280, End: 1536},
		},
		{
			name: "the recorded head's compact range altered",
			tamper: func(t *testing.T, db *pebble.DB) {
				v := get(t, db, []byte("mstate"))
				v[len(v)-1] ^= 1
				set(t, db, []byte("mstate"), v)
			},
			// 700 = 512+128+32+16+8+4: the last node covers [696, 700).
			want: first{Kind: audit.KindStateMismatch, Position: 696, End: 700},
		},
		{
			name: "a stream-index entry deleted",
			tamper: func(t *testing.T, db *pebble.DB) {
				e, err := events.Decode(get(t, db, layout.EventKey(150)))
				if err != nil {
					t.Fatal(err)
				}
				if err := db.Delete(layout.StreamKey(e.Stream, e.Version), pebble.Sync); err != nil {
					t.Fatal(err)
				}
			},
			want: first{Kind: audit.KindStreamIndexMissing, Position: 150},
		},
		{
			name: "an event-id index entry pointing to the wrong position",
			tamper: func(t *testing.T, db *pebble.DB) {
				e, err := events.Decode(get(t, db, layout.EventKey(42)))
				if err != nil {
					t.Fatal(err)
				}
				set(t, db, layout.IDKey(e.ID), u64(43))
			},
			want: first{Kind: audit.KindIDIndexMismatch, Position: 42},
		},
		{
			name: "a stored checkpoint replaced by garbage",
			tamper: func(t *testing.T, db *pebble.DB) {
				set(t, db, layout.CheckpointKey(300), []byte("not a note"))
			},
			want: first{Kind: audit.KindCheckpointMalformed, Position: 300},
		},
		{
			name: "a stored tile-base node changed",
			tamper: func(t *testing.T, db *pebble.DB) {
				k := layout.NodeKey(8, 1)
				v := get(t, db, k)
				v[0] ^= 1
				set(t, db, k, v)
			},
			want: first{Kind: audit.KindNodeHashMismatch, Position: 256, End: 512},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := buildLog(t, n, 100, 256, 300, 512, 640, 648, 656)
			tamper(t, f.dir, func(db *pebble.DB) { tc.tamper(t, db) })
			rep := verifyDir(t, f)
			if rep.Verified {
				t.Fatal("tampering not detected")
			}
			if diff := cmp.Diff(tc.want, firstOf(rep)); diff != "" {
				t.Errorf("first fault (-want +got):\n%s\nall faults: %v", diff, rep.Faults)
			}
			t.Logf("first of %d faults: %s", rep.FaultCount, rep.First)
		})
	}
}

// TestVerifyDir_TruncatedEverywhere: the tamperer deletes the last events
// and rewrites the recorded head to match; the checkpoints signed before
// still commit to the longer log.
func TestVerifyDir_TruncatedEverywhere(t *testing.T) {
	f := buildLog(t, 700, 300, 600)
	// A store that really holds 600 events gives the head to forge.
	g := buildLog(t, 600, 300)
	var state []byte
	tamper(t, g.dir, func(db *pebble.DB) { state = get(t, db, []byte("mstate")) })
	tamper(t, f.dir, func(db *pebble.DB) {
		if err := db.DeleteRange(layout.EventKey(600), layout.EventKey(1<<40), pebble.Sync); err != nil {
			t.Fatal(err)
		}
		set(t, db, []byte("mstate"), state)
	})
	rep := verifyDir(t, f)
	if diff := cmp.Diff(first{Kind: audit.KindCheckpointBeyondLog, Position: 600, End: 700}, firstOf(rep)); diff != "" {
		t.Errorf("first fault (-want +got):\n%s\nall: %v", diff, rep.Faults)
	}
}

func TestVerifyDir_CheckpointSignatureAltered(t *testing.T) {
	f := buildLog(t, 500, 100, 300)
	tamper(t, f.dir, func(db *pebble.DB) {
		k := layout.CheckpointKey(300)
		v := get(t, db, k)
		// The signature line is "— <name> <base64(hash ‖ sig)>": flip a bit
		// of the signature itself.
		line := v[bytes.LastIndex(v[:len(v)-1], []byte("\n"))+1:]
		sp := bytes.LastIndexByte(line, ' ')
		sig, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(line[sp+1:])))
		if err != nil {
			t.Fatal(err)
		}
		sig[10] ^= 1
		nv := append(append([]byte(nil), v[:len(v)-len(line)+sp+1]...), base64.StdEncoding.EncodeToString(sig)+"\n"...)
		set(t, db, k, nv)
	})
	rep := verifyDir(t, f)
	got := firstOf(rep)
	if diff := cmp.Diff(first{Kind: audit.KindCheckpointSignature, Position: 300}, got); diff != "" {
		t.Errorf("first fault (-want +got):\n%s\nall: %v", diff, rep.Faults)
	}
	if rep.First == nil || rep.First.Checkpoint == nil || *rep.First.Checkpoint != 300 {
		t.Errorf("fault not attributed to the checkpoint of size 300: %+v", rep.First)
	}
}

// flipData changes one byte of the event's data (a digit of its padding):
// the event still decodes, only its hash tells.
func flipData(v []byte) []byte {
	i := bytes.Index(v, []byte(`"pad":"`)) + 8
	v[i] ^= 1
	return v
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	for i := range 8 {
		b[7-i] = byte(v >> (8 * i))
	}
	return b
}

// TestVerifyDir_SignedEvents: envelopes are checked against the key ring
// as it stands at each event's position. The events are appended through
// the store (the node's edge check is bypassed, as a tamperer would), and
// each bad signature is reported at its position with its reason.
func TestVerifyDir_SignedEvents(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir() + "/ledger"
	signer, verifier, _ := newKey(t, events.Origin(testLedger))
	s := openFixture(t, dir, testLedger, signer)
	k1, k2, stranger := newExecutorKey(t), newExecutorKey(t), newExecutorKey(t)
	appendOne := func(stream, typ string, data []byte, env *events.Envelope) uint64 {
		t.Helper()
		out, err := s.Append(ctx, events.AppendRequest{Streams: []events.StreamAppend{{Stream: stream,
			Events: []events.Proposed{{ID: uuid.New(), Type: typ, Data: data, Metadata: json.RawMessage(`{}`), Envelope: env}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Events[0].Position
	}
	register := func(k executorKey) {
		data, _ := json.Marshal(events.KeyRegisteredData{ExecutorID: "gpu1", KeyID: k.id, PublicKey: k.pub})
		appendOne("executor-gpu1", events.TypeExecutorKeyRegistered, data, nil)
	}
	signed := func(k executorKey, data string) *events.Envelope {
		env, err := events.SignData(ctx, "application/vnd.greffe.test+json", []byte(data), k.priv)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	type want struct {
		Position int64
		Reason   string
	}
	var wants []want
	// Signed before its key is registered: unknown at that position.
	wants = append(wants, want{int64(appendOne("m", "Measured", []byte(`{"v":0}`), signed(k1, `{"v":0}`))), events.SigUnknownKey})
	register(k1)
	register(k2)
	appendOne("m", "Measured", []byte(`{"v":1}`), signed(k1, `{"v":1}`)) // valid
	// A registration on a stream that is not an executor's registers nothing.
	data, _ := json.Marshal(events.KeyRegisteredData{ExecutorID: "x", KeyID: stranger.id, PublicKey: stranger.pub})
	appendOne("not-executor", events.TypeExecutorKeyRegistered, data, nil)
	wants = append(wants, want{int64(appendOne("m", "Measured", []byte(`{"v":2}`), signed(stranger, `{"v":2}`))), events.SigUnknownKey})
	// The signature of other data: bad.
	wants = append(wants, want{int64(appendOne("m", "Measured", []byte(`{"v":3}`), signed(k2, `{"v":333}`))), events.SigBadSignature})
	rev, _ := json.Marshal(events.KeyRevokedData{ExecutorID: "gpu1", KeyID: k1.id})
	appendOne("executor-gpu1", events.TypeExecutorKeyRevoked, rev, nil)
	wants = append(wants, want{int64(appendOne("m", "Measured", []byte(`{"v":4}`), signed(k1, `{"v":4}`))), events.SigRevokedKey})
	appendOne("m", "Measured", []byte(`{"v":5}`), signed(k2, `{"v":5}`)) // valid
	checkpointAt(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	rep, err := offline.VerifyDir(ctx, dir, audit.Config{Verifiers: []note.Verifier{verifier}})
	if err != nil {
		t.Fatal(err)
	}
	var got []want
	for _, f := range rep.Faults {
		if f.Kind != audit.KindSignatureInvalid {
			t.Errorf("unexpected fault %s", f)
			continue
		}
		got = append(got, want{f.Position, f.Reason})
	}
	if diff := cmp.Diff(wants, got); diff != "" {
		t.Errorf("signature faults (-want +got):\n%s", diff)
	}
	if rep.Signatures != 6 {
		t.Errorf("%d signatures checked, want 6", rep.Signatures)
	}
}

// TestVerifyDir_ForgedCheckpoint: a checkpoint correctly signed with the
// node's key over a root the events do not produce (a key compromise, or
// a node that signed another history) fails its root and its consistency
// with the checkpoints around it.
func TestVerifyDir_ForgedCheckpoint(t *testing.T) {
	f := buildLog(t, 500, 100, 300)
	forged, err := events.SignCheckpoint(events.Origin(testLedger), 300, [32]byte{1, 2, 3}, f.signer)
	if err != nil {
		t.Fatal(err)
	}
	tamper(t, f.dir, func(db *pebble.DB) { set(t, db, layout.CheckpointKey(300), forged.Note) })
	rep := verifyDir(t, f)
	var kinds []string
	for _, fl := range rep.Faults {
		kinds = append(kinds, fl.Kind)
	}
	want := []string{audit.KindCheckpointRoot, audit.KindCheckpointInconsistent, audit.KindCheckpointInconsistent}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Errorf("fault kinds (-want +got):\n%s\nall: %v", diff, rep.Faults)
	}
	if diff := cmp.Diff(first{Kind: audit.KindCheckpointRoot, Position: 100, End: 300}, firstOf(rep)); diff != "" {
		t.Errorf("first fault (-want +got):\n%s", diff)
	}
}

// Stores of the earlier formats have the same keys and values: the auditor
// verifies them, and refuses a format it does not know.
func TestVerifyDir_StoreFormats(t *testing.T) {
	for _, c := range []struct {
		format   string
		verified bool
	}{
		{layout.StoreFormat, true},
		{"greffe-ledger/1 event-format=1 hash=sha256 tree=rfc6962", true},
		{"greffe-ledger/2 event-format=1 hash=sha256 tree=rfc6962 log=greffe-wal", true},
		{"greffe-ledger/9 event-format=3 hash=sha256 tree=rfc6962", false},
	} {
		t.Run(c.format, func(t *testing.T) {
			f := buildLog(t, 300, 100, 256)
			tamper(t, f.dir, func(db *pebble.DB) {
				if err := db.Set([]byte("mformat"), []byte(c.format), pebble.Sync); err != nil {
					t.Fatal(err)
				}
			})
			rep, err := offline.VerifyDir(t.Context(), f.dir, audit.Config{Verifiers: []note.Verifier{f.verifier}})
			if !c.verified {
				if !errors.Is(err, audit.ErrConfig) {
					t.Fatalf("format %q: err = %v, want ErrConfig", c.format, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("format %q: %v", c.format, err)
			}
			if !rep.Verified || rep.Events != 300 {
				t.Fatalf("format %q: verified %v, %d events: %+v", c.format, rep.Verified, rep.Events, rep.Faults)
			}
		})
	}
}
