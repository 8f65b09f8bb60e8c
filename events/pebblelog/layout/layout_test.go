package layout_test

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/events/pebblelog/layout"
)

// TestKeys_AsDocumented pins every key and value encoding to the bytes
// docs/FORMAT.md ("The Pebble layout") gives, and each parser to its
// encoder: a change here is a change of the stored format.
func TestKeys_AsDocumented(t *testing.T) {
	id := [16]byte{0: 0xa1, 15: 0x01}
	cases := []struct {
		name string
		got  []byte
		want string // hex
	}{
		{"event", layout.EventKey(0x0102), "65" + "0000000000000102"},
		{"leaf tile", layout.LeafTileKey(3), "74" + "0000000000000003"},
		{"node", layout.NodeKey(16, 2), "68" + "10" + "0000000000000002"},
		{"stream", layout.StreamKey("ab", 7), "73" + "6162" + "00" + "0000000000000007"},
		{"event id", layout.IDKey(id), "69" + "a1000000000000000000000000000001"},
		{"checkpoint", layout.CheckpointKey(256), "63" + "0000000000000100"},
		{"run of one", layout.StreamRun(9, 1), "0000000000000009"},
		{"run of three", layout.StreamRun(9, 3), "0000000000000009" + "0000000000000003"},
		{"wal seq", layout.AppendWALSeq(nil, 5), "0000000000000005"},
		{"meta format", []byte(layout.MetaFormat), hex.EncodeToString([]byte("mformat"))},
		{"meta ledger id", []byte(layout.MetaLedgerID), hex.EncodeToString([]byte("mledger_id"))},
		{"meta state", []byte(layout.MetaState), hex.EncodeToString([]byte("mstate"))},
		{"wal seq key", []byte(layout.WALSeq), hex.EncodeToString([]byte("wseq"))},
	}
	for _, tc := range cases {
		if got := hex.EncodeToString(tc.got); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if pos, ok := layout.ParseEventKey(layout.EventKey(0x0102)); !ok || pos != 0x0102 {
		t.Errorf("ParseEventKey: %d %v", pos, ok)
	}
	if i, ok := layout.ParseLeafTileKey(layout.LeafTileKey(3)); !ok || i != 3 {
		t.Errorf("ParseLeafTileKey: %d %v", i, ok)
	}
	if l, i, ok := layout.ParseNodeKey(layout.NodeKey(16, 2)); !ok || l != 16 || i != 2 {
		t.Errorf("ParseNodeKey: %d %d %v", l, i, ok)
	}
	if s, v, ok := layout.ParseStreamKey(layout.StreamKey("ab", 7)); !ok || string(s) != "ab" || v != 7 {
		t.Errorf("ParseStreamKey: %q %d %v", s, v, ok)
	}
	if got, ok := layout.ParseIDKey(layout.IDKey(id)); !ok || got != id {
		t.Errorf("ParseIDKey: %x %v", got, ok)
	}
	if n, ok := layout.ParseCheckpointKey(layout.CheckpointKey(256)); !ok || n != 256 {
		t.Errorf("ParseCheckpointKey: %d %v", n, ok)
	}
	if seq, err := layout.ParseWALSeq(layout.AppendWALSeq(nil, 5)); err != nil || seq != 5 {
		t.Errorf("ParseWALSeq: %d %v", seq, err)
	}
	// Keys of another space or length are refused.
	if _, ok := layout.ParseEventKey(layout.LeafTileKey(3)); ok {
		t.Error("ParseEventKey took a leaf tile key")
	}
	if _, _, ok := layout.ParseStreamKey([]byte("sab\x01\x00\x00\x00\x00\x00\x00\x00\x07")); ok {
		t.Error("ParseStreamKey took a key without its separator")
	}
	if _, err := layout.ParseWALSeq([]byte{1, 2, 3}); err == nil {
		t.Error("ParseWALSeq took 3 bytes")
	}
}

// TestParseStreamRun covers the canonical forms of a run: 8 bytes for one
// event, 16 with a count of 2 to 2^32.
func TestParseStreamRun(t *testing.T) {
	type run struct {
		Pos, Count uint64
		OK         bool
	}
	for _, tc := range []struct {
		name string
		v    []byte
		want run
	}{
		{"one", layout.StreamRun(4, 1), run{4, 1, true}},
		{"many", layout.StreamRun(4, 100), run{4, 100, true}},
		{"largest", layout.StreamRun(4, 1<<32), run{4, 1 << 32, true}},
		{"count of one in 16 bytes", append(layout.StreamRun(4, 1), make([]byte, 7)...), run{}},
		{"too large", layout.StreamRun(4, 1<<32+1), run{}},
		{"short", []byte{1, 2, 3}, run{}},
	} {
		pos, n, ok := layout.ParseStreamRun(tc.v)
		got := run{pos, n, ok}
		if !ok {
			got = run{}
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", tc.name, diff)
		}
	}
}

// TestState_RoundTrip pins the state's layout (size, last recorded,
// applied index, count, hashes) and refuses a value of the wrong length.
func TestState_RoundTrip(t *testing.T) {
	st := layout.State{Size: 3, LastRecorded: -1, Applied: 7, Range: [][]byte{bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)}}
	b := st.Encode()
	want := "0000000000000003" + "ffffffffffffffff" + "0000000000000007" + "02" +
		hex.EncodeToString(bytes.Repeat([]byte{1}, 32)) + hex.EncodeToString(bytes.Repeat([]byte{2}, 32))
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("encoded %s, want %s", got, want)
	}
	got, err := layout.DecodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	if _, err := layout.DecodeState(b[:len(b)-1]); err == nil {
		t.Error("a truncated state decoded")
	}
	if empty, err := layout.DecodeState(layout.State{}.Encode()); err != nil || empty.Size != 0 || empty.Range != nil {
		t.Errorf("empty state: %+v %v", empty, err)
	}
}

// TestReplicated lists what a raft snapshot carries (docs/FORMAT.md, "The
// raft snapshot stream"): the replicated key spaces and three meta
// records, never the node-local checkpoints and write-ahead log seq.
func TestReplicated(t *testing.T) {
	for _, k := range [][]byte{layout.EventKey(1), layout.LeafTileKey(0), layout.NodeKey(8, 0), layout.StreamKey("a", 0),
		layout.IDKey([16]byte{}), []byte(layout.MetaFormat), []byte(layout.MetaLedgerID), []byte(layout.MetaState)} {
		if !layout.Replicated(k) {
			t.Errorf("%q is not replicated", k)
		}
	}
	for _, k := range [][]byte{layout.CheckpointKey(1), []byte(layout.WALSeq), []byte("mother"), nil, {'x'}} {
		if layout.Replicated(k) {
			t.Errorf("%q is replicated", k)
		}
	}
	for _, sp := range layout.ReplicatedSpaces() {
		if lo, _ := sp.Bounds(); sp != layout.SpaceMeta && !layout.Replicated(append(lo, 0)) {
			t.Errorf("space %s is listed but its keys are not replicated", sp)
		}
	}
}

// TestFormats: the format this binary writes is read, as are the earlier
// ones it upgrades, and nothing else.
func TestFormats(t *testing.T) {
	if got := layout.ReadFormats(); got[0] != layout.StoreFormat || len(got) != 3 {
		t.Errorf("ReadFormats: %q", got)
	}
	for _, f := range layout.ReadFormats() {
		if !layout.Known(f) {
			t.Errorf("%q is read but not known", f)
		}
		if layout.Upgradable(f) == (f == layout.StoreFormat) {
			t.Errorf("%q: upgradable %v", f, layout.Upgradable(f))
		}
	}
	if layout.Known("greffe-ledger/4") {
		t.Error("a future format is known")
	}
}
