package pebblelog

import (
	"fmt"
	"strings"

	"github.com/greffe/greffe/events"
)

// Damaged storage. A file of the store that does not read back as it was
// written (a flipped byte, a truncated or overwritten file) is not a fault
// of the ledger's content that the auditor can locate by recomputing
// hashes: what Pebble cannot read, nobody can verify. It is reported as a
// *DamageError naming the file, so that an auditor reports it as such and
// an operator knows which file to restore from a copy.

// DamageError reports a file of the store that fails a checksum or a
// format check. It matches events.ErrCorrupt (errors.Is) and unwraps to the
// error that showed the damage.
type DamageError struct {
	// File is the path of the damaged file (the store's directory joined
	// with its name), or the directory itself when the damage cannot be
	// pinned on one file.
	File string
	// Offset is where in File the damage starts, in bytes (the record or
	// chunk that fails); -1 when unknown.
	Offset int64
	// Space is the key space a scan was reading when the damage showed; 0
	// when it showed outside a scan.
	Space Space
	// Key is the key whose value did not read back; nil when it was the
	// keys themselves (a block of them) that did not.
	Key []byte
	// After is the last key of Space read intact before the damage showed;
	// nil when none was, or outside a scan.
	After []byte
	// Err is what showed the damage.
	Err error
}

func (e *DamageError) Error() string {
	var b strings.Builder
	b.WriteString("damaged file ")
	b.WriteString(e.File)
	if e.Offset >= 0 {
		fmt.Fprintf(&b, " at offset %d", e.Offset)
	}
	if e.Space != 0 {
		fmt.Fprintf(&b, " (reading the %s key space", e.Space)
		switch {
		case e.Key != nil:
			fmt.Fprintf(&b, ", the value of key %x", e.Key)
		case e.After != nil:
			fmt.Fprintf(&b, " after key %x", e.After)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *DamageError) Unwrap() error { return e.Err }

// Is makes every DamageError match events.ErrCorrupt.
func (e *DamageError) Is(target error) bool { return target == events.ErrCorrupt }

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
