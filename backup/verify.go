package backup

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/events"
)

// Fault kinds of a backup folder. Stable: scripts match on them.
const (
	// KindManifestMissing: the folder has no backup.json (an incomplete
	// or foreign folder).
	KindManifestMissing = "manifest_missing"
	// KindManifestInvalid: backup.json does not parse, names another
	// format, or lists an unsafe path.
	KindManifestInvalid = "manifest_invalid"
	// KindFileMissing: a file the manifest lists is not there.
	KindFileMissing = "file_missing"
	// KindFileSizeMismatch / KindFileHashMismatch: a file's size or
	// SHA-256 differs from the manifest's (a changed byte).
	KindFileSizeMismatch = "file_size_mismatch"
	KindFileHashMismatch = "file_hash_mismatch"
	// KindFileUnexpected: a file the manifest does not list (Pebble's
	// ledger/LOCK excepted).
	KindFileUnexpected = "file_unexpected"
	// KindStateMismatch: the ledger's identity, size or root (recomputed
	// from its events) differs from the manifest's.
	KindStateMismatch = "state_mismatch"
	// KindCheckpointMismatch: the checkpoint file is not the manifest's, or
	// not the ledger's checkpoint at the backup's size.
	KindCheckpointMismatch = "checkpoint_mismatch"
	// KindCheckpointSignature: the checkpoint does not verify with the
	// verifier keys (the backup's own keys by default).
	KindCheckpointSignature = "checkpoint_signature_invalid"
	// KindLedgerFault: `verify --data` finds a fault in the ledger copy;
	// Report.Ledger has them all.
	KindLedgerFault = "ledger_fault"
)

// Fault is one thing wrong with a backup folder.
type Fault struct {
	Kind string `json:"kind"`
	// File is the path (relative to the backup folder) the fault is in.
	File   string `json:"file,omitempty"`
	Detail string `json:"detail"`
}

// String is the fault on one line: kind, file, detail.
func (f Fault) String() string {
	if f.File != "" {
		return fmt.Sprintf("%s: %s: %s", f.Kind, f.File, f.Detail)
	}
	return fmt.Sprintf("%s: %s", f.Kind, f.Detail)
}

// FaultError is returned by Restore when the backup does not match its
// manifest: nothing was restored.
type FaultError struct {
	Dir    string
	Faults []Fault
}

func (e *FaultError) Error() string {
	return fmt.Sprintf("backup %s: %d fault(s); first: %s", e.Dir, len(e.Faults), e.Faults[0])
}

// VerifyConfig configures Verify.
type VerifyConfig struct {
	// Verifiers are the checkpoint verifier keys. Default: the keys of the
	// backup's own key folder (required for a backup without keys).
	Verifiers []note.Verifier
	// Audit tunes the ledger's verification (Workers, MaxFaults,
	// Progress); its Verifiers and StateFile are not used.
	Audit audit.Config
}

// Report is the outcome of Verify.
type Report struct {
	// Dir is the backup folder.
	Dir string `json:"dir"`
	// The manifest's summary (zero when it could not be read).
	LedgerID  string    `json:"ledger_id,omitempty"`
	NodeID    string    `json:"node_id,omitempty"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	Size      uint64    `json:"size"`
	Root      []byte    `json:"root,omitempty"`
	Files     int       `json:"files"`
	Bytes     int64     `json:"bytes"`
	Keys      bool      `json:"keys"`
	// Verified is true when no fault was found.
	Verified bool    `json:"verified"`
	Faults   []Fault `json:"faults,omitempty"`
	// Ledger is the verification of the ledger copy (nil when its files
	// already differ from the manifest: it is not run then).
	Ledger  *audit.Report `json:"ledger,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Verify checks a backup folder offline: the manifest (every file present
// with its size and SHA-256, no other file), the ledger copy as `greffe
// verify --data` does (leaves, tree, stored checkpoints and their
// signatures, indexes), that its identity, size and root are the
// manifest's, and that the checkpoint file is a checkpoint of this ledger
// at exactly that size, signed by a verifier key.
//
// A returned error means the verification could not run (exit code 2: no
// such folder, no verifier key, a ledger that cannot be opened); faults are
// in the report (exit code 1 when any).
func Verify(ctx context.Context, dir string, cfg VerifyConfig) (*Report, error) {
	start := time.Now()
	rep := &Report{Dir: dir}
	defer func() { rep.Elapsed = time.Since(start) }()
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("backup: %s is not a folder", dir)
	}
	m, faults := readManifest(dir)
	if len(faults) > 0 {
		return rep.finish(faults), nil
	}
	rep.LedgerID, rep.NodeID, rep.CreatedAt, rep.Size, rep.Root = m.LedgerID, m.NodeID, m.CreatedAt, m.Size, m.Root
	rep.Files, rep.Bytes, rep.Keys = len(m.Files), m.Bytes(), m.Keys
	faults, err = checkFiles(dir, m)
	if err != nil {
		return nil, err
	}
	if len(faults) > 0 {
		return rep.finish(faults), nil // the ledger is not opened: its files are not the ones backed up
	}

	vs := cfg.Verifiers
	if len(vs) == 0 {
		keys, err := readVerifierKeys(filepath.Join(dir, KeysDir))
		if err != nil {
			return nil, err
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("%w: the backup holds no keys (taken without them): give the ledger's verifier keys", audit.ErrConfig)
		}
		if vs, err = audit.ParseVerifiers(keys); err != nil {
			return nil, err
		}
	}
	faults = append(faults, checkCheckpoint(dir, m, vs)...)

	ac := cfg.Audit
	ac.Verifiers, ac.StateFile = vs, ""
	lrep, err := audit.VerifyDir(ctx, filepath.Join(dir, LedgerDir), ac)
	if err != nil {
		return nil, fmt.Errorf("verify the ledger copy: %w", err)
	}
	rep.Ledger = lrep
	if !lrep.Verified {
		faults = append(faults, Fault{Kind: KindLedgerFault, File: LedgerDir,
			Detail: fmt.Sprintf("%d fault(s) in the ledger; first: %s", lrep.FaultCount, lrep.First)})
	}
	if lrep.LedgerID != m.LedgerID {
		faults = append(faults, Fault{Kind: KindStateMismatch, File: LedgerDir,
			Detail: fmt.Sprintf("the ledger is %q, the manifest says %q", lrep.LedgerID, m.LedgerID)})
	}
	if lrep.Size != m.Size || !bytes.Equal(lrep.Root, m.Root) {
		faults = append(faults, Fault{Kind: KindStateMismatch, File: LedgerDir,
			Detail: fmt.Sprintf("the ledger holds %d events with root %s, the manifest says %d with root %s",
				lrep.Size, b64(lrep.Root), m.Size, b64(m.Root))})
	}
	return rep.finish(faults), nil
}

func (r *Report) finish(faults []Fault) *Report {
	r.Faults, r.Verified = faults, len(faults) == 0
	return r
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// readManifest reads backup.json, or says why it cannot.
func readManifest(dir string) (Manifest, []Fault) {
	f, err := os.Open(filepath.Join(dir, ManifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return Manifest{}, []Fault{{Kind: KindManifestMissing, File: ManifestFile,
			Detail: "no manifest: not a backup folder, or a backup that never completed"}}
	}
	if err != nil {
		return Manifest{}, []Fault{{Kind: KindManifestInvalid, File: ManifestFile, Detail: err.Error()}}
	}
	defer f.Close()
	m, err := decodeManifest(f)
	if err != nil {
		return Manifest{}, []Fault{{Kind: KindManifestInvalid, File: ManifestFile, Detail: err.Error()}}
	}
	return m, nil
}

// checkFiles compares the folder with the manifest's file list. An error
// means a file could not be read.
func checkFiles(dir string, m Manifest) ([]Fault, error) {
	present, err := listFiles(dir, "")
	if err != nil {
		return nil, fmt.Errorf("backup: list %s: %w", dir, err)
	}
	listed := make(map[string]bool, len(m.Files))
	var faults []Fault
	for _, f := range m.Files {
		listed[f.Path] = true
		size, sum, err := hashFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		switch {
		case errors.Is(err, os.ErrNotExist):
			faults = append(faults, Fault{Kind: KindFileMissing, File: f.Path, Detail: fmt.Sprintf("listed with %d bytes, not in the folder", f.Size)})
		case err != nil:
			return nil, fmt.Errorf("backup: read %s: %w", f.Path, err)
		case size != f.Size:
			faults = append(faults, Fault{Kind: KindFileSizeMismatch, File: f.Path, Detail: fmt.Sprintf("%d bytes, the manifest says %d", size, f.Size)})
		case sum != f.SHA256:
			faults = append(faults, Fault{Kind: KindFileHashMismatch, File: f.Path, Detail: fmt.Sprintf("SHA-256 %s, the manifest says %s", sum, f.SHA256)})
		}
	}
	for _, p := range present {
		if !listed[p] && p != ManifestFile {
			faults = append(faults, Fault{Kind: KindFileUnexpected, File: p, Detail: "in the folder, not in the manifest"})
		}
	}
	return faults, nil
}

// checkCheckpoint checks the checkpoint file: the manifest's note, signed
// by a verifier key, at the manifest's size and root (which the ledger's
// check then compares with the events).
func checkCheckpoint(dir string, m Manifest, vs []note.Verifier) []Fault {
	raw, err := os.ReadFile(filepath.Join(dir, CheckpointFile))
	if err != nil {
		return []Fault{{Kind: KindFileMissing, File: CheckpointFile, Detail: err.Error()}}
	}
	var faults []Fault
	if string(raw) != m.Checkpoint {
		faults = append(faults, Fault{Kind: KindCheckpointMismatch, File: CheckpointFile, Detail: "the checkpoint file differs from the manifest's checkpoint"})
	}
	cp, _, err := events.OpenCheckpoint(raw, m.Origin, vs...)
	if err != nil {
		return append(faults, Fault{Kind: KindCheckpointSignature, File: CheckpointFile, Detail: err.Error()})
	}
	if cp.Size != m.Size || !bytes.Equal(cp.Root[:], m.Root) {
		faults = append(faults, Fault{Kind: KindCheckpointMismatch, File: CheckpointFile,
			Detail: fmt.Sprintf("the checkpoint is of size %d with root %s; the backup holds %d events with root %s",
				cp.Size, b64(cp.Root[:]), m.Size, b64(m.Root))})
	}
	return faults
}

// readVerifierKeys reads the verifier keys (*.pub) of a node's key folder
// and of its retired/ folder (the layout of node/keys.go).
func readVerifierKeys(keysDir string) ([]string, error) {
	var out []string
	for _, d := range []string{keysDir, filepath.Join(keysDir, "retired")} {
		entries, err := os.ReadDir(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("backup: keys: %w", err)
		}
		for _, e := range entries {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".pub") {
				continue
			}
			b, err := os.ReadFile(filepath.Join(d, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("backup: keys: %w", err)
			}
			out = append(out, strings.TrimSpace(string(b)))
		}
	}
	return out, nil
}
