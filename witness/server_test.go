package witness_test

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/witness"
)

// outcome is what a witness answered, as the tests compare it.
type outcome struct {
	Status      int
	ContentType string
	Size        string // the body of a 409 with the witness's size
	Cosigned    bool   // a 200 whose body is a cosignature that verifies
}

// post sends an add-checkpoint body to url and reads the answer, checking
// a 200's cosignature against v over cp.
func post(t *testing.T, url string, body []byte, cp []byte, v note.Verifier) outcome {
	t.Helper()
	resp, err := http.Post(url+witness.AddCheckpointPath, "text/plain", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	o := outcome{Status: resp.StatusCode}
	switch resp.StatusCode {
	case http.StatusOK:
		n, err := note.Open(append(append([]byte(nil), cp...), b...), note.VerifierList(v))
		o.Cosigned = err == nil && len(n.Sigs) == 1
	case http.StatusConflict:
		o.ContentType, o.Size = resp.Header.Get("Content-Type"), string(b)
	}
	return o
}

func req(old uint64, proof [][]byte, cp []byte) []byte {
	return witness.AddCheckpointRequest{OldSize: old, Proof: proof, Checkpoint: cp}.Marshal()
}

// TestServer_AddCheckpoint walks one witness through tlog-witness's cases
// with checkpoints and proofs of real greffe logs: the log it follows, a
// fork of it (same key, other events), another ledger, and a key the
// witness does not trust. The steps run in order: each depends on what the
// witness cosigned before.
func TestServer_AddCheckpoint(t *testing.T) {
	key := newLogKey(t, testOrigin)
	a := openLog(t, key)
	appendN(t, a, "a", 0, 5)
	a5 := latest(t, a)
	appendN(t, a, "a", 5, 5)
	a10 := latest(t, a)
	appendN(t, a, "a", 10, 2)
	a12 := latest(t, a)
	fork := openLog(t, key)
	appendN(t, fork, "fork", 0, 10)
	f10 := latest(t, fork)
	appendN(t, fork, "fork", 10, 2)
	f12 := latest(t, fork)

	impostor := newLogKey(t, testOrigin) // same origin, a key the witness does not trust
	forged, err := events.SignCheckpoint(testOrigin, a12.Size, a12.Root, impostor.signer)
	if err != nil {
		t.Fatal(err)
	}
	altered := alterSignature(t, a12.Note)
	otherKey := newLogKey(t, events.Origin("00000000-0000-4000-8000-0000000000d2"))
	other, err := events.SignCheckpoint(otherKey.verifier.Name(), 1, events.EmptyRoot, otherKey.signer)
	if err != nil {
		t.Fatal(err)
	}
	badProof := consistency(t, a, 10, 12)
	badProof[0] = bytes.Clone(badProof[0])
	badProof[0][0] ^= 1
	emptyNonZero, err := events.SignCheckpoint(testOrigin, 0, a5.Root, key.signer)
	if err != nil {
		t.Fatal(err)
	}

	w := startWitness(t, "witness.test/w1", key, otherKey)
	cosigned := outcome{Status: 200, Cosigned: true}
	stale := func(n string) outcome {
		return outcome{Status: 409, ContentType: witness.ContentTypeSize, Size: n + "\n"}
	}
	steps := []struct {
		name string
		body []byte
		cp   []byte
		want outcome
	}{
		{"malformed body", []byte("hello\n\n"), nil, outcome{Status: 400}},
		{"old size with a leading zero", []byte("old 05\n\n" + string(a5.Note)), nil, outcome{Status: 400}},
		{"unknown origin", req(0, nil, []byte("example.org/log\n1\n"+strings.Repeat("A", 43)+"=\n\n— example.org/log AAAAAQ==\n")), nil, outcome{Status: 404}},
		{"no signature by a trusted key", req(0, nil, forged.Note), forged.Note, outcome{Status: 403}},
		{"old size above the checkpoint's", req(6, nil, a5.Note), nil, outcome{Status: 400}},
		{"size 0 with another root than the empty tree's", req(0, nil, emptyNonZero.Note), nil, outcome{Status: 422}},
		{"old size the witness never cosigned", req(5, consistency(t, a, 5, 10), a10.Note), nil, stale("0")},
		{"first checkpoint: trusted on first use", req(0, nil, a5.Note), a5.Note, cosigned},
		{"proof from the empty tree again: stale", req(0, nil, a10.Note), nil, stale("5")},
		{"consistent extension", req(5, consistency(t, a, 5, 10), a10.Note), a10.Note, cosigned},
		{"the same checkpoint again", req(10, nil, a10.Note), a10.Note, cosigned},
		{"a fork at the same size", req(10, nil, f10.Note), nil, outcome{Status: 422}},
		{"a fork's extension with the fork's proof", req(10, consistency(t, fork, 10, 12), f12.Note), nil, outcome{Status: 422}},
		{"a forged proof", req(10, badProof, a12.Note), nil, outcome{Status: 422}},
		{"an altered log signature", req(10, consistency(t, a, 10, 12), altered), nil, outcome{Status: 403}},
		{"another log the witness follows", req(0, nil, other.Note), other.Note, cosigned},
		{"the extension, at last", req(10, consistency(t, a, 10, 12), a12.Note), a12.Note, cosigned},
		{"a body over the limit", append(req(12, nil, a12.Note), make([]byte, witness.MaxRequestBytes)...), nil, outcome{Status: 413}},
	}
	for _, st := range steps {
		got := post(t, w.http.URL, st.body, st.cp, w.verifier)
		if diff := cmp.Diff(st.want, got); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", st.name, diff)
		}
	}

	// The monitoring path serves the newest cosigned checkpoint, with the
	// log's signature and the witness's.
	resp, err := http.Get(w.http.URL + "/" + witness.OriginHash(testOrigin) + "/checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	n, err := note.Open(b, note.VerifierList(key.verifier, w.verifier))
	if err != nil || len(n.Sigs) != 2 || !strings.HasPrefix(n.Text, string(a12.Note[:bytes.Index(a12.Note, []byte("\n\n"))+1])) {
		t.Fatalf("monitoring checkpoint: %v %q", err, b)
	}

	// It remembers across a restart: the folder holds the newest
	// checkpoint of each log, and a second witness cannot share it.
	if _, err := witness.OpenServer(witness.ServerConfig{Dir: w.dir, Signer: key.signer, Logs: map[string][]note.Verifier{testOrigin: {key.verifier}}}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a second witness on the folder: %v", err)
	}
	stored, err := os.ReadFile(filepath.Join(w.dir, "logs", witness.OriginHash(testOrigin)))
	if err != nil || !bytes.Equal(stored, b) {
		t.Fatalf("stored checkpoint: %v\n%s", err, stored)
	}
}

// alterSignature flips a bit of the last signature of a note: a signature
// by a known key that no longer verifies.
func alterSignature(t *testing.T, n []byte) []byte {
	t.Helper()
	i := bytes.LastIndex(n, []byte(" "))
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(n[i+1:])))
	if err != nil {
		t.Fatal(err)
	}
	sig[len(sig)-1] ^= 1
	return append(bytes.Clone(n[:i+1]), base64.StdEncoding.EncodeToString(sig)+"\n"...)
}

// TestServer_RemembersAcrossRestart restarts a witness on its folder: it
// answers a request from the empty tree with the size it cosigned before.
func TestServer_RemembersAcrossRestart(t *testing.T) {
	key := newLogKey(t, testOrigin)
	a := openLog(t, key)
	appendN(t, a, "a", 0, 7)
	a7 := latest(t, a)
	skey, vkey, err := witness.GenerateKey("witness.test/w1")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w := startWitnessWith(t, dir, skey, vkey, key)
	if got := post(t, w.http.URL, req(0, nil, a7.Note), a7.Note, w.verifier); !got.Cosigned {
		t.Fatalf("first checkpoint: %+v", got)
	}
	w.stop()
	w2 := startWitnessWith(t, dir, skey, vkey, key)
	got := post(t, w2.http.URL, req(0, nil, a7.Note), nil, w2.verifier)
	if diff := cmp.Diff(outcome{Status: 409, ContentType: witness.ContentTypeSize, Size: "7\n"}, got); diff != "" {
		t.Fatalf("after a restart (-want +got)\n%s", diff)
	}
	if b := w2.srv.Latest(testOrigin); !bytes.HasPrefix(b, a7.Note[:bytes.Index(a7.Note, []byte("\n\n"))]) {
		t.Fatalf("Latest after a restart: %q", b)
	}
}
