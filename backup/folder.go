package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
)

// Reading a backup folder someone else may have written (issue #20).
//
// A backup folder is input: whoever holds it may have put anything in it.
// It holds folders and regular files only. A symlink would make verify
// hash, and restore copy, a file outside the folder (or a folder's whole
// tree) that the manifest seems to list; a named pipe or a device would
// hang or feed the reader. So every entry is looked at without following
// it (the walk), anything else than a folder or a regular file is a fault
// (KindFileNotRegular), and every file is opened through an os.Root on the
// folder (no path, and no symlink swapped in after the walk, leads out of
// it), non-blocking (a named pipe swapped in does not hang the open), and
// read only when what was opened is the regular file the walk saw.

// ErrNotRegular is returned when a path of a backup folder is not a
// regular file (a symlink, a folder, a named pipe, a device, a socket).
var ErrNotRegular = errors.New("backup: not a regular file")

// folder is a backup folder (or a key folder) opened for reading.
type folder struct {
	dir  string // as given, resolved once: the folder itself may be a symlink
	root *os.Root
}

// openFolder opens dir. A dir that is itself a symlink (/backups/latest)
// is resolved once: only what is inside the folder must be plain.
func openFolder(dir string) (*folder, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("backup: %s is not a folder", dir)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	return &folder{dir: real, root: root}, nil
}

func (f *folder) Close() error { return f.root.Close() }

// path returns the OS path of name (slash-separated, relative).
func (f *folder) path(name string) string { return filepath.Join(f.dir, filepath.FromSlash(name)) }

// walk returns the regular files of the folder as slash paths relative to
// it, sorted, and a KindFileNotRegular fault for every entry that is
// neither a folder nor a regular file (not followed, not descended into).
// Pebble's lock file is left out.
func (f *folder) walk() ([]string, []Fault, error) {
	var files []string
	var faults []Fault
	err := fs.WalkDir(f.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch t := d.Type(); {
		case p == ".", t.IsDir():
			return nil
		case t.IsRegular():
			if p != pebbleLock {
				files = append(files, p)
			}
		default:
			faults = append(faults, Fault{Kind: KindFileNotRegular, File: p,
				Detail: fmt.Sprintf("a %s, not a regular file: a backup holds folders and regular files only", describeType(t))})
		}
		return nil
	})
	sort.Strings(files)
	return files, faults, err
}

// describeType names a file type for a fault.
func describeType(t fs.FileMode) string {
	switch {
	case t&fs.ModeSymlink != 0:
		return "symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "named pipe"
	case t&fs.ModeSocket != 0:
		return "socket"
	case t&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// open opens the regular file name for reading. It fails with ErrNotRegular
// when name is anything else, even when it was swapped in after the walk.
func (f *folder) open(name string) (*os.File, error) {
	lfi, err := f.root.Lstat(filepath.FromSlash(name))
	if err != nil {
		return nil, err
	}
	if !lfi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is a %s", ErrNotRegular, name, describeType(lfi.Mode().Type()))
	}
	// O_NONBLOCK: a named pipe swapped in between the Lstat and here must
	// not block the open (it has no effect on a regular file).
	file, err := f.root.OpenFile(filepath.FromSlash(name), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := file.Stat()
	if err == nil && (!fi.Mode().IsRegular() || !os.SameFile(fi, lfi)) {
		err = fmt.Errorf("%w: %s changed while it was opened", ErrNotRegular, name)
	}
	if err != nil {
		file.Close()
		return nil, err
	}
	return file, nil
}

// readFile reads a whole regular file of at most limit bytes.
func (f *folder) readFile(name string, limit int64) ([]byte, error) {
	file, err := f.open(name)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: over %d bytes", name, limit)
	}
	return b, nil
}

// hash returns the size and hex SHA-256 of a regular file.
func (f *folder) hash(name string) (int64, string, error) {
	file, err := f.open(name)
	if err != nil {
		return 0, "", err
	}
	defer file.Close()
	h := sha256.New()
	n, err := io.Copy(h, file)
	if err != nil {
		return n, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}
