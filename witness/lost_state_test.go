package witness_test

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/witness"
)

// keyedWitness is a real witness (witness.Server behind a real HTTP
// server) whose key is read from a file, as `greffe witness --key` does,
// so that it keeps its state marker beside the key.
type keyedWitness struct {
	srv  *witness.Server
	http *httptest.Server
	v    note.Verifier
}

// lockedBuffer collects a witness's log lines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// openKeyed opens a witness on dir with the key in keyFile (no marker when
// keyFile is ""); skey is used when keyFile is "". It returns OpenServer's
// error as it is.
func openKeyed(t *testing.T, dir, keyFile, skey string, logOut *lockedBuffer, accept bool, logs ...logKey) (*keyedWitness, error) {
	t.Helper()
	var signer note.Signer
	var vkey string
	var err error
	if keyFile != "" {
		signer, vkey, err = witness.LoadCosigner(keyFile)
	} else {
		signer, vkey, err = witness.NewCosigner(skey)
	}
	if err != nil {
		t.Fatal(err)
	}
	v, err := witness.ParseCosignatureVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	marker := ""
	if keyFile != "" {
		marker = keyFile + ".state" // as greffe witness puts it
	}
	cfg := witness.ServerConfig{Dir: dir, Signer: signer, Marker: marker, Logs: map[string][]note.Verifier{},
		Logger: slog.New(slog.NewTextHandler(logOut, nil)), Unsafe: witness.ServerUnsafe{AcceptLostState: accept}}
	for _, k := range logs {
		cfg.Logs[k.verifier.Name()] = append(cfg.Logs[k.verifier.Name()], k.verifier)
	}
	srv, err := witness.OpenServer(cfg)
	if err != nil {
		return nil, err
	}
	w := &keyedWitness{srv: srv, http: httptest.NewServer(srv.Handler()), v: v}
	t.Cleanup(w.stop)
	return w, nil
}

func (w *keyedWitness) stop() {
	w.http.Close()
	_ = w.srv.Close()
}

func writeKey(t *testing.T, path, name string) string {
	t.Helper()
	skey, _, err := witness.GenerateKey(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(skey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return skey
}

// TestServer_LostState (#20, finding 15): a witness that cosigned a
// checkpoint, was stopped and lost some of its state refuses to start
// (ErrStateLost, naming the log), where it used to start empty, trust the
// log's next checkpoint on first use and cosign a fork of what it had
// cosigned (the fork below, of the same size, was answered 200 with a
// valid cosignature). --accept-lost-state (Unsafe.AcceptLostState) starts
// it anyway, logging the loss at error level; a restart with nothing lost
// still remembers and refuses the fork.
func TestServer_LostState(t *testing.T) {
	a := newLogKey(t, testOrigin)
	la := openLog(t, a)
	appendN(t, la, "a", 0, 5)
	a5 := latest(t, la)
	fork := openLog(t, a)
	appendN(t, fork, "fork", 0, 5)
	f5 := latest(t, fork)
	otherOrigin := events.Origin("00000000-0000-4000-8000-0000000000d2")
	b := newLogKey(t, otherOrigin)
	b3, err := events.SignCheckpoint(otherOrigin, 1, events.EmptyRoot, b.signer) // a second log: only its signature matters here
	if err != nil {
		t.Fatal(err)
	}

	type setup struct {
		dir, keyFile string // keyFile "": a witness without a marker
		skey         string
	}
	tests := []struct {
		name string
		// marker: the witness keeps its marker beside its key file.
		marker bool
		// logs the witness follows when it restarts (a and b before).
		restartLogs []logKey
		damage      func(t *testing.T, s setup)
		// wantLost: the origins of the *StateLostError; nil: it starts.
		wantLost  []string
		wantOther bool
	}{
		{"nothing lost", true, []logKey{a, b}, func(*testing.T, setup) {}, nil, false},
		{"the folder lost whole, the key kept", true, []logKey{a, b}, func(t *testing.T, s setup) {
			mustRemoveAll(t, s.dir)
		}, []string{testOrigin, otherOrigin}, false},
		{"the folder emptied, its LOCK kept", true, []logKey{a, b}, func(t *testing.T, s setup) {
			mustRemoveAll(t, filepath.Join(s.dir, "logs"), filepath.Join(s.dir, "STATE"))
		}, []string{testOrigin, otherOrigin}, false},
		{"one log's file removed", true, []logKey{a, b}, func(t *testing.T, s setup) {
			mustRemoveAll(t, filepath.Join(s.dir, "logs", witness.OriginHash(testOrigin)))
		}, []string{testOrigin}, false},
		{"one log's file removed, no marker beside the key", false, []logKey{a, b}, func(t *testing.T, s setup) {
			mustRemoveAll(t, filepath.Join(s.dir, "logs", witness.OriginHash(testOrigin)))
		}, []string{testOrigin}, false},
		{"the folder's record and a log's file removed, the marker kept", true, []logKey{a, b}, func(t *testing.T, s setup) {
			mustRemoveAll(t, filepath.Join(s.dir, "STATE"), filepath.Join(s.dir, "logs", witness.OriginHash(otherOrigin)))
		}, []string{otherOrigin}, false},
		{"a removed log's file, the log no longer followed", true, []logKey{a}, func(t *testing.T, s setup) {
			mustRemoveAll(t, filepath.Join(s.dir, "logs", witness.OriginHash(otherOrigin)))
		}, nil, false},
		{"the folder replaced by another witness's", true, []logKey{a, b}, func(t *testing.T, s setup) {
			mustRemoveAll(t, s.dir)
			other := t.TempDir()
			ow, err := openKeyed(t, other, "", s.skey, &lockedBuffer{}, false, a)
			if err != nil {
				t.Fatal(err)
			}
			if got := post(t, ow.http.URL, req(0, nil, a5.Note), a5.Note, ow.v); !got.Cosigned {
				t.Fatalf("the other witness: %+v", got)
			}
			ow.stop()
			if err := os.Rename(other, s.dir); err != nil {
				t.Fatal(err)
			}
		}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := setup{dir: filepath.Join(t.TempDir(), "state")}
			keyFile := filepath.Join(t.TempDir(), "witness.key")
			s.skey = writeKey(t, keyFile, "witness.test/w1")
			if tc.marker {
				s.keyFile = keyFile
			}
			var logs lockedBuffer
			w, err := openKeyed(t, s.dir, s.keyFile, s.skey, &logs, false, a, b)
			if err != nil {
				t.Fatal(err)
			}
			for _, cp := range [][]byte{a5.Note, b3.Note} {
				if got := post(t, w.http.URL, req(0, nil, cp), cp, w.v); !got.Cosigned {
					t.Fatalf("first checkpoint: %+v", got)
				}
			}
			w.stop()
			tc.damage(t, s)

			w, err = openKeyed(t, s.dir, s.keyFile, s.skey, &logs, false, tc.restartLogs...)
			var lost *witness.StateLostError
			if tc.wantLost == nil && !tc.wantOther {
				if err != nil {
					t.Fatalf("restart: %v", err)
				}
				// It remembers a5: the fork is refused, and a request
				// from the empty tree is told the size cosigned.
				if diff := cmp.Diff(outcome{Status: 422}, post(t, w.http.URL, req(5, nil, f5.Note), nil, w.v)); diff != "" {
					t.Errorf("the fork after the restart (-want +got)\n%s", diff)
				}
				if diff := cmp.Diff(outcome{Status: 409, ContentType: witness.ContentTypeSize, Size: "5\n"}, post(t, w.http.URL, req(0, nil, f5.Note), nil, w.v)); diff != "" {
					t.Errorf("the fork from the empty tree after the restart (-want +got)\n%s", diff)
				}
				w.stop()
				// A log followed again whose file was lost meanwhile is
				// refused then.
				if len(tc.restartLogs) < 2 {
					_, err := openKeyed(t, s.dir, s.keyFile, s.skey, &logs, false, a, b)
					if !errors.As(err, &lost) || !cmp.Equal(lost.Logs, []string{otherOrigin}) {
						t.Errorf("following the lost log again: %v, want ErrStateLost naming %s", err, otherOrigin)
					}
				}
				return
			}
			if !errors.Is(err, witness.ErrStateLost) || !errors.As(err, &lost) {
				t.Fatalf("restart after the loss: %v, want ErrStateLost", err)
			}
			if diff := cmp.Diff(tc.wantLost, lost.Logs); diff != "" {
				t.Errorf("the logs named lost (-want +got)\n%s", diff)
			}
			if got := lost.OtherState[0] != ""; got != tc.wantOther {
				t.Errorf("another state: %v, want %v (%v)", got, tc.wantOther, err)
			}
			if !strings.Contains(err.Error(), "--accept-lost-state") || !strings.Contains(err.Error(), "fork") {
				t.Errorf("the refusal does not say how to recover deliberately, and why: %v", err)
			}
			// Refused again: a refused start repairs nothing.
			if _, err := openKeyed(t, s.dir, s.keyFile, s.skey, &logs, false, tc.restartLogs...); !errors.Is(err, witness.ErrStateLost) {
				t.Fatalf("the second restart: %v, want ErrStateLost", err)
			}

			// Started anew deliberately: it says so loudly, and trusts the
			// log's next checkpoint on first use (the fork, here), which is
			// what the operator accepted.
			w, err = openKeyed(t, s.dir, s.keyFile, s.skey, &logs, true, tc.restartLogs...)
			if err != nil {
				t.Fatalf("restart with AcceptLostState: %v", err)
			}
			if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "STARTING WITH LOST STATE") {
				t.Errorf("a start that accepted a lost state did not log it at error level:\n%s", logs.String())
			}
			// What was lost is trusted anew (the fork of a, when a's state
			// was lost); what was kept is still remembered.
			want := outcome{Status: 409, ContentType: witness.ContentTypeSize, Size: "5\n"}
			if slices.Contains(tc.wantLost, testOrigin) {
				want = outcome{Status: 200, Cosigned: true}
			}
			if diff := cmp.Diff(want, post(t, w.http.URL, req(0, nil, f5.Note), f5.Note, w.v)); diff != "" {
				t.Errorf("the fork from the empty tree after starting anew (-want +got)\n%s", diff)
			}
			w.stop()
			// Once started anew, the next start is an ordinary one.
			if _, err := openKeyed(t, s.dir, s.keyFile, s.skey, &logs, false, tc.restartLogs...); err != nil {
				t.Fatalf("the start after starting anew: %v", err)
			}
		})
	}
}

// TestServer_StateRecordAdoptsFolders: a folder from before the state
// record (logs' files, no STATE), or a log's file written just before a
// crash kept it from being listed, is adopted at start, not refused; a key
// whose witness never cosigned anything may lose its folder.
func TestServer_StateRecordAdoptsFolders(t *testing.T) {
	a := newLogKey(t, testOrigin)
	la := openLog(t, a)
	appendN(t, la, "a", 0, 5)
	a5 := latest(t, la)
	fork := openLog(t, a)
	appendN(t, fork, "fork", 0, 5)
	f5 := latest(t, fork)

	t.Run("a folder without its record", func(t *testing.T) {
		dir := t.TempDir()
		keyFile := filepath.Join(t.TempDir(), "witness.key")
		skey := writeKey(t, keyFile, "witness.test/w1")
		w, err := openKeyed(t, dir, keyFile, skey, &lockedBuffer{}, false, a)
		if err != nil {
			t.Fatal(err)
		}
		if got := post(t, w.http.URL, req(0, nil, a5.Note), a5.Note, w.v); !got.Cosigned {
			t.Fatalf("first checkpoint: %+v", got)
		}
		w.stop()
		mustRemoveAll(t, filepath.Join(dir, "STATE"), keyFile+".state") // as a folder of an older greffe
		if w, err = openKeyed(t, dir, keyFile, skey, &lockedBuffer{}, false, a); err != nil {
			t.Fatalf("a folder without its record: %v", err)
		}
		w.stop()
		// Adopted: its log is listed again, so losing it now is noticed.
		mustRemoveAll(t, filepath.Join(dir, "logs", witness.OriginHash(testOrigin)))
		if _, err := openKeyed(t, dir, keyFile, skey, &lockedBuffer{}, false, a); !errors.Is(err, witness.ErrStateLost) {
			t.Fatalf("the adopted log's file removed: %v, want ErrStateLost", err)
		}
	})
	t.Run("a key that never cosigned loses its folder", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "state")
		keyFile := filepath.Join(t.TempDir(), "witness.key")
		skey := writeKey(t, keyFile, "witness.test/w1")
		w, err := openKeyed(t, dir, keyFile, skey, &lockedBuffer{}, false, a)
		if err != nil {
			t.Fatal(err)
		}
		w.stop()
		if _, err := os.Stat(keyFile + ".state"); err != nil {
			t.Fatalf("the marker beside the key, written at start: %v", err)
		}
		mustRemoveAll(t, dir)
		if w, err = openKeyed(t, dir, keyFile, skey, &lockedBuffer{}, false, a); err != nil {
			t.Fatalf("nothing was cosigned, nothing is lost: %v", err)
		}
		if got := post(t, w.http.URL, req(0, nil, f5.Note), f5.Note, w.v); !got.Cosigned {
			t.Fatalf("first checkpoint: %+v", got)
		}
	})
}

func mustRemoveAll(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
}
