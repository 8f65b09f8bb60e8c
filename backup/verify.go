package backup

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/audit/offline"
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
	// KindManifestSignature: the manifest's signature (backup.json.sig)
	// is missing, is not a signed note of this manifest's bytes, or is not
	// signed by a trusted key (given from outside, or on first use the
	// keys the ledger committed to): the manifest, or a file it lists,
	// was changed after the node signed it.
	KindManifestSignature = "manifest_signature_invalid"
	// KindManifestUnsigned: restore only, a backup of format 1 (no
	// signature) without RestoreConfig.AllowUnsigned.
	KindManifestUnsigned = "manifest_unsigned"
	// KindFileNotRegular: a symlink, named pipe, device or socket in the
	// backup folder (folder.go): a backup holds folders and regular files
	// only.
	KindFileNotRegular = "file_not_regular"
	// KindFileMissing: a file the manifest lists is not there.
	KindFileMissing = "file_missing"
	// KindFileSizeMismatch / KindFileHashMismatch: a file's size or
	// SHA-256 differs from the manifest's (a changed byte).
	KindFileSizeMismatch = "file_size_mismatch"
	KindFileHashMismatch = "file_hash_mismatch"
	// KindFileUnexpected: a file the manifest does not list (Pebble's
	// ledger/LOCK excepted).
	KindFileUnexpected = "file_unexpected"
	// KindKeyInvalid: a key file of keys/ that does not parse, is for
	// another ledger, is not named after its key hash, or a private key
	// that is not its verifier key's.
	KindKeyInvalid = "key_invalid"
	// KindStateMismatch: the ledger's identity, size or root (recomputed
	// from its events) differs from the manifest's.
	KindStateMismatch = "state_mismatch"
	// KindCheckpointMismatch: the checkpoint file is not the manifest's, or
	// not the ledger's checkpoint at the backup's size.
	KindCheckpointMismatch = "checkpoint_mismatch"
	// KindCheckpointSignature: the checkpoint does not verify with the
	// trusted keys.
	KindCheckpointSignature = "checkpoint_signature_invalid"
	// KindLedgerFault: `verify --data` finds a fault in the ledger copy;
	// Report.Ledger has them all.
	KindLedgerFault = "ledger_fault"
)

// How a backup's keys were trusted (Trust.Mode).
const (
	// TrustGiven: the verifier keys were given from outside (--verifier,
	// --verifiers, restore's --keys).
	TrustGiven = "given"
	// TrustFirstUse: none was given; the backup was checked with the keys
	// of its own key folder that the ledger committed to (keys.go). A
	// forger who rewrote the whole folder, ledger included, passes that:
	// compare the keys named with the ledger's published ones.
	TrustFirstUse = "first_use"
)

// Trust says which keys a backup was checked with.
type Trust struct {
	// Mode is TrustGiven or TrustFirstUse.
	Mode string `json:"mode"`
	// Keys are the verifier keys trusted.
	Keys []string `json:"keys"`
}

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
	// Verifiers are checkpoint verifier keys (note verifier key text)
	// given from outside: the manifest's signature and the checkpoint must
	// verify with one of them, the ledger's stored checkpoints with them.
	// Empty: trust on first use (TrustFirstUse), said in Report.Trust and
	// Report.Warnings.
	Verifiers []string
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
	// Keys is the manifest's: the backup holds the node's private keys.
	Keys bool `json:"keys"`
	// Signed is true when the manifest's signature verified; false for a
	// backup of format 1, which has none (then Warnings says so).
	Signed bool `json:"signed"`
	// Trust says which keys the backup was checked with (zero when the
	// check stopped before).
	Trust Trust `json:"trust,omitzero"`
	// KeyFiles are the checkpoint keys of the backup's key folder, and
	// whether the ledger committed to each (only those are restored).
	KeyFiles []Key `json:"key_files,omitempty"`
	// Verified is true when no fault was found.
	Verified bool    `json:"verified"`
	Faults   []Fault `json:"faults,omitempty"`
	// Warnings are what is no fault but must be said: trust on first use,
	// an unsigned manifest, a key file a restore leaves out.
	Warnings []string `json:"warnings,omitempty"`
	// Ledger is the verification of the ledger copy (nil when its files
	// already differ from the manifest: it is not run then).
	Ledger  *audit.Report `json:"ledger,omitempty"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Verify checks a backup folder offline: the manifest's signature, the
// manifest (every file present with its size and SHA-256, no other, and
// only folders and regular files), the key files, the ledger copy as
// `greffe verify --data` does (leaves, tree, stored checkpoints and their
// signatures, indexes), that its identity, size and root are the
// manifest's, and that the checkpoint file is a checkpoint of this ledger
// at exactly that size, signed by a trusted key.
//
// The trusted keys are cfg.Verifiers, given from outside; without them,
// the keys of the backup that the ledger committed to (trust on first use,
// keys.go), which Report.Trust names.
//
// A returned error means the verification could not run (exit code 2: no
// such folder, no key to trust, a ledger that cannot be opened); faults
// are in the report (exit code 1 when any).
func Verify(ctx context.Context, dir string, cfg VerifyConfig) (*Report, error) {
	start := time.Now()
	rep := &Report{Dir: dir}
	defer func() { rep.Elapsed = time.Since(start) }()
	given, err := audit.ParseVerifiers(cfg.Verifiers)
	if err != nil {
		return nil, err
	}
	f, err := openFolder(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, raw, faults := readManifest(f)
	if len(faults) > 0 {
		return rep.finish(faults), nil
	}
	rep.LedgerID, rep.NodeID, rep.CreatedAt, rep.Size, rep.Root = m.LedgerID, m.NodeID, m.CreatedAt, m.Size, m.Root
	rep.Files, rep.Bytes, rep.Keys = len(m.Files), m.Bytes(), m.Keys
	if len(given) > 0 {
		rep.Trust = Trust{Mode: TrustGiven, Keys: cfg.Verifiers}
	}
	if m.Signed() && len(given) > 0 {
		// Keys from outside: the signature first, before anything the
		// manifest lists is read.
		if faults := checkSignature(f, m, raw, given); len(faults) > 0 {
			return rep.finish(faults), nil
		}
		rep.Signed = true
	}
	faults, err = checkFiles(f, m)
	if err != nil {
		return nil, err
	}
	if len(faults) > 0 {
		return rep.finish(faults), nil // the ledger is not opened: its files are not the ones backed up
	}
	keys, faults, dropped, err := readKeys(f, m.paths(), KeysDir+"/", m.Origin)
	if err != nil {
		return nil, err
	}
	if err := markCommitted(ctx, f.path(LedgerDir), nil, keys, cfg.Verifiers); err != nil {
		if len(given) == 0 {
			return nil, fmt.Errorf("%w; give the ledger's verifier keys (--verifier)", err)
		}
		faults = append(faults, Fault{Kind: KindLedgerFault, File: LedgerDir, Detail: err.Error()})
	}
	for _, k := range keys {
		rep.KeyFiles = append(rep.KeyFiles, k.Key)
		if !k.Committed {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s: no checkpoint of the ledger is signed by this key, and it was not given: a restore leaves it out (a planted key, or one added since the node last signed)", k.pub))
		}
	}
	for _, d := range dropped {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s: %s: a restore leaves it out", d.Path, d.Reason))
	}

	vs := given
	if len(given) == 0 {
		var texts []string
		vs, texts = committedVerifiers(keys)
		if len(vs) == 0 {
			return nil, fmt.Errorf("%w: no key to check the backup with: no key of the backup signed a checkpoint of its ledger (taken without keys?): give the ledger's verifier keys (--verifier)", audit.ErrConfig)
		}
		rep.Trust = Trust{Mode: TrustFirstUse, Keys: texts}
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("no verifier key given: trust on first use of the backup's own key(s) that signed its ledger's checkpoints, %s: a backup rewritten whole, ledger included, passes this; compare them with the ledger's published keys, or give them (--verifier)", strings.Join(texts, ", ")))
		if m.Signed() {
			if sf := checkSignature(f, m, raw, vs); len(sf) > 0 {
				return rep.finish(append(sf, faults...)), nil
			}
			rep.Signed = true
		}
	}
	if !m.Signed() {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("unsigned manifest (format %s, before backups were signed): the ledger is checked against the signed checkpoint, but the key files only against the manifest", m.Format))
	}
	faults = append(faults, checkCheckpoint(f, m, vs)...)

	ac := cfg.Audit
	ac.Verifiers, ac.StateFile = vs, ""
	lrep, err := offline.VerifyDir(ctx, f.path(LedgerDir), ac)
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

// committedVerifiers returns the committed keys, and their text.
func committedVerifiers(keys []*backupKey) ([]note.Verifier, []string) {
	var vs []note.Verifier
	var texts []string
	for _, k := range keys {
		if k.Committed {
			vs, texts = append(vs, k.v), append(texts, k.Verifier)
		}
	}
	return vs, texts
}

// paths returns the paths the manifest lists.
func (m *Manifest) paths() []string {
	out := make([]string, len(m.Files))
	for i, f := range m.Files {
		out[i] = f.Path
	}
	return out
}

// readManifest reads backup.json, its bytes as stored, or says why it
// cannot.
func readManifest(f *folder) (Manifest, []byte, []Fault) {
	raw, err := f.readFile(ManifestFile, maxManifestBytes)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return Manifest{}, nil, []Fault{{Kind: KindManifestMissing, File: ManifestFile,
			Detail: "no manifest: not a backup folder, or a backup that never completed"}}
	case errors.Is(err, ErrNotRegular):
		return Manifest{}, nil, []Fault{{Kind: KindFileNotRegular, File: ManifestFile, Detail: err.Error()}}
	case err != nil:
		return Manifest{}, nil, []Fault{{Kind: KindManifestInvalid, File: ManifestFile, Detail: err.Error()}}
	}
	m, err := decodeManifest(bytes.NewReader(raw))
	if err != nil {
		return Manifest{}, nil, []Fault{{Kind: KindManifestInvalid, File: ManifestFile, Detail: err.Error()}}
	}
	return m, raw, nil
}

// checkSignature checks the manifest's signature file against vs.
func checkSignature(f *folder, m Manifest, raw []byte, vs []note.Verifier) []Fault {
	sig, err := f.readFile(ManifestSigFile, maxSigBytes)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return []Fault{{Kind: KindManifestSignature, File: ManifestSigFile,
			Detail: fmt.Sprintf("no signature: a backup of format %s is signed by the node that took it; this one's signature was removed", m.Format)}}
	case errors.Is(err, ErrNotRegular):
		return []Fault{{Kind: KindFileNotRegular, File: ManifestSigFile, Detail: err.Error()}}
	case err != nil:
		return []Fault{{Kind: KindManifestSignature, File: ManifestSigFile, Detail: err.Error()}}
	}
	if _, err := checkManifestSig(sig, m.Origin, raw, vs); err != nil {
		return []Fault{{Kind: KindManifestSignature, File: ManifestSigFile,
			Detail: err.Error() + ": the manifest, or a file it lists, was changed after the node signed it"}}
	}
	return nil
}

// checkFiles compares the folder with the manifest's file list: only
// folders and regular files, every listed file with its size and SHA-256,
// no other file. An error means a file could not be read.
func checkFiles(f *folder, m Manifest) ([]Fault, error) {
	present, faults, err := f.walk()
	if err != nil {
		return nil, fmt.Errorf("backup: list %s: %w", f.dir, err)
	}
	under := func(p string) bool { // p is, or is under, an entry already refused
		for _, nr := range faults {
			if p == nr.File || strings.HasPrefix(p, nr.File+"/") {
				return true
			}
		}
		return false
	}
	listed := make(map[string]bool, len(m.Files))
	for _, lf := range m.Files {
		listed[lf.Path] = true
		if under(lf.Path) {
			continue
		}
		size, sum, err := f.hash(lf.Path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			faults = append(faults, Fault{Kind: KindFileMissing, File: lf.Path, Detail: fmt.Sprintf("listed with %d bytes, not in the folder", lf.Size)})
		case errors.Is(err, ErrNotRegular):
			faults = append(faults, Fault{Kind: KindFileNotRegular, File: lf.Path, Detail: err.Error()})
		case err != nil:
			return nil, fmt.Errorf("backup: read %s: %w", lf.Path, err)
		case size != lf.Size:
			faults = append(faults, Fault{Kind: KindFileSizeMismatch, File: lf.Path, Detail: fmt.Sprintf("%d bytes, the manifest says %d", size, lf.Size)})
		case sum != lf.SHA256:
			faults = append(faults, Fault{Kind: KindFileHashMismatch, File: lf.Path, Detail: fmt.Sprintf("SHA-256 %s, the manifest says %s", sum, lf.SHA256)})
		}
	}
	for _, p := range present {
		if !listed[p] && p != ManifestFile && (p != ManifestSigFile || !m.Signed()) {
			faults = append(faults, Fault{Kind: KindFileUnexpected, File: p, Detail: "in the folder, not in the manifest"})
		}
	}
	return faults, nil
}

// maxCheckpointBytes bounds the checkpoint file: a note of three lines and
// its signatures (witness cosignatures included).
const maxCheckpointBytes = 64 << 10

// checkCheckpoint checks the checkpoint file: the manifest's note, signed
// by a trusted key, at the manifest's size and root (which the ledger's
// check then compares with the events).
func checkCheckpoint(f *folder, m Manifest, vs []note.Verifier) []Fault {
	raw, err := f.readFile(CheckpointFile, maxCheckpointBytes)
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
