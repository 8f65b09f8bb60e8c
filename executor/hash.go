package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/greffe/greffe/aggregates"
)

// hashBufferSize is the one buffer a file is read through: weights of
// tens of GiB are hashed in constant memory.
const hashBufferSize = 1 << 20

// hashSource is where one allowed file is read from: through an os.Root
// of the hash_paths prefix it resolved under (root, rel), so that no
// symlink or ".." swapped in after the check can lead outside it; or, when
// the path is the prefix itself (rel ""), that path opened without
// following a symlink; or, for a request an approval covers (root ""),
// the path itself.
type hashSource struct {
	target aggregates.HashTarget
	root   string // the resolved prefix; "" for the path itself
	rel    string // the resolved path under root; "" when root is the file
}

// planHash decides a hash's targets under the host policy: each path must
// be clean (no ".." anywhere, even when approved) and, unless an approval
// covers the request, lie under a hash_paths prefix once both are
// resolved with filepath.EvalSymlinks. A path that does not exist is
// judged on its name (its reading will say it is missing). The first
// refused path refuses the whole request: nothing of it is read.
func (p *HostPolicy) planHash(targets []aggregates.HashTarget, approvedByNonWriter bool) ([]hashSource, int, *Refusal) {
	out := make([]hashSource, 0, len(targets))
	for i, t := range targets {
		if err := cleanAbsolute(t.Path); err != nil {
			return nil, i, &Refusal{Code: CodeHashPathNotAllowed, Rule: "hash_paths", Reason: fmt.Sprintf("%s is %v; nothing was read", t.Path, err)}
		}
		if p.approvalCovers(approvedByNonWriter) {
			out = append(out, hashSource{target: t})
			continue
		}
		resolved, err := filepath.EvalSymlinks(t.Path)
		lexical := err != nil // missing or unreadable: judged by name
		if lexical {
			resolved = t.Path
		}
		src, ok := p.under(t, resolved, lexical)
		if !ok {
			reason := fmt.Sprintf("%s is under none of the host's %d hash_paths; nothing was read", t.Path, len(p.HashPaths))
			if resolved != t.Path {
				reason = fmt.Sprintf("%s resolves, through a symlink, outside the host's hash_paths; nothing was read", t.Path)
			}
			return nil, i, &Refusal{Code: CodeHashPathNotAllowed, Rule: "hash_paths", Reason: reason}
		}
		out = append(out, src)
	}
	return out, -1, nil
}

// under finds the hash_paths prefix resolved lies under. A prefix is
// resolved too (it may itself be a symlink: /models -> /data/models); a
// path that could not be resolved (it does not exist, or is a dangling
// symlink) is judged on its name against the prefix as written, and its
// reading says what went wrong (an os.Root refuses a dangling symlink that
// leads outside).
func (p *HostPolicy) under(t aggregates.HashTarget, resolved string, lexical bool) (hashSource, bool) {
	for _, prefix := range p.HashPaths {
		rp, err := filepath.EvalSymlinks(prefix)
		if err != nil {
			rp = prefix // a missing prefix: whatever is under it is missing too
		}
		base := rp
		if lexical {
			base = prefix
		}
		if !within(base, resolved) {
			continue
		}
		if resolved == base {
			return hashSource{target: t, root: rp}, true // the prefix itself
		}
		rel, err := filepath.Rel(base, resolved)
		if err != nil {
			continue
		}
		return hashSource{target: t, root: rp, rel: rel}, true
	}
	return hashSource{}, false
}

// within reports whether path is dir or below it.
func within(dir, path string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// refusedHash is the readings of a refused hash: every file carries the
// refusal (the one at fault) or says it was not read, and none a digest.
func refusedHash(targets []aggregates.HashTarget, at int, r *Refusal) []aggregates.ArtifactReading {
	out := make([]aggregates.ArtifactReading, 0, len(targets))
	for i, t := range targets {
		msg := "not read: another path of this request is refused by the host policy"
		if i == at {
			msg = r.Error()
		}
		out = append(out, aggregates.ArtifactReading{Path: t.Path, Role: t.Role, Error: msg})
	}
	return out
}

// hashFiles reads each source in order and returns one reading each. A
// file that cannot be read, is not a regular file, changes while it is
// read, or is not finished when ctx ends (the request's timeout) carries
// its error and no digest: it is never reported as hashed.
func hashFiles(ctx context.Context, sources []hashSource) []aggregates.ArtifactReading {
	buf := make([]byte, hashBufferSize)
	out := make([]aggregates.ArtifactReading, 0, len(sources))
	for _, s := range sources {
		r := aggregates.ArtifactReading{Path: s.target.Path, Role: s.target.Role}
		if err := ctx.Err(); err != nil {
			r.Error = "not read: the request's timeout ran out"
		} else if err := hashFile(ctx, &r, s, buf); err != nil {
			r.Error = err.Error()
		}
		out = append(out, r)
	}
	return out
}

// open opens the source and returns a function that stats it again by
// name (to notice a file replaced while it was read).
func (s hashSource) open() (*os.File, func() (fs.FileInfo, error), error) {
	switch {
	case s.root == "":
		f, err := os.Open(s.target.Path)
		return f, func() (fs.FileInfo, error) { return os.Stat(s.target.Path) }, err
	case s.rel == "":
		f, err := os.OpenFile(s.root, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		return f, func() (fs.FileInfo, error) { return os.Lstat(s.root) }, err
	}
	root, err := os.OpenRoot(s.root)
	if err != nil {
		return nil, nil, pathError(s.target.Path, err)
	}
	f, err := root.Open(s.rel)
	if err != nil {
		root.Close()
		return nil, nil, pathError(s.target.Path, err)
	}
	return f, func() (fs.FileInfo, error) {
		defer root.Close()
		return root.Stat(s.rel)
	}, nil
}

// pathError names the requested path in an os.Root error (which names the
// path relative to its root).
func pathError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: path, Err: pe.Err}
	}
	return err
}

func hashFile(ctx context.Context, r *aggregates.ArtifactReading, s hashSource, buf []byte) error {
	f, restat, err := s.open()
	if err != nil {
		return err
	}
	defer f.Close()
	before, err := f.Stat()
	if err != nil {
		return err
	}
	if !before.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s)", r.Path, before.Mode().Type())
	}
	h := sha256.New()
	var n int64
	for {
		if ctx.Err() != nil {
			return fmt.Errorf("not finished: the request's timeout ran out after %d bytes", n)
		}
		k, err := f.Read(buf)
		h.Write(buf[:k])
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	after, err := restat()
	if err != nil {
		return pathError(r.Path, err)
	}
	// A file rewritten while it was read has no single digest: reporting
	// one would bind a model to bytes that never existed together.
	if n != before.Size() || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) || !os.SameFile(before, after) {
		return fmt.Errorf("%s changed while it was hashed", r.Path)
	}
	r.Size, r.MtimeNS, r.SHA256 = n, before.ModTime().UnixNano(), hex.EncodeToString(h.Sum(nil))
	return nil
}
