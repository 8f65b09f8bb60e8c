package api

import (
	"bytes"
	"cmp"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/invopop/jsonschema"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// The OpenAPI 3.1 document of the HTTP API (issue #15), served at GET
// /v1/openapi.json and checked in as docs/openapi.json.
//
// It is generated, never written: the schemas are reflected from the Go
// types the node decodes and encodes (github.com/invopop/jsonschema), with
// the bounds Validate checks said by the fields' value types
// (aggregates.SchemaOf, the builder's mapper); the paths come from routeDocs, which TestOpenAPI_Routes holds to
// the route table of a full node (Server.Routes), so a route mounted
// without a schema fails a test. Descriptions are the types' and fields'
// Go doc comments and the codes' constants' comments: a binary has no
// source, so they are extracted once into openapi_notes.json (embedded)
// by `go test ./api -run TestOpenAPI -update`, which also rewrites
// docs/openapi.json and the generated part of docs/COMMANDS.md;
// TestOpenAPI_Fresh fails when any of the three is stale.

//go:embed openapi_notes.json
var openAPINotesJSON []byte

// OpenAPINotes is what the document needs from the source that reflection
// cannot see: Go doc comments, the codes and their descriptions, and what
// each command may answer and append (from the deciders' code).
type OpenAPINotes struct {
	// Comments are invopop's comment map: "pkgpath.Type" and
	// "pkgpath.Type.Field" to the doc comment.
	Comments map[string]string `json:"comments"`
	// Codes maps every error code the API may answer to the doc comment
	// of its constant.
	Codes map[string]string `json:"codes"`
	// Commands holds, per command name, the refusal codes its gates may
	// answer and the event types it may append.
	Commands map[string]CommandNotes `json:"commands"`
}

// CommandNotes is what one command may answer and append.
type CommandNotes struct {
	Codes  []string `json:"codes"`
	Events []string `json:"events"`
}

// DecodeOpenAPINotes decodes the embedded notes.
func DecodeOpenAPINotes() (OpenAPINotes, error) {
	var n OpenAPINotes
	if err := json.Unmarshal(openAPINotesJSON, &n); err != nil {
		return n, fmt.Errorf("decode openapi_notes.json: %w", err)
	}
	return n, nil
}

// OpenAPI returns the OpenAPI document with the embedded notes.
func OpenAPI() ([]byte, error) {
	n, err := DecodeOpenAPINotes()
	if err != nil {
		return nil, err
	}
	return BuildOpenAPI(n)
}

// Schema names of the envelope types every document holds.
const (
	schemaErrorCode = "ErrorCode"
	schemaCommand   = "Command"
	schemaEvent     = "StoredEvent"
)

// BuildOpenAPI builds the document from the types, the route docs and
// notes. The bytes are deterministic: indented, keys sorted.
func BuildOpenAPI(n OpenAPINotes) ([]byte, error) { return buildOpenAPI(n, nil) }

// buildOpenAPI is BuildOpenAPI; lookup, when set, is told every comment
// key the reflection asks for.
func buildOpenAPI(n OpenAPINotes, lookup func(key string)) ([]byte, error) {
	b := &schemaBuilder{notes: n, defs: map[string]json.RawMessage{}}
	b.r = &jsonschema.Reflector{
		// Unknown fields are refused everywhere (strict decoding).
		AllowAdditionalProperties: false,
		CommentMap:                n.Comments,
	}
	b.r.Mapper = b.mapper
	if lookup != nil {
		b.r.LookupComment = func(t reflect.Type, field string) string {
			k := t.PkgPath() + "." + t.Name()
			if field != "" {
				k += "." + field
			}
			lookup(k)
			return ""
		}
	}
	var commands []string
	for _, spec := range aggregates.Catalogue() {
		if err := b.add(spec.Name, spec.New()); err != nil {
			return nil, err
		}
		commands = append(commands, spec.Name)
	}
	types := EventDataTypes()
	var evTypes []string
	for t := range types {
		evTypes = append(evTypes, t)
	}
	sort.Strings(evTypes)
	for _, t := range evTypes {
		if err := b.add(t, types[t]); err != nil {
			return nil, err
		}
	}
	for _, name := range commands {
		if err := b.annotateCommand(name); err != nil {
			return nil, err
		}
	}
	if b.err != nil {
		return nil, b.err
	}
	if err := b.add("WireEvent", WireEvent{}); err != nil {
		return nil, err
	}
	if err := b.add("CommandIn", wire.CommandIn{}); err != nil {
		return nil, err
	}
	b.defs[schemaErrorCode] = b.errorCodes()
	b.defs[schemaCommand] = b.commandUnion(commands)
	b.defs[schemaEvent] = b.eventUnion(evTypes)

	paths := map[string]map[string]any{}
	for _, rd := range routeDocs() {
		op, err := b.operation(rd)
		if err != nil {
			return nil, err
		}
		method, path := splitPattern(rd.Pattern)
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path][strings.ToLower(method)] = op
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   "greffe",
			"version": "1",
			"description": "greffe's HTTP API: an append-only, tamper-evident event ledger and the domain commands of an AI control plane. " +
				"Generated from the Go types (api/openapi.go); docs/API.md and docs/COMMANDS.md explain it. " +
				"Every error is an ErrorBody whose code is an ErrorCode.",
		},
		"jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
		"security":          []any{map[string]any{"bearer": []any{}}},
		"paths":             paths,
		"components": map[string]any{
			"schemas": b.defs,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer",
				"description": "a token of --tokens FILE; a loopback node without tokens needs none"}},
		},
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encode openapi: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return nil, fmt.Errorf("indent openapi: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// schemaBuilder collects components.schemas from reflected types.
type schemaBuilder struct {
	r     *jsonschema.Reflector
	notes OpenAPINotes
	defs  map[string]json.RawMessage
	// err is the first error of mapper, which the reflector cannot be
	// told.
	err error
}

// mapper is the reflector's Mapper: the hand-written schemas
// (wireMapper), then the domain's value types (valueSchema), whose list
// of structs has its element reflected here, since a Mapper's schema is
// not reflected further.
func (b *schemaBuilder) mapper(t reflect.Type) *jsonschema.Schema {
	if s := wireMapper(t); s != nil {
		return s
	}
	s, err := valueSchema(t)
	if err != nil {
		b.err = cmp.Or(b.err, err)
		return nil
	}
	if s != nil && t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct {
		if _, ok := b.defs[t.Elem().Name()]; !ok {
			if err := b.add(t.Elem().Name(), reflect.New(t.Elem()).Interface()); err != nil {
				b.err = cmp.Or(b.err, err)
			}
		}
	}
	return s
}

// add reflects v's type under name, and its definitions under theirs. Two
// types of one name with different schemas are a generation error.
func (b *schemaBuilder) add(name string, v any) error {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	structs := map[string]reflect.Type{}
	collectStructs(t, structs)
	s := b.r.ReflectFromType(t)
	defs := s.Definitions
	for k, d := range defs {
		if k == t.Name() {
			continue
		}
		if err := b.put(k, d, structs[k]); err != nil {
			return err
		}
	}
	root := defs[t.Name()]
	if root == nil {
		root = s
	}
	root.Definitions, root.Version, root.ID = nil, "", ""
	return b.put(name, root, t)
}

// collectStructs maps the name of every named struct type reachable from
// t to its type.
func collectStructs(t reflect.Type, into map[string]reflect.Type) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || into[t.Name()] == t {
		return
	}
	if t.Name() != "" {
		into[t.Name()] = t
	}
	for i := range t.NumField() {
		collectStructs(t.Field(i).Type, into)
	}
}

func (b *schemaBuilder) put(name string, s *jsonschema.Schema, t reflect.Type) error {
	s.Definitions = nil
	raw, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode schema %s: %w", name, err)
	}
	raw = bytes.ReplaceAll(raw, []byte(`"#/$defs/`), []byte(`"#/components/schemas/`))
	if t != nil && t.Kind() == reflect.Struct {
		if raw, err = nullable(raw, t); err != nil {
			return fmt.Errorf("schema %s: %w", name, err)
		}
	}
	if old, ok := b.defs[name]; ok && !bytes.Equal(old, raw) {
		return fmt.Errorf("openapi: two types are named %s: %s and %s", name, old, raw)
	}
	b.defs[name] = raw
	return nil
}

// nullable lets the properties of t's slices, maps and pointers be null:
// both ends write and read null for them (encoding/json writes a nil
// slice, map or pointer as null; command data accepts null for them,
// events.DecodeOptions.RefuseNull), which reflection does not say.
//
// It also drops from required the fields tagged `jsonschema:"optional"`
// and those of a value type that accepts its zero value
// (aggregates.TypeSchema.Optional): reflection requires every field
// without omitempty, but a command field whose zero value Validate
// accepts may be left out (strict decoding
// reads a missing field as its zero value), and omitempty would change
// what the Go client sends. TestOpenAPI_BoundsAgreeWithValidate
// (fixtures) holds required to what Validate refuses when missing.
func nullable(raw []byte, t reflect.Type) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	props, _ := m["properties"].(map[string]any)
	optional := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if slices.Contains(strings.Split(f.Tag.Get("jsonschema"), ","), "optional") {
			optional[name] = true
		}
		if ts, ok := aggregates.SchemaOf(f.Type); ok && ts.Optional {
			optional[name] = true
		}
	}
	if req, ok := m["required"].([]any); ok {
		req = slices.DeleteFunc(req, func(r any) bool { s, _ := r.(string); return optional[s] })
		if len(req) == 0 {
			delete(m, "required")
		} else {
			m["required"] = req
		}
	}
	for i := range t.NumField() {
		f := t.Field(i)
		switch f.Type.Kind() {
		case reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface:
		default:
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		p, ok := props[name].(map[string]any)
		if !ok {
			continue
		}
		switch typ := p["type"].(type) {
		case string:
			p["type"] = []any{typ, "null"}
		case nil:
			if ref, ok := p["$ref"]; ok {
				alt := map[string]any{"anyOf": []any{map[string]any{"$ref": ref}, map[string]any{"type": "null"}}}
				if d, ok := p["description"]; ok {
					alt["description"] = d
				}
				props[name] = alt
			}
		}
	}
	return json.Marshal(m)
}

// annotateCommand adds what a command's schema cannot say: the events it
// may append and the codes its gates may answer (x-greffe-…).
func (b *schemaBuilder) annotateCommand(name string) error {
	var m map[string]any
	if err := json.Unmarshal(b.defs[name], &m); err != nil {
		return fmt.Errorf("annotate %s: %w", name, err)
	}
	cn := b.notes.Commands[name]
	m["x-greffe-roles"] = commandRoles(name)
	m["x-greffe-codes"] = nonNil(cn.Codes)
	m["x-greffe-events"] = nonNil(cn.Events)
	raw, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("annotate %s: %w", name, err)
	}
	b.defs[name] = raw
	return nil
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// errorCodes is the ErrorCode schema: every code, its description and its
// HTTP statuses (statusOf).
func (b *schemaBuilder) errorCodes() json.RawMessage {
	var codes []string
	for c := range b.notes.Codes {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	var one []any
	for _, c := range codes {
		one = append(one, map[string]any{"const": c, "description": b.notes.Codes[c], "x-greffe-statuses": codeStatuses(c)})
	}
	raw, _ := json.Marshal(map[string]any{"type": "string", "oneOf": one,
		"description": "A stable error code (docs/API.md, docs/COMMANDS.md, docs/GATES.md): never renamed, never reused. " +
			"x-greffe-statuses are the HTTP statuses it is answered with."})
	return raw
}

// codeStatuses returns the statuses a code may be answered with, by kind.
func codeStatuses(code string) []int {
	var out []int
	for _, k := range []events.Kind{events.KindRefused, events.KindFailed, events.KindUncertain, events.KindCorrupt} {
		s := statusOf(k, code)
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	// A code with a row of its own is answered with that row whatever its
	// kind; a code without one (a gate's) is a refusal.
	if _, own := statuses[statusKey{code, anyKind}]; !own && !hasKindRow(code) {
		return []int{statusOf(events.KindRefused, code)}
	}
	slices.Sort(out)
	return out
}

func hasKindRow(code string) bool {
	for k := range statuses {
		if k.code == code && k.kind != anyKind {
			return true
		}
	}
	return false
}

// commandUnion is the body of POST /v1/commands: the envelope, with data
// chosen by command.
func (b *schemaBuilder) commandUnion(names []string) json.RawMessage {
	var all []any
	for _, n := range names {
		all = append(all, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"command": map[string]any{"const": n}}, "required": []string{"command"}},
			"then": map[string]any{"properties": map[string]any{"data": map[string]any{"$ref": "#/components/schemas/" + n}}},
		})
	}
	raw, _ := json.Marshal(map[string]any{
		"$ref":        "#/components/schemas/CommandIn",
		"description": "A command: the envelope (CommandIn) and its data, whose schema is the one named by command.",
		"properties":  map[string]any{"command": map[string]any{"enum": names, "description": "the command's name: one of the catalogue's (its data is that schema)"}},
		"allOf":       all,
	})
	return raw
}

// eventUnion is a stored event, with data chosen by type (a raw append may
// carry any other type, whose data is any object).
func (b *schemaBuilder) eventUnion(types []string) json.RawMessage {
	var all []any
	for _, t := range types {
		all = append(all, map[string]any{
			"if":   map[string]any{"properties": map[string]any{"type": map[string]any{"const": t}}, "required": []string{"type"}},
			"then": map[string]any{"properties": map[string]any{"data": map[string]any{"$ref": "#/components/schemas/" + t}}},
		})
	}
	raw, _ := json.Marshal(map[string]any{
		"$ref":        "#/components/schemas/WireEvent",
		"description": "A stored event; the data of a domain event type is that type's schema.",
		"allOf":       all,
	})
	return raw
}

// serveOpenAPI answers GET /v1/openapi.json.
func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	b, err := s.openapiDoc()
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
