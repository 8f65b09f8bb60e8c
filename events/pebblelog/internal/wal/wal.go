// Package wal is the ledger store's write-ahead log: numbered records in
// segment files, appended by the committer and made durable with one
// fdatasync on the committing goroutine.
//
// Why not Pebble's own WAL: a synced Pebble commit hands the record to
// Pebble's flush goroutine and waits to be woken when the sync is done, two
// goroutine wake-ups per commit. With one writer appending one event at a
// time those wake-ups are a quarter of each append on a fast disk
// (docs/PERFORMANCE.md). Here the committer writes and syncs itself, and
// the store runs Pebble with its WAL disabled: this log is the only record
// of what Pebble has not flushed yet.
//
// # Files
//
// A segment is the file <dir>/<number, 16 hex digits>.wal. Records follow
// each other from offset 0:
//
//	crc32c(4) length(4) segment(8) seq(8) payload(length)
//
// little-endian; the CRC (Castagnoli) covers everything after it. seq
// numbers records 1, 2, 3… across segments, without gaps. A record is read
// back only if its CRC matches and it names the segment it is in: the rest
// of a recycled file (an older segment's records, under its old number) or
// zeros end the segment, and so does a record torn by a crash.
//
// A segment is synced in full before the next one takes writes, so a record
// in segment n+1 implies that segment n is complete. Segments whose records
// are all in Pebble's flushed tables are dropped (DropThrough): kept as
// free-<number>.wal for reuse, up to maxFree, else deleted. A reused file is
// rewritten in place, and on ext4 a sync that does not change a file's size
// commits no metadata: that is the in-place rate of docs/PERFORMANCE.md.
package wal

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Options configures a Log.
type Options struct {
	FS  vfs.FS // default vfs.Default
	Dir string // created if missing
	// SegmentSize is the size after which the next record starts a new
	// segment. Default 64 MiB. A record larger than it gets a segment of
	// its own.
	SegmentSize int64
}

const (
	headerSize  = 24
	smallRecord = 32 << 10
	maxFree     = 4
	suffix      = ".wal"
	freePrefix  = "free-"
	// MaxRecord bounds one record's payload (a Pebble batch of a whole
	// group commit is at most a few tens of MiB).
	MaxRecord = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is returned by Open when the segments contradict each other
// (a gap in the numbering of records); it is not returned for a torn tail.
var ErrCorrupt = errors.New("wal: corrupt")

// ErrFailed wraps every error after a write or a sync failed: what reached
// the disk is then unknown, and only reopening (which reads it back) tells.
var ErrFailed = errors.New("wal: failed earlier")

// Log is the write-ahead log. Append and SyncTo are safe for concurrent use;
// records get their seq in the order Append is called.
type Log struct {
	o Options

	mu      sync.Mutex // appends, rotation, the segment lists
	cur     *segment   // the segment taking writes; nil until the first Append
	sealed  []*segment // complete segments not yet dropped, oldest first
	free    []string   // free-*.wal files, oldest first
	nextNum uint64     // number of the next segment
	nextSeq uint64     // seq of the next record
	lsn     uint64     // bytes appended since Open (positions for SyncTo)
	buf     []byte
	failed  error

	// syncMu serialises syncs, and DropThrough's closing of files against
	// them. Lock order: syncMu, then mu.
	syncMu sync.Mutex
	synced atomic.Uint64 // every byte below this position is durable

	rotated chan struct{} // receives after each rotation (capacity 1)
}

type segment struct {
	num     uint64
	f       vfs.File
	off     int64
	lastSeq uint64 // 0: no record yet
}

// Record is one record read back by Open.
type Record struct {
	Seq  uint64
	Data []byte // valid only during the replay call
}

// Open reads every segment in o.Dir in order and calls replay for each
// intact record whose seq is greater than after, then returns the log, ready
// to append after the last record read. The segments read stay until
// DropThrough drops them. Open never writes to a segment it read.
func Open(o Options, after uint64, replay func(Record) error) (*Log, error) {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.SegmentSize <= 0 {
		o.SegmentSize = 64 << 20
	}
	if err := o.FS.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	if err := syncDir(o.FS, o.FS.PathDir(o.Dir)); err != nil {
		return nil, err
	}
	d, err := list(o.FS, o.Dir)
	if err != nil {
		return nil, err
	}
	sealed, lastSeq, err := replayAll(o.FS, o.Dir, d.segments, after, replay)
	if err != nil {
		return nil, err
	}
	return &Log{o: o, nextNum: d.nextNum, nextSeq: max(after, lastSeq) + 1, free: d.free, sealed: sealed,
		rotated: make(chan struct{}, 1)}, nil
}

// Read calls replay for each intact record of the log in dir whose seq is
// greater than after, like Open, without writing anything: for readers of
// a stopped store. A missing dir holds no records.
func Read(fs vfs.FS, dir string, after uint64, replay func(Record) error) error {
	if fs == nil {
		fs = vfs.Default
	}
	if _, err := fs.Stat(dir); err != nil {
		return nil
	}
	d, err := list(fs, dir)
	if err != nil {
		return err
	}
	_, _, err = replayAll(fs, dir, d.segments, after, replay)
	return err
}

// replayAll reads the segments in order (see readSegment) and returns them
// with the seq of the last record read.
func replayAll(fs vfs.FS, dir string, nums []uint64, after uint64, replay func(Record) error) ([]*segment, uint64, error) {
	var segs []*segment
	var lastSeq uint64
	for _, num := range nums {
		seg, err := readSegment(fs, dir, num, &lastSeq, after, replay)
		if err != nil {
			return nil, 0, err
		}
		segs = append(segs, seg)
	}
	return segs, lastSeq, nil
}

type dirList struct {
	segments []uint64 // in order
	free     []string // oldest first
	nextNum  uint64   // above every number seen
}

func list(fs vfs.FS, dir string) (dirList, error) {
	names, err := fs.List(dir)
	if err != nil {
		return dirList{}, fmt.Errorf("wal: %w", err)
	}
	d := dirList{nextNum: 1}
	type freeFile struct {
		num  uint64
		name string
	}
	var free []freeFile
	for _, n := range names {
		base, ok := strings.CutSuffix(n, suffix)
		if !ok {
			continue
		}
		isFree := false
		if b, ok := strings.CutPrefix(base, freePrefix); ok {
			base, isFree = b, true
		}
		num, err := strconv.ParseUint(base, 16, 64)
		if err != nil || len(base) != 16 {
			continue
		}
		d.nextNum = max(d.nextNum, num+1)
		if isFree {
			free = append(free, freeFile{num, n})
		} else {
			d.segments = append(d.segments, num)
		}
	}
	slices.SortFunc(free, func(a, b freeFile) int { return cmp.Compare(a.num, b.num) })
	for _, f := range free {
		d.free = append(d.free, f.name)
	}
	slices.Sort(d.segments)
	return d, nil
}

func segmentName(num uint64) string { return fmt.Sprintf("%016x%s", num, suffix) }

// readSegment replays segment num. lastSeq is the seq of the last record
// read before it (0 if none), and is advanced.
func readSegment(fs vfs.FS, dir string, num uint64, lastSeq *uint64, after uint64, replay func(Record) error) (*segment, error) {
	name := fs.PathJoin(dir, segmentName(num))
	f, err := fs.Open(name)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	seg := &segment{num: num}
	r := bufio.NewReaderSize(f, 256<<10)
	var hdr [headerSize]byte
	var data []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			break // end of file, or a torn header
		}
		n := binary.LittleEndian.Uint32(hdr[4:])
		if binary.LittleEndian.Uint64(hdr[8:]) != num || int64(n) > fi.Size()-seg.off-headerSize {
			break // zeros, another segment's record, or a torn header
		}
		data = slices.Grow(data[:0], int(n))[:n]
		if _, err := io.ReadFull(r, data); err != nil {
			break // torn record
		}
		crc := crc32.Update(crc32.Checksum(hdr[4:], castagnoli), castagnoli, data)
		if crc != binary.LittleEndian.Uint32(hdr[0:]) {
			break // torn or corrupt record: the end of what was synced
		}
		seq := binary.LittleEndian.Uint64(hdr[16:])
		seg.lastSeq = seq
		seg.off += headerSize + int64(n)
		if seq <= after {
			// Already in Pebble's tables. A crash while dropping segments
			// can leave some of them behind, so no continuity is asked of
			// these.
			*lastSeq = max(*lastSeq, seq)
			continue
		}
		// Every record past after must be there, in order: a hole would be
		// acknowledged batches lost.
		if seq != max(*lastSeq, after)+1 {
			return nil, fmt.Errorf("%w: segment %d holds record %d where record %d was expected", ErrCorrupt, num, seq, max(*lastSeq, after)+1)
		}
		*lastSeq = seq
		if err := replay(Record{Seq: seq, Data: data}); err != nil {
			return nil, fmt.Errorf("wal: replay record %d: %w", seq, err)
		}
	}
	return seg, nil
}

// Append writes one record without syncing it and returns its seq and the
// position SyncTo needs to make it durable. REQUIRES: len(data) <= MaxRecord.
func (l *Log) Append(data []byte) (seq, end uint64, err error) {
	if len(data) > MaxRecord {
		return 0, 0, fmt.Errorf("wal: record of %d bytes is over the %d-byte limit", len(data), MaxRecord)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed != nil {
		return 0, 0, fmt.Errorf("%w: %v", ErrFailed, l.failed)
	}
	size := int64(headerSize + len(data))
	if l.cur == nil || (l.cur.off > 0 && l.cur.off+size > l.o.SegmentSize) {
		if err := l.rotateLocked(); err != nil {
			l.failed = err
			return 0, 0, err
		}
	}
	seq = l.nextSeq
	// A small record goes out in one write with its header; a large one
	// (a group commit's batch) in two, header then data, rather than
	// being copied. A crash between the two leaves a header whose CRC
	// does not match: the end of the log, as for any torn record.
	small := len(data) <= smallRecord
	n := headerSize
	if small {
		n = int(size)
	}
	l.buf = slices.Grow(l.buf[:0], n)[:n]
	binary.LittleEndian.PutUint32(l.buf[4:], uint32(len(data)))
	binary.LittleEndian.PutUint64(l.buf[8:], l.cur.num)
	binary.LittleEndian.PutUint64(l.buf[16:], seq)
	binary.LittleEndian.PutUint32(l.buf[0:], crc32.Update(crc32.Checksum(l.buf[4:headerSize], castagnoli), castagnoli, data))
	writes := [][]byte{l.buf}
	if small {
		copy(l.buf[headerSize:], data)
	} else {
		writes = append(writes, data)
	}
	for _, w := range writes {
		if _, err := l.cur.f.Write(w); err != nil {
			l.failed = err
			return 0, 0, fmt.Errorf("wal: write segment %d: %w", l.cur.num, err)
		}
	}
	l.nextSeq++
	l.cur.off += size
	l.cur.lastSeq = seq
	l.lsn += uint64(size)
	return seq, l.lsn, nil
}

// rotateLocked syncs the current segment in full and opens the next one,
// reusing a free file when there is one. REQUIRES: l.mu held.
func (l *Log) rotateLocked() error {
	if old := l.cur; old != nil {
		if err := old.f.SyncData(); err != nil {
			return fmt.Errorf("wal: sync segment %d: %w", old.num, err)
		}
		casMax(&l.synced, l.lsn)
		l.sealed = append(l.sealed, old)
	}
	num := l.nextNum
	name := l.o.FS.PathJoin(l.o.Dir, segmentName(num))
	var f vfs.File
	var err error
	if n := len(l.free); n > 0 {
		f, err = l.o.FS.ReuseForWrite(l.o.FS.PathJoin(l.o.Dir, l.free[n-1]), name, vfs.WriteCategoryUnspecified)
		if err == nil {
			l.free = l.free[:n-1]
		}
	} else {
		f, err = l.o.FS.Create(name, vfs.WriteCategoryUnspecified)
	}
	if err != nil {
		return fmt.Errorf("wal: open segment %d: %w", num, err)
	}
	// The new name must be durable before any record in the file is
	// acknowledged: after a crash, records under a lost name are lost.
	if err := syncDir(l.o.FS, l.o.Dir); err != nil {
		_ = f.Close()
		return err
	}
	l.nextNum++
	l.cur = &segment{num: num, f: f}
	select {
	case l.rotated <- struct{}{}:
	default:
	}
	return nil
}

// SyncTo returns once every record appended before position end is durable.
// Concurrent callers share syncs: a sync covers everything written before
// it started.
func (l *Log) SyncTo(end uint64) error {
	if l.synced.Load() >= end {
		return nil
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.synced.Load() >= end {
		return nil
	}
	l.mu.Lock()
	seg, written, failed := l.cur, l.lsn, l.failed
	l.mu.Unlock()
	if failed != nil {
		return fmt.Errorf("%w: %v", ErrFailed, failed)
	}
	if seg == nil || written < end {
		return fmt.Errorf("wal: sync to %d, but only %d bytes were appended", end, written)
	}
	if err := seg.f.SyncData(); err != nil {
		l.mu.Lock()
		if l.failed == nil {
			l.failed = err
		}
		l.mu.Unlock()
		return fmt.Errorf("wal: sync segment %d: %w", seg.num, err)
	}
	casMax(&l.synced, written)
	return nil
}

// Rotated receives after a segment was completed: a caller that flushes
// Pebble can then drop what the flush covered.
func (l *Log) Rotated() <-chan struct{} { return l.rotated }

// LastSeq is the seq of the last record appended (or read by Open).
func (l *Log) LastSeq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nextSeq - 1
}

// DropThrough drops every complete segment whose records all have seq <=
// seq: the caller has made them durable elsewhere (a Pebble flush). With
// all set, the segment taking writes is completed first and dropped too if
// it qualifies (Open's caller uses it after replaying and flushing).
func (l *Log) DropThrough(seq uint64, all bool) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if all && l.cur != nil && l.cur.lastSeq != 0 && l.cur.lastSeq <= seq {
		if err := l.cur.f.SyncData(); err != nil {
			l.mu.Unlock()
			return fmt.Errorf("wal: sync segment %d: %w", l.cur.num, err)
		}
		casMax(&l.synced, l.lsn)
		l.sealed = append(l.sealed, l.cur)
		l.cur = nil
	}
	var drop []*segment
	for len(l.sealed) > 0 && l.sealed[0].lastSeq <= seq {
		drop = append(drop, l.sealed[0])
		l.sealed = l.sealed[1:]
	}
	free := len(l.free)
	l.mu.Unlock()
	if len(drop) == 0 {
		return nil
	}
	var kept []string
	for _, s := range drop {
		if s.f != nil {
			_ = s.f.Close()
		}
		name := l.o.FS.PathJoin(l.o.Dir, segmentName(s.num))
		if free < maxFree {
			to := freePrefix + segmentName(s.num)
			if err := l.o.FS.Rename(name, l.o.FS.PathJoin(l.o.Dir, to)); err != nil {
				return fmt.Errorf("wal: free segment %d: %w", s.num, err)
			}
			kept = append(kept, to)
			free++
			continue
		}
		if err := l.o.FS.Remove(name); err != nil {
			return fmt.Errorf("wal: remove segment %d: %w", s.num, err)
		}
	}
	if err := syncDir(l.o.FS, l.o.Dir); err != nil {
		return err
	}
	l.mu.Lock()
	l.free = append(l.free, kept...)
	l.mu.Unlock()
	return nil
}

// DiskBytes returns the size of the log's files, free ones included. It
// lists the folder (a few files): for metrics, not for hot paths.
func (l *Log) DiskBytes() (uint64, error) {
	names, err := l.o.FS.List(l.o.Dir)
	if err != nil {
		return 0, fmt.Errorf("wal: %w", err)
	}
	var n uint64
	for _, name := range names {
		if !strings.HasSuffix(name, suffix) {
			continue
		}
		fi, err := l.o.FS.Stat(l.o.FS.PathJoin(l.o.Dir, name))
		if err != nil {
			continue // dropped meanwhile
		}
		n += uint64(fi.Size())
	}
	return n, nil
}

// Segments returns how many segments hold records not yet dropped.
func (l *Log) Segments() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.sealed)
	if l.cur != nil {
		n++
	}
	return n
}

// Close syncs and closes the files. Records not dropped are read back by
// the next Open.
func (l *Log) Close() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	if l.cur != nil && l.failed == nil {
		errs = append(errs, l.cur.f.SyncData())
	}
	for _, s := range append(l.sealed, l.cur) {
		if s != nil && s.f != nil {
			errs = append(errs, s.f.Close())
			s.f = nil
		}
	}
	l.cur, l.sealed = nil, nil
	if l.failed == nil {
		l.failed = errors.New("closed")
	}
	return errors.Join(errs...)
}

func casMax(a *atomic.Uint64, v uint64) {
	for {
		old := a.Load()
		if old >= v || a.CompareAndSwap(old, v) {
			return
		}
	}
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("wal: open folder %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("wal: sync folder %s: %w", dir, err)
	}
	return nil
}
