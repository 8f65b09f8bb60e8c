package pebblelog

import (
	"encoding/binary"

	"github.com/google/uuid"
)

// Key spaces. Each starts with its own byte so that the spaces never
// interleave and each can be scanned or range-deleted on its own. Numbers are
// big-endian so that byte order is numeric order.
//
//	'e' position(8)                     -> canonical event bytes
//	't' index(8)                        -> full leaf tile: the 256 leaf hashes of
//	                                       positions [256·index, 256·index+256)
//	'h' level(1) index(8)               -> 32-byte Merkle node hash, only at levels
//	                                       8, 16, 24, … (the bases of C2SP tiles)
//	's' stream 0x00 version(8)          -> position(8) [count(8)]: a run of
//	                                       the stream's events, see below
//	'i' event id(16)                    -> position(8)
//	'c' size(8)                         -> signed checkpoint note
//	'm' name                            -> metadata (format, ledger id, state)
//	'w' "seq"                           -> seq(8) of the last write-ahead log
//	                                       record applied (node-local)
//
// The tree stores what a C2SP tlog-tiles server serves and nothing more:
// leaf hashes in full 256-leaf tiles (one key per 256 events instead of one
// per event), and the nodes that start the higher tiles. Every other node is
// recomputed from the tile beneath it; the partial leaf tile at the right edge
// is recomputed from the events themselves. Per event the store writes two
// keys (event, id index) plus 32 bytes of tile, and one stream-index key per
// append and stream (below).
//
// Stream names are printable and never contain 0x00, so the separator keeps
// "a" and "ab" apart and "a"'s keys sort before "ab"'s.
//
// The stream index holds runs, not single events: the events one append
// writes to one stream have consecutive versions and positions, and one key
// at the first version maps them all (its position, and their count when
// more than one). An append of a hundred events to a stream writes one index
// key instead of a hundred: the index keys were a third of the keys the
// memtable, flushes and compactions handled under bulk appends.
const (
	prefixEvent      byte = 'e'
	prefixHash       byte = 'h'
	prefixLeafTile   byte = 't'
	prefixStream     byte = 's'
	prefixID         byte = 'i'
	prefixCheckpoint byte = 'c'
	prefixMeta       byte = 'm'
	prefixWAL        byte = 'w'
)

var (
	metaFormat   = []byte("mformat")
	metaLedgerID = []byte("mledger_id")
	metaState    = []byte("mstate")
	walSeqKey    = []byte("wseq")
)

// storeFormat names the layout, the hash, the tree and the write-ahead log;
// Open refuses a store written with another.
const storeFormat = "greffe-ledger/3 event-format=1 hash=sha256 tree=rfc6962 log=greffe-wal stream-index=runs"

// Earlier formats hold the same keys and values, with runs of one event in
// the stream index; Open upgrades them to storeFormat, so that a binary of
// their time refuses the store from then on. formatBeforeLog's binaries
// would open the store without the records only in greffe-wal/ after an
// unclean stop, and lose acknowledged events; formatBeforeRuns's would read
// a run as its first event only.
const (
	formatBeforeLog  = "greffe-ledger/1 event-format=1 hash=sha256 tree=rfc6962"
	formatBeforeRuns = "greffe-ledger/2 event-format=1 hash=sha256 tree=rfc6962 log=greffe-wal"
)

// upgradableFormat reports whether Open upgrades a store of format f.
func upgradableFormat(f string) bool { return f == formatBeforeLog || f == formatBeforeRuns }

func eventKey(pos uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixEvent
	binary.BigEndian.PutUint64(k[1:], pos)
	return k
}

func hashKey(level uint, index uint64) []byte {
	k := make([]byte, 10)
	k[0] = prefixHash
	k[1] = byte(level)
	binary.BigEndian.PutUint64(k[2:], index)
	return k
}

func leafTileKey(index uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixLeafTile
	binary.BigEndian.PutUint64(k[1:], index)
	return k
}

// tileWidth is the number of hashes in a full tile, and tileHeight its
// height in tree levels (C2SP tlog-tiles).
const (
	tileWidth  = 256
	tileHeight = 8
)

func streamKey(stream string, version uint64) []byte {
	return appendStreamKey(make([]byte, 0, 1+len(stream)+1+8), stream, version)
}

func appendStreamKey(dst []byte, stream string, version uint64) []byte {
	dst = append(dst, prefixStream)
	dst = append(dst, stream...)
	dst = append(dst, 0)
	return binary.BigEndian.AppendUint64(dst, version)
}

// streamBounds returns the bounds [lo, hi) of a stream's index keys.
func streamBounds(stream string) (lo, hi []byte) {
	lo = make([]byte, 0, len(stream)+2)
	lo = append(lo, prefixStream)
	lo = append(lo, stream...)
	hi = append(append([]byte(nil), lo...), 1)
	lo = append(lo, 0)
	return lo, hi
}

// appendStreamRun appends the value of a stream-index key: the position of
// the run's first event, and the count when the run holds more than one (a
// run of one keeps the 8-byte value of the formats before runs).
func appendStreamRun(dst []byte, pos, n uint64) []byte {
	dst = binary.BigEndian.AppendUint64(dst, pos)
	if n > 1 {
		dst = binary.BigEndian.AppendUint64(dst, n)
	}
	return dst
}

// parseStreamRun decodes a stream-index value; a 16-byte value with a count
// below 2 is not canonical and refused.
func parseStreamRun(v []byte) (pos, n uint64, ok bool) {
	switch len(v) {
	case 8:
		return binary.BigEndian.Uint64(v), 1, true
	case 16:
		n = binary.BigEndian.Uint64(v[8:])
		return binary.BigEndian.Uint64(v), n, n >= 2 && n <= 1<<32
	}
	return 0, 0, false
}

func idKey(id uuid.UUID) []byte { return appendIDKey(make([]byte, 0, 17), id) }

func appendIDKey(dst []byte, id uuid.UUID) []byte {
	dst = append(dst, prefixID)
	return append(dst, id[:]...)
}

func checkpointKey(size uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixCheckpoint
	binary.BigEndian.PutUint64(k[1:], size)
	return k
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
