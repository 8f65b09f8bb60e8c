package jsonscan

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/internal/jsonscan/jsontest"
)

// result is what one read gives: the value (as a string, nil slices as ""),
// ok, and the offset after it. After a false the value and the offset are
// unspecified, so a decline is compared as result{}.
type result struct {
	V  string
	OK bool
	I  int
}

func check(t *testing.T, in string, got, want result) {
	t.Helper()
	if !got.OK {
		got = result{}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("on %q (-want +got):\n%s", in, d)
	}
}

func TestSpace(t *testing.T) {
	tests := []struct {
		in    string
		start int
		want  int
	}{
		{"", 0, 0},
		{"x", 0, 0},
		{" \t\n\rx", 0, 4},
		{"    ", 0, 4},
		{"a  b", 1, 3},
		{"\v x", 0, 0},    // vertical tab is not JSON whitespace
		{"\u00a0x", 0, 0}, // nor is a no-break space
		{"ab", 2, 2},      // at the end
	}
	for _, tt := range tests {
		p := Scanner{B: []byte(tt.in), I: tt.start}
		p.Space()
		if d := cmp.Diff(tt.want, p.I); d != "" {
			t.Errorf("Space on %q from %d (-want +got):\n%s", tt.in, tt.start, d)
		}
	}
}

func TestConsume(t *testing.T) {
	tests := []struct {
		in   string
		c    byte
		want result
	}{
		{"{", '{', result{OK: true, I: 1}},
		{" \n\t{ ", '{', result{OK: true, I: 4}},
		{"[", '{', result{}},
		{"", ',', result{}},
		{"   ", ':', result{}},
		{"::", ':', result{OK: true, I: 1}},
	}
	for _, tt := range tests {
		p := Scanner{B: []byte(tt.in)}
		ok := p.Consume(tt.c)
		check(t, tt.in, result{OK: ok, I: p.I}, tt.want)
	}
}

// TestConsumeDeclineKeepsOffset: a failed Consume skips only whitespace, so
// callers may try another byte (",", then "}").
func TestConsumeDeclineKeepsOffset(t *testing.T) {
	p := Scanner{B: []byte("  }")}
	if p.Consume(',') {
		t.Fatal("consumed ',' from \"  }\"")
	}
	if !p.Consume('}') || p.I != 3 {
		t.Fatalf("Consume('}') after a decline: I = %d, want 3", p.I)
	}
}

func TestPlainString(t *testing.T) {
	tests := []struct {
		in   string
		want result
	}{
		{`""`, result{OK: true, I: 2}},
		{`"abc"`, result{V: "abc", OK: true, I: 5}},
		{` "abc" , `, result{V: "abc", OK: true, I: 6}},
		{`"a b/c"x`, result{V: "a b/c", OK: true, I: 7}}, // what follows is the caller's
		{"\"é✓😀\"", result{V: "é✓😀", OK: true, I: 11}},
		{"\"\x7f\"", result{V: "\x7f", OK: true, I: 3}},           // DEL is not a control byte for JSON
		{"\"\u2028<&>\"", result{V: "\u2028<&>", OK: true, I: 8}}, // decoded as is
		// Declines.
		{``, result{}},
		{`   `, result{}},
		{`abc`, result{}},
		{`1`, result{}},
		{`null`, result{}},
		{`"abc`, result{}},             // truncated
		{`"`, result{}},                // truncated
		{`"a\"b"`, result{}},           // escape
		{`"a\\"`, result{}},            // escape
		{`"\u0041"`, result{}},         // escape
		{"\"a\x00b\"", result{}},       // control byte
		{"\"a\nb\"", result{}},         // control byte
		{"\"a\x1fb\"", result{}},       // control byte
		{"\"a\xffb\"", result{}},       // invalid UTF-8
		{"\"\xc3\"", result{}},         // truncated UTF-8 sequence
		{"\"\xed\xa0\x80\"", result{}}, // surrogate half
		{"\"\xc0\xaf\"", result{}},     // overlong encoding
	}
	for _, tt := range tests {
		p := Scanner{B: []byte(tt.in)}
		s, ok := p.PlainString()
		check(t, tt.in, result{V: string(s), OK: ok, I: p.I}, tt.want)
	}
}

// TestPlainStringAliases: the contents are a slice of B, not a copy.
func TestPlainStringAliases(t *testing.T) {
	b := []byte(`"abc"`)
	p := Scanner{B: b}
	s, ok := p.PlainString()
	if !ok || &s[0] != &b[1] {
		t.Fatalf("PlainString = %q, %v; want a slice of B", s, ok)
	}
}

func TestDigits(t *testing.T) {
	tests := []struct {
		in   string
		want result
	}{
		{`0`, result{V: "0", OK: true, I: 1}},
		{`7`, result{V: "7", OK: true, I: 1}},
		{` 42 `, result{V: "42", OK: true, I: 3}},
		{`10,`, result{V: "10", OK: true, I: 2}},
		{`10}`, result{V: "10", OK: true, I: 2}},
		{`10]`, result{V: "10", OK: true, I: 2}},
		{"10\n", result{V: "10", OK: true, I: 2}},
		{`99999999999999999999999`, result{V: "99999999999999999999999", OK: true, I: 23}}, // any size
		// Declines.
		{``, result{}},
		{`  `, result{}},
		{`00`, result{}},  // leading zero
		{`01`, result{}},  // leading zero
		{`-1`, result{}},  // sign
		{`+1`, result{}},  // sign
		{`1.5`, result{}}, // fraction
		{`1e3`, result{}}, // exponent
		{`1E3`, result{}}, // exponent
		{`12a`, result{}}, // no delimiter
		{`1:`, result{}},  // no delimiter
		{`"1"`, result{}}, // a string
		{`true`, result{}},
	}
	for _, tt := range tests {
		p := Scanner{B: []byte(tt.in)}
		d, ok := p.Digits()
		check(t, tt.in, result{V: string(d), OK: ok, I: p.I}, tt.want)
	}
}

func TestUint(t *testing.T) {
	maxU := strconv.FormatUint(math.MaxUint64, 10)
	tests := []struct {
		in   string
		want result
	}{
		{`0`, result{V: "0", OK: true, I: 1}},
		{` 123 ,`, result{V: "123", OK: true, I: 4}},
		{`9007199254740993}`, result{V: "9007199254740993", OK: true, I: 16}}, // no float rounding
		{maxU, result{V: maxU, OK: true, I: len(maxU)}},
		// Declines.
		{`18446744073709551616`, result{}}, // MaxUint64+1: overflow
		{`99999999999999999999999`, result{}},
		{`007`, result{}}, // leading zeros
		{`-0`, result{}},
		{`1.0`, result{}},
		{`1e2`, result{}},
		{`12x`, result{}},
		{``, result{}},
		{`null`, result{}},
	}
	for _, tt := range tests {
		p := Scanner{B: []byte(tt.in)}
		v, ok := p.Uint()
		check(t, tt.in, result{V: strconv.FormatUint(v, 10), OK: ok, I: p.I}, tt.want)
	}
}

func TestBool(t *testing.T) {
	tests := []struct {
		in   string
		want result
	}{
		{`true`, result{V: "true", OK: true, I: 4}},
		{`false`, result{V: "false", OK: true, I: 5}},
		{" \ttrue }", result{V: "true", OK: true, I: 6}},
		{`false,`, result{V: "false", OK: true, I: 5}},
		{`true]`, result{V: "true", OK: true, I: 4}},
		// Declines.
		{``, result{}},
		{`   `, result{}},
		{`tru`, result{}},  // truncated
		{`fals`, result{}}, // truncated
		{`trueish`, result{}},
		{`true:`, result{}},
		{`True`, result{}},
		{`null`, result{}},
		{`1`, result{}},
		{`"true"`, result{}},
	}
	for _, tt := range tests {
		p := Scanner{B: []byte(tt.in)}
		v, ok := p.Bool()
		check(t, tt.in, result{V: strconv.FormatBool(v), OK: ok, I: p.I}, tt.want)
	}
}

func TestEnd(t *testing.T) {
	tests := []struct {
		in    string
		start int
		want  bool
	}{
		{"", 0, true},
		{"{}", 2, true},
		{"{} \n\t\r", 2, true},
		{"{} x", 2, false},
		{"{}{}", 2, false},
		{"{}", 0, false},
	}
	for _, tt := range tests {
		p := Scanner{B: []byte(tt.in), I: tt.start}
		if got := p.End(); got != tt.want {
			t.Errorf("End on %q from %d = %v, want %v", tt.in, tt.start, got, tt.want)
		}
	}
}

func TestSkipValue(t *testing.T) {
	tests := []struct {
		in       string
		maxDepth int
		want     result // V: the bytes skipped
	}{
		{`{}`, 10, result{V: `{}`, OK: true, I: 2}},
		{`[] ,`, 10, result{V: `[]`, OK: true, I: 2}},
		{`{"a":[1,{"b":"}]"}]},`, 10, result{V: `{"a":[1,{"b":"}]"}]}`, OK: true, I: 20}},
		{`"a\"b\\"x`, 10, result{V: `"a\"b\\"`, OK: true, I: 8}}, // escapes are skipped, not refused
		{`["\"]"]`, 10, result{V: `["\"]"]`, OK: true, I: 7}},
		{"\"\x01\xff\"", 10, result{V: "\"\x01\xff\"", OK: true, I: 4}}, // no validation
		{`123.5e-7,`, 10, result{V: `123.5e-7`, OK: true, I: 8}},
		{`null}`, 10, result{V: `null`, OK: true, I: 4}},
		{`tru`, 10, result{V: `tru`, OK: true, I: 3}}, // up to a delimiter, unchecked
		{`{]`, 10, result{V: `{]`, OK: true, I: 2}},   // brackets are counted, not paired
		{`[[[]]]`, 3, result{V: `[[[]]]`, OK: true, I: 6}},
		// Declines.
		{``, 10, result{}},
		{` 1`, 10, result{}}, // does not skip leading whitespace
		{`,`, 10, result{}},  // no value before the delimiter
		{`}`, 10, result{}},
		{`{"a":1`, 10, result{}},  // truncated
		{`[1,2`, 10, result{}},    // truncated
		{`"abc`, 10, result{}},    // truncated string
		{`"ab\"`, 10, result{}},   // truncated after an escaped quote
		{`["a]`, 10, result{}},    // truncated string inside
		{`[[[[]]]]`, 3, result{}}, // deeper than maxDepth
	}
	for _, tt := range tests {
		p := Scanner{B: []byte(tt.in)}
		ok := p.SkipValue(tt.maxDepth)
		got := result{OK: ok, I: p.I}
		if ok {
			got.V = tt.in[:p.I]
		}
		check(t, tt.in, got, tt.want)
	}
}

func TestFields(t *testing.T) {
	names := []string{"a", "b"}
	tests := []struct {
		in   string
		want string // the names read, in order; "-" when declined
	}{
		{`{}`, ""},
		{` { "a" : 1 , "b":2 } `, "ab"},
		{`{"b":1,"a":2}`, "ba"},
		{`{"a":1,"a":2}`, "-"},   // a name twice
		{`{"c":1}`, "-"},         // not among names
		{`{"A":1}`, "-"},         // names are exact
		{`{"\u0061":1}`, "-"},    // an escaped name is not plain
		{`{"a":1,}`, "-"},        // trailing comma
		{`{"a" 1}`, "-"},         // no colon
		{`{"a":1`, "-"},          // truncated
		{`[]`, "-"},              // not an object
		{`{"a":1,"b":"x"}`, "-"}, // read declines a string
	}
	for _, tt := range tests {
		p := Scanner{B: []byte(tt.in)}
		read := ""
		ok := p.Fields(names, func(i int) bool {
			read += names[i]
			_, ok := p.Uint()
			return ok
		})
		if !ok {
			read = "-"
		}
		if read != tt.want {
			t.Errorf("Fields on %q read %q, want %q", tt.in, read, tt.want)
		}
	}
}

func TestArray(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []uint64 // nil when declined
	}{
		{`[]`, []uint64{}},
		{` [ 1 , 2 ] `, []uint64{1, 2}},
		{`[1,]`, nil},
		{`[1 2]`, nil},
		{`[1`, nil},
		{`{}`, nil},
	} {
		p := Scanner{B: []byte(tt.in)}
		got := []uint64{}
		ok := p.Array(func() bool {
			v, ok := p.Uint()
			got = append(got, v)
			return ok
		})
		if !ok {
			got = nil
		}
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("Array on %q (-want +got):\n%s", tt.in, d)
		}
	}
}

func TestSkipValueUniqueNames(t *testing.T) {
	many := `{"k0":0`
	for i := 1; i <= maxUniqueNames; i++ {
		many += `,"k` + strconv.Itoa(i) + `":0`
	}
	many += `}`
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{`{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}`, true}, // one name in sibling objects
		{`{"a":"a","b":"a"}`, true},                         // values are not names
		{`["a","a"]`, true},
		{`{"a":{"x":1},"a":2}`, false},
		{`[{"a":1,"b":2,"a":3}]`, false},
		{`{"x":{"y":[{"z":1,"z":2}]}}`, false},
		{`{"a":1,"\u0061":2}`, false}, // an escaped name may spell another
		{`{"a\"":1,"a":2}`, false},
		{many, false}, // more names than it compares
		{`"x"`, true},
		{`12`, true},
	} {
		p := Scanner{B: []byte(tt.in)}
		if got := p.SkipValueUniqueNames(100) && p.I == len(tt.in); got != tt.want {
			t.Errorf("SkipValueUniqueNames on %q = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestMembersElements(t *testing.T) {
	p := Scanner{B: []byte(` { "a" : [1, {"b": "}]"}] , "c\u0041" : "x" , "d": {} } `)}
	var got []string
	p.Members(func(name, value []byte) bool {
		got = append(got, string(name)+"="+string(value))
		return true
	})
	want := []string{`a=[1, {"b": "}]"}]`, `cA="x"`, `d={}`}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Members (-want +got):\n%s", d)
	}
	var els []string
	q := Scanner{B: []byte(`[ 1 , "a,b" , [2] ]`)}
	q.Elements(func(v []byte) bool { els = append(els, string(v)); return true })
	if d := cmp.Diff([]string{`1`, `"a,b"`, `[2]`}, els); d != "" {
		t.Errorf("Elements (-want +got):\n%s", d)
	}
}

// FuzzSkipValueUniqueNames: on JSON text without escapes, it accepts
// exactly what encoding/json/v2 accepts (which refuses a name given twice
// in an object), the rule the append fast path relies on.
func FuzzSkipValueUniqueNames(f *testing.F) {
	for _, b := range jsontest.Seeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) || !utf8.Valid(b) || bytes.IndexByte(b, '\\') >= 0 || bytes.Count(b, []byte(`"`)) > maxUniqueNames {
			return
		}
		b = bytes.TrimSpace(b)
		p := Scanner{B: b}
		got := p.SkipValueUniqueNames(1000) && p.I == len(b)
		if want := jsontext.Value(b).IsValid(); got != want {
			t.Fatalf("SkipValueUniqueNames(%q) = %v, jsontext says %v", b, got, want)
		}
	})
}
