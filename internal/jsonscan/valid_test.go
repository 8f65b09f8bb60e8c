package jsonscan

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/greffe/greffe/internal/jsonscan/jsontest"
)

// validJSONReference is Valid's definition, written plainly: what
// json.Valid accepts, as long as the document is UTF-8 (RFC 8259 §8.1; on
// valid JSON only strings can hold bytes above 0x7f) and every \u escape of
// a UTF-16 surrogate is one half of a pair (RFC 7493 §2.1).
func validJSONReference(b []byte) bool {
	if !json.Valid(b) || !utf8.Valid(b) {
		return false
	}
	inString := false
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '"':
			inString = !inString
		case inString && b[i] == '\\':
			if b[i+1] != 'u' {
				i++ // a one-letter escape, \" and \\ included
				continue
			}
			r, _ := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
			i += 5
			switch {
			case 0xdc00 <= r && r <= 0xdfff:
				return false // a low half without its high half
			case 0xd800 <= r && r <= 0xdbff:
				if i+6 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u' {
					return false
				}
				lo, err := strconv.ParseUint(string(b[i+3:i+7]), 16, 32)
				if err != nil || lo < 0xdc00 || lo > 0xdfff {
					return false
				}
				i += 6
			}
		}
	}
	return true
}

func TestValidJSON(t *testing.T) {
	for _, tc := range jsontest.Cases() {
		name := tc.Name
		b := []byte(tc.In)
		if ref := validJSONReference(b); ref != tc.Text {
			t.Errorf("%s: validJSONReference(%.40q) = %v, the table says %v", name, tc.In, ref, tc.Text)
		}
		if got := Valid(b); got != tc.Text {
			t.Errorf("%s: Valid(%.40q) = %v, want %v", name, tc.In, got, tc.Text)
		}
	}
}

// TestValidJSONPrefixes checks every prefix of some valid documents, where a
// validator that reads past the end or accepts a cut-off value would show.
func TestValidJSONPrefixes(t *testing.T) {
	for _, doc := range []string{
		jsontest.Realistic,
		`{"a":[1,-2.5e+3,true,false,null,"\u00e9\n\"x\""],"b":{}}`,
		`"` + strings.Repeat("é", 20) + `\ud83d\ude00"`,
		`"世界😀\ud83d\ude00é"`,
	} {
		for n := 0; n <= len(doc); n++ {
			b := []byte(doc[:n])
			if got, want := Valid(b), validJSONReference(b); got != want {
				t.Errorf("Valid(%q) = %v, validJSONReference says %v", b, got, want)
			}
		}
	}
}

// TestBadTextOffset: on JSON that json.Valid accepts, BadTextOffset finds
// a bad string byte exactly when Valid refuses, and names the first.
func TestBadTextOffset(t *testing.T) {
	for _, tc := range jsontest.Cases() {
		b := []byte(tc.In)
		if !json.Valid(b) {
			continue
		}
		if got := BadTextOffset(b); (got >= 0) == tc.Text {
			t.Errorf("%s: BadTextOffset(%.40q) = %d, Valid says %v", tc.Name, tc.In, got, tc.Text)
		}
	}
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"{\"a\":\"xy\xffz\"}", 8},
		{"{\"\xff\":\"\xfe\"}", 2},
		{`{"a":"\\","b":"\udc00"}`, 15},
		{`{"a":"\ud83d\ude00","b":"\ud83d"}`, 25},
		{"{\"a\":\"é\xe9\"}", 8},
		{`{"a":"\\ud800"}`, -1},
	} {
		if got := BadTextOffset([]byte(tc.in)); got != tc.want {
			t.Errorf("BadTextOffset(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestValidJSONAllocs keeps Valid off the heap, deep nesting included.
func TestValidJSONAllocs(t *testing.T) {
	deep := []byte(jsontest.Alternating(10000))
	if n := testing.AllocsPerRun(10, func() { Valid(deep) }); n != 0 {
		t.Errorf("Valid allocates %v times per call, want 0", n)
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, b := range jsontest.Seeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, want := Valid(b), validJSONReference(b)
		if got != want {
			t.Errorf("Valid(%q) = %v, validJSONReference says %v", b, got, want)
		}
		if json.Valid(b) && (BadTextOffset(b) >= 0) == got {
			t.Errorf("BadTextOffset(%q) = %d, Valid says %v", b, BadTextOffset(b), got)
		}
	})
}

func BenchmarkValidJSON(b *testing.B) {
	small := []byte(`{"p":"` + strings.Repeat("x", 256-len(`{"p":""}`)) + `"}`)
	inputs := []struct {
		name string
		doc  []byte
	}{
		{"object256B", small},
		{"realistic2KB", []byte(jsontest.Realistic)},
	}
	impls := []struct {
		name  string
		valid func([]byte) bool
	}{
		{"Valid", Valid},
		{"json.Valid", json.Valid},
	}
	for _, in := range inputs {
		for _, impl := range impls {
			b.Run(in.name+"/"+impl.name, func(b *testing.B) {
				if !impl.valid(in.doc) {
					b.Fatalf("%s refuses the %s input", impl.name, in.name)
				}
				b.SetBytes(int64(len(in.doc)))
				b.ReportAllocs()
				for b.Loop() {
					impl.valid(in.doc)
				}
			})
		}
	}
}
