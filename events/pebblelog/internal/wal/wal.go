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
// of what Pebble has not flushed yet. The store can also run on Pebble's
// WAL (pebblelog.Config.WAL); both pass the same fault-injection suite.
//
// # Files
//
// A segment is the file <dir>/<number, 16 hex digits>.wal. It starts with
// a 16-byte magic ("greffe-wal/2\n" and zeros), then records follow each
// other:
//
//	crc32c(4) length(4) segment(8) seq(8) synced(8) payload(length)
//
// little-endian; the CRC (Castagnoli) covers everything after it. seq
// numbers data records 1, 2, 3… across segments, without gaps. synced is
// the offset in this segment up to which the segment had been fsynced when
// the record was written: a record vouches that everything before synced
// was durable. After every sync the log writes a sync record (seq 0, no
// payload) saying how far that sync reached; it is itself synced by the
// next sync, and after a process crash it is on disk like any write. The
// first record of a segment that follows one this process wrote is a
// segment record (seq 0, an 8-byte payload): the length the previous
// segment had when it was synced in full, so that damage anywhere in a
// complete segment, even in its last record, is seen.
//
// A record is read back only if its CRC matches and it names the segment
// it is in. The first record that does not is the end of the segment when
// nothing after it vouches for it: the rest of a recycled file (an older
// segment's records, under its old number), zeros, or a record torn by a
// crash. When a later intact record of the same segment says the segment
// was synced past it, the bad record was durable once: that is damage, and
// Open refuses the log (ErrCorrupt, naming the file and the offset) rather
// than truncate acknowledged records away. Pebble's own WAL reads ahead the
// same way; the sync records also cover the last record written before a
// process crash, which Pebble's cannot tell from a torn write.
//
// Segments written before the magic existed (version 1: the same header
// without synced, from offset 0) are still read, without the read-ahead.
//
// Open is lenient with damage that loses nothing (a damaged magic, a
// damaged sync record, records Pebble's tables hold already): it logs it
// and goes on. Read, for auditors, reports every damage it sees.
//
// A segment is synced in full before the next one takes writes, so a record
// in segment n+1 implies that segment n is complete. Segments whose records
// are all in Pebble's flushed tables are dropped (DropThrough): kept as
// free-<number>.wal for reuse, up to maxFree, else deleted. A reused file is
// rewritten in place, and on ext4 a sync that does not change a file's size
// commits no metadata: that is the in-place rate of docs/PERFORMANCE.md.
//
// # Failures
//
// After any write or sync error the log refuses every later Append and
// SyncTo (ErrFailed), for good: after a failed fsync the state of the
// file's pages is unknown, and Linux reports a writeback error to one fsync
// only (errseq), so a retried or concurrent fsync that succeeds proves
// nothing (fsyncgate). Every fsync of a segment runs under fileMu, and its
// failure is recorded before fileMu is released, so no sync can succeed
// after another one failed without seeing that failure.
package wal

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
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
	// Logger receives what Open discards and why (a torn tail). Default:
	// discard.
	Logger *slog.Logger
}

const (
	magicSize    = 16
	headerSize   = 32
	headerSizeV1 = 24
	// maxKeptBuffer bounds the write buffer kept between records.
	maxKeptBuffer = 32 << 20
	maxFree       = 4
	suffix        = ".wal"
	freePrefix    = "free-"
	// MaxRecord bounds one record's payload (a Pebble batch of a whole
	// group commit is at most a few tens of MiB).
	MaxRecord = 1 << 30
)

// magic starts every segment of version 2.
var magic = [magicSize]byte{'g', 'r', 'e', 'f', 'f', 'e', '-', 'w', 'a', 'l', '/', '2', '\n'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is returned by Open when the log is damaged: a record that was
// synced does not read back, or the segments contradict each other (a gap
// in the numbering of records). It is not returned for a torn tail.
var ErrCorrupt = errors.New("wal: corrupt")

// DamageError is the ErrCorrupt of a damaged segment: the file and the
// offset where it stops reading back.
type DamageError struct {
	File   string // the segment's path
	Offset int
	What   string
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("wal: corrupt: %s at offset %d: %s", e.File, e.Offset, e.What)
}

// Unwrap makes a DamageError match ErrCorrupt.
func (e *DamageError) Unwrap() error { return ErrCorrupt }

// ErrFailed wraps every error after a write or a sync failed: what reached
// the disk is then unknown, and only reopening (which reads it back) tells.
var ErrFailed = errors.New("wal: failed earlier")

// Log is the write-ahead log. Append and SyncTo are safe for concurrent use;
// records get their seq in the order Append is called.
//
// Lock order: syncMu, then mu, then fileMu.
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

	// syncMu serialises SyncTo, and DropThrough's closing of files against
	// it.
	syncMu sync.Mutex
	synced atomic.Uint64 // every byte below this position is durable
	// fileMu is held across every fsync of a segment and the recording of
	// its outcome (see Failures in the package doc).
	fileMu sync.Mutex
	failed atomic.Pointer[failure] // set once, by the first write or sync error

	rotated chan struct{} // receives after each rotation (capacity 1)
}

type failure struct{ err error }

type segment struct {
	num     uint64
	f       vfs.File
	off     int64        // bytes written, magic included; guarded by Log.mu
	synced  atomic.Int64 // bytes known durable
	lastSeq uint64       // 0: no data record yet; guarded by Log.mu
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
	o.setDefaults()
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
	sealed, lastSeq, err := replayAll(o, d.segments, after, false, replay)
	if err != nil {
		return nil, err
	}
	return &Log{o: o, nextNum: d.nextNum, nextSeq: max(after, lastSeq) + 1, free: d.free, sealed: sealed,
		rotated: make(chan struct{}, 1)}, nil
}

func (o *Options) setDefaults() {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.SegmentSize <= 0 {
		o.SegmentSize = 64 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Read calls replay for each intact record of the log in dir whose seq is
// greater than after, like Open, without writing anything: for readers of
// a stopped store. A missing dir holds no records. It returns ErrCorrupt
// where Open would.
func Read(fs vfs.FS, dir string, after uint64, replay func(Record) error) error {
	return read(fs, dir, after, true, replay)
}

// Check is Open without the log: it reads the log in dir exactly as Open
// would with the same after, and calls replay for the same records, but
// writes nothing (not even the folder) and logs nothing. It returns the
// error Open would return (ErrCorrupt where the log is damaged), and nil
// where Open would read on: a torn tail, damage that loses nothing (Read,
// for auditors, reports those). A missing dir holds no records.
//
// It is for a caller that must refuse a damaged log before it changes
// anything else (the store opens Pebble read-write only after it): the
// folder is then left as the damage found it, for an operator to inspect.
func Check(fs vfs.FS, dir string, after uint64, replay func(Record) error) error {
	return read(fs, dir, after, false, replay)
}

func read(fs vfs.FS, dir string, after uint64, strict bool, replay func(Record) error) error {
	o := Options{FS: fs, Dir: dir}
	o.setDefaults()
	if _, err := o.FS.Stat(dir); err != nil {
		return nil
	}
	d, err := list(o.FS, dir)
	if err != nil {
		return err
	}
	_, _, err = replayAll(o, d.segments, after, strict, replay)
	return err
}

// replayAll reads the segments in order (see readSegment) and returns them
// with the seq of the last record read. strict reports damage that loses
// nothing too.
func replayAll(o Options, nums []uint64, after uint64, strict bool, replay func(Record) error) ([]*segment, uint64, error) {
	var segs []*segment
	var lastSeq uint64
	var buf []byte
	for i, num := range nums {
		rs := readState{o: o, num: num, lastSeq: &lastSeq, after: after, strict: strict, newest: i == len(nums)-1}
		if !rs.newest {
			l, err := sealedLength(o, num, nums[i+1])
			if err != nil {
				return nil, 0, err
			}
			rs.sealedLen = l
		}
		seg, err := rs.read(&buf, replay)
		if err != nil {
			return nil, 0, err
		}
		segs = append(segs, seg)
	}
	return segs, lastSeq, nil
}

// sealedLength returns the length segment num had when it was synced in
// full, as the segment record of the next segment (next) says, or 0 when
// it says nothing (it follows a segment another process wrote, or it is
// of version 1, or its start did not read back).
func sealedLength(o Options, num, next uint64) (int, error) {
	if next != num+1 {
		return 0, nil
	}
	f, err := o.FS.Open(o.FS.PathJoin(o.Dir, segmentName(next)))
	if err != nil {
		return 0, fmt.Errorf("wal: %w", err)
	}
	defer f.Close()
	b := make([]byte, magicSize+headerSize+8)
	n, _ := io.ReadFull(f, b)
	b = b[:n]
	if len(b) < magicSize || [magicSize]byte(b[:magicSize]) != magic {
		return 0, nil
	}
	r, ok := parseRecord(b, magicSize, next, headerSize)
	if !ok || r.seq != 0 || len(r.data) != 8 {
		return 0, nil
	}
	return int(binary.LittleEndian.Uint64(r.data)), nil
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

// rec is a record parsed from a segment's bytes.
type rec struct {
	seq, synced uint64
	data        []byte
	start, end  int // offsets of its first byte and of the byte after it
}

// parseRecord reads the record at off in b, a segment numbered num, with
// headers of hs bytes. ok is false when there is none: too few bytes, another
// segment's number, a length past the end, or a CRC that does not match.
func parseRecord(b []byte, off int, num uint64, hs int) (r rec, ok bool) {
	if off < 0 || len(b)-off < hs {
		return rec{}, false
	}
	h := b[off : off+hs]
	if binary.LittleEndian.Uint64(h[8:]) != num {
		return rec{}, false
	}
	n := int(binary.LittleEndian.Uint32(h[4:]))
	if n > len(b)-off-hs {
		return rec{}, false
	}
	data := b[off+hs : off+hs+n]
	if crc32.Update(crc32.Checksum(h[4:], castagnoli), castagnoli, data) != binary.LittleEndian.Uint32(h) {
		return rec{}, false
	}
	r = rec{seq: binary.LittleEndian.Uint64(h[16:]), data: data, start: off, end: off + hs + n}
	if hs == headerSize {
		r.synced = binary.LittleEndian.Uint64(h[24:])
	}
	return r, true
}

// vouchFor looks past bad, the offset where reading stopped in b, for an
// intact record of the same segment saying the segment was synced beyond
// bad. It returns that record (found) and the first intact record after
// bad, where reading can resume (next; zero when found is false).
func vouchFor(b []byte, bad int, num uint64) (voucher, next rec, found bool) {
	var numBytes [8]byte
	binary.LittleEndian.PutUint64(numBytes[:], num)
	// A header holds the segment's number at offset 8: look for it.
	for i := bad + 1; i+headerSize <= len(b); i++ {
		j := bytes.Index(b[i+8:], numBytes[:])
		if j < 0 {
			break
		}
		i += j
		r, ok := parseRecord(b, i, num, headerSize)
		if !ok {
			continue
		}
		if next.end == 0 {
			next = r
		}
		if r.synced > uint64(bad) {
			return r, next, true
		}
		i = r.end - 1
	}
	return rec{}, rec{}, false
}

// readState is the reading of one segment.
type readState struct {
	o       Options
	num     uint64
	lastSeq *uint64 // the seq of the last record read before (0 if none); advanced
	after   uint64  // records up to it are in Pebble's tables
	newest  bool
	strict  bool
	// sealedLen is the length the segment had when it was synced in full
	// (the next segment's segment record), 0 if unknown.
	sealedLen int
}

// read replays the segment. buf is reused across segments.
func (rs *readState) read(buf *[]byte, replay func(Record) error) (*segment, error) {
	o, num := rs.o, rs.num
	name := o.FS.PathJoin(o.Dir, segmentName(num))
	b, err := readFile(o.FS, name, buf)
	if err != nil {
		return nil, err
	}
	seg := &segment{num: num}
	hs, off := headerSize, magicSize
	switch {
	case len(b) >= magicSize && [magicSize]byte(b[:magicSize]) == magic:
	case len(b) == 0:
		return seg, nil
	default:
		if _, ok := parseRecord(b, 0, num, headerSizeV1); ok {
			hs, off = headerSizeV1, 0 // written before the magic existed
			break
		}
		// A damaged magic, or a file whose first write never reached the
		// disk: read on as version 2, so that a later record vouching for
		// the start is seen.
		if _, ok := parseRecord(b, magicSize, num, headerSize); ok {
			if err := rs.harmless(name, 0, "the segment's magic is damaged; its records read back"); err != nil {
				return nil, err
			}
		}
	}
	for off < len(b) {
		r, ok := parseRecord(b, off, num, hs)
		if !ok {
			if hs == headerSizeV1 {
				break
			}
			next, resume, err := rs.damaged(b, off, name)
			if err != nil {
				return nil, err
			}
			if !resume {
				break
			}
			off = next
			continue
		}
		off = r.end
		seg.off = int64(off)
		if r.seq == 0 {
			continue // a sync or segment record
		}
		seq := r.seq
		seg.lastSeq = seq
		if seq <= rs.after {
			// Already in Pebble's tables. A crash while dropping segments
			// can leave some of them behind, so no continuity is asked of
			// these.
			*rs.lastSeq = max(*rs.lastSeq, seq)
			continue
		}
		// Every record past after must be there, in order: a hole would be
		// acknowledged batches lost.
		if want := max(*rs.lastSeq, rs.after) + 1; seq != want {
			return nil, &DamageError{File: name, Offset: r.start, What: fmt.Sprintf("record %d where record %d was expected: records before it, in this segment or the one before, are missing", seq, want)}
		}
		*rs.lastSeq = seq
		if err := replay(Record{Seq: seq, Data: r.data}); err != nil {
			return nil, fmt.Errorf("wal: replay record %d: %w", seq, err)
		}
	}
	return seg, nil
}

// damaged judges the bytes at off, which are not a record: the end of the
// segment (resume false), damage to refuse (an error), or damage that
// loses nothing, read past (resume at next).
func (rs *readState) damaged(b []byte, off int, name string) (next int, resume bool, err error) {
	voucher, intact, found := vouchFor(b, off, rs.num)
	switch {
	case found && *rs.lastSeq+1 > rs.after:
		return 0, false, &DamageError{File: name, Offset: off, What: fmt.Sprintf("the record here (record %d expected) does not read back, and the record at offset %d says the segment was synced through offset %d: damage, not a torn write",
			max(*rs.lastSeq, rs.after)+1, voucher.start, voucher.synced)}
	case found:
		// The damaged records are in Pebble's tables already: nothing
		// they held is lost. Read on from the next intact one; the
		// continuity check still sees a record past after that the
		// damage swallowed.
		return intact.start, true, rs.harmless(name, off, "damaged records that Pebble's tables hold already")
	case off < rs.sealedLen:
		// The segment was synced in full up to sealedLen before the next
		// one took writes. Data records lost there break the continuity
		// with the next segment, which refuses the log; a damaged sync
		// record loses nothing.
		return 0, false, rs.harmless(name, off, fmt.Sprintf("the complete segment does not read back from here (it was synced through offset %d)", rs.sealedLen))
	}
	if rest := b[off:]; rs.newest && !allZero(rest) && !otherSegment(rest, rs.num) {
		rs.o.Logger.Warn("write-ahead log: discarded a torn tail (no later record says it was synced)",
			"file", name, "offset", off, "bytes", len(rest), "after_record", *rs.lastSeq)
	}
	return 0, false, nil
}

// harmless reports damage that loses nothing: an error for a strict
// reader (an auditor), a warning for Open.
func (rs *readState) harmless(name string, off int, what string) error {
	if rs.strict {
		return &DamageError{File: name, Offset: off, What: what}
	}
	rs.o.Logger.Warn("write-ahead log: damage that loses nothing", "file", name, "offset", off, "what", what)
	return nil
}

// readFile reads the whole file into *buf (grown as needed) and returns it.
func readFile(fs vfs.FS, name string, buf *[]byte) ([]byte, error) {
	f, err := fs.Open(name)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	*buf = slices.Grow((*buf)[:0], int(fi.Size()))[:fi.Size()]
	n, err := io.ReadFull(f, *buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("wal: read %s: %w", name, err)
	}
	return (*buf)[:n], nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// otherSegment reports whether b starts with a header naming another
// segment: the rest of a recycled file, not a torn write.
func otherSegment(b []byte, num uint64) bool {
	return len(b) >= 16 && binary.LittleEndian.Uint64(b[8:]) != num
}

// Append writes one record without syncing it and returns its seq and the
// position SyncTo needs to make it durable. REQUIRES: len(data) <= MaxRecord.
func (l *Log) Append(data []byte) (seq, end uint64, err error) {
	if len(data) > MaxRecord {
		return 0, 0, fmt.Errorf("wal: record of %d bytes is over the %d-byte limit", len(data), MaxRecord)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.failure(); err != nil {
		return 0, 0, err
	}
	size := int64(headerSize + len(data))
	if l.cur == nil || (l.cur.off > magicSize && l.cur.off+size > l.o.SegmentSize) {
		if err := l.rotateLocked(); err != nil {
			return 0, 0, l.fail(err)
		}
	}
	seq = l.nextSeq
	if err := l.writeLocked(seq, data); err != nil {
		return 0, 0, err
	}
	l.nextSeq++
	l.cur.lastSeq = seq
	return seq, l.lsn, nil
}

// writeLocked writes one record (seq 0: a sync record) at the end of the
// current segment. REQUIRES: l.mu held, l.cur set.
func (l *Log) writeLocked(seq uint64, data []byte) error {
	size := int64(headerSize + len(data))
	// One write of a copy, header and payload together: vfs.File.Write
	// may modify what it is given (Pebble's MemFS does in invariant
	// builds), and data is the caller's Pebble batch, which the store
	// applies to the memtable next. The copy of a group commit's batch
	// (about 1.5 MB for 64 writers of 100 events) costs less than the
	// second write(2) it saves.
	l.buf = slices.Grow(l.buf[:0], int(size))[:size]
	binary.LittleEndian.PutUint32(l.buf[4:], uint32(len(data)))
	binary.LittleEndian.PutUint64(l.buf[8:], l.cur.num)
	binary.LittleEndian.PutUint64(l.buf[16:], seq)
	binary.LittleEndian.PutUint64(l.buf[24:], uint64(l.cur.synced.Load()))
	copy(l.buf[headerSize:], data)
	binary.LittleEndian.PutUint32(l.buf[0:], crc32.Checksum(l.buf[4:], castagnoli))
	if _, err := l.cur.f.Write(l.buf); err != nil {
		return l.fail(fmt.Errorf("wal: write segment %d: %w", l.cur.num, err))
	}
	if cap(l.buf) > maxKeptBuffer {
		l.buf = nil // one huge batch does not pin its size for ever
	}
	l.cur.off += size
	l.lsn += uint64(size)
	return nil
}

// rotateLocked syncs the current segment in full and opens the next one,
// reusing a free file when there is one. REQUIRES: l.mu held.
func (l *Log) rotateLocked() error {
	if old := l.cur; old != nil {
		if err := l.syncSegment(old, old.off); err != nil {
			return err
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
	// A copy: vfs.File.Write may modify what it is given (Pebble's MemFS
	// does in invariant builds, -race included), and magic is shared by
	// every log of the process.
	m := magic
	if _, err := f.Write(m[:]); err != nil {
		_ = f.Close()
		return fmt.Errorf("wal: write segment %d: %w", num, err)
	}
	l.nextNum++
	l.lsn += magicSize
	prev := l.cur
	l.cur = &segment{num: num, f: f, off: magicSize}
	if prev != nil && prev.num+1 == num {
		// The segment record: prev was synced in full at this length.
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(prev.off))
		if err := l.writeLocked(0, n[:]); err != nil {
			return err
		}
	}
	select {
	case l.rotated <- struct{}{}:
	default:
	}
	return nil
}

// syncSegment fsyncs seg, whose first upto bytes were written, and records
// the outcome: on success seg.synced reaches upto; on failure the log fails.
// Every fsync of a segment goes through here (see Failures in the package
// doc). REQUIRES: seg.f open (syncMu or mu held keeps it so).
func (l *Log) syncSegment(seg *segment, upto int64) error {
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	if err := l.failure(); err != nil {
		return err
	}
	if err := seg.f.SyncData(); err != nil {
		return l.fail(fmt.Errorf("wal: sync segment %d: %w", seg.num, err))
	}
	for {
		old := seg.synced.Load()
		if old >= upto || seg.synced.CompareAndSwap(old, upto) {
			return nil
		}
	}
}

// fail records err as the log's failure, if it is the first, and returns
// the error every caller gets from now on.
func (l *Log) fail(err error) error {
	l.failed.CompareAndSwap(nil, &failure{err})
	return l.failure()
}

// failure returns nil, or ErrFailed wrapping the first failure.
func (l *Log) failure() error {
	if f := l.failed.Load(); f != nil {
		return fmt.Errorf("%w: %w", ErrFailed, f.err)
	}
	return nil
}

// Failure returns the first write or sync error (wrapped in ErrFailed), or
// nil while the log is sound.
func (l *Log) Failure() error { return l.failure() }

// SyncTo returns once every record appended before position end is durable.
// Concurrent callers share syncs: a sync covers everything written before
// it started. After a failure it returns ErrFailed, even for positions an
// earlier sync covered.
func (l *Log) SyncTo(end uint64) error {
	if err := l.failure(); err != nil {
		return err
	}
	if l.synced.Load() >= end {
		return nil
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if l.synced.Load() >= end {
		return l.failure()
	}
	l.mu.Lock()
	seg, written, upto := l.cur, l.lsn, int64(0)
	if seg != nil {
		upto = seg.off
	}
	l.mu.Unlock()
	if seg == nil || written < end {
		return fmt.Errorf("wal: sync to %d, but only %d bytes were appended", end, written)
	}
	if err := l.syncSegment(seg, upto); err != nil {
		return err
	}
	casMax(&l.synced, written)
	// The sync record: after a process crash it says the records before it
	// were durable, even the last one (see the package doc). It is not
	// synced now; the next sync covers it.
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == seg && l.failure() == nil {
		if err := l.writeLocked(0, nil); err != nil {
			return err
		}
	}
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
	if all && l.cur != nil && l.cur.lastSeq <= seq {
		if err := l.syncSegment(l.cur, l.cur.off); err != nil {
			l.mu.Unlock()
			return err
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

// errClosed is the failure of a closed log.
var errClosed = errors.New("closed")

// Close syncs and closes the files. Records not dropped are read back by
// the next Open.
func (l *Log) Close() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	if l.cur != nil && l.failure() == nil {
		if err := l.syncSegment(l.cur, l.cur.off); err != nil {
			errs = append(errs, err)
		}
	}
	for _, s := range append(l.sealed, l.cur) {
		if s != nil && s.f != nil {
			errs = append(errs, s.f.Close())
			s.f = nil
		}
	}
	l.cur, l.sealed = nil, nil
	l.failed.CompareAndSwap(nil, &failure{errClosed})
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
