package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/wire"
)

// endpointTimeout bounds each endpoint's answer: a node that does not
// answer within it is reported unhealthy rather than holding the command.
const endpointTimeout = 5 * time.Second

func newEndpointCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "endpoint",
		Short: "Check every endpoint of --server: health, or status (leader, term, applied index, head, lag)",
		Args:  cobra.NoArgs,
	}
	c.AddCommand(newEndpointHealthCmd(), newEndpointStatusCmd())
	return c
}

// endpointHealth is one line of greffe endpoint health.
type endpointHealth struct {
	Endpoint string `json:"endpoint"`
	Healthy  bool   `json:"healthy"`
	// Took is how long the node took to answer both checks.
	Took  time.Duration `json:"took_ns"`
	Error string        `json:"error,omitempty"`
}

func newEndpointHealthCmd() *cobra.Command {
	var r remote
	c := &cobra.Command{
		Use:   "health",
		Short: "Say for each endpoint of --server whether it is healthy (GET /healthz and /readyz); exit 1 if one is not",
		Long: `health asks each endpoint of --server (comma-separated), in parallel,
GET /healthz (the process serves, its store has not failed) and GET /readyz
(read models caught up, a leader known in a cluster), each within 5 s.

Exit codes: 0 every endpoint healthy, 1 at least one is not, 2 could not run.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			eps := client.ParseEndpoints(r.server)
			if len(eps) == 0 {
				return usageError{errors.New("--server names no endpoint")}
			}
			out := make([]endpointHealth, len(eps))
			forEach(eps, func(i int, ep string) { out[i] = checkHealth(c.Context(), r.endpointClient(ep), ep) })
			bad := 0
			for _, h := range out {
				if !h.Healthy {
					bad++
				}
			}
			if r.json {
				if err := printJSON(c.OutOrStdout(), out); err != nil {
					return err
				}
			} else {
				for _, h := range out {
					if h.Healthy {
						c.Printf("%s is healthy: answered in %s\n", h.Endpoint, h.Took.Round(time.Microsecond))
					} else {
						c.Printf("%s is unhealthy: %s (after %s)\n", h.Endpoint, h.Error, h.Took.Round(time.Microsecond))
					}
				}
			}
			if bad > 0 {
				return &exitError{exitRefused, fmt.Errorf("%d of %d endpoints unhealthy", bad, len(out))}
			}
			return nil
		},
	}
	r.register(c)
	return c
}

// endpointClient is a client of one endpoint, with the command's token
// and TLS choice.
func (r *remote) endpointClient(ep string) *client.Client {
	cl := client.New(ep, r.token)
	if r.insecure {
		cl.Insecure()
	}
	return cl
}

// forEach runs fn for every endpoint in parallel and waits.
func forEach(eps []string, fn func(i int, ep string)) {
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() { fn(i, ep) })
	}
	wg.Wait()
}

func checkHealth(ctx context.Context, cl *client.Client, ep string) endpointHealth {
	ctx, cancel := context.WithTimeout(ctx, endpointTimeout)
	defer cancel()
	h := endpointHealth{Endpoint: ep}
	start := time.Now()
	var live struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	if _, err := getStatus(ctx, cl, ep+"/healthz", &live); err != nil {
		h.Error = noNodeMessage(ep, err)
		h.Took = time.Since(start)
		return h
	}
	if live.Status != "ok" {
		h.Error = fmt.Sprintf("%s: %s", live.Status, live.Error)
		h.Took = time.Since(start)
		return h
	}
	var ready struct {
		Ready   bool `json:"ready"`
		Reasons []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"reasons"`
	}
	status, err := getStatus(ctx, cl, ep+"/readyz", &ready)
	switch {
	case err != nil:
		h.Error = noNodeMessage(ep, err)
	case status != http.StatusOK || !ready.Ready:
		h.Error = "not ready"
		for _, r := range ready.Reasons {
			h.Error += fmt.Sprintf("; %s: %s", r.Code, r.Message)
		}
	default:
		h.Healthy = true
	}
	h.Took = time.Since(start)
	return h
}

// getStatus GETs u and decodes its JSON body into out whatever the status
// (/readyz answers 503 with a body that says why).
func getStatus(ctx context.Context, cl *client.Client, u string, out any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	if cl.Token != "" {
		req.Header.Set("Authorization", "Bearer "+cl.Token)
	}
	resp, err := cl.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return resp.StatusCode, fmt.Errorf("GET %s answered %d, not JSON: %.200s", u, resp.StatusCode, b)
	}
	return resp.StatusCode, nil
}

// endpointStatus is one line of greffe endpoint status.
type endpointStatus struct {
	Endpoint string `json:"endpoint"`
	NodeID   string `json:"node_id,omitempty"`
	LedgerID string `json:"ledger_id,omitempty"`
	Version  string `json:"version,omitempty"`
	// Leader is the leader's node id as this endpoint sees it (a single
	// node leads itself); IsLeader says this endpoint is it.
	Leader   string `json:"leader,omitempty"`
	IsLeader bool   `json:"is_leader"`
	// RaftTerm and RaftApplied are the raft term and applied index (0 on
	// a single node, which has no raft).
	RaftTerm    uint64 `json:"raft_term"`
	RaftApplied uint64 `json:"raft_applied_index"`
	// Head is the log's acknowledged size on this endpoint; Lag how many
	// events it is behind the leader's head (nil: the leader's head is
	// not known).
	Head uint64  `json:"head"`
	Lag  *uint64 `json:"lag,omitempty"`
	// Took is how long the node took to answer.
	Took  time.Duration `json:"took_ns"`
	Error string        `json:"error,omitempty"`
}

func newEndpointStatusCmd() *cobra.Command {
	var r remote
	c := &cobra.Command{
		Use:   "status",
		Short: "Print each endpoint of --server's node, leader, raft term and applied index, head and lag behind the leader",
		Long: `status asks each endpoint of --server (comma-separated), in parallel,
GET /v1/info and GET /v1/cluster/status, each within 5 s, and prints its
node id, the leader it knows, the raft term and applied index, its head
(acknowledged events) and its lag: how many events it is behind the
leader's head (the leader's own answer when it is among the endpoints,
else what this endpoint knows of the leader).

Exit codes: 0 every endpoint answered, 1 at least one did not, 2 could not run.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			eps := client.ParseEndpoints(r.server)
			if len(eps) == 0 {
				return usageError{errors.New("--server names no endpoint")}
			}
			out := make([]endpointStatus, len(eps))
			leaderHeads := make([]map[string]uint64, len(eps)) // what each endpoint knows of the members' heads
			forEach(eps, func(i int, ep string) {
				out[i], leaderHeads[i] = checkStatus(c.Context(), r.endpointClient(ep), ep)
			})
			// The leader's head: its own answer, else a member's view.
			var leaderHead *uint64
			for _, s := range out {
				if s.Error == "" && s.IsLeader {
					h := s.Head
					leaderHead = &h
				}
			}
			for i := range out {
				lh := leaderHead
				if lh == nil && out[i].Leader != "" {
					if h, ok := leaderHeads[i][out[i].Leader]; ok {
						lh = &h
					}
				}
				if out[i].Error == "" && lh != nil {
					lag := *lh - min(*lh, out[i].Head)
					out[i].Lag = &lag
				}
			}
			failed := 0
			for _, s := range out {
				if s.Error != "" {
					failed++
				}
			}
			if r.json {
				if err := printJSON(c.OutOrStdout(), out); err != nil {
					return err
				}
			} else {
				printEndpointStatus(c.OutOrStdout(), out)
			}
			if failed > 0 {
				return &exitError{exitRefused, fmt.Errorf("%d of %d endpoints did not answer", failed, len(out))}
			}
			return nil
		},
	}
	r.register(c)
	return c
}

func checkStatus(ctx context.Context, cl *client.Client, ep string) (endpointStatus, map[string]uint64) {
	ctx, cancel := context.WithTimeout(ctx, endpointTimeout)
	defer cancel()
	s := endpointStatus{Endpoint: ep}
	start := time.Now()
	info, err := cl.Info(ctx)
	if err != nil {
		s.Error, s.Took = noNodeMessage(ep, err), time.Since(start)
		return s, nil
	}
	s.NodeID, s.LedgerID, s.Version, s.Head = info.NodeID, info.LedgerID, info.Version, info.Head.Size
	st, err := cl.ClusterStatusAt(ctx, ep)
	s.Took = time.Since(start)
	switch {
	case client.CodeOf(err) == wire.CodeNotClustered:
		s.Leader, s.IsLeader = info.NodeID, true // a single node leads itself
		return s, nil
	case err != nil:
		s.Error = noNodeMessage(ep, err)
		return s, nil
	}
	s.Leader, s.IsLeader, s.RaftTerm, s.RaftApplied = st.LeaderID, st.State == "Leader", st.Term, st.AppliedIndex
	heads := map[string]uint64{}
	for _, m := range st.Servers {
		heads[m.ID] = m.HeadSize
	}
	return s, heads
}

func printEndpointStatus(w io.Writer, out []endpointStatus) {
	fmt.Fprintf(w, "%-28s %-6s %-6s %-7s %6s %10s %10s %6s %9s\n", "ENDPOINT", "NODE", "LEADER", "ROLE", "TERM", "APPLIED", "HEAD", "LAG", "TOOK")
	for _, s := range out {
		if s.Error != "" {
			fmt.Fprintf(w, "%-28s %s\n", s.Endpoint, s.Error)
			continue
		}
		role, lag := "follower", "?"
		if s.IsLeader {
			role = "leader"
		}
		if s.Lag != nil {
			lag = fmt.Sprint(*s.Lag)
		}
		fmt.Fprintf(w, "%-28s %-6s %-6s %-7s %6d %10d %10d %6s %9s\n", s.Endpoint, s.NodeID, s.Leader, role, s.RaftTerm, s.RaftApplied, s.Head, lag, s.Took.Round(time.Microsecond))
	}
}
