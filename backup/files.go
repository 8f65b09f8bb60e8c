package backup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrNotEmpty is returned when the folder a backup or a restore would
// create already holds something: nothing is ever written over.
var ErrNotEmpty = errors.New("backup: the destination folder is not empty")

// checkTarget refuses a destination that exists and is not an empty
// folder.
func checkTarget(fsys vfs.FS, dir string) error {
	fi, err := fsys.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%w: %s is a file", ErrNotEmpty, dir)
	}
	names, err := fsys.List(dir)
	if err != nil {
		return err
	}
	if len(names) > 0 {
		return fmt.Errorf("%w: %s holds %d entries (%s, …); give a new or empty folder", ErrNotEmpty, dir, len(names), names[0])
	}
	return nil
}

// stagingMarker marks a staging folder as greffe's own, so that a rerun
// after a crash may delete it: a folder of the same name without it is
// someone else's and is never touched.
const stagingMarker = ".greffe-incomplete"

// staging is a folder filled next to its final place and renamed into
// place only once complete and synced: a crash at any point leaves the
// final folder absent (or empty), never half-filled, and the staging
// folder, which the next run removes.
type staging struct {
	fs   vfs.FS
	dir  string // the final folder
	tmp  string // dir + suffix
	dirs []string
}

// openStaging prepares dir+suffix, removing what an interrupted run left
// there. REQUIRES: checkTarget(dir) passed.
func openStaging(fsys vfs.FS, dir, suffix string) (*staging, error) {
	dir = strings.TrimRight(dir, "/")
	st := &staging{fs: fsys, dir: dir, tmp: dir + suffix}
	if _, err := fsys.Stat(st.tmp); err == nil {
		if _, err := fsys.Stat(fsys.PathJoin(st.tmp, stagingMarker)); err != nil {
			return nil, fmt.Errorf("%w: %s exists and is not a folder an interrupted greffe run left (no %s in it): move it away", ErrNotEmpty, st.tmp, stagingMarker)
		}
		if err := fsys.RemoveAll(st.tmp); err != nil {
			return nil, fmt.Errorf("remove the interrupted run's %s: %w", st.tmp, err)
		}
	}
	if err := fsys.MkdirAll(st.tmp, 0o700); err != nil {
		return nil, err
	}
	f, err := fsys.Create(fsys.PathJoin(st.tmp, stagingMarker), vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return nil, err
	}
	if err := syncDir(fsys, fsys.PathDir(st.tmp)); err != nil {
		return nil, err
	}
	return st, nil
}

// create creates the file name (slash-separated) in the staging folder,
// with its parent folders. Files are made private (0600): a backup and a
// data folder hold private keys.
func (st *staging) create(name string) (vfs.File, error) {
	p := st.fs.PathJoin(st.tmp, filepath.FromSlash(name))
	parent := st.fs.PathDir(p)
	if parent != st.tmp {
		if err := st.fs.MkdirAll(parent, 0o700); err != nil {
			return nil, err
		}
		st.noteDir(parent)
	}
	f, err := st.fs.Create(p, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	// vfs creates files 0666 (less the umask); the folders above are 0700
	// anyway. A path that is not on the OS (an in-memory vfs) has nothing
	// to change.
	if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

func (st *staging) noteDir(d string) {
	for _, have := range st.dirs {
		if have == d {
			return
		}
	}
	st.dirs = append(st.dirs, d)
}

// writeFile writes a whole file, synced.
func (st *staging) writeFile(name string, b []byte) error {
	f, err := st.create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// commit syncs the staging folder's directories, renames it into place and
// removes the marker. REQUIRES: every file was synced.
func (st *staging) commit() error {
	// Deepest first, so that each folder's entry is synced after its
	// contents.
	sort.Slice(st.dirs, func(i, j int) bool { return len(st.dirs[i]) > len(st.dirs[j]) })
	for _, d := range append(st.dirs, st.tmp) {
		if err := syncDir(st.fs, d); err != nil {
			return fmt.Errorf("sync %s: %w", d, err)
		}
	}
	// An empty destination folder is replaced (rename does not replace a
	// folder).
	if _, err := st.fs.Stat(st.dir); err == nil {
		if err := st.fs.Remove(st.dir); err != nil {
			return fmt.Errorf("replace the empty %s: %w", st.dir, err)
		}
	}
	if err := st.fs.Rename(st.tmp, st.dir); err != nil {
		return err
	}
	if err := syncDir(st.fs, st.fs.PathDir(st.dir)); err != nil {
		return err
	}
	// A crash before this leaves a complete folder holding the marker,
	// which nothing reads.
	if err := st.fs.Remove(st.fs.PathJoin(st.dir, stagingMarker)); err != nil {
		return err
	}
	return syncDir(st.fs, st.dir)
}

// abort removes the staging folder (best effort: what is left, the next
// run removes).
func (st *staging) abort() { _ = st.fs.RemoveAll(st.tmp) }

func syncDir(fsys vfs.FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
