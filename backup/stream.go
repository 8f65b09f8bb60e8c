package backup

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/events/pebblelog"
)

// The stream (GET /v1/backup, format 2) is a POSIX tar archive
// (archive/tar, USTAR or PAX headers) of regular files only, in this order:
//
//	checkpoint       the signed checkpoint note at the backup's size
//	ledger/…         the files of the ledger copy, sorted by name
//	keys/…           the node's verifier keys (*.pub), and its private keys
//	                 (*.key) only when asked for, sorted
//	backup.json      the manifest, with the SHA-256 of every file above
//	backup.json.sig  the node's signature of the manifest's bytes, last
//
// Every entry has mode 0600 and the backup's creation time. The manifest
// comes last because the node hashes each file while it streams it (the
// files are read once); the receiver hashes what it writes and compares
// when the manifest arrives, so a stream cut short (a node that fails
// mid-way aborts the connection) never ends as a backup folder.

// Source is what a backup stream is made of.
type Source struct {
	// Ledger is the folder of the consistent ledger copy and Info what it
	// holds (pebblelog.Store.Backup).
	Ledger string
	Info   pebblelog.BackupInfo
	// Keys is the node's key folder (<data>/keys): its verifier keys are
	// streamed, its private keys only with PrivateKeys. Empty leaves the
	// whole folder out.
	Keys        string
	PrivateKeys bool
	// Signers sign the manifest: the node's checkpoint signing keys (the
	// ones that sign the backup's checkpoint). Required.
	Signers []note.Signer
	// NodeID names the node; CreatedAt is the backup's time.
	NodeID    string
	CreatedAt time.Time
}

// Stream is a backup ready to be sent: its files are listed and their
// total size is known before the first byte goes out. Not safe for
// concurrent use; Write is called once.
type Stream struct {
	manifest Manifest
	entries  []entry
	bytes    int64
	signers  []note.Signer
}

type entry struct {
	name string // path in the backup
	src  string // file to read, or "" for data
	data []byte
	size int64
}

// NewStream lists the files of src. The ledger copy must stay in place
// until Write returns.
func NewStream(src Source) (*Stream, error) {
	info := src.Info
	if len(src.Signers) == 0 {
		return nil, errors.New("backup: no signing key to sign the manifest with")
	}
	s := &Stream{manifest: Manifest{
		Format: Format, LedgerID: info.LedgerID, Origin: info.Origin, StoreFormat: info.Format,
		Size: info.Head.Size, Root: append([]byte(nil), info.Head.Root[:]...), LastRecordedAt: info.Head.RecordedAt,
		RaftIndex: info.Applied, Checkpoint: string(info.Checkpoint.Note),
		NodeID: src.NodeID, CreatedAt: src.CreatedAt.UTC(), Keys: src.Keys != "" && src.PrivateKeys,
	}, signers: src.Signers}
	s.entries = append(s.entries, entry{name: CheckpointFile, data: info.Checkpoint.Note, size: int64(len(info.Checkpoint.Note))})
	if err := s.list(src.Ledger, LedgerDir, func(string) bool { return true }); err != nil {
		return nil, err
	}
	if src.Keys != "" {
		// The key folder's key files only (node/keys.go): verifier keys
		// always, private keys when asked for.
		keyFile := func(name string) bool {
			return strings.HasSuffix(name, ".pub") || src.PrivateKeys && strings.HasSuffix(name, ".key")
		}
		if err := s.list(src.Keys, KeysDir, keyFile); err != nil {
			return nil, err
		}
	}
	for _, e := range s.entries {
		s.bytes += e.size
	}
	return s, nil
}

// list adds the regular files under root that keep accepts, named
// prefix/<relative path>.
func (s *Stream) list(root, prefix string, keep func(name string) bool) error {
	var found []entry
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		name := prefix + "/" + filepath.ToSlash(rel)
		if name == pebbleLock || !keep(name) {
			return nil
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("backup: %s is not a regular file", p)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if err := checkPath(name); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		found = append(found, entry{name: name, src: p, size: fi.Size()})
		return nil
	})
	if err != nil {
		return fmt.Errorf("backup: list %s: %w", root, err)
	}
	sort.Slice(found, func(i, j int) bool { return found[i].name < found[j].name })
	s.entries = append(s.entries, found...)
	return nil
}

// Manifest returns the manifest without its file list (known once Write
// has hashed the files).
func (s *Stream) Manifest() Manifest { return s.manifest }

// Bytes returns the total size of the files, in bytes (the manifest
// excluded).
func (s *Stream) Bytes() int64 { return s.bytes }

// Write streams the backup to w and returns the manifest it ended with.
// It stops between two files when ctx ends.
func (s *Stream) Write(ctx context.Context, w io.Writer) (Manifest, error) {
	bw := bufio.NewWriterSize(w, 256<<10)
	tw := tar.NewWriter(bw)
	m := s.manifest
	mtime := m.CreatedAt.Truncate(time.Second)
	for _, e := range s.entries {
		if err := ctx.Err(); err != nil {
			return Manifest{}, err
		}
		sum, err := writeEntry(tw, e, mtime)
		if err != nil {
			return Manifest{}, fmt.Errorf("backup: %s: %w", e.name, err)
		}
		m.Files = append(m.Files, File{Path: e.name, Size: e.size, SHA256: sum})
	}
	mb := m.encode()
	sig, err := signManifest(m.Origin, mb, s.signers)
	if err != nil {
		return Manifest{}, err
	}
	for _, e := range []entry{{name: ManifestFile, data: mb, size: int64(len(mb))}, {name: ManifestSigFile, data: sig, size: int64(len(sig))}} {
		if _, err := writeEntry(tw, e, mtime); err != nil {
			return Manifest{}, fmt.Errorf("backup: %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return Manifest{}, err
	}
	return m, bw.Flush()
}

// writeEntry writes one file and returns the hex SHA-256 of its bytes.
func writeEntry(tw *tar.Writer, e entry, mtime time.Time) (string, error) {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o600, Size: e.size, ModTime: mtime}); err != nil {
		return "", err
	}
	h := sha256.New()
	out := io.MultiWriter(tw, h)
	if e.src == "" {
		if _, err := out.Write(e.data); err != nil {
			return "", err
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	f, err := os.Open(e.src)
	if err != nil {
		return "", err
	}
	defer f.Close()
	// The copy's files are immutable (hard links to tables, or files no
	// database has open): a file that changed size is a bug or tampering.
	if n, err := io.CopyN(out, f, e.size); err != nil {
		return "", fmt.Errorf("read %d of %d bytes: %w", n, e.size, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
