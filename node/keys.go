package node

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// The node's checkpoint signing keys live in <data>/keys: one pair of files
// per key, <hash>.key (the note signer key, mode 0600) and <hash>.pub (its
// verifier key). Every key in the folder signs; a retired key is moved to
// <data>/keys/retired/ and signs no more, but its verifier stays published
// so that old checkpoints keep verifying. Key rotation is: add a key (both
// sign during the overlap), let witnesses and auditors learn the new
// verifier, retire the old one.

// KeySet is the node's signing keys, loaded from disk.
type KeySet struct {
	Signers []note.Signer
	// Verifiers are the verifier keys (vkey text) of active keys, then of
	// retired keys.
	Verifiers []string
	Active    []string // verifier keys of active keys
	// Created is the verifier key LoadOrCreateKeys made because no key
	// could sign (a first start, or a folder restored without private
	// keys: issue #20); empty otherwise.
	Created string
}

// keysDir returns <data>/keys.
func keysDir(data string) string { return filepath.Join(data, "keys") }

// LedgerDir returns the Pebble folder of the node whose data folder is
// data: <data>/ledger (what `greffe verify --data` opens read-only).
func LedgerDir(data string) string { return filepath.Join(data, "ledger") }

// KeyInfo describes one checkpoint signing key of a data folder.
type KeyInfo struct {
	// Hash is the key hash, 8 hex digits: what `greffe keys retire` takes.
	Hash string `json:"hash"`
	// Name is the key's name: the ledger's checkpoint origin.
	Name string `json:"name"`
	// Verifier is the note verifier key to give auditors and witnesses.
	Verifier string `json:"verifier"`
	// Active keys sign; retired ones only stay published as verifiers.
	Active bool `json:"active"`
}

// ErrNoKeys is returned by KeysOrigin when the data folder has no key.
var ErrNoKeys = errors.New("keys: the data folder has no key")

// ListKeys returns the keys of a data folder, active ones first, without
// checking their names against a ledger (they are shown as they are).
func ListKeys(data string) ([]KeyInfo, error) {
	var out []KeyInfo
	for _, d := range []struct {
		dir    string
		active bool
	}{{keysDir(data), true}, {filepath.Join(keysDir(data), "retired"), false}} {
		entries, err := os.ReadDir(d.dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("keys: %w", err)
		}
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".pub") {
				continue
			}
			vb, err := os.ReadFile(filepath.Join(d.dir, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("keys: %w", err)
			}
			vkey := strings.TrimSpace(string(vb))
			v, err := note.NewVerifier(vkey)
			if err != nil {
				return nil, fmt.Errorf("keys: %s: %w", e.Name(), err)
			}
			out = append(out, KeyInfo{Hash: fmt.Sprintf("%08x", v.KeyHash()), Name: v.Name(), Verifier: vkey, Active: d.active})
		}
	}
	return out, nil
}

// VerifierKeys returns the verifier keys of every key of a data folder,
// active and retired: the default verifier set of an offline verify.
func VerifierKeys(data string) ([]string, error) {
	keys, err := ListKeys(data)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.Verifier
	}
	return out, nil
}

// KeysOrigin returns the name every key of the data folder carries (the
// ledger's origin), ErrNoKeys when there is none.
func KeysOrigin(data string) (string, error) {
	keys, err := ListKeys(data)
	if err != nil {
		return "", err
	}
	if len(keys) == 0 {
		return "", ErrNoKeys
	}
	for _, k := range keys[1:] {
		if k.Name != keys[0].Name {
			return "", fmt.Errorf("keys: %s is for %q, %s for %q: the folder mixes ledgers", keys[0].Hash, keys[0].Name, k.Hash, k.Name)
		}
	}
	return keys[0].Name, nil
}

// LoadOrCreateKeys loads the node's keys for origin, creating one when
// none can sign (a first start, or a folder restored from a backup without
// private keys, whose verifier keys are retired); KeySet.Created says so.
func LoadOrCreateKeys(data, origin string) (*KeySet, error) {
	ks, err := LoadKeys(data, origin)
	if err != nil {
		return nil, err
	}
	if len(ks.Signers) > 0 {
		return ks, nil
	}
	vkey, err := AddKey(data, origin)
	if err != nil {
		return nil, err
	}
	if ks, err = LoadKeys(data, origin); err != nil {
		return nil, err
	}
	ks.Created = vkey
	return ks, nil
}

// AddKey creates a new signing key for origin and returns its verifier key.
func AddKey(data, origin string) (string, error) {
	dir := keysDir(data)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("keys: %w", err)
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, origin)
	if err != nil {
		return "", fmt.Errorf("keys: %w", err)
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return "", err
	}
	base := filepath.Join(dir, fmt.Sprintf("%08x", v.KeyHash()))
	if err := writeFileSync(base+".key", []byte(skey+"\n"), 0o600); err != nil {
		return "", err
	}
	if err := writeFileSync(base+".pub", []byte(vkey+"\n"), 0o644); err != nil {
		return "", err
	}
	return vkey, nil
}

// RetireKey moves the key whose hash (8 hex digits, as in `greffe keys
// list`) or verifier key matches id to keys/retired/. The last active key
// cannot be retired.
func RetireKey(data, origin, id string) error {
	ks, err := LoadKeys(data, origin)
	if err != nil {
		return err
	}
	if len(ks.Active) <= 1 {
		return errors.New("keys: refusing to retire the last active key; add a new key first")
	}
	dir := keysDir(data)
	for _, vk := range ks.Active {
		v, err := note.NewVerifier(vk)
		if err != nil {
			return err
		}
		hash := fmt.Sprintf("%08x", v.KeyHash())
		if id != hash && id != vk {
			continue
		}
		retired := filepath.Join(dir, "retired")
		if err := os.MkdirAll(retired, 0o700); err != nil {
			return err
		}
		for _, ext := range []string{".key", ".pub"} {
			if err := os.Rename(filepath.Join(dir, hash+ext), filepath.Join(retired, hash+ext)); err != nil {
				return fmt.Errorf("keys: retire %s: %w", hash, err)
			}
		}
		return nil
	}
	return fmt.Errorf("keys: no active key %q", id)
}

// LoadKeys reads the keys folder. Keys not named origin are refused: they
// belong to another ledger.
func LoadKeys(data, origin string) (*KeySet, error) {
	ks := &KeySet{}
	dir := keysDir(data)
	load := func(d string, active bool) error {
		entries, err := os.ReadDir(d)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("keys: %w", err)
		}
		names := []string{}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".pub") {
				names = append(names, e.Name())
			}
		}
		sort.Strings(names)
		for _, name := range names {
			vb, err := os.ReadFile(filepath.Join(d, name))
			if err != nil {
				return fmt.Errorf("keys: %w", err)
			}
			vkey := strings.TrimSpace(string(vb))
			v, err := note.NewVerifier(vkey)
			if err != nil {
				return fmt.Errorf("keys: %s: %w", name, err)
			}
			if v.Name() != origin {
				return fmt.Errorf("keys: %s is for %q, this ledger is %q", name, v.Name(), origin)
			}
			ks.Verifiers = append(ks.Verifiers, vkey)
			if !active {
				continue
			}
			ks.Active = append(ks.Active, vkey)
			sb, err := os.ReadFile(filepath.Join(d, strings.TrimSuffix(name, ".pub")+".key"))
			if err != nil {
				return fmt.Errorf("keys: %w", err)
			}
			s, err := note.NewSigner(strings.TrimSpace(string(sb)))
			if err != nil {
				return fmt.Errorf("keys: %s: %w", name, err)
			}
			if s.KeyHash() != v.KeyHash() {
				return fmt.Errorf("keys: %s does not match its private key", name)
			}
			ks.Signers = append(ks.Signers, s)
		}
		return nil
	}
	if err := load(dir, true); err != nil {
		return nil, err
	}
	if err := load(filepath.Join(dir, "retired"), false); err != nil {
		return nil, err
	}
	return ks, nil
}

// writeFileSync writes a new file durably: it must not exist yet.
func writeFileSync(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("keys: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("keys: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
