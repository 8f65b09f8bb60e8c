package inspect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/sstable/blob"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/atomicfs"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/layout"
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
	Space layout.Space
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

// openFailure says why Pebble could not open dir: a folder that holds no
// store (events.ErrNotFound), an error of the operating system (the
// verification could not run), or else damage, a *DamageError naming the
// file when a check of this package can. Pebble refuses a folder whose
// files it cannot read back, and every other reason it has (a marker
// missing, a MANIFEST naming a table that is missing, an OPTIONS file that
// does not parse) is a file of the store that is not as Pebble left it.
func openFailure(fs vfs.FS, dir string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) && errno != syscall.ENOENT {
		return fmt.Errorf("open store %s read-only: %w", dir, err)
	}
	names, lerr := fs.List(dir)
	if lerr != nil {
		return fmt.Errorf("open store %s read-only: %w", dir, err)
	}
	if !slices.ContainsFunc(names, isStoreFile) {
		return fmt.Errorf("open store %s: %v: %w", dir, err, events.ErrNotFound)
	}
	var de *DamageError
	for _, check := range []error{checkMarkers(fs, dir, names), CheckManifest(fs, dir), checkOptions(fs, dir, names), pebbleDamage(fs, dir, err)} {
		if errors.As(check, &de) {
			return de
		}
	}
	de = &DamageError{File: dir, Offset: -1, Err: fmt.Errorf("pebble cannot open the store: %w", err)}
	if m := pebbleFileRE.FindStringSubmatch(err.Error()); m != nil && errors.Is(err, os.ErrNotExist) {
		// A file the MANIFEST references is missing ("file 000012 (type
		// sstable) unknown to the objstorage provider: file does not
		// exist"): name it.
		ext := ".sst"
		if strings.Contains(err.Error(), "type blob") {
			ext = ".blob"
		}
		de.File = fs.PathJoin(dir, m[1]+ext)
	}
	return de
}

// checkMarkers reports the markers Pebble needs to open a store that
// holds tables: which MANIFEST is current, and the format version. Both
// are empty files whose name is their value (vfs/atomicfs); a folder with
// tables and without them lost them. (Without tables, a missing marker is
// what a crash while Pebble created the folder leaves.)
func checkMarkers(fs vfs.FS, dir string, names []string) error {
	if !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".sst") || strings.HasSuffix(n, ".blob") }) {
		return nil
	}
	for _, m := range []string{"manifest", "format-version"} {
		v, err := atomicfs.ReadMarker(fs, dir, m)
		if err != nil {
			return &DamageError{File: fs.PathJoin(dir, "marker."+m), Offset: -1, Err: fmt.Errorf("the %s marker does not read: %w", m, err)}
		}
		if v == "" {
			return &DamageError{File: fs.PathJoin(dir, "marker."+m), Offset: -1,
				Err: fmt.Errorf("no %s marker (marker.%s.<n>.<value>), though the folder holds tables", m, m)}
		}
	}
	return nil
}

// isStoreFile reports whether name is one of the files Pebble keeps in a
// database's folder (a folder without any holds no store).
func isStoreFile(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob") ||
		strings.HasPrefix(name, "MANIFEST-") || strings.HasPrefix(name, "OPTIONS-") || strings.HasPrefix(name, "marker.")
}

// checkStorage runs the checks of an open store that Pebble does not make,
// each returning a *DamageError: the MANIFEST read to its end
// (CheckManifest), the write-ahead log overlaid without a gap, and the
// meta records present when the folder holds tables (a store writes them
// in its first batch and never deletes them: without them, the tables
// that hold them are not in the version the MANIFEST describes, and the
// store would pass for an empty ledger).
func (in *Inspector) checkStorage() error {
	if err := CheckManifest(in.fs, in.dir); err != nil {
		return err
	}
	if err := in.guard(func() error { return in.overlayWAL(in.fs, in.dir) }); err != nil {
		if de, ok := walDamage(in.fs, in.dir, err); ok {
			return de
		}
		return fmt.Errorf("open store %s read-only: %w", in.dir, err)
	}
	m := in.Meta()
	if !errors.Is(m.FormatErr, events.ErrNotFound) || !errors.Is(m.LedgerErr, events.ErrNotFound) || !errors.Is(m.StateErr, events.ErrNotFound) {
		var de *DamageError
		for _, err := range []error{m.FormatErr, m.LedgerErr, m.StateErr} {
			if errors.As(err, &de) {
				return de
			}
		}
		return nil
	}
	names, err := in.fs.List(in.dir)
	if err != nil {
		return fmt.Errorf("list %s: %w", in.dir, err)
	}
	var data []string
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") || strings.HasSuffix(n, ".blob") {
			data = append(data, n)
		}
	}
	if len(data) == 0 {
		return nil // a Pebble folder a store never wrote to
	}
	file := in.dir
	if name, err := atomicfs.ReadMarker(in.fs, in.dir, "manifest"); err == nil && name != "" {
		file = in.fs.PathJoin(in.dir, name)
	}
	return &DamageError{File: file, Offset: -1, Err: fmt.Errorf(
		"no meta record (format, ledger id, state), though the folder holds %d table and blob files (%s): the MANIFEST does not describe the tables that hold them",
		len(data), strings.Join(data, ", "))}
}

// guard runs a read of Pebble and returns what shows damage (a corruption
// error, or a panic of Pebble's read path) as a *DamageError.
func (in *Inspector) guard(read func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = pebblePanic(in.dir, r)
		}
	}()
	return pebbleDamage(in.fs, in.dir, read())
}

// closeAfterPanic closes an iterator Pebble panicked in, which may panic
// again (its references are not where they should be).
func closeAfterPanic(it *pebble.Iterator) {
	defer func() { _ = recover() }()
	_ = it.Close()
}

// pebbleFileRE finds the file number in the text of a Pebble corruption
// error ("pebble: file 000012: block 0/4096: crc32c checksum mismatch …",
// "pebble: backing file 000012 error: …"). Pebble attaches the path of the
// damaged file (DataCorruptionInfo) to table errors only; blob file errors
// carry it in their text alone. It is read to name the file in a report,
// never to decide anything.
var pebbleFileRE = regexp.MustCompile(`file (\d{6,})\b`)

// pebbleDamage turns an error of Pebble's read path into a *DamageError
// when it shows damaged data (a corruption error), naming the file when
// Pebble does. Other errors are returned unchanged.
func pebbleDamage(fs vfs.FS, dir string, err error) error {
	var de *DamageError
	if err == nil || errors.As(err, &de) || !pebble.IsCorruptionError(err) {
		return err
	}
	d := &DamageError{File: dir, Offset: -1, Err: err}
	if info := pebble.ExtractDataCorruptionInfo(err); info != nil && info.Path != "" {
		d.File = info.Path
	} else if m := pebbleFileRE.FindStringSubmatch(err.Error()); m != nil {
		d.File = storeFile(fs, dir, m[1])
	}
	return d
}

// pebblePanic is a recovered panic of Pebble's read path, as damage:
// Pebble panics on some damaged files (a blob file whose footer fails its
// checksum reaches a type switch that does not expect it), and its Logger's
// Fatalf panics (pebbleslog.Logger) where Pebble gives up on what it read.
func pebblePanic(dir string, r any) *DamageError {
	return &DamageError{File: dir, Offset: -1, Err: fmt.Errorf("pebble panicked reading the store: %v: %w", r, pebble.ErrCorruption)}
}

// storeFile returns the path of the table or blob file numbered num in
// dir, or dir when neither exists.
func storeFile(fs vfs.FS, dir, num string) string {
	for _, ext := range []string{".sst", ".blob"} {
		p := fs.PathJoin(dir, num+ext)
		if _, err := fs.Stat(p); err == nil {
			return p
		}
	}
	return dir
}

// CheckFiles reads every file of the store in dir that a read of the
// ledger depends on and returns the damage found, one *DamageError per
// damaged file, in the order of their names: the current MANIFEST
// (CheckManifest), the latest OPTIONS file (it must parse), and every table
// and blob file (every block against its checksum, footers and indexes
// included). The write-ahead log in greffe-wal/ is checked by
// Open and CheckWAL, which know where its records must start.
//
// It is read-only and reads every table and blob file in full: an auditor
// calls it once damage has shown, to name every damaged file, not on every
// read. A returned error means the folder could not be read (or ctx
// ended), not damage. fs nil means vfs.Default.
func CheckFiles(ctx context.Context, fs vfs.FS, dir string) ([]*DamageError, error) {
	return checkFiles(ctx, fs, dir, true)
}

// CheckTables reads every table file of the store in dir (every block
// against its checksum) and returns the damage found, one *DamageError per
// damaged table, in the order of their names. A read of the ledger reads
// the newest version of each key only, so a table that holds only
// versions a newer one shadows is never read by it, until a compaction
// fails on it: an auditor that read the ledger through checks the tables
// with this. Tables hold keys and small values (events are in blob files,
// which a replay reads in full), so it reads little. Read-only; a
// returned error means the folder could not be read (or ctx ended). fs
// nil means vfs.Default.
func CheckTables(ctx context.Context, fs vfs.FS, dir string) ([]*DamageError, error) {
	return checkFiles(ctx, fs, dir, false)
}

// checkFiles is CheckFiles, or only its tables' part when all is false.
func checkFiles(ctx context.Context, fs vfs.FS, dir string, all bool) ([]*DamageError, error) {
	if fs == nil {
		fs = vfs.Default
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	slices.Sort(names)
	var found []*DamageError
	add := func(err error) error {
		var de *DamageError
		if errors.As(err, &de) {
			found = append(found, de)
			return nil
		}
		return err
	}
	if all {
		if err := add(CheckManifest(fs, dir)); err != nil {
			return nil, err
		}
		if err := add(checkOptions(fs, dir, names)); err != nil {
			return nil, err
		}
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var check func(vfs.FS, string) error
		switch {
		case strings.HasSuffix(name, ".sst"):
			check = checkTable
		case strings.HasSuffix(name, ".blob") && all:
			check = checkBlobFile
		default:
			continue
		}
		if err := add(check(fs, fs.PathJoin(dir, name))); err != nil {
			return nil, err
		}
	}
	return found, nil
}

// checkTable reads every block of the table at path against its checksum.
func checkTable(fs vfs.FS, path string) error {
	return checkReadable(fs, path, func(f objstorage.Readable) (io.Closer, error) {
		opts := &pebble.Options{}
		opts.EnsureDefaults()
		r, err := sstable.NewReader(context.Background(), f, opts.MakeReaderOptions())
		if err != nil {
			return nil, err
		}
		return r, r.ValidateBlockChecksums()
	})
}

// checkBlobFile reads the footer, the index and every value block of the
// blob file at path against their checksums.
func checkBlobFile(fs vfs.FS, path string) error {
	return checkReadable(fs, path, func(f objstorage.Readable) (io.Closer, error) {
		r, err := blob.NewFileReader(context.Background(), f, blob.FileReaderOptions{})
		if err != nil {
			return nil, err
		}
		// Layout reads the index block and every value block.
		_, err = r.Layout()
		return r, err
	})
}

// checkReadable opens path and runs check on it, which returns the reader
// it made (it owns the file from then on) and what it found. Damage, and a
// panic of Pebble's readers, become a *DamageError.
func checkReadable(fs vfs.FS, path string, check func(objstorage.Readable) (io.Closer, error)) (err error) {
	f, err := fs.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("open %s: %w", path, err)
	}
	var owner io.Closer = readable
	defer func() {
		if r := recover(); r != nil {
			err = &DamageError{File: path, Offset: -1, Err: fmt.Errorf("pebble panicked reading the file: %v", r)}
		}
		_ = owner.Close()
	}()
	r, err := check(readable)
	if r != nil {
		owner = r
	}
	if err != nil {
		return &DamageError{File: path, Offset: -1, Err: err}
	}
	return nil
}

// checkOptions parses the OPTIONS file of highest number in names. Pebble
// reads it at open to check the options it is given against the store's;
// a file that does not parse makes the open fail.
func checkOptions(fs vfs.FS, dir string, names []string) error {
	var latest string
	var num uint64
	for _, n := range names {
		s, ok := strings.CutPrefix(n, "OPTIONS-")
		if !ok {
			continue
		}
		if v, err := strconv.ParseUint(s, 10, 64); err == nil && (latest == "" || v > num) {
			latest, num = n, v
		}
	}
	if latest == "" {
		return nil
	}
	path := fs.PathJoin(dir, latest)
	b, err := readFile(fs, path)
	if err != nil {
		return err
	}
	if err := (&pebble.Options{}).Parse(string(b), nil); err != nil {
		return &DamageError{File: path, Offset: -1, Err: fmt.Errorf("does not parse: %w", err)}
	}
	return nil
}

func readFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}
