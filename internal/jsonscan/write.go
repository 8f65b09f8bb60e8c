package jsonscan

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Writing helpers of the hand encoders: the append answer (package api),
// the append request (package client) and the event's JSON (package
// events), each of which writes the bytes of a reference library.
//
// Two string forms exist because two references do. AppendMarshalString
// writes what encoding/json's json.Marshal writes (HTML-sensitive bytes
// and U+2028, U+2029 escaped), the form of every body api answers through
// json.Encoder and client sends through json.Marshal, so the hand encoders
// stay byte-identical to them. The event's own JSON (events.Event.AppendJSON)
// writes the stored strings in RFC 8785's minimal form, without HTML
// escaping, and keeps encoding/json/v2's quoting (jsontext.AppendQuote) in
// package events: this package imports the standard library only.

// AppendMarshalString appends s quoted as json.Marshal quotes it: s itself
// between quotes when json.Marshal escapes nothing in it (the usual case:
// no allocation), else json.Marshal's own bytes.
func AppendMarshalString(b []byte, s string) []byte {
	if !marshalsAsIs(s) {
		m, _ := json.Marshal(s) // never fails for a string
		return append(b, m...)
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// marshalsAsIs reports whether json.Marshal writes s as "s": valid UTF-8
// (invalid bytes are replaced) without a control byte, '"', '\\', an
// HTML-sensitive byte ('<', '>', '&': escaped by default) or U+2028 and
// U+2029 (escaped for JavaScript).
func marshalsAsIs(s string) bool {
	ascii := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			ascii = false
			continue
		}
		if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return ascii || utf8.ValidString(s) && !strings.ContainsRune(s, '\u2028') && !strings.ContainsRune(s, '\u2029')
}

// AppendUUID appends the canonical form of a UUID (github.com/google/uuid's
// String and MarshalText: xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, lower-case
// hex), without the string those allocate. A uuid.UUID is a [16]byte.
func AppendUUID(b []byte, id [16]byte) []byte {
	var t [36]byte
	hex.Encode(t[0:8], id[0:4])
	t[8] = '-'
	hex.Encode(t[9:13], id[4:6])
	t[13] = '-'
	hex.Encode(t[14:18], id[6:8])
	t[18] = '-'
	hex.Encode(t[19:23], id[8:10])
	t[23] = '-'
	hex.Encode(t[24:], id[10:])
	return append(b, t[:]...)
}
