package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/wire"
	"github.com/greffe/greffe/witness"
)

// writeCounter is a reverse proxy in front of one member that counts the
// writes (POSTs) that reach it directly from the client. It stands for the
// member's address: closed when the member is killed, so that a client
// finds nothing listening there, as it would at the member's own port.
type writeCounter struct {
	*httptest.Server
	writes atomic.Int64
}

func newWriteCounter(t *testing.T, base string) *writeCounter {
	t.Helper()
	u, _ := url.Parse(base)
	rp := httputil.NewSingleHostReverseProxy(u)
	w := &writeCounter{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.writes.Add(1)
		}
		rp.ServeHTTP(rw, r)
	}))
	t.Cleanup(srv.Close)
	w.Server = srv
	return w
}

// cosigned is one add-checkpoint call the witness answered.
type cosigned struct {
	status int
	size   uint64
	signer uint32 // the key hash of the note's (first) signature: which member sent it
}

// recordingWitness is witness.Server (greffe witness's own) on loopback,
// recording every add-checkpoint answer in the order the witness gave
// them.
type recordingWitness struct {
	srv  *witness.Server
	url  string
	vkey string
	mu   sync.Mutex
	log  []cosigned // guarded by mu
}

func newRecordingWitness(t *testing.T, origin string, logKeys []string) *recordingWitness {
	t.Helper()
	skey, vkey, err := witness.GenerateKey("witness.test/cluster")
	if err != nil {
		t.Fatal(err)
	}
	signer, _, err := witness.NewCosigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	var vs []note.Verifier
	for _, k := range logKeys {
		v, err := note.NewVerifier(k)
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, v)
	}
	s, err := witness.OpenServer(witness.ServerConfig{Dir: t.TempDir(), Signer: signer, Logs: map[string][]note.Verifier{origin: vs}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	rw := &recordingWitness{srv: s, vkey: vkey}
	h := s.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		if r.URL.Path != witness.AddCheckpointPath {
			return
		}
		c := cosigned{status: rec.status}
		if req, err := witness.ParseAddCheckpoint(b); err == nil {
			if n, err := note.Open(req.Checkpoint, note.VerifierList(vs...)); err == nil && len(n.Sigs) > 0 {
				c.signer = n.Sigs[0].Hash
				lines := strings.Split(n.Text, "\n")
				c.size, _ = strconv.ParseUint(lines[1], 10, 64)
			}
		}
		rw.mu.Lock()
		rw.log = append(rw.log, c)
		rw.mu.Unlock()
	}))
	t.Cleanup(hs.Close)
	rw.url = hs.URL
	return rw
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (rw *recordingWitness) answers() []cosigned {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	return append([]cosigned(nil), rw.log...)
}

// metric returns the value of the first line of a Prometheus text page
// that starts with prefix (-1 when none).
func metric(page []byte, prefix string) float64 {
	sc := bufio.NewScanner(bytes.NewReader(page))
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, prefix) {
			f, _ := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
			return f
		}
	}
	return -1
}

// TestCluster_EndpointsAndWitness runs a real 3-node raft cluster of
// `greffe serve` subprocesses on loopback, each member sending its own
// checkpoints to one witness (witness.Server, greffe witness's own, in
// process), and checks, on that one cluster (issues #16 and #17):
//
//   - a client given the three URLs, followers first, writes to the
//     leader: every write reaches the leader directly (proxies count
//     them), none goes through a follower;
//   - the witness cosigns every member's checkpoints (each member's key
//     signed some it cosigned) as one append-only sequence of sizes, with
//     no answer of a conflict (422, or a 409 without its size), and every
//     member's metrics say 0 conflicts and the head cosigned;
//   - greffe endpoint status --json through the binary: one leader, named
//     by all, the same raft term, applied indexes; exit 0;
//   - the leader killed (SIGKILL): once a new leader is elected, the same
//     client's next write succeeds, and it and the one after go to the new
//     leader directly; endpoint status reports the stopped endpoint as
//     unhealthy, exit 1.
func TestCluster_EndpointsAndWitness(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster tests run subprocesses")
	}
	ids := []string{"n1", "n2", "n3"}
	c := newTestCluster(t, ids)
	// The ledger and every member's key exist before the witness starts:
	// it must know the origin and the keys it follows. A first open of n1
	// as a single node creates the ledger (bootstrapping seeds the cluster
	// with it); the joiners' keys are made for that origin in their
	// folders, as their first start would.
	n0, err := node.Open(node.Config{DataDir: c.members["n1"].data, API: api.Config{Addr: "127.0.0.1:0"}})
	if err != nil {
		t.Fatal(err)
	}
	origin, keys := n0.Store.Origin(), append([]string(nil), n0.Keys.Verifiers...)
	if err := n0.Close(); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[1:] {
		ks, err := node.LoadOrCreateKeys(c.members[id].data, origin)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, ks.Verifiers...)
	}
	w := newRecordingWitness(t, origin, keys)
	wflag := []string{"--witness", w.url + "=" + w.vkey}
	c.start("n1", append([]string{"--bootstrap"}, wflag...)...)
	c.leader(20 * time.Second)
	c.start("n2", append([]string{"--join", c.url("n1")}, wflag...)...)
	c.start("n3", append([]string{"--join", c.url("n1")}, wflag...)...)
	waitVoters(t, c, "n1", ids)
	leader := c.leader(20 * time.Second)

	counters := map[string]*writeCounter{}
	var order []string // followers first, the leader last
	for _, id := range ids {
		counters[id] = newWriteCounter(t, c.url(id))
		if id != leader {
			order = append(order, counters[id].URL)
		}
	}
	order = append(order, counters[leader].URL)
	cl := client.New(strings.Join(order, ","), "")
	appendOne := func(i int) wire.AppendOut {
		t.Helper()
		out, err := cl.Append(t.Context(), "ep", events.ExpectAny, []wire.EventIn{{Type: "T", Data: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)}})
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		return out
	}
	const first = 5
	for i := range first {
		appendOne(i)
	}
	for _, id := range ids {
		want := int64(0)
		if id == leader {
			want = first
		}
		if got := counters[id].writes.Load(); got != want {
			t.Errorf("%s (leader %s) received %d writes from the client, want %d", id, leader, got, want)
		}
	}

	// The witness: every member's checkpoints, cosigned as one sequence.
	head := waitHead(t, c)
	waitUntil(t, "every member's checkpoint of the head cosigned", 30*time.Second, func() bool {
		for _, id := range ids {
			m, err := client.New(c.url(id), "").Get(t.Context(), "/metrics")
			if err != nil || metric(m, "greffe_witness_cosigned_size_events{") != float64(head) {
				return false
			}
		}
		return true
	})
	for _, id := range ids {
		m, err := client.New(c.url(id), "").Get(t.Context(), "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if got := metric(m, "greffe_witness_conflicts_total{"); got != 0 {
			t.Errorf("%s: greffe_witness_conflicts_total %v, want 0", id, got)
		}
	}
	signers := map[uint32]bool{}
	var last uint64
	for i, a := range w.answers() {
		switch a.status {
		case http.StatusOK:
			if a.size < last {
				t.Errorf("answer %d: the witness cosigned size %d after %d", i, a.size, last)
			}
			last = a.size
			signers[a.signer] = true
		case http.StatusConflict: // a member behind another: it resends from the witness's size
		default:
			t.Errorf("answer %d: the witness answered %d to a checkpoint of size %d", i, a.status, a.size)
		}
	}
	if last != head || len(signers) != len(ids) {
		t.Errorf("the witness cosigned up to size %d (head %d), checkpoints of %d members' keys (want %d)", last, head, len(signers), len(ids))
	}
	if latest := w.srv.Latest(origin); !bytes.Contains(latest, []byte("\n"+strconv.FormatUint(head, 10)+"\n")) {
		t.Errorf("the witness's state holds %q, want the checkpoint of size %d", latest, head)
	}

	// endpoint status through the binary: one leader, one term.
	direct := make([]string, len(ids))
	for i, id := range ids {
		direct[i] = c.url(id)
	}
	statusOf := func(wantExit int) []endpointStatus {
		t.Helper()
		code, out, errs := runBin(t, "endpoint", "status", "--json", "--server", strings.Join(direct, ","))
		var st []endpointStatus
		if err := json.Unmarshal([]byte(out), &st); err != nil || code != wantExit || len(st) != len(ids) {
			t.Fatalf("endpoint status: exit %d (want %d), %v\n%s%s", code, wantExit, err, out, errs)
		}
		return st
	}
	st := statusOf(exitOK)
	leaders := 0
	for _, s := range st {
		if s.IsLeader {
			leaders++
		}
		if s.Leader != leader || s.RaftTerm == 0 || s.RaftTerm != st[0].RaftTerm || s.RaftApplied == 0 || s.Head != head || s.Lag == nil || s.Error != "" {
			t.Errorf("endpoint status of %s: %+v; want leader %s, the same non-zero term, applied > 0, head %d, lag", s.Endpoint, s, leader, head)
		}
	}
	if leaders != 1 {
		t.Errorf("%d endpoints say they lead, want 1: %+v", leaders, st)
	}

	// The leader killed: a new one is elected, and the client follows it.
	oldTerm := st[0].RaftTerm
	c.kill(leader)
	counters[leader].Close()
	var newLeader string
	waitUntil(t, "a new leader named by both survivors", 20*time.Second, func() bool {
		newLeader = ""
		for _, id := range c.running() {
			st, err := c.status(t.Context(), id)
			if err != nil || st.LeaderID == "" || st.LeaderID == leader || newLeader != "" && st.LeaderID != newLeader {
				return false
			}
			newLeader = st.LeaderID
		}
		return newLeader != ""
	})
	before := counters[newLeader].writes.Load()
	out := appendOne(first)
	appendOne(first + 1)
	if got := counters[newLeader].writes.Load() - before; got != 2 {
		t.Errorf("the new leader %s received %d of the 2 writes after the failover directly", newLeader, got)
	}
	for _, id := range ids {
		if id != newLeader && id != leader {
			if got := counters[id].writes.Load(); got != 0 {
				t.Errorf("the follower %s received %d writes", id, got)
			}
		}
	}
	got, err := client.New(c.url(newLeader), "").Event(t.Context(), out.Events[0].ID.String())
	if err != nil || got.Position != head {
		t.Errorf("the write after the failover on the new leader: position %d, %v; want %d", got.Position, err, head)
	}
	st = statusOf(exitRefused)
	for i, id := range ids {
		s := st[i]
		switch {
		case id == leader:
			if !strings.Contains(s.Error, "no node answers") || s.Lag != nil {
				t.Errorf("the stopped endpoint %s: %+v, want unhealthy (no node answers)", id, s)
			}
		case s.Error != "" || s.Leader != newLeader || s.IsLeader != (id == newLeader) || s.RaftTerm <= oldTerm:
			t.Errorf("endpoint %s after the failover: %+v; want leader %s in a term above %d", id, s, newLeader, oldTerm)
		}
	}
}
