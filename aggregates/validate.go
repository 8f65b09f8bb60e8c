package aggregates

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Shape checks shared by the commands' Validate methods. Each returns an
// *InvalidCommandError naming the field by its JSON path under "data".

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

// Text bounds, in bytes.
const (
	maxShortText = 256
	maxLongText  = 4096
	maxListLen   = 256
)

// checkOneOf validates an enumerated value.
func checkOneOf(path, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	if v == "" {
		return invalid(path, "is required; one of %s", strings.Join(allowed, ", "))
	}
	return invalid(path, "is %q; want one of %s", v, strings.Join(allowed, ", "))
}

// Two spellings of a SHA-256, one per field, never both (issue #15):
//
//   - a content hash, the SHA-256 of bytes someone else hashed (a file, a
//     patch, a request, an output), is 64 lowercase hex characters, as
//     sha256sum prints it: checkSHA256;
//   - a digest greffe defines by a formula over JSON or an argv (a
//     binding's identity, an argv_hash, a receipt's binding_identity) is
//     "sha256:" and 64 lowercase hex characters, as BindingIdentity and
//     ArgvHash return it: checkDigest.
//
// A value in the other spelling is refused with the spelling the field
// wants, so that equal digests are always equal strings: the gates compare
// them as strings (identity_mismatch, receipt_mismatch, argv_mismatch).

// DigestPrefix starts every digest greffe defines.
const DigestPrefix = "sha256:"

// checkSHA256 validates a content hash: 64 lowercase hex characters.
func checkSHA256(path, v string, required bool) error {
	if v == "" {
		if required {
			return invalid(path, "is required: a SHA-256 content hash, 64 lowercase hex characters (as sha256sum prints it)")
		}
		return nil
	}
	if strings.HasPrefix(v, DigestPrefix) {
		return invalid(path, "is %q: a content hash is 64 lowercase hex characters without the %q prefix (as sha256sum prints it)", v, DigestPrefix)
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
	h, ok := strings.CutPrefix(v, DigestPrefix)
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

// checkList validates a list of short, non-blank, distinct strings.
func checkList(path string, l []string) error {
	if len(l) > maxListLen {
		return invalid(path, "has %d entries; the limit is %d", len(l), maxListLen)
	}
	seen := make(map[string]bool, len(l))
	for i, s := range l {
		if err := checkText(indexPath(path, i), s, true, maxShortText); err != nil {
			return err
		}
		if seen[s] {
			return invalid(indexPath(path, i), "%q is listed twice", s)
		}
		seen[s] = true
	}
	return nil
}

// indexPath returns "path[i]".
func indexPath(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }
