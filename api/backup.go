package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/backup"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/wire"
)

// Backuper is what GET /v1/backup needs from the store (pebblelog.Store
// implements it): a consistent copy of the whole ledger with a checkpoint
// signed at its size, which the caller releases, and the latest signed
// checkpoint (signed on demand).
type Backuper interface {
	Backup(ctx context.Context) (*pebblelog.Backup, error)
	LatestCheckpoint(ctx context.Context) (events.Checkpoint, error)
}

var _ Backuper = (*pebblelog.Store)(nil)

// The bounds of a backup stream. A client holds the one backup slot of
// the node, and the copy's hard links keep tables on disk, for as long as
// it takes: one that stops reading, or reads a byte at a time, must not
// hold them for ever.
const (
	// DefaultBackupStallTimeout is how long one write of the stream may
	// wait for the client to read (the write deadline of every write): a
	// minute without progress is a client that is gone, or one that holds
	// the slot on purpose.
	DefaultBackupStallTimeout = time.Minute
	// DefaultBackupMaxDuration bounds the whole stream: 12 hours stream a
	// few terabytes at the speed of a disk.
	DefaultBackupMaxDuration = 12 * time.Hour
)

// BackupConfig configures GET /v1/backup.
type BackupConfig struct {
	// KeysDir is the node's key folder (<data>/keys): its verifier keys
	// are in every backup, its private keys only in an admin's that asks
	// for them.
	KeysDir string
	// Signers are the node's checkpoint signing keys: they sign each
	// backup's manifest. Required.
	Signers []note.Signer
	// StallTimeout bounds each write of the stream (the client stopped
	// reading: the connection is dropped). Zero:
	// DefaultBackupStallTimeout.
	StallTimeout time.Duration
	// MaxDuration bounds the whole stream. Zero: DefaultBackupMaxDuration.
	MaxDuration time.Duration
}

// MountBackup adds GET /v1/backup (operator and admin roles; docs/API.md):
// a consistent backup of this node, taken while it serves writes, streamed
// as the tar of package backup, its manifest signed by cfg.Signers. The
// headers announce it before the first byte: backup.HeaderSize (events),
// HeaderRoot, HeaderBytes (the files' total, for progress) and
// HeaderLedger.
//
// The backup holds the node's verifier keys; its private keys only with
// ?include_keys=true, from an admin (403 backup_keys_admin_only for an
// operator). ?keys=false, the former way to leave the keys out, is
// accepted and changes nothing.
//
// One backup at a time per node: a second one is refused with 409
// backup_in_progress while the first streams. A client that stops reading
// for cfg.StallTimeout, or is still reading after cfg.MaxDuration, is
// dropped. A failure after the headers aborts the connection, so the
// receiver never mistakes a cut stream for a whole one (the manifest comes
// last). Call it before Serve.
func (s *Server) MountBackup(b Backuper, cfg BackupConfig) {
	if cfg.StallTimeout == 0 {
		cfg.StallTimeout = DefaultBackupStallTimeout
	}
	if cfg.MaxDuration == 0 {
		cfg.MaxDuration = DefaultBackupMaxDuration
	}
	busy := make(chan struct{}, 1) // the one backup allowed at a time
	s.Handle("GET "+backup.Route, func(w http.ResponseWriter, r *http.Request) {
		private, err := includeKeys(r)
		if err != nil {
			writeError(w, err)
			return
		}
		if p := PrincipalFrom(r.Context()); private && p.Role != RoleAdmin {
			writeError(w, &wire.Error{Code: wire.CodeBackupKeysAdminOnly, Field: "include_keys",
				Message: fmt.Sprintf("role %s may not take the node's private keys: only an admin may (ask without include_keys for a backup with the verifier keys)", p.Role)})
			return
		}
		select {
		case busy <- struct{}{}:
		default:
			writeError(w, &wire.Error{Code: wire.CodeBackupInProgress,
				Message: "another backup of this node is being streamed; retry once it is done"})
			return
		}
		err = s.serveBackup(w, r, b, cfg, private)
		<-busy // the copy is released: the next backup may start
		if err != nil {
			s.cfg.Logger.Warn(backupAborted, "by", PrincipalFrom(r.Context()).Name, "reason", err.Error())
			panic(http.ErrAbortHandler) // the client must see a cut stream, not an end
		}
	}, RoleOperator)
}

// includeKeys reads whether the request asks for the private keys.
func includeKeys(r *http.Request) (bool, error) {
	q := r.URL.Query()
	switch v := q.Get("keys"); v {
	case "", "false":
	case "true":
		return true, nil // the former default, now an explicit request
	default:
		return false, &wire.Error{Code: wire.CodeInvalidQuery, Field: "keys",
			Message: fmt.Sprintf("keys %q: use include_keys=true for the private keys (admin only); keys=false is the default", v)}
	}
	switch v := q.Get("include_keys"); v {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	default:
		return false, &wire.Error{Code: wire.CodeInvalidQuery, Field: "include_keys",
			Message: fmt.Sprintf("include_keys %q: use true (the node's private keys too, admin only) or false (the default)", v)}
	}
}

// serveBackup streams a backup. An error means the stream failed after the
// headers were sent (the caller aborts the connection); every failure
// before them is answered here.
func (s *Server) serveBackup(w http.ResponseWriter, r *http.Request, b Backuper, cfg BackupConfig, private bool) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(r.Context(), cfg.MaxDuration)
	defer cancel()
	// A checkpoint signed by the current keys is stored before the copy is
	// taken, so that the copy's ledger commits to them: a restore
	// publishes only keys the ledger holds a signature of (package
	// backup, keys.go).
	if _, err := b.LatestCheckpoint(ctx); err != nil && !errors.Is(err, pebblelog.ErrNoSigner) {
		writeError(w, err)
		return nil
	}
	bk, err := b.Backup(ctx)
	if err != nil {
		if errors.Is(err, pebblelog.ErrNoSigner) {
			err = &wire.Error{Code: wire.CodeUnavailable, Message: "the node has no checkpoint signing key yet: " + err.Error()}
		}
		writeError(w, err)
		return nil
	}
	defer bk.Release()
	src := backup.Source{Ledger: bk.Dir(), Info: bk.Info(), NodeID: s.cfg.NodeID, CreatedAt: time.Now(),
		Keys: cfg.KeysDir, PrivateKeys: private, Signers: cfg.Signers}
	st, err := backup.NewStream(src)
	if err != nil {
		writeError(w, err)
		return nil
	}
	info := bk.Info()
	h := w.Header()
	h.Set("Content-Type", "application/x-tar")
	h.Set("Cache-Control", "no-store")
	h.Set(backup.HeaderSize, strconv.FormatUint(info.Head.Size, 10))
	h.Set(backup.HeaderRoot, base64.StdEncoding.EncodeToString(info.Head.Root[:]))
	h.Set(backup.HeaderBytes, strconv.FormatInt(st.Bytes(), 10))
	h.Set(backup.HeaderLedger, info.LedgerID)
	dw := &deadlineWriter{w: w, rc: http.NewResponseController(w), stall: cfg.StallTimeout, end: start.Add(cfg.MaxDuration)}
	dw.arm()
	w.WriteHeader(http.StatusOK)
	m, err := st.Write(ctx, dw)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) && time.Now().Before(dw.end):
		return fmt.Errorf("the client read nothing for %s (backup of %d events): %w", cfg.StallTimeout, info.Head.Size, err)
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("the stream was not done after %s (backup of %d events): %w", cfg.MaxDuration, info.Head.Size, err)
	case err != nil:
		return fmt.Errorf("backup of %d events: %w", info.Head.Size, err)
	}
	_ = dw.rc.SetWriteDeadline(time.Time{}) // the connection may serve other requests
	s.cfg.Logger.Info("backup served", "by", PrincipalFrom(r.Context()).Name, "size", m.Size, "files", len(m.Files),
		"bytes", st.Bytes(), "private_keys", private, "elapsed", time.Since(start))
	return nil
}

// backupAborted is the message logged when a backup stream is cut.
const backupAborted = "backup stream aborted: connection dropped"

// deadlineChunk is the most a deadlineWriter writes under one deadline, so
// that the stream's own 256 KiB writes need not go out whole within one
// stall timeout. The kernel still wakes a blocked writer only once a good
// part of the socket's send buffer drained (about half, up to 2 MiB on
// Linux's defaults): a client reading slower than that per stall timeout
// (some 35 KB/s at the default minute) is dropped as stalled
// (writing TestAPI_BackupStalledClientDropped, a 200 KB/s reader was
// cut by a 1 s stall timeout).
const deadlineChunk = 32 << 10

// deadlineWriter sets the connection's write deadline before each chunk
// it writes: the stall timeout from now, never past the end of the
// stream. A client that stops reading makes the write fail once the
// deadline passes.
type deadlineWriter struct {
	w     io.Writer
	rc    *http.ResponseController
	stall time.Duration
	end   time.Time
}

// arm sets the deadline for the next write. A connection that cannot take
// one (none of net/http's) is left to the context's bound.
func (d *deadlineWriter) arm() {
	t := time.Now().Add(d.stall)
	if t.After(d.end) {
		t = d.end
	}
	_ = d.rc.SetWriteDeadline(t)
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	var n int
	for len(p) > 0 {
		c := p[:min(len(p), deadlineChunk)]
		d.arm()
		m, err := d.w.Write(c)
		n += m
		if err != nil {
			return n, err
		}
		p = p[len(c):]
	}
	return n, nil
}
