package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// Role is what a bearer token may do.
type Role string

// Roles, from least to most privileged. A route names the roles it admits;
// which commands a role sends is the catalogue's rule
// (aggregates.MaySend), which the deciders apply. The strings are the
// aggregates' Role… constants.
const (
	RoleReader   Role = aggregates.RoleReader   // read the log, proofs, projections
	RoleWriter   Role = aggregates.RoleWriter   // reader + appends and every command but the approvals, RevokeExecutorKey and the executor's
	RoleApprover Role = aggregates.RoleApprover // reader + the approvals (GrantApproval, RevokeApproval, ApproveProbeSchedule, EndProbeSchedule, ApproveMeasurement) and RevokeExecutorKey
	RoleOperator Role = aggregates.RoleOperator // reader + cluster and key operations
	RoleExecutor Role = aggregates.RoleExecutor // reader + the executor's commands, for the executor id that is its name
	RoleAdmin    Role = aggregates.RoleAdmin    // everything
)

// Token is one entry of the tokens file.
type Token struct {
	Name  string `json:"name"`
	Role  Role   `json:"role"`
	Token string `json:"token"`
}

// Tokens holds the node's bearer tokens. The zero value (no tokens) means no
// authentication, which the server only allows on a loopback address.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	digest [32]byte
	name   string
	role   Role
}

// LoadTokens reads a JSON array of {"name", "role", "token"}.
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	defer f.Close()
	var list []Token
	if err := DecodeStrict(f, &list); err != nil {
		return nil, fmt.Errorf("tokens %s: %w", path, err)
	}
	return NewTokens(list)
}

// NewTokens validates tokens: known roles, names, tokens of at least 16
// bytes, each token listed once (one token under two names or roles would
// make the last entry win: a reader's token could become an admin's), and
// one role per name (the name is the actor of what its tokens write; a
// name may have several tokens, to rotate them). Every ambiguity is
// reported, naming the entries by index and name; a token is never
// printed.
func NewTokens(list []Token) (*Tokens, error) {
	t := &Tokens{}
	byToken := make(map[[32]byte]int, len(list)) // digest → first index
	byName := make(map[string]int, len(list))    // name → first index
	var ambiguous []error
	for i, e := range list {
		switch e.Role {
		case RoleReader, RoleWriter, RoleApprover, RoleOperator, RoleExecutor, RoleAdmin:
		default:
			return nil, fmt.Errorf("tokens[%d].role %q: use reader, writer, approver, operator, executor or admin", i, e.Role)
		}
		if len(e.Token) < 16 || e.Name == "" {
			return nil, fmt.Errorf("tokens[%d]: a token needs a name and at least 16 characters", i)
		}
		// "anonymous" is the principal of a node without tokens, whose
		// stated approvers are recorded as stated: no token may be it.
		if e.Name == aggregates.AnonymousName {
			return nil, fmt.Errorf("tokens[%d].name %q: the name is reserved for the principal of a node without tokens; choose another", i, e.Name)
		}
		// The name is the actor of every event its token writes, which the
		// log accepts only as printable UTF-8 of at most 256 bytes.
		if !actorNameOK(e.Name) {
			return nil, fmt.Errorf("tokens[%d].name %q: a name is at most %d bytes of printable UTF-8 (it is recorded as the actor)", i, e.Name, events.MaxTextFieldLen)
		}
		d := sha256.Sum256([]byte(e.Token))
		if j, dup := byToken[d]; dup {
			ambiguous = append(ambiguous, fmt.Errorf("tokens[%d] (%q, %s) and tokens[%d] (%q, %s) hold the same token: a token names one principal with one role; give each entry its own token",
				j, list[j].Name, list[j].Role, i, e.Name, e.Role))
		} else {
			byToken[d] = i
		}
		if j, seen := byName[e.Name]; !seen {
			byName[e.Name] = i
		} else if list[j].Role != e.Role {
			ambiguous = append(ambiguous, fmt.Errorf("tokens[%d] (%q) is %s and tokens[%d] (%q) is %s: one name has one role, whatever its tokens; rename one",
				j, list[j].Name, list[j].Role, i, e.Name, e.Role))
		}
		t.entries = append(t.entries, tokenEntry{digest: d, name: e.Name, role: e.Role})
	}
	if len(ambiguous) > 0 {
		return nil, errors.Join(ambiguous...)
	}
	return t, nil
}

func actorNameOK(s string) bool {
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

// Enabled reports whether tokens are configured.
func (t *Tokens) Enabled() bool { return t != nil && len(t.entries) > 0 }

// Identify returns the principal of a token presented with its name, as
// other surfaces send them (the gRPC surface's esdb://NAME:TOKEN@host): ok
// only when the token is known and was issued under that name.
func (t *Tokens) Identify(name, token string) (Principal, bool) {
	if !t.Enabled() {
		return Principal{}, false
	}
	e, ok := t.identify(token)
	if !ok || e.name != name {
		return Principal{}, false
	}
	return Principal{Name: e.name, Role: e.role}, true
}

// MayAppend reports whether p may append raw events (POST /v1/streams).
func (p Principal) MayAppend() bool { return p.Role == RoleWriter || p.Role == RoleAdmin }

// identify returns the entry of a presented token. Every entry is compared
// in constant time (over SHA-256 digests, so lengths do not leak either).
func (t *Tokens) identify(presented string) (tokenEntry, bool) {
	d := sha256.Sum256([]byte(presented))
	var found tokenEntry
	ok := 0
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(d[:], e.digest[:]) == 1 {
			found = e
			ok = 1
		}
	}
	return found, ok == 1
}

// Principal is who is calling: the token's name and role ("anonymous" and
// admin when the node runs without tokens on loopback).
type Principal struct {
	Name string
	Role Role
}

// Aggregates returns p as the deciders see it (aggregates.Inputs.Principal).
func (p Principal) Aggregates() aggregates.Principal {
	return aggregates.Principal{Name: p.Name, Role: string(p.Role)}
}

type principalKey struct{}

// PrincipalFrom returns the caller of a request handled by the server.
func PrincipalFrom(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}

// authorize wraps h so that only the given roles (admin always) may call it.
func (s *Server) authorize(h http.HandlerFunc, roles ...Role) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := Principal{Name: aggregates.Anonymous.Name, Role: Role(aggregates.Anonymous.Role)}
		if s.cfg.Tokens.Enabled() {
			auth := r.Header.Get("Authorization")
			tok, found := strings.CutPrefix(auth, "Bearer ")
			if !found || tok == "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="greffe"`)
				writeError(w, &wire.Error{Code: wire.CodeUnauthorized, Message: "send an Authorization: Bearer <token> header"})
				return
			}
			e, ok := s.cfg.Tokens.identify(tok)
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="greffe", error="invalid_token"`)
				writeError(w, &wire.Error{Code: wire.CodeUnauthorized, Message: "the bearer token is not known to this node"})
				return
			}
			p = Principal{Name: e.name, Role: e.role}
			allowed := p.Role == RoleAdmin
			for _, role := range roles {
				allowed = allowed || role == p.Role
			}
			if !allowed {
				writeError(w, &wire.Error{Code: wire.CodeForbidden,
					Message: fmt.Sprintf("role %s may not call %s %s; it needs one of %v", p.Role, r.Method, r.URL.Path, roles)})
				return
			}
		}
		h(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	}
}

// readerRoles are the roles allowed to read.
func readerRoles() []Role {
	return []Role{RoleReader, RoleWriter, RoleApprover, RoleOperator, RoleExecutor}
}
