package jsonscan

import (
	"encoding/binary"
	"unicode/utf8"
)

// JSON validation on the append path (events.ValidJSON is this Valid: the
// log's rule for data and metadata).
//
// Every event's data and metadata is checked to be JSON before anything is
// written, so the check runs over every byte of every append. The standard
// library's json.Valid drives a byte-at-a-time state machine through a
// function pointer (about 200 MB/s) and showed up as 5-10 % of CPU in the
// append benchmarks. Valid accepts the same grammar, but as a plain
// iterative parser that skips the ordinary ASCII bytes of strings, where
// most payload bytes are, eight at a time; unlike json.Valid it also
// requires the strings to be Unicode text (see Valid). Measured
// (BenchmarkValidJSON, go test ./internal/jsonscan -run '^$' -bench
// ValidJSON -count 3, 2 shared cores, issue #21): a 256-byte object in
// 106-113 ns (2.3-2.4 GB/s) against json.Valid's 1.09-1.12 µs (~230 MB/s),
// the realistic 2 KB document in 2.4-2.7 µs against 8.9-9.3 µs.

// maxJSONDepth is encoding/json's maxNestingDepth: json.Valid refuses input
// with more than this many arrays and objects open at once, and so must we.
const maxJSONDepth = 10000

// Valid reports whether b is exactly one valid JSON value, surrounded by
// optional whitespace, whose strings are Unicode text.
//
// It is on every append's path (events' isJSONObject), hence the hand-written
// parser. Its grammar is that of encoding/json's scanner: only bytes below
// 0x20 are refused raw inside strings, whitespace is space, \t, \r and \n,
// and nesting deeper than 10000 arrays and objects is refused. Unlike
// json.Valid, which accepts any byte above 0x7f, it also refuses what is
// not Unicode text inside a string (keys included), for two reasons:
//   - invalid UTF-8 (stray or truncated sequences, overlong forms, encoded
//     surrogates, code points above U+10FFFF): RFC 8259 §8.1 says JSON
//     exchanged between systems is UTF-8;
//   - a \u escape of a UTF-16 surrogate that is not one half of a high-low
//     pair ("\ud800"): RFC 8259 §8.2 leaves what a reader does with it
//     unpredictable and I-JSON (RFC 7493 §2.1) forbids it.
//
// Both are refused rather than stored because every reader repairs them its
// own way: encoding/json decodes each to U+FFFD, so two different stored
// names would read back as one, and the bytes a verifier hashes would not
// mean what a reader shows. So json.Valid(b) && !Valid(b) means exactly
// that b is JSON with a string that is not text (events' jsonRefusal
// answers invalid_utf8 for it). It does not allocate.
func Valid(b []byte) bool {
	// inObject holds one bit per open container, set for an object and
	// clear for an array: 1.25 KiB on the goroutine stack, which replaces
	// the recursion (and the stack growth) a descent parser would need.
	var inObject [(maxJSONDepth + 63) / 64]uint64
	depth := 0
	n := len(b)
	i := 0
	for {
		// A value starts here.
		i = SkipSpace(b, i)
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
			i = SkipSpace(b, i+1)
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
			i = SkipSpace(b, i+1)
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
			i = SkipSpace(b, i)
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
					if i = scanJSONKey(b, SkipSpace(b, i)); i < 0 {
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

// SkipSpace returns the index of the first byte at or after i that is
// not JSON whitespace (space, \t, \r, \n), or len(b).
func SkipSpace(b []byte, i int) int {
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
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return i + 1
}

// jsonStringPlain marks the bytes that stand for themselves inside a JSON
// string: the ASCII bytes but '"', '\\' and the control bytes below 0x20.
// Bytes >= 0x80 start UTF-8 sequences, which scanJSONString decodes.
var jsonStringPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
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
// This is where validation spends its time, so runs of plain ASCII bytes
// are skipped eight at a time: a word is skipped when none of its bytes is
// '"', '\\', below 0x20 or above 0x7f, tested with the classic "has a byte
// less than n" and "has a zero byte" bit tricks, which are exact as yes/no
// answers, and the words' top bits. A byte above 0x7f leaves the word loop
// for utf8.DecodeRune, so text in other scripts costs a decode per
// character; payloads are mostly ASCII keys and values.
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
			special |= x // >= 0x80
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
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= n {
				return -1
			}
			if c := b[i+1]; c == 'u' {
				r, ok := hex4(b, i+2)
				if !ok {
					return -1
				}
				i += 6
				switch {
				case 0xdc00 <= r && r <= 0xdfff:
					return -1 // a low surrogate without its high half
				case 0xd800 <= r && r <= 0xdbff:
					// Only a low surrogate may follow a high one.
					if i+6 > n || b[i] != '\\' || b[i+1] != 'u' {
						return -1
					}
					if lo, ok := hex4(b, i+2); !ok || lo < 0xdc00 || lo > 0xdfff {
						return -1
					}
					i += 6
				}
			} else if jsonEscape[c] {
				i += 2
			} else {
				return -1
			}
		case c >= utf8.RuneSelf:
			// utf8.DecodeRune refuses exactly what is not UTF-8 (RFC 3629):
			// stray and truncated bytes, overlong forms, surrogates, above
			// U+10FFFF; each gives (RuneError, 1). A real U+FFFD is 3 bytes.
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return -1
			}
			i += size
		default:
			return -1 // a control byte
		}
	}
}

// hex4 decodes the four hexadecimal digits of a \u escape at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		if !jsonHex[c] {
			return 0, false
		}
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r, true
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

// BadTextOffset returns the offset in b (JSON that json.Valid accepts) of
// the first string byte that makes Valid refuse it: a byte that is not
// UTF-8, or the backslash of an unpaired surrogate escape; -1 if none. It
// only words a refusal, so it is plain rather than fast.
func BadTextOffset(b []byte) int {
	inString := false
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			inString = !inString
			i++
		case !inString:
			i++ // outside strings, valid JSON is ASCII
		case c == '\\' && b[i+1] == 'u':
			r, _ := hex4(b, i+2)
			switch {
			case 0xdc00 <= r && r <= 0xdfff:
				return i
			case 0xd800 <= r && r <= 0xdbff:
				if i+12 > len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
					return i
				}
				if lo, _ := hex4(b, i+8); lo < 0xdc00 || lo > 0xdfff {
					return i
				}
				i += 12
			default:
				i += 6
			}
		case c == '\\':
			i += 2 // \" included: it does not end the string
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return i
			}
			i += size
		default:
			i++
		}
	}
	return -1
}
