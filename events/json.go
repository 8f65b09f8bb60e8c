package events

import "github.com/greffe/greffe/internal/jsonscan"

// The log's JSON rule for data and metadata lives in the module's one
// byte-level JSON toolkit (internal/jsonscan), beside the cursor the edge
// and the client decode with: these names are the log's view of it.

// ValidJSON reports whether b is exactly one JSON value, surrounded by
// optional whitespace, whose strings are Unicode text: what the log stores
// as data and metadata. It is jsonscan.Valid, whose comment gives the
// grammar, why strings must be text, and why it is hand-written.
func ValidJSON(b []byte) bool { return jsonscan.Valid(b) }

// badTextOffset is jsonscan.BadTextOffset: where in b (JSON that json.Valid
// accepts) the first string byte that is not text is, or -1.
func badTextOffset(b []byte) int { return jsonscan.BadTextOffset(b) }

// skipJSONSpace is jsonscan.SkipSpace: the index of the first byte at or
// after i that is not JSON whitespace, or len(b).
func skipJSONSpace(b []byte, i int) int { return jsonscan.SkipSpace(b, i) }
