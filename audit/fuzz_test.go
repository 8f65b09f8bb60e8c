package audit

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/events"
)

// The fuzz targets parse what a node (or a tamperer) hands the auditor:
// checkpoint notes, proofs, entry bundles, state files. Whatever the bytes,
// they must never panic, and what they accept must be consistent. Seed
// corpora live in testdata/fuzz/<target>/.

const fuzzOrigin = "greffe/fuzz"

func fuzzKey(f *testing.F) (note.Signer, note.Verifier) {
	skey, vkey, err := note.GenerateKey(rand.Reader, fuzzOrigin)
	if err != nil {
		f.Fatal(err)
	}
	s, _ := note.NewSigner(skey)
	v, _ := note.NewVerifier(vkey)
	return s, v
}

func FuzzOpenCheckpoint(f *testing.F) {
	signer, verifier := fuzzKey(f)
	cp, err := events.SignCheckpoint(fuzzOrigin, 42, [32]byte{7}, signer)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(cp.Note)
	f.Add([]byte("greffe/fuzz\n1\nAAAA\n\n— greffe/fuzz AAAA\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		oc := OpenCheckpoint(b, fuzzOrigin, []note.Verifier{verifier})
		if oc.Signed && (!oc.Parsed || oc.Kind != "") {
			t.Fatalf("signed but not parsed or with a fault: %+v", oc)
		}
		if oc.Kind == "" && !oc.Signed {
			t.Fatalf("neither signed nor faulted: %+v", oc)
		}
	})
}

// splitHashes turns fuzz bytes into a proof: 32-byte hashes, the last one
// possibly short (a malformed proof).
func splitHashes(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		n := min(32, len(b))
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

func FuzzVerifyInclusionProof(f *testing.F) {
	f.Add(uint64(0), uint64(1), make([]byte, 32), []byte{}, make([]byte, 32))
	f.Add(uint64(3), uint64(7), make([]byte, 32), make([]byte, 96), make([]byte, 32))
	f.Add(uint64(9), uint64(3), []byte{1}, []byte{2}, []byte{3})
	f.Fuzz(func(t *testing.T, index, size uint64, leaf, proof, root []byte) {
		_ = VerifyInclusionProof(index, size, leaf, splitHashes(proof), root)
	})
}

func FuzzVerifyConsistencyProof(f *testing.F) {
	f.Add(uint64(0), uint64(5), []byte{}, events.EmptyRoot[:], make([]byte, 32))
	f.Add(uint64(3), uint64(7), make([]byte, 96), make([]byte, 32), make([]byte, 32))
	f.Add(uint64(7), uint64(3), []byte{1}, []byte{2}, []byte{3})
	f.Fuzz(func(t *testing.T, size1, size2 uint64, proof, root1, root2 []byte) {
		err := VerifyConsistencyProof(size1, size2, splitHashes(proof), root1, root2)
		if err == nil && size1 == 0 && string(root1) != string(events.EmptyRoot[:]) {
			t.Fatal("accepted a consistency proof from an empty tree whose root is not SHA-256 of the empty string")
		}
	})
}

func FuzzParseEntryBundle(f *testing.F) {
	f.Add([]byte{0, 3, 'a', 'b', 'c', 0, 0}, 256)
	f.Add([]byte{0, 9, 'a'}, 256)
	f.Add([]byte{0xff}, 1)
	f.Fuzz(func(t *testing.T, b []byte, limit int) {
		entries, rest := ParseEntryBundle(b, limit)
		used := 0
		for _, e := range entries {
			used += 2 + len(e)
		}
		if used+rest != len(b) || len(entries) > max(limit, 0) {
			t.Fatalf("%d entries using %d bytes, %d left, of %d", len(entries), used, rest, len(b))
		}
	})
}

func FuzzReadState(f *testing.F) {
	f.Add([]byte(`{"origin":"greffe/x","size":0,"root":"47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=","checkpoint":"","tile_nodes":null,"edge_leaves":null}`))
	f.Add([]byte(`{"root":"AA=="}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "state.json")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := ReadState(p)
		if err == nil && (len(st.Root) != 32 || len(st.TileNodes)%32 != 0 || len(st.EdgeLeaves)%32 != 0) {
			t.Fatalf("accepted a malformed state: %+v", st)
		}
	})
}
