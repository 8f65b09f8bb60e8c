package aggregates

import (
	"crypto/ed25519"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/greffe/greffe/events"
)

// Value types: a command field's type carries its rule (issue #21). A
// bounded field of a command (an id, a text, a hash, a count, an
// enumeration, a list) is declared with one of the types below, and that
// type says, once, both what it accepts (check, run by Validate on every
// decoded command, fields.go) and how the OpenAPI document describes it
// (jsonSchema, which api/openapi.go reads through SchemaOf). A command's
// Validate method keeps only the rules between its fields. The types are
// named strings, numbers and slices, so their JSON is exactly that of the
// plain values they replace.
//
// Lengths are counted in bytes by check and in characters by JSON Schema:
// the two agree on ASCII, and docs/COMMANDS.md says so.

// valueType is a field type with a rule of its own.
type valueType interface {
	// check returns nil or an *InvalidCommandError for the value at path
	// (a JSON path under data, without "data.").
	check(path string) error
	describedType
}

// describedType is a type that describes its JSON to the schema
// generator: a valueType, or a type whose JSON reflection cannot read
// (Duration).
type describedType interface {
	// jsonSchema returns the JSON Schema of the values the type accepts,
	// keywords as JSON Schema 2020-12 names them. A fresh map each call.
	jsonSchema() map[string]any
}

// enumType is a named string type whose values are one list: Values.
// Validate refuses any other (fields.go), and the schema lists them. An
// enumeration that lists "" may be left empty.
type enumType interface {
	Values() []string
}

// Text bounds, in bytes.
const (
	maxShortText = 256
	maxLongText  = 4096
	maxListLen   = 256
)

// ID is an aggregate's id or a name that becomes part of a stream name (a
// provider, a mission, a host, an executor): 1 to MaxIDLen bytes of
// printable UTF-8 without spaces.
type ID string

func (v ID) check(path string) error { return checkID(path, string(v)) }
func (ID) jsonSchema() map[string]any {
	return map[string]any{"type": "string", "minLength": 1, "maxLength": MaxIDLen, "pattern": `^\S+$`}
}

// OptionalID is an ID that may be left empty (an approval to spend, a
// provider the mission asks for).
type OptionalID string

func (v OptionalID) check(path string) error {
	if v == "" {
		return nil
	}
	return checkID(path, string(v))
}
func (OptionalID) jsonSchema() map[string]any {
	return map[string]any{"type": "string", "maxLength": MaxIDLen, "pattern": `^(\S+)?$`}
}

// ShortText is a required short text (a name as stated, a model tag, a
// reason code): 1 to 256 bytes of UTF-8, not blank.
type ShortText string

func (v ShortText) check(path string) error  { return checkText(path, string(v), true, maxShortText) }
func (ShortText) jsonSchema() map[string]any { return textSchema(true, maxShortText) }

// OptionalShortText is at most 256 bytes of UTF-8, possibly empty.
type OptionalShortText string

func (v OptionalShortText) check(path string) error {
	return checkText(path, string(v), false, maxShortText)
}
func (OptionalShortText) jsonSchema() map[string]any { return textSchema(false, maxShortText) }

// LongText is a required text in words (a reason, a statement, a path): 1
// to 4096 bytes of UTF-8, not blank.
type LongText string

func (v LongText) check(path string) error  { return checkText(path, string(v), true, maxLongText) }
func (LongText) jsonSchema() map[string]any { return textSchema(true, maxLongText) }

// OptionalLongText is at most 4096 bytes of UTF-8, possibly empty.
type OptionalLongText string

func (v OptionalLongText) check(path string) error {
	return checkText(path, string(v), false, maxLongText)
}
func (OptionalLongText) jsonSchema() map[string]any { return textSchema(false, maxLongText) }

func textSchema(required bool, max int) map[string]any {
	if required {
		return map[string]any{"type": "string", "minLength": 1, "maxLength": max, "pattern": `\S`}
	}
	return map[string]any{"type": "string", "maxLength": max}
}

// Two spellings of a SHA-256, one per field, never both (issue #15):
//
//   - a content hash, the SHA-256 of bytes someone else hashed (a file, a
//     patch, a request, an output), is 64 lowercase hex characters, as
//     sha256sum prints it: Hex64;
//   - a digest greffe defines by a formula over JSON or an argv (a
//     binding's identity, an argv_hash, a receipt's binding_identity) is
//     "sha256:" and 64 lowercase hex characters, as events.BindingIdentity
//     and events.ArgvHash return it: Digest.
//
// A value in the other spelling is refused with the spelling the field
// wants, so that equal digests are always equal strings: the gates compare
// them as strings (identity_mismatch, receipt_mismatch, argv_mismatch).

// Hex64 is a content hash: 64 lowercase hex characters.
type Hex64 string

func (v Hex64) check(path string) error { return checkSHA256(path, string(v), true) }
func (Hex64) jsonSchema() map[string]any {
	return map[string]any{"type": "string", "pattern": `^[0-9a-f]{64}$`}
}

// OptionalHex64 is a content hash that may be left empty (nothing was
// kept, nothing came back).
type OptionalHex64 string

func (v OptionalHex64) check(path string) error { return checkSHA256(path, string(v), false) }
func (OptionalHex64) jsonSchema() map[string]any {
	return map[string]any{"type": "string", "pattern": `^([0-9a-f]{64})?$`}
}

// Digest is a digest greffe defines: "sha256:" and 64 lowercase hex
// characters (events/digest.go).
type Digest string

func (v Digest) check(path string) error { return checkDigest(path, string(v), true) }
func (Digest) jsonSchema() map[string]any {
	return map[string]any{"type": "string", "pattern": `^sha256:[0-9a-f]{64}$`}
}

// OptionalDigest is a Digest that may be left empty.
type OptionalDigest string

func (v OptionalDigest) check(path string) error { return checkDigest(path, string(v), false) }
func (OptionalDigest) jsonSchema() map[string]any {
	return map[string]any{"type": "string", "pattern": `^(sha256:[0-9a-f]{64})?$`}
}

// Count is a number of things: 0 or more.
type Count int

func (v Count) check(path string) error  { return checkAtLeast(path, int64(v), 0) }
func (Count) jsonSchema() map[string]any { return map[string]any{"type": "integer", "minimum": 0} }

// Size is a number of bytes: 0 or more.
type Size int64

func (v Size) check(path string) error  { return checkAtLeast(path, int64(v), 0) }
func (Size) jsonSchema() map[string]any { return map[string]any{"type": "integer", "minimum": 0} }

// PositiveSize is a number of bytes allowed (an output cap): 1 or more.
type PositiveSize int64

func (v PositiveSize) check(path string) error { return checkAtLeast(path, int64(v), 1) }
func (PositiveSize) jsonSchema() map[string]any {
	return map[string]any{"type": "integer", "minimum": 1}
}

// TokenLimit is a number of tokens a model allows (a context window, an
// output limit): 1 or more.
type TokenLimit int

func (v TokenLimit) check(path string) error  { return checkAtLeast(path, int64(v), 1) }
func (TokenLimit) jsonSchema() map[string]any { return map[string]any{"type": "integer", "minimum": 1} }

// MaxApprovalUses bounds the uses of one grant.
const MaxApprovalUses = 1000

// ApprovalUses is how many times a grant may be spent: 1 to
// MaxApprovalUses.
type ApprovalUses int

func (v ApprovalUses) check(path string) error {
	if v < 1 || v > MaxApprovalUses {
		return invalid(path, "is %d; a grant has 1 to %d uses", v, MaxApprovalUses)
	}
	return nil
}
func (ApprovalUses) jsonSchema() map[string]any {
	return map[string]any{"type": "integer", "minimum": 1, "maximum": MaxApprovalUses}
}

// Ed25519PublicKey is an ed25519 public key: 32 bytes, base64 in JSON.
type Ed25519PublicKey []byte

func (v Ed25519PublicKey) check(path string) error {
	if len(v) != ed25519.PublicKeySize {
		return invalid(path, "is %d bytes; an ed25519 public key is %d (base64 in JSON)", len(v), ed25519.PublicKeySize)
	}
	return nil
}
func (Ed25519PublicKey) jsonSchema() map[string]any {
	return map[string]any{"type": "string", "contentEncoding": "base64", "pattern": `^[A-Za-z0-9+/]{43}=$`}
}

// The rules the types above share.

// checkAtLeast validates a number of at least min (0 for a count or a
// size, 1 for a positive bound).
func checkAtLeast(path string, v, min int64) error {
	switch {
	case v >= min:
		return nil
	case min == 1:
		return invalid(path, "is %d; must be positive", v)
	}
	return invalid(path, "is %d; must be >= %d", v, min)
}

// checkID validates an aggregate id (a provider name, a mission id, …):
// 1 to MaxIDLen bytes of printable UTF-8 without spaces.
func checkID(path, id string) error {
	if id == "" {
		return invalid(path, "is required")
	}
	if len(id) > MaxIDLen {
		return invalid(path, "is %d bytes long; the limit is %d", len(id), MaxIDLen)
	}
	if !utf8.ValidString(id) {
		return invalid(path, "is not valid UTF-8")
	}
	for _, c := range id {
		if !unicode.IsPrint(c) || unicode.IsSpace(c) {
			return invalid(path, "contains %q; use printable characters without spaces", c)
		}
	}
	return nil
}

// checkText validates a free-text field: at most max bytes of valid UTF-8,
// and non-blank when required.
func checkText(path, s string, required bool, max int) error {
	if required && strings.TrimSpace(s) == "" {
		return invalid(path, "is required")
	}
	if len(s) > max {
		return invalid(path, "is %d bytes long; the limit is %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		return invalid(path, "is not valid UTF-8")
	}
	return nil
}

// checkOneOf validates an enumerated value. An allowed "" is not listed in
// the message.
func checkOneOf(path, v string, allowed ...string) error {
	var named []string
	for _, a := range allowed {
		if v == a {
			return nil
		}
		if a != "" {
			named = append(named, a)
		}
	}
	if v == "" {
		return invalid(path, "is required; one of %s", strings.Join(named, ", "))
	}
	return invalid(path, "is %q; want one of %s", v, strings.Join(named, ", "))
}

// checkRequiredEnum validates an enumeration that may be left empty
// unless a rule between fields requires it (a refused verdict's kind): v
// must be one of e's values other than "".
func checkRequiredEnum[E interface {
	~string
	enumType
}](path string, v E) error {
	values := slices.DeleteFunc(slices.Clone(v.Values()), func(s string) bool { return s == "" })
	return checkOneOf(path, string(v), values...)
}

// checkSHA256 validates a content hash: 64 lowercase hex characters.
func checkSHA256(path, v string, required bool) error {
	if v == "" {
		if required {
			return invalid(path, "is required: a SHA-256 content hash, 64 lowercase hex characters (as sha256sum prints it)")
		}
		return nil
	}
	if strings.HasPrefix(v, events.DigestPrefix) {
		return invalid(path, "is %q: a content hash is 64 lowercase hex characters without the %q prefix (as sha256sum prints it)", v, events.DigestPrefix)
	}
	return checkHex(path, v, "64 lowercase hex characters")
}

// checkDigest validates a digest greffe defines: "sha256:" and 64
// lowercase hex characters.
func checkDigest(path, v string, required bool) error {
	const want = `"sha256:" and 64 lowercase hex characters`
	if v == "" {
		if required {
			return invalid(path, "is required: a digest, %s", want)
		}
		return nil
	}
	h, ok := strings.CutPrefix(v, events.DigestPrefix)
	if !ok {
		return invalid(path, "is %q: this digest is written %s (e.g. the output of greffe digest)", v, want)
	}
	return checkHex(path, h, want)
}

func checkHex(path, h, want string) error {
	if len(h) != 64 {
		return invalid(path, "is not a SHA-256: want %s, got %d hex characters", want, len(h))
	}
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return invalid(path, "is not a SHA-256: want %s, got %q", want, c)
		}
	}
	return nil
}
