// Package layout is the ledger store's on-disk format as code: the key
// spaces and their keys, the values stored under them (stream runs,
// positions, the sequencer state, the write-ahead log's seq), the tile
// geometry of the stored tree, the format strings a store records and the
// ones it upgrades, and which keys a raft snapshot carries. docs/FORMAT.md
// describes the same format for people; this package is where code reads
// it, so that the store (events/pebblelog), its read-only inspection
// (events/pebblelog/inspect) and the auditor (audit/offline) agree by
// construction.
//
// Everything here is a pure function of its arguments, with no state and
// no I/O. Decoders return ok false, or an error saying what is wrong with
// a value of the wrong shape; the caller marks it as corruption
// (events.ErrCorrupt). Keys and values never change meaning: a new format
// adds keys or values and a new format string (StoreFormat), and the store
// keeps reading the earlier ones.
//
// It imports the standard library only (internal/lint).
package layout
