package executor

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/aggregates"
)

// The host policy's rules, one function at a time; the attacks through a
// real node are in hostpolicy_test.go.

const testPolicy = `{
  "runs": [
    {"name": "bench", "argv": ["/usr/bin/python3", "/opt/bench/matmul.py", "--n", {"int": {"min": 1, "max": 65536}}]},
    {"name": "smi", "argv": ["nvidia-smi", {"one_of": ["-q", "-L"]}]},
    {"argv": ["true"]}
  ],
  "hash_paths": ["/models"],
  "probe_hosts": ["127.0.0.1:11434", "Runtime.LAN", "[::1]:8080", "10.0.0.7"],
  "allow_loopback_probe_targets": true
}`

func mustPolicy(t *testing.T, s string) *HostPolicy {
	t.Helper()
	p, err := ParseHostPolicy([]byte(s), "test")
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

func TestHostPolicy_CheckRun(t *testing.T) {
	p := mustPolicy(t, testPolicy)
	cases := []struct {
		name     string
		argv     []string
		approved bool
		euid     int
		want     string // the template that allowed it, or the refusal's code
	}{
		{"a literal template", []string{"true"}, false, 1000, "runs[2]"},
		{"an int in range", []string{"/usr/bin/python3", "/opt/bench/matmul.py", "--n", "8192"}, false, 1000, "bench"},
		{"an int out of range", []string{"/usr/bin/python3", "/opt/bench/matmul.py", "--n", "65537"}, false, 1000, CodeRunNotAllowed},
		{"an int not canonical", []string{"/usr/bin/python3", "/opt/bench/matmul.py", "--n", "+8192"}, false, 1000, CodeRunNotAllowed},
		{"an int with a leading zero", []string{"/usr/bin/python3", "/opt/bench/matmul.py", "--n", "08192"}, false, 1000, CodeRunNotAllowed},
		{"not an int", []string{"/usr/bin/python3", "/opt/bench/matmul.py", "--n", "8192; id"}, false, 1000, CodeRunNotAllowed},
		{"one of the list", []string{"nvidia-smi", "-L"}, false, 1000, "smi"},
		{"not one of the list", []string{"nvidia-smi", "--gpu-reset"}, false, 1000, CodeRunNotAllowed},
		{"one entry more", []string{"nvidia-smi", "-q", "-x"}, false, 1000, CodeRunNotAllowed},
		{"another program path", []string{"/usr/local/bin/nvidia-smi", "-q"}, false, 1000, CodeRunNotAllowed},
		{"a shell", []string{"/bin/sh", "-c", "id"}, false, 1000, CodeRunNotAllowed},
		{"an approval covers what no template does", []string{"/bin/sh", "-c", "id"}, true, 1000, "approved"},
		{"root without allow_root_runs", []string{"true"}, false, 0, CodeRootRunNotAllowed},
		{"root, even approved", []string{"true"}, true, 0, CodeRootRunNotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			by, ref := p.checkRun(tc.argv, tc.approved, tc.euid)
			got := by
			if ref != nil {
				got = ref.Code
			}
			if got != tc.want {
				t.Fatalf("got %q (%v), want %q", got, ref, tc.want)
			}
		})
	}
	root := *p
	root.AllowRootRuns = true
	if by, ref := root.checkRun([]string{"true"}, false, 0); ref != nil || by != "runs[2]" {
		t.Errorf("allow_root_runs: %q %v", by, ref)
	}
	ignoring := *p
	ignoring.IgnoreApprovals = true
	if _, ref := ignoring.checkRun([]string{"/bin/sh", "-c", "id"}, true, 1000); ref == nil || ref.Code != CodeRunNotAllowed {
		t.Errorf("ignore_approvals: %v", ref)
	}
}

func TestClassify(t *testing.T) {
	cases := map[string]string{
		"127.0.0.1": classLoopback, "127.1.2.3": classLoopback, "::1": classLoopback, "::ffff:127.0.0.1": classLoopback,
		"169.254.169.254": classMetadata, "fd00:ec2::254": classMetadata, "100.100.100.200": classMetadata,
		"169.254.10.1": classLinkLocal, "fe80::1": classLinkLocal, "fe80::1%eth0": classLinkLocal,
		"10.0.0.7": classPrivate, "172.16.5.4": classPrivate, "192.168.1.1": classPrivate, "100.64.0.1": classPrivate, "fd12::1": classPrivate,
		"0.0.0.0": classUnspecified, "0.1.2.3": classUnspecified, "::": classUnspecified, "::ffff:0.0.0.0": classUnspecified,
		"224.0.0.1": classMulticast, "ff02::1": classMulticast, "255.255.255.255": classMulticast,
		"8.8.8.8": classPublic, "2001:4860:4860::8888": classPublic,
	}
	for a, want := range cases {
		if got := classify(netip.MustParseAddr(a)); got != want {
			t.Errorf("%s: %s, want %s", a, got, want)
		}
	}
}

func TestHostPolicy_CheckProbe(t *testing.T) {
	p := mustPolicy(t, testPolicy)
	cases := []struct {
		endpoint string
		approved bool
		want     string // "" allowed, else code/rule
	}{
		{"http://127.0.0.1:11434/v1", false, ""},
		{"http://127.0.0.1:11435/v1", false, CodeProbeHostNotAllowed + "/probe_hosts"},
		{"http://runtime.lan:9000", false, ""},
		{"https://RUNTIME.lan./v1", false, ""},
		{"http://[::1]:8080/v1", false, ""},
		{"http://[::1]:8081/v1", false, CodeProbeHostNotAllowed + "/probe_hosts"},
		{"http://10.0.0.7:11434/v1", false, CodeProbeAddressNotAllowed + "/allow_private_probe_targets"},
		{"http://169.254.169.254/latest/meta-data", false, CodeProbeHostNotAllowed + "/probe_hosts"},
		{"http://169.254.169.254/latest/meta-data", true, CodeProbeAddressNotAllowed + "/allow_metadata_probe_targets"},
		{"http://metadata.google.internal/computeMetadata/v1", true, CodeProbeAddressNotAllowed + "/allow_metadata_probe_targets"},
		{"http://0.0.0.0:11434/v1", true, CodeProbeAddressNotAllowed + "/probe_targets"},
		{"http://[::ffff:127.0.0.1]:11434/v1", false, ""},
		{"http://elsewhere.example/v1", true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.endpoint, func(t *testing.T) {
			ref := p.checkProbe(aggregates.ProbeSpec{Kind: aggregates.ProbeModels, Endpoint: tc.endpoint}, tc.approved)
			got := ""
			if ref != nil {
				got = ref.Code + "/" + ref.Rule
			}
			if got != tc.want {
				t.Fatalf("got %q (%v), want %q", got, ref, tc.want)
			}
		})
	}
}

// TestParseHostPolicy: a file is decoded strictly, and every problem is
// named with its field.
func TestParseHostPolicy(t *testing.T) {
	p := mustPolicy(t, testPolicy)
	want := RunTemplate{Name: "bench", Argv: []ArgPattern{Lit("/usr/bin/python3"), Lit("/opt/bench/matmul.py"), Lit("--n"), IntArg(1, 65536)}}
	if diff := cmp.Diff(want, p.Runs[0]); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	cases := []struct {
		name, file, want string
	}{
		{"an unknown field", `{"runz": []}`, "runz"},
		{"a name given twice", `{"hash_paths": ["/a"], "hash_paths": ["/b"]}`, "twice"},
		{"null", `{"allow_root_runs": null}`, "allow_root_runs"},
		{"trailing data", `{} {}`, ""},
		{"an unknown placeholder", `{"runs": [{"argv": ["x", {"any": true}]}]}`, "runs[0].argv[1]: unknown field"},
		{"two placeholders in one", `{"runs": [{"argv": ["x", {"int": {"min": 1, "max": 2}, "one_of": ["a"]}]}]}`, "a pattern is a string"},
		{"an int without max", `{"runs": [{"argv": ["x", {"int": {"min": 1}}]}]}`, `both "min" and "max"`},
		{"a placeholder program", `{"runs": [{"argv": [{"one_of": ["sh", "bash"]}, "-c", "id"]}]}`, "runs[0].argv[0] must be the program itself"},
		{"a relative program", `{"runs": [{"argv": ["bin/bench"]}]}`, "relative path"},
		{"an empty argv", `{"runs": [{"argv": []}]}`, "runs[0].argv has 0 entries"},
		{"min above max", `{"runs": [{"argv": ["x", {"int": {"min": 3, "max": 2}}]}]}`, "runs[0].argv[1].int: min 3 is above max 2"},
		{"an empty one_of", `{"runs": [{"argv": ["x", {"one_of": []}]}]}`, "runs[0].argv[1].one_of has 0 values"},
		{"a relative hash path", `{"hash_paths": ["models"]}`, `hash_paths[0] "models": not an absolute path`},
		{"a hash path with ..", `{"hash_paths": ["/models/../etc"]}`, `contains ".."`},
		{"a hash path not clean", `{"hash_paths": ["/models/"]}`, "not clean"},
		{"a probe host with a scheme", `{"probe_hosts": ["http://x"]}`, `probe_hosts[0] "http://x"`},
		{"a probe host with a bad port", `{"probe_hosts": ["x:0"]}`, `port "0"`},
		{"a probe host that is no name", `{"probe_hosts": ["x*y"]}`, "neither an IP address nor a DNS name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHostPolicy([]byte(tc.file), "test.json")
			if !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "test.json") {
				t.Fatalf("got %v, want ErrInvalidPolicy naming test.json and …%s…", err, tc.want)
			}
		})
	}
	// Every problem at once.
	_, err := ParseHostPolicy([]byte(`{"hash_paths": ["a", "/b/"], "probe_hosts": ["x:99999"]}`), "test.json")
	var pe *PolicyError
	if !errors.As(err, &pe) || len(pe.Problems) != 3 {
		t.Fatalf("got %v, want three problems", err)
	}
}

// TestHostPolicy_RoundTrip: a policy written by Go (the demo's) reads back
// the same through the file format.
func TestHostPolicy_RoundTrip(t *testing.T) {
	p := HostPolicy{Runs: []RunTemplate{Exact("smi", "nvidia-smi", "-q"), {Argv: []ArgPattern{Lit("bench"), IntArg(-5, 5), OneOfArg("a", "")}}},
		HashPaths: []string{"/models"}, ProbeHosts: []string{"127.0.0.1:1"}, AllowLoopbackProbeTargets: true}
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := WriteHostPolicy(path, p); err != nil {
		t.Fatal(err)
	}
	got, err := LoadHostPolicy(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p, got, cmp.AllowUnexported(HostPolicy{}), cmp.FilterPath(func(cp cmp.Path) bool { return cp.Last().String() == ".probeHosts" }, cmp.Ignore())); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v %v", fi, err)
	}
	// A policy others may write is refused: they would decide what runs.
	if err := os.Chmod(path, 0o622); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadHostPolicy(path); !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), "writable by its group or others") {
		t.Errorf("a policy others may write: %v", err)
	}
}

// TestGuardedDialer_Control: the last check, on the socket's own address,
// refuses what the policy does not allow, whatever name led there.
func TestGuardedDialer_Control(t *testing.T) {
	g := newGuardedDialer(&HostPolicy{AllowPrivateProbeTargets: true}, nil)
	for addr, want := range map[string]string{
		"127.0.0.1:80": "allow_loopback_probe_targets", "[::1]:80": "allow_loopback_probe_targets",
		"169.254.169.254:80": "allow_metadata_probe_targets", "0.0.0.0:80": "probe_targets", "not an address": "probe_targets",
		"10.1.2.3:11434": "", "93.184.215.14:443": "",
	} {
		err := g.control("tcp", addr, nil)
		var r *Refusal
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", addr, err)
		case want != "" && (!errors.As(err, &r) || r.Rule != want || r.Code != CodeProbeAddressNotAllowed):
			t.Errorf("%s: %v, want a refusal by %s", addr, err, want)
		}
	}
}

// TestGuardedDialer_MetadataAllowed: a policy that allows the metadata
// services lets a metadata name through to its resolution (here a DNS
// that answers nothing), rather than failing with an empty refusal (a
// nil *Refusal returned as an error once did).
func TestGuardedDialer_MetadataAllowed(t *testing.T) {
	noDNS := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no DNS in this test")
	}}
	g := newGuardedDialer(&HostPolicy{AllowMetadataProbeTargets: true}, noDNS)
	_, err := g.DialContext(t.Context(), "tcp", "metadata.google.internal:80")
	var r *Refusal
	var dns *net.DNSError
	if errors.As(err, &r) || !errors.As(err, &dns) {
		t.Fatalf("got %#v, want the resolver's error", err)
	}
}
