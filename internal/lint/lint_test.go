package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The import table of ARCHITECTURE.md ("Folders"), one rule per package or
// folder of the module, each with its reason. A rule's pkg is a package,
// relative to the module ("events"), or a folder and everything below it
// ("events/pebblelog/..."); the most specific rule of a package is its
// rule, and every package must have one.
//
// ARCHITECTURE.md's table is the source. Where a package's doc.go, which
// states what it may import (STYLE.md, "Comments"), grants a little more
// than the table, or names a folder the table leaves out, the rule says
// so. An import that neither grants is in knownViolations, never in a
// rule: the table stays what the documents say.
//
// Only the non-test files of a package are checked: tests use real parts
// (STYLE.md, "Tests"), so the executor's tests start a node and the
// replicator's write through the store.
var rules = []rule{
	{
		pkg: "events",
		modules: []string{
			"github.com/transparency-dev",
			"golang.org/x/mod/sumdb/note",
			"github.com/go-json-experiment/json",
			"github.com/secure-systems-lab/go-securesystemslib/dsse",
		},
		greffe:   []string{"internal/jsonscan"},
		belowAPI: true,
		why: "the centre: the standard library and the transparency-dev libraries (ARCHITECTURE.md); " +
			"events/doc.go adds x/mod's note, the C2SP signed-note format of its checkpoints, encoding/json/v2 " +
			"(go-json-experiment), the one strict decoder (DecodeJSON), and the module's one byte-level JSON toolkit " +
			"(internal/jsonscan, standard library only), whose validator is the log's rule for data and metadata " +
			"(ValidJSON) and whose AppendUUID writes an event's id, so the edge and the log share one copy, and DSSE's reference " +
			"library for the envelope's pre-authentication encoding (signed.go); no other greffe package",
	},
	{
		pkg:      "events/pebblelog/...",
		greffe:   []string{"events", "events/pebblelog/layout", "events/pebblelog/inspect", "events/pebblelog/internal/wal", "internal/pebbleslog"},
		modules:  []string{"github.com/cockroachdb/pebble/v2"},
		belowAPI: true,
		why: "the write path of events.Log on Pebble: events, layout and Pebble (ARCHITECTURE.md); events/pebblelog/doc.go adds its own " +
			"write-ahead log (internal/wal), the one Pebble logger (internal/pebbleslog), and inspect, whose damage checks Open runs before " +
			"Pebble opens a folder read-write (the inspector never imports the write path: its own rule)",
	},
	{
		pkg:      "events/pebblelog/inspect",
		greffe:   []string{"events", "events/pebblelog/layout", "events/pebblelog/internal/wal", "internal/pebbleslog"},
		modules:  []string{"github.com/cockroachdb/pebble/v2"},
		belowAPI: true,
		why: "read-only access to a store's folder and its damage checks: layout and Pebble, never the write path (ARCHITECTURE.md); " +
			"events/pebblelog/inspect/doc.go adds events (damage matches events.ErrCorrupt), the write-ahead log's reader (internal/wal) " +
			"and the one Pebble logger",
	},
	{
		pkg:      "events/pebblelog/layout",
		belowAPI: true,
		why:      "the on-disk format as code: the standard library only (ARCHITECTURE.md, events/pebblelog/layout/doc.go)",
	},
	{
		pkg:      "aggregates",
		greffe:   []string{"events"},
		belowAPI: true,
		why:      "the pure gates: events only (ARCHITECTURE.md, aggregates/doc.go); testAggregatesPure keeps out the clock, randomness and I/O",
	},
	{
		pkg:      "commands",
		greffe:   []string{"events", "aggregates"},
		modules:  []string{"github.com/gowebpki/jcs"},
		belowAPI: true,
		why: "load, decide, append: events and aggregates (ARCHITECTURE.md, commands/doc.go); the Log it needs is defined there, so no store; " +
			"gowebpki/jcs, the RFC 8785 canonical form the idempotency digest is computed over (commands/decode.go)",
	},
	{
		pkg:      "projections",
		greffe:   []string{"events", "aggregates", "internal/jsonscan"},
		belowAPI: true,
		why: "read models: events, aggregates for the shared types (ARCHITECTURE.md), and the module's byte-level " +
			"scanner (internal/jsonscan) that reads stored events without decoding them twice; no storage engine: " +
			"the runner's rows go to the Store it is handed (projections/doc.go)",
	},
	{
		pkg:      "projections/pebblestore",
		greffe:   []string{"projections", "internal/pebbleslog"},
		modules:  []string{"github.com/cockroachdb/pebble/v2"},
		belowAPI: true,
		why:      "not in the table: the projections' Store on Pebble, which the node opens and hands to projections.Open (its doc)",
	},
	{
		pkg:    "replicator",
		greffe: []string{"events", "events/pebblelog", "events/pebblelog/inspect", "internal/netpolicy", "internal/pebbleslog", "wire"},
		modules: []string{
			"github.com/hashicorp/raft",
			"github.com/hashicorp/go-hclog",
			"github.com/cockroachdb/pebble/v2",
		},
		belowAPI: true,
		why: "raft in front of the ledger: events and raft (ARCHITECTURE.md); replicator/doc.go adds events/pebblelog " +
			"(the store's apply and snapshot types), events/pebblelog/inspect (a damaged snapshot file is an inspect.DamageError) and Pebble (the raft log and stable store the table's \"holds\" column names); " +
			"hclog is the logger raft's Config takes; internal/netpolicy, the one copy of what counts as loopback (plain raft is refused beyond it); " +
			"the one Pebble logger (internal/pebbleslog); wire, the cluster's status body and codes it answers (wire/cluster.go)",
	},
	{
		pkg:      "export",
		greffe:   []string{"events"},
		belowAPI: true,
		why:      "the exporters' one run loop and their fatal error: events (ARCHITECTURE.md, export/doc.go)",
	},
	{
		pkg:      "export/kafka",
		greffe:   []string{"events", "export"},
		modules:  []string{"github.com/segmentio/kafka-go"},
		belowAPI: true,
		why:      "the Kafka exporter, a sink of the run loop: events, export and kafka-go (ARCHITECTURE.md, export/kafka/doc.go)",
	},
	{
		pkg:    "export/kurrent",
		greffe: []string{"events", "export"},
		modules: []string{
			"github.com/EventStore/EventStore-Client-Go/v4",
			"google.golang.org/grpc",
		},
		belowAPI: true,
		why: "the KurrentDB mirror, a sink of the run loop: events, export and the EventStore client (ARCHITECTURE.md, " +
			"export/kurrent/doc.go), whose errors are gRPC statuses",
	},
	{
		pkg:    "executor",
		greffe: []string{"events", "wire", "client", "aggregates"},
		why: "the GPU-local worker: events, wire and client (ARCHITECTURE.md); executor/doc.go adds aggregates for the " +
			"command and payload types it sends; it talks to a node over the network only",
	},
	{
		pkg: "api",
		greffe: []string{"events", "wire", "commands", "projections", "aggregates",
			"internal/jsonscan", "internal/netpolicy", "internal/progress", "internal/quota"},
		modules: []string{
			"github.com/transparency-dev",
			"github.com/invopop/jsonschema",
		},
		why: "the HTTP surface over interfaces: events, wire, commands, projections and interfaces (ARCHITECTURE.md); " +
			"api/doc.go adds aggregates (the command catalogue, roles and event data types the schemas are reflected from) " +
			"and the edge's internal packages (the JSON cursor, caps, write progress, loopback); never a store, raft, client, " +
			"backup, node or cmd: node hands it the concrete parts; " +
			"transparency-dev for the proofs and the tlog-tiles layout it serves; invopop/jsonschema to reflect the OpenAPI " +
			"document's schemas from the types (api/openapi.go)",
	},
	{
		pkg:      "wire",
		greffe:   []string{"events"},
		belowAPI: true,
		why: "the HTTP bodies and public error codes api serves and client speaks: the standard library (ARCHITECTURE.md); " +
			"wire/doc.go adds events, whose envelope types the bodies carry as they are; no HTTP",
	},
	{
		pkg: "api/dashboard",
		why: "the embedded web page: the standard library only (api/dashboard/doc.go)",
	},
	{
		pkg:    "api/kurrentgrpc",
		greffe: []string{"events", "internal/quota", "internal/progress", "internal/netpolicy"},
		modules: []string{
			"github.com/EventStore/EventStore-Client-Go/v4",
			"google.golang.org/grpc",
		},
		why: "the KurrentDB gRPC surface: events, the EventStore client's generated protos and grpc (api/kurrentgrpc/doc.go), " +
			"and the caps and write bounds it shares with the HTTP API (internal/quota, internal/progress)",
	},
	{
		pkg:     "cmd/...",
		greffe:  []string{"..."},
		modules: []string{"..."},
		why:     "flags, config, wiring: everything (ARCHITECTURE.md)",
	},
	{
		pkg:     "node",
		greffe:  []string{"..."},
		except:  []string{"cmd/..."},
		modules: []string{"golang.org/x/mod/sumdb/note"},
		why: "the wiring of one node: everything above (ARCHITECTURE.md), so everything but cmd; the one place that hands " +
			"the store, the replicator and the backup taker to api (node/node.go); x/mod's note for the checkpoint keys it creates",
	},
	{
		pkg:    "node/nodetest",
		greffe: []string{"node"},
		why:    "not in the table: a real node for tests, opened, served and stopped (node/nodetest/nodetest.go); only tests import it",
	},
	{
		pkg:     "metrics",
		greffe:  []string{"events", "events/pebblelog", "commands", "projections", "witness", "internal/quota", "wire"},
		modules: []string{"github.com/prometheus"},
		why: "not in the table: events, the store, commands, projections, witness and internal/quota for their status types, " +
			"wire for the cluster status, and the Prometheus client; never api, node or the replicator, which node wires in (metrics/doc.go)",
	},
	{
		pkg:     "audit",
		greffe:  []string{"events", "witness", "internal/atomicfile"},
		modules: []string{"github.com/transparency-dev", "golang.org/x/mod/sumdb/note"},
		why: "the auditor's core (replay, tree, checkpoints, proofs, trust state) with no storage engine: events (ARCHITECTURE.md); " +
			"audit/doc.go adds witness (its cosignature key parser), internal/atomicfile (the state file), transparency-dev " +
			"(ARCHITECTURE.md's events line) and x/mod's note; never the code it audits (api, node, cmd) nor a source's " +
			"(layout, inspect, client: the sources beside it)",
	},
	{
		pkg:     "audit/internal/verify",
		greffe:  []string{"audit", "events"},
		modules: []string{"github.com/transparency-dev", "golang.org/x/mod/sumdb/note", "github.com/secure-systems-lab/go-securesystemslib"},
		why: "the auditor's core, its engine (audit/internal/verify/doc.go): audit and events, as the core may (ARCHITECTURE.md); " +
			"transparency-dev, x/mod's note and DSSE (the signatures an event carries); no storage engine, no source",
	},
	{
		pkg:    "audit/offline",
		greffe: []string{"audit", "audit/internal/verify", "events", "events/pebblelog/layout", "events/pebblelog/inspect"},
		why: "the auditor's offline source: layout and inspect (ARCHITECTURE.md, \"offline source only\"), the core it feeds; " +
			"never the store's write path (events/pebblelog)",
	},
	{
		pkg:     "audit/online",
		greffe:  []string{"audit", "audit/internal/verify", "events", "client", "wire"},
		modules: []string{"github.com/transparency-dev", "golang.org/x/mod/sumdb/note"},
		why: "the auditor's online source: client and the bodies it reads (wire) (ARCHITECTURE.md, \"online source only\"), the core it feeds, " +
			"tessera's tlog-tiles layout and x/mod's note (the verifier keys it is given) (audit/online/doc.go)",
	},
	{
		pkg:     "backup",
		greffe:  []string{"events", "events/pebblelog", "events/pebblelog/layout", "events/pebblelog/inspect", "audit", "audit/offline", "client", "wire"},
		modules: []string{"github.com/cockroachdb/pebble/v2/vfs", "golang.org/x/mod/sumdb/note"},
		why:     "not in the table: events, the store, audit (and its offline source), client, wire (the backup route and its headers), Pebble's vfs and x/mod's note; never api, node or cmd (backup/doc.go)",
	},
	{
		pkg:     "bench",
		greffe:  []string{"events", "internal/pebbleslog"},
		modules: []string{"github.com/cockroachdb/pebble/v2", "golang.org/x/sys"},
		why: "not in the table: the load generator drives any events.Log; it measures a bare Pebble and the disk's " +
			"fdatasync as baselines (bench/bench.go), with the one Pebble logger (internal/pebbleslog)",
	},
	{
		pkg:    "client",
		greffe: []string{"events", "wire", "internal/jsonscan"},
		why: "not in the table: the HTTP client of a node: events, wire (the bodies api serves) and the standard library " +
			"(client/client.go), and the JSON cursor it shares with api (internal/jsonscan/scanner.go); never api, a store or raft",
	},
	{
		pkg:     "client/verified",
		greffe:  []string{"client", "wire", "events", "aggregates", "audit"},
		modules: []string{"golang.org/x/mod/sumdb/note"},
		why: "not in the table: the client's verified mode (client/verified/doc.go): client's proven answers and wire's bodies, " +
			"audit's checkpoint policy and Advance (one verifier for verify and the client), aggregates' event references, x/mod's note",
	},
	{
		pkg:    "fixtures",
		greffe: []string{"aggregates", "client", "wire"},
		why: "ARCHITECTURE.md gives fixtures no imports (\"—\": histories and fake tools); its Go code runs a history " +
			"against a node over HTTP (fixtures/doc.go), like the executor: aggregates' command types, client and wire",
	},
	{
		pkg:     "witness",
		greffe:  []string{"events", "internal/atomicfile"},
		modules: []string{"github.com/transparency-dev", "golang.org/x/mod/sumdb/note"},
		why: "not in the table: C2SP tlog-witness from both ends (witness/doc.go): events' checkpoints and proofs, " +
			"transparency-dev's cosignature/v1 keys and proof verification, x/mod's note; it speaks HTTP as the node's " +
			"peer, never below api, and api, node and cmd wire it",
	},
	{
		pkg:      "internal/config",
		belowAPI: true,
		why:      "the one configuration error, ValidationError (STYLE.md, \"One of each\"): the standard library only; any package may import it (everywhereGreffe)",
	},
	{
		pkg: "internal/atomicfile",
		why: "a file replaced so that a crash leaves the old or the new: the standard library only",
	},
	{
		pkg:     "internal/faultfs",
		modules: []string{"github.com/cockroachdb/pebble/v2/vfs"},
		why:     "fault injection for tests, over Pebble's vfs (internal/faultfs/faultfs.go)",
	},
	{
		pkg:      "internal/netpolicy",
		belowAPI: true,
		why:      "the network policies listeners share (what counts as loopback): the standard library only",
	},
	{
		pkg:      "internal/pebbleslog",
		belowAPI: true,
		why:      "the one adapter from Pebble's Logger to slog (STYLE.md, \"One of each\"): the standard library only; it names no Pebble type",
	},
	{
		pkg:      "internal/jsonscan",
		belowAPI: true,
		why:      "the module's byte-level JSON toolkit (validator, cursor, the hand encoders' writing helpers): the standard library only (internal/jsonscan/doc.go)",
	},
	{
		pkg:      "internal/jsonscan/jsontest",
		belowAPI: true,
		why:      "the one seed corpus of the JSON fuzz targets, imported by tests only: the standard library only (internal/jsonscan/jsontest/doc.go)",
	},
	{
		pkg: "internal/quota",
		why: "the caps on what callers hold, shared by the HTTP and gRPC surfaces: the standard library only",
	},
	{
		pkg: "internal/progress",
		why: "connections whose writes must make progress, shared by the HTTP and gRPC surfaces: the standard library only",
	},
	{
		pkg: "internal/testcert",
		why: "throwaway TLS certificates for tests: the standard library only",
	},
	{
		pkg: "internal/lint",
		why: "this test: nothing",
	},
}

// everywhere are the modules any package may import. uuid: events.Event's
// ids are uuid.UUID, so whoever may read an envelope may name its id type
// (events/doc.go; testAggregatesPure keeps the gates from drawing
// new ones). x/sync: fan-out uses errgroup (STYLE.md, "Concurrency").
var everywhere = []string{"github.com/google/uuid", "golang.org/x/sync"}

// everywhereGreffe are the packages of the module any package may import:
// internal/config, the one shape of a configuration's error (STYLE.md,
// "One of each"), which imports the standard library only.
var everywhereGreffe = []string{"internal/config"}

// knownViolations are imports that no rule grants but the code makes
// today, each with what would remove it. The test fails on any other
// import no rule grants, and on an entry here that no longer happens
// (delete it then).
var knownViolations = []violation{}

// importedOnlyBy are the packages whose importers are named: raft is the
// node's (ARCHITECTURE.md, "replicator/: raft only"; issue #21: "nothing
// imports replicator but the node"). api reaches the cluster through its
// Cluster and Router interfaces, metrics through its Raft interface, and
// the bodies of the cluster routes are wire's, and the CLI's cluster
// certificates and ErrRemoved are named by node (node/clustercerts.go).
var importedOnlyBy = []struct {
	pkg string
	by  []string
	why string
}{
	{"replicator", []string{"node"}, "raft is wired by node only: define an interface where it is used, as api.Cluster, or name it in node (node/clustercerts.go: the CLI's cluster certificates and ErrRemoved)"},
}

// linksNot are what a package must not link, through any import: the
// edge links no store and no raft, and the client and the wire contract
// link none either, so that a program that only talks to a node does not
// carry a storage engine (issue #21). An entry is a package of the module
// (relative to it) or a third-party path, each with everything below it.
// What a package links today in spite of it is in knownLinks, with why.
var linksNot = []struct {
	pkg   string
	links []string
	why   string
}{
	{"api", []string{"events/pebblelog", "replicator", "client", "backup", "node", "github.com/hashicorp/raft", "github.com/cockroachdb/pebble/v2"},
		"api is the edge over interfaces: node hands it the store, the replicator and the backup taker (api/doc.go)"},
	{"api/kurrentgrpc", []string{"events/pebblelog", "replicator", "client", "github.com/hashicorp/raft", "github.com/cockroachdb/pebble/v2"},
		"the narrow edge: events and the caps it shares with the HTTP API (api/kurrentgrpc/doc.go)"},
	{"wire", []string{"events/pebblelog", "replicator", "github.com/hashicorp/raft", "github.com/cockroachdb/pebble/v2"},
		"the contract anything may import (wire/doc.go)"},
	{"client", []string{"api", "events/pebblelog", "replicator", "github.com/hashicorp/raft", "github.com/cockroachdb/pebble/v2"},
		"a client talks to a node over HTTP: wire and events only (client/client.go)"},
	{"audit", []string{"events/pebblelog", "client", "github.com/cockroachdb/pebble/v2"},
		"the auditor's core (replay, tree, checkpoints, proofs, trust state) with no storage engine and no source (ARCHITECTURE.md, audit/doc.go)"},
	{"audit/internal/verify", []string{"events/pebblelog", "client", "github.com/cockroachdb/pebble/v2"},
		"the auditor's core, its engine: no storage engine, no source (audit/internal/verify/doc.go)"},
	{"audit/online", []string{"events/pebblelog", "github.com/cockroachdb/pebble/v2"},
		"the auditor's online source asks a node over HTTP: a client program links no storage engine (audit/online/doc.go)"},
	{"client/verified", []string{"events/pebblelog", "github.com/cockroachdb/pebble/v2"},
		"a client program that verifies links no storage engine (ARCHITECTURE.md; as events/pebblelog once came in through audit)"},
	{"projections", []string{"events/pebblelog", "github.com/cockroachdb/pebble/v2"},
		"api reads the read models' types: the runner's storage is the Store it is handed (projections/pebblestore)"},
	{"export/...", []string{"events/pebblelog", "replicator", "api", "github.com/hashicorp/raft", "github.com/cockroachdb/pebble/v2"},
		"an exporter reads any events.Subscriber (export/doc.go)"},
}

// knownLinks are links linksNot forbids that the code makes today, each
// with what would remove it. The test fails on any other, and on an entry
// that no longer happens (delete it then).
var knownLinks = []violation{}

// netHTTPBelowAPI are the files below api allowed to import net/http:
// none, by ARCHITECTURE.md's "One error shape": below api, errors carry an
// events.Kind and only api (and the CLI) turn kinds into HTTP statuses. A
// file that must import it is listed here with why, and the test fails on
// any other file, and on a file here that no longer imports net/http.
var netHTTPBelowAPI = []string{}

// bannedNames are the package names STYLE.md forbids ("Naming"), and file
// names that say as little.
var bannedNames = []string{"util", "utils", "common", "helpers", "misc", "shared", "base", "types"}

// The pure core (ARCHITECTURE.md, "The core is pure"): aggregates read no
// clock, draw no randomness and do no I/O; time comes in the command
// (Inputs.At) and ids from the commands layer. impure are the packages of
// the standard library it must not import (the module rule already limits
// the rest to uuid and events), impureCalls the functions of time and uuid
// it must not call.
var (
	impure      = []string{"os", "net", "math/rand", "crypto/rand", "syscall", "io/ioutil", "unsafe", "log", "runtime", "plugin"}
	impureCalls = map[string][]string{
		"time":                   {"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker"},
		"github.com/google/uuid": {"New", "NewRandom", "NewString", "NewUUID", "NewV7", "Must"},
	}
)

// rawAtomicPrefixes start the names of sync/atomic's functions on raw
// integers and pointers (AddInt64, LoadUint32, CompareAndSwapPointer, …).
// STYLE.md, "Concurrency": typed atomics (atomic.Int64) only.
var rawAtomicPrefixes = []string{"Add", "And", "Or", "Load", "Store", "Swap", "CompareAndSwap"}

type rule struct {
	// pkg is the package ("events") or folder ("events/pebblelog/...") the
	// rule is for, relative to the module.
	pkg string
	// greffe are the packages of the module pkg may import, in the same
	// notation; "..." is all of them. except removes some of those.
	greffe, except []string
	// modules are the third-party import paths pkg may import, each with
	// everything below it; "..." is all of them. The standard library and
	// everywhere are always allowed.
	modules []string
	// belowAPI marks what api builds on: it must not import net/http.
	belowAPI bool
	why      string
}

type violation struct {
	// pkg imports imp or a package below it.
	pkg, imp, why string
}

// pkg is what go list says of one package.
type pkg struct {
	ImportPath   string
	Name         string
	Dir          string
	Standard     bool
	DepOnly      bool
	Module       *struct{ Path string }
	Imports      []string
	Deps         []string
	GoFiles      []string
	CgoFiles     []string
	TestGoFiles  []string
	XTestGoFiles []string
	Error        *struct{ Err string }
}

// module is the module's packages, as go list reads them.
type module struct {
	path     string          // the module path
	pkgs     []*pkg          // the module's packages, in go list's order
	standard map[string]bool // import paths of the standard library
	// imports are the imports of every package outside the standard
	// library, the module's and its dependencies', by import path.
	imports map[string][]string
}

// rel returns p relative to the module ("events/pebblelog"), or "" for a
// path outside it.
func (m *module) rel(p string) (string, bool) {
	if p == m.path {
		return ".", true
	}
	r, ok := strings.CutPrefix(p, m.path+"/")
	return r, ok
}

// load lists every package of the module and its dependencies with
// `go list -deps -json ./...`, as Pebble's lint lists its packages with
// the go command rather than a loader library.
func load(t *testing.T) *module {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("lint: the go command is not on PATH; these checks read the module with `go list`")
	}
	// The module root: the test runs in internal/lint.
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			t.Fatal("no go.mod above the test's folder")
		}
		root = parent
	}
	cmd := exec.Command(goCmd, "list", "-deps", "-json", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps -json ./...: %v\n%s", err, stderr.Bytes())
	}
	m := &module{standard: map[string]bool{}, imports: map[string][]string{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(pkg)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		switch {
		case p.Error != nil:
			t.Fatalf("go list: %s: %s", p.ImportPath, p.Error.Err)
		case p.Standard:
			m.standard[p.ImportPath] = true
		default:
			m.imports[p.ImportPath] = p.Imports
			if p.DepOnly {
				break
			}
			m.pkgs = append(m.pkgs, p)
			if m.path == "" && p.Module != nil {
				m.path = p.Module.Path
			}
		}
	}
	if len(m.pkgs) == 0 || m.path == "" {
		t.Fatal("go list found no package of the module")
	}
	return m
}

// matches reports whether the relative package path p is pattern, or
// below it for a pattern ending in "/...".
func matches(pattern, p string) bool {
	if pattern == "..." {
		return true
	}
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == dir || strings.HasPrefix(p, dir+"/")
	}
	return p == pattern
}

// under reports whether import path p is prefix or below it.
func under(prefix, p string) bool {
	return prefix == "..." || p == prefix || strings.HasPrefix(p, prefix+"/")
}

// ruleFor returns the most specific rule of the relative package path p:
// the exact one, else the longest folder.
func ruleFor(p string) (rule, bool) {
	best, found := rule{}, false
	for _, r := range rules {
		if !matches(r.pkg, p) {
			continue
		}
		if r.pkg == p {
			return r, true
		}
		if !found || len(r.pkg) > len(best.pkg) {
			best, found = r, true
		}
	}
	return best, found
}

// allowsGreffe reports whether r lets its package import imp, a package
// of the module (relative to it).
func (r rule) allowsGreffe(imp string) bool {
	if slices.Contains(everywhereGreffe, imp) {
		return true
	}
	ok := slices.ContainsFunc(r.greffe, func(g string) bool { return matches(g, imp) })
	return ok && !slices.ContainsFunc(r.except, func(g string) bool { return matches(g, imp) })
}

// allowsModule reports whether r lets its package import imp, a
// third-party package.
func (r rule) allowsModule(imp string) bool {
	return slices.ContainsFunc(r.modules, func(m string) bool { return under(m, imp) }) ||
		slices.ContainsFunc(everywhere, func(m string) bool { return under(m, imp) })
}

// TestLint runs the house rules over every package of the module.
func TestLint(t *testing.T) {
	m := load(t)
	t.Run("Imports", func(t *testing.T) { testImports(t, m) })
	t.Run("ImportedOnlyBy", func(t *testing.T) { testImportedOnlyBy(t, m) })
	t.Run("LinksNot", func(t *testing.T) { testLinksNot(t, m) })
	t.Run("NetHTTPBelowAPI", func(t *testing.T) { testNetHTTPBelowAPI(t, m) })
	t.Run("AggregatesPure", func(t *testing.T) { testAggregatesPure(t, m) })
	t.Run("Names", func(t *testing.T) { testNames(t, m) })
	t.Run("RawAtomics", func(t *testing.T) { testRawAtomics(t, m) })
}

// testImports checks every package's imports against its rule.
func testImports(t *testing.T, m *module) {
	used := map[string]bool{}
	seen := map[violation]bool{}
	for _, p := range m.pkgs {
		rel, _ := m.rel(p.ImportPath)
		r, ok := ruleFor(rel)
		if !ok {
			t.Errorf("%s has no rule: add one to rules, with its reason (ARCHITECTURE.md, its doc.go)", rel)
			continue
		}
		used[r.pkg] = true
		for _, imp := range p.Imports {
			if m.standard[imp] || imp == "C" {
				continue
			}
			var allowed bool
			if irel, ok := m.rel(imp); ok {
				allowed = r.allowsGreffe(irel)
			} else {
				allowed = r.allowsModule(imp)
			}
			if allowed {
				continue
			}
			if i := slices.IndexFunc(knownViolations, func(v violation) bool { return v.pkg == rel && under(v.imp, imp) }); i >= 0 {
				seen[knownViolations[i]] = true
				continue
			}
			t.Errorf("%s imports %s, which its rule (%s) does not allow: %s", rel, imp, r.pkg, r.why)
		}
	}
	for _, r := range rules {
		if !used[r.pkg] {
			t.Errorf("the rule for %s matches no package: delete it", r.pkg)
		}
	}
	for _, v := range knownViolations {
		if !seen[v] {
			t.Errorf("known violation %s -> %s no longer happens: delete it from knownViolations", v.pkg, v.imp)
		}
	}
}

// testImportedOnlyBy checks that the packages of importedOnlyBy are
// imported by the packages they name only.
func testImportedOnlyBy(t *testing.T, m *module) {
	for _, r := range importedOnlyBy {
		found := false
		for _, p := range m.pkgs {
			rel, _ := m.rel(p.ImportPath)
			if rel == r.pkg {
				found = true
			}
			for _, imp := range p.Imports {
				if irel, ok := m.rel(imp); !ok || irel != r.pkg {
					continue
				}
				if !slices.ContainsFunc(r.by, func(b string) bool { return matches(b, rel) }) {
					t.Errorf("%s imports %s, which only %s may import: %s", rel, r.pkg, strings.Join(r.by, ", "), r.why)
				}
			}
		}
		if !found {
			t.Errorf("importedOnlyBy names %s, which is not a package of the module: delete it", r.pkg)
		}
	}
}

// testLinksNot checks every package against linksNot, through its
// dependencies (go list's Deps: everything it links).
func testLinksNot(t *testing.T, m *module) {
	seen := map[violation]bool{}
	used := map[string]bool{}
	for _, p := range m.pkgs {
		rel, _ := m.rel(p.ImportPath)
		for _, r := range linksNot {
			if !matches(r.pkg, rel) {
				continue
			}
			used[r.pkg] = true
			for _, l := range r.links {
				full := l
				if !strings.Contains(strings.SplitN(l, "/", 2)[0], ".") {
					full = m.path + "/" + l // a package of the module
				}
				if !slices.ContainsFunc(p.Deps, func(d string) bool { return under(full, d) }) {
					continue
				}
				if i := slices.IndexFunc(knownLinks, func(v violation) bool { return v.pkg == rel && v.imp == l }); i >= 0 {
					seen[knownLinks[i]] = true
					continue
				}
				chain := m.pathTo(p.ImportPath, func(imp string) bool { return under(full, imp) })
				t.Errorf("%s links %s (%s), which it must not, even through another package: %s", rel, l, strings.Join(chain, " -> "), r.why)
			}
		}
	}
	for _, r := range linksNot {
		if !used[r.pkg] {
			t.Errorf("linksNot names %s, which matches no package: delete it", r.pkg)
		}
	}
	for _, v := range knownLinks {
		if !seen[v] {
			t.Errorf("known link %s -> %s no longer happens: delete it from knownLinks", v.pkg, v.imp)
		}
	}
}

// pathTo returns the shortest import chain from the package from to one
// that match accepts (both included), or nil when none is reached.
func (m *module) pathTo(from string, match func(string) bool) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if match(cur) {
			var chain []string
			for p := cur; p != ""; p = prev[p] {
				chain = append(chain, p)
			}
			slices.Reverse(chain)
			return chain
		}
		for _, imp := range m.imports[cur] {
			if _, seen := prev[imp]; !seen && !m.standard[imp] {
				prev[imp] = cur
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

// parse parses the named files of p, only up to their imports when
// importsOnly. Positions name the files relative to the module root.
func parse(t *testing.T, m *module, fset *token.FileSet, p *pkg, names []string, importsOnly bool) map[string]*ast.File {
	t.Helper()
	mode := parser.SkipObjectResolution
	if importsOnly {
		mode |= parser.ImportsOnly
	}
	rel, _ := m.rel(p.ImportPath)
	out := map[string]*ast.File{}
	for _, n := range names {
		src, err := os.ReadFile(filepath.Join(p.Dir, n))
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, path.Join(rel, n), src, mode)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = f
	}
	return out
}

// localName returns the name under which f imports importPath (its last
// element, or the name it is given), or "" when it does not.
func localName(f *ast.File, importPath string) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == importPath {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return path.Base(p)
		}
	}
	return ""
}

// testNetHTTPBelowAPI checks that no file of a package below api imports
// net/http, but those of netHTTPBelowAPI.
func testNetHTTPBelowAPI(t *testing.T, m *module) {
	fset := token.NewFileSet()
	found := map[string]bool{}
	for _, p := range m.pkgs {
		rel, _ := m.rel(p.ImportPath)
		if r, ok := ruleFor(rel); !ok || !r.belowAPI {
			continue
		}
		for name, f := range parse(t, m, fset, p, slices.Concat(p.GoFiles, p.CgoFiles), true) {
			if localName(f, "net/http") == "" {
				continue
			}
			file := path.Join(rel, name)
			if slices.Contains(netHTTPBelowAPI, file) {
				found[file] = true
				continue
			}
			t.Errorf("%s imports net/http: nothing below api does (ARCHITECTURE.md, \"One error shape\"); "+
				"return an error with a code and a kind, and let api choose the status", file)
		}
	}
	for _, file := range netHTTPBelowAPI {
		if !found[file] {
			t.Errorf("%s no longer imports net/http: delete it from netHTTPBelowAPI", file)
		}
	}
}

// testAggregatesPure checks that no file of aggregates imports I/O,
// randomness or the process (impure), or reads the clock or draws an id
// (impureCalls), whatever name it imports time and uuid under.
func testAggregatesPure(t *testing.T, m *module) {
	fset := token.NewFileSet()
	checked := false
	for _, p := range m.pkgs {
		if rel, _ := m.rel(p.ImportPath); rel != "aggregates" {
			continue
		}
		checked = true
		for name, f := range parse(t, m, fset, p, p.GoFiles, false) {
			for _, imp := range f.Imports {
				ip, _ := strconv.Unquote(imp.Path.Value)
				if slices.ContainsFunc(impure, func(b string) bool { return under(b, ip) }) {
					t.Errorf("aggregates/%s imports %s: the gates do no I/O, read no clock and draw no randomness", name, ip)
				}
			}
			for ip, calls := range impureCalls {
				local := localName(f, ip)
				if local == "" {
					continue
				}
				ast.Inspect(f, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok {
						if id, ok := sel.X.(*ast.Ident); ok && id.Name == local && slices.Contains(calls, sel.Sel.Name) {
							t.Errorf("%s: %s.%s in aggregates: time comes in the command (Inputs.At) and ids from the commands layer, never from the clock or randomness",
								fset.Position(sel.Pos()), path.Base(ip), sel.Sel.Name)
						}
					}
					return true
				})
			}
		}
	}
	if !checked {
		t.Error("no package aggregates: update this check")
	}
}

// testNames checks package, folder and file names against bannedNames.
func testNames(t *testing.T, m *module) {
	for _, p := range m.pkgs {
		rel, _ := m.rel(p.ImportPath)
		if slices.Contains(bannedNames, p.Name) || slices.Contains(bannedNames, path.Base(rel)) {
			t.Errorf("package %s (%s): name packages for what they hold (STYLE.md, \"Naming\")", p.Name, rel)
		}
		for _, n := range slices.Concat(p.GoFiles, p.CgoFiles, p.TestGoFiles, p.XTestGoFiles) {
			base := strings.TrimSuffix(strings.TrimSuffix(n, ".go"), "_test")
			if slices.Contains(bannedNames, base) {
				t.Errorf("%s: name files for what they hold (STYLE.md, \"Naming\")", path.Join(rel, n))
			}
		}
	}
}

// testRawAtomics checks that no file calls sync/atomic's functions on raw
// values.
func testRawAtomics(t *testing.T, m *module) {
	fset := token.NewFileSet()
	for _, p := range m.pkgs {
		for _, f := range parse(t, m, fset, p, slices.Concat(p.GoFiles, p.CgoFiles, p.TestGoFiles, p.XTestGoFiles), false) {
			a := localName(f, "sync/atomic")
			if a == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == a &&
					slices.ContainsFunc(rawAtomicPrefixes, func(pre string) bool { return strings.HasPrefix(sel.Sel.Name, pre) }) {
					t.Errorf("%s: atomic.%s: use a typed atomic (atomic.Int64, atomic.Pointer…) (STYLE.md, \"Concurrency\")",
						fset.Position(sel.Pos()), sel.Sel.Name)
				}
				return true
			})
		}
	}
}
