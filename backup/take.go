package backup

import (
	"context"
	"errors"
	"io"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/wire"
)

// Ledger is what taking a backup needs from the store (*pebblelog.Store
// implements it). Both methods are safe for concurrent use.
type Ledger interface {
	// LatestCheckpoint signs the acknowledged head if it grew since the
	// last checkpoint, and returns the newest.
	LatestCheckpoint(ctx context.Context) (events.Checkpoint, error)
	// Backup takes a consistent copy of the whole ledger with a checkpoint
	// signed at its size, which the caller releases.
	Backup(ctx context.Context) (*pebblelog.Backup, error)
}

// Taker takes a node's backups while it serves and streams them: the
// store's consistent copy and the node's key folder, as the tar of this
// package, its manifest signed by the node's keys. node wires one into
// GET /v1/backup (api.Backups), which serves one at a time. Safe for
// concurrent use; set its fields before the first call.
type Taker struct {
	Ledger Ledger
	// KeysDir is the node's key folder (<data>/keys): its verifier keys are
	// in every backup, its private keys only in one that asks for them.
	KeysDir string
	// Signers are the node's checkpoint signing keys: they sign each
	// backup's manifest. Required.
	Signers []note.Signer
	// NodeID names the node in the manifest.
	NodeID string
}

// Backup takes a consistent copy of the ledger, with the node's private
// keys when private, and streams it. Once the copy is taken, and before
// anything is written, it calls start with what the backup holds, and
// writes the stream to the writer start returns; it returns the number of
// files written. An error before start means nothing was sent (one
// matching events.ErrNoSigner: the node has no key to sign with yet); an
// error after it cuts the stream. The copy is released before Backup
// returns.
func (t *Taker) Backup(ctx context.Context, private bool, start func(wire.BackupInfo) io.Writer) (files int, err error) {
	// A checkpoint signed by the current keys is stored before the copy is
	// taken, so that the copy's ledger commits to them: a restore
	// publishes only keys the ledger holds a signature of (keys.go).
	if _, err := t.Ledger.LatestCheckpoint(ctx); err != nil && !errors.Is(err, events.ErrNoSigner) {
		return 0, err
	}
	bk, err := t.Ledger.Backup(ctx)
	if err != nil {
		return 0, err
	}
	defer bk.Release()
	info := bk.Info()
	st, err := NewStream(Source{Ledger: bk.Dir(), Info: info, NodeID: t.NodeID, CreatedAt: time.Now(),
		Keys: t.KeysDir, PrivateKeys: private, Signers: t.Signers})
	if err != nil {
		return 0, err
	}
	w := start(wire.BackupInfo{Size: info.Head.Size, Root: info.Head.Root, LedgerID: info.LedgerID, Bytes: st.Bytes()})
	m, err := st.Write(ctx, w)
	return len(m.Files), err
}
