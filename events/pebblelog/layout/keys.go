package layout

import (
	"encoding/binary"
	"fmt"
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

// Space names a key space by its prefix byte.
type Space byte

// The key spaces.
const (
	SpaceEvents      Space = 'e' // position(8) -> event bytes
	SpaceLeafTiles   Space = 't' // index(8) -> 256 leaf hashes
	SpaceNodes       Space = 'h' // level(1) index(8) -> node hash
	SpaceStreams     Space = 's' // stream 0x00 version(8) -> position(8) [count(8)]
	SpaceIDs         Space = 'i' // id(16) -> position(8)
	SpaceCheckpoints Space = 'c' // size(8) -> signed note
	SpaceMeta        Space = 'm' // name -> metadata
	SpaceWAL         Space = 'w' // "seq" -> seq(8), node-local
)

// String names the key space, for messages.
func (s Space) String() string {
	switch s {
	case SpaceEvents:
		return "event"
	case SpaceLeafTiles:
		return "leaf tile"
	case SpaceNodes:
		return "tree node"
	case SpaceStreams:
		return "stream index"
	case SpaceIDs:
		return "event-id index"
	case SpaceCheckpoints:
		return "checkpoint"
	case SpaceMeta:
		return "meta"
	}
	return fmt.Sprintf("%q", byte(s))
}

// Bounds returns the bounds [lo, hi) of every key of the space.
func (s Space) Bounds() (lo, hi []byte) { return []byte{byte(s)}, []byte{byte(s) + 1} }

// The keys of single records, prefix byte included.
const (
	// MetaFormat holds the store's format (StoreFormat).
	MetaFormat = "mformat"
	// MetaLedgerID holds the ledger's identity.
	MetaLedgerID = "mledger_id"
	// MetaState holds the sequencer state (State).
	MetaState = "mstate"
	// WALSeq holds the seq of the last write-ahead log record applied
	// (AppendWALSeq): node-local, never replicated.
	WALSeq = "wseq"
)

// Replicated reports whether key belongs to the replicated state, the
// keys a raft snapshot carries: every key of the event, tree, stream and
// id spaces, and the format, ledger id and state records. Checkpoints
// (signed by this node) and the write-ahead log's seq stay with the node.
func Replicated(key []byte) bool {
	if len(key) == 0 {
		return false
	}
	switch Space(key[0]) {
	case SpaceEvents, SpaceLeafTiles, SpaceNodes, SpaceStreams, SpaceIDs:
		return true
	case SpaceMeta:
		k := string(key)
		return k == MetaFormat || k == MetaLedgerID || k == MetaState
	}
	return false
}

// ReplicatedSpaces are the key spaces Replicated takes keys of, in
// prefix order (the meta space only in part).
func ReplicatedSpaces() []Space {
	return []Space{SpaceEvents, SpaceNodes, SpaceIDs, SpaceMeta, SpaceStreams, SpaceLeafTiles}
}

// Tile geometry (C2SP tlog-tiles): TileWidth is the number of hashes in a
// full tile, TileHeight its height in tree levels. Nodes are stored at
// levels TileHeight, 2·TileHeight, ….
const (
	TileWidth  = 256
	TileHeight = 8
)

// EventKey returns the key of the event at pos.
func EventKey(pos uint64) []byte { return u64Key(SpaceEvents, pos) }

// ParseEventKey returns the position of an event key; ok is false for a
// key of another shape.
func ParseEventKey(k []byte) (pos uint64, ok bool) { return parseU64Key(SpaceEvents, k) }

// NodeKey returns the key of the stored node (level, index).
func NodeKey(level uint, index uint64) []byte {
	k := make([]byte, 10)
	k[0] = byte(SpaceNodes)
	k[1] = byte(level)
	binary.BigEndian.PutUint64(k[2:], index)
	return k
}

// ParseNodeKey returns the level and index of a node key.
func ParseNodeKey(k []byte) (level uint, index uint64, ok bool) {
	if len(k) != 10 || Space(k[0]) != SpaceNodes {
		return 0, 0, false
	}
	return uint(k[1]), binary.BigEndian.Uint64(k[2:]), true
}

// LeafTileKey returns the key of leaf tile index.
func LeafTileKey(index uint64) []byte { return u64Key(SpaceLeafTiles, index) }

// ParseLeafTileKey returns the tile index of a leaf tile key.
func ParseLeafTileKey(k []byte) (index uint64, ok bool) { return parseU64Key(SpaceLeafTiles, k) }

// StreamKey returns the stream-index key of (stream, version).
func StreamKey(stream string, version uint64) []byte {
	return AppendStreamKey(make([]byte, 0, 1+len(stream)+1+8), stream, version)
}

// AppendStreamKey appends the stream-index key of (stream, version) to dst.
func AppendStreamKey(dst []byte, stream string, version uint64) []byte {
	dst = append(dst, byte(SpaceStreams))
	dst = append(dst, stream...)
	dst = append(dst, 0)
	return binary.BigEndian.AppendUint64(dst, version)
}

// StreamBounds returns the bounds [lo, hi) of a stream's index keys.
func StreamBounds(stream string) (lo, hi []byte) {
	lo = make([]byte, 0, len(stream)+2)
	lo = append(lo, byte(SpaceStreams))
	lo = append(lo, stream...)
	hi = append(append([]byte(nil), lo...), 1)
	lo = append(lo, 0)
	return lo, hi
}

// ParseStreamKey returns the stream name and version of a stream-index
// key. The stream aliases k.
func ParseStreamKey(k []byte) (stream []byte, version uint64, ok bool) {
	if len(k) < 1+1+8 || Space(k[0]) != SpaceStreams || k[len(k)-9] != 0 {
		return nil, 0, false
	}
	return k[1 : len(k)-9], binary.BigEndian.Uint64(k[len(k)-8:]), true
}

// StreamRun returns the stream-index value of a run of count events at pos.
func StreamRun(pos, count uint64) []byte { return AppendStreamRun(nil, pos, count) }

// AppendStreamRun appends the value of a stream-index key: the position of
// the run's first event, and the count when the run holds more than one (a
// run of one keeps the 8-byte value of the formats before runs).
func AppendStreamRun(dst []byte, pos, count uint64) []byte {
	dst = binary.BigEndian.AppendUint64(dst, pos)
	if count > 1 {
		dst = binary.BigEndian.AppendUint64(dst, count)
	}
	return dst
}

// ParseStreamRun decodes a stream-index value: the run of count events
// starting at the key's version is at positions [pos, pos+count). A
// 16-byte value with a count below 2 is not canonical and refused.
func ParseStreamRun(v []byte) (pos, count uint64, ok bool) {
	switch len(v) {
	case 8:
		return binary.BigEndian.Uint64(v), 1, true
	case 16:
		count = binary.BigEndian.Uint64(v[8:])
		return binary.BigEndian.Uint64(v), count, count >= 2 && count <= 1<<32
	}
	return 0, 0, false
}

// IDKey returns the event-id index key of id.
func IDKey(id [16]byte) []byte { return AppendIDKey(make([]byte, 0, 17), id) }

// AppendIDKey appends the event-id index key of id to dst.
func AppendIDKey(dst []byte, id [16]byte) []byte {
	dst = append(dst, byte(SpaceIDs))
	return append(dst, id[:]...)
}

// ParseIDKey returns the event id of an event-id index key.
func ParseIDKey(k []byte) (id [16]byte, ok bool) {
	if len(k) != 17 || Space(k[0]) != SpaceIDs {
		return id, false
	}
	copy(id[:], k[1:])
	return id, true
}

// CheckpointKey returns the key of the stored checkpoint of size.
func CheckpointKey(size uint64) []byte { return u64Key(SpaceCheckpoints, size) }

// ParseCheckpointKey returns the size of a checkpoint key.
func ParseCheckpointKey(k []byte) (size uint64, ok bool) { return parseU64Key(SpaceCheckpoints, k) }

// ParsePosition decodes an event-id index value (a big-endian position).
func ParsePosition(v []byte) (pos uint64, ok bool) {
	if len(v) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(v), true
}

// AppendWALSeq appends the value of WALSeq: seq, big-endian.
func AppendWALSeq(dst []byte, seq uint64) []byte { return binary.BigEndian.AppendUint64(dst, seq) }

// ParseWALSeq decodes the value of WALSeq. The error says what is wrong
// with a value of the wrong shape; the caller marks it as corruption
// (events.ErrCorrupt), as every decoder of this package leaves it to.
func ParseWALSeq(v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("%s holds %d bytes, want 8", WALSeq, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

func u64Key(s Space, v uint64) []byte {
	k := make([]byte, 9)
	k[0] = byte(s)
	binary.BigEndian.PutUint64(k[1:], v)
	return k
}

func parseU64Key(s Space, k []byte) (uint64, bool) {
	if len(k) != 9 || Space(k[0]) != s {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}
