// Package pebblelog is the write path of events.Log on Pebble: one global
// ordered log, the stream and event-id indexes, the RFC 6962 Merkle tree
// and signed checkpoints, all in one Pebble database, with group commit;
// and the snapshots and backups that copy it. What the bytes on disk are is
// not said here but in events/pebblelog/layout (docs/FORMAT.md as code);
// reading a stopped store and finding what is damaged in it is
// events/pebblelog/inspect's, which never imports this package.
//
// # Parts
//
//	store.go        Config, Store, Open (lock, settle a restore, check, open
//	                Pebble, replay the log, rebuild the sequencer state),
//	                Close; publish (the acknowledged head) and fail
//	commit.go       group commit: Append, the committer (sequencer and
//	                syncer goroutines), ApplyReplicated (raft's FSM apply)
//	apply.go        one batch in memory: conditions checked, events encoded,
//	                indexes and tree nodes written, state installed
//	wal.go          writeAheadLog, the one interface both logs implement,
//	                and openLog, which opens the one Config.WAL selects
//	wal_greffe.go   the store's own write-ahead log (internal/wal) and its
//	                drop loop; the default
//	wal_pebble.go   Pebble's write-ahead log (Config.WAL = WALPebble)
//	read.go         ReadAll, ReadStream, ReadRaw, ScanRaw, EventByID,
//	                Subscribe: reads never see past the acknowledged head
//	streams.go      ListStreams over the stream index
//	idfilter*.go    the Bloom filter of event ids the sequencer asks first
//	tree.go         nodes, tiles and proofs read from the stored tree, with
//	                its cache (nodeCache)
//	checkpoints.go  signing the head (checkpointLoop) and reading the signed
//	                checkpoints
//	snapshot.go     raft snapshots: the replicated key spaces as a stream,
//	                and Restore, which stages one and swaps it in
//	restorecheck.go the checks a staged restore passes before the swap
//	folder.go       the store's folder and its siblings (lock, restore,
//	                old, failed-restore), and settling what a crash left
//	backup.go       Backup: a consistent copy of every key space
//	metrics.go      latency and batch-size histograms, disk usage
//
// # Commit modes
//
// Every Pebble batch of the ledger reaches the disk through the one
// writeAheadLog (wal.go), whichever log Config.WAL selects; only where the
// store opens (openPebble, openLog) is Config.WAL read. A batch is
// committed one of four ways (commit.go):
//
//   - pipelined (committer.sealLocal, the syncer): the sequencer seals a
//     batch, logs it, starts its sync and applies it while the previous
//     one syncs; the syncer answers once the sync covers it. This is how
//     concurrent writers are served.
//   - synchronous on the sequencer (commitNow), and on the writer's own
//     goroutine (tryDirect): a lone writer (nothing queued or in flight,
//     the last batch held one append) waits for one fsync and no hand-off;
//     the figures are beside each.
//   - replicated (ApplyReplicated): raft's committed entry is applied with
//     its raft index and not synced, raft's log being its write-ahead log.
//
// Whatever the mode, an append is acknowledged only after the sync that
// covers its batch, in position order, and a checkpoint is signed only
// over acknowledged events (one ordered log).
//
// # Locks and what each guards
//
// Order, outermost first: the folder's lock; Store.ckpt or committer.mu
// (never both); dbMu; greffeLog.mu; internal/wal.Log's. Store.mu and
// nodeCache.mu are leaves: nothing is taken while either is held.
//
//   - the folder's lock (<dir>.lock, folder.go): the folder, against a
//     second process, from Open to Close and across restores.
//   - Store.dbMu (RWMutex): the Pebble handle and the log, against the swap
//     a Restore makes (held exclusively there and in Close); every read,
//     commit and apply holds it for reading.
//   - committer.mu: forming and sealing local batches, so that one batch
//     is formed at a time (the sequencer, or a lone writer's tryDirect);
//     it also guards lastReqs and stopped.
//   - greffeLog.mu: "append to the log, then apply to Pebble" as one step,
//     so that Pebble applies batches in the log's order.
//   - Store.seq: no lock; owned by the single applier (the sequencer, or
//     the raft FSM), see Store's invariants.
//   - Store.mu: the head's change channel and the failure that makes the
//     store refuse writes.
//   - Store.ckpt: signing and storing a checkpoint, one at a time (taken
//     before dbMu: the signed note is committed under it).
//   - nodeCache.mu: the tree's cached nodes, tiles and edge, and the Pebble
//     handle they were read from (a restore drops them).
//   - internal/wal.Log's own locks (syncMu, mu, fileMu): its package doc.
//
// The acknowledged head (durable), the signers and the last checkpoint are
// atomics, read without a lock.
//
// It may import events, layout, inspect (Open runs its damage checks
// before Pebble opens a folder read-write), its own write-ahead log
// (internal/wal), the one Pebble logger (internal/pebbleslog) and Pebble;
// never raft, HTTP or any other greffe package (the replicator drives it
// through Proposer and ApplyReplicated) (internal/lint).
package pebblelog
