// Package client talks to a greffe node over HTTP: a Client for the
// bodies of package wire, the contract the node's api serves. The CLI, the
// executor and the tests use it; it imports only events, wire, the JSON
// cursor it shares with api (internal/jsonscan) and the standard library:
// never api, a store or raft.
package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// Client is an HTTP client of one node, or of the nodes of a cluster
// (client/endpoints.go). Safe for concurrent use; set its fields before
// the first call.
type Client struct {
	// Base is the node's URL, e.g. http://127.0.0.1:7070: the first of
	// Endpoints when there are several.
	Base string
	// Endpoints are the URLs of the nodes to try in turn (New fills it
	// from a comma-separated list). Empty: Base alone.
	Endpoints []string
	// Token is the bearer token, if the node requires one.
	Token string
	// Consistency, when set (local, leader or linearizable), is sent as
	// ?consistency= with every GET: how fresh a cluster member's answer
	// must be (docs/CLUSTER.md). Empty: the node's default, local.
	Consistency string
	// HTTP is the underlying client. Default: a client with keep-alives and
	// no overall timeout (subscriptions stream); use contexts to bound calls.
	HTTP *http.Client

	eps endpointState // which endpoint answers now (client/endpoints.go)

	// direct sends POSTs to http:// nodes on connections of its own
	// (client/direct.go) while HTTP is still the client New made.
	direct      *directPool
	defaultHTTP *http.Client
}

// New returns a client of base with an optional token. base is one URL or
// a comma-separated list of them (etcdctl's --endpoints), tried in turn
// (client/endpoints.go); a URL without a scheme ("127.0.0.1:7070") is
// taken as http://.
func New(base, token string) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	eps := ParseEndpoints(base)
	first := ""
	if len(eps) > 0 {
		first = eps[0]
	}
	hc := &http.Client{Transport: tr}
	return &Client{Base: first, Endpoints: eps, Token: token, HTTP: hc, direct: newDirectPool(), defaultHTTP: hc}
}

// Insecure makes the client accept any TLS certificate (self-signed test
// nodes). Never use it against a production node.
func (c *Client) Insecure() {
	if tr, ok := c.HTTP.Transport.(*http.Transport); ok {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // opt-in for tests
	}
}

// Do sends a request with an optional JSON body and decodes a JSON answer
// into out (when non-nil). A non-2xx answer is returned as *Error.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.raw(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

// Get returns the raw body of a successful GET.
func (c *Client) Get(ctx context.Context, path string) ([]byte, error) {
	resp, err := c.raw(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// Stream sends a GET and returns the response of a successful one for the
// caller to read and close (a backup stream, for one). A non-2xx answer is
// returned as *Error.
func (c *Client) Stream(ctx context.Context, path string) (*http.Response, error) {
	return c.raw(ctx, http.MethodGet, path, nil)
}

func (c *Client) raw(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var b []byte
	if body != nil {
		var ok bool
		b, ok = body.(jsonBody) // pre-encoded (client/fastwire.go)
		if !ok {
			var err error
			if b, err = json.Marshal(body); err != nil {
				return nil, err
			}
		}
	}
	if method == http.MethodGet && c.Consistency != "" {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		path += sep + "consistency=" + url.QueryEscape(c.Consistency)
	}
	for try := 0; ; try++ {
		resp, err := c.tryEndpoints(ctx, method, path, b, body != nil) // client/endpoints.go
		wait, again := retryCapped(method, err, try)
		if !again {
			return resp, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}

// Retries of a read refused because a capped resource was full (429 with
// Retry-After: a node's proven reads or subscriptions, docs/API.md): the
// places free up as holders finish, within the node's write timeout at
// worst.
const (
	// maxCappedRetries bounds how often one read is sent again: a node
	// whose caps stay full for so long is overloaded, and the caller hears
	// it (the last 429).
	maxCappedRetries = 8
	// maxCappedWait bounds one wait, whatever the node asks.
	maxCappedWait = 5 * time.Second
)

// retryCapped says whether a GET answered err should be sent again, and
// after how long. Only GETs: a POST refused for a cap (none is today)
// would be the caller's to repeat with its ids.
func retryCapped(method string, err error, try int) (time.Duration, bool) {
	var e *wire.Error
	if method != http.MethodGet || try >= maxCappedRetries || !errors.As(err, &e) ||
		e.Status != http.StatusTooManyRequests || e.RetryAfter <= 0 {
		return 0, false
	}
	return min(e.RetryAfter, maxCappedWait), true
}

// rawAt sends one request to the node at base.
func (c *Client) rawAt(ctx context.Context, base, method, path string, b []byte, hasBody bool) (*http.Response, error) {
	var rd io.Reader
	if hasBody {
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return nil, err
	}
	if hasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	var resp *http.Response
	if method == http.MethodPost && len(b) <= directMaxBody && hc == c.defaultHTTP && c.direct.usable(req) {
		resp, err = c.direct.do(req) // client/direct.go
	} else {
		resp, err = hc.Do(req)
	}
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var eb wire.ErrorBody
	e := &wire.Error{Status: resp.StatusCode, Code: "http_" + strconv.Itoa(resp.StatusCode), Message: strings.TrimSpace(string(b))}
	if json.Unmarshal(b, &eb) == nil && eb.Error != nil {
		e = eb.Error
		e.Status = resp.StatusCode
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// CodeOf returns the stable code of an API error, or "".
func CodeOf(err error) string {
	var e *wire.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// Append appends events to one stream. Strings that are not UTF-8 are
// refused before sending (client/text.go).
func (c *Client) Append(ctx context.Context, stream string, expected events.Expected, evs []wire.EventIn) (wire.AppendOut, error) {
	var out wire.AppendOut
	if err := eventsTextError("events", evs); err != nil {
		return out, err
	}
	body := streamAppendBody(wire.StreamAppendIn{ExpectedVersion: expected, Events: evs}) // client/fastwire.go
	err := c.doAppend(ctx, http.MethodPost, "/v1/streams/"+url.PathEscape(stream), body, &out)
	return out, err
}

// AppendMulti appends atomically to several streams. Strings that are not
// UTF-8 are refused before sending (client/text.go).
func (c *Client) AppendMulti(ctx context.Context, in wire.AppendIn) (wire.AppendOut, error) {
	var out wire.AppendOut
	for i := range in.Appends {
		if err := textError(fmt.Sprintf("appends[%d].stream", i), in.Appends[i].Stream); err != nil {
			return out, err
		}
		if err := eventsTextError(fmt.Sprintf("appends[%d].events", i), in.Appends[i].Events); err != nil {
			return out, err
		}
	}
	err := c.Do(ctx, http.MethodPost, "/v1/append", in, &out)
	return out, err
}

// ReadStream reads a stream page.
func (c *Client) ReadStream(ctx context.Context, stream string, o events.ReadOptions) (wire.ReadOut, error) {
	var out wire.ReadOut
	err := c.Do(ctx, http.MethodGet, "/v1/streams/"+url.PathEscape(stream)+readQuery(o), nil, &out)
	return out, err
}

// ReadAll reads a page of the global log.
func (c *Client) ReadAll(ctx context.Context, o events.ReadOptions) (wire.ReadOut, error) {
	var out wire.ReadOut
	err := c.Do(ctx, http.MethodGet, "/v1/all"+readQuery(o), nil, &out)
	return out, err
}

func readQuery(o events.ReadOptions) string {
	q := url.Values{}
	if o.Direction == events.Backward {
		q.Set("direction", "backward")
		if o.From != events.FromEnd {
			q.Set("from", strconv.FormatUint(o.From, 10))
		}
	} else {
		q.Set("from", strconv.FormatUint(o.From, 10))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return "?" + q.Encode()
}

// Event reads one event by id.
func (c *Client) Event(ctx context.Context, id string) (events.Event, error) {
	var out events.Event
	err := c.Do(ctx, http.MethodGet, "/v1/events/"+url.PathEscape(id), nil, &out)
	return out, err
}

// Info returns the node's identity and head.
func (c *Client) Info(ctx context.Context) (wire.InfoOut, error) {
	var out wire.InfoOut
	err := c.Do(ctx, http.MethodGet, "/v1/info", nil, &out)
	return out, err
}

// Checkpoint returns the signed checkpoint note of size (0 = latest).
func (c *Client) Checkpoint(ctx context.Context, size uint64) ([]byte, error) {
	p := "/v1/checkpoint"
	if size > 0 {
		p += "?size=" + strconv.FormatUint(size, 10)
	}
	return c.Get(ctx, p)
}

// Subscribe follows the log from position from over Server-Sent Events and
// calls fn for each event until ctx ends or fn fails. It reconnects (from
// the last position seen) after a dropped connection, waiting retry between
// attempts; it returns ctx.Err() or fn's error.
func (c *Client) Subscribe(ctx context.Context, from uint64, f events.Filter, fn func(events.Event) error) error {
	next := from
	for {
		err := c.subscribeOnce(ctx, next, f, func(e events.Event) error {
			next = e.Position + 1
			return fn(e)
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var fnErr fnError
		if errors.As(err, &fnErr) {
			return fnErr.err
		}
		var apiErr *wire.Error
		if errors.As(err, &apiErr) && apiErr.Status/100 == 4 {
			return err
		}
		select {
		case <-time.After(500 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

func (c *Client) subscribeOnce(ctx context.Context, from uint64, f events.Filter, fn func(events.Event) error) error {
	q := url.Values{}
	q.Set("from", strconv.FormatUint(from, 10))
	if f.StreamPrefix != "" {
		q.Set("stream_prefix", f.StreamPrefix)
	}
	if len(f.Types) > 0 {
		q.Set("types", strings.Join(f.Types, ","))
	}
	resp, err := c.raw(ctx, http.MethodGet, "/v1/subscribe?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var data []byte
	var kind string
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if data != nil {
				if kind == "error" {
					return fmt.Errorf("subscription ended by the node: %s", data)
				}
				var e events.Event
				if err := json.Unmarshal(data, &e); err != nil {
					return fmt.Errorf("subscription: bad event: %w", err)
				}
				if err := fn(e); err != nil {
					return fnError{err}
				}
			}
			data, kind = nil, ""
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append(data[:0:0], line[6:]...)
		case bytes.HasPrefix(line, []byte("event: ")):
			kind = string(line[7:])
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}
