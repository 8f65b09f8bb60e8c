// Package jsonscan is the byte-level JSON cursor that the hand-written fast
// paths of the append body (package api, which decodes what clients send)
// and of the append answer (package client, which decodes what the node
// replies) share.
//
// It reads only plain JSON: strings without escapes, control bytes or
// invalid UTF-8, and integers without sign, fraction, exponent or leading
// zero (SkipValue alone passes over any value, unvalidated). Whenever the
// input is anything else, or is malformed or truncated, a method reports
// false instead of guessing, and its caller then falls back to
// encoding/json, which stays the reference for every value and every
// error. After a false the offset and any value returned with it are
// unspecified (except after Consume, which then skipped only whitespace):
// callers give up on the input rather than resume.
package jsonscan

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// Scanner reads the JSON of B from offset I. Every method but SkipValue
// skips leading whitespace; SkipValue starts at I.
// Values returned as []byte alias B.
type Scanner struct {
	B []byte
	I int
}

// Space skips JSON whitespace.
func (p *Scanner) Space() {
	for p.I < len(p.B) {
		switch p.B[p.I] {
		case ' ', '\t', '\n', '\r':
			p.I++
		default:
			return
		}
	}
}

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
// UTF-8 and returns its contents (which are then exactly what encoding/json
// decodes).
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

// skipString moves past a string, escapes included, starting at its quote.
func (p *Scanner) skipString() bool {
	for j := p.I + 1; j < len(p.B); j++ {
		switch p.B[j] {
		case '\\':
			j++
		case '"':
			p.I = j + 1
			return true
		}
	}
	return false
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
