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

// checkSHA256 validates a lowercase hex SHA-256 digest, optionally
// prefixed with "sha256:".
func checkSHA256(path, v string, required bool) error {
	if v == "" {
		if required {
			return invalid(path, "is required (a SHA-256 digest in hex)")
		}
		return nil
	}
	h := strings.TrimPrefix(v, "sha256:")
	if len(h) != 64 {
		return invalid(path, "is not a SHA-256 digest: want 64 hex characters, got %d", len(h))
	}
	for _, c := range h {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return invalid(path, "is not a lowercase hex SHA-256 digest")
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
