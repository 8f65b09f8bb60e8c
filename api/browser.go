package api

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/greffe/greffe/internal/netpolicy"
	"github.com/greffe/greffe/wire"
)

// Web pages. A node without tokens serves loopback only (Config.Check),
// and treats every caller as admin: whoever can send it a request owns it.
// A browser on the same machine can be made to send one by any page it
// visits (issue #20):
//
//   - DNS rebinding: a page on evil.example whose name the attacker then
//     points at 127.0.0.1 reads the node as its own origin; the browser
//     sends Host: evil.example. GET /v1/backup returned the private key.
//     Only loopback names are accepted as Host: localhost, 127.0.0.0/8 and
//     [::1], with any port, and the host of the node's own address.
//   - Cross-origin requests: a page on another origin (or another port of
//     localhost) sends its Origin; such a request is refused. The node's
//     own pages (the dashboard, served by the node itself) send none on
//     their GETs (the Fetch standard adds Origin to cross-origin requests
//     and to those other than GET and HEAD) and their own origin, a
//     loopback origin on the node's port, on any other; both pass.
//   - Simple POSTs: a page can send text/plain (a form, fetch no-cors)
//     without any preflight: checkContentType requires application/json
//     on every POST, with or without tokens (api/errors.go).
//
// With tokens the Host and Origin checks are left out: a page cannot send
// another origin's bearer token (it does not have it, and attaching an
// Authorization header cross-origin needs a CORS preflight the node never
// grants), a node with tokens may sit behind any name (a proxy, a load
// balancer), and a foreign Origin with a valid token is a caller who chose
// to use it from there.

// guardBrowsers wraps next with the Host and Origin checks of a node
// without tokens; with tokens it returns next.
func (s *Server) guardBrowsers(next http.Handler) http.Handler {
	if s.cfg.Tokens.Enabled() {
		return next
	}
	own := s.cfg.Addr
	if s.cfg.Listener != nil {
		own = s.cfg.Listener.Addr().String()
	}
	ownHost, _, _ := net.SplitHostPort(own)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A refusal closes the connection: the body it does not read is
		// then not drained (net/http would wait for a body that may never
		// come, before boundBodies bounds its time).
		refuse := func(err *wire.Error) {
			w.Header().Set("Connection", "close")
			writeError(w, err)
		}
		if !loopbackHost(r.Host, ownHost) {
			refuse(&wire.Error{Code: wire.CodeHostNotAllowed, Field: "Host",
				Message: fmt.Sprintf("this node has no tokens and answers only requests addressed to a loopback name (localhost, 127.0.0.1, [::1]); Host %q is not one, as when a web page's name is pointed at this machine (DNS rebinding): use http://127.0.0.1:PORT, or give the node --tokens", r.Host)})
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !sameLoopbackOrigin(o, r, ownHost) {
			refuse(&wire.Error{Code: wire.CodeOriginNotAllowed, Field: "Origin",
				Message: fmt.Sprintf("this node has no tokens and answers web pages of its own origin only; a page of %q may not call it: open the dashboard the node serves, or give the node --tokens", o)})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether hostport (a Host header: a name or an IP,
// with or without a port) names this machine's loopback: localhost, an
// IP of 127.0.0.0/8 or ::1, or own (the node's own listen host).
func loopbackHost(hostport, own string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1] // [::1] without a port
	}
	if host == "" {
		return false
	}
	if own != "" && strings.EqualFold(host, own) {
		return true
	}
	return netpolicy.IsLoopback(net.JoinHostPort(strings.ToLower(host), "0")) // the listen address's rule (internal/netpolicy)
}

// sameLoopbackOrigin reports whether origin (an Origin header) is the
// node's own: the scheme the node serves, a loopback host, and the port r
// came in on (the node's own pages are served from it).
func sameLoopbackOrigin(origin string, r *http.Request, own string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.Path != "" || u.RawQuery != "" {
		return false // "null" (a sandboxed or file: page) among them
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if u.Scheme != scheme || !loopbackHost(u.Host, own) {
		return false
	}
	return originPort(u) == requestPort(r, scheme)
}

// originPort is the port of an origin, its scheme's when it names none.
func originPort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// requestPort is the port r arrived on: the listener's local address, or,
// where the server does not record it, the Host header's.
func requestPort(r *http.Request, scheme string) string {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if _, p, err := net.SplitHostPort(a.String()); err == nil {
			return p
		}
	}
	if _, p, err := net.SplitHostPort(r.Host); err == nil {
		return p
	}
	if scheme == "https" {
		return "443"
	}
	return "80"
}
