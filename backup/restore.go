package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

// ErrKeys wraps the problems of the keys a restore is given: none for a
// backup taken without keys, some for a backup that has its own, or keys
// that do not verify the backup's checkpoint.
var ErrKeys = errors.New("backup: keys")

// RestoreConfig configures Restore. The zero value restores a backup with
// keys on the OS's filesystem.
type RestoreConfig struct {
	// Keys is a node's key folder (<data>/keys of the original node, or a
	// copy) to take the keys from, for a backup taken without keys. It must
	// be empty for a backup that holds its keys.
	Keys string
	// FS is where the data folder is written. Nil: the OS. Tests wrap it to
	// inject failures (Pebble's vfs/errorfs).
	FS vfs.FS
	// Progress, when set, is called with the bytes copied and the total.
	Progress func(done, total int64)
}

// RestoreResult describes a restored data folder.
type RestoreResult struct {
	// Data is the new data folder; LedgerID, Size and Root what its ledger
	// holds (a node opened on it serves this head).
	Data     string `json:"data"`
	LedgerID string `json:"ledger_id"`
	Size     uint64 `json:"size"`
	Root     []byte `json:"root"`
	// RaftIndex is the raft index recorded in the ledger (0: the backup
	// was taken from a single node).
	RaftIndex uint64        `json:"raft_index"`
	Files     int           `json:"files"`
	Bytes     int64         `json:"bytes"`
	Elapsed   time.Duration `json:"elapsed_ns"`
}

// Restore makes a new node data folder, data, from the backup folder from:
// the ledger and the keys, nothing else (no raft state: the node starts as
// a single node, or seeds a new cluster with --bootstrap; docs/CLUSTER.md).
//
// It refuses a data folder that exists and is not empty (ErrNotEmpty). It
// checks the manifest first (every file present with its size and SHA-256,
// no other: a *FaultError otherwise, and nothing is written), then copies
// into a staging folder next to data, data + ".restoring", hashing each
// file again as it is copied; it checks the copied ledger's recorded state
// against the manifest, syncs everything, and only then renames the
// staging folder to data. A failure or a crash at any point leaves data
// absent; the staging folder is removed on failure, and by the next run
// after a crash.
//
// The full verification of the ledger is Verify (`greffe backup verify`);
// Restore does not replay the events.
func Restore(ctx context.Context, from, data string, cfg RestoreConfig) (*RestoreResult, error) {
	start := time.Now()
	if cfg.FS == nil {
		cfg.FS = vfs.Default
	}
	if err := checkTarget(cfg.FS, data); err != nil {
		return nil, err
	}
	if fi, err := os.Stat(from); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("backup: %s is not a backup folder: %v", from, err)
	}
	m, faults := readManifest(from)
	if len(faults) > 0 {
		return nil, &FaultError{Dir: from, Faults: faults}
	}
	faults, err := checkFiles(from, m)
	if err != nil {
		return nil, err
	}
	if len(faults) > 0 {
		return nil, &FaultError{Dir: from, Faults: faults}
	}
	keys, err := restoreKeys(from, m, cfg.Keys)
	if err != nil {
		return nil, err
	}

	var plan []copyFile
	var total int64
	for _, f := range m.Files {
		if strings.HasPrefix(f.Path, LedgerDir+"/") || strings.HasPrefix(f.Path, KeysDir+"/") {
			plan = append(plan, copyFile{name: f.Path, src: filepath.Join(from, filepath.FromSlash(f.Path)), want: f})
			total += f.Size
		}
	}
	plan = append(plan, keys...)
	for _, k := range keys {
		total += k.want.Size
	}

	st, err := openStaging(cfg.FS, data, ".restoring")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			st.abort()
		}
	}()
	var done int64
	for _, c := range plan {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := st.copy(c, func(n int) {
			done += int64(n)
			if cfg.Progress != nil {
				cfg.Progress(done, total)
			}
		}); err != nil {
			return nil, fmt.Errorf("restore %s: %w", c.name, err)
		}
	}
	ls, err := pebblelog.ReadLedgerState(cfg.FS.PathJoin(st.tmp, LedgerDir), cfg.FS)
	if err != nil {
		return nil, fmt.Errorf("restore: the copied ledger: %w", err)
	}
	if ls.LedgerID != m.LedgerID || ls.Head.Size != m.Size || !bytes.Equal(ls.Head.Root[:], m.Root) {
		return nil, fmt.Errorf("restore: the copied ledger records ledger %s with %d events, the manifest says %s with %d (or another root): %w",
			ls.LedgerID, ls.Head.Size, m.LedgerID, m.Size, events.ErrCorrupt)
	}
	if err := st.commit(); err != nil {
		return nil, fmt.Errorf("restore: put %s in place: %w", data, err)
	}
	ok = true
	return &RestoreResult{Data: data, LedgerID: m.LedgerID, Size: m.Size, Root: m.Root, RaftIndex: ls.Applied,
		Files: len(plan), Bytes: total, Elapsed: time.Since(start)}, nil
}

// copyFile is one file a restore copies.
type copyFile struct {
	name string // path in the data folder
	src  string
	want File // size and hash to find; SHA256 "" for key files taken from elsewhere
}

// restoreKeys returns the key files to copy from keysDir for a backup
// taken without keys, after checking that they verify its checkpoint; nil
// for a backup with keys (copied with the ledger).
func restoreKeys(from string, m Manifest, keysDir string) ([]copyFile, error) {
	switch {
	case m.Keys && keysDir != "":
		return nil, fmt.Errorf("%w: the backup holds its keys; --keys is for a backup taken --without-keys", ErrKeys)
	case m.Keys:
		return nil, nil
	case keysDir == "":
		return nil, fmt.Errorf("%w: the backup was taken without keys: give the node's key folder (--keys DIR/keys); without it the restored node would sign with a new key", ErrKeys)
	}
	vkeys, err := readVerifierKeys(keysDir)
	if err != nil {
		return nil, err
	}
	vs, err := audit.ParseVerifiers(vkeys)
	if err != nil || len(vs) == 0 {
		return nil, fmt.Errorf("%w: no verifier key in %s (%v)", ErrKeys, keysDir, err)
	}
	for _, v := range vs {
		if v.Name() != m.Origin {
			return nil, fmt.Errorf("%w: %s holds a key for %q, the backup is of %q", ErrKeys, keysDir, v.Name(), m.Origin)
		}
	}
	if _, _, err := events.OpenCheckpoint([]byte(m.Checkpoint), m.Origin, vs...); err != nil {
		return nil, fmt.Errorf("%w: the keys in %s do not verify the backup's checkpoint: %v", ErrKeys, keysDir, err)
	}
	names, err := listFiles(keysDir, KeysDir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeys, err)
	}
	out := make([]copyFile, 0, len(names))
	for _, n := range names {
		p := filepath.Join(keysDir, filepath.FromSlash(strings.TrimPrefix(n, KeysDir+"/")))
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrKeys, err)
		}
		out = append(out, copyFile{name: n, src: p, want: File{Path: n, Size: fi.Size()}})
	}
	return out, nil
}

// copy copies one file into the staging folder, synced, and checks its
// size and (for a backed-up file) its hash against the manifest's: a
// backup changed since it was checked is not restored.
func (st *staging) copy(c copyFile, progress func(int)) error {
	in, err := os.Open(c.src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := st.create(c.name)
	if err != nil {
		return err
	}
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, sum, progressWriter(progress)), in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n != c.want.Size || c.want.SHA256 != "" && hex.EncodeToString(sum.Sum(nil)) != c.want.SHA256 {
		return fmt.Errorf("%s changed while it was restored (%d bytes, the manifest says %d): %w", c.src, n, c.want.Size, events.ErrCorrupt)
	}
	return nil
}
