package backup

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/events/pebblelog/inspect"
	"github.com/greffe/greffe/events/pebblelog/layout"
)

// The keys of a backup, and which of them a restored node may publish
// (issue #20).
//
// A key merely present in a backup folder proves nothing: whoever holds
// the folder can add one. A key is *committed* when the ledger itself
// vouches for it: some checkpoint stored in the ledger copy (a Pebble
// table, covered by the manifest's hashes and so by its signature) carries
// a valid signature by it, or it is one of the verifier keys given from
// outside (--verifier, --keys). Only committed keys are restored and so
// published; a planted key is left out, and said so. Without any key given
// from outside, the committed keys are also the ones trusted on first use
// (TrustFirstUse) to check the manifest's signature and the checkpoint:
// a key planted in the folder never signs for the backup.
//
// The node makes sure its current keys are committed: it has a checkpoint
// signed by them stored before it copies the ledger (api.MountBackup).

// Key is one checkpoint signing key found in a backup, as verify and
// restore report it.
type Key struct {
	// Verifier is the note verifier key; Hash its 8 hex digits (the
	// file's name in keys/).
	Verifier string `json:"verifier"`
	Hash     string `json:"hash"`
	// Active keys are in keys/, retired ones in keys/retired/.
	Active bool `json:"active"`
	// Private is true when the backup holds its private key.
	Private bool `json:"private"`
	// Committed is true when the ledger holds a checkpoint it signed, or
	// it was given from outside: only a committed key is restored.
	Committed bool `json:"committed"`
}

// Dropped is a file of a backup's key folder that a restore leaves out.
type Dropped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// backupKey is a key of a backup's key folder, parsed.
type backupKey struct {
	Key
	v       note.Verifier
	pub     string // path of the .pub file
	priv    string // path of the .key file, "" when absent
	privKey string // the private key's text
}

// maxKeyFileBytes bounds a key file: one line of a note key.
const maxKeyFileBytes = 4 << 10

// readKeys parses the key files among files (paths of the folder f), in
// the layout of node/keys.go under prefix ("keys/" in a backup, "" in a
// node's key folder): <hash>.pub and .key, retired/<hash>.pub and .key. A
// key file that does not parse, is for another origin, is not
// named after its key hash, or a private key that is not its verifier's,
// is a KindKeyInvalid fault. Other files under keys/, and a private key
// without its verifier key, are dropped.
func readKeys(f *folder, files []string, prefix, origin string) ([]*backupKey, []Fault, []Dropped, error) {
	var keys []*backupKey
	var faults []Fault
	var dropped []Dropped
	byPub := map[string]*backupKey{}
	var privs []string
	for _, p := range files {
		if !strings.HasPrefix(p, prefix) {
			continue
		}
		dir, base := path.Split(strings.TrimPrefix(p, prefix))
		if dir != "" && dir != "retired/" {
			dropped = append(dropped, Dropped{Path: p, Reason: "not a key file of a node's key folder"})
			continue
		}
		stem, ext := strings.TrimSuffix(base, path.Ext(base)), path.Ext(base)
		switch ext {
		case ".key":
			privs = append(privs, p)
			continue
		case ".pub":
		default:
			dropped = append(dropped, Dropped{Path: p, Reason: "not a key file of a node's key folder"})
			continue
		}
		b, err := f.readFile(p, maxKeyFileBytes)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("backup: %s: %w", p, err)
		}
		vkey := strings.TrimSpace(string(b))
		v, err := note.NewVerifier(vkey)
		switch {
		case err != nil:
			faults = append(faults, Fault{Kind: KindKeyInvalid, File: p, Detail: fmt.Sprintf("not a verifier key: %v", err)})
			continue
		case v.Name() != origin:
			faults = append(faults, Fault{Kind: KindKeyInvalid, File: p, Detail: fmt.Sprintf("a key for %q, the backup is of %q", v.Name(), origin)})
			continue
		case stem != fmt.Sprintf("%08x", v.KeyHash()):
			faults = append(faults, Fault{Kind: KindKeyInvalid, File: p, Detail: fmt.Sprintf("named %s, its key hash is %08x", base, v.KeyHash())})
			continue
		}
		k := &backupKey{Key: Key{Verifier: vkey, Hash: stem, Active: dir == ""}, v: v, pub: p}
		keys = append(keys, k)
		byPub[p] = k
	}
	for _, p := range privs {
		k := byPub[strings.TrimSuffix(p, ".key")+".pub"]
		if k == nil {
			dropped = append(dropped, Dropped{Path: p, Reason: "a private key without its verifier key"})
			continue
		}
		b, err := f.readFile(p, maxKeyFileBytes)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("backup: %s: %w", p, err)
		}
		skey := strings.TrimSpace(string(b))
		if err := matchPrivate(skey, k.v); err != nil {
			faults = append(faults, Fault{Kind: KindKeyInvalid, File: p, Detail: err.Error()})
			continue
		}
		k.priv, k.privKey, k.Private = p, skey, true
	}
	return keys, faults, dropped, nil
}

// matchPrivate checks that skey is the private key of v: it signs a test
// message that v verifies. (The key hash in the text is only 32 bits: a
// private key with a colliding hash is not the same key.)
func matchPrivate(skey string, v note.Verifier) error {
	s, err := note.NewSigner(skey)
	if err != nil {
		return fmt.Errorf("not a private key: %v", err)
	}
	msg := []byte("greffe backup: does this private key match its verifier key?\n")
	sig, err := s.Sign(msg)
	if err != nil {
		return fmt.Errorf("the private key does not sign: %v", err)
	}
	if s.Name() != v.Name() || s.KeyHash() != v.KeyHash() || !v.Verify(msg, sig) {
		return fmt.Errorf("the private key is not the one of %s+%08x", v.Name(), v.KeyHash())
	}
	return nil
}

// errAllCommitted ends the scan of the stored checkpoints early.
var errAllCommitted = errors.New("every key is committed")

// markCommitted sets Committed on every key that signed a checkpoint
// stored in the ledger folder ledgerDir (read-only) or that is one of the
// verifier keys given (compared as text: the 32-bit key hash alone could
// be matched by a planted key).
func markCommitted(ctx context.Context, ledgerDir string, fsys vfs.FS, keys []*backupKey, given []string) error {
	left := 0
	for _, k := range keys {
		for _, g := range given {
			k.Committed = k.Committed || strings.TrimSpace(g) == k.Verifier
		}
		if !k.Committed {
			left++
		}
	}
	if left == 0 {
		return nil
	}
	in, err := inspect.Open(inspect.Config{Dir: ledgerDir, FS: fsys})
	if err != nil {
		return fmt.Errorf("backup: open the ledger copy: %w", err)
	}
	defer in.Close()
	err = in.Scan(ctx, layout.SpaceCheckpoints, func(e inspect.Entry) error {
		for _, k := range keys {
			if k.Committed {
				continue
			}
			if _, err := note.Open(e.Value, note.VerifierList(k.v)); err == nil {
				k.Committed = true
				left--
			}
		}
		if left == 0 {
			return errAllCommitted
		}
		return nil
	})
	if err != nil && !errors.Is(err, errAllCommitted) {
		return fmt.Errorf("backup: read the ledger copy's checkpoints: %w", err)
	}
	return nil
}
