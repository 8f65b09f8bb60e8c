package aggregates

import (
	"path"
	"reflect"
	"strconv"

	"github.com/google/uuid"
)

// List types: a list's bounds (how many entries, whether each is listed
// once) and its entries' rule are its type's, as a scalar's are
// (values.go). Their elements are plain strings (or structs whose fields
// are value types), so that a list converts to []string where an event
// records it.

// ShortTexts is a list of up to 256 distinct ShortTexts (capabilities,
// task classes, evidence in words).
type ShortTexts []string

func (l ShortTexts) check(path string) error {
	return checkTexts(path, l, maxListLen, "entries")
}
func (ShortTexts) jsonSchema() map[string]any {
	return listSchema(ShortText("").jsonSchema(), 0, maxListLen, true)
}

// PathPatterns is a list of up to 256 distinct path patterns (path.Match),
// each a ShortText: the files a mission's patches may change.
type PathPatterns []string

func (l PathPatterns) check(p string) error {
	if err := checkTexts(p, l, maxListLen, "entries"); err != nil {
		return err
	}
	for i, f := range l {
		if _, err := path.Match(f, ""); err != nil {
			return invalid(indexPath(p, i), "%q is not a valid path pattern", f)
		}
	}
	return nil
}
func (PathPatterns) jsonSchema() map[string]any {
	return listSchema(ShortText("").jsonSchema(), 0, maxListLen, true)
}

// ClaimCases is a list of up to MaxClaimEvidence distinct ShortTexts:
// the cases a claim covers.
type ClaimCases []string

func (l ClaimCases) check(path string) error {
	return checkTexts(path, l, MaxClaimEvidence, "cases")
}
func (ClaimCases) jsonSchema() map[string]any {
	return listSchema(ShortText("").jsonSchema(), 0, MaxClaimEvidence, true)
}

// checkTexts checks a list of at most max distinct, non-blank short texts;
// what names its entries in the message ("entries", "cases").
func checkTexts(path string, l []string, max int, what string) error {
	return checkList(path, l, max, what, true, func(p, s string) error { return checkText(p, s, true, maxShortText) })
}

// checkList checks a list of strings: at most max entries (what names
// them in the message), each by each, and each listed once when distinct.
func checkList(path string, l []string, max int, what string, distinct bool, each func(path, s string) error) error {
	if len(l) > max {
		return invalid(path, "has %d %s; the limit is %d", len(l), what, max)
	}
	seen := make(map[string]bool, len(l))
	for i, s := range l {
		p := indexPath(path, i)
		if err := each(p, s); err != nil {
			return err
		}
		if distinct && seen[s] {
			return invalid(p, "%q is listed twice", s)
		}
		seen[s] = true
	}
	return nil
}

// checkStructs checks a list of structs of this package: each element by
// its fields' types, then that its key is not an earlier element's. A
// repeat is reported at the element's path and keyField (its JSON name;
// "" for the element itself), spelled by name.
func checkStructs[T any, K comparable](path string, l []T, keyField string, key func(T) K, name func(T) string) error {
	seen := make(map[K]bool, len(l))
	for i := range l {
		p := indexPath(path, i)
		if err := checkValue(p, reflect.ValueOf(l[i])); err != nil {
			return err
		}
		k := key(l[i])
		if seen[k] {
			if keyField != "" {
				p += "." + keyField
			}
			return invalid(p, "%s is listed twice", name(l[i]))
		}
		seen[k] = true
	}
	return nil
}

// IDs is a list of up to 256 distinct IDs (the providers a route may
// choose from).
type IDs []string

func (l IDs) check(path string) error {
	return checkList(path, l, maxListLen, "entries", true, checkID)
}
func (IDs) jsonSchema() map[string]any { return listSchema(ID("").jsonSchema(), 0, maxListLen, true) }

// ModelTags is the list of model tags an endpoint listed: up to 1024
// ShortTexts, repeats kept as listed.
type ModelTags []string

// maxModelTags bounds ModelTags: an endpoint may serve many models.
const maxModelTags = 4 * maxListLen

func (l ModelTags) check(path string) error {
	return checkList(path, l, maxModelTags, "entries", false, func(p, m string) error { return checkText(p, m, true, maxShortText) })
}
func (ModelTags) jsonSchema() map[string]any {
	return listSchema(ShortText("").jsonSchema(), 0, maxModelTags, false)
}

// Conditions are up to 256 conditions in words, each a LongText; repeats
// kept as written.
type Conditions []string

func (l Conditions) check(path string) error {
	return checkList(path, l, maxListLen, "entries", false, func(p, c string) error { return checkText(p, c, true, maxLongText) })
}
func (Conditions) jsonSchema() map[string]any {
	return listSchema(LongText("").jsonSchema(), 0, maxListLen, false)
}

// Argv is an exact command line: 1 to 256 entries of at most 4096 bytes,
// the program (the first) not blank; an argument may be empty.
type Argv []string

func (l Argv) check(path string) error {
	if len(l) == 0 || len(l) > maxListLen {
		return invalid(path, "has %d entries; an exact argv has 1 to %d", len(l), maxListLen)
	}
	for i, a := range l {
		if err := checkText(indexPath(path, i), a, i == 0, maxLongText); err != nil {
			return err
		}
	}
	return nil
}
func (Argv) jsonSchema() map[string]any {
	return listSchema(map[string]any{"type": "string", "maxLength": maxLongText}, 1, maxListLen, false)
}

// EvidenceRefs are the ids of up to MaxClaimEvidence distinct events,
// none the nil UUID.
type EvidenceRefs []uuid.UUID

func (l EvidenceRefs) check(path string) error {
	if len(l) > MaxClaimEvidence {
		return invalid(path, "has %d references; the limit is %d", len(l), MaxClaimEvidence)
	}
	for i, id := range l {
		if id == uuid.Nil {
			return invalid(indexPath(path, i), "is the nil UUID")
		}
		for _, prior := range l[:i] {
			if prior == id {
				return invalid(indexPath(path, i), "%s is cited twice", id)
			}
		}
	}
	return nil
}
func (EvidenceRefs) jsonSchema() map[string]any {
	return listSchema(map[string]any{"type": "string", "format": "uuid"}, 0, MaxClaimEvidence, true)
}

// Metadata are up to 256 facts as key-value strings (a model's
// quantisation, its parameters).
type Metadata map[string]string

func (m Metadata) check(path string) error {
	if len(m) > maxListLen {
		return invalid(path, "has %d entries; the limit is %d", len(m), maxListLen)
	}
	return nil
}
func (Metadata) jsonSchema() map[string]any {
	return map[string]any{"type": "object", "maxProperties": maxListLen, "additionalProperties": map[string]any{"type": "string"}}
}

// ReviewCoverage maps up to 256 acceptance check ids to the evidence a
// reviewer relied on for each, an OptionalLongText.
type ReviewCoverage map[string]string

func (m ReviewCoverage) check(path string) error {
	if len(m) > maxListLen {
		return invalid(path, "has %d entries; the limit is %d", len(m), maxListLen)
	}
	for _, k := range sortedKeys(m) {
		if err := checkText(path+"."+k, m[k], false, maxLongText); err != nil {
			return err
		}
	}
	return nil
}
func (ReviewCoverage) jsonSchema() map[string]any {
	return map[string]any{"type": "object", "maxProperties": maxListLen, "additionalProperties": OptionalLongText("").jsonSchema()}
}

// listSchema is the schema of an array of items, with at least min and
// at most max of them (min 0 says nothing), distinct when unique.
func listSchema(items map[string]any, min, max int, unique bool) map[string]any {
	s := map[string]any{"type": "array", "items": items, "maxItems": max}
	if min > 0 {
		s["minItems"] = min
	}
	if unique {
		s["uniqueItems"] = true
	}
	return s
}

// structListSchema is the schema of an array of the struct type named
// elem, whose schema the generator reflects from its fields.
func structListSchema(elem string, min, max int, unique bool) map[string]any {
	return listSchema(map[string]any{"$ref": "#/$defs/" + elem}, min, max, unique)
}

// indexPath returns "path[i]".
func indexPath(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }
