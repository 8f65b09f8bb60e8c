package dashboard_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	"github.com/greffe/greffe/node/nodetest"
	"github.com/greffe/greffe/projections"
	"github.com/greffe/greffe/wire"
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

// fixture is a node with every fixture history applied, on the demo's
// manual clock; stop stops it (idempotent; cleanup calls it too).
type fixture struct {
	n     *node.Node
	stop  func()
	cfg   node.Config           // to serve the same folder again at the same address
	clock *commands.ManualClock // cfg's clock
}

// serve opens a node with cfg and serves it until the returned stop (also
// called at cleanup).
func serve(t *testing.T, cfg node.Config) (*node.Node, func()) {
	t.Helper()
	n, stopNode := nodetest.Serve(t, cfg)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			if err := stopNode(); err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return n, stop
}

// fixtureNode starts a node on the demo's clock and policy and applies
// every fixture history, as greffe demo does.
func fixtureNode(ctx context.Context, t *testing.T) fixture {
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
	cfg := node.Config{DataDir: t.TempDir(), API: api.Config{Addr: "127.0.0.1:0"}, Clock: clock.Now, SetClock: clock.Set, Policy: &pol}
	n, stop := serve(t, cfg)
	cfg.API.Addr = n.Addr().String()
	c := client.New(n.URL(), "")
	for _, h := range hs {
		if _, err := fixtures.Run(ctx, c, h, fixtures.Options{Time: true}); err != nil {
			t.Fatalf("apply %s: %v", h.Name, err)
		}
	}
	return fixture{n: n, stop: stop, cfg: cfg, clock: clock}
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
// with the fixtures applied (and one probe schedule approved): every cell
// of the readiness matrix shows the state, reason and proving event the
// API gives (one colour per state); the header's matrix summary counts
// what the matrix holds, apart from the ledger's state; rows say which
// schedule keeps them fresh or that they are history; every state's
// colour passes WCAG AA and carries an icon and its name; a clicked
// cell's details open in the viewport even with the page scrolled to the
// last row; charts have a time axis and explain their "none" series;
// every panel names its clock; the cluster panel says the node is single;
// an event appended after the page loaded appears in the live tail; and
// when the node is stopped, a banner at the top says so with the time of
// the last answer, and the panels are greyed out, with no per-panel
// "Failed to fetch"; once the node serves again, the page is live again,
// and a schedule whose probes do not come shows since when it is missed.
func TestDashboard_Browser(t *testing.T) {
	chromium := requireChromium(t)
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	fx := fixtureNode(ctx, t)
	n := fx.n
	c := client.New(n.URL(), "")

	// A standing probe schedule for one provider, and a fresh probe of
	// it: its row shows the schedule and is activation-ready (at the end
	// of the fixtures' clock every other row is stale or not ready); the
	// others are history. The probe is an executor's signed measurement:
	// a probe merely stated by a writer proves nothing (issue #20).
	const scheduled, scheduledTag = "glm-local", "glm-4.7-flash:q4_K_M"
	const endpoint, host, executor = "http://127.0.0.1:11434/v1", "spark-1", "dash-gpu"
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	now := fx.cfg.Clock()
	probe := aggregates.MeasurementResult{MeasurementID: "dash-probe", ExecutorID: executor, Host: host,
		Argv: []string{aggregates.ProbeModels, endpoint}, StartedAt: now, EndedAt: now, Outcome: aggregates.ResultCompleted,
		Probe: &aggregates.ProbeReading{Kind: aggregates.ProbeModels, Endpoint: endpoint, Outcome: aggregates.ProbeOK,
			Models: []string{scheduledTag}, Latency: aggregates.NonNegativeDuration(aggregates.D(40 * time.Millisecond)), HTTPStatus: 200}}
	payload, err := json.Marshal(probe)
	if err != nil {
		t.Fatal(err)
	}
	env, err := events.SignData(ctx, aggregates.MeasurementPayloadType, payload, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		data any
	}{
		{"ApproveProbeSchedule", aggregates.ApproveProbeSchedule{Provider: scheduled, Host: host, Kind: aggregates.ProbeModels,
			Interval: aggregates.PositiveDuration(aggregates.D(time.Minute)), Timeout: aggregates.PositiveDuration(aggregates.D(10 * time.Second)), Approver: "owner"}},
		{"GrantApproval", aggregates.GrantApproval{ApprovalID: "reg-" + executor, Approver: "owner", Action: aggregates.ActionActivation,
			Subject: aggregates.ShortText(aggregates.ExecutorStream(executor)), Uses: 1, ExpiresAt: now.Add(time.Hour)}},
		{"RegisterExecutorKey", aggregates.RegisterExecutorKey{ExecutorID: executor, Host: host,
			PublicKey: aggregates.Ed25519PublicKey(key.Public().(ed25519.PublicKey)), ApprovalID: "reg-" + executor}},
		{"RequestMeasurement", aggregates.RequestMeasurement{MeasurementID: aggregates.ID(probe.MeasurementID), Host: host, Kind: aggregates.MeasurementProbe,
			Provider: scheduled, Argv: probe.Argv, Timeout: aggregates.PositiveDuration(aggregates.D(10 * time.Second)), OutputCapBytes: 4096}},
		{"ClaimMeasurement", aggregates.ClaimMeasurement{MeasurementID: aggregates.ID(probe.MeasurementID), ExecutorID: executor, LeaseUntil: now.Add(time.Minute)}},
		{"RecordMeasurement", aggregates.RecordMeasurement{MeasurementID: aggregates.ID(probe.MeasurementID), ExecutorID: executor, Payload: payload, Envelope: *env}},
	} {
		b, _ := json.Marshal(step.data)
		if _, err := c.Command(ctx, wire.CommandIn{Command: step.name, ID: uuid.NewString(), Actor: "owner", Data: b}); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
	}
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
	var wantSummary summary
	wantSchedules := map[string]string{}
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
		wantSummary.Total++
		wantSummary.Ready += count(r.ActivationReady.Ready)
		wantSummary.Live += count(r.LiveProven.Ready)
		wantSummary.Eligible += count(r.EligibleForAttempt.Ready)
		wantSchedules[r.Provider] = "none"
		if r.Schedule != nil && r.Schedule.Active {
			wantSummary.Scheduled++
			wantSchedules[r.Provider] = "active"
		}
	}
	if wantSchedules[scheduled] != "active" || wantSummary.Ready == 0 || wantSummary.Ready == wantSummary.Total {
		t.Fatalf("the fixtures no longer give a mixed matrix with one schedule: %+v, %s schedule %q", wantSummary, scheduled, wantSchedules[scheduled])
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
		slices.SortFunc(cs, func(a, b matrixCell) int { return strings.Compare(a.Provider+a.Column, b.Provider+b.Column) })
	}
	sortCells(want)
	sortCells(cells)
	if d := cmp.Diff(want, cells); d != "" {
		fail("matrix cells (with their hover text) differ from the API (-want +got):\n%s", d)
	}

	// The header: the matrix summary counts the matrix, apart from the
	// ledger's state (which is about the read models, not providers).
	var header struct {
		Summary summary
		Text    string
		Level   string
		Ledger  string
	}
	err = p.eval(ctx, `(() => { const s = document.querySelector('#matrix-summary'); const d = s.dataset; return {
		summary: {total: +d.total, ready: +d.ready, live: +d.live, eligible: +d.eligible, scheduled: +d.scheduled},
		text: s.textContent, level: d.level, ledger: document.querySelector('#ledger-state').textContent }; })()`, &header)
	if err != nil {
		fail("%v", err)
	}
	if d := cmp.Diff(wantSummary, header.Summary); d != "" {
		fail("matrix summary (-want +got):\n%s", d)
	}
	if wantText := fmt.Sprintf("%d of %d providers activation-ready", wantSummary.Ready, wantSummary.Total); header.Text != wantText || header.Level != "some" ||
		!strings.HasPrefix(header.Ledger, "ledger: ") || strings.Contains(header.Ledger, "provider") {
		fail("header: summary %q (level %s), ledger %q; want %q (level some) apart from the ledger's state", header.Text, header.Level, header.Ledger, wantText)
	}

	// Probe schedules: the scheduled row says its interval and host, the
	// others are marked history.
	var schedules map[string]struct {
		Mode, Text, Title string
	}
	err = p.eval(ctx, `Object.fromEntries(Array.from(document.querySelectorAll('#matrix tbody tr')).map((tr) => {
		const td = tr.querySelector('td.probes');
		return [tr.dataset.provider, {mode: td.dataset.schedule, text: td.textContent, title: td.querySelector('.chip') ? td.querySelector('.chip').title : td.title}];
	}))`, &schedules)
	if err != nil {
		fail("%v", err)
	}
	for prov, mode := range wantSchedules {
		got := schedules[prov]
		switch {
		case got.Mode != mode:
			t.Errorf("row %s: schedule %q, want %q", prov, got.Mode, mode)
		case mode == "active" && (!strings.Contains(got.Text, "every 1m0s on spark-1") || !strings.Contains(got.Text, "next due")):
			t.Errorf("row %s: schedule text %q, want its interval, host and next due time", prov, got.Text)
		case mode == "none" && (got.Text != "history" || !strings.Contains(got.Title, "no standing probe schedule")):
			t.Errorf("row %s: %q (%q), want it marked history, explained", prov, got.Text, got.Title)
		}
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

	// Every state's colour passes WCAG AA against its text, and every
	// state is told apart without colour: an icon and its name.
	checkStateContrast(ctx, t, p, fail)

	// Details of a cell of the last row open in the viewport, with the
	// page scrolled so that the last row is at the bottom of the screen.
	last := doc.Rows[0]
	for _, r := range doc.Rows {
		if r.Provider > last.Provider {
			last = r
		}
	}
	target := matrixCell{Provider: last.Provider, Column: "activation_ready", Reason: last.ActivationReady.Reason}
	if last.ActivationReady.Proof != nil {
		target.Proof = last.ActivationReady.Proof.ID.String()
	}
	click := fmt.Sprintf(`(() => { const td = document.querySelector('#matrix tr[data-provider=%q] td[data-col=%q]');
		td.scrollIntoView({block: 'end'}); td.click(); return true; })()`, target.Provider, target.Column)
	if err := p.eval(ctx, click, nil); err != nil {
		fail("%v", err)
	}
	detail := fmt.Sprintf(`document.querySelector('#detail').open && document.querySelector('#detail').textContent.includes(%q) && document.querySelector('#detail').textContent.includes(%q)`, target.Reason, target.Proof)
	if err := p.waitFor(ctx, "the cell's details", detail, 5*time.Second); err != nil {
		fail("%v", err)
	}
	var box struct {
		Top, Left, Bottom, Right, Width, Height, ScrollY float64
	}
	if err := p.eval(ctx, `(() => { const r = document.querySelector('#detail').getBoundingClientRect();
		return {top: r.top, left: r.left, bottom: r.bottom, right: r.right, width: innerWidth, height: innerHeight, scrolly: scrollY}; })()`, &box); err != nil {
		fail("%v", err)
	}
	if box.ScrollY <= 0 || box.Top < 0 || box.Left < 0 || box.Bottom > box.Height || box.Right > box.Width || box.Bottom-box.Top < 50 {
		fail("the details of %s are not inside the viewport (page scrolled by %v): %+v", target.Provider, box.ScrollY, box)
	}
	var closed bool
	if err := p.eval(ctx, `document.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape'})); !document.querySelector('#detail').open`, &closed); err != nil || !closed {
		fail("Escape did not close the details: %v", err)
	}

	// The other panels show the fixtures' read models; the charts have a
	// time axis and explain the series that name no model; every panel
	// says which clock its times come from; the cluster panel says this
	// node is single.
	var panels struct {
		Delivered, Stopped, Approvals, Hosts, Points int
		CheckpointSize, Age                          string
		Charts, ChartsWithAxis                       int
		NoneSeries, NoneExplained                    int
		Sections                                     []string
		Clocks                                       []string
		ClusterMode, ClusterText                     string
		ClusterRows                                  []string
		ClockNote                                    string
	}
	err = p.eval(ctx, `({
		delivered: document.querySelectorAll('#missions-board tr[data-mission="m-glm"][data-state="delivered"]').length,
		stopped: document.querySelectorAll('#missions-board tr[data-mission="m-persist"][data-state="stopped"]').length,
		approvals: document.querySelectorAll('#approvals-table tbody tr[data-approval]').length,
		hosts: document.querySelectorAll('#charts .host').length,
		points: document.querySelectorAll('#charts svg circle').length,
		checkpointsize: document.querySelector('#checkpoint').dataset.size,
		age: document.querySelector('#checkpoint-age').textContent,
		charts: document.querySelectorAll('#charts svg').length,
		chartswithaxis: Array.from(document.querySelectorAll('#charts svg')).filter((s) =>
			s.querySelectorAll('text.tick-x').length >= 1 && /^time \(UTC, ended_at\): \d{4}-\d\d-\d\d /.test(s.querySelector('text.axis-title').textContent)).length,
		noneseries: document.querySelectorAll('#charts .chip[data-series="none"]').length,
		noneexplained: Array.from(document.querySelectorAll('#charts .chip[data-series="none"]')).filter((c) =>
			c.title.includes('no model') && c.textContent.includes('no model')).length,
		sections: Array.from(document.querySelectorAll('main > section')).map((s) => s.id),
		clocks: Array.from(document.querySelectorAll('main > section')).map((s) => s.id + ': ' + (s.querySelector('.clock') || {textContent: ''}).textContent),
		clustermode: document.querySelector('#cluster').dataset.mode,
		clustertext: document.querySelector('#cluster-facts').textContent,
		clusterrows: Array.from(document.querySelectorAll('#cluster-members tbody tr')).map((tr) => tr.dataset.member),
		clocknote: document.querySelector('#readiness-clock-note').textContent,
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
	if panels.Charts == 0 || panels.ChartsWithAxis != panels.Charts || panels.NoneSeries == 0 || panels.NoneExplained != panels.NoneSeries {
		fail("charts: %d drawn, %d with a time axis; %d \"none\" series, %d explained", panels.Charts, panels.ChartsWithAxis, panels.NoneSeries, panels.NoneExplained)
	}
	for _, clock := range panels.Clocks {
		if _, text, _ := strings.Cut(clock, ": "); len(text) < 20 {
			t.Errorf("panel %q does not say which clock its times come from", clock)
		}
	}
	if len(panels.Clocks) < 7 {
		t.Errorf("panels %v: want verification, cluster, tail, readiness, missions, measurements, approvals", panels.Sections)
	}
	// The fixtures ran on a manual clock months from the wall clock that
	// stored their events: the matrix says its judged time is not the
	// recorded times' clock.
	if !strings.Contains(panels.ClockNote, "demo or test clock") {
		t.Errorf("readiness clock note %q: want it to say the command clock is not the wall clock", panels.ClockNote)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if panels.ClusterMode != "single" || !strings.Contains(panels.ClusterText, "single node") || !slices.Equal(panels.ClusterRows, []string{info.NodeID}) {
		fail("cluster panel: mode %q, %q, members %v; want the single node %s", panels.ClusterMode, panels.ClusterText, panels.ClusterRows, info.NodeID)
	}
	// Nothing was appended since the fixtures: the page's checkpoint
	// covers the head, and its age comes from the node's metrics.
	if panels.CheckpointSize != strconv.FormatUint(head, 10) || strings.HasPrefix(panels.Age, "unknown") {
		fail("verification panel: checkpoint size %q (head %d), age %q", panels.CheckpointSize, head, panels.Age)
	}

	// An event appended now reaches the page over the SSE tail.
	id := uuid.New()
	if _, err := c.Append(ctx, "dashboard-probe", events.ExpectAny, []wire.EventIn{{ID: id.String(), Type: "DashboardProbed", Data: json.RawMessage(`{"probe":true}`)}}); err != nil {
		t.Fatal(err)
	}
	live := fmt.Sprintf(`document.querySelector('#tail-events tr[data-id=%q][data-type="DashboardProbed"]') !== null`, id.String())
	if err := p.waitFor(ctx, "the appended event in the live tail", live, 10*time.Second); err != nil {
		fail("%v", err)
	}

	// The node stops: the banner at the top says so, with the time of its
	// last answer; the panels are greyed out; no panel shows its own
	// "Failed to fetch"; the matrix stays as it was last seen.
	if err := p.eval(ctx, `window.scrollTo(0, 0)`, nil); err != nil {
		fail("%v", err)
	}
	stoppedAt := time.Now()
	fx.stop()
	lost := `document.body.dataset.connection === 'lost' && !document.querySelector('#offline').hidden`
	if err := p.waitFor(ctx, "the banner saying the node does not answer", lost, 10*time.Second); err != nil {
		fail("%v", err)
	}
	t.Logf("banner %v after the node stopped", time.Since(stoppedAt).Round(time.Millisecond))
	// A refresh that starts after the banner: every request fails, and
	// the banner alone says so.
	var refreshes int
	if err := p.eval(ctx, `+document.body.dataset.refreshes`, &refreshes); err != nil {
		fail("%v", err)
	}
	again := fmt.Sprintf(`document.body.dataset.connection === 'lost' && +document.body.dataset.refreshes > %d`, refreshes+1)
	if err := p.waitFor(ctx, "a refresh while the node does not answer", again, 10*time.Second); err != nil {
		fail("%v", err)
	}
	var offline struct {
		Text, LastAnswer  string
		Top, Bottom       float64
		Opacity           float64
		Filter            string
		PanelErrors       []string
		Cells, LedgerText string
	}
	err = p.eval(ctx, `(() => { const o = document.querySelector('#offline'); const r = o.getBoundingClientRect(); const m = getComputedStyle(document.querySelector('main'));
		return {text: o.textContent, lastanswer: o.dataset.lastAnswer, top: r.top, bottom: r.bottom, opacity: +m.opacity, filter: m.filter,
			panelerrors: Array.from(document.querySelectorAll('.panel-error')).filter((e) => !e.hidden).map((e) => e.textContent),
			cells: String(document.querySelectorAll('#matrix td.cell').length), ledgertext: document.querySelector('#ledger-state').textContent}; })()`, &offline)
	if err != nil {
		fail("%v", err)
	}
	lastAnswer, perr := time.Parse(time.RFC3339Nano, offline.LastAnswer)
	switch {
	case perr != nil || lastAnswer.After(time.Now()) || time.Since(lastAnswer) > time.Minute:
		fail("banner: last answer %q (%v), want the time of the node's last answer", offline.LastAnswer, perr)
	case !strings.Contains(offline.Text, "not answering") || !strings.Contains(offline.Text, "last answer came at "+lastAnswer.UTC().Format("2006-01-02 15:04:05Z")):
		fail("banner text %q: want it to say the node is not answering and when it last answered", offline.Text)
	case offline.Top != 0 || offline.Bottom > 200:
		fail("banner at %v..%v, want it at the top of the viewport", offline.Top, offline.Bottom)
	case offline.Opacity >= 1 || !strings.Contains(offline.Filter, "grayscale"):
		fail("panels not greyed out: opacity %v, filter %q", offline.Opacity, offline.Filter)
	case len(offline.PanelErrors) != 0:
		fail("panels show their own errors beside the banner: %q", offline.PanelErrors)
	case offline.Cells != strconv.Itoa(len(want)) || offline.LedgerText != "ledger: no answer":
		fail("after the stop: %s cells (want the %d last seen), ledger pill %q", offline.Cells, len(want), offline.LedgerText)
	}

	// The node is back (the same folder at the same address): the banner
	// goes, the panels are live again, and so is the tail.
	serve(t, fx.cfg)
	back := `document.body.dataset.connection === 'live' && document.querySelector('#offline').hidden &&
		document.querySelector('#tail').dataset.state === 'live' && document.querySelector('#ledger-state').dataset.ready === 'true'`
	if err := p.waitFor(ctx, "the page live again once the node is back", back, 10*time.Second); err != nil {
		fail("%v", err)
	}

	// No probe comes for the schedule: once its clock has moved past two
	// intervals and the timeout, the row says since when it is missed, as
	// the API does (after a refresh: the token form's "use").
	fx.clock.Advance(3 * time.Minute)
	raw, err = c.Projection(ctx, "readiness", client.ProjectionQuery{Key: scheduled})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc.Rows) != 1 || doc.Rows[0].Schedule == nil || doc.Rows[0].Schedule.MissedSince == nil {
		t.Fatalf("the API does not call %s's schedule missed: %s (%v)", scheduled, raw, err)
	}
	if err := p.eval(ctx, `document.querySelector('#token-form').requestSubmit()`, nil); err != nil {
		fail("%v", err)
	}
	missed := fmt.Sprintf(`(() => { const tr = document.querySelector('#matrix tr[data-provider=%q]');
		return tr.querySelector('td.probes').dataset.schedule === 'missed' && tr.querySelector('td.probes').textContent.includes(%q) &&
			tr.querySelector('td[data-col="live_proven"]').dataset.state === %q; })()`,
		scheduled, "missed since "+doc.Rows[0].Schedule.MissedSince.UTC().Format("2006-01-02 15:04:05Z"), doc.Rows[0].LiveProven.State)
	if err := p.waitFor(ctx, "the missed schedule in its row", missed, 10*time.Second); err != nil {
		fail("%v", err)
	}
}

// summary is the header's count of the matrix.
type summary struct {
	Total, Ready, Live, Eligible, Scheduled int
}

func count(b bool) int {
	if b {
		return 1
	}
	return 0
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
