package commands

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/greffe/greffe/internal/jsonscan/jsontest"
)

// TestDigestLegacy_Stable: the digest recorded before issue #15 is still
// compared when a command recorded by an older node comes again, so it
// never changes: pinned by its value, and equal to the definition it was
// first computed by (json.Compact of the data).
func TestDigestLegacy_Stable(t *testing.T) {
	definition := func(name, corr string, data []byte) string {
		var c bytes.Buffer
		if err := json.Compact(&c, data); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(name + "\x00" + corr + "\x00" + c.String()))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	for _, data := range []string{
		`{}`,
		`{"approval_id":"a1","uses":1}`,
		" {\n\t\"approval_id\" : \"a 1\" ,\r\n \"conditions\" : [ \"x\\\" y\" , \"\\\\\" ] } ",
	} {
		if got, want := digestLegacy("GrantApproval", "c", []byte(data)), definition("GrantApproval", "c", []byte(data)); got != want {
			t.Errorf("digest of %q = %s, want %s", data, got, want)
		}
	}
	if got := digestLegacy("GrantApproval", "c", []byte(`{ "uses" : 1 }`)); got != "sha256:"+hexSum("GrantApproval\x00c\x00"+`{"uses":1}`) {
		t.Errorf("digest changed: %s", got)
	}
}

// TestDigest_Canonical: the digest is over the RFC 8785 form of the data,
// so key order, whitespace and escapes never make a re-send another
// command (issue #15), while another value always does, down to the last
// digit of a nanosecond mtime that a double cannot hold.
func TestDigest_Canonical(t *testing.T) {
	must := func(name, corr, data string) string {
		t.Helper()
		d, err := digest(name, corr, []byte(data))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// Pinned: the format is stored and never changes.
	if got, want := must("GrantApproval", "c", `{ "uses" : 1, "approval_id": "a1" }`), "sha256:"+hexSum("GrantApproval\x00c\x00"+`{"approval_id":"a1","uses":1}`); got != want {
		t.Errorf("digest = %s, want %s", got, want)
	}
	same := [][]string{
		{`{"approval_id":"a1","uses":1,"conditions":["x","y"]}`, "{\n  \"conditions\": [\"x\", \"y\"],\n  \"uses\": 1,\n  \"approval_id\": \"a1\"\n}"},
		{`{"subject":"é","b":{"z":1,"a":2}}`, `{"b":{"a":2,"z":1},"subject":"\u00e9"}`},
		{`{"size":1e3}`, `{"size":1000}`},
		{`{"mtime_ns":1772355600123456789,"path":"/w"}`, `{"mtime_ns":1772355600123456789,"path":"/w"}`},
	}
	for _, p := range same {
		if a, b := must("X", "c", p[0]), must("X", "c", p[1]); a != b {
			t.Errorf("%s and %s: digests %s and %s, want one", p[0], p[1], a, b)
		}
	}
	differ := [][]string{
		{`{"uses":1}`, `{"uses":2}`},
		{`{"conditions":["x","y"]}`, `{"conditions":["y","x"]}`}, // arrays keep their order
		// Both round to the same double: the exact digits still count.
		{`{"mtime_ns":1772355600123456789}`, `{"mtime_ns":1772355600123456790}`},
	}
	for _, p := range differ {
		if a, b := must("X", "c", p[0]), must("X", "c", p[1]); a == b {
			t.Errorf("%s and %s share the digest %s", p[0], p[1], a)
		}
	}
	if must("X", "c", `{}`) == must("Y", "c", `{}`) || must("X", "c", `{}`) == must("X", "d", `{}`) {
		t.Error("the name and the correlation id are part of the digest")
	}
}

func hexSum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// FuzzAppendCompact: on valid JSON, appendCompact is json.Compact.
func FuzzAppendCompact(f *testing.F) {
	for _, b := range jsontest.Seeds() { // the module's one JSON seed corpus
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want bytes.Buffer
		if json.Compact(&want, b) != nil {
			return
		}
		if got := appendCompact(nil, b); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("appendCompact(%q) = %q, json.Compact %q", b, got, want.Bytes())
		}
	})
}
