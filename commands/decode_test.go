package commands

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
)

// TestDigest_Stable: a command's digest is stored in its events'
// metadata and compared when its id comes again, so it never changes:
// pinned by its value, and equal to the definition it was first computed
// by (json.Compact of the data).
func TestDigest_Stable(t *testing.T) {
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
		if got, want := digest("GrantApproval", "c", []byte(data)), definition("GrantApproval", "c", []byte(data)); got != want {
			t.Errorf("digest of %q = %s, want %s", data, got, want)
		}
	}
	if got := digest("GrantApproval", "c", []byte(`{ "uses" : 1 }`)); got != "sha256:"+hexSum("GrantApproval\x00c\x00"+`{"uses":1}`) {
		t.Errorf("digest changed: %s", got)
	}
}

func hexSum(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// FuzzAppendCompact: on valid JSON, appendCompact is json.Compact.
func FuzzAppendCompact(f *testing.F) {
	for _, s := range []string{`{}`, ` { "a" : [ 1 , "b c" , "\" d" , "\\" ] } `, "[\"\\u00e9 \\n\",\t{\"k\" :null}]", `"x"`} {
		f.Add([]byte(s))
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
