package aggregates

import (
	"slices"
	"strings"
)

// Measurement argv: what the approved argv of a probe or hash request
// means, parsed by the gates (RequestMeasurement, RecordMeasurement) and by
// the executor that runs it, so that both read it the same way.

// ProbeSpec is the approved argv of a probe request, parsed:
//
//	["models", ENDPOINT]           GET ENDPOINT's /v1/models
//	["smoke", ENDPOINT, EXACT_TAG] the same, then one bounded chat
//	                               completion asking EXACT_TAG
//
// ENDPOINT is an http or https URL without query or fragment, exactly the
// provider's declared endpoint.
type ProbeSpec struct {
	Kind     LiveProbeKind
	Endpoint string
	ModelTag string // smoke only
}

// ParseProbeArgv parses a probe's argv, or returns an *InvalidCommandError
// naming the entry at fault.
func ParseProbeArgv(argv []string) (ProbeSpec, error) {
	if len(argv) == 0 {
		return ProbeSpec{}, invalid("argv", "a probe's argv is [\"models\", ENDPOINT] or [\"smoke\", ENDPOINT, EXACT_TAG]")
	}
	var s ProbeSpec
	switch argv[0] {
	case ProbeModels:
		if len(argv) != 2 {
			return ProbeSpec{}, invalid("argv", "a models probe's argv is [\"models\", ENDPOINT]; got %d entries", len(argv))
		}
	case ProbeSmoke:
		if len(argv) != 3 {
			return ProbeSpec{}, invalid("argv", "a smoke probe's argv is [\"smoke\", ENDPOINT, EXACT_TAG]; got %d entries", len(argv))
		}
		if err := checkText(indexPath("argv", 2), argv[2], true, maxShortText); err != nil {
			return ProbeSpec{}, err
		}
		s.ModelTag = argv[2]
	default:
		return ProbeSpec{}, invalid(indexPath("argv", 0), "is %q; a probe is \"models\" or \"smoke\"", argv[0])
	}
	s.Kind, s.Endpoint = LiveProbeKind(argv[0]), argv[1]
	rest, ok := strings.CutPrefix(s.Endpoint, "http://")
	if !ok {
		rest, ok = strings.CutPrefix(s.Endpoint, "https://")
	}
	host, _, _ := strings.Cut(rest, "/")
	if !ok || host == "" || strings.ContainsAny(s.Endpoint, "?# \t\r\n") {
		return ProbeSpec{}, invalid(indexPath("argv", 1), "is %q; want an http:// or https:// URL without query or fragment", s.Endpoint)
	}
	return s, nil
}

// HashTarget is one entry of a hash request's argv, "ROLE=/absolute/path".
type HashTarget struct {
	Role string
	Path string
}

// ParseHashArgv parses a hash's argv: each entry is "ROLE=PATH" with ROLE
// an artifact role and PATH absolute; a path appears once.
func ParseHashArgv(argv []string) ([]HashTarget, error) {
	out := make([]HashTarget, 0, len(argv))
	seen := make(map[string]bool, len(argv))
	for i, a := range argv {
		role, path, ok := strings.Cut(a, "=")
		if roles := ArtifactRole("").Values(); !ok || !slices.Contains(roles, role) {
			return nil, invalid(indexPath("argv", i), "is %q; a hash entry is ROLE=/absolute/path with ROLE one of %s", a, strings.Join(roles, ", "))
		}
		if !strings.HasPrefix(path, "/") {
			return nil, invalid(indexPath("argv", i), "names %q; artifact paths are absolute", path)
		}
		if seen[path] {
			return nil, invalid(indexPath("argv", i), "names %s twice", path)
		}
		seen[path] = true
		out = append(out, HashTarget{Role: role, Path: path})
	}
	return out, nil
}
