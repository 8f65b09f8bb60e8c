package executor

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/greffe/greffe/aggregates"
)

const exactTag = "qwen3-coder:30b"

// The answers of real servers to GET /v1/models, trimmed.
const (
	// Ollama lists its tags exactly.
	ollamaModels = `{"object":"list","data":[{"id":"llama3.2:3b","object":"model","created":1757000000,"owned_by":"library"},{"id":"qwen3-coder:30b","object":"model","created":1757000000,"owned_by":"library"}]}`
	// A llama.cpp server lists the file it loaded (or its --alias): never
	// the tag the provider was declared with.
	llamaCppModels = `{"models":[{"name":"qwen3-coder-30b-a3b-q4_k_m.gguf","model":"qwen3-coder-30b-a3b-q4_k_m.gguf","type":"model"}],"object":"list","data":[{"id":"qwen3-coder-30b-a3b-q4_k_m.gguf","object":"model","created":1757000000,"owned_by":"llamacpp","meta":{"n_ctx_train":262144}}]}`
)

// fakeServer is an OpenAI-compatible server on 127.0.0.1:0 answering
// /v1/models with models and /v1/chat/completions with chat, each
// (status, body); a status of 0 never answers (until the client gives up).
type answer struct {
	status int
	body   string
}

func fakeServer(t *testing.T, models, chat answer) (string, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		a := answer{http.StatusNotFound, `{"error":"not found"}`}
		switch r.URL.Path {
		case "/v1/models":
			a = models
		case "/v1/chat/completions":
			var req struct {
				Model     string `json:"model"`
				MaxTokens int    `json:"max_tokens"`
			}
			b, _ := io.ReadAll(r.Body)
			if json.Unmarshal(b, &req) != nil || req.Model != exactTag || req.MaxTokens != 16 {
				a = answer{http.StatusBadRequest, `{"error":"want the exact tag and a bounded completion"}`}
			} else {
				a = chat
			}
		}
		if a.status == 0 {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		io.WriteString(w, a.body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

func TestProbe(t *testing.T) {
	stop := `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`
	closed := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr + "/v1"
	}()
	cases := []struct {
		name     string
		models   answer
		chat     answer
		kind     string
		noV1     bool
		endpoint string // overrides the fake server
		want     aggregates.ProbeReading
		wantErr  string // substring of Error
		notErr   string // never in Error
		calls    []string
	}{
		{name: "Ollama lists the exact tag", models: answer{200, ollamaModels}, kind: aggregates.ProbeModels,
			want:  aggregates.ProbeReading{Kind: "models", Outcome: "ok", Models: []string{"llama3.2:3b", exactTag}, HTTPStatus: 200},
			calls: []string{"GET /v1/models"}},
		{name: "an endpoint without /v1", models: answer{200, ollamaModels}, kind: aggregates.ProbeModels, noV1: true,
			want:  aggregates.ProbeReading{Kind: "models", Outcome: "ok", Models: []string{"llama3.2:3b", exactTag}, HTTPStatus: 200},
			calls: []string{"GET /v1/models"}},
		{name: "llama.cpp lists its file, an alias: recorded as listed, judged by the node", models: answer{200, llamaCppModels}, kind: aggregates.ProbeModels,
			want: aggregates.ProbeReading{Kind: "models", Outcome: "ok", Models: []string{"qwen3-coder-30b-a3b-q4_k_m.gguf"}, HTTPStatus: 200}},
		{name: "a 500", models: answer{500, `{"error":"model runner crashed"}`}, kind: aggregates.ProbeModels,
			// The status only: never the body (issue #20; it used to quote it).
			want: aggregates.ProbeReading{Kind: "models", Outcome: "failed", HTTPStatus: 500}, wantErr: "/v1/models: HTTP 500", notErr: "crashed"},
		{name: "not the OpenAI shape", models: answer{200, `{"tags":["x"]}`}, kind: aggregates.ProbeModels,
			want: aggregates.ProbeReading{Kind: "models", Outcome: "failed", HTTPStatus: 200}, wantErr: "no \"data\" list"},
		{name: "no answer in time", models: answer{0, ""}, kind: aggregates.ProbeModels,
			want: aggregates.ProbeReading{Kind: "models", Outcome: "timeout"}, wantErr: "deadline"},
		{name: "nothing listens", endpoint: closed, kind: aggregates.ProbeModels,
			want: aggregates.ProbeReading{Kind: "models", Outcome: "unreachable"}, wantErr: "refused"},
		{name: "a smoke completion", models: answer{200, ollamaModels}, chat: answer{200, stop}, kind: aggregates.ProbeSmoke,
			want:  aggregates.ProbeReading{Kind: "smoke", Outcome: "ok", Models: []string{"llama3.2:3b", exactTag}, HTTPStatus: 200, SmokeFinishReason: "stop"},
			calls: []string{"GET /v1/models", "POST /v1/chat/completions"}},
		{name: "a smoke completion refused", models: answer{200, ollamaModels}, chat: answer{404, `{"error":"model not found"}`}, kind: aggregates.ProbeSmoke,
			want: aggregates.ProbeReading{Kind: "smoke", Outcome: "failed", Models: []string{"llama3.2:3b", exactTag}, HTTPStatus: 404}, wantErr: "smoke completion"},
		{name: "a smoke completion that never ends", models: answer{200, ollamaModels}, chat: answer{0, ""}, kind: aggregates.ProbeSmoke,
			want: aggregates.ProbeReading{Kind: "smoke", Outcome: "timeout", Models: []string{"llama3.2:3b", exactTag}}, wantErr: "smoke completion"},
		{name: "a smoke completion without a choice", models: answer{200, ollamaModels}, chat: answer{200, `{"choices":[]}`}, kind: aggregates.ProbeSmoke,
			want: aggregates.ProbeReading{Kind: "smoke", Outcome: "failed", Models: []string{"llama3.2:3b", exactTag}, HTTPStatus: 200}, wantErr: "no choice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url, seen := fakeServer(t, tc.models, tc.chat)
			endpoint := url + "/v1"
			switch {
			case tc.endpoint != "":
				endpoint = tc.endpoint
			case tc.noV1:
				endpoint = url
			}
			spec := aggregates.ProbeSpec{Kind: aggregates.LiveProbeKind(tc.kind), Endpoint: endpoint}
			if tc.kind == aggregates.ProbeSmoke {
				spec.ModelTag = exactTag
			}
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			defer cancel()
			got, ref := newProber(16, newGuardedDialer(&HostPolicy{AllowLoopbackProbeTargets: true}, nil)).probe(ctx, spec)
			if ref != nil {
				t.Fatalf("refused: %v", ref)
			}
			want := tc.want
			want.Endpoint = endpoint
			if diff := cmp.Diff(want, *got, cmpopts.IgnoreFields(aggregates.ProbeReading{}, "Latency", "Error")); diff != "" {
				t.Errorf("reading (-want +got):\n%s", diff)
			}
			if !strings.Contains(got.Error, tc.wantErr) || (tc.wantErr == "") != (got.Error == "") || tc.notErr != "" && strings.Contains(got.Error, tc.notErr) {
				t.Errorf("error %q, want it to contain %q (and not %q)", got.Error, tc.wantErr, tc.notErr)
			}
			if got.Latency.Duration <= 0 || got.Latency.Duration > time.Second {
				t.Errorf("latency %s", got.Latency)
			}
			if tc.calls != nil {
				if diff := cmp.Diff(tc.calls, seen()); diff != "" {
					t.Errorf("calls (-want +got):\n%s", diff)
				}
			}
		})
	}
}
