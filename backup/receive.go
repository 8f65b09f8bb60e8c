package backup

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/wire"
)

// ErrBadStream wraps every problem of a received stream: not a tar, an
// entry that is not a regular file or has an unsafe name, a stream cut
// short (no manifest), files that differ from the manifest.
var ErrBadStream = errors.New("backup: bad backup stream")

// Fetch's defaults for FetchConfig's bounds. The node's own bounds are the
// same (api.DefaultBackupStallTimeout, api.DefaultBackupMaxDuration).
const (
	// DefaultStallTimeout: the node flushes and takes a checkpoint before
	// its first byte (seconds on a busy node), then writes as fast as the
	// disk reads; a minute without a byte is a node, or a network, that is
	// gone.
	DefaultStallTimeout = time.Minute
	// DefaultTimeout: 12 hours stream a few terabytes at the speed of a
	// disk; a backup still running then is stuck, not slow.
	DefaultTimeout = 12 * time.Hour
)

// FetchConfig configures Fetch. The zero value takes a backup without the
// private keys to the OS's filesystem, with the default bounds.
type FetchConfig struct {
	// IncludePrivateKeys asks for the node's private keys too (the admin
	// role only: the node refuses the operator, 403
	// backup_keys_admin_only). Without them a restore needs the keys from
	// elsewhere (RestoreConfig.Keys) or makes the node a new key.
	IncludePrivateKeys bool
	// StallTimeout gives up when nothing arrived for this long (the
	// headers included). Zero: DefaultStallTimeout; negative: never.
	StallTimeout time.Duration
	// Timeout gives up when the whole backup took longer. Zero:
	// DefaultTimeout; negative: never.
	Timeout time.Duration
	// FS is where the backup folder is written. Nil: the OS.
	FS vfs.FS
	// Progress, when set, is called as bytes arrive with the bytes received
	// and the total the node announced, on the receiving goroutine.
	Progress func(done, total int64)
}

// FetchResult describes a backup taken.
type FetchResult struct {
	// Dir is the backup folder; Manifest its manifest.
	Dir      string
	Manifest Manifest
	// Elapsed is the time from the request to the synced folder.
	Elapsed time.Duration
}

// ErrStalled is returned by Fetch when nothing arrived from the node for
// FetchConfig.StallTimeout, ErrTimedOut when the backup took longer than
// FetchConfig.Timeout: nothing was left behind.
var (
	ErrStalled  = errors.New("backup: the node stopped sending")
	ErrTimedOut = errors.New("backup: the backup took too long")
)

// setDefaults gives the fields left zero their defaults. FetchConfig has
// no Validate: every value means something (a negative bound: none).
func (c *FetchConfig) setDefaults() {
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
}

// Fetch takes an online backup of the node c talks to (GET /v1/backup,
// operator or admin role) into dir, which must not exist or be empty
// (ErrNotEmpty). It writes a staging folder next to dir and renames it into
// place only once the stream ended with its manifest and signature and
// every file matched it and was synced.
func Fetch(ctx context.Context, c *client.Client, dir string, cfg FetchConfig) (*FetchResult, error) {
	start := time.Now()
	cfg.setDefaults()
	if err := checkTarget(cfg.FS, dir); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if cfg.Timeout > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, cfg.Timeout,
			fmt.Errorf("%w: not complete after %s (--timeout); nothing was kept", ErrTimedOut, cfg.Timeout))
		defer stop()
	}
	watch := newStallWatch(cfg.StallTimeout, cancel)
	defer watch.stop()
	q := url.Values{}
	if cfg.IncludePrivateKeys {
		q.Set("include_keys", "true")
	}
	p := wire.BackupRoute
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	resp, err := c.Stream(ctx, p)
	if err != nil {
		return nil, causeOf(ctx, err)
	}
	defer resp.Body.Close()
	watch.seen()
	rc := ReceiveConfig{FS: cfg.FS}
	if cfg.Progress != nil {
		total, _ := strconv.ParseInt(resp.Header.Get(wire.HeaderBackupBytes), 10, 64)
		rc.Progress = func(done int64) { cfg.Progress(done, total) }
	}
	m, err := Receive(ctx, watch.reader(resp.Body), dir, rc)
	if err != nil {
		return nil, causeOf(ctx, err)
	}
	return &FetchResult{Dir: dir, Manifest: m, Elapsed: time.Since(start)}, nil
}

// causeOf returns why ctx ended when it did (a stall, the timeout), err
// otherwise.
func causeOf(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, ctx.Err()) {
			return cause
		}
	}
	return err
}

// stallWatch cancels a fetch when nothing arrived for its limit: a timer
// reset by every read that returns bytes. Safe for concurrent use (the
// timer's function runs on its own goroutine).
type stallWatch struct {
	limit time.Duration
	t     *time.Timer // nil when there is no limit
}

func newStallWatch(limit time.Duration, cancel context.CancelCauseFunc) *stallWatch {
	w := &stallWatch{limit: limit}
	if limit > 0 {
		w.t = time.AfterFunc(limit, func() {
			cancel(fmt.Errorf("%w: nothing arrived from the node for %s (--stall-timeout); nothing was kept", ErrStalled, limit))
		})
	}
	return w
}

// seen notes that something arrived.
func (w *stallWatch) seen() {
	if w.t != nil {
		w.t.Reset(w.limit)
	}
}

func (w *stallWatch) stop() {
	if w.t != nil {
		w.t.Stop()
	}
}

// reader returns r, each read that returns bytes noted as seen.
func (w *stallWatch) reader(r io.Reader) io.Reader { return stallReader{r, w} }

type stallReader struct {
	r io.Reader
	w *stallWatch
}

func (s stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.w.seen()
	}
	return n, err
}

// ReceiveConfig configures Receive.
type ReceiveConfig struct {
	// FS is where the backup folder is written. Nil: the OS.
	FS vfs.FS
	// Progress, when set, is called with the bytes of files received so
	// far, on the receiving goroutine.
	Progress func(done int64)
}

// setDefaults gives FS its default; there is nothing to validate.
func (c *ReceiveConfig) setDefaults() {
	if c.FS == nil {
		c.FS = vfs.Default
	}
}

// Receive reads a backup stream (the format of stream.go) into dir, which
// must not exist or be empty, through a staging folder renamed into place
// once complete. Each file is hashed as it is written; the manifest, last,
// must list exactly the files received, with their sizes and hashes.
func Receive(ctx context.Context, r io.Reader, dir string, cfg ReceiveConfig) (Manifest, error) {
	cfg.setDefaults()
	if err := checkTarget(cfg.FS, dir); err != nil {
		return Manifest{}, err
	}
	st, err := openStaging(cfg.FS, dir, ".partial")
	if err != nil {
		return Manifest{}, err
	}
	m, err := receive(ctx, r, st, cfg.Progress)
	if err != nil {
		st.abort()
		return Manifest{}, err
	}
	if err := st.commit(); err != nil {
		st.abort()
		return Manifest{}, fmt.Errorf("backup: put %s in place: %w", dir, err)
	}
	return m, nil
}

func receive(ctx context.Context, r io.Reader, st *staging, progress func(int64)) (Manifest, error) {
	tr := tar.NewReader(r)
	got := map[string]File{}
	var done int64
	for {
		if err := ctx.Err(); err != nil {
			return Manifest{}, err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return Manifest{}, fmt.Errorf("%w: the stream ended before its manifest (the node stopped or failed mid-way)", ErrBadStream)
		}
		if err != nil {
			return Manifest{}, fmt.Errorf("%w: %w", ErrBadStream, err)
		}
		if h.Typeflag != tar.TypeReg {
			return Manifest{}, fmt.Errorf("%w: entry %q is not a regular file", ErrBadStream, h.Name)
		}
		if h.Name == ManifestFile {
			raw, err := io.ReadAll(io.LimitReader(tr, maxManifestBytes+1))
			if err != nil {
				return Manifest{}, fmt.Errorf("%w: manifest: %w", ErrBadStream, err)
			}
			return finish(tr, st, raw, got)
		}
		if h.Name == ManifestSigFile {
			return Manifest{}, fmt.Errorf("%w: the manifest's signature before the manifest", ErrBadStream)
		}
		if err := checkPath(h.Name); err != nil {
			return Manifest{}, fmt.Errorf("%w: %w", ErrBadStream, err)
		}
		if _, dup := got[h.Name]; dup {
			return Manifest{}, fmt.Errorf("%w: %s sent twice", ErrBadStream, h.Name)
		}
		f, err := receiveFile(tr, st, h, func(n int) {
			done += int64(n)
			if progress != nil {
				progress(done)
			}
		})
		if err != nil {
			return Manifest{}, err
		}
		got[h.Name] = f
	}
}

// receiveFile writes one entry, synced, and returns its size and hash.
func receiveFile(tr *tar.Reader, st *staging, h *tar.Header, progress func(int)) (File, error) {
	f, err := st.create(h.Name)
	if err != nil {
		return File{}, fmt.Errorf("backup: %s: %w", h.Name, err)
	}
	sum := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, sum, progressWriter(progress)), tr)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return File{}, fmt.Errorf("%w: %s cut short after %d of %d bytes", ErrBadStream, h.Name, n, h.Size)
	case err != nil:
		return File{}, fmt.Errorf("backup: %s: %w", h.Name, err)
	}
	return File{Path: h.Name, Size: n, SHA256: hex.EncodeToString(sum.Sum(nil))}, nil
}

type progressWriter func(int)

func (p progressWriter) Write(b []byte) (int, error) {
	p(len(b))
	return len(b), nil
}

// finish checks the manifest against the files received, reads its
// signature (format 2), and writes both. The signature is checked to be a
// note of this manifest, not against a key: Verify and Restore do that,
// with the keys they trust.
func finish(tr *tar.Reader, st *staging, raw []byte, got map[string]File) (Manifest, error) {
	m, err := decodeManifest(bytes.NewReader(raw))
	if err != nil {
		return Manifest{}, fmt.Errorf("%w: %w", ErrBadStream, err)
	}
	var sig []byte
	if m.Signed() {
		h, err := tr.Next()
		switch {
		case errors.Is(err, io.EOF):
			return Manifest{}, fmt.Errorf("%w: the stream ended before the manifest's signature", ErrBadStream)
		case err != nil:
			return Manifest{}, fmt.Errorf("%w: %w", ErrBadStream, err)
		case h.Typeflag != tar.TypeReg || h.Name != ManifestSigFile:
			return Manifest{}, fmt.Errorf("%w: entry %q after the manifest, not its signature", ErrBadStream, h.Name)
		}
		if sig, err = io.ReadAll(io.LimitReader(tr, maxSigBytes+1)); err != nil {
			return Manifest{}, fmt.Errorf("%w: the manifest's signature: %w", ErrBadStream, err)
		}
		if len(sig) > maxSigBytes {
			return Manifest{}, fmt.Errorf("%w: the manifest's signature is over %d bytes", ErrBadStream, maxSigBytes)
		}
		if err := sigBindsManifest(sig, m.Origin, raw); err != nil {
			return Manifest{}, fmt.Errorf("%w: %w", ErrBadStream, err)
		}
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		return Manifest{}, fmt.Errorf("%w: entries after the manifest (%v)", ErrBadStream, err)
	}
	for _, want := range m.Files {
		have, ok := got[want.Path]
		switch {
		case !ok:
			return Manifest{}, fmt.Errorf("%w: the manifest lists %s, which the stream did not hold", ErrBadStream, want.Path)
		case have != want:
			return Manifest{}, fmt.Errorf("%w: %s arrived with %d bytes and SHA-256 %s, the manifest says %d and %s",
				ErrBadStream, want.Path, have.Size, have.SHA256, want.Size, want.SHA256)
		}
		delete(got, want.Path)
	}
	for p := range got {
		return Manifest{}, fmt.Errorf("%w: the stream held %s, which the manifest does not list", ErrBadStream, p)
	}
	if err := st.writeFile(ManifestFile, raw); err != nil {
		return Manifest{}, fmt.Errorf("backup: write the manifest: %w", err)
	}
	if sig != nil {
		if err := st.writeFile(ManifestSigFile, sig); err != nil {
			return Manifest{}, fmt.Errorf("backup: write the manifest's signature: %w", err)
		}
	}
	return m, nil
}
