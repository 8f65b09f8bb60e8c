// Package jsontest holds the one seed corpus of the module's JSON fuzz
// targets (Seeds, Strings) and the grammar's corners with whether each is
// JSON text (Cases), for the tests of the byte-level JSON toolkit
// (internal/jsonscan) and of the hand codecs built on it (api, client,
// events, projections, commands). Tests only import it. It imports the
// standard library only.
package jsontest
