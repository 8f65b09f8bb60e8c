package audit_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/internal/pebbleslog"
)

const testLedger = "00000000-0000-4000-8000-0000000000a1"

// fixture is a real store, written through the real append path, then
// closed so that the auditor (or a tamperer) can open it.
type fixture struct {
	dir      string
	signer   note.Signer
	verifier note.Verifier
	vkey     string
}

func newKey(t testing.TB, origin string) (note.Signer, note.Verifier, string) {
	t.Helper()
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		t.Fatal(err)
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	return s, v, vkey
}

// fixedClock makes recorded_at deterministic: every batch is stamped at the
// same instant (and the store keeps recorded_at non-decreasing).
func fixedClock() time.Time { return time.Unix(1_700_000_000, 0) }

// openFixture opens (or creates) a store in dir signed by signer.
func openFixture(t testing.TB, dir, ledger string, signers ...note.Signer) *pebblelog.Store {
	t.Helper()
	s, err := pebblelog.Open(pebblelog.Config{Dir: dir, LedgerID: ledger, Signers: signers, CheckpointInterval: -1, Clock: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// appendN appends n events in appends of per events to streams s-0…s-6,
// ids derived from seed so that two logs built the same way are identical.
func appendN(t testing.TB, s *pebblelog.Store, seed string, from, n, per int) {
	t.Helper()
	ctx := context.Background()
	for i := from; i < from+n; i += per {
		k := min(per, from+n-i)
		ps := make([]events.Proposed, k)
		for j := range ps {
			ps[j] = events.Proposed{ID: uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "%s-%d", seed, i+j)), Type: "Tested",
				Data: json.RawMessage(fmt.Sprintf(`{"i":%d,"pad":"%0100d"}`, i+j, 0)), Metadata: json.RawMessage(`{}`)}
		}
		if _, err := s.Append(ctx, events.AppendRequest{Streams: []events.StreamAppend{{Stream: fmt.Sprintf("s-%d", i%7), Events: ps}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkpointAt signs and stores the checkpoint of the current head.
func checkpointAt(t testing.TB, s *pebblelog.Store) {
	t.Helper()
	if _, err := s.LatestCheckpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// buildLog writes n events with checkpoints at each size of cps (and at
// n) and closes the store.
func buildLog(t testing.TB, n int, cps ...int) *fixture {
	t.Helper()
	f := &fixture{dir: filepath.Join(t.TempDir(), "ledger")}
	f.signer, f.verifier, f.vkey = newKey(t, events.Origin(testLedger))
	s := openFixture(t, f.dir, testLedger, f.signer)
	at := 0
	for _, c := range append(cps, n) {
		appendN(t, s, "ev", at, c-at, 10)
		checkpointAt(t, s)
		at = c
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

// tamper opens the closed store with Pebble itself and lets fn change it:
// Pebble's own checksums stay valid, only the auditor can notice.
func tamper(t testing.TB, dir string, fn func(db *pebble.DB)) {
	t.Helper()
	db, err := pebble.Open(dir, storeLikeOptions())
	if err != nil {
		t.Fatal(err)
	}
	fn(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// storeLikeOptions are Pebble options like the store's own
// (pebblelog.openPebble): uncompressed blocks, bloom filters. A compaction
// done by a test then leaves tables like the node's.
func storeLikeOptions() *pebble.Options {
	opts := &pebble.Options{FormatMajorVersion: pebble.FormatNewest, Logger: pebbleslog.Logger{}}
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].FilterType = pebble.TableFilter
		opts.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
	}
	return opts
}

func get(t testing.TB, db *pebble.DB, key []byte) []byte {
	t.Helper()
	v, closer, err := db.Get(key)
	if err != nil {
		t.Fatalf("get %x: %v", key, err)
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out
}

func set(t testing.TB, db *pebble.DB, key, value []byte) {
	t.Helper()
	if err := db.Set(key, value, pebble.Sync); err != nil {
		t.Fatal(err)
	}
}

// signedPayload is an executor key pair for signed-event tests.
type executorKey struct {
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
	id   string
}

func newExecutorKey(t testing.TB) executorKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return executorKey{priv: priv, pub: pub, id: events.KeyID(pub)}
}
