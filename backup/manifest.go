package backup

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"
)

// Format names the layout of a backup folder and of its stream; a backup of
// another format is refused. A layout never changes once released; a new
// one gets a new number.
//
// Format 2 (issue #20) adds ManifestSigFile, the node's signature of the
// manifest, and always holds the node's verifier keys (keys/…/*.pub); the
// private keys (keys/*.key) only when an admin asked for them. Format 1,
// FormatUnsigned, had no signature: such a backup is still read, and
// reported as unsigned.
const Format = "greffe-backup/2"

// FormatUnsigned is the format before the manifest was signed.
const FormatUnsigned = "greffe-backup/1"

// Names inside a backup folder (slash-separated, relative to it).
const (
	// ManifestFile is the manifest, written last: a folder without it is
	// not a complete backup.
	ManifestFile = "backup.json"
	// ManifestSigFile is the manifest's signature (format 2): a note,
	// signed by the node's checkpoint keys, naming the SHA-256 of
	// backup.json's bytes (signature.go). Neither listed in the manifest
	// nor hashed by it: it signs it.
	ManifestSigFile = "backup.json.sig"
	// CheckpointFile is the signed checkpoint note at the backup's size.
	CheckpointFile = "checkpoint"
	// LedgerDir is the Pebble folder of the ledger, KeysDir the node's key
	// folder: the same names as in a data folder.
	LedgerDir = "ledger"
	KeysDir   = "keys"
	// pebbleLock is Pebble's lock file, which every open of the ledger
	// (read-only ones included) creates: it is neither listed nor copied,
	// and a backup folder may hold it.
	pebbleLock = LedgerDir + "/LOCK"
)

// Manifest describes a backup: what it holds and every file it is made of.
// It is the JSON document backup.json (and the last entry of the stream).
type Manifest struct {
	// Format is the backup format, Format.
	Format string `json:"format"`
	// LedgerID and Origin identify the ledger; StoreFormat is the format
	// string of the ledger copy (docs/FORMAT.md).
	LedgerID    string `json:"ledger_id"`
	Origin      string `json:"origin"`
	StoreFormat string `json:"store_format"`
	// Size is the number of events in the backup and Root the Merkle root
	// of those events (the checkpoint's size and root).
	Size uint64 `json:"size"`
	Root []byte `json:"root"`
	// LastRecordedAt is the recorded time of the last event (Unix
	// nanoseconds; 0 for an empty ledger).
	LastRecordedAt int64 `json:"last_recorded_at_ns"`
	// RaftIndex is the raft index of the last batch the copy applied (0:
	// the node was not a cluster member). docs/CLUSTER.md says what a
	// restore makes of it.
	RaftIndex uint64 `json:"raft_index"`
	// Checkpoint is the signed checkpoint note at Size, as in
	// CheckpointFile.
	Checkpoint string `json:"checkpoint"`
	// NodeID is the node the backup was taken from; CreatedAt when.
	NodeID    string    `json:"node_id"`
	CreatedAt time.Time `json:"created_at"`
	// Keys says whether the backup holds the node's private keys
	// (keys/*.key). A backup of format 2 always holds the verifier keys
	// (keys/*.pub, keys/retired/*.pub); one of format 1 held the whole key
	// folder when Keys, nothing of it otherwise.
	Keys bool `json:"keys"`
	// Files lists every file of the backup but the manifest, sorted by
	// path.
	Files []File `json:"files"`
}

// File is one file of a backup.
type File struct {
	// Path is slash-separated, relative to the backup folder.
	Path string `json:"path"`
	// Size is in bytes.
	Size int64 `json:"size"`
	// SHA256 is the hex SHA-256 of the file's bytes.
	SHA256 string `json:"sha256"`
}

// Bytes returns the total size of the files, in bytes.
func (m *Manifest) Bytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// ErrBadManifest wraps every problem of a manifest: not JSON, unknown
// fields, another format, an unsafe or repeated path.
var ErrBadManifest = errors.New("backup: bad manifest")

// maxManifestBytes bounds the manifest: a few hundred bytes per file, and a
// ledger of a billion events is a few thousand files.
const maxManifestBytes = 16 << 20

// decodeManifest reads a manifest strictly (unknown fields and trailing data
// refused) and checks its format and paths.
func decodeManifest(r io.Reader) (Manifest, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxManifestBytes+1))
	if err != nil {
		return Manifest{}, fmt.Errorf("%w: %w", ErrBadManifest, err)
	}
	if len(b) > maxManifestBytes {
		return Manifest{}, fmt.Errorf("%w: over %d bytes", ErrBadManifest, maxManifestBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("%w: %w", ErrBadManifest, err)
	}
	if dec.More() {
		return Manifest{}, fmt.Errorf("%w: data after the JSON document", ErrBadManifest)
	}
	if m.Format != Format && m.Format != FormatUnsigned {
		return Manifest{}, fmt.Errorf("%w: format %q, this binary reads %q and %q", ErrBadManifest, m.Format, Format, FormatUnsigned)
	}
	seen := make(map[string]bool, len(m.Files))
	for i, f := range m.Files {
		if err := checkPath(f.Path); err != nil {
			return Manifest{}, fmt.Errorf("%w: files[%d]: %w", ErrBadManifest, i, err)
		}
		if seen[f.Path] {
			return Manifest{}, fmt.Errorf("%w: files[%d]: %s listed twice", ErrBadManifest, i, f.Path)
		}
		seen[f.Path] = true
		if f.Size < 0 || len(f.SHA256) != 64 {
			return Manifest{}, fmt.Errorf("%w: files[%d]: size %d, sha256 %q", ErrBadManifest, i, f.Size, f.SHA256)
		}
	}
	return m, nil
}

// Signed reports whether the manifest's format has a signature
// (ManifestSigFile); a manifest of format 1 has none.
func (m *Manifest) Signed() bool { return m.Format != FormatUnsigned }

// encode returns the manifest as written to backup.json.
func (m *Manifest) encode() []byte {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("backup: marshal manifest: %v", err)) // plain fields only
	}
	return append(b, '\n')
}

// checkPath accepts the paths a backup may hold: the checkpoint file, and
// files under ledger/ or keys/, in clean relative slash form. Anything
// else (absolute, "..", the manifest itself, Pebble's lock) is refused, so
// that a stream can never write outside the folder it is received into.
func checkPath(p string) error {
	if p == "" || path.Clean(p) != p || path.IsAbs(p) || strings.HasPrefix(p, "../") || p == ".." || strings.Contains(p, "\\") {
		return fmt.Errorf("unsafe path %q", p)
	}
	switch {
	case p == CheckpointFile:
	case strings.HasPrefix(p, LedgerDir+"/") && p != pebbleLock:
	case strings.HasPrefix(p, KeysDir+"/"):
	default:
		return fmt.Errorf("path %q is not the checkpoint or under %s/ or %s/", p, LedgerDir, KeysDir)
	}
	return nil
}
