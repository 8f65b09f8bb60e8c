package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/greffe/greffe/backup"
	"github.com/greffe/greffe/events/pebblelog"
)

// Backuper is what GET /v1/backup needs from the store (pebblelog.Store
// implements it): a consistent copy of the whole ledger with a checkpoint
// signed at its size, which the caller releases.
type Backuper interface {
	Backup(ctx context.Context) (*pebblelog.Backup, error)
}

// CodeBackupInProgress: another backup of this node is being streamed;
// retry when it is done. Never renamed, never reused.
const CodeBackupInProgress = "backup_in_progress"

// MountBackup adds GET /v1/backup (operator and admin roles; docs/API.md):
// a consistent backup of this node, taken while it serves writes, streamed
// as the tar of package backup. The headers announce it before the first
// byte: backup.HeaderSize (events), HeaderRoot, HeaderBytes (the files'
// total, for progress) and HeaderLedger. ?keys=false leaves keysDir (the
// node's key folder, private keys included) out.
//
// One backup at a time per node: a second one is refused with 409
// backup_in_progress while the first streams. A failure after the headers
// aborts the connection, so the receiver never mistakes a cut stream for a
// whole one (the manifest comes last). Call it before Serve.
func (s *Server) MountBackup(b Backuper, keysDir string) {
	busy := make(chan struct{}, 1) // the one backup allowed at a time
	s.Handle("GET "+backup.Route, func(w http.ResponseWriter, r *http.Request) {
		withKeys := true
		switch v := r.URL.Query().Get("keys"); v {
		case "", "true":
		case "false":
			withKeys = false
		default:
			writeError(w, &Error{Code: CodeInvalidQuery, Field: "keys",
				Message: fmt.Sprintf("keys %q: use true (the default) or false", v)})
			return
		}
		select {
		case busy <- struct{}{}:
			defer func() { <-busy }()
		default:
			writeError(w, &Error{Code: CodeBackupInProgress,
				Message: "another backup of this node is being streamed; retry once it is done"})
			return
		}
		s.serveBackup(w, r, b, keysDir, withKeys)
	}, RoleOperator)
}

func (s *Server) serveBackup(w http.ResponseWriter, r *http.Request, b Backuper, keysDir string, withKeys bool) {
	start := time.Now()
	ctx := r.Context()
	bk, err := b.Backup(ctx)
	if err != nil {
		if errors.Is(err, pebblelog.ErrNoSigner) {
			err = &Error{Code: CodeUnavailable, Message: "the node has no checkpoint signing key yet: " + err.Error()}
		}
		writeError(w, err)
		return
	}
	defer bk.Release()
	src := backup.Source{Ledger: bk.Dir(), Info: bk.Info(), NodeID: s.cfg.NodeID, CreatedAt: time.Now()}
	if withKeys {
		src.Keys = keysDir
	}
	st, err := backup.NewStream(src)
	if err != nil {
		writeError(w, err)
		return
	}
	info := bk.Info()
	h := w.Header()
	h.Set("Content-Type", "application/x-tar")
	h.Set("Cache-Control", "no-store")
	h.Set(backup.HeaderSize, strconv.FormatUint(info.Head.Size, 10))
	h.Set(backup.HeaderRoot, base64.StdEncoding.EncodeToString(info.Head.Root[:]))
	h.Set(backup.HeaderBytes, strconv.FormatInt(st.Bytes(), 10))
	h.Set(backup.HeaderLedger, info.LedgerID)
	w.WriteHeader(http.StatusOK)
	m, err := st.Write(ctx, w)
	if err != nil {
		s.cfg.Logger.Warn("backup stream failed: connection aborted", "size", info.Head.Size, "err", err)
		panic(http.ErrAbortHandler) // the client must see a cut stream, not an end
	}
	s.cfg.Logger.Info("backup served", "by", PrincipalFrom(ctx).Name, "size", m.Size, "files", len(m.Files),
		"bytes", st.Bytes(), "keys", withKeys, "elapsed", time.Since(start))
}
