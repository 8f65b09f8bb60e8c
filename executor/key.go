package executor

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The executor's key file holds one ed25519 private key as a PKCS #8 PEM
// block ("PRIVATE KEY"), the format `openssl pkey` reads, so an operator
// can inspect or back it up with standard tools. It is created with mode
// 0600 on first use and refused when anyone but its owner may read or
// write it: a key others can read signs nothing the ledger should believe.

// ErrKeyExposed is wrapped by LoadOrCreateKey when the key file is readable
// or writable by its group or others.
var ErrKeyExposed = errors.New("executor: key file is accessible to others")

// ErrKeyInvalid is wrapped when the key file holds no ed25519 PKCS #8 key.
var ErrKeyInvalid = errors.New("executor: key file holds no ed25519 private key")

// LoadOrCreateKey returns the key stored at path, creating a new one (and
// its folder, mode 0700) when the file does not exist. created reports
// whether it did.
func LoadOrCreateKey(path string) (key ed25519.PrivateKey, created bool, err error) {
	key, err = LoadKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, false, fmt.Errorf("create key folder: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, false, fmt.Errorf("generate key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, false, fmt.Errorf("encode key: %w", err)
	}
	// O_EXCL: two executors started at once on the same path must not each
	// write their own key and believe it is the one on disk.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("create key file: %w", err)
	}
	if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("write key file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("sync key file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, false, fmt.Errorf("close key file: %w", err)
	}
	return priv, true, nil
}

// LoadKey reads the key at path. It wraps fs.ErrNotExist when there is no
// file, ErrKeyExposed when its mode lets group or others in, ErrKeyInvalid
// when it holds no ed25519 key.
func LoadKey(path string) (ed25519.PrivateKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("key file %s: %w: not a regular file", path, ErrKeyInvalid)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("key file %s has mode %#o: %w; run chmod 600 %s, or revoke the key if others may have read it", path, perm, ErrKeyExposed, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("key file %s: %w: want a PEM \"PRIVATE KEY\" block", path, ErrKeyInvalid)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w: %v", path, ErrKeyInvalid, err)
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("key file %s: %w: it holds a %T", path, ErrKeyInvalid, k)
	}
	return priv, nil
}
