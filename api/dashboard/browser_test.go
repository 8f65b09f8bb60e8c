package dashboard_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// findChromium returns the headless browser to drive, or "" when none is
// installed. GREFFE_CHROMIUM names one explicitly.
func findChromium() string {
	if p := os.Getenv("GREFFE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// requireChromium returns the browser, or skips the test when there is
// none, except in CI (CI set to a true value), where the browser is part of
// the environment (.ci/run installs it) and its absence is a failure.
func requireChromium(t *testing.T) string {
	t.Helper()
	p := findChromium()
	if p != "" {
		return p
	}
	if ci := strings.ToLower(os.Getenv("CI")); ci != "" && ci != "false" && ci != "0" {
		t.Fatal("CI is set but no chromium is installed: install the Debian chromium package (apt-get install -y chromium), or set GREFFE_CHROMIUM")
	}
	t.Skip("chromium not installed (apt-get install -y chromium): skipping the dashboard's browser test; set CI=true to make this a failure")
	return ""
}

// browser drives a headless Chromium over the DevTools protocol on a pipe
// (--remote-debugging-pipe: NUL-separated JSON on file descriptors 3 and
// 4), which needs neither a port nor a websocket client. It is the test's
// own process: close stops it and waits.
type browser struct {
	cmd  *exec.Cmd
	out  io.WriteCloser // the browser's fd 3: commands
	done chan struct{}  // closed when the reader ends (the browser exited)

	mu      sync.Mutex
	next    int
	pending map[int]chan cdpMessage
	waiters []*cdpWaiter // guarded by mu
	err     error        // why the reader ended; guarded by mu
}

// cdpMessage is a reply (ID set) or an event (Method set).
type cdpMessage struct {
	ID        int             `json:"id,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// cdpWaiter receives the first event of a method in a session.
type cdpWaiter struct {
	session, method string
	ch              chan cdpMessage // buffered 1
}

func startBrowser(t *testing.T, path string) *browser {
	t.Helper()
	// fd 3 is what the browser reads, fd 4 what it writes.
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	evR, evW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--disable-extensions", "--mute-audio",
		"--user-data-dir="+t.TempDir(), "--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, evW}
	// Its output is dbus and GPU chatter in a headless container.
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	cmdR.Close()
	evW.Close()
	b := &browser{cmd: cmd, out: cmdW, done: make(chan struct{}), pending: map[int]chan cdpMessage{}}
	go b.read(evR)
	t.Cleanup(func() { b.close(t) })
	return b
}

// read dispatches the browser's messages until it closes its end.
func (b *browser) read(r io.ReadCloser) {
	defer close(b.done)
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		raw, err := br.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			b.err = fmt.Errorf("devtools pipe: %w", err)
			b.mu.Unlock()
			return
		}
		var m cdpMessage
		if json.Unmarshal(bytes.TrimSuffix(raw, []byte{0}), &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.pending[m.ID]; ok {
				delete(b.pending, m.ID)
				ch <- m
			}
		} else {
			kept := b.waiters[:0]
			for _, w := range b.waiters {
				if w.method == m.Method && w.session == m.SessionID {
					w.ch <- m
					continue
				}
				kept = append(kept, w)
			}
			b.waiters = kept
		}
		b.mu.Unlock()
	}
}

// call sends a command (to the browser, or to a page's session) and
// decodes its result into out (when not nil).
func (b *browser) call(ctx context.Context, session, method string, params, out any) error {
	b.mu.Lock()
	if b.err != nil {
		err := b.err
		b.mu.Unlock()
		return err
	}
	b.next++
	id := b.next
	ch := make(chan cdpMessage, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if params == nil {
		msg["params"] = map[string]any{}
	}
	if session != "" {
		msg["sessionId"] = session
	}
	raw, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if _, err := b.out.Write(append(raw, 0)); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return fmt.Errorf("%s: %s (%d)", method, m.Error.Message, m.Error.Code)
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-b.done:
		return fmt.Errorf("%s: the browser exited", method)
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// expect registers interest in the next event of method in session; call
// it before the command that causes the event.
func (b *browser) expect(session, method string) <-chan cdpMessage {
	w := &cdpWaiter{session: session, method: method, ch: make(chan cdpMessage, 1)}
	b.mu.Lock()
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	return w.ch
}

// close asks the browser to exit, and kills it if it does not within a
// few seconds.
func (b *browser) close(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = b.call(ctx, "", "Browser.close", nil, nil)
	b.out.Close()
	exited := make(chan error, 1)
	go func() { exited <- b.cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-exited
	}
	<-b.done
}

// page is one tab, attached with a flat session.
type page struct {
	b       *browser
	session string
}

// open creates a tab, navigates it to url and waits for its load event.
func (b *browser) open(ctx context.Context, url string) (*page, error) {
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		return nil, err
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
		return nil, err
	}
	p := &page{b: b, session: att.SessionID}
	if err := b.call(ctx, p.session, "Page.enable", nil, nil); err != nil {
		return nil, err
	}
	// A desktop-sized viewport, so that a failure's screenshot shows the
	// layout people see.
	if err := b.call(ctx, p.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		return nil, err
	}
	loaded := b.expect(p.session, "Page.loadEventFired")
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := b.call(ctx, p.session, "Page.navigate", map[string]any{"url": url}, &nav); err != nil {
		return nil, err
	}
	if nav.ErrorText != "" {
		return nil, fmt.Errorf("navigate %s: %s", url, nav.ErrorText)
	}
	select {
	case <-loaded:
		return p, nil
	case <-b.done:
		return nil, errors.New("the browser exited while loading the page")
	case <-ctx.Done():
		return nil, fmt.Errorf("load %s: %w", url, ctx.Err())
	}
}

// eval evaluates a JavaScript expression in the page, awaiting it if it is
// a promise, and decodes its JSON value into out (when not nil).
func (p *page) eval(ctx context.Context, expr string, out any) error {
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := p.b.call(ctx, p.session, "Runtime.evaluate", map[string]any{
		"expression": expr, "awaitPromise": true, "returnByValue": true,
	}, &res); err != nil {
		return err
	}
	if e := res.ExceptionDetails; e != nil {
		return fmt.Errorf("javascript: %s %s", e.Text, e.Exception.Description)
	}
	if out != nil {
		return json.Unmarshal(res.Result.Value, out)
	}
	return nil
}

// waitFor resolves when the JavaScript expression cond is truthy, checking
// it on every DOM mutation (a MutationObserver: the page's own event, not
// a polling loop), and fails after timeout with what it waited for.
func (p *page) waitFor(ctx context.Context, what, cond string, timeout time.Duration) error {
	expr := fmt.Sprintf(`new Promise((resolve, reject) => {
  const cond = () => { try { return !!(%s); } catch (_) { return false; } };
  let obs = null;
  const timer = setTimeout(() => { if (obs) obs.disconnect(); reject(new Error(%q)); }, %d);
  if (cond()) { clearTimeout(timer); resolve(true); return; }
  obs = new MutationObserver(() => { if (cond()) { obs.disconnect(); clearTimeout(timer); resolve(true); } });
  obs.observe(document.documentElement, {subtree: true, childList: true, attributes: true, characterData: true});
})`, cond, "timed out waiting for "+what, timeout.Milliseconds())
	return p.eval(ctx, expr, nil)
}

// screenshot writes a PNG of the page (for debugging a failure).
func (p *page) screenshot(ctx context.Context, file string) error {
	var shot struct {
		Data []byte `json:"data"`
	}
	if err := p.b.call(ctx, p.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &shot); err != nil {
		return err
	}
	return os.WriteFile(file, shot.Data, 0o644)
}
