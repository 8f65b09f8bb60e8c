package layout

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// State is the sequencer state, the value of MetaState, written with every
// batch:
//
//	size(8) last_recorded(8) applied_index(8) n(1) n×hash(32)
//
// big-endian; the hashes are the compact range [0, size) of the tree, left
// to right.
type State struct {
	// Size is the number of events the state claims.
	Size uint64
	// LastRecorded is the recorded_at of the last event, Unix nanoseconds.
	LastRecorded int64
	// Applied is the raft index of the last applied batch (0 on one node).
	Applied uint64
	// Range holds the hashes of the compact range [0, Size), left to right.
	Range [][]byte
}

// Encode lays out the state as stored.
func (s State) Encode() []byte {
	b := make([]byte, 0, 25+32*len(s.Range))
	b = binary.BigEndian.AppendUint64(b, s.Size)
	b = binary.BigEndian.AppendUint64(b, uint64(s.LastRecorded))
	b = binary.BigEndian.AppendUint64(b, s.Applied)
	b = append(b, byte(len(s.Range)))
	for _, h := range s.Range {
		b = append(b, h...)
	}
	return b
}

// DecodeState decodes a stored state. The hashes are copies. The error
// says what is wrong with a value of the wrong shape; the caller marks it
// as corruption (events.ErrCorrupt).
func DecodeState(b []byte) (State, error) {
	if len(b) < 25 || len(b) != 25+32*int(b[24]) {
		return State{}, fmt.Errorf("state of %d bytes", len(b))
	}
	s := State{
		Size:         binary.BigEndian.Uint64(b),
		LastRecorded: int64(binary.BigEndian.Uint64(b[8:])),
		Applied:      binary.BigEndian.Uint64(b[16:]),
	}
	for i := 0; i < int(b[24]); i++ {
		s.Range = append(s.Range, bytes.Clone(b[25+32*i:57+32*i]))
	}
	return s, nil
}
