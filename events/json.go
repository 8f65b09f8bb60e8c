package events

import "github.com/greffe/greffe/internal/jsonscan"

// The log's JSON rule for data and metadata lives in the module's one
// byte-level JSON toolkit (internal/jsonscan), beside the cursor the edge
// and the client decode with: ValidJSON is the log's name for it.

// ValidJSON reports whether b is exactly one JSON value, surrounded by
// optional whitespace, whose strings are Unicode text: what the log stores
// as data and metadata. It is jsonscan.Valid, whose comment gives the
// grammar, why strings must be text, and why it is hand-written.
func ValidJSON(b []byte) bool { return jsonscan.Valid(b) }
