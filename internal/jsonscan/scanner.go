package jsonscan

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Scanner reads the JSON of B from offset I. Every method but SkipValue
// and SkipValueUniqueNames skips leading whitespace; those two start at I.
// Values returned as []byte alias B.
type Scanner struct {
	B []byte
	I int
}

// Space skips JSON whitespace.
func (p *Scanner) Space() { p.I = SkipSpace(p.B, p.I) }

// Consume skips whitespace and then c, if c is next.
func (p *Scanner) Consume(c byte) bool {
	p.Space()
	if p.I < len(p.B) && p.B[p.I] == c {
		p.I++
		return true
	}
	return false
}

// PlainString reads a string without escapes, control bytes or invalid
// UTF-8 and returns its contents (which are then exactly what a JSON
// decoder decodes).
func (p *Scanner) PlainString() ([]byte, bool) {
	p.Space()
	if p.I >= len(p.B) || p.B[p.I] != '"' {
		return nil, false
	}
	start := p.I + 1
	ascii := true
	for j := start; j < len(p.B); j++ {
		switch c := p.B[j]; {
		case c == '"':
			s := p.B[start:j]
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			p.I = j + 1
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, false
}

// Digits reads a non-negative integer without leading zeros, sign, fraction
// or exponent, followed by a delimiter or the end of B, and returns its
// bytes, whatever its size.
func (p *Scanner) Digits() ([]byte, bool) {
	p.Space()
	start := p.I
	for p.I < len(p.B) && '0' <= p.B[p.I] && p.B[p.I] <= '9' {
		p.I++
	}
	n := p.I - start
	if n == 0 || (n > 1 && p.B[start] == '0') || !p.atDelim() {
		return nil, false
	}
	return p.B[start:p.I], true
}

// Uint reads an integer as Digits does that also fits a uint64.
func (p *Scanner) Uint() (uint64, bool) {
	d, ok := p.Digits()
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(string(d), 10, 64)
	return v, err == nil
}

// Bool reads true or false followed by a delimiter or the end of B.
func (p *Scanner) Bool() (value, ok bool) {
	p.Space()
	switch rest := p.B[p.I:]; {
	case bytes.HasPrefix(rest, []byte("true")):
		p.I += 4
		return true, p.atDelim()
	case bytes.HasPrefix(rest, []byte("false")):
		p.I += 5
		return false, p.atDelim()
	}
	return false, false
}

// End skips whitespace and reports whether nothing is left of B.
func (p *Scanner) End() bool {
	p.Space()
	return p.I == len(p.B)
}

// MaxFields is the most names Fields takes.
const MaxFields = 64

// Fields reads an object whose names are plain strings (PlainString) among
// names, each at most once: the member loop of every strict fast path. For
// each member, read(i) is called with the cursor just after the colon, on
// the value of names[i], and must read that value, reporting false to
// decline. Fields reports false when the input is not such an object, or
// read declined. REQUIRES: len(names) <= MaxFields.
func (p *Scanner) Fields(names []string, read func(i int) bool) bool {
	if !p.Consume('{') {
		return false
	}
	if p.Consume('}') {
		return true
	}
	var seen uint64
	for {
		name, ok := p.PlainString()
		if !ok || !p.Consume(':') {
			return false
		}
		i := 0
		for i < len(names) && string(name) != names[i] {
			i++
		}
		if i == len(names) || seen&(1<<i) != 0 || !read(i) {
			return false
		}
		seen |= 1 << i
		if p.Consume(',') {
			continue
		}
		return p.Consume('}')
	}
}

// Array reads an array, calling read for each element with the cursor on
// it (after whitespace may come first); read must read the element,
// reporting false to decline. Array reports false when the input is not an
// array, or read declined.
func (p *Scanner) Array(read func() bool) bool {
	if !p.Consume('[') {
		return false
	}
	if p.Consume(']') {
		return true
	}
	for {
		if !read() {
			return false
		}
		if p.Consume(',') {
			continue
		}
		return p.Consume(']')
	}
}

// SkipValue moves past the value that starts at I (call Space first) by
// matching brackets and strings only: it does not validate, so a caller
// that needs valid JSON checks the bytes it skipped. Arrays and objects
// nested deeper than maxDepth are declined. A string may hold escapes; a
// number or literal runs up to the next delimiter.
func (p *Scanner) SkipValue(maxDepth int) bool {
	if p.I >= len(p.B) {
		return false
	}
	switch p.B[p.I] {
	case '{', '[':
		depth := 0
		for p.I < len(p.B) {
			switch p.B[p.I] {
			case '{', '[':
				if depth++; depth > maxDepth {
					return false
				}
			case '}', ']':
				if depth--; depth == 0 {
					p.I++
					return true
				}
			case '"':
				if !p.skipString() {
					return false
				}
				continue
			}
			p.I++
		}
		return false
	case '"':
		return p.skipString()
	}
	start := p.I
	for p.I < len(p.B) && !p.atDelim() {
		p.I++
	}
	return p.I > start
}

// maxUniqueNames bounds the names of one object SkipValueUniqueNames
// compares pairwise; an object with more is declined (a decoder with a
// hash set decides).
const maxUniqueNames = 64

// SkipValueUniqueNames is SkipValue that also declines a value holding an
// object that gives a name twice, or a name with an escape (which could
// spell another name: "\u0061" is "a"), or more than 64 names. On valid
// JSON it then accepts exactly what a decoder that refuses duplicate names
// accepts (encoding/json/v2), without allocating for values of usual
// nesting.
func (p *Scanner) SkipValueUniqueNames(maxDepth int) bool {
	if p.I >= len(p.B) || p.B[p.I] != '{' && p.B[p.I] != '[' {
		return p.SkipValue(maxDepth)
	}
	type frame struct {
		object    bool
		wantName  bool // an object's next string is a name
		namesFrom int  // the object's names are names[namesFrom:]
	}
	type span struct{ from, to int }
	var stackBuf [16]frame
	var namesBuf [64]span
	stack, names := stackBuf[:0], namesBuf[:0]
	for p.I < len(p.B) {
		switch c := p.B[p.I]; c {
		case '{', '[':
			if len(stack) == maxDepth {
				return false
			}
			stack = append(stack, frame{object: c == '{', wantName: c == '{', namesFrom: len(names)})
		case '}', ']':
			if len(stack) == 0 {
				return false
			}
			names = names[:stack[len(stack)-1].namesFrom]
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				p.I++
				return true
			}
		case ',':
			top := &stack[len(stack)-1]
			top.wantName = top.object
		case '"':
			start := p.I
			if !p.skipString() {
				return false
			}
			if top := &stack[len(stack)-1]; top.wantName {
				top.wantName = false
				name := p.B[start+1 : p.I-1]
				if bytes.IndexByte(name, '\\') >= 0 || len(names)-top.namesFrom == maxUniqueNames {
					return false
				}
				for _, n := range names[top.namesFrom:] {
					if bytes.Equal(p.B[n.from:n.to], name) {
						return false
					}
				}
				names = append(names, span{start + 1, p.I - 1})
			}
			continue
		}
		p.I++
	}
	return false
}

// skipString moves past a string, escapes included, starting at its quote.
// It jumps from quote to quote (bytes.IndexByte is vectorised): long
// excerpts and hashes are most of the bytes of event data.
func (p *Scanner) skipString() bool {
	if end := stringEnd(p.B, p.I); end > 0 {
		p.I = end
		return true
	}
	return false
}

// stringEnd returns the index just after the string whose quote is b[i],
// or -1 when it does not end.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j <= len(b); {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		n := 0 // backslashes before the quote: an odd count escapes it
		for r := q - 1; r > i && b[r] == '\\'; r-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return -1
}

// atDelim reports whether a number or literal may end here.
func (p *Scanner) atDelim() bool {
	if p.I == len(p.B) {
		return true
	}
	switch p.B[p.I] {
	case ' ', '\t', '\n', '\r', ',', '}', ']':
		return true
	}
	return false
}

// Members calls fn for each member of the object at the cursor, with its
// name (unescaped when it holds an escape, into a new slice; else a slice
// of B) and its value as raw bytes, until fn returns false. It is lenient:
// it stops at whatever is not an object member, and reports whether the
// cursor was at an object at all.
func (p *Scanner) Members(fn func(name, value []byte) bool) bool {
	if !p.Consume('{') {
		return false
	}
	for {
		p.Space()
		if p.I >= len(p.B) || p.B[p.I] != '"' {
			return true
		}
		start := p.I
		if !p.skipString() {
			return true
		}
		name := p.B[start+1 : p.I-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			var s string
			if json.Unmarshal(p.B[start:p.I], &s) == nil {
				name = []byte(s)
			}
		}
		if !p.Consume(':') {
			return true
		}
		p.Space()
		vstart := p.I
		if !p.SkipValue(maxLenientDepth) {
			return true
		}
		if !fn(name, p.B[vstart:p.I]) {
			return true
		}
		if !p.Consume(',') {
			return true
		}
	}
}

// Elements calls fn for the raw bytes of each element of the array at the
// cursor, until fn returns false. Lenient as Members.
func (p *Scanner) Elements(fn func(value []byte) bool) bool {
	if !p.Consume('[') {
		return false
	}
	if p.Consume(']') {
		return true
	}
	for {
		p.Space()
		start := p.I
		if !p.SkipValue(maxLenientDepth) || !fn(p.B[start:p.I]) || !p.Consume(',') {
			return true
		}
	}
}

// maxLenientDepth bounds the nesting Members and Elements skip: the log
// refuses deeper data (Valid).
const maxLenientDepth = 10000
