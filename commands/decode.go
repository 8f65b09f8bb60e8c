package commands

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

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
	actor  string
	behalf string
	corr   string
	meta   json.RawMessage
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
	p := &prepared{name: req.Command, id: id, cmd: cmd, actor: req.Principal, corr: req.CorrelationID}
	if p.corr == "" {
		p.corr = id.String()
	}
	if req.Actor != "" && req.Actor != req.Principal {
		p.behalf = req.Actor
	}
	p.digest = digest(p.name, p.corr, data)
	p.meta, err = json.Marshal(Metadata{Command: p.name, CommandID: id.String(), CommandDigest: p.digest, OnBehalfOf: p.behalf})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// digest is a command's digest, recorded in its events' metadata and
// compared when its id comes again: "sha256:" and the hex SHA-256 of its
// name, 0, its correlation id, 0 and its data without the whitespace
// between tokens (json.Compact's output), so that a re-sent command is the
// same command whatever its indentation. The format is stored: it never
// changes.
//
// data is what DecodeCommand decoded, so it is valid JSON: its whitespace
// is removed in one pass over the bytes (appendCompact), not by a second
// parse.
func digest(name, corr string, data []byte) string {
	sum := sha256.New()
	sum.Write([]byte(name))
	sum.Write([]byte{0})
	sum.Write([]byte(corr))
	sum.Write([]byte{0})
	sum.Write(appendCompact(make([]byte, 0, len(data)), data))
	return "sha256:" + hex.EncodeToString(sum.Sum(nil))
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
