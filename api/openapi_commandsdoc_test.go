package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

// The generated part of docs/COMMANDS.md: one section per command, from
// the OpenAPI document (its data's fields, the roles that may send it, the
// codes its gates may answer, linked to docs/GATES.md, and the events it
// may append). The hand-written prose around it stays; only the text
// between the two markers is rewritten.

const (
	beginCommands = "<!-- BEGIN GENERATED: the commands (go test ./api -run TestOpenAPI -update; do not edit) -->"
	endCommands   = "<!-- END GENERATED: the commands -->"
)

// commandsDoc returns old (docs/COMMANDS.md) with its generated region
// rebuilt from doc (the OpenAPI document) and gatesPath (docs/GATES.md).
func commandsDoc(old, doc []byte, gatesPath string) ([]byte, error) {
	i, j := bytes.Index(old, []byte(beginCommands)), bytes.Index(old, []byte(endCommands))
	if i < 0 || j < i {
		return nil, fmt.Errorf("docs/COMMANDS.md has no %q … %q region", beginCommands, endCommands)
	}
	gates, err := os.ReadFile(gatesPath)
	if err != nil {
		return nil, err
	}
	anchors := gateAnchors(gates)
	var d struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	var names []string
	for n, s := range d.Components.Schemas {
		if _, ok := s["x-greffe-roles"]; ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(beginCommands + "\n\n")
	b.WriteString("Generated from the OpenAPI document (docs/openapi.json, `GET /v1/openapi.json`): each command's `data` " +
		"(the fields, from the Go types and their tags), the roles whose token may send it (from the route's roles), the codes its " +
		"gates may refuse with and the events it may append (read from the deciders' code; a branch that a given state cannot reach " +
		"still counts). Rules that join fields (\"finish_reason only when completed\") are checked by the command's `Validate` and " +
		"answered as 400 `invalid_command` with the field's path.\n\n")
	for _, n := range names {
		s := d.Components.Schemas[n]
		fmt.Fprintf(&b, "#### %s\n\n", n)
		if desc, _ := s["description"].(string); desc != "" {
			b.WriteString(oneLine(desc) + "\n\n")
		}
		fmt.Fprintf(&b, "- Sent by: %s\n", joinCode(strs(s["x-greffe-roles"]), nil))
		fmt.Fprintf(&b, "- Appends: %s\n", orNone(joinCode(strs(s["x-greffe-events"]), nil)))
		fmt.Fprintf(&b, "- Refused with: %s\n\n", orNone(joinCode(strs(s["x-greffe-codes"]), anchors)))
		props, _ := s["properties"].(map[string]any)
		if len(props) == 0 {
			b.WriteString("No fields.\n\n")
			continue
		}
		required := map[string]bool{}
		for _, r := range strs(s["required"]) {
			required[r] = true
		}
		b.WriteString("| field | type | required | rules | meaning |\n| --- | --- | --- | --- | --- |\n")
		var fields []string
		for f := range props {
			fields = append(fields, f)
		}
		sort.Strings(fields)
		for _, f := range fields {
			p, _ := props[f].(map[string]any)
			req := ""
			if required[f] {
				req = "yes"
			}
			desc, _ := p["description"].(string)
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", f, typeOf(p), req, rulesOf(p), cell(desc))
		}
		b.WriteString("\n")
	}
	var out bytes.Buffer
	out.Write(old[:i])
	out.WriteString(b.String())
	out.Write(old[j:])
	return out.Bytes(), nil
}

// gateAnchors maps each code of docs/GATES.md's tables to the anchor of
// the section it is in.
func gateAnchors(gates []byte) map[string]string {
	out := map[string]string{}
	row := regexp.MustCompile("^\\| `([a-z0-9_]+)` \\|")
	anchor := ""
	for _, l := range strings.Split(string(gates), "\n") {
		if h, ok := strings.CutPrefix(l, "## "); ok {
			anchor = githubAnchor(h)
		} else if h, ok := strings.CutPrefix(l, "### "); ok {
			anchor = githubAnchor(h)
		}
		if m := row.FindStringSubmatch(l); m != nil && out[m[1]] == "" {
			out[m[1]] = anchor
		}
	}
	return out
}

// githubAnchor is the anchor GitHub gives a heading.
func githubAnchor(h string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteRune(c)
		case c == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// joinCode writes each value as code, linked to GATES.md when anchors has it.
func joinCode(l []string, anchors map[string]string) string {
	var out []string
	for _, s := range l {
		if a, ok := anchors[s]; ok {
			out = append(out, fmt.Sprintf("[`%s`](GATES.md#%s)", s, a))
		} else {
			out = append(out, "`"+s+"`")
		}
	}
	return strings.Join(out, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// typeOf renders a property's type.
func typeOf(p map[string]any) string {
	if ref, ok := p["$ref"].(string); ok {
		return strings.TrimPrefix(ref, "#/components/schemas/")
	}
	if alts, ok := p["anyOf"].([]any); ok {
		var parts []string
		for _, a := range alts {
			if m, ok := a.(map[string]any); ok {
				parts = append(parts, typeOf(m))
			}
		}
		return strings.Join(parts, " or ")
	}
	var t string
	switch x := p["type"].(type) {
	case string:
		t = x
	case []any:
		t = strings.Join(strs(x), " or ")
	}
	if f, ok := p["format"].(string); ok {
		t += " (" + f + ")"
	}
	if it, ok := p["items"].(map[string]any); ok {
		t += " of " + typeOf(it)
	}
	if t == "" {
		t = "any"
	}
	return t
}

// rulesOf renders a property's bounds, enum and pattern.
func rulesOf(p map[string]any) string {
	var r []string
	if e := p["enum"]; e != nil {
		var vals []string
		for _, v := range e.([]any) {
			vals = append(vals, fmt.Sprintf("`%v`", v))
		}
		r = append(r, "one of "+strings.Join(vals, ", "))
	}
	for _, k := range []string{"minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems"} {
		if v, ok := p[k]; ok {
			r = append(r, fmt.Sprintf("%s %v", k, v))
		}
	}
	if v, ok := p["uniqueItems"].(bool); ok && v {
		r = append(r, "unique")
	}
	if v, ok := p["pattern"].(string); ok {
		r = append(r, "pattern `"+strings.ReplaceAll(v, "|", "\\|")+"`")
	}
	return strings.Join(r, "; ")
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cell escapes a table cell: a bar ends the cell, and "<id>" would be
// read as an HTML tag and vanish.
func cell(s string) string {
	return strings.NewReplacer("|", "\\|", "<", "&lt;", ">", "&gt;").Replace(oneLine(s))
}
