package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/greffe/greffe/aggregates"
)

// hashBufferSize is the one buffer a file is read through: weights of
// tens of GiB are hashed in constant memory.
const hashBufferSize = 1 << 20

// hashFiles reads each target in order and returns one reading each. A
// file that cannot be read, is not a regular file, changes while it is
// read, or is not finished when ctx ends (the request's timeout) carries
// its error and no digest: it is never reported as hashed.
func hashFiles(ctx context.Context, targets []aggregates.HashTarget) []aggregates.ArtifactReading {
	buf := make([]byte, hashBufferSize)
	out := make([]aggregates.ArtifactReading, 0, len(targets))
	for _, t := range targets {
		r := aggregates.ArtifactReading{Path: t.Path, Role: t.Role}
		if err := ctx.Err(); err != nil {
			r.Error = "not read: the request's timeout ran out"
		} else if err := hashFile(ctx, &r, buf); err != nil {
			r.Error = err.Error()
		}
		out = append(out, r)
	}
	return out
}

func hashFile(ctx context.Context, r *aggregates.ArtifactReading, buf []byte) error {
	f, err := os.Open(r.Path)
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
	after, err := os.Stat(r.Path)
	if err != nil {
		return err
	}
	// A file rewritten while it was read has no single digest: reporting
	// one would bind a model to bytes that never existed together.
	if n != before.Size() || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) || !os.SameFile(before, after) {
		return fmt.Errorf("%s changed while it was hashed", r.Path)
	}
	r.Size, r.MtimeNS, r.SHA256 = n, before.ModTime().UnixNano(), hex.EncodeToString(h.Sum(nil))
	return nil
}
