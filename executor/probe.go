package executor

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
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

// newProber returns a prober with its own transport: every connection
// through dial (the host policy's guarded dialer, dial.go), no proxy from
// the environment (a proxy would answer for the endpoint and prove
// nothing about it), no redirect followed (a redirect is the endpoint's
// answer, and following it would reach a target nobody checked), and no
// connection reuse across probes (each probe measures the endpoint as a
// new client finds it).
func newProber(smokeMaxTokens int, dial *guardedDialer) *prober {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         dial.DialContext,
		DisableKeepAlives:   true,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	return &prober{http: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
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
// reading. It never fails: every failure is an outcome. A target the host
// policy refused at the dial also returns its refusal (the reading is
// then refused, with the refusal as its error).
//
// The reading holds what the protocol defines and nothing else of the
// answers: the HTTP status, the latency, the listed model ids (data[].id,
// what the node judges live_proven on) and a smoke completion's finish
// reason from a fixed set. Never a body, an excerpt of one, or a decoder
// message quoting one: a probe's target may be a service that is not a
// runtime at all, and whatever it answers must not become readable by
// every reader of the ledger.
func (p *prober) probe(ctx context.Context, spec aggregates.ProbeSpec) (*aggregates.ProbeReading, *Refusal) {
	r := &aggregates.ProbeReading{Kind: spec.Kind, Endpoint: spec.Endpoint}
	start := time.Now()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	status, cerr := p.call(ctx, http.MethodGet, endpointURL(spec.Endpoint, "/models"), nil, &list)
	r.Latency, r.HTTPStatus = aggregates.NonNegativeDuration(aggregates.D(time.Since(start))), status
	if cerr != nil {
		r.Outcome, r.Error = aggregates.ReadingOutcome(cerr.outcome), cerr.msg
		return r, cerr.refusal
	}
	if list.Data == nil {
		r.Outcome, r.Error = aggregates.ProbeFailed, "the answer has no \"data\" list of models"
		return r, nil
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
		return r, nil
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
	status, cerr = p.call(ctx, http.MethodPost, endpointURL(spec.Endpoint, "/chat/completions"), body, &done)
	// A smoke probe's latency is the completion's: the listing's is a
	// models probe's.
	r.Latency, r.HTTPStatus = aggregates.NonNegativeDuration(aggregates.D(time.Since(start))), status
	switch {
	case cerr != nil:
		r.Outcome, r.Error = aggregates.ReadingOutcome(cerr.outcome), "smoke completion: "+cerr.msg
		return r, cerr.refusal
	case len(done.Choices) == 0:
		r.Outcome, r.Error = aggregates.ProbeFailed, "smoke completion: the answer has no choice"
	default:
		r.SmokeFinishReason = finishReason(done.Choices[0].FinishReason)
	}
	return r, nil
}

// finishReasons are the finish reasons OpenAI-compatible servers send;
// any other string is recorded as FinishOther, never as sent.
var finishReasons = []string{"stop", "length", "tool_calls", "content_filter", "function_call"}

// FinishOther is the smoke finish reason recorded for a reason outside
// finishReasons.
const FinishOther = "other"

func finishReason(s string) string {
	if slices.Contains(finishReasons, s) {
		return s
	}
	return FinishOther
}

// callError is a failed call, described in the executor's own words:
// never with a byte of the answer (see probe).
type callError struct {
	outcome string // aggregates.Probe…
	msg     string
	// refusal is set when the host policy refused the target at the dial.
	refusal *Refusal
}

// call sends one request and decodes a 200 answer of at most maxProbeBody
// bytes into out. It returns the HTTP status (0 without an answer).
func (p *prober) call(ctx context.Context, method, url string, in, out any) (int, *callError) {
	fail := func(outcome, format string, a ...any) *callError {
		return &callError{outcome: outcome, msg: method + " " + url + ": " + fmt.Sprintf(format, a...)}
	}
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, fail(aggregates.ProbeFailed, "encode the request: %v", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, fail(aggregates.ProbeUnreachable, "not a request URL")
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.http.Do(req)
	if err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			return 0, &callError{outcome: aggregates.ProbeRefused, msg: r.Error(), refusal: r}
		}
		if timedOut(ctx, err) {
			return 0, fail(aggregates.ProbeTimeout, "no answer before the request's deadline")
		}
		return 0, fail(aggregates.ProbeUnreachable, "no answer: %s", transportFailure(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxProbeBody+1))
	if err != nil {
		if timedOut(ctx, err) {
			return resp.StatusCode, fail(aggregates.ProbeTimeout, "the answer did not end before the request's deadline")
		}
		return resp.StatusCode, fail(aggregates.ProbeFailed, "the answer was cut short: %s", transportFailure(err))
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fail(aggregates.ProbeFailed, "HTTP %d", resp.StatusCode)
	}
	if len(b) > maxProbeBody {
		return resp.StatusCode, fail(aggregates.ProbeFailed, "the answer is larger than %d bytes", maxProbeBody)
	}
	if err := json.Unmarshal(b, out); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return resp.StatusCode, fail(aggregates.ProbeFailed, "the answer is not JSON (syntax error at byte %d)", se.Offset)
		case errors.As(err, &te) && te.Field != "":
			return resp.StatusCode, fail(aggregates.ProbeFailed, "the answer is not the expected JSON: %q has the wrong type", te.Field)
		}
		return resp.StatusCode, fail(aggregates.ProbeFailed, "the answer is not the expected JSON")
	}
	return resp.StatusCode, nil
}

// timedOut reports whether a failed call ran out of the request's time.
func timedOut(ctx context.Context, err error) bool {
	var ne net.Error
	return errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// transportFailure names why no (whole) answer came, in fixed words: the
// errors of net/http quote what the peer sent when it is not HTTP
// ("malformed HTTP response \"…\""), and the peer may be anything.
func transportFailure(err error) string {
	var errno syscall.Errno
	var dns *net.DNSError
	var tlsHeader tls.RecordHeaderError
	var tlsCert *tls.CertificateVerificationError
	var tlsAlert tls.AlertError
	switch {
	case errors.As(err, &dns) && dns.IsNotFound:
		return "DNS: no such host"
	case errors.As(err, &dns):
		return "DNS lookup failed"
	case errors.As(err, &errno):
		return errno.Error() // the kernel's words: "connection refused", …
	case errors.As(err, &tlsHeader):
		return "TLS: the answer is not TLS"
	case errors.As(err, &tlsCert):
		return "TLS: the certificate does not verify"
	case errors.As(err, &tlsAlert):
		return "TLS: the server sent alert " + tlsAlert.Error()
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection closed before an answer"
	}
	return "the connection failed or the answer was not HTTP"
}
