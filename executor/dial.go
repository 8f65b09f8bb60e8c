package executor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The probe's dialer: server-side request forgery stops here. A probe
// target is a provider's endpoint, which any writer declares; without a
// check an executor would GET (and POST a completion to) whatever a
// writer names: the cloud metadata service that hands out the host's
// credentials, an admin port on loopback, a service of the host's LAN.
//
// The check is on addresses, after DNS, at the dial: the name is resolved
// once, every address it resolves to is classified and the whole dial is
// refused if any is of a class the policy does not allow (a name that
// mixes a public and a loopback address is a rebinding trick, not a
// runtime), and then exactly those addresses are dialled — never the name
// again, so a second, different DNS answer cannot slip between the check
// and the connection. The dialer's Control function checks the address
// of the socket itself once more, the last step before connect(2).
// Redirects are never followed (probe.go), and no proxy is used.

// Address classes of a probe target.
const (
	classPublic      = "public"
	classLoopback    = "loopback"
	classPrivate     = "private"
	classLinkLocal   = "link-local"
	classMetadata    = "cloud metadata"
	classUnspecified = "unspecified"
	classMulticast   = "multicast or broadcast"
)

var (
	// metadataAddrs are the cloud metadata services: AWS, GCP, Azure and
	// others on 169.254.169.254, AWS's IPv6 fd00:ec2::254, Alibaba's
	// 100.100.100.200. Classified before link-local and private, so that
	// allowing those never allows these.
	metadataAddrs = []netip.Addr{
		netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("fd00:ec2::254"), netip.MustParseAddr("100.100.100.200"),
	}
	// metadataNames resolve to a metadata service (GCP): refused by name,
	// before any DNS query.
	metadataNames = []string{"metadata.google.internal"}
	// sharedSpace is RFC 6598's carrier-grade NAT range: not public.
	sharedSpace = netip.MustParsePrefix("100.64.0.0/10")
	// thisNetwork is RFC 1122's 0.0.0.0/8: connecting to 0.0.0.0 reaches
	// the host itself on Linux, a way around a loopback check.
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	// broadcast is IPv4's limited broadcast.
	broadcast = netip.MustParseAddr("255.255.255.255")
)

// classify returns a's class. IPv4-mapped IPv6 addresses are classified
// as the IPv4 address they carry.
func classify(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	switch {
	case a.IsUnspecified() || a.Is4() && thisNetwork.Contains(a):
		return classUnspecified
	case a.IsMulticast() || a == broadcast:
		return classMulticast
	case slices.Contains(metadataAddrs, a):
		return classMetadata
	case a.IsLoopback():
		return classLoopback
	case a.IsLinkLocalUnicast():
		return classLinkLocal
	case a.IsPrivate() || sharedSpace.Contains(a):
		return classPrivate
	}
	return classPublic
}

func isMetadataName(host string) bool {
	return slices.Contains(metadataNames, strings.ToLower(strings.TrimSuffix(host, ".")))
}

// checkAddressClass decides a target of class; what names it in the
// refusal (an address, or "NAME (ADDRESS)").
func (p *HostPolicy) checkAddressClass(what, class string) *Refusal {
	var allowed bool
	var rule string
	switch class {
	case classPublic:
		return nil
	case classLoopback:
		allowed, rule = p.AllowLoopbackProbeTargets, "allow_loopback_probe_targets"
	case classPrivate:
		allowed, rule = p.AllowPrivateProbeTargets, "allow_private_probe_targets"
	case classLinkLocal:
		allowed, rule = p.AllowLinkLocalProbeTargets, "allow_link_local_probe_targets"
	case classMetadata:
		allowed, rule = p.AllowMetadataProbeTargets, "allow_metadata_probe_targets"
	default: // unspecified, multicast: no runtime answers there
		return &Refusal{Code: CodeProbeAddressNotAllowed, Rule: "probe_targets",
			Reason: fmt.Sprintf("%s is a%s %s address, never a probe target; nothing was dialled", what, article(class), class)}
	}
	if allowed {
		return nil
	}
	return &Refusal{Code: CodeProbeAddressNotAllowed, Rule: rule,
		Reason: fmt.Sprintf("%s is a%s %s address and the host policy does not set %s; nothing was dialled", what, article(class), class, rule)}
}

func article(class string) string {
	if strings.ContainsRune("aeiou", rune(class[0])) {
		return "n"
	}
	return ""
}

// guardedDialer dials probe targets the policy allows (see above). Safe
// for concurrent use.
type guardedDialer struct {
	policy   *HostPolicy
	resolver *net.Resolver
	dialer   *net.Dialer
}

// probeDialTimeout bounds one TCP connect; the request's timeout bounds
// the whole probe.
const probeDialTimeout = 10 * time.Second

func newGuardedDialer(p *HostPolicy, r *net.Resolver) *guardedDialer {
	if r == nil {
		r = net.DefaultResolver
	}
	g := &guardedDialer{policy: p, resolver: r}
	g.dialer = &net.Dialer{Timeout: probeDialTimeout, Control: g.control}
	return g
}

// DialContext resolves address's host, refuses the dial if any address is
// of a class the policy does not allow, then dials those addresses in
// order until one connects.
func (g *guardedDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("port %q: %w", portStr, err)
	}
	if isMetadataName(host) {
		if r := g.policy.checkAddressClass(host, classMetadata); r != nil {
			return nil, r
		}
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = g.resolver.LookupNetIP(ctx, "ip", host); err != nil {
		return nil, err
	}
	for _, a := range addrs {
		what := a.String()
		if what != host {
			what = host + " (" + what + ")"
		}
		if r := g.policy.checkAddressClass(what, classify(a)); r != nil {
			return nil, r
		}
	}
	var first error
	for _, a := range addrs {
		c, err := g.dialer.DialContext(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return c, nil
		}
		if r := (*Refusal)(nil); errors.As(err, &r) || ctx.Err() != nil {
			return nil, err
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = fmt.Errorf("%s: no address", host)
	}
	return nil, first
}

// control is the last check, on the socket's own address, before
// connect(2).
func (g *guardedDialer) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &Refusal{Code: CodeProbeAddressNotAllowed, Rule: "probe_targets", Reason: fmt.Sprintf("cannot tell what %q connects to; nothing was dialled", address)}
	}
	if r := g.policy.checkAddressClass(ap.Addr().String(), classify(ap.Addr())); r != nil {
		return r
	}
	return nil
}
