package pebblelog

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/greffe/greffe/events/pebblelog/inspect"
)

// The store's folder and its siblings (issue #20).
//
//	<dir>                 the store (Pebble and greffe-wal/)
//	<dir>.lock            the folder's lock, held by an open Store for its whole life
//	<dir>.restore/        a snapshot Restore is staging; complete (flushed, synced,
//	                      checked) before the store is moved aside
//	<dir>.old/            the store a Restore replaced, until the new one has opened
//	<dir>.old.reap/       the same once the new one opened, being removed
//	<dir>.failed-restore/ a restored store that did not open, kept for the operator
//	<dir>.snapshots/      raft snapshots' Pebble checkpoints being streamed
//	<dir>.backups/        backup copies being streamed (backup.go)
//
// The lock is a file beside the store, not Pebble's LOCK inside it: a
// restore renames the folder that holds Pebble's, and between closing the
// old store and opening the new one no Pebble lock is held at all. The
// sibling folders are used by the live store, so nothing may touch them
// without this lock: Open takes it before it settles them.
//
// # The swap
//
// Restore (snapshot.go) stages the snapshot in <dir>.restore, checks it,
// and then, with the live store closed:
//
//  1. renames <dir> to <dir>.old, and syncs the parent folder;
//  2. renames <dir>.restore to <dir>, and syncs the parent folder;
//  3. opens <dir>: if it does not open, renames it to <dir>.failed-restore,
//     renames <dir>.old back to <dir>, and reopens that;
//  4. once <dir> opened, renames <dir>.old to <dir>.old.reap, syncs the
//     parent folder, and removes it.
//
// A crash can stop it anywhere. settleFolder, under the lock, before the
// store opens, reads which folders exist and finishes or undoes the swap:
// <dir>.old is always a whole store that was live, and it is removed only
// once a store at <dir> has opened and verified (Open: its tree rebuilt
// from its events is the one its state holds). A store at <dir>.restore is
// complete only when <dir>.old exists beside it (it was renamed after it
// was complete); otherwise it is dropped.

func lockPath(dir string) string         { return strings.TrimRight(dir, "/") + ".lock" }
func restoreDir(dir string) string       { return strings.TrimRight(dir, "/") + ".restore" }
func oldDir(dir string) string           { return strings.TrimRight(dir, "/") + ".old" }
func reapDir(dir string) string          { return strings.TrimRight(dir, "/") + ".old.reap" }
func failedRestoreDir(dir string) string { return strings.TrimRight(dir, "/") + ".failed-restore" }

// lockFolder takes the folder's lock, creating the folder's parent if
// needed. Another holder (a node running on the folder, in this process or
// another) makes it fail with an error that matches inspect.ErrLocked.
func lockFolder(fs vfs.FS, dir string) (io.Closer, error) {
	dir = strings.TrimRight(dir, "/")
	if err := fs.MkdirAll(fs.PathDir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	l, err := fs.Lock(lockPath(dir))
	if err != nil {
		if inspect.IsLockError(err) {
			return nil, inspect.InUse(dir, err)
		}
		return nil, fmt.Errorf("lock %s: %w", lockPath(dir), err)
	}
	return l, nil
}

func exists(fs vfs.FS, p string) bool {
	_, err := fs.Stat(p)
	return err == nil
}

// settleFolder finishes or undoes what a crash left of a swap (see above)
// and removes leftovers nobody uses, for the store in dir. oldWaits reports
// that <dir>.old is kept until the store at <dir> opens: the caller then
// removes it with reapOld, or puts it back with putBack if the store does
// not open. REQUIRES: the folder's lock held.
func settleFolder(fs vfs.FS, dir string, log *slog.Logger) (oldWaits bool, err error) {
	dir = strings.TrimRight(dir, "/")
	tmp, old := restoreDir(dir), oldDir(dir)
	parent := fs.PathDir(dir)
	// A store being removed was replaced by one that opened.
	if err := removeAll(fs, reapDir(dir)); err != nil {
		return false, err
	}
	switch haveDir, haveTmp, haveOld := exists(fs, dir), exists(fs, tmp), exists(fs, old); {
	case !haveDir && haveOld && haveTmp:
		// Crash between the renames: the staged store was complete before
		// the live one was moved aside. Finish the swap; Open checks it.
		log.Warn("finishing a snapshot restore a crash interrupted", "dir", dir)
		if err := renameSynced(fs, tmp, dir, parent); err != nil {
			return false, fmt.Errorf("finish the interrupted restore: %w", err)
		}
	case !haveDir && haveOld:
		// Crash after the store was moved aside, or while a failed swap
		// was being undone: the old store comes back.
		log.Warn("putting back the store a snapshot restore had moved aside", "dir", dir, "from", old)
		if err := renameSynced(fs, old, dir, parent); err != nil {
			return false, fmt.Errorf("put back %s: %w", old, err)
		}
	case !haveDir && haveTmp:
		// No store, and a staged one that nothing says is complete. This
		// is no state a swap goes through (the store is moved aside only
		// once the staged one is complete, and renamed to .old): opening
		// would create an empty ledger, and removing the folder could
		// delete the only copy someone has.
		return false, fmt.Errorf("open store %s: the store is missing and %s holds a snapshot restore that may be incomplete: refusing to guess; move %s into place if it is whole, or remove it", dir, tmp, tmp)
	}
	// The store is in place (or never was: a new ledger). What remains
	// staged is a restore that never reached the swap.
	if err := removeAll(fs, tmp); err != nil {
		return false, err
	}
	// Snapshot checkpoints are only held while the store is open.
	if err := removeAll(fs, snapshotsDir(dir)); err != nil {
		return false, err
	}
	return exists(fs, old), nil
}

// reapOld removes <dir>.old, once the store at <dir> opened: renamed first,
// so that a crash while removing never leaves a partial store under a name
// settleFolder would put back.
func reapOld(fs vfs.FS, dir string) error {
	dir = strings.TrimRight(dir, "/")
	if err := renameSynced(fs, oldDir(dir), reapDir(dir), fs.PathDir(dir)); err != nil {
		return err
	}
	return removeAll(fs, reapDir(dir))
}

// putBack moves the store at dir (one that does not open) to
// <dir>.failed-restore, replacing an earlier one there, and <dir>.old back
// to dir. REQUIRES: the folder's lock held, dir closed, <dir>.old a store.
func putBack(fs vfs.FS, dir string) error {
	dir = strings.TrimRight(dir, "/")
	failed, parent := failedRestoreDir(dir), fs.PathDir(dir)
	if err := removeAll(fs, failed); err != nil {
		return err
	}
	if exists(fs, dir) {
		if err := renameSynced(fs, dir, failed, parent); err != nil {
			return err
		}
	}
	return renameSynced(fs, oldDir(dir), dir, parent)
}

// renameSynced renames from to to and syncs parent, so that the rename
// survives a power loss before the next step relies on it.
func renameSynced(fs vfs.FS, from, to, parent string) error {
	if err := fs.Rename(from, to); err != nil {
		return err
	}
	return syncDir(fs, parent)
}

func removeAll(fs vfs.FS, p string) error {
	if err := fs.RemoveAll(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return nil
}

// Recover settles what a crash left of a Restore or of snapshots, for the
// store in dir (see settleFolder), under the folder's lock: on a folder a
// live store holds it fails with inspect.ErrLocked and touches nothing. It never
// removes the store a restore replaced (<dir>.old): only Open does, once
// the store in dir opened. fs nil means the OS.
//
// Deprecated: Open settles the folder itself, under the lock it keeps; a
// caller has no need to call Recover first.
func Recover(dir string, fs vfs.FS) error {
	if fs == nil {
		fs = vfs.Default
	}
	lock, err := lockFolder(fs, dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	_, err = settleFolder(fs, dir, slog.New(slog.DiscardHandler))
	return err
}
