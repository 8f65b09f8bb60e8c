package jsonscan

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
)

// TestAppendMarshalString: the bytes are json.Marshal's, on every escape
// json.Marshal makes and on what it leaves alone (FuzzEncodeStreamAppend
// and FuzzAppendOut check the same through the encoders that use it).
func TestAppendMarshalString(t *testing.T) {
	for _, s := range []string{
		"", "orders-1", "flux-é", "Événement ✓ 😀", "a\"b", `a\b`, "\x01", "\t\n\r", "\x7f",
		"<", ">", "&", "\u2028", "\u2029", "é\u2028", "\xff", "é\xff", "\xed\xa0\x80", "\ufffd",
	} {
		want, _ := json.Marshal(s)
		if got := AppendMarshalString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("AppendMarshalString(%q) = %q, json.Marshal %q", s, got[1:], want)
		}
	}
}

func TestAppendUUID(t *testing.T) {
	for _, id := range []uuid.UUID{uuid.Nil, uuid.Max, uuid.NewSHA1(uuid.NameSpaceURL, []byte("x")), uuid.New()} {
		if got := AppendUUID(nil, id); string(got) != id.String() {
			t.Errorf("AppendUUID(%v) = %s", id, got)
		}
	}
}
