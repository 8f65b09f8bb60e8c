package executor_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/executor"
)

// Issue #20, finding 7: a writer was a root shell on every GPU host. These
// tests send the attacker's requests through HTTP to a real node and let
// a real executor follow them.

const refusedByHost = "refused_by_host"

// countingListener is a loopback TCP listener that reports the peer of
// every connection it accepts: the proof that a probe never reached it.
type countingListener struct {
	ln    net.Listener
	peers chan string // the remote address of each accepted connection, in order
}

func listenCounting(t *testing.T) *countingListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &countingListener{ln: ln, peers: make(chan string, 64)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.peers <- c.RemoteAddr().String()
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return l
}

// reachedBy returns how many connections reached the listener before the
// test's own sentinel connection: accepts are in order, so once the
// sentinel's peer address comes out every earlier connection has been
// counted.
func (l *countingListener) reachedBy(t *testing.T) int {
	t.Helper()
	c, err := net.Dial("tcp", l.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sentinel := c.LocalAddr().String()
	deadline := time.After(waitFor)
	for n := 0; ; n++ {
		select {
		case p := <-l.peers:
			if p == sentinel {
				return n
			}
		case <-deadline:
			t.Fatal("the sentinel connection was never accepted")
		}
	}
}

func (l *countingListener) port() string {
	_, p, _ := net.SplitHostPort(l.ln.Addr().String())
	return p
}

// TestHostPolicy_Runs: a writer requests `/bin/sh -c id` on a GPU host
// (the finding: it ran, as root, and its output was readable by every
// reader). The executor must not run it (the marker file the command
// would create never appears) and its signed result says the host's
// policy refused it; templates of the policy still run; an executor
// running as root runs nothing without allow_root_runs. The policy
// ignores approvals, so that a refusal is answered at once (with
// approvals honoured it waits unclaimed: TestApprovals_*).
func TestHostPolicy_Runs(t *testing.T) {
	h := newHarness(t, nil, "present")
	key := h.register("gpu1")
	h.policy.IgnoreApprovals = true
	touched := filepath.Join(t.TempDir(), "touched")
	h.policy.Runs = append(h.policy.Runs,
		executor.RunTemplate{Name: "touch", Argv: []executor.ArgPattern{executor.Lit("touch"), executor.OneOfArg(touched)}},
		executor.RunTemplate{Name: "echo-n", Argv: []executor.ArgPattern{executor.Lit("echo"), executor.Lit("n"), executor.IntArg(1, 100)}})
	h.start(h.config("gpu1", key))
	marker := filepath.Join(t.TempDir(), "pwned")
	cases := []struct {
		name   string
		argv   []string
		code   string // "" when it runs
		stdout string
	}{
		{"a shell, not in the policy", []string{"/bin/sh", "-c", "id > " + marker + "; id"}, executor.CodeRunNotAllowed, ""},
		{"a template's program with another argument", []string{"touch", marker}, executor.CodeRunNotAllowed, ""},
		{"an int placeholder out of its range", []string{"echo", "n", "101"}, executor.CodeRunNotAllowed, ""},
		{"an int placeholder with a shell's suffix", []string{"echo", "n", "1; id"}, executor.CodeRunNotAllowed, ""},
		{"an allowed template", []string{"echo", "n", "42"}, "", "n 42\n"},
		{"an allowed one_of", []string{"touch", touched}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := h.result(h.request(aggregates.RequestMeasurement{Argv: tc.argv}), key)
			if tc.code == "" {
				if r.Outcome != aggregates.ResultExited || r.ExitCode != 0 || r.StdoutExcerpt != tc.stdout {
					t.Fatalf("got %s %d %q %q", r.Outcome, r.ExitCode, r.StdoutExcerpt, r.Error)
				}
				return
			}
			got := []any{r.Outcome, strings.HasPrefix(r.Error, tc.code+": "), strings.HasSuffix(r.Error, "(host policy: runs)"), r.ExitCode, r.StdoutExcerpt, r.StdoutSHA256, r.Before == nil, r.After == nil}
			if diff := cmp.Diff([]any{refusedByHost, true, true, -1, "", "", true, true}, got); diff != "" {
				t.Errorf("refused result %q (-want +got):\n%s", r.Error, diff)
			}
			if diff := cmp.Diff([]string{aggregates.TypeMeasurementRequested, aggregates.TypeMeasurementClaimed, aggregates.TypeMeasurementRecorded},
				h.stream(aggregates.MeasurementStream(r.MeasurementID))); diff != "" {
				t.Errorf("the request ends, recorded (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("a refused command ran: %s exists", marker)
	}
	if _, err := os.Stat(touched); err != nil {
		t.Errorf("the allowed template did not run: %v", err)
	}

	t.Run("root without allow_root_runs", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("the tests do not run as root here (TestHostPolicy_CheckRun plays root)")
		}
		h := newHarness(t, nil, "present")
		key := h.register("gpu1")
		h.policy.AllowRootRuns, h.policy.IgnoreApprovals = false, false
		// No approval covers root: refused at once, approvals honoured or
		// not.
		h.start(h.config("gpu1", key))
		r := h.result(h.request(aggregates.RequestMeasurement{Argv: []string{"true"}}), key)
		if r.Outcome != refusedByHost || !strings.HasPrefix(r.Error, executor.CodeRootRunNotAllowed+": ") {
			t.Fatalf("got %s %q", r.Outcome, r.Error)
		}
	})
}

// TestHostPolicy_Hashes: a hash of a path outside hash_paths (a writer's
// way to learn the digest of any file, or to record any file as a model's
// weights) and of one through a symlink that leads outside are refused;
// nothing of them becomes an ArtifactHashed. A path under hash_paths is
// hashed. Approvals are ignored: refusals are answered at once.
func TestHostPolicy_Hashes(t *testing.T) {
	h := newHarness(t, nil, "present")
	key := h.register("gpu1")
	h.policy.IgnoreApprovals = true
	models, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "shadow")
	weights := filepath.Join(models, "w.gguf")
	for _, p := range []string{secret, weights} {
		if err := os.WriteFile(p, []byte("root:$6$secret"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	escape := filepath.Join(models, "shadow.gguf")
	if err := os.Symlink(secret, escape); err != nil {
		t.Fatal(err)
	}
	h.policy.HashPaths = []string{models}
	h.start(h.config("gpu1", key))
	cases := []struct {
		name, binding string
		argv          []string
		refusedAt     int // -1: hashed
	}{
		{"a path outside hash_paths", "b-out", []string{"config=" + secret}, 0},
		{"a symlink under hash_paths leading outside", "b-link", []string{"weights=" + weights, "config=" + escape}, 1},
		{"a path with ..", "b-dots", []string{"config=" + models + "/../" + filepath.Base(outside) + "/shadow"}, 0},
		{"a path under hash_paths", "b-in", []string{"weights=" + weights}, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := h.request(aggregates.RequestMeasurement{Kind: aggregates.MeasurementHash, BindingID: aggregates.OptionalID(tc.binding), Argv: tc.argv})
			r := h.result(id, key)
			if tc.refusedAt < 0 {
				if r.Outcome != aggregates.ResultCompleted || len(r.Artifacts) != 1 || r.Artifacts[0].SHA256 == "" {
					t.Fatalf("got %s %+v", r.Outcome, r.Artifacts)
				}
				h.waitEvent(aggregates.BindingStream(tc.binding), aggregates.TypeArtifactHashed, nil)
				return
			}
			if r.Outcome != refusedByHost || !strings.HasPrefix(r.Error, executor.CodeHashPathNotAllowed+": ") || len(r.Artifacts) != len(tc.argv) {
				t.Fatalf("got %s %q %+v", r.Outcome, r.Error, r.Artifacts)
			}
			for i, a := range r.Artifacts {
				if a.SHA256 != "" || a.Size != 0 || (i == tc.refusedAt) != strings.HasPrefix(a.Error, executor.CodeHashPathNotAllowed+": ") {
					t.Errorf("artifact %d: %+v", i, a)
				}
			}
			if got := h.stream(aggregates.BindingStream(tc.binding)); len(got) != 0 {
				t.Errorf("a refused hash wrote to its binding: %v", got)
			}
		})
	}
}

// TestHostPolicy_ProbeTargets: probes of the cloud metadata address, of a
// loopback address the policy does not allow, of 0.0.0.0 (which reaches
// loopback on Linux), of a host not in probe_hosts, and of a name a DNS
// server answers with 127.0.0.1 are all refused before any connection:
// the loopback listener they name is never reached. The provider's probe
// is recorded refused (readiness: probe_refused), never failed nor ok.
// Approvals are ignored: refusals are answered at once.
func TestHostPolicy_ProbeTargets(t *testing.T) {
	h := newHarness(t, nil, "present")
	key := h.register("gpu1")
	l := listenCounting(t)
	port := l.port()
	cfg := h.config("gpu1", key)
	cfg.Policy = executor.HostPolicy{
		ProbeHosts: []string{"169.254.169.254", "metadata.google.internal", "127.0.0.1:" + port, "0.0.0.0:" + port, "rebind.test:" + port, "[::ffff:127.0.0.1]:" + port},
		// Link-local is allowed, to show that the metadata service is a
		// class of its own.
		AllowLinkLocalProbeTargets: true,
		IgnoreApprovals:            true,
	}
	cfg.Policy.ProbeHosts = append(cfg.Policy.ProbeHosts, "mixed.test:"+port)
	cfg.Resolver = fakeDNS(t, map[string]string{"rebind.test": "127.0.0.1", "mixed.test": "192.0.2.1,127.0.0.1"})
	h.start(cfg)
	cases := []struct{ name, endpoint, code, rule string }{
		{"cloud metadata", "http://169.254.169.254/latest/meta-data", executor.CodeProbeAddressNotAllowed, "allow_metadata_probe_targets"},
		{"cloud metadata by name", "http://metadata.google.internal/computeMetadata/v1", executor.CodeProbeAddressNotAllowed, "allow_metadata_probe_targets"},
		{"loopback", "http://127.0.0.1:" + port + "/v1", executor.CodeProbeAddressNotAllowed, "allow_loopback_probe_targets"},
		{"loopback mapped in IPv6", "http://[::ffff:127.0.0.1]:" + port + "/v1", executor.CodeProbeAddressNotAllowed, "allow_loopback_probe_targets"},
		{"0.0.0.0", "http://0.0.0.0:" + port + "/v1", executor.CodeProbeAddressNotAllowed, "probe_targets"},
		{"a host not in probe_hosts", "http://127.0.0.2:" + port + "/v1", executor.CodeProbeHostNotAllowed, "probe_hosts"},
		{"a name resolving to loopback", "http://rebind.test:" + port + "/v1", executor.CodeProbeAddressNotAllowed, "allow_loopback_probe_targets"},
		// One forbidden address refuses the whole answer: the public one
		// (TEST-NET-1, which would time out) is not dialled either.
		{"a name resolving to a public and a loopback address", "http://mixed.test:" + port + "/v1", executor.CodeProbeAddressNotAllowed, "allow_loopback_probe_targets"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			provider := "p" + string(rune('a'+i))
			h.declare(provider, tc.endpoint, tag)
			id := h.request(aggregates.RequestMeasurement{Kind: aggregates.MeasurementProbe, Provider: aggregates.OptionalID(provider),
				Argv: []string{aggregates.ProbeModels, tc.endpoint}, Timeout: aggregates.PositiveDuration(aggregates.D(2 * time.Second))})
			r := h.result(id, key)
			want := tc.code + ": "
			if r.Outcome != refusedByHost || r.Probe == nil || r.Probe.Outcome != aggregates.ProbeRefused || r.Probe.HTTPStatus != 0 ||
				!strings.HasPrefix(r.Error, want) || !strings.HasSuffix(r.Error, "(host policy: "+tc.rule+")") || r.Probe.Error != r.Error {
				t.Fatalf("got outcome %q, error %q, probe %+v; want %s (%s, rule %s)", r.Outcome, r.Error, r.Probe, refusedByHost, tc.code, tc.rule)
			}
			// The provider's probe is recorded refused, never ok, and
			// readiness tells it from a runtime's failure.
			e := h.waitEvent(aggregates.ProviderStream(provider), aggregates.TypeProbeRecorded, nil)
			var d aggregates.ProbeRecorded
			if err := json.Unmarshal(e.Data, &d); err != nil || d.Outcome != aggregates.ProbeRefused || d.ExactTagListed || d.Models != nil {
				t.Errorf("ProbeRecorded %+v %v", d, err)
			}
			if st := h.liveState(provider, e.Position+1); st != aggregates.StateProbeRefused {
				t.Errorf("readiness live_proven state %q, want %s", st, aggregates.StateProbeRefused)
			}
		})
	}
	if n := l.reachedBy(t); n != 0 {
		t.Errorf("%d probe connections reached the loopback listener", n)
	}
}

// TestHostPolicy_ProbeThroughDNS: the positive case of the same path: a
// name the policy lists, resolved by the DNS server to a loopback address
// the policy allows, is probed, and lists its tag.
func TestHostPolicy_ProbeThroughDNS(t *testing.T) {
	h := newHarness(t, nil, "present")
	key := h.register("gpu1")
	endpoint := stubRuntime(t, answer{200, `{"object":"list","data":[{"id":"qwen3-coder:30b"}]}`}, answer{})
	_, port, _ := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(endpoint, "http://"), "/v1"))
	endpoint = "http://runtime.test:" + port + "/v1"
	cfg := h.config("gpu1", key)
	cfg.Policy = executor.HostPolicy{ProbeHosts: []string{"runtime.test:" + port}, AllowLoopbackProbeTargets: true}
	cfg.Resolver = fakeDNS(t, map[string]string{"runtime.test": "127.0.0.1"})
	h.start(cfg)
	h.declare("dns", endpoint, tag)
	r := h.result(h.request(aggregates.RequestMeasurement{Kind: aggregates.MeasurementProbe, Provider: "dns",
		Argv: []string{aggregates.ProbeModels, endpoint}, Timeout: aggregates.PositiveDuration(aggregates.D(2 * time.Second))}), key)
	if r.Outcome != aggregates.ResultCompleted || r.Probe == nil || r.Probe.Outcome != aggregates.ProbeOK || !slices.Equal(r.Probe.Models, []string{tag}) {
		t.Fatalf("got %s %q %+v", r.Outcome, r.Error, r.Probe)
	}
}

// fakeDNS is a DNS server on 127.0.0.1 (UDP) answering A queries for the
// names of answers (comma-separated IPv4 addresses), NXDOMAIN for any
// other name and no AAAA record; it returns a resolver that asks only it.
func fakeDNS(t *testing.T, answers map[string]string) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if resp := dnsAnswer(buf[:n], answers); resp != nil {
				_, _ = pc.WriteTo(resp, from)
			}
		}
	}()
	t.Cleanup(func() { pc.Close(); <-done })
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// dnsAnswer answers one query (RFC 1035 §4.1): the question copied, one A
// record for a known name asked for A, nothing for AAAA, NXDOMAIN for an
// unknown name. Additional records of the query (EDNS) are not echoed.
func dnsAnswer(q []byte, answers map[string]string) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	i, labels := 12, []string{}
	for i < len(q) && q[i] != 0 {
		n := int(q[i])
		if i+1+n > len(q) {
			return nil
		}
		labels = append(labels, string(q[i+1:i+1+n]))
		i += 1 + n
	}
	if i+5 > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i+1 : i+3])
	question := q[12 : i+5]
	addr, known := answers[strings.ToLower(strings.Join(labels, "."))]
	resp := append([]byte(nil), q[0:2]...)
	flags := uint16(0x8180) // a response, recursion desired and available
	if !known {
		flags |= 3 // NXDOMAIN
	}
	var ips []net.IP
	for _, a := range strings.Split(addr, ",") {
		if ip := net.ParseIP(a).To4(); known && qtype == 1 && ip != nil {
			ips = append(ips, ip)
		}
	}
	resp = binary.BigEndian.AppendUint16(resp, flags)
	resp = binary.BigEndian.AppendUint16(resp, 1)
	resp = binary.BigEndian.AppendUint16(resp, uint16(len(ips)))
	resp = append(resp, 0, 0, 0, 0)
	resp = append(resp, question...)
	for _, ip := range ips {
		resp = append(resp, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
		resp = append(resp, ip...)
	}
	return resp
}

// TestHostPolicy_ProbeRecordsNoBody: a probe target that answers with a
// secret in its body (in a 500, in fields the protocol does not define,
// in a finish reason, in an answer that is not JSON, in a refused
// completion): the secret never reaches the ledger, while the status and
// the listed model tags do. (Before the fix a 500's and a refused
// completion's bodies, and any finish reason, were recorded verbatim.)
func TestHostPolicy_ProbeRecordsNoBody(t *testing.T) {
	const secret = "AKIAIOSFODNN7SECRETVALUE"
	h := newHarness(t, nil, "present")
	key := h.register("gpu1")
	h.start(h.config("gpu1", key))
	cases := []struct {
		name, kind string
		models     answer
		chat       answer
	}{
		{"a 500 whose body holds the secret", aggregates.ProbeModels, answer{500, `{"error":"` + secret + `"}`}, answer{}},
		{"fields the protocol does not define", aggregates.ProbeModels,
			answer{200, `{"object":"` + secret + `","data":[{"id":"qwen3-coder:30b","owned_by":"` + secret + `"}],"secret":"` + secret + `"}`}, answer{}},
		{"an answer that is not JSON", aggregates.ProbeModels, answer{200, secret + `{"data":[]}`}, answer{}},
		{"a smoke finish reason", aggregates.ProbeSmoke, answer{200, `{"data":[{"id":"qwen3-coder:30b"}]}`},
			answer{200, `{"choices":[{"index":0,"message":{"content":"` + secret + `"},"finish_reason":"` + secret + `"}]}`}},
		{"a smoke completion refused with the secret", aggregates.ProbeSmoke, answer{200, `{"data":[{"id":"qwen3-coder:30b"}]}`},
			answer{400, secret}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			endpoint := stubRuntime(t, tc.models, tc.chat)
			provider := "s" + string(rune('a'+i))
			h.declare(provider, endpoint, tag)
			argv := []string{tc.kind, endpoint}
			if tc.kind == aggregates.ProbeSmoke {
				argv = append(argv, tag)
			}
			id := h.request(aggregates.RequestMeasurement{Kind: aggregates.MeasurementProbe, Provider: aggregates.OptionalID(provider), Argv: argv, Timeout: aggregates.PositiveDuration(aggregates.D(2 * time.Second))})
			r := h.result(id, key)
			want := tc.models.status
			if tc.kind == aggregates.ProbeSmoke {
				want = tc.chat.status
			}
			if r.Probe == nil || r.Probe.HTTPStatus != want {
				t.Fatalf("probe reading %+v, want HTTP status %d", r.Probe, want)
			}
			// The protocol's own data is kept: the listed tags (what
			// live_proven is judged on).
			if tc.models.status == 200 && strings.Contains(tc.models.body, `"id":"qwen3-coder:30b"`) && !slices.Equal(r.Probe.Models, []string{tag}) {
				t.Errorf("models %q, want [%s]", r.Probe.Models, tag)
			}
		})
	}
	h.noSecretInLedger(secret)
}

// answer is a stand-in runtime's answer: a status and a body.
type answer struct {
	status int
	body   string
}

// stubRuntime is an OpenAI-compatible stand-in on 127.0.0.1 answering
// /v1/models with models and /v1/chat/completions with chat; it returns
// its ".../v1" base.
func stubRuntime(t *testing.T, models, chat answer) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := answer{http.StatusNotFound, "not found"}
		switch r.URL.Path {
		case "/v1/models":
			a = models
		case "/v1/chat/completions":
			a = chat
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// noSecretInLedger reads the whole log and fails on any event holding
// secret.
func (h *harness) noSecretInLedger(secret string) {
	h.t.Helper()
	var from uint64
	for {
		page, err := h.c.ReadAll(h.t.Context(), events.ReadOptions{From: from, Limit: 500})
		if err != nil {
			h.t.Fatal(err)
		}
		for _, e := range page.Events {
			b, err := json.Marshal(e)
			if err != nil {
				h.t.Fatal(err)
			}
			if strings.Contains(string(b), secret) {
				h.t.Errorf("the secret reached the ledger at position %d (%s on %s): %s", e.Position, e.Type, e.Stream, b)
			}
		}
		if page.Next == nil {
			return
		}
		from = *page.Next
	}
}
