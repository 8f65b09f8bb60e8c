package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/greffe/greffe/aggregates"
)

// Probe bounds. A /v1/models answer or a completion larger than
// maxProbeBody is a failed probe, not a reason to read without end; ids
// beyond maxProbeModels, or longer than maxModelID bytes, are not listed
// (the node refuses longer lists), and the reading says so.
const (
	maxProbeBody   = 1 << 20
	maxProbeModels = 1024
	maxModelID     = 256
	// smokePrompt asks for a one-word answer: the smoke probe proves the
	// exact tag completes, not what it says.
	smokePrompt = "Reply with the single word: ok"
)

// prober probes OpenAI-compatible endpoints. Safe for concurrent use.
type prober struct {
	http *http.Client
	// smokeMaxTokens bounds the smoke completion's output.
	smokeMaxTokens int
}

// newProber returns a prober with its own transport: no proxy from the
// environment (a proxy would answer for the endpoint and prove nothing
// about it) and no connection reuse across probes (each probe measures
// the endpoint as a new client finds it).
func newProber(smokeMaxTokens int) *prober {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		DisableKeepAlives:   true,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	return &prober{http: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // a redirect is the endpoint's answer, not another endpoint's
	}}, smokeMaxTokens: smokeMaxTokens}
}

// endpointURL joins an OpenAI-compatible base ("http://h:11434" or
// "http://h:11434/v1") and a path under /v1.
func endpointURL(base, path string) string {
	base = strings.TrimRight(base, "/")
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	return base + path
}

// probe runs spec within ctx (the request's timeout) and returns the
// reading. It never fails: every failure is an outcome.
func (p *prober) probe(ctx context.Context, spec aggregates.ProbeSpec) *aggregates.ProbeReading {
	r := &aggregates.ProbeReading{Kind: spec.Kind, Endpoint: spec.Endpoint}
	start := time.Now()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	status, err := p.call(ctx, http.MethodGet, endpointURL(spec.Endpoint, "/models"), nil, &list)
	r.Latency, r.HTTPStatus = aggregates.D(time.Since(start)), status
	if err != nil {
		r.Outcome, r.Error = probeOutcome(ctx, err), err.Error()
		return r
	}
	if list.Data == nil {
		r.Outcome, r.Error = aggregates.ProbeFailed, "the answer has no \"data\" list of models"
		return r
	}
	skipped, over := 0, false
	for _, m := range list.Data {
		if m.ID == "" || len(m.ID) > maxModelID {
			skipped++
			continue
		}
		if len(r.Models) >= maxProbeModels {
			over = true
			break
		}
		r.Models = append(r.Models, m.ID)
	}
	var notes []string
	if skipped > 0 {
		notes = append(notes, fmt.Sprintf("%d model ids empty or longer than %d bytes are not listed", skipped, maxModelID))
	}
	if over {
		notes = append(notes, fmt.Sprintf("only the first %d models are listed", maxProbeModels))
	}
	r.Error = strings.Join(notes, "; ")
	r.Outcome = aggregates.ProbeOK
	if spec.Kind != aggregates.ProbeSmoke {
		return r
	}
	body := map[string]any{
		"model":       spec.ModelTag,
		"messages":    []map[string]string{{"role": "user", "content": smokePrompt}},
		"max_tokens":  p.smokeMaxTokens,
		"temperature": 0,
		"stream":      false,
	}
	var done struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	start = time.Now()
	status, err = p.call(ctx, http.MethodPost, endpointURL(spec.Endpoint, "/chat/completions"), body, &done)
	// A smoke probe's latency is the completion's: the listing's is a
	// models probe's.
	r.Latency, r.HTTPStatus = aggregates.D(time.Since(start)), status
	switch {
	case err != nil:
		r.Outcome, r.Error = probeOutcome(ctx, err), "smoke completion: "+err.Error()
	case len(done.Choices) == 0:
		r.Outcome, r.Error = aggregates.ProbeFailed, "smoke completion: the answer has no choice"
	default:
		r.SmokeFinishReason = done.Choices[0].FinishReason
	}
	return r
}

// errUnreachable marks a request that got no HTTP answer at all.
var errUnreachable = errors.New("no answer")

// call sends one request and decodes a 200 answer of at most maxProbeBody
// bytes into out. It returns the HTTP status (0 without an answer).
func (p *prober) call(ctx context.Context, method, url string, in, out any) (int, error) {
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errUnreachable, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w: %w", method, url, errUnreachable, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody+1))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: read answer: %w", method, url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("%s %s: HTTP %d: %s", method, url, resp.StatusCode, firstLine(validPrefix(b, 200)))
	}
	if len(b) > maxProbeBody {
		return resp.StatusCode, fmt.Errorf("%s %s: the answer is larger than %d bytes", method, url, maxProbeBody)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: the answer is not the expected JSON: %v", method, url, err)
	}
	return resp.StatusCode, nil
}

// probeOutcome classifies a failed call: timeout when the request's time
// ran out, unreachable when no answer came, failed otherwise.
func probeOutcome(ctx context.Context, err error) string {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return aggregates.ProbeTimeout
	case errors.Is(err, errUnreachable):
		return aggregates.ProbeUnreachable
	}
	return aggregates.ProbeFailed
}
