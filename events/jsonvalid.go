package events

import "encoding/binary"

// JSON validation on the append path.
//
// Every event's data and metadata is checked to be JSON before anything is
// written, so the check runs over every byte of every append. The standard
// library's json.Valid drives a byte-at-a-time state machine through a
// function pointer (about 200 MB/s) and showed up as 5-10 % of CPU in the
// append benchmarks. ValidJSON accepts exactly the same language, but as a
// plain iterative parser that skips the ordinary bytes of strings, where
// most payload bytes are, eight at a time.

// maxJSONDepth is encoding/json's maxNestingDepth: json.Valid refuses input
// with more than this many arrays and objects open at once, and so must we.
const maxJSONDepth = 10000

// ValidJSON reports whether b is exactly one valid JSON value, surrounded by
// optional whitespace: the same answer as encoding/json.Valid, faster.
//
// It is on every append's path (see isJSONObject), hence the hand-written
// parser. Its grammar is that of encoding/json's scanner, not a stricter
// reading of RFC 8259: strings are checked byte by byte, so invalid UTF-8 is
// accepted, as are lone surrogates in \u escapes; only bytes below 0x20 are
// refused inside strings. Whitespace is space, \t, \r and \n. Nesting deeper
// than 10000 arrays and objects is refused. It does not allocate.
func ValidJSON(b []byte) bool {
	// inObject holds one bit per open container, set for an object and
	// clear for an array: 1.25 KiB on the goroutine stack, which replaces
	// the recursion (and the stack growth) a descent parser would need.
	var inObject [(maxJSONDepth + 63) / 64]uint64
	depth := 0
	n := len(b)
	i := 0
	for {
		// A value starts here.
		i = skipJSONSpace(b, i)
		if i >= n {
			return false
		}
		switch b[i] {
		case '{':
			if depth == maxJSONDepth {
				return false
			}
			inObject[depth>>6] |= 1 << (depth & 63)
			depth++
			i = skipJSONSpace(b, i+1)
			if i < n && b[i] == '}' {
				depth--
				i++
				break // to the end of the (empty) object
			}
			if i = scanJSONKey(b, i); i < 0 {
				return false
			}
			continue // to the member's value
		case '[':
			if depth == maxJSONDepth {
				return false
			}
			inObject[depth>>6] &^= 1 << (depth & 63)
			depth++
			i = skipJSONSpace(b, i+1)
			if i < n && b[i] == ']' {
				depth--
				i++
				break // to the end of the (empty) array
			}
			continue // to the first element
		case '"':
			if i = scanJSONString(b, i+1); i < 0 {
				return false
			}
		case 't':
			if i+4 > n || b[i+1] != 'r' || b[i+2] != 'u' || b[i+3] != 'e' {
				return false
			}
			i += 4
		case 'f':
			if i+5 > n || b[i+1] != 'a' || b[i+2] != 'l' || b[i+3] != 's' || b[i+4] != 'e' {
				return false
			}
			i += 5
		case 'n':
			if i+4 > n || b[i+1] != 'u' || b[i+2] != 'l' || b[i+3] != 'l' {
				return false
			}
			i += 4
		default:
			// Numbers, or anything else (scanJSONNumber refuses it).
			if i = scanJSONNumber(b, i); i < 0 {
				return false
			}
		}

		// A value ended just before i: close containers until a comma asks
		// for the next value, or the top-level value is over.
		for {
			i = skipJSONSpace(b, i)
			if depth == 0 {
				return i == n // nothing but whitespace after the value
			}
			if i >= n {
				return false
			}
			top := depth - 1
			obj := inObject[top>>6]&(1<<(top&63)) != 0
			c := b[i]
			i++
			if c == ',' {
				if obj {
					if i = scanJSONKey(b, skipJSONSpace(b, i)); i < 0 {
						return false
					}
				}
				break // to the next value
			}
			if (obj && c != '}') || (!obj && c != ']') {
				return false
			}
			depth--
		}
	}
}

// skipJSONSpace returns the index of the first byte at or after i that is
// not JSON whitespace (space, \t, \r, \n), or len(b).
func skipJSONSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// scanJSONKey checks an object member's key and colon, starting at b[i]
// (whitespace before the key already skipped), and returns the index just
// after the colon, or -1.
func scanJSONKey(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = scanJSONString(b, i+1); i < 0 {
		return -1
	}
	i = skipJSONSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return i + 1
}

// jsonStringPlain marks the bytes that stand for themselves inside a JSON
// string as encoding/json's scanner reads it: everything but '"', '\\' and
// the control bytes below 0x20. Bytes >= 0x80 are plain whether or not they
// form valid UTF-8, as in json.Valid.
var jsonStringPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// jsonEscape marks the bytes allowed after a backslash, other than 'u'.
var jsonEscape = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// jsonHex marks hexadecimal digits, for \uXXXX.
var jsonHex = func() (t [256]bool) {
	for _, c := range "0123456789abcdefABCDEF" {
		t[c] = true
	}
	return t
}()

// SWAR constants: one in every byte, and every byte's top bit.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// scanJSONString checks the rest of a string whose opening quote is at
// b[i-1], and returns the index just after its closing quote, or -1.
//
// This is where validation spends its time, so runs of plain bytes are
// skipped eight at a time: a word is skipped when none of its bytes is '"',
// '\\' or below 0x20, tested with the classic "has a byte less than n" and
// "has a zero byte" bit tricks, which are exact as yes/no answers.
func scanJSONString(b []byte, i int) int {
	n := len(b)
	for {
		for i+8 <= n {
			x := binary.LittleEndian.Uint64(b[i:])
			q := x ^ (swarOnes * '"')           // zero byte where x has '"'
			s := x ^ (swarOnes * '\\')          // zero byte where x has '\\'
			special := (x - swarOnes*0x20) &^ x // < 0x20
			special |= (q - swarOnes) &^ q
			special |= (s - swarOnes) &^ s
			if special&swarHigh != 0 {
				break
			}
			i += 8
		}
		// At most eight plain bytes before the one that stopped the words
		// (or up to seven at the end of the input).
		for i < n && jsonStringPlain[b[i]] {
			i++
		}
		if i >= n {
			return -1 // unterminated
		}
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= n {
				return -1
			}
			if c := b[i+1]; c == 'u' {
				if i+6 > n || !jsonHex[b[i+2]] || !jsonHex[b[i+3]] || !jsonHex[b[i+4]] || !jsonHex[b[i+5]] {
					return -1
				}
				i += 6
			} else if jsonEscape[c] {
				i += 2
			} else {
				return -1
			}
		default:
			return -1 // a control byte
		}
	}
}

// scanJSONNumber checks a number starting at b[i] and returns the index just
// after it, or -1. The grammar is RFC 8259's, as encoding/json reads it:
// an optional '-', then 0 or a digit string without a leading zero, then an
// optional fraction '.' digits, then an optional exponent [eE][+-]?digits.
// No '+' sign, no leading '.', no trailing '.'. What follows the number is
// the caller's to check, so "01" is refused there, not here.
func scanJSONNumber(b []byte, i int) int {
	n := len(b)
	if b[i] == '-' {
		i++
		if i >= n {
			return -1
		}
	}
	switch c := b[i]; {
	case c == '0':
		i++
	case '1' <= c && c <= '9':
		i++
		for i < n && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return -1
	}
	if i < n && b[i] == '.' {
		i++
		if i >= n || b[i] < '0' || b[i] > '9' {
			return -1
		}
		for i < n && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	if i < n && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < n && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= n || b[i] < '0' || b[i] > '9' {
			return -1
		}
		for i < n && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	}
	return i
}
