// Package jsonscan is greffe's one byte-level JSON toolkit: the
// hand-written JSON code of the module, each piece kept because it was
// measured faster than the library beside it, in one place so that each
// rule is written once and one seed corpus (package jsontest) feeds the
// fuzz targets of every codec built on it.
// It imports the standard library only.
//
// It holds:
//
//   - the validator (Valid, valid.go), the log's rule for data and
//     metadata (events.ValidJSON): JSON whose strings are Unicode text,
//     several times faster than json.Valid; BadTextOffset words its
//     refusals;
//   - the cursor (Scanner, scanner.go), for the places where a
//     reflection-based decoder costs too much and the input has a known
//     shape;
//   - the writing helpers the hand encoders share (write.go): a string
//     quoted as json.Marshal quotes it (AppendMarshalString) and a UUID in
//     its canonical form (AppendUUID).
//
// The cursor serves:
//
//   - the hand-written fast paths of the append body (package api, which
//     decodes what clients send) and of the append answer (package client,
//     which decodes what the node replies): strict, they read only plain
//     JSON, and decline anything else, which their caller then hands to
//     the reference decoder (events.DecodeJSON, encoding/json/v2, on the
//     node; encoding/json in the client);
//   - the read models (package projections), which pick a few members out
//     of stored event data that the log already validated: lenient, they
//     never fail loudly.
//
// The strict methods read only plain JSON: strings without escapes,
// control bytes or invalid UTF-8, and integers without sign, fraction,
// exponent or leading zero (SkipValue alone passes over any value,
// unvalidated). Whenever the input is anything else, or is malformed or
// truncated, a method reports false instead of guessing. After a false the
// offset and any value returned with it are unspecified (except after
// Consume, which then skipped only whitespace): callers give up on the
// input rather than resume.
//
// The lenient methods (Members, Elements) read valid JSON, never read out
// of bounds on anything else, and stop at what they cannot make sense of.
package jsonscan
