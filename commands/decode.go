package commands

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/gowebpki/jcs"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// Decoding a command, once: its envelope fields here, its data by
// aggregates.DecodeCommand (strict JSON, then the command's shape), and
// its digest from the same bytes.

// prepared is a command decoded and validated, once, with what every
// attempt needs of it.
type prepared struct {
	name   string
	id     uuid.UUID
	cmd    aggregates.Command
	digest string
	// data is the command's data as sent (trimmed; "{}" when none): the
	// legacy digest is computed from it only when a stored digest must be
	// compared (sameCommand), not for every command (issue #21: a
	// command's data was scanned five times before its decision).
	data []byte
	// principal sent it; actor is its name, recorded on every event.
	principal aggregates.Principal
	actor     string
	behalf    string
	corr      string
	meta      json.RawMessage
}

// prepare checks the envelope of req, decodes its data and computes its
// digest and metadata. Errors are those of a malformed command (errors.go):
// the aggregates' for the data, passed on as they are.
//
// Every problem of the envelope and the first of the data are reported at
// once (issue #16: a command without an id was refused for its id alone,
// and its data's problem came only on the next try): the error is the
// first problem's, and when there are more, details.problems lists them
// all (problems.go).
func (h *Handler) prepare(req Request) (*prepared, error) {
	if req.Principal.Name == "" {
		// The api (or the node) authenticates every command before it
		// reaches here; an anonymous one would be recorded with no actor.
		return nil, errors.New("commands: a request without a principal (pass aggregates.Anonymous on a node without tokens)")
	}
	var problems []error
	if req.Command == "" {
		problems = append(problems, invalid(CodeUnknownCommand, "command", "name the command, e.g. \"GrantApproval\""))
	}
	id, err := uuid.Parse(req.ID)
	if err != nil || id == uuid.Nil {
		problems = append(problems, invalid(CodeInvalidCommandID, "id", "the command id %q is not a UUID; every command carries a UUID, its idempotency key", req.ID))
	}
	for _, f := range []struct{ name, v string }{{"actor", req.Actor}, {"correlation_id", req.CorrelationID}} {
		if !utf8.ValidString(f.v) {
			problems = append(problems, invalid(events.CodeInvalidUTF8, f.name, "is not UTF-8 text; send UTF-8"))
		} else if !textOK(f.v) {
			problems = append(problems, invalid(CodeInvalidCommand, f.name, "must be at most %d bytes of printable UTF-8", events.MaxTextFieldLen))
		}
	}
	data := bytes.TrimSpace(req.Data)
	if len(data) == 0 || string(data) == "null" {
		data = []byte("{}")
	}
	var cmd aggregates.Command
	if req.Command != "" {
		cmd, err = aggregates.DecodeCommand(req.Command, data)
		if err != nil {
			problems = append(problems, err) // *aggregates.UnknownCommandError, *aggregates.InvalidCommandError
		}
	}
	if len(problems) > 0 {
		return nil, joinProblems(problems)
	}
	p := &prepared{name: req.Command, id: id, cmd: cmd, principal: req.Principal, actor: req.Principal.Name, corr: req.CorrelationID}
	if p.corr == "" {
		p.corr = id.String()
	}
	if req.Actor != "" && req.Actor != req.Principal.Name {
		p.behalf = req.Actor
	}
	p.digest, err = digest(p.name, p.corr, data)
	if err != nil {
		return nil, err
	}
	p.data = data
	p.meta, err = json.Marshal(Metadata{Command: p.name, CommandID: id.String(), CommandDigest: p.digest, OnBehalfOf: p.behalf})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// digest is a command's digest, recorded in its events' metadata
// (command_digest) and compared when its id comes again: "sha256:" and the
// hex SHA-256 of
//
//	name 0x00 correlation_id 0x00 JCS(data)
//
// where JCS is the RFC 8785 canonical form of the data (members sorted by
// their UTF-16 code units, no whitespace, strings and numbers in their one
// ECMAScript spelling; github.com/gowebpki/jcs), so that a re-sent command
// is the same command whatever its key order, whitespace or escapes, and
// whichever JSON library wrote it (issue #15).
//
// RFC 8785 writes numbers as IEEE 754 doubles: an integer beyond 2^53 (a
// nanosecond mtime_ns) would be rounded, and two commands that differ only
// there would share a digest, a different command taken for a re-send.
// When the data holds such a number (lossyNumbers), the preimage is
// followed by 0x00 and the data's compacted bytes: the digest then binds
// the exact digits too, and a re-send of it is recognised only with its
// keys in the same order (never a different command taken for it).
//
// The format is stored: it never changes. Digests recorded before it
// (digestLegacy) are still honoured (prepared.sameCommand).
func digest(name, corr string, data []byte) (string, error) {
	canon, err := jcs.Transform(data)
	if err != nil {
		// DecodeCommand decoded data strictly: JCS refuses only what I-JSON
		// does and that decoder let through.
		return "", invalid(CodeInvalidCommand, "data", "cannot be canonicalised (RFC 8785): %v", err)
	}
	sum := sha256.New()
	sum.Write([]byte(name))
	sum.Write([]byte{0})
	sum.Write([]byte(corr))
	sum.Write([]byte{0})
	sum.Write(canon)
	if lossyNumbers(data) {
		sum.Write([]byte{0})
		sum.Write(appendCompact(make([]byte, 0, len(data)), data))
	}
	return "sha256:" + hex.EncodeToString(sum.Sum(nil)), nil
}

// digestLegacy is the digest recorded before issue #15: the SHA-256 of
// the name, 0, the correlation id, 0 and the data without the whitespace
// between tokens (json.Compact's output). A stored one still matches a
// re-send whose data has the same bytes but for whitespace: both preimages
// determine the name, the correlation id and the data's value, so either
// match means the same command. A re-send with its keys in another order
// than the original's is not recognised by it (the original's canonical
// form was never recorded): it answers command_id_reused, as before.
//
// data is what DecodeCommand decoded, so it is valid JSON: its whitespace
// is removed in one pass over the bytes (appendCompact), not by a second
// parse.
func digestLegacy(name, corr string, data []byte) string {
	sum := sha256.New()
	sum.Write([]byte(name))
	sum.Write([]byte{0})
	sum.Write([]byte(corr))
	sum.Write([]byte{0})
	sum.Write(appendCompact(make([]byte, 0, len(data)), data))
	return "sha256:" + hex.EncodeToString(sum.Sum(nil))
}

// lossyNumbers reports whether valid JSON data holds a number that an
// IEEE 754 double does not represent exactly (RFC 8785 §3.2.2.3 would
// round it): an integer beyond ±2^53 that is not a double, or a fraction
// with more digits than a double keeps.
func lossyNumbers(data []byte) bool {
	inString := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		switch {
		case inString:
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '-' || c >= '0' && c <= '9':
			j := i
			for j < len(data) && strings.IndexByte("+-0123456789.eE", data[j]) >= 0 {
				j++
			}
			if !exactDouble(string(data[i:j])) {
				return true
			}
			i = j - 1
		}
	}
	return false
}

// exactDouble reports whether the JSON number lit is exactly a double.
func exactDouble(lit string) bool {
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return false // out of range: JCS refuses it anyway
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok {
		return false
	}
	var fr big.Rat
	if fr.SetFloat64(f) == nil {
		return false
	}
	return r.Cmp(&fr) == 0
}

// appendCompact appends valid JSON src to dst without the whitespace
// between its tokens: json.Compact's output on valid JSON (it neither
// escapes nor rewrites anything). FuzzAppendCompact holds it to that.
func appendCompact(dst, src []byte) []byte {
	inString := false
	start := 0 // src[start:i] is still to be copied
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case inString:
			switch c {
			case '\\':
				i++ // the escaped byte cannot end the string
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			dst = append(dst, src[start:i]...)
			start = i + 1
		}
	}
	return append(dst, src[start:]...)
}

func textOK(s string) bool {
	if len(s) > events.MaxTextFieldLen || !utf8.ValidString(s) {
		return false
	}
	for _, c := range s {
		if !unicode.IsPrint(c) {
			return false
		}
	}
	return true
}
