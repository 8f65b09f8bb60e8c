package bench

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync is what Pebble's write-ahead log calls on Linux (not fsync,
// which also writes back the inode's times).
func fdatasync(f *os.File) error {
	for {
		err := unix.Fdatasync(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}
