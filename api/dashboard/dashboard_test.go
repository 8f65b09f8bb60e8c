package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/api/dashboard"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/fixtures"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/projections"
)

// TestHandler_Files checks what the handler serves without a browser: the
// page at the root with its security headers, the assets under /ui/ with
// their types, revalidation by ETag, and 404 for anything else.
func TestHandler_Files(t *testing.T) {
	mux := http.NewServeMux()
	h := dashboard.Handler()
	mux.Handle("GET "+dashboard.PagePattern, h)
	mux.Handle("GET "+dashboard.AssetPrefix, h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	type got struct {
		Status      int
		ContentType string
		HasCSP      bool
		Contains    bool
	}
	tests := []struct {
		name, path, contains string
		want                 got
	}{
		{"page", "/", `<table id="matrix">`, got{200, "text/html; charset=utf-8", true, true}},
		{"script", "/ui/app.js", "'use strict'", got{200, "text/javascript; charset=utf-8", false, true}},
		{"style", "/ui/style.css", "#matrix td.cell", got{200, "text/css; charset=utf-8", false, true}},
		{"icon", "/ui/favicon.svg", "<svg", got{200, "image/svg+xml", false, true}},
		{"unknown asset", "/ui/nope.js", "not_found", got{404, "application/json", false, true}},
		{"page under /ui/", "/ui/index.html", "not_found", got{404, "application/json", false, true}},
		{"elsewhere", "/other", "404", got{404, "text/plain; charset=utf-8", false, true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := http.Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			g := got{res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Content-Security-Policy") != "", strings.Contains(string(body), tc.contains)}
			if d := cmp.Diff(tc.want, g); d != "" {
				t.Errorf("GET %s (-want +got):\n%s", tc.path, d)
			}
		})
	}

	// A browser revalidating with the ETag gets 304.
	res, err := http.Get(srv.URL + "/ui/app.js")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/app.js", nil)
	req.Header.Set("If-None-Match", res.Header.Get("ETag"))
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotModified {
		t.Errorf("revalidation: status %d, want 304", res.StatusCode)
	}
}

// fixtureNode starts a node on the demo's clock and policy and applies
// every fixture history, as greffe demo does.
func fixtureNode(ctx context.Context, t *testing.T) *node.Node {
	t.Helper()
	hs, err := fixtures.All()
	if err != nil {
		t.Fatal(err)
	}
	pol := aggregates.DefaultPolicy()
	for _, h := range hs {
		if len(h.Header.Policy) > 0 {
			if err := json.Unmarshal(h.Header.Policy, &pol); err != nil {
				t.Fatalf("%s: policy: %v", h.Name, err)
			}
		}
	}
	clock := commands.NewManualClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	n, err := node.Open(node.Config{DataDir: t.TempDir(), API: api.Config{Addr: "127.0.0.1:0"}, Clock: clock, Policy: &pol})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- n.Serve(sctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	c := client.New(n.URL(), "")
	for _, h := range hs {
		if _, err := fixtures.Run(ctx, c, h, fixtures.Options{Time: true}); err != nil {
			t.Fatalf("apply %s: %v", h.Name, err)
		}
	}
	return n
}

// matrixCell is one readiness cell as the API states it and as the page
// shows it.
type matrixCell struct {
	Provider string `json:"provider"`
	Column   string `json:"column"`
	State    string `json:"state"`
	Ready    bool   `json:"ready"`
	Reason   string `json:"reason"`
	Proof    string `json:"proof"`
}

// TestDashboard_Browser loads the page in headless Chromium against a node
// with the fixtures applied: every cell of the readiness matrix shows the
// state, reason and proving event the API gives (one colour per state),
// the other panels are filled, and an event appended after the page loaded
// appears in the live tail.
func TestDashboard_Browser(t *testing.T) {
	chromium := requireChromium(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	n := fixtureNode(ctx, t)
	c := client.New(n.URL(), "")
	head := n.Store.Head().Size

	// What the API says: the expected cells.
	raw, err := c.Projection(ctx, "readiness", client.ProjectionQuery{MinPosition: head})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rows []projections.ReadinessRow `json:"rows"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Rows) == 0 {
		t.Fatal("the fixtures declared no provider")
	}
	var want []matrixCell
	for _, r := range doc.Rows {
		for _, col := range []struct {
			name string
			f    aggregates.Fact
		}{{"configuration_ready", r.ConfigurationReady}, {"eligible_for_attempt", r.EligibleForAttempt}, {"live_proven", r.LiveProven}, {"activation_ready", r.ActivationReady}} {
			cell := matrixCell{Provider: r.Provider, Column: col.name, State: col.f.State, Ready: col.f.Ready, Reason: col.f.Reason}
			if col.f.Proof != nil {
				cell.Proof = col.f.Proof.ID.String()
			}
			want = append(want, cell)
		}
	}

	b := startBrowser(t, chromium)
	p, err := b.open(ctx, n.URL()+"/")
	if err != nil {
		t.Fatal(err)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		shot := filepath.Join(t.TempDir(), "dashboard.png")
		if err := p.screenshot(ctx, shot); err == nil {
			t.Logf("screenshot: %s", shot)
		}
		t.Fatalf(format, args...)
	}
	loaded := fmt.Sprintf(`document.body.dataset.loaded === 'true' && document.querySelectorAll('#matrix td.cell').length === %d && document.querySelector('#tail').dataset.state === 'live'`, len(want))
	if err := p.waitFor(ctx, "the matrix and the live tail", loaded, 20*time.Second); err != nil {
		fail("%v", err)
	}

	// Every cell: state, readiness, reason and proving event; the hover
	// text carries the reason and the event.
	var cells []matrixCell
	err = p.eval(ctx, `Array.from(document.querySelectorAll('#matrix td.cell')).map((td) => ({
		provider: td.closest('tr').dataset.provider, column: td.dataset.col, state: td.dataset.state,
		ready: td.dataset.ready === 'true', reason: td.dataset.reason, proof: td.dataset.proof,
		hover: td.title.includes(td.dataset.reason) && (td.dataset.proof === '' || td.title.includes(td.dataset.proof)),
	})).filter((c) => c.hover)`, &cells)
	if err != nil {
		fail("%v", err)
	}
	sortCells := func(cs []matrixCell) {
		for i := range cs {
			for j := i + 1; j < len(cs); j++ {
				if cs[j].Provider+cs[j].Column < cs[i].Provider+cs[i].Column {
					cs[i], cs[j] = cs[j], cs[i]
				}
			}
		}
	}
	sortCells(want)
	sortCells(cells)
	if d := cmp.Diff(want, cells); d != "" {
		fail("matrix cells (with their hover text) differ from the API (-want +got):\n%s", d)
	}

	// One colour per state: equal states share a colour, different
	// states never do.
	var colours map[string][]string
	err = p.eval(ctx, `(() => {
		const m = {};
		for (const td of document.querySelectorAll('#matrix td.cell')) {
			const c = getComputedStyle(td).backgroundColor;
			m[td.dataset.state] = Array.from(new Set([...(m[td.dataset.state] || []), c]));
		}
		return m;
	})()`, &colours)
	if err != nil {
		fail("%v", err)
	}
	owner := map[string]string{}
	for state, cs := range colours {
		if len(cs) != 1 {
			t.Errorf("state %s is drawn in %d colours: %v", state, len(cs), cs)
			continue
		}
		if other, ok := owner[cs[0]]; ok {
			t.Errorf("states %s and %s share the colour %s", state, other, cs[0])
		}
		owner[cs[0]] = state
	}

	// A click opens the details of a cell: its reason and proving event.
	var first matrixCell
	for _, w := range want {
		if w.Proof != "" {
			first = w
			break
		}
	}
	click := fmt.Sprintf(`document.querySelector('#matrix tr[data-provider=%q] td[data-col=%q]').click()`, first.Provider, first.Column)
	if err := p.eval(ctx, click, nil); err != nil {
		fail("%v", err)
	}
	detail := fmt.Sprintf(`!document.querySelector('#detail').hidden && document.querySelector('#detail').textContent.includes(%q) && document.querySelector('#detail').textContent.includes(%q)`, first.Reason, first.Proof)
	if err := p.waitFor(ctx, "the cell's details", detail, 5*time.Second); err != nil {
		fail("%v", err)
	}

	// The other panels show the fixtures' read models.
	var panels struct {
		Delivered, Stopped, Approvals, Hosts, Points int
		CheckpointSize, Age                          string
	}
	err = p.eval(ctx, `({
		delivered: document.querySelectorAll('#missions-board tr[data-mission="m-glm"][data-state="delivered"]').length,
		stopped: document.querySelectorAll('#missions-board tr[data-mission="m-persist"][data-state="stopped"]').length,
		approvals: document.querySelectorAll('#approvals-table tbody tr[data-approval]').length,
		hosts: document.querySelectorAll('#charts .host').length,
		points: document.querySelectorAll('#charts svg circle').length,
		checkpointsize: document.querySelector('#checkpoint').dataset.size,
		age: document.querySelector('#checkpoint-age').textContent,
	})`, &panels)
	if err != nil {
		fail("%v", err)
	}
	var mrows, arows struct {
		Rows []json.RawMessage `json:"rows"`
	}
	for name, into := range map[string]any{"measurements": &mrows, "approvals": &arows} {
		raw, err := c.Projection(ctx, name, client.ProjectionQuery{MinPosition: head})
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, into); err != nil {
			t.Fatal(err)
		}
	}
	if panels.Delivered != 1 || panels.Stopped != 1 || panels.Approvals != len(arows.Rows) || panels.Hosts != len(mrows.Rows) || panels.Points == 0 {
		fail("panels: %+v; want m-glm delivered, m-persist stopped, %d approvals, %d hosts with points", panels, len(arows.Rows), len(mrows.Rows))
	}
	// Nothing was appended since the fixtures: the page's checkpoint
	// covers the head, and its age comes from the node's metrics.
	if panels.CheckpointSize != strconv.FormatUint(head, 10) || strings.HasPrefix(panels.Age, "unknown") {
		fail("verification panel: checkpoint size %q (head %d), age %q", panels.CheckpointSize, head, panels.Age)
	}

	// An event appended now reaches the page over the SSE tail.
	id := uuid.New()
	if _, err := c.Append(ctx, "dashboard-probe", events.ExpectAny, []client.EventIn{{ID: id.String(), Type: "DashboardProbed", Data: json.RawMessage(`{"probe":true}`)}}); err != nil {
		t.Fatal(err)
	}
	live := fmt.Sprintf(`document.querySelector('#tail-events tr[data-id=%q][data-type="DashboardProbed"]') !== null`, id.String())
	if err := p.waitFor(ctx, "the appended event in the live tail", live, 10*time.Second); err != nil {
		fail("%v", err)
	}
}

// TestDashboard_Token: on a node with --tokens the page itself loads, the
// data calls are refused until a token is typed, then everything loads
// with it (kept in the tab's sessionStorage); an empty inventory is shown
// as such, never as "all ready".
func TestDashboard_Token(t *testing.T) {
	chromium := requireChromium(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const secret = "reader-token-0123456789"
	tokens, err := api.NewTokens([]api.Token{{Name: "dashboard", Role: api.RoleReader, Token: secret}})
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Open(node.Config{DataDir: t.TempDir(), API: api.Config{Addr: "127.0.0.1:0", Tokens: tokens}})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- n.Serve(sctx) }()
	defer func() {
		stop()
		<-served
	}()

	b := startBrowser(t, chromium)
	p, err := b.open(ctx, n.URL()+"/")
	if err != nil {
		t.Fatal(err)
	}
	refused := `document.body.dataset.loaded === 'true' && !document.querySelector('#auth-error').hidden && document.querySelector('#tail').dataset.state === 'unauthorized'`
	if err := p.waitFor(ctx, "the token request", refused, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := p.eval(ctx, fmt.Sprintf(`document.querySelector('#token').value = %q; document.querySelector('#token-form').requestSubmit()`, secret), nil); err != nil {
		t.Fatal(err)
	}
	loaded := `document.querySelector('#auth-error').hidden && document.querySelector('#tail').dataset.state === 'live' &&
		document.querySelector('#matrix tbody').textContent.includes('no provider declared') &&
		document.querySelector('#checkpoint').dataset.size !== undefined`
	if err := p.waitFor(ctx, "the panels with the token", loaded, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := p.eval(ctx, `sessionStorage.getItem('greffe.token')`, &stored); err != nil || stored != secret {
		t.Errorf("sessionStorage token %q, %v", stored, err)
	}
}
