package witness

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/transparency-dev/formats/log"
	"github.com/transparency-dev/merkle/proof"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/internal/atomicfile"
	"github.com/greffe/greffe/internal/config"
)

// ServerConfig configures a witness (`greffe witness`). Nothing can change
// while it runs.
type ServerConfig struct {
	// Dir holds what the witness remembers: the newest checkpoint it
	// cosigned for each log (see Server). Created when missing. Required.
	Dir string
	// Signer cosigns (cosignature/v1: NewCosigner). Required.
	Signer note.Signer
	// Logs maps the origin of each log the witness follows to the note
	// verifiers of its checkpoint keys (several during a key rotation);
	// each verifier must be named after its origin. Checkpoints of other
	// origins are answered 404. Required: at least one log.
	Logs map[string][]note.Verifier
	// Marker is a file outside Dir, kept with the witness's key (`greffe
	// witness` puts it beside --key, as KEY.state), where the witness keeps
	// a copy of its state record (which logs it cosigned, and the id of
	// its folder's state), so that a folder lost whole while the key
	// survived is noticed at start (OpenServer refuses with a
	// *StateLostError) instead of a witness that trusts every log anew and
	// cosigns a fork of what it cosigned. Rewritten at every start, so its
	// folder must be writable. "": only a log's file lost from a folder
	// that kept its record is noticed.
	Marker string
	// Logger receives refused checkpoints that may be evidence of a log's
	// misbehaviour (422), failures to persist, and a start that accepted a
	// lost state. Default: discard.
	Logger *slog.Logger
	// Unsafe holds switches that weaken what the witness guarantees.
	Unsafe ServerUnsafe
}

// ServerUnsafe holds the witness's risky switches.
type ServerUnsafe struct {
	// AcceptLostState starts a witness whose state is missing (the
	// *StateLostError OpenServer returns otherwise), logging each loss at
	// error level: the logs whose newest cosigned checkpoint is gone are
	// trusted on first use again, so the witness may cosign a fork of what
	// it cosigned before. For an operator who knows the state is gone for
	// good and will tell the logs' operators and auditors (greffe witness
	// --accept-lost-state). Default false.
	AcceptLostState bool
}

// Errors of AddCheckpoint, one per answer of tlog-witness (the status is in
// each comment). They are matched with errors.Is; a stale old size comes as
// a *StaleError, which carries the witness's size.
var (
	// ErrUnknownLog: the checkpoint's origin is not one the witness follows (404).
	ErrUnknownLog = errors.New("witness: unknown log")
	// ErrBadSignature: no signature by a key the witness trusts for the
	// origin, or such a signature does not verify (403).
	ErrBadSignature = errors.New("witness: no valid signature by the log's key")
	// ErrOldSizeInvalid: the old size is above the checkpoint's size (400).
	ErrOldSizeInvalid = errors.New("witness: old size above the checkpoint's size")
	// ErrStale: the old size is not the size of the latest checkpoint the
	// witness cosigned for the log (409, with that size).
	ErrStale = errors.New("witness: old size is not the size last cosigned")
	// ErrInvalidProof: the consistency proof does not verify, is not empty
	// from size 0, or a checkpoint of the last cosigned size has another
	// root, or a checkpoint of size 0 another root than the empty tree's
	// (422): the log showed two histories.
	ErrInvalidProof = errors.New("witness: the checkpoint is not consistent with the one cosigned")
)

// StaleError is ErrStale with the witness's size.
type StaleError struct{ Size uint64 }

func (e *StaleError) Error() string {
	return fmt.Sprintf("%v: the witness last cosigned size %d", ErrStale, e.Size)
}

// Unwrap makes a *StaleError match ErrStale.
func (e *StaleError) Unwrap() error { return ErrStale }

// Server is a tlog-witness: it cosigns a log's checkpoint only when it is
// consistent with the newest one it cosigned before for that log (trusting
// the first one it sees), and remembers that newest one in its folder:
//
//	<Dir>/LOCK                    held while a witness uses the folder
//	<Dir>/STATE                   which logs it cosigned (stateRecord), also
//	                              kept with its key (ServerConfig.Marker)
//	<Dir>/logs/<origin hash>      the newest cosigned checkpoint of one log
//
// where <origin hash> is the lowercase hex SHA-256 of the log's origin (the
// name of tlog-witness's monitoring path) and the file is the signed note
// as it stands: the checkpoint, the log's signatures that verified, and
// this witness's cosignature. Each is replaced atomically (written,
// fsynced and renamed) before the cosignature is answered, and checking a
// request against it and replacing it happen under the log's lock, so two
// requests can never roll a log's state back. Files of logs no longer
// configured stay untouched. A log's file that is missing although the
// state record lists the log, or a folder lost while the record beside the
// key survived, is refused at start (ErrStateLost): the witness would
// otherwise trust the log's next checkpoint on first use and could cosign
// a fork of what it had cosigned. A folder restored from an older backup
// is not noticed: it holds older checkpoints, from which the witness
// accepts only consistent extensions, but what it cosigned after the
// backup is forgotten.
//
// Safe for concurrent use: requests for different logs run in parallel.
type Server struct {
	cfg    ServerConfig
	logs   map[string]*followedLog // fixed at OpenServer
	state  *stateBook
	unlock func() error
	once   sync.Once
}

// followedLog is what the witness knows of one log.
type followedLog struct {
	origin    string
	verifiers note.Verifiers
	file      string

	mu sync.Mutex
	// Guarded by mu: the newest cosigned checkpoint (cosigned false:
	// none yet).
	cosigned bool
	size     uint64
	root     []byte
	note     []byte
}

// OriginHash returns the lowercase hex SHA-256 of an origin: the name
// under which a witness keeps and serves a log's checkpoint.
func OriginHash(origin string) string {
	h := sha256.Sum256([]byte(origin))
	return hex.EncodeToString(h[:])
}

// ErrInvalidConfig wraps every problem of a ServerConfig or a
// CollectorConfig (a *config.ValidationError).
var ErrInvalidConfig = errors.New("witness: invalid config")

func (c *ServerConfig) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem of c at once (OpenServer applies
// defaults first).
func (c *ServerConfig) Validate() error {
	var p config.Problems
	if c.Dir == "" {
		p.Addf("Dir is required")
	}
	if c.Signer == nil {
		p.Addf("Signer is required")
	}
	if len(c.Logs) == 0 {
		p.Addf("Logs: at least one log to witness is required")
	}
	for origin, vs := range c.Logs {
		if len(vs) == 0 {
			p.Addf("Logs[%q]: no verifier key", origin)
		}
		for _, v := range vs {
			if v.Name() != origin {
				p.Addf("Logs[%q]: verifier %s+%08x is named %q", origin, v.Name(), v.KeyHash(), v.Name())
			}
		}
	}
	return p.Err(ErrInvalidConfig)
}

// OpenServer opens (or creates) the witness's folder, locks it and reads
// what it remembers of each configured log. State it had that is missing
// is refused with a *StateLostError (see Server), unless
// cfg.Unsafe.AcceptLostState.
func OpenServer(cfg ServerConfig) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "logs"), 0o700); err != nil {
		return nil, fmt.Errorf("witness folder: %w", err)
	}
	unlock, err := lockDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	state, err := openState(cfg)
	if err != nil {
		_ = unlock()
		return nil, err
	}
	s := &Server{cfg: cfg, logs: make(map[string]*followedLog, len(cfg.Logs)), state: state, unlock: unlock}
	for origin, vs := range cfg.Logs {
		l := &followedLog{origin: origin, verifiers: note.VerifierList(vs...), file: filepath.Join(cfg.Dir, "logs", OriginHash(origin))}
		if err := l.load(); err != nil {
			_ = unlock()
			return nil, err
		}
		s.logs[origin] = l
	}
	return s, nil
}

// load reads the log's file; a missing file is a log never cosigned. The
// witness trusts its own writes: the stored note is parsed, not verified
// (the log's key may have been rotated since).
func (l *followedLog) load() error {
	b, err := os.ReadFile(l.file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("witness: %w", err)
	}
	i := bytes.Index(b, []byte("\n\n"))
	var cp log.Checkpoint
	if i < 0 {
		return fmt.Errorf("witness: %s is not a signed checkpoint", l.file)
	}
	if _, err := cp.Unmarshal(b[:i+1]); err != nil || cp.Origin != l.origin {
		return fmt.Errorf("witness: %s is not a checkpoint of %q: %v", l.file, l.origin, err)
	}
	l.cosigned, l.size, l.root, l.note = true, cp.Size, cp.Hash, b
	return nil
}

// Close releases the folder's lock. Idempotent.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() { err = s.unlock() })
	return err
}

// Latest returns the newest checkpoint the witness cosigned for origin,
// with its cosignature, or nil when none.
func (s *Server) Latest(origin string) []byte {
	l, ok := s.logs[origin]
	if !ok {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.note
}

// AddCheckpoint is the add-checkpoint call: it checks req as tlog-witness
// says and, when every check passes, records the checkpoint as the log's
// newest and returns this witness's cosignature line. Errors are those
// listed above (a *StaleError for a stale old size), or a failure to
// persist (a 500: nothing was cosigned).
func (s *Server) AddCheckpoint(ctx context.Context, req AddCheckpointRequest) ([]byte, error) {
	origin, _, _ := strings.Cut(string(req.Checkpoint), "\n")
	l, ok := s.logs[origin]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownLog, origin)
	}
	n, err := note.Open(req.Checkpoint, l.verifiers)
	var unverified *note.UnverifiedNoteError
	var invalid *note.InvalidSignatureError
	switch {
	case errors.As(err, &unverified):
		return nil, fmt.Errorf("%w: no signature by a key of %q", ErrBadSignature, origin)
	case errors.As(err, &invalid):
		return nil, fmt.Errorf("%w: the signature by %s+%08x does not verify", ErrBadSignature, invalid.Name, invalid.Hash)
	case err != nil:
		return nil, fmt.Errorf("%w: not a signed note: %v", ErrMalformedRequest, err)
	}
	var cp log.Checkpoint
	if _, err := cp.Unmarshal([]byte(n.Text)); err != nil {
		return nil, fmt.Errorf("%w: checkpoint: %v", ErrMalformedRequest, err)
	}
	if req.OldSize > cp.Size {
		return nil, fmt.Errorf("%w: old size %d, checkpoint size %d", ErrOldSizeInvalid, req.OldSize, cp.Size)
	}
	if cp.Size == 0 && !bytes.Equal(cp.Hash, events.EmptyRoot[:]) {
		return nil, fmt.Errorf("%w: a checkpoint of size 0 must have the empty tree's root", ErrInvalidProof)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	// "The witness MUST check that the old size matches the size of the
	// latest checkpoint it cosigned for the checkpoint's origin (or zero if
	// it never cosigned a checkpoint for that origin)."
	if req.OldSize != l.size {
		return nil, &StaleError{Size: l.size}
	}
	switch {
	case l.cosigned && cp.Size == l.size && !bytes.Equal(cp.Hash, l.root):
		s.suspicious(origin, l, req, "the root differs from the one cosigned at the same size")
		return nil, fmt.Errorf("%w: size %d was cosigned with another root", ErrInvalidProof, l.size)
	case l.size == 0 && len(req.Proof) > 0:
		return nil, fmt.Errorf("%w: a consistency proof from size 0 is empty, got %d hashes", ErrInvalidProof, len(req.Proof))
	case l.size > 0:
		if err := proof.VerifyConsistency(events.Hasher, l.size, cp.Size, req.Proof, l.root, cp.Hash); err != nil {
			s.suspicious(origin, l, req, err.Error())
			return nil, fmt.Errorf("%w: from size %d to %d: %v", ErrInvalidProof, l.size, cp.Size, err)
		}
	}
	lines, err := signatureLines(n.Text, s.cfg.Signer)
	if err != nil {
		return nil, fmt.Errorf("witness: cosign: %w", err)
	}
	// The stored note: the checkpoint, the log's signatures that verified
	// (unknown ones are dropped), and the cosignature answered.
	var stored bytes.Buffer
	stored.WriteString(n.Text)
	stored.WriteByte('\n')
	for _, sg := range n.Sigs {
		fmt.Fprintf(&stored, "— %s %s\n", sg.Name, sg.Base64)
	}
	stored.Write(lines)
	if err := atomicfile.WriteFile(l.file, stored.Bytes()); err != nil {
		s.cfg.Logger.Error("witness: cannot record a cosigned checkpoint; nothing cosigned", "origin", origin, "size", cp.Size, "err", err)
		return nil, err
	}
	l.cosigned, l.size, l.root, l.note = true, cp.Size, cp.Hash, stored.Bytes()
	// Listed once its file is on disk (stateRecord says why in this order).
	if h := OriginHash(origin); !s.state.has(h) {
		if err := s.state.add(h, origin); err != nil {
			s.cfg.Logger.Error("witness: cannot record that a log was cosigned; its cosignature is withheld", "origin", origin, "size", cp.Size, "err", err)
			return nil, err
		}
	}
	return lines, nil
}

// suspicious logs a refused checkpoint that the log signed: it may be proof
// of the log's misbehaviour (tlog-witness: "the witness MAY log the
// request"). REQUIRES: l.mu held.
func (s *Server) suspicious(origin string, l *followedLog, req AddCheckpointRequest, why string) {
	s.cfg.Logger.Warn("witness: refused a validly signed checkpoint inconsistent with the one cosigned: possible log misbehaviour",
		"origin", origin, "why", why, "old_size", req.OldSize, "cosigned", string(l.note), "submitted", string(req.Checkpoint))
}

// Handler serves tlog-witness over HTTP:
//
//	POST /add-checkpoint            200 cosignature lines; 400 malformed or old size
//	                                above the checkpoint's; 403 bad log signature;
//	                                404 unknown origin; 409 stale old size (body:
//	                                the witness's size, text/x.tlog.size); 413 body
//	                                over MaxRequestBytes; 422 inconsistent
//	GET  /<origin hash>/checkpoint  the newest cosigned checkpoint of a log
//	                                (tlog-witness's monitoring path); 404 if none
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+AddCheckpointPath, s.serveAdd)
	mux.HandleFunc("GET /{hash}/checkpoint", func(w http.ResponseWriter, r *http.Request) {
		for origin, l := range s.logs {
			if OriginHash(origin) != r.PathValue("hash") {
				continue
			}
			l.mu.Lock()
			b := l.note
			l.mu.Unlock()
			if b != nil {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				_, _ = w.Write(b)
				return
			}
		}
		http.Error(w, "no checkpoint cosigned for this log", http.StatusNotFound)
	})
	return mux
}

func (s *Server) serveAdd(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		http.Error(w, fmt.Sprintf("the request body is over %d bytes", MaxRequestBytes), http.StatusRequestEntityTooLarge)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, err := ParseAddCheckpoint(b)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	lines, err := s.AddCheckpoint(r.Context(), req)
	var stale *StaleError
	switch {
	case err == nil:
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write(lines)
	case errors.As(err, &stale):
		w.Header().Set("Content-Type", ContentTypeSize)
		w.WriteHeader(http.StatusConflict)
		fmt.Fprintf(w, "%d\n", stale.Size)
	default:
		http.Error(w, err.Error(), statusOf(err))
	}
}

// statusOf maps AddCheckpoint's errors to tlog-witness's statuses.
func statusOf(err error) int {
	switch {
	case errors.Is(err, ErrUnknownLog):
		return http.StatusNotFound
	case errors.Is(err, ErrBadSignature):
		return http.StatusForbidden
	case errors.Is(err, ErrMalformedRequest), errors.Is(err, ErrOldSizeInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrInvalidProof):
		return http.StatusUnprocessableEntity
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// HTTP server bounds of Serve: a witness answers the public, so nothing a
// client sends may hold a connection or a goroutine for long.
const (
	serverReadHeaderTimeout = 10 * time.Second
	serverReadTimeout       = 30 * time.Second
	serverWriteTimeout      = 30 * time.Second
	serverIdleTimeout       = 2 * time.Minute
	serverMaxHeaderBytes    = 16 << 10
	serverShutdownGrace     = 5 * time.Second
)

// Serve serves Handler on ln until ctx ends, then shuts down gracefully
// (within 5 s) and returns nil; it returns the server's error otherwise.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: serverReadHeaderTimeout,
		ReadTimeout:       serverReadTimeout,
		WriteTimeout:      serverWriteTimeout,
		IdleTimeout:       serverIdleTimeout,
		MaxHeaderBytes:    serverMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), serverShutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
