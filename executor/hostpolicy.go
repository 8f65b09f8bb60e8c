package executor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/events"
)

// The host policy: what this host lets its executor do, whatever a writer
// requests (issue #20). A MeasurementRequested is a writer's word; on the
// host, only the host's own configuration decides what runs, what is read
// and what is probed, or an approver's approval of that exact request
// (MeasurementApproved, follow.go) where the policy lets an approval stand
// in for its allowlists. The zero HostPolicy allows nothing by itself:
// every run, hash and probe it does not list is refused
// (OutcomeRefusedByHost) or, while approvals are honoured, waits for an
// approval; so an executor started without a policy is safe rather than a
// shell for every writer (greffe executor without --host-policy also sets
// IgnoreApprovals: nothing runs at all).
//
// A request the policy refuses, and that no approval could cover (or any,
// with IgnoreApprovals), is claimed and answered at once with a signed
// result whose outcome is refused_by_host and whose error names the
// refusal's code and the policy's rule: the request ends, visibly and for
// good, instead of waiting unclaimed (or being taken by a looser executor
// of the same host), and the refusal carries the host's signature, so
// nobody can forge that a host refused (or ran) something. Nothing is run,
// read or dialled for it, and no resource snapshot is taken (a refused
// measurement grounds no admission). A probe whose target is refused only
// once its name is resolved (dial.go) is refused the same way, after its
// snapshot. A request an approval could cover is left unclaimed instead,
// until an approver approves it (follow.go).
//
// File format (JSON, decoded strictly: unknown or repeated names, null,
// and anything after the object are refused, with the field's path):
//
//	{
//	  "runs": [
//	    {"name": "bench", "argv": ["/usr/bin/python3", "/opt/bench/matmul.py", "--n", {"int": {"min": 1, "max": 65536}}]},
//	    {"name": "smi",   "argv": ["nvidia-smi", {"one_of": ["-q", "-L"]}]}
//	  ],
//	  "hash_paths": ["/models", "/opt/llama/bin"],
//	  "probe_hosts": ["127.0.0.1:11434", "gpu-runtime.lan"],
//	  "allow_loopback_probe_targets": true,
//	  "allow_private_probe_targets": false,
//	  "allow_link_local_probe_targets": false,
//	  "allow_metadata_probe_targets": false,
//	  "allow_root_runs": false,
//	  "ignore_approvals": false
//	}
//
// The template language is deliberately tiny: a run's argv matches a
// template when it has exactly as many entries and each matches its
// pattern: a string matches itself; {"int": {"min": A, "max": B}} a
// decimal integer in [A, B] written canonically ("8192", never "+8192"
// nor "08192"); {"one_of": [...]} one of the listed strings. argv[0] is
// always a literal: the program is never a placeholder. There is no
// wildcard, no regular expression and no shell: a template that runs
// "sh -c" with a free argument would be the root shell this policy exists
// to remove.

// OutcomeRefusedByHost is the MeasurementResult outcome of a request the
// host's policy refused: nothing was run, read or dialled. Its Error
// starts with one of the Code… constants below, then ": ", the reason and
// the policy rule that decided. It is aggregates.ResultRefusedByHost, the
// node's name for it: the node grounds no admission, no evidence and no
// artifact hash on it, and its probe's ProbeRecorded is refused.
const OutcomeRefusedByHost = aggregates.ResultRefusedByHost

// Refusal codes of the host policy, at the start of a refused result's
// error ("CODE: reason (host policy: RULE)"). Stable: never renamed.
const (
	// CodeRunNotAllowed: a run's argv matches no template of "runs".
	CodeRunNotAllowed = "run_not_allowed"
	// CodeRootRunNotAllowed: the executor runs as root (uid 0) and the
	// policy does not set allow_root_runs.
	CodeRootRunNotAllowed = "root_run_not_allowed"
	// CodeHashPathNotAllowed: a hash names a path that is not clean
	// (".."), or that lies, once its symlinks are resolved, under none of
	// "hash_paths".
	CodeHashPathNotAllowed = "hash_path_not_allowed"
	// CodeProbeHostNotAllowed: a probe's endpoint is not a host[:port] of
	// "probe_hosts".
	CodeProbeHostNotAllowed = "probe_host_not_allowed"
	// CodeProbeAddressNotAllowed: a probe's target is, or resolves to, an
	// address of a class the policy does not allow (loopback, private,
	// link-local, cloud metadata; never unspecified or multicast).
	CodeProbeAddressNotAllowed = "probe_address_not_allowed"
)

// Bounds of a policy file: it is written and reviewed by hand, so a
// thousand templates or prefixes is already more than anyone reviews;
// the bounds keep a mistaken (generated, concatenated) file from making
// every request's check slow.
const (
	maxPolicyFile     = 1 << 20
	maxPolicyEntries  = 1024
	maxTemplateArgv   = 256 // aggregates' bound on a request's argv
	maxOneOf          = 256
	maxTemplateName   = 128
	maxPolicyEntryLen = 4096
	// maxProbeHostLen is a DNS name's 253 bytes, brackets and ":65535".
	maxProbeHostLen = 253 + 2 + 6
)

// ErrInvalidPolicy is wrapped by the error of LoadHostPolicy and
// HostPolicy.Validate.
var ErrInvalidPolicy = errors.New("executor: invalid host policy")

// HostPolicy is what this host's executor may do (see the file's
// comment). The zero value allows nothing. It does not change while the
// executor runs; safe for concurrent use once built.
type HostPolicy struct {
	// Runs are the argv templates a run request must match. Empty: no run
	// is allowed.
	Runs []RunTemplate `json:"runs,omitempty"`
	// HashPaths are the absolute, clean path prefixes (directories, or
	// single files) under which a hash may read. A requested path is
	// resolved with its symlinks (filepath.EvalSymlinks) before the check,
	// and the file is then opened through an os.Root of the prefix, so
	// neither a symlink nor a ".." can reach outside. Empty: nothing is
	// hashed.
	HashPaths []string `json:"hash_paths,omitempty"`
	// ProbeHosts are the "host" or "host:port" a probe may target (a DNS
	// name, compared case-insensitively, or an IP literal; IPv6 in
	// brackets with a port). A host without a port allows every port.
	// Empty: nothing is probed.
	ProbeHosts []string `json:"probe_hosts,omitempty"`
	// AllowLoopbackProbeTargets lets a probe connect to a loopback address
	// (127.0.0.0/8, ::1): a runtime on this host itself. Checked on every
	// address the target's name resolves to, at the dial.
	AllowLoopbackProbeTargets bool `json:"allow_loopback_probe_targets,omitempty"`
	// AllowPrivateProbeTargets lets a probe connect to a private address
	// (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7): a runtime on the
	// host's LAN.
	AllowPrivateProbeTargets bool `json:"allow_private_probe_targets,omitempty"`
	// AllowLinkLocalProbeTargets lets a probe connect to a link-local
	// address (169.254/16, fe80::/10) other than a cloud metadata service.
	AllowLinkLocalProbeTargets bool `json:"allow_link_local_probe_targets,omitempty"`
	// AllowMetadataProbeTargets lets a probe connect to a cloud metadata
	// service (169.254.169.254, fd00:ec2::254, 100.100.100.200,
	// metadata.google.internal): it hands out the host's credentials, so
	// no runtime should ever be there.
	AllowMetadataProbeTargets bool `json:"allow_metadata_probe_targets,omitempty"`
	// AllowRootRuns lets runs execute while the executor runs as root
	// (uid 0). Without it an executor running as root refuses every run
	// (probes and hashes, which run no program of the request, still
	// work) and says so loudly at start.
	AllowRootRuns bool `json:"allow_root_runs,omitempty"`
	// IgnoreApprovals makes the executor refuse what the policy refuses,
	// at once, even when a non-writer principal approved that exact
	// request (approvalCovers). Default false: such an approval covers
	// runs, hash_paths and probe_hosts — never the address classes,
	// allow_root_runs nor a ".." in a hash path, which are the host's own
	// safety and no ledger principal knows its network — and a request
	// the policy refuses but an approval could cover is left unclaimed
	// until it is approved (follow.go).
	IgnoreApprovals bool `json:"ignore_approvals,omitempty"`

	// probeHosts is ProbeHosts parsed (validate fills it).
	probeHosts []probeHost
}

// RunTemplate is one allowed command line.
type RunTemplate struct {
	// Name names the template in logs and refusals; optional.
	Name string `json:"name,omitempty"`
	// Argv is the command line's patterns, one per entry; Argv[0] is a
	// literal program: a bare name looked up on PATH or an absolute path.
	Argv []ArgPattern `json:"argv"`
}

// ArgPattern is one entry of a template: a literal string (Int and OneOf
// nil), a canonical decimal integer within Int, or one of OneOf. In JSON:
// a string, {"int": {"min": A, "max": B}}, or {"one_of": [...]}.
type ArgPattern struct {
	// Literal is the exact entry, when Int and OneOf are nil.
	Literal string
	// Int, when set, matches a canonical decimal integer in [Min, Max].
	Int *IntRange
	// OneOf, when non-nil, matches one of its strings (1 to 256).
	OneOf []string
}

// IntRange bounds an integer placeholder, both ends included.
type IntRange struct {
	Min int64 `json:"min"`
	Max int64 `json:"max"`
}

// Lit, IntArg and OneOfArg build patterns in Go (the demo's policy).
func Lit(s string) ArgPattern { return ArgPattern{Literal: s} }

// IntArg is an integer placeholder in [min, max].
func IntArg(min, max int64) ArgPattern { return ArgPattern{Int: &IntRange{Min: min, Max: max}} }

// OneOfArg is a placeholder for one of values.
func OneOfArg(values ...string) ArgPattern { return ArgPattern{OneOf: values} }

// Exact returns a template of literal entries only.
func Exact(name string, argv ...string) RunTemplate {
	t := RunTemplate{Name: name}
	for _, a := range argv {
		t.Argv = append(t.Argv, Lit(a))
	}
	return t
}

// argPatternJSON is a placeholder's JSON object.
type argPatternJSON struct {
	Int   *intRangeJSON `json:"int,omitempty"`
	OneOf []string      `json:"one_of,omitempty"`
}

// intRangeJSON makes both ends required: an absent bound is an error, not
// zero.
type intRangeJSON struct {
	Min *int64 `json:"min"`
	Max *int64 `json:"max"`
}

// MarshalJSON writes a literal as a string, a placeholder as its object.
func (p ArgPattern) MarshalJSON() ([]byte, error) {
	switch {
	case p.Int != nil:
		return json.Marshal(argPatternJSON{Int: &intRangeJSON{Min: &p.Int.Min, Max: &p.Int.Max}})
	case p.OneOf != nil:
		return json.Marshal(argPatternJSON{OneOf: p.OneOf})
	}
	return json.Marshal(p.Literal)
}

// UnmarshalJSON reads a string or a placeholder object, strictly.
func (p *ArgPattern) UnmarshalJSON(b []byte) error {
	*p = ArgPattern{}
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '"' {
		return json.Unmarshal(t, &p.Literal)
	}
	var o argPatternJSON
	if err := events.DecodeJSON(b, &o, events.DecodeOptions{RefuseNull: true}); err != nil {
		return err
	}
	switch {
	case o.Int != nil && o.OneOf != nil, o.Int == nil && o.OneOf == nil:
		return errors.New(`a pattern is a string, {"int": {"min": A, "max": B}} or {"one_of": [...]}`)
	case o.Int != nil:
		if o.Int.Min == nil || o.Int.Max == nil {
			return errors.New(`an int pattern gives both "min" and "max"`)
		}
		p.Int = &IntRange{Min: *o.Int.Min, Max: *o.Int.Max}
	default:
		p.OneOf = o.OneOf
	}
	return nil
}

// matches reports whether a matches the pattern.
func (p ArgPattern) matches(a string) bool {
	switch {
	case p.Int != nil:
		v, err := strconv.ParseInt(a, 10, 64)
		return err == nil && strconv.FormatInt(v, 10) == a && v >= p.Int.Min && v <= p.Int.Max
	case p.OneOf != nil:
		return slices.Contains(p.OneOf, a)
	}
	return a == p.Literal
}

// matches reports whether argv matches the template.
func (t RunTemplate) matches(argv []string) bool {
	if len(argv) != len(t.Argv) {
		return false
	}
	for i, p := range t.Argv {
		if !p.matches(argv[i]) {
			return false
		}
	}
	return true
}

// probeHost is one parsed entry of ProbeHosts.
type probeHost struct {
	host string // lower-case name, or an IP's canonical form
	port string // "" for every port
}

// LoadHostPolicy reads and checks a policy file, which its group and
// others may not write. Its errors wrap ErrInvalidPolicy (or the file's
// read error) and name the field at fault.
func LoadHostPolicy(path string) (HostPolicy, error) {
	f, err := os.Open(path)
	if err != nil {
		return HostPolicy{}, fmt.Errorf("host policy: %w", err)
	}
	defer f.Close()
	// Whoever may write the policy decides what this host runs: a file
	// others may write is refused, as a key others may read is.
	if fi, err := f.Stat(); err != nil {
		return HostPolicy{}, fmt.Errorf("host policy %s: %w", path, err)
	} else if fi.Mode().Perm()&0o022 != 0 {
		return HostPolicy{}, fmt.Errorf("%w: %s is writable by its group or others (mode %04o); chmod go-w it", ErrInvalidPolicy, path, fi.Mode().Perm())
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(f, maxPolicyFile+1)); err != nil {
		return HostPolicy{}, fmt.Errorf("host policy %s: %w", path, err)
	}
	if b.Len() > maxPolicyFile {
		return HostPolicy{}, fmt.Errorf("%w: %s is larger than %d bytes", ErrInvalidPolicy, path, maxPolicyFile)
	}
	return ParseHostPolicy(b.Bytes(), path)
}

// WriteHostPolicy writes p as a policy file (mode 0600): what the demo
// and scripts give their executor, in the format LoadHostPolicy reads.
func WriteHostPolicy(path string, p HostPolicy) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o600)
}

// ParseHostPolicy decodes and checks a policy file's bytes; source names
// it in errors.
func ParseHostPolicy(data []byte, source string) (HostPolicy, error) {
	var p HostPolicy
	if err := events.DecodeJSON(data, &p, events.DecodeOptions{RefuseNull: true}); err != nil {
		var ee *events.Error
		if errors.As(err, &ee) {
			return HostPolicy{}, fmt.Errorf("%w: %s: %s: %s", ErrInvalidPolicy, source, orRoot(ee.Field), ee.Message)
		}
		return HostPolicy{}, fmt.Errorf("%w: %s: %v", ErrInvalidPolicy, source, err)
	}
	if err := p.Validate(); err != nil {
		return HostPolicy{}, fmt.Errorf("%s: %w", source, err)
	}
	return p, nil
}

func orRoot(field string) string {
	if field == "" {
		return "(the file)"
	}
	return field
}

// PolicyError lists every problem of a HostPolicy, each with its field.
type PolicyError struct {
	Problems []string
}

// Error joins the problems.
func (e *PolicyError) Error() string {
	return ErrInvalidPolicy.Error() + ": " + strings.Join(e.Problems, "; ")
}

// Unwrap returns ErrInvalidPolicy.
func (e *PolicyError) Unwrap() error { return ErrInvalidPolicy }

// Validate reports every problem at once, and prepares the policy for
// its checks (New calls it).
func (p *HostPolicy) Validate() error {
	var probs []string
	add := func(format string, a ...any) { probs = append(probs, fmt.Sprintf(format, a...)) }
	for _, l := range []struct {
		name string
		n    int
	}{{"runs", len(p.Runs)}, {"hash_paths", len(p.HashPaths)}, {"probe_hosts", len(p.ProbeHosts)}} {
		if l.n > maxPolicyEntries {
			add("%s has %d entries; the limit is %d", l.name, l.n, maxPolicyEntries)
		}
	}
	for i, t := range p.Runs {
		at := fmt.Sprintf("runs[%d]", i)
		if len(t.Name) > maxTemplateName || strings.ContainsAny(t.Name, " \t\r\n") {
			add("%s.name %q: at most %d bytes without spaces", at, t.Name, maxTemplateName)
		}
		if len(t.Argv) == 0 || len(t.Argv) > maxTemplateArgv {
			add("%s.argv has %d entries; a template has 1 to %d", at, len(t.Argv), maxTemplateArgv)
			continue
		}
		if a0 := t.Argv[0]; a0.Int != nil || a0.OneOf != nil || a0.Literal == "" {
			add("%s.argv[0] must be the program itself, a non-empty string, never a placeholder", at)
		} else if strings.Contains(a0.Literal, "/") && !strings.HasPrefix(a0.Literal, "/") {
			add("%s.argv[0] %q is a relative path; use a name on PATH or an absolute path", at, a0.Literal)
		}
		for j, a := range t.Argv {
			switch {
			case a.Int != nil && a.Int.Min > a.Int.Max:
				add("%s.argv[%d].int: min %d is above max %d", at, j, a.Int.Min, a.Int.Max)
			case a.OneOf != nil && (len(a.OneOf) == 0 || len(a.OneOf) > maxOneOf):
				add("%s.argv[%d].one_of has %d values; 1 to %d", at, j, len(a.OneOf), maxOneOf)
			case len(a.Literal) > maxPolicyEntryLen:
				add("%s.argv[%d] is %d bytes; the limit is %d", at, j, len(a.Literal), maxPolicyEntryLen)
			}
		}
	}
	for i, hp := range p.HashPaths {
		if err := cleanAbsolute(hp); err != nil {
			add("hash_paths[%d] %q: %v", i, hp, err)
		}
	}
	p.probeHosts = nil // fresh: a copied policy shares its slices
	for i, e := range p.ProbeHosts {
		ph, err := parseProbeHost(e)
		if err != nil {
			add("probe_hosts[%d] %q: %v", i, e, err)
			continue
		}
		p.probeHosts = append(p.probeHosts, ph)
	}
	if len(probs) > 0 {
		return &PolicyError{Problems: probs}
	}
	return nil
}

// cleanAbsolute refuses a path that is not absolute and clean: no "..",
// no ".", no repeated or trailing slash.
func cleanAbsolute(p string) error {
	switch {
	case !strings.HasPrefix(p, "/"):
		return errors.New("not an absolute path")
	case len(p) > maxPolicyEntryLen:
		return fmt.Errorf("longer than %d bytes", maxPolicyEntryLen)
	case slices.Contains(strings.Split(p, "/"), ".."):
		return errors.New(`contains ".."`)
	case filepath.Clean(p) != p:
		return errors.New(`not clean (".", "//" or a trailing "/")`)
	}
	return nil
}

// parseProbeHost parses "host" or "host:port".
func parseProbeHost(e string) (probeHost, error) {
	if e == "" || len(e) > maxProbeHostLen || strings.ContainsAny(e, "/?#@ \t\r\n") {
		return probeHost{}, errors.New(`want host or host:port (no scheme, path or spaces)`)
	}
	host, port := e, ""
	if _, err := netip.ParseAddr(e); err != nil { // a bare IPv6 has colons but no port
		if h, p, err := net.SplitHostPort(e); err == nil {
			host, port = h, p
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
				return probeHost{}, fmt.Errorf("port %q: want 1 to 65535", p)
			}
		} else if strings.Contains(e, ":") && !strings.HasPrefix(e, "[") {
			return probeHost{}, fmt.Errorf("%v", err)
		}
	}
	host = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(host, "]"), "["), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		return probeHost{host: a.Unmap().WithZone("").String(), port: port}, nil
	}
	for _, c := range host {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return probeHost{}, fmt.Errorf("host %q is neither an IP address nor a DNS name", host)
		}
	}
	if host == "" {
		return probeHost{}, errors.New("no host")
	}
	return probeHost{host: strings.ToLower(host), port: port}, nil
}

// Empty reports whether the policy allows nothing at all.
func (p *HostPolicy) Empty() bool {
	return len(p.Runs) == 0 && len(p.HashPaths) == 0 && len(p.ProbeHosts) == 0
}

// Refusal is the host policy's "no" to one request: a stable code, the
// rule of the policy that decided, and a sentence. It is an error so that
// a refusal found deep in a probe's dial (after DNS) comes back through
// net/http as itself.
type Refusal struct {
	// Code is one of the Code… constants.
	Code string
	// Rule is the policy's field that decided ("runs", "hash_paths",
	// "probe_hosts", "allow_loopback_probe_targets", …).
	Rule string
	// Reason says what was refused and what would allow it.
	Reason string
}

// Error is the refused result's error text: "CODE: reason (host policy:
// RULE)".
func (r *Refusal) Error() string {
	return r.Code + ": " + r.Reason + " (host policy: " + r.Rule + ")"
}

// approvalCovers reports whether a non-writer's approval of the exact
// request stands in for the allowlists.
func (p *HostPolicy) approvalCovers(approvedByNonWriter bool) bool {
	return approvedByNonWriter && !p.IgnoreApprovals
}

// checkRun decides a run's argv. euid is the executor's effective user
// id (a parameter so that a test can be root without being root).
func (p *HostPolicy) checkRun(argv []string, approvedByNonWriter bool, euid int) (string, *Refusal) {
	if euid == 0 && !p.AllowRootRuns {
		return "", &Refusal{Code: CodeRootRunNotAllowed, Rule: "allow_root_runs",
			Reason: "the executor runs as root (uid 0) and the host policy does not allow runs as root; run the executor as an unprivileged user, or set allow_root_runs"}
	}
	if p.approvalCovers(approvedByNonWriter) {
		return "approved", nil
	}
	for i, t := range p.Runs {
		if t.matches(argv) {
			if t.Name != "" {
				return t.Name, nil
			}
			return fmt.Sprintf("runs[%d]", i), nil
		}
	}
	return "", &Refusal{Code: CodeRunNotAllowed, Rule: "runs",
		Reason: fmt.Sprintf("the argv matches none of the host's %d run templates; nothing was run", len(p.Runs))}
}

// checkProbe decides a probe's endpoint before anything is dialled: its
// host must be one of probe_hosts (unless approved), and a target named
// by an IP literal or a metadata name is checked for its class now. The
// addresses a name resolves to are checked at the dial (dial.go).
func (p *HostPolicy) checkProbe(spec aggregates.ProbeSpec, approvedByNonWriter bool) *Refusal {
	host, port, err := endpointHostPort(spec.Endpoint)
	if err != nil {
		return &Refusal{Code: CodeProbeHostNotAllowed, Rule: "probe_hosts", Reason: err.Error()}
	}
	if !p.approvalCovers(approvedByNonWriter) && !slices.ContainsFunc(p.probeHosts, func(ph probeHost) bool {
		return ph.host == host && (ph.port == "" || ph.port == port)
	}) {
		return &Refusal{Code: CodeProbeHostNotAllowed, Rule: "probe_hosts",
			Reason: fmt.Sprintf("%s is not one of the host's probe_hosts; nothing was dialled", net.JoinHostPort(host, port))}
	}
	if isMetadataName(host) {
		return p.checkAddressClass(host, classMetadata)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return p.checkAddressClass(host, classify(a))
	}
	return nil
}

// endpointHostPort returns a probe endpoint's host (lower case, or an IP
// in canonical form) and port (the scheme's default when absent).
func endpointHostPort(endpoint string) (host, port string, err error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", "", fmt.Errorf("the endpoint %q is not a URL", endpoint)
	}
	host, port = strings.TrimSuffix(u.Hostname(), "."), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap().WithZone("").String(), port, nil
	}
	return strings.ToLower(host), port, nil
}
