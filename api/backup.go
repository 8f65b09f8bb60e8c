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

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// Backups is what GET /v1/backup needs from the node: its backups, taken
// while it serves (*backup.Taker implements it; node wires it over the
// store, so that api links no storage engine).
type Backups interface {
	// Backup takes a consistent copy of the ledger, with a checkpoint
	// signed at its size, and streams it as the tar of package backup,
	// with the node's private keys only when private. Once the copy is
	// taken, and before anything is written, it calls start with what the
	// backup holds and writes the stream to the writer start returns; it
	// returns the number of files written. An error before start means
	// nothing was sent (one matching events.ErrNoSigner: the node has no
	// key to sign with yet); after it, the stream is cut.
	Backup(ctx context.Context, private bool, start func(wire.BackupInfo) io.Writer) (files int, err error)
}

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
	// StallTimeout bounds each write of the stream (the client stopped
	// reading: the connection is dropped). Zero:
	// DefaultBackupStallTimeout.
	StallTimeout time.Duration
	// MaxDuration bounds the whole stream. Zero: DefaultBackupMaxDuration.
	MaxDuration time.Duration
}

// setDefaults gives the bounds left zero their defaults. BackupConfig has
// no Validate: MountBackup returns no error, and what a negative bound
// does (the stream's deadline is already past) it has always done.
func (c *BackupConfig) setDefaults() {
	if c.StallTimeout == 0 {
		c.StallTimeout = DefaultBackupStallTimeout
	}
	if c.MaxDuration == 0 {
		c.MaxDuration = DefaultBackupMaxDuration
	}
}

// MountBackup adds GET /v1/backup (operator and admin roles; docs/API.md):
// a consistent backup of this node, taken while it serves writes, streamed
// as the tar of package backup, its manifest signed by cfg.Signers. The
// headers announce it before the first byte: wire.HeaderBackupSize (events),
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
func (s *Server) MountBackup(b Backups, cfg BackupConfig) {
	cfg.setDefaults()
	busy := make(chan struct{}, 1) // the one backup allowed at a time
	s.Handle("GET "+wire.BackupRoute, func(w http.ResponseWriter, r *http.Request) {
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
func (s *Server) serveBackup(w http.ResponseWriter, r *http.Request, b Backups, cfg BackupConfig, private bool) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(r.Context(), cfg.MaxDuration)
	defer cancel()
	var (
		info wire.BackupInfo
		dw   *deadlineWriter // set once the headers are sent
	)
	files, err := b.Backup(ctx, private, func(bi wire.BackupInfo) io.Writer {
		info = bi
		h := w.Header()
		h.Set("Content-Type", "application/x-tar")
		h.Set("Cache-Control", "no-store")
		h.Set(wire.HeaderBackupSize, strconv.FormatUint(info.Size, 10))
		h.Set(wire.HeaderBackupRoot, base64.StdEncoding.EncodeToString(info.Root[:]))
		h.Set(wire.HeaderBackupBytes, strconv.FormatInt(info.Bytes, 10))
		h.Set(wire.HeaderBackupLedger, info.LedgerID)
		dw = &deadlineWriter{w: w, rc: http.NewResponseController(w), stall: cfg.StallTimeout, end: start.Add(cfg.MaxDuration)}
		dw.arm()
		w.WriteHeader(http.StatusOK)
		return dw
	})
	switch {
	case dw == nil && errors.Is(err, events.ErrNoSigner):
		writeError(w, &wire.Error{Code: wire.CodeUnavailable, Message: "the node has no checkpoint signing key yet: " + err.Error()})
		return nil
	case dw == nil:
		writeError(w, err)
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded) && time.Now().Before(dw.end):
		return fmt.Errorf("the client read nothing for %s (backup of %d events): %w", cfg.StallTimeout, info.Size, err)
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("the stream was not done after %s (backup of %d events): %w", cfg.MaxDuration, info.Size, err)
	case err != nil:
		return fmt.Errorf("backup of %d events: %w", info.Size, err)
	}
	_ = dw.rc.SetWriteDeadline(time.Time{}) // the connection may serve other requests
	s.cfg.Logger.Info("backup served", "by", PrincipalFrom(r.Context()).Name, "size", info.Size, "files", files,
		"bytes", info.Bytes, "private_keys", private, "elapsed", time.Since(start))
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
