// Package inspect reads a stopped ledger store read-only and finds what is
// damaged in it. It is what the offline auditor (audit/offline), the
// backup tools and the CLI's key and damage commands use to look at a data
// folder without running the store that wrote it:
//
//   - Inspector (Open): the key spaces of the layout, exactly as stored,
//     with the write-ahead log's records overlaid in memory when the store
//     was not stopped cleanly; no check of the store's own is made, so that
//     a damaged store can still be read and described.
//   - The damage checks, each a *DamageError naming the file and, where it
//     can, the offset: CheckManifest (the MANIFEST Pebble's reader passes
//     over in silence), CheckWAL (the store's write-ahead log, read as the
//     store's open will), CheckFiles (every table and blob file against its
//     checksums). The store's Open runs the first two before Pebble opens a
//     folder read-write, which would change what the damage left.
//   - ReadLedgerState: the identity and head a backup copy records.
//   - The folder-in-use errors (ErrLocked, InUse) the store shares.
//
// It writes nothing, ever: Pebble is opened read-only, and the log is read
// with the wal package's readers.
//
// It may import events, events/pebblelog/layout, the write-ahead log's
// reader (events/pebblelog/internal/wal), the one Pebble logger
// (internal/pebbleslog) and Pebble; never the write path
// (events/pebblelog), so that an auditor links no code that writes a
// ledger (internal/lint).
package inspect
