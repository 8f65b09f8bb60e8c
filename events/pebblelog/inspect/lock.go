package inspect

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// A store's folder is used by one process at a time: a running node holds
// its locks (Pebble's LOCK inside, and the store's own <dir>.lock beside
// it, events/pebblelog/folder.go). Whoever meets one held says so in the
// same words.

// ErrLocked is returned by Open when another process (a running node)
// holds the store, and matched by the errors of the store's own open that
// meet a folder in use (InUse).
var ErrLocked = errors.New("pebblelog: store in use by another process; stop the node or inspect a copy")

// IsLockError reports whether err is a failure to take a directory lock
// (Pebble's, or the store folder's through vfs.FS.Lock): fcntl's
// EAGAIN/EACCES from another process, or Pebble's own refusal within this
// process.
func IsLockError(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) ||
		strings.Contains(err.Error(), "lock held by current process")
}

// InUse words a lock error met opening the store in dir (Pebble's
// EAGAIN: "resource temporarily unavailable", which named neither the
// folder's user nor what to do, issue #16): the store's Open and CheckWAL
// return it. It matches ErrLocked and err.
func InUse(dir string, err error) error { return &inUse{dir: dir, err: err} }

// inUse is ErrLocked met opening a store for writing, with the folder and
// Pebble's error.
type inUse struct {
	dir string
	err error
}

func (e *inUse) Error() string {
	return fmt.Sprintf("the store in %s is in use by another process (a greffe node running on this folder?): stop it first, or use another data folder (%v)", e.dir, e.err)
}

// Unwrap returns ErrLocked and Pebble's error.
func (e *inUse) Unwrap() []error { return []error{ErrLocked, e.err} }
