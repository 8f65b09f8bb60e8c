package api

import (
	"fmt"
	"strings"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/wire"
)

// routeDoc documents one route of the route table for the OpenAPI
// document. TestOpenAPI_Routes holds routeDocs to the routes a full node
// mounts (Server.Routes): every mounted route has exactly one entry and
// every entry is mounted, so a new route without a schema fails a test.
type routeDoc struct {
	// Pattern is the route's pattern as mounted ("GET /v1/info").
	Pattern string
	// Summary says what the route does, in one line.
	Summary string
	// Query are the query parameters: name and meaning.
	Query [][2]string
	// In is a value of the request body's type (nil: no body); a string
	// names a schema of components.schemas instead.
	In any
	// Out is a value of the 200 answer's JSON type; a string names a
	// schema; nil with ContentType set: a body that is not JSON.
	Out any
	// ContentType is the answer's media type when it is not JSON.
	ContentType string
	// Public routes need no token.
	Public bool
}

// routeDocs returns the documented routes, in docs/API.md's order; the
// slice is new on each call.
func routeDocs() []routeDoc {
	qConsistency := [2]string{"consistency", "local (default), leader or linearizable: where a GET is answered (docs/CLUSTER.md)"}
	qProve := [2]string{"prove", "1 or true: add a proof of the answer, one inclusion proof per event; range: prove an answer that is one run of consecutive positions by one range proof (docs/API.md, Proven answers)"}
	qTrusted := [2]string{"trusted", "with prove: the size of the newest checkpoint the client verified"}
	qQuorum := [2]string{"witness_quorum", "with prove (or on /v1/checkpoint): a checkpoint that this many witnesses cosigned"}
	page := [][2]string{{"from", "the first position (or version) to read"}, {"limit", "at most this many events (default and maximum 1,000)"},
		{"direction", "forward (default) or backward"}, qProve, qTrusted, qQuorum, qConsistency}
	return []routeDoc{
		{Pattern: "GET /healthz", Summary: "liveness: 200 while the process serves", Out: HealthOut{}, Public: true},
		{Pattern: "GET /v1/openapi.json", Summary: "this document", Out: map[string]any{}, Query: [][2]string{qConsistency}},
		{Pattern: "GET /v1/info", Summary: "ledger id, origin, node id, version, verifier keys, head, and the build (greffe version)", Out: wire.InfoOut{}, Query: [][2]string{qConsistency}},
		{Pattern: "POST /v1/streams/{stream}", Summary: "append events to one stream, under a condition", In: wire.StreamAppendIn{}, Out: wire.AppendOut{},
			Query: [][2]string{qProve, qTrusted, qQuorum}},
		{Pattern: "POST /v1/append", Summary: "append to several streams atomically", In: wire.AppendIn{}, Out: wire.AppendOut{},
			Query: [][2]string{qProve, qTrusted, qQuorum}},
		{Pattern: "GET /v1/streams", Summary: "list streams by name with their version and last position", Out: wire.StreamsOut{},
			Query: [][2]string{{"prefix", "only streams whose name starts with it"}, {"after", "start after this name (the last of the previous page)"},
				{"limit", "at most this many (default and maximum in docs/API.md)"}, qConsistency}},
		{Pattern: "GET /v1/streams/{stream}", Summary: "read one stream by version", Out: wire.ReadOut{}, Query: page},
		{Pattern: "GET /v1/all", Summary: "read the global log by position (format=entries: the stored bytes, application/x-greffe-entries)", Out: wire.ReadOut{},
			Query: append([][2]string{{"format", "json (default) or entries"}}, page...)},
		{Pattern: "GET /v1/events/{id}", Summary: "one event by id", Out: schemaEvent, Query: [][2]string{qProve, qTrusted, qQuorum, qConsistency}},
		{Pattern: "GET /v1/subscribe", Summary: "Server-Sent Events: catch-up then live; id = position, event = type, data = the event", ContentType: "text/event-stream",
			Query: [][2]string{{"from", "a position, or end"}, {"stream_prefix", "only streams with this prefix"}, {"types", "only these types, comma-separated"}, qConsistency}},
		{Pattern: "GET /v1/checkpoint", Summary: "the latest signed checkpoint note, with its witnesses' cosignatures", ContentType: "text/plain",
			Query: [][2]string{{"size", "the checkpoint of this size"}, qQuorum, qConsistency}},
		{Pattern: "GET /v1/proof/inclusion", Summary: "an RFC 6962 inclusion proof", Out: wire.InclusionOut{},
			Query: [][2]string{{"position", "the event's position"}, {"size", "the tree size (default the latest checkpoint's)"}, qConsistency}},
		{Pattern: "GET /v1/proof/consistency", Summary: "an RFC 6962 consistency proof", Out: wire.ConsistencyOut{},
			Query: [][2]string{{"from", "the older size"}, {"to", "the newer size (default the latest checkpoint's)"}, qConsistency}},
		{Pattern: "GET /tlog/checkpoint", Summary: "C2SP tlog-tiles: the checkpoint", ContentType: "text/plain", Query: [][2]string{qConsistency}},
		{Pattern: "GET /tlog/tile/entries/{n...}", Summary: "C2SP tlog-tiles: an entry bundle", ContentType: "application/octet-stream", Query: [][2]string{qConsistency}},
		{Pattern: "GET /tlog/tile/{level}/{n...}", Summary: "C2SP tlog-tiles: a hash tile", ContentType: "application/octet-stream", Query: [][2]string{qConsistency}},
		{Pattern: "POST /v1/commands", Summary: "send one command (docs/COMMANDS.md); a gate's refusal is a 422, recorded", In: schemaCommand, Out: wire.CommandOut{},
			Query: [][2]string{qProve, qTrusted, qQuorum}},
		{Pattern: "GET /v1/policy", Summary: "the node's policy", Out: aggregates.Policy{}, Query: [][2]string{qConsistency}},
		{Pattern: "GET /v1/projections", Summary: "every read model: position, head, lag", Out: wire.ProjectionsOut{}, Query: [][2]string{qConsistency}},
		{Pattern: "GET /v1/projections/{name}", Summary: "one read model's rows", Out: ProjectionOut{},
			Query: [][2]string{{"at", "a log position (as of it) or an RFC 3339 time"}, {"time", "judge timed rows at this RFC 3339 time"},
				{"key", "only this row"}, {"min_position", "wait up to 10 s for the projection to fold this many events"}, qConsistency}},
		{Pattern: "GET /v1/cluster/status", Summary: "the cluster's members, leader and indexes", Out: wire.Status{}, Query: [][2]string{qConsistency}},
		{Pattern: "POST /v1/cluster/join", Summary: "add a voter (operator)", In: wire.JoinRequest{}, Out: wire.Status{}},
		{Pattern: "POST /v1/cluster/remove", Summary: "remove a member (operator)", In: wire.NodeIn{}, Out: wire.Status{}},
		{Pattern: "POST /v1/cluster/transfer-leader", Summary: "hand leadership to a member (operator)", In: wire.NodeIn{}, Out: wire.Status{}},
		{Pattern: "GET /v1/backup", Summary: "a consistent backup of this node (operator, admin)", ContentType: "application/x-tar",
			Query: [][2]string{{"include_keys", "true: the node's private keys too (admin only; 403 backup_keys_admin_only otherwise)"},
				{"keys", "the former parameter: false is the default now, true the same as include_keys=true"}, qConsistency}},
		{Pattern: "GET /metrics", Summary: "Prometheus metrics", ContentType: "text/plain", Query: [][2]string{qConsistency}},
		{Pattern: "GET /readyz", Summary: "readiness: 200 ready, 503 with reasons (store_failed, projection_lagging, projection_failed, no_leader, raft_stopped)",
			Out: map[string]any{}, Public: true},
		{Pattern: "GET /{$}", Summary: "the dashboard page", ContentType: "text/html", Public: true},
		{Pattern: "GET /ui/", Summary: "the dashboard's assets", ContentType: "application/octet-stream", Public: true},
	}
}

// splitPattern turns a mux pattern into a method and an OpenAPI path:
// "{n...}" is "{n}", "/{$}" is "/", a trailing "/" prefix is "/ui/{asset}".
func splitPattern(p string) (method, path string) {
	method, path, _ = strings.Cut(p, " ")
	path = strings.ReplaceAll(path, "...}", "}")
	path = strings.ReplaceAll(path, "{$}", "")
	if strings.HasSuffix(path, "/") && path != "/" {
		path += "{asset}"
	}
	return method, path
}

// pathParams returns the names of an OpenAPI path's parameters.
func pathParams(path string) []string {
	var out []string
	for rest := path; ; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(rest[i:], '}')
		out = append(out, rest[i+1:i+j])
		rest = rest[i+j+1:]
	}
}

// operation is the OpenAPI operation of one route.
func (b *schemaBuilder) operation(rd routeDoc) (map[string]any, error) {
	_, path := splitPattern(rd.Pattern)
	op := map[string]any{"summary": rd.Summary, "operationId": operationID(rd.Pattern)}
	var params []any
	for _, p := range pathParams(path) {
		params = append(params, map[string]any{"name": p, "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
	}
	for _, q := range rd.Query {
		params = append(params, map[string]any{"name": q[0], "in": "query", "description": q[1], "schema": map[string]any{"type": "string"}})
	}
	if params != nil {
		op["parameters"] = params
	}
	if rd.In != nil {
		ref, err := b.ref(rd.In)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rd.Pattern, err)
		}
		op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": ref}}}
	}
	ok := map[string]any{"description": "OK"}
	switch {
	case rd.Out != nil:
		ref, err := b.ref(rd.Out)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rd.Pattern, err)
		}
		ok["content"] = map[string]any{"application/json": map[string]any{"schema": ref}}
	case rd.ContentType != "":
		ok["content"] = map[string]any{rd.ContentType: map[string]any{"schema": map[string]any{"type": "string"}}}
	default:
		return nil, fmt.Errorf("%s: neither Out nor ContentType", rd.Pattern)
	}
	if err := b.add("ErrorBody", wire.ErrorBody{}); err != nil {
		return nil, err
	}
	op["responses"] = map[string]any{
		"200": ok,
		"default": map[string]any{"description": "an error: its code (ErrorCode) is the contract, its message says what to fix",
			"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/ErrorBody"}}}},
	}
	if rd.Public {
		op["security"] = []any{}
	}
	return op, nil
}

// ref returns a reference to v's schema (reflected and added), a named
// schema for a string, or an open object for a map.
func (b *schemaBuilder) ref(v any) (map[string]any, error) {
	switch x := v.(type) {
	case string:
		if _, ok := b.defs[x]; !ok {
			return nil, fmt.Errorf("no schema named %s", x)
		}
		return map[string]any{"$ref": "#/components/schemas/" + x}, nil
	case map[string]any:
		return map[string]any{"type": "object"}, nil
	}
	name := fmt.Sprintf("%T", v)
	name = name[strings.LastIndexByte(name, '.')+1:]
	if err := b.add(name, v); err != nil {
		return nil, err
	}
	return map[string]any{"$ref": "#/components/schemas/" + name}, nil
}

// operationID is "get_v1_streams_stream" for "GET /v1/streams/{stream}".
func operationID(pattern string) string {
	method, path := splitPattern(pattern)
	var b strings.Builder
	b.WriteString(strings.ToLower(method))
	for _, c := range path {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteRune(c)
		case c >= 'A' && c <= 'Z':
			b.WriteRune(c + 'a' - 'A')
		default:
			if !strings.HasSuffix(b.String(), "_") {
				b.WriteByte('_')
			}
		}
	}
	return strings.TrimSuffix(b.String(), "_")
}

// DocumentedRoutes returns the patterns the OpenAPI document describes,
// to be compared with a node's Server.Routes (TestOpenAPI_Routes).
func DocumentedRoutes() []string {
	var out []string
	for _, rd := range routeDocs() {
		out = append(out, rd.Pattern)
	}
	return out
}
