package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog/inspect"
)

// ErrKeys wraps the problems of the keys a restore is given or finds: a
// key folder given for a backup that holds private keys, a key folder
// that does not parse or is another ledger's, no key to trust.
var ErrKeys = errors.New("backup: keys")

// RestoreConfig configures Restore. The zero value restores a signed
// backup on the OS's filesystem, trusting on first use.
type RestoreConfig struct {
	// Verifiers are checkpoint verifier keys (note verifier key text)
	// given from outside: the manifest's signature and the checkpoint must
	// verify with one of them. Empty, and no Keys: trust on first use of
	// the backup's keys the ledger committed to (RestoreResult.Trust says
	// so).
	Verifiers []string
	// Keys is a node's key folder (<data>/keys of the original node, or a
	// copy) to take the keys from, for a backup taken without the private
	// keys; its verifier keys count as given from outside. It must be
	// empty for a backup that holds its private keys.
	Keys string
	// AllowUnsigned restores a backup of format 1, which has no signature
	// (KindManifestUnsigned otherwise).
	AllowUnsigned bool
	// FS is where the data folder is written. Nil: the OS. Tests wrap it to
	// inject failures (Pebble's vfs/errorfs).
	FS vfs.FS
	// Progress, when set, is called with the bytes copied and the total.
	Progress func(done, total int64)
}

// RestoreResult describes a restored data folder.
type RestoreResult struct {
	// Data is the new data folder; LedgerID, Origin, Size and Root what its
	// ledger holds (a node opened on it serves this head).
	Data     string `json:"data"`
	LedgerID string `json:"ledger_id"`
	Origin   string `json:"origin"`
	Size     uint64 `json:"size"`
	Root     []byte `json:"root"`
	// RaftIndex is the raft index recorded in the ledger (0: the backup
	// was taken from a single node).
	RaftIndex uint64 `json:"raft_index"`
	// Signed is true when the manifest's signature verified (false: a
	// backup of format 1, restored with AllowUnsigned).
	Signed bool `json:"signed"`
	// Trust says which keys the backup was checked with.
	Trust Trust `json:"trust"`
	// Keys are the keys restored, which the restored node publishes:
	// Active ones (with their private key) sign.
	Keys []Key `json:"keys"`
	// Dropped are the key files left out: keys the ledger did not commit
	// to, files that are no key.
	Dropped []Dropped `json:"dropped,omitempty"`
	// Signing is true when a restored key can sign. False (a backup
	// without private keys): the node needs a new key, which a node
	// creates when it first starts (`greffe restore` creates it at once).
	Signing bool          `json:"signing"`
	Files   int           `json:"files"`
	Bytes   int64         `json:"bytes"`
	Elapsed time.Duration `json:"elapsed_ns"`
}

// setDefaults gives FS its default; there is nothing to validate.
func (c *RestoreConfig) setDefaults() {
	if c.FS == nil {
		c.FS = vfs.Default
	}
}

// Restore makes a new node data folder, data, from the backup folder from:
// the ledger and the keys the ledger committed to, nothing else (no raft
// state: the node starts as a single node, or seeds a new cluster with
// --bootstrap; docs/CLUSTER.md).
//
// It refuses a data folder that exists and is not empty (ErrNotEmpty). It
// checks, before anything is put in place (a *FaultError otherwise): the
// manifest's signature (format 1 only with AllowUnsigned), every file
// present with its size and SHA-256, no other file, folders and regular
// files only, the key files, and the checkpoint, signed by a trusted key at
// the manifest's size and root. It copies into a staging folder next to
// data, data + ".restoring", hashing each file again as it is copied,
// checks the copied ledger's recorded state against the manifest, syncs
// everything, and only then renames the staging folder to data. A failure
// or a crash at any point leaves data absent; the staging folder is
// removed on failure, and by the next run after a crash.
//
// Only the keys the ledger committed to (keys.go), or given from outside,
// are restored; the others are left out (RestoreResult.Dropped). A key
// without its private key is restored retired: it stays published, so
// that the ledger's old checkpoints verify, and signs no more.
//
// The full verification of the ledger is Verify (`greffe backup verify`);
// Restore does not replay the events.
func Restore(ctx context.Context, from, data string, cfg RestoreConfig) (*RestoreResult, error) {
	start := time.Now()
	cfg.setDefaults()
	if err := checkTarget(cfg.FS, data); err != nil {
		return nil, err
	}
	f, err := openFolder(from)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m, raw, faults := readManifest(f)
	if len(faults) > 0 {
		return nil, &FaultError{Dir: from, Faults: faults}
	}
	if !m.Signed() && !cfg.AllowUnsigned {
		return nil, &FaultError{Dir: from, Faults: []Fault{{Kind: KindManifestUnsigned, File: ManifestFile,
			Detail: fmt.Sprintf("format %s: the manifest is unsigned, nothing vouches for the files it lists; check the backup (greffe backup verify --verifier …) and restore it with --allow-unsigned", m.Format)}}}
	}
	if m.Keys && cfg.Keys != "" {
		return nil, fmt.Errorf("%w: the backup holds its private keys; --keys is for a backup taken without them", ErrKeys)
	}
	given := append([]string(nil), cfg.Verifiers...)
	var outside []*backupKey
	var kf *folder
	if cfg.Keys != "" {
		if kf, outside, err = readKeyFolder(cfg.Keys, m.Origin); err != nil {
			return nil, err
		}
		defer kf.Close()
		for _, k := range outside {
			given = append(given, k.Verifier)
		}
	}
	givenVs, err := audit.ParseVerifiers(given)
	if err != nil {
		return nil, err
	}
	res := &RestoreResult{Data: data, LedgerID: m.LedgerID, Origin: m.Origin, Size: m.Size, Root: m.Root}
	if len(givenVs) > 0 {
		res.Trust = Trust{Mode: TrustGiven, Keys: given}
		if m.Signed() {
			if faults := checkSignature(f, m, raw, givenVs); len(faults) > 0 {
				return nil, &FaultError{Dir: from, Faults: faults}
			}
			res.Signed = true
		}
	}
	faults, err = checkFiles(f, m)
	if err != nil {
		return nil, err
	}
	if len(faults) > 0 {
		return nil, &FaultError{Dir: from, Faults: faults}
	}
	keys, faults, dropped, err := readKeys(f, m.paths(), KeysDir+"/", m.Origin)
	if err != nil {
		return nil, err
	}
	if len(faults) > 0 {
		return nil, &FaultError{Dir: from, Faults: faults}
	}

	var plan []copyFile
	for _, lf := range m.Files {
		if strings.HasPrefix(lf.Path, LedgerDir+"/") {
			plan = append(plan, copyFile{name: lf.Path, want: lf})
			res.Bytes += lf.Size
		}
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
		if err := st.copy(f, c, func(n int) {
			done += int64(n)
			if cfg.Progress != nil {
				cfg.Progress(done, res.Bytes)
			}
		}); err != nil {
			return nil, fmt.Errorf("restore %s: %w", c.name, err)
		}
	}
	ledger := cfg.FS.PathJoin(st.tmp, LedgerDir)
	// The copy, not the backup folder, is read: its bytes were hashed as
	// they were copied, and a read-only open still writes Pebble's lock.
	if err := markCommitted(ctx, ledger, cfg.FS, keys, given); err != nil {
		return nil, err
	}
	vs := givenVs
	if len(givenVs) == 0 {
		var texts []string
		if vs, texts = committedVerifiers(keys); len(vs) == 0 {
			return nil, fmt.Errorf("%w: no key to check the backup with: no key of the backup signed a checkpoint of its ledger: give the ledger's verifier keys (--verifier) or its key folder (--keys)", ErrKeys)
		}
		res.Trust = Trust{Mode: TrustFirstUse, Keys: texts}
		if m.Signed() {
			if faults := checkSignature(f, m, raw, vs); len(faults) > 0 {
				return nil, &FaultError{Dir: from, Faults: faults}
			}
			res.Signed = true
		}
	}
	if faults := checkCheckpoint(f, m, vs); len(faults) > 0 {
		return nil, &FaultError{Dir: from, Faults: faults}
	}
	ls, err := inspect.ReadLedgerState(ledger, cfg.FS)
	if err != nil {
		return nil, fmt.Errorf("restore: the copied ledger: %w", err)
	}
	if ls.LedgerID != m.LedgerID || ls.Head.Size != m.Size || !bytes.Equal(ls.Head.Root[:], m.Root) {
		return nil, fmt.Errorf("restore: the copied ledger records ledger %s with %d events, the manifest says %s with %d (or another root): %w",
			ls.LedgerID, ls.Head.Size, m.LedgerID, m.Size, events.ErrCorrupt)
	}
	res.RaftIndex = ls.Applied

	if cfg.Keys != "" {
		// The backup's own verifier keys give way to the folder given.
		keys = outside
		for _, k := range keys {
			k.Committed = true
		}
	}
	placed, left, err := placeKeys(st, keys)
	if err != nil {
		return nil, fmt.Errorf("restore the keys: %w", err)
	}
	res.Keys, res.Dropped = placed, append(left, dropped...)
	for _, k := range placed {
		res.Signing = res.Signing || k.Active
	}
	if err := st.commit(); err != nil {
		return nil, fmt.Errorf("restore: put %s in place: %w", data, err)
	}
	ok = true
	res.Files, res.Elapsed = len(plan)+len(placed), time.Since(start)
	return res, nil
}

// readKeyFolder reads a node's key folder given from outside (restore's
// --keys): only folders and regular files, every key valid and of origin.
func readKeyFolder(dir, origin string) (*folder, []*backupKey, error) {
	kf, err := openFolder(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrKeys, err)
	}
	files, faults, err := kf.walk()
	if err == nil && len(faults) == 0 {
		var keys []*backupKey
		keys, faults, _, err = readKeys(kf, files, "", origin)
		if err == nil && len(faults) == 0 {
			if len(keys) == 0 {
				kf.Close()
				return nil, nil, fmt.Errorf("%w: no verifier key in %s", ErrKeys, dir)
			}
			return kf, keys, nil
		}
	}
	kf.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrKeys, dir, err)
	}
	return nil, nil, fmt.Errorf("%w: %s: %s", ErrKeys, dir, faults[0])
}

// placeKeys writes the committed keys into the staging folder in the
// layout of node/keys.go, named after their key hash: an active key with
// its private key in keys/, any other in keys/retired/ (a verifier key
// alone cannot sign: it stays published for the checkpoints it signed).
// It returns the keys as restored and the files left out.
func placeKeys(st *staging, keys []*backupKey) ([]Key, []Dropped, error) {
	var placed []Key
	var left []Dropped
	for _, k := range keys {
		if !k.Committed {
			reason := "no checkpoint of the ledger is signed by this key, and it was not given: the ledger did not commit to it"
			left = append(left, Dropped{Path: k.pub, Reason: reason})
			if k.priv != "" {
				left = append(left, Dropped{Path: k.priv, Reason: reason})
			}
			continue
		}
		dir := KeysDir + "/retired/"
		if k.Active && k.Private {
			dir = KeysDir + "/"
		}
		if err := st.writeFile(dir+k.Hash+".pub", []byte(k.Verifier+"\n")); err != nil {
			return nil, nil, err
		}
		if k.Private {
			if err := st.writeFile(dir+k.Hash+".key", []byte(k.privKey+"\n")); err != nil {
				return nil, nil, err
			}
		}
		out := k.Key
		out.Active = dir == KeysDir+"/"
		placed = append(placed, out)
	}
	return placed, left, nil
}

// copyFile is one file a restore copies from the backup folder.
type copyFile struct {
	name string // path in the backup folder and in the data folder
	want File   // size and hash to find
}

// copy copies one file of the backup folder into the staging folder,
// synced, and checks its size and hash against the manifest's: a backup
// changed since it was checked is not restored.
func (st *staging) copy(src *folder, c copyFile, progress func(int)) error {
	in, err := src.open(c.name)
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
	if n != c.want.Size || hex.EncodeToString(sum.Sum(nil)) != c.want.SHA256 {
		return fmt.Errorf("%s changed while it was restored (%d bytes, the manifest says %d): %w", c.name, n, c.want.Size, events.ErrCorrupt)
	}
	return nil
}
