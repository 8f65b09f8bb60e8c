package replicator

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc64"
	"io"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"

	"github.com/greffe/greffe/events/pebblelog/inspect"
)

// SnapshotStore is raft's snapshot store on a vfs.FS, in place of
// hashicorp's FileSnapshotStore, which writes with package os directly: a
// test cannot give it a file system that loses what was not synced, so a
// power loss of a member could not be simulated whole.
//
// # Layout
//
// The layout and the metadata are FileSnapshotStore's, so that a data
// folder written by it is read unchanged:
//
//	<dir>/<term>-<index>-<unix ms>/meta.json   raft.SnapshotMeta, Size and a CRC-64 (ECMA) of state.bin, as JSON
//	<dir>/<term>-<index>-<unix ms>/state.bin   what the FSM persisted
//	<dir>/<term>-<index>-<unix ms>/received    (empty) a snapshot received, which the ledger has not taken
//	<dir>/<name>.tmp/                          a snapshot being written; removed at open
//	<dir>/<name>.reap/                         a snapshot being removed; removed at open
//
// # Durability
//
// A snapshot is in place, under its final name, only once all of it is on
// the disk. Close (1) fsyncs state.bin, (2) writes and fsyncs meta.json,
// (3) fsyncs the .tmp folder, so that the names of both files are durable
// inside it, (4) renames the folder to its final name and (5) fsyncs dir,
// so that the rename is. Only then is the snapshot reported taken, and only
// then does raft drop the log entries it covers. FileSnapshotStore skips
// step 3: after a power loss its folder could be in place and empty, and it
// would skip it and fall back to an older snapshot than the log needs.
// Older snapshots are reaped beyond the retained count by renaming them to
// .reap (then fsyncing dir) before removing them, so that a crash never
// leaves a half-removed snapshot under a name List would offer.
//
// # Damage
//
// Since a snapshot is only ever visible whole, one that does not read back
// is damage, not the trace of a crash: List reports a meta.json that does
// not decode or does not match its folder, or a state.bin of another size,
// and Open a state.bin whose CRC does not match, as *inspect.DamageError
// naming the file (it matches events.ErrCorrupt). FileSnapshotStore skips
// such a snapshot with a warning; falling back to an older one silently
// could leave raft without the log entries between the two.
//
// # Received snapshots
//
// Raft puts a snapshot it receives (InstallSnapshot) in the store before
// the FSM restores it, and the ledger may refuse it (issue #20: a forged
// history). A sink that no FSMSnapshot.Persist marked local (markLocal) is
// such a received snapshot: once closed it is in place, but hidden, until
// the FSM says what the ledger did with it (refused.go): accept makes it a
// snapshot like the others, discard removes it. Since List does not offer
// it, only raft's restore of that install opens it (by the sink's id), so
// the hidden snapshot last opened is the one the FSM is restoring
// (takeReceived). While hidden, List does not
// offer it (raft sends the newest listed snapshot to a follower, and takes
// its applied index from it at a start), reap does not count it (it would
// reap the node's own snapshot in its favour), and stored is not told its
// configuration (it would count as committed). Only this process hides it:
// after a crash it is listed, and its folder holds the file received
// (written with it, removed once the ledger took it), so that
// catchUpFromSnapshot has the ledger check it before raft starts, whether
// or not it is ahead of the ledger.
//
// Before a received snapshot is put in place at all, Close asks vet,
// which reads its state, whether the raft index and term it is named at
// are ones its content and this node's raft state allow (snapindex.go);
// when they are not, nothing is put in place and Close fails, so that raft
// answers the InstallSnapshot with the error and records nothing.
//
// Safe for concurrent use (raft creates snapshots from its snapshot
// goroutine and installs them from its main one).
type SnapshotStore struct {
	fs     vfs.FS
	dir    string
	retain int
	log    *slog.Logger

	// mu serialises naming new snapshots and reaping old ones, and guards
	// restoring and hidden.
	mu sync.Mutex
	// restoring is the hidden snapshot last opened, not yet taken by the
	// FSM: the one raft is restoring (nothing else opens a hidden one,
	// since List does not offer it); nil when none.
	restoring *raft.SnapshotMeta
	// hidden holds the ids of the snapshots received that the ledger has
	// not taken.
	hidden map[string]struct{}
	// vet, when set, checks a received snapshot, its metadata and a
	// reader of its state, before Close puts it in place (snapindex.go);
	// an error refuses it. Set before raft starts.
	vet func(raft.SnapshotMeta, io.Reader) error
	// stored, when set, is told the metadata of every snapshot put in
	// place and taken (this node's own, or installed from the leader once
	// the ledger took it): its configuration is the committed one at its
	// index (removal.go). Set before raft starts.
	stored func(raft.SnapshotMeta)
}

var _ raft.SnapshotStore = (*SnapshotStore)(nil)

const (
	snapMetaFile  = "meta.json"
	snapStateFile = "state.bin"
	// snapReceivedFile marks a received snapshot the ledger has not taken.
	snapReceivedFile = "received"
	snapTmpSuffix    = ".tmp"
	// snapReapSuffix marks a snapshot being removed.
	snapReapSuffix = ".reap"
)

// snapshotCRC is FileSnapshotStore's checksum of state.bin.
var snapshotCRC = crc64.MakeTable(crc64.ECMA)

// snapshotMeta is what meta.json holds: FileSnapshotStore's
// fileSnapshotMeta, field for field.
type snapshotMeta struct {
	raft.SnapshotMeta
	CRC []byte
}

// OpenSnapshotStore opens or creates the store in dir on fs (nil: the
// operating system's), keeping the newest retain snapshots (at least 1).
// It removes what a crash left of a snapshot being written or reaped.
// logger receives the store's logs (nil: discarded).
func OpenSnapshotStore(dir string, fs vfs.FS, retain int, logger *slog.Logger) (*SnapshotStore, error) {
	if retain < 1 {
		return nil, fmt.Errorf("raft snapshots: retain %d, must keep at least one", retain)
	}
	if fs == nil {
		fs = vfs.Default
	}
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &SnapshotStore{fs: fs, dir: dir, retain: retain, log: logger, hidden: map[string]struct{}{}}
	if err := mkdirAllSynced(fs, dir); err != nil {
		return nil, fmt.Errorf("raft snapshots %s: %w", dir, err)
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("raft snapshots %s: %w", dir, err)
	}
	removed := false
	for _, name := range names {
		if !strings.HasSuffix(name, snapTmpSuffix) && !strings.HasSuffix(name, snapReapSuffix) {
			continue
		}
		logger.Info("removing an unfinished raft snapshot", "name", name)
		if err := fs.RemoveAll(fs.PathJoin(dir, name)); err != nil {
			return nil, fmt.Errorf("raft snapshots: remove %s: %w", name, err)
		}
		removed = true
	}
	if removed {
		if err := syncDir(fs, dir); err != nil {
			return nil, fmt.Errorf("raft snapshots %s: %w", dir, err)
		}
	}
	return s, nil
}

// snapName is a snapshot's folder name: term, index and a time that keeps
// names unique, FileSnapshotStore's.
type snapName struct {
	term, index uint64
	ms          int64
}

func (n snapName) String() string { return fmt.Sprintf("%d-%d-%d", n.term, n.index, n.ms) }

// parseSnapName parses a folder name; ok is false for another name.
func parseSnapName(s string) (n snapName, ok bool) {
	parts := strings.Split(s, "-")
	if len(parts) != 3 {
		return n, false
	}
	var err1, err2, err3 error
	n.term, err1 = strconv.ParseUint(parts[0], 10, 64)
	n.index, err2 = strconv.ParseUint(parts[1], 10, 64)
	n.ms, err3 = strconv.ParseInt(parts[2], 10, 64)
	return n, err1 == nil && err2 == nil && err3 == nil && n.String() == s
}

// newer orders names newest first: by term, index, then time.
func newer(a, b snapName) int {
	switch {
	case a.term != b.term:
		return cmpDesc(a.term, b.term)
	case a.index != b.index:
		return cmpDesc(a.index, b.index)
	}
	return cmpDesc(a.ms, b.ms)
}

func cmpDesc[T uint64 | int64](a, b T) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// Create starts a snapshot. Only version 1 (raft.SnapshotVersionMax) is
// supported. The snapshot is not visible to List or Open until the sink is
// closed without error.
func (s *SnapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, _ raft.Transport) (raft.SnapshotSink, error) {
	if version != 1 {
		return nil, fmt.Errorf("raft snapshots: unsupported snapshot version %d", version)
	}
	s.mu.Lock()
	name := snapName{term: term, index: index, ms: time.Now().UnixMilli()}
	// The time only keeps names apart; two snapshots of one index within a
	// millisecond (an install right after a local snapshot) must not share
	// a folder.
	for s.exists(name.String()) || s.exists(name.String()+snapTmpSuffix) {
		name.ms++
	}
	tmp := s.fs.PathJoin(s.dir, name.String()+snapTmpSuffix)
	err := s.fs.MkdirAll(tmp, 0o700)
	s.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("raft snapshots: create %s: %w", tmp, err)
	}
	f, err := s.fs.Create(s.fs.PathJoin(tmp, snapStateFile), vfs.WriteCategoryUnspecified)
	if err != nil {
		_ = s.fs.RemoveAll(tmp)
		return nil, fmt.Errorf("raft snapshots: create %s: %w", tmp, err)
	}
	sk := &snapshotSink{store: s, name: name, tmp: tmp, file: f, crc: crc64.New(snapshotCRC), buf: make([]byte, 0, snapBufSize),
		// Peers, the configuration's encoding before version 1, stays
		// empty: raft reads it from version 0 snapshots only.
		meta: snapshotMeta{SnapshotMeta: raft.SnapshotMeta{Version: version, ID: name.String(), Index: index, Term: term,
			Configuration: configuration, ConfigurationIndex: configurationIndex}}}
	return sk, nil
}

func (s *SnapshotStore) exists(name string) bool {
	_, err := s.fs.Stat(s.fs.PathJoin(s.dir, name))
	return err == nil
}

// List returns the newest retained snapshots, newest first (raft restores
// the first), without the received ones the ledger has not taken. A
// snapshot whose metadata is damaged is an error, never skipped.
func (s *SnapshotStore) List() ([]*raft.SnapshotMeta, error) { return s.newest(s.retain) }

// newest returns the newest n snapshots in place, as List.
func (s *SnapshotStore) newest(n int) ([]*raft.SnapshotMeta, error) {
	// Under mu: a snapshot being reaped is not damaged.
	s.mu.Lock()
	defer s.mu.Unlock()
	names, err := s.names()
	if err != nil {
		return nil, err
	}
	var out []*raft.SnapshotMeta
	for _, n := range names[:min(len(names), n)] {
		m, err := s.readMeta(n.String())
		if err != nil {
			return nil, err
		}
		out = append(out, &m.SnapshotMeta)
	}
	return out, nil
}

// names returns the names of every snapshot in place, newest first, but
// the hidden ones. REQUIRES: s.mu held.
func (s *SnapshotStore) names() ([]snapName, error) {
	entries, err := s.fs.List(s.dir)
	if err != nil {
		return nil, fmt.Errorf("raft snapshots %s: %w", s.dir, err)
	}
	var out []snapName
	for _, e := range entries {
		if strings.HasSuffix(e, snapTmpSuffix) || strings.HasSuffix(e, snapReapSuffix) {
			continue
		}
		path := s.fs.PathJoin(s.dir, e)
		st, err := s.fs.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("raft snapshots: %w", err)
		}
		if !st.IsDir() {
			continue // not a snapshot (FileSnapshotStore's permission test file)
		}
		n, ok := parseSnapName(e)
		if !ok {
			return nil, &inspect.DamageError{File: path, Offset: -1, Err: errors.New("a folder in the raft snapshots whose name is not term-index-time")}
		}
		if _, hide := s.hidden[e]; !hide {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, newer)
	return out, nil
}

// readMeta reads and checks a snapshot's meta.json against its folder name
// and its state.bin's size.
func (s *SnapshotStore) readMeta(id string) (*snapshotMeta, error) {
	n, ok := parseSnapName(id)
	if !ok {
		return nil, fmt.Errorf("raft snapshots: no snapshot %q", id)
	}
	if _, err := s.fs.Stat(s.fs.PathJoin(s.dir, id)); err != nil {
		return nil, fmt.Errorf("raft snapshots: no snapshot %q: %w", id, err)
	}
	path := s.fs.PathJoin(s.dir, id, snapMetaFile)
	f, err := s.fs.Open(path)
	if err != nil {
		return nil, &inspect.DamageError{File: path, Offset: -1, Err: err}
	}
	defer f.Close()
	m := &snapshotMeta{}
	if err := json.NewDecoder(bufio.NewReader(f)).Decode(m); err != nil {
		return nil, &inspect.DamageError{File: path, Offset: -1, Err: fmt.Errorf("decode: %w", err)}
	}
	if m.ID != id || m.Index != n.index || m.Term != n.term {
		return nil, &inspect.DamageError{File: path, Offset: -1,
			Err: fmt.Errorf("describes snapshot %q (term %d, index %d), not its folder's", m.ID, m.Term, m.Index)}
	}
	if m.Version < raft.SnapshotVersionMin || m.Version > raft.SnapshotVersionMax {
		return nil, &inspect.DamageError{File: path, Offset: -1, Err: fmt.Errorf("snapshot version %d", m.Version)}
	}
	state := s.fs.PathJoin(s.dir, id, snapStateFile)
	st, err := s.fs.Stat(state)
	if err != nil {
		return nil, &inspect.DamageError{File: state, Offset: -1, Err: err}
	}
	if st.Size() != m.Size {
		return nil, &inspect.DamageError{File: state, Offset: -1, Err: fmt.Errorf("%d bytes, its meta.json says %d", st.Size(), m.Size)}
	}
	return m, nil
}

// Open checks the snapshot's CRC and returns its metadata and a reader of
// its state, which the caller closes. Damage is a *inspect.DamageError.
// Opening a hidden snapshot makes it the one takeReceived returns.
func (s *SnapshotStore) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	m, err := s.readMeta(id)
	if err != nil {
		return nil, nil, err
	}
	path := s.fs.PathJoin(s.dir, id, snapStateFile)
	f, err := s.fs.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("raft snapshot %s: %w", id, err)
	}
	// The whole file is read once to check it before raft streams it into
	// the FSM (or to a follower): a restore that fails halfway costs more
	// than a read, and FileSnapshotStore does the same.
	h := crc64.New(snapshotCRC)
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, m.Size)); err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("raft snapshot %s: %w", id, err)
	}
	if got := h.Sum(nil); !bytes.Equal(got, m.CRC) {
		_ = f.Close()
		return nil, nil, &inspect.DamageError{File: path, Offset: -1, Err: fmt.Errorf("CRC-64 %x, its meta.json says %x", got, m.CRC)}
	}
	s.mu.Lock()
	if _, hidden := s.hidden[id]; hidden {
		meta := m.SnapshotMeta
		s.restoring = &meta
	}
	s.mu.Unlock()
	return &m.SnapshotMeta, &snapshotReader{Reader: bufio.NewReaderSize(io.NewSectionReader(f, 0, m.Size), 256<<10), f: f}, nil
}

type snapshotReader struct {
	*bufio.Reader
	f vfs.File
}

func (r *snapshotReader) Close() error { return r.f.Close() }

// reap removes the snapshots beyond the retained count.
func (s *SnapshotStore) reap() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	names, err := s.names()
	if err != nil || len(names) <= s.retain {
		return err
	}
	old := names[s.retain:]
	for _, n := range old {
		from := s.fs.PathJoin(s.dir, n.String())
		if err := s.fs.Rename(from, from+snapReapSuffix); err != nil {
			return fmt.Errorf("raft snapshots: reap %s: %w", n, err)
		}
	}
	if err := syncDir(s.fs, s.dir); err != nil {
		return fmt.Errorf("raft snapshots: reap: %w", err)
	}
	for _, n := range old {
		if err := s.fs.RemoveAll(s.fs.PathJoin(s.dir, n.String()+snapReapSuffix)); err != nil {
			return fmt.Errorf("raft snapshots: reap %s: %w", n, err)
		}
		s.log.Debug("reaped raft snapshot", "id", n.String())
	}
	return nil
}

// takeReceived returns the metadata of the received snapshot raft opened
// to restore, and forgets it (it stays hidden until accept or discard);
// ok is false when there is none. The FSM calls it as it restores.
func (s *SnapshotStore) takeReceived() (m raft.SnapshotMeta, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.restoring == nil {
		return m, false
	}
	m, s.restoring = *s.restoring, nil
	return m, true
}

// accept makes a received snapshot the ledger took one like the others:
// listed, no longer marked received, its configuration told to stored, and
// the older ones reaped. It is listed even when the mark cannot be
// removed (the next start has the ledger check it again).
func (s *SnapshotStore) accept(m raft.SnapshotMeta) error {
	s.mu.Lock()
	delete(s.hidden, m.ID)
	s.mu.Unlock()
	err := s.markTaken(m.ID)
	if s.stored != nil {
		s.stored(m)
	}
	return errors.Join(err, s.reap())
}

// received reports whether the snapshot id is one received from a leader
// that the ledger has not taken (its folder holds the file received).
func (s *SnapshotStore) received(id string) bool {
	_, err := s.fs.Stat(s.fs.PathJoin(s.dir, id, snapReceivedFile))
	return err == nil
}

// markTaken removes the mark of a received snapshot, durably. Nothing to
// do for a snapshot without one.
func (s *SnapshotStore) markTaken(id string) error {
	dir := s.fs.PathJoin(s.dir, id)
	if err := s.fs.Remove(s.fs.PathJoin(dir, snapReceivedFile)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("raft snapshot %s: %w", id, err)
	}
	if err := syncDir(s.fs, dir); err != nil {
		return fmt.Errorf("raft snapshot %s: %w", id, err)
	}
	return nil
}

// vetState has vet check the snapshot m whose folder is dir.
func (s *SnapshotStore) vetState(m raft.SnapshotMeta, dir string) error {
	f, err := s.fs.Open(s.fs.PathJoin(dir, snapStateFile))
	if err != nil {
		return err
	}
	defer f.Close()
	return s.vet(m, f)
}

// discard removes the snapshot id, durably: renamed to .reap, the folder
// synced, then removed. A received one stays hidden if it cannot be
// removed.
func (s *SnapshotStore) discard(id string) error {
	if _, ok := parseSnapName(id); !ok {
		return fmt.Errorf("raft snapshots: no snapshot %q", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.restoring != nil && s.restoring.ID == id {
		s.restoring = nil
	}
	from := s.fs.PathJoin(s.dir, id)
	if err := s.fs.Rename(from, from+snapReapSuffix); err != nil {
		return fmt.Errorf("raft snapshots: remove %s: %w", id, err)
	}
	delete(s.hidden, id)
	if err := syncDir(s.fs, s.dir); err != nil {
		return fmt.Errorf("raft snapshots: remove %s: %w", id, err)
	}
	// What a crash leaves of it is removed at the next open.
	if err := s.fs.RemoveAll(from + snapReapSuffix); err != nil {
		return fmt.Errorf("raft snapshots: remove %s: %w", id, err)
	}
	return nil
}

// snapBufSize is how much of a snapshot's state a sink gathers before one
// write.
const snapBufSize = 256 << 10

// snapshotSink writes one snapshot into its .tmp folder. Raft uses a sink
// from one goroutine.
type snapshotSink struct {
	store *SnapshotStore
	name  snapName
	tmp   string
	file  vfs.File
	crc   hash.Hash64
	// buf gathers what Write is given. It is the sink's own: a vfs.File
	// may modify the slice it writes (Pebble's MemFS does, in invariant
	// builds), and an io.Writer must not modify its caller's. Its bytes
	// are hashed before they are written, for the same reason.
	buf    []byte
	meta   snapshotMeta
	closed bool
	// local is set when this node's own state is written (markLocal);
	// a sink closed without it holds a snapshot received from a leader.
	local bool
}

var _ raft.SnapshotSink = (*snapshotSink)(nil)

// ID returns the snapshot's id, for Open once it is closed.
func (sk *snapshotSink) ID() string { return sk.meta.ID }

// localSink is a sink that can be told it holds this node's own state
// (snapshotSink can); FSMSnapshot.Persist and the seed tell it.
type localSink interface{ markLocal() }

var _ localSink = (*snapshotSink)(nil)

// markLocal says that the sink holds this node's own state, not a
// snapshot received from a leader. Call it before Close.
func (sk *snapshotSink) markLocal() { sk.local = true }

// markLocal marks sink as holding this node's own state when it is one of
// this store's.
func markLocal(sink raft.SnapshotSink) {
	if l, ok := sink.(localSink); ok {
		l.markLocal()
	}
}

// Write appends to state.bin.
func (sk *snapshotSink) Write(p []byte) (int, error) {
	if sk.closed {
		return 0, errors.New("raft snapshots: write to a closed sink")
	}
	n := 0
	for len(p) > 0 {
		c := min(len(p), snapBufSize-len(sk.buf))
		sk.buf = append(sk.buf, p[:c]...)
		p, n = p[c:], n+c
		if len(sk.buf) == snapBufSize {
			if err := sk.flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func (sk *snapshotSink) flush() error {
	if len(sk.buf) == 0 {
		return nil
	}
	sk.crc.Write(sk.buf)
	_, err := sk.file.Write(sk.buf)
	sk.buf = sk.buf[:0]
	return err
}

// Close puts the snapshot in place, durably (the steps are on
// SnapshotStore), then reaps old ones. On an error before the rename,
// nothing is in place and the .tmp folder is removed. A received snapshot
// (no markLocal) is first vetted (its name against its state), then put
// in place hidden, and neither told to stored nor followed by a reap: the
// FSM accepts or discards it. Idempotent.
func (sk *snapshotSink) Close() error {
	if sk.closed {
		return nil
	}
	sk.closed = true
	s := sk.store
	err := sk.finish()
	if err == nil && !sk.local && s.vet != nil {
		err = s.vetState(sk.meta.SnapshotMeta, sk.tmp)
	}
	if err != nil {
		_ = s.fs.RemoveAll(sk.tmp)
		return fmt.Errorf("raft snapshot %s: %w", sk.meta.ID, err)
	}
	final := s.fs.PathJoin(s.dir, sk.meta.ID)
	if !sk.local {
		// Hidden before it is in place: a List in between (raft's
		// replication, on a leader) must not offer it.
		s.mu.Lock()
		s.hidden[sk.meta.ID] = struct{}{}
		s.mu.Unlock()
	}
	if err := s.fs.Rename(sk.tmp, final); err != nil {
		_ = s.fs.RemoveAll(sk.tmp)
		s.mu.Lock()
		delete(s.hidden, sk.meta.ID)
		s.mu.Unlock()
		return fmt.Errorf("raft snapshot %s: put in place: %w", sk.meta.ID, err)
	}
	// Past the rename the snapshot is whole either way; if the folder's
	// sync fails, raft keeps its log (the snapshot is reported failed) and
	// a later List may still offer it, which is harmless (a received one
	// stays hidden until the next start, where it is checked).
	if err := syncDir(s.fs, s.dir); err != nil {
		return fmt.Errorf("raft snapshot %s: %w", sk.meta.ID, err)
	}
	s.log.Debug("raft snapshot saved", "id", sk.meta.ID, "bytes", sk.meta.Size, "local", sk.local)
	if !sk.local {
		return nil
	}
	if s.stored != nil {
		s.stored(sk.meta.SnapshotMeta)
	}
	return s.reap()
}

// finish makes state.bin, meta.json, the mark of a received snapshot and
// their names durable in the .tmp folder.
func (sk *snapshotSink) finish() error {
	s := sk.store
	err := sk.flush()
	if err == nil {
		err = sk.file.Sync()
	}
	var st vfs.FileInfo
	if err == nil {
		st, err = sk.file.Stat()
	}
	if cerr := sk.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", snapStateFile, err)
	}
	sk.meta.Size, sk.meta.CRC = st.Size(), sk.crc.Sum(nil)
	raw, err := json.Marshal(&sk.meta)
	if err != nil {
		return err
	}
	if err := writeFileSynced(s.fs, s.fs.PathJoin(sk.tmp, snapMetaFile), append(raw, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", snapMetaFile, err)
	}
	if !sk.local {
		if err := writeFileSynced(s.fs, s.fs.PathJoin(sk.tmp, snapReceivedFile), nil); err != nil {
			return fmt.Errorf("write %s: %w", snapReceivedFile, err)
		}
	}
	return syncDir(s.fs, sk.tmp)
}

// Cancel drops the snapshot. Idempotent.
func (sk *snapshotSink) Cancel() error {
	if sk.closed {
		return nil
	}
	sk.closed = true
	_ = sk.file.Close()
	return sk.store.fs.RemoveAll(sk.tmp)
}

// writeFileSynced creates path with data, synced. data may be modified
// (vfs.File.Write may).
func writeFileSynced(fs vfs.FS, path string, data []byte) error {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	return errors.Join(err, d.Close())
}

// mkdirAllSynced creates dir and its missing parents, and fsyncs the
// folder above each one it created, so that the folders survive a power
// loss (as Pebble does for its own).
func mkdirAllSynced(fs vfs.FS, dir string) error {
	var parents []string
	for p := dir; ; {
		if _, err := fs.Stat(p); err == nil {
			break
		}
		up := fs.PathDir(p)
		if up == p {
			break
		}
		parents = append(parents, up)
		p = up
	}
	if err := fs.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, p := range parents {
		if err := syncDir(fs, p); err != nil {
			return err
		}
	}
	return nil
}
