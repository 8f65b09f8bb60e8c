package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/greffe/greffe/wire"
)

// Several endpoints (issue #16). A Client of a cluster is given every
// member's URL, as etcdctl's --endpoints: a request goes to the endpoint
// that answered last, and moves on to the next one only where trying
// again elsewhere cannot write twice:
//
//   - the connection was never made (a dial error): nothing was sent;
//   - a GET failed in any way: reads write nothing;
//   - the node answered not_leader, leader_unreachable or leader_changed:
//     it sent nothing on (those codes promise nothing was written).
//
// Any other failure of a write (the connection broke after the body was
// sent) is returned as it is: whether it was written is unknown, and the
// caller reconciles by id (docs/CLUSTER.md). Before its first write, or its
// first read that must be served by the leader, a Client with several
// endpoints asks them in turn which of them leads and starts there, which
// saves the follower's forwarding hop; it asks again when the endpoint it
// uses stops answering such a request (the leader was killed: a new one
// leads elsewhere).

// ParseEndpoints splits a comma-separated list of node URLs, trims spaces
// and trailing slashes, drops empty items and takes a URL without a scheme
// ("127.0.0.1:7070") as http://.
func ParseEndpoints(list string) []string {
	var out []string
	for _, e := range strings.Split(list, ",") {
		e = strings.TrimRight(strings.TrimSpace(e), "/")
		if e == "" {
			continue
		}
		if !strings.Contains(e, "://") {
			e = "http://" + e
		}
		out = append(out, e)
	}
	return out
}

// endpointState is which endpoint a Client uses now. The zero value starts
// at the first.
type endpointState struct {
	current      atomic.Int64 // index into Client.endpoints()
	leaderLooked atomic.Bool  // FindLeader ran (once per Client)
}

func (c *Client) endpoints() []string {
	if len(c.Endpoints) > 0 {
		return c.Endpoints
	}
	return []string{c.Base}
}

// UnreachableError is returned when no endpoint answered: each one's
// connection failed. Errs holds each endpoint's error, in Endpoints' order.
type UnreachableError struct {
	Endpoints []string
	Errs      []error
}

func (e *UnreachableError) Error() string {
	parts := make([]string, len(e.Endpoints))
	for i, ep := range e.Endpoints {
		parts[i] = fmt.Sprintf("%s (%v)", ep, e.Errs[i])
	}
	if len(parts) == 1 {
		return "no node answers at " + parts[0]
	}
	return "no node answers at any of " + strings.Join(parts, ", ")
}

// Unwrap returns the endpoints' errors (errors.Is finds a refused
// connection among them).
func (e *UnreachableError) Unwrap() []error { return e.Errs }

// tryEndpoints sends the request to the current endpoint, and to the next
// ones while the rules above allow it.
func (c *Client) tryEndpoints(ctx context.Context, method, path string, b []byte, hasBody bool) (*http.Response, error) {
	eps := c.endpoints()
	leaderBound := method != http.MethodGet || c.Consistency == "leader" || c.Consistency == "linearizable"
	if len(eps) > 1 && leaderBound && !c.eps.leaderLooked.Load() {
		c.FindLeader(ctx)
	}
	start := int(c.eps.current.Load()) % len(eps)
	order := make([]int, len(eps)) // indexes into eps, in the order tried
	for i := range order {
		order[i] = (start + i) % len(eps)
	}
	var dialErrs []error
	for i, at := range order {
		resp, err := c.rawAt(ctx, eps[at], method, path, b, hasBody)
		if err == nil {
			c.eps.current.Store(int64(at))
			return resp, nil
		}
		if ctx.Err() != nil || !retryElsewhere(method, err) {
			return nil, err
		}
		var apiErr *wire.Error
		if errors.As(err, &apiErr) {
			if i == len(eps)-1 {
				return nil, err // every node answered; the last answer says why
			}
			continue
		}
		dialErrs = append(dialErrs, err)
		if len(dialErrs) == len(eps) {
			break
		}
		if i == 0 && leaderBound && len(eps) > 2 {
			// The endpoint in use stopped answering: it may have been
			// the leader (killed, or its host down). Ask the others which
			// leads now and go there next, rather than through the next
			// in turn, which would forward every later write (a hop each).
			// With two endpoints the next in turn is the only other one.
			if ep := c.FindLeader(ctx); ep != "" {
				li := slices.Index(eps, ep)
				if j := slices.Index(order, li); j > i+1 {
					order = slices.Insert(slices.Delete(order, j, j+1), i+1, li)
				}
			}
		}
	}
	if len(dialErrs) < len(eps) {
		// Some answered with a code that says retry; others did not answer.
		return nil, errors.Join(dialErrs...)
	}
	ordered := make([]string, len(eps))
	for i, at := range order {
		ordered[i] = eps[at]
	}
	return nil, &UnreachableError{Endpoints: ordered, Errs: dialErrs}
}

// retryElsewhere reports whether a failed request may be sent to another
// endpoint (the rules above).
func retryElsewhere(method string, err error) bool {
	var apiErr *wire.Error
	if errors.As(err, &apiErr) {
		switch apiErr.Code {
		case wire.CodeNotLeader, wire.CodeLeaderUnreachable, wire.CodeLeaderChanged:
			return true
		}
		return false
	}
	if method == http.MethodGet {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// ClusterStatusAt asks the node at base (one endpoint, not the list) for
// its view of the cluster. A single node answers not_clustered (*Error).
func (c *Client) ClusterStatusAt(ctx context.Context, base string) (wire.Status, error) {
	var st wire.Status
	resp, err := c.rawAt(ctx, base, http.MethodGet, "/v1/cluster/status", nil, false)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("GET %s/v1/cluster/status: decode answer: %w", base, err)
	}
	return st, nil
}

// FindLeader asks the endpoints in turn which leads, and makes the first
// that says it leads (or a single node, which leads itself) the one the
// Client uses. It returns that endpoint, or "" when none did (the Client
// then keeps trying them in turn). It runs by itself once, before a
// Client with several endpoints first writes.
func (c *Client) FindLeader(ctx context.Context) string {
	c.eps.leaderLooked.Store(true)
	for i, ep := range c.endpoints() {
		st, err := c.ClusterStatusAt(ctx, ep)
		if err != nil && CodeOf(err) != wire.CodeNotClustered {
			continue
		}
		if err != nil || st.State == "Leader" {
			c.eps.current.Store(int64(i))
			return ep
		}
	}
	return ""
}
