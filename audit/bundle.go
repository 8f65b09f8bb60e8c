package audit

import "encoding/binary"

// ParseEntryBundle splits a C2SP tlog-tiles entry bundle (each entry a
// big-endian uint16 length, then that many bytes) into at most max entries,
// aliasing b. rest is the number of bytes left over: a truncated entry, or
// more than max entries.
func ParseEntryBundle(b []byte, max int) (entries [][]byte, rest int) {
	for len(b) >= 2 && len(entries) < max {
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			break
		}
		entries = append(entries, b[2:2+n:2+n])
		b = b[2+n:]
	}
	return entries, len(b)
}
