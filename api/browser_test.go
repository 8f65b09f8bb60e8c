package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/node/nodetest"
	"github.com/greffe/greffe/wire"
)

// Issue #20, finding 13: without tokens any web page was admin. A page on
// evil.example whose name is rebound to 127.0.0.1 (DNS rebinding) reads
// the node as same-origin, and GET /v1/backup returned the private key; a
// page on any origin could POST to it (a form, or fetch with no-cors,
// sends text/plain or no Content-Type, which needs no CORS preflight).
// These tests send what such a browser sends, over a real connection.

// browserNode is a real node (node.Open: its store, its keys, GET
// /v1/backup, the dashboard, as greffe serve runs it) on a loopback port,
// with tokens or not. It returns the base URL, its host:port, the store and
// the bytes of the node's private key file.
func browserNode(t *testing.T, tokens *api.Tokens) (string, string, *pebblelog.Store, []byte) {
	t.Helper()
	dir := t.TempDir()
	n, stop := nodetest.Serve(t, node.Config{DataDir: dir, API: api.Config{Addr: "127.0.0.1:0", Tokens: tokens}})
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	keys, err := filepath.Glob(filepath.Join(dir, "keys", "*"))
	if err != nil || len(keys) == 0 {
		t.Fatalf("the node's key folder: %v %v", keys, err)
	}
	var private []byte
	for _, k := range keys {
		if b, err := os.ReadFile(k); err == nil && strings.Contains(string(b), "PRIVATE+KEY") {
			private = b
		}
	}
	if private == nil {
		t.Fatalf("no private key among %v", keys)
	}
	return n.URL(), strings.TrimPrefix(n.URL(), "http://"), n.Store, private
}

// sendAs sends one request with the given Host, Origin and Content-Type
// ("" leaves them out; Host "" is the URL's) and returns the status, the
// error code and the body.
func sendAs(t *testing.T, method, url, host, origin, contentType, body, token string) (int, string, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var eb wire.ErrorBody
	code := ""
	if json.Unmarshal(b, &eb) == nil && eb.Error != nil {
		code = eb.Error.Code
	}
	return resp.StatusCode, code, string(b)
}

type answerIs struct {
	Status int
	Code   string
}

// TestNoTokens_RefusesForeignHost: without tokens the node answers only
// requests addressed to a loopback name; a rebinding attacker's Host is
// refused with 403 host_not_allowed on every route, the backup (and its
// private key) included. Before the fix GET /v1/backup answered 200 with
// the key.
func TestNoTokens_RefusesForeignHost(t *testing.T) {
	url, hostport, _, private := browserNode(t, nil)
	_, port, _ := strings.Cut(hostport, ":")
	tests := []struct {
		name, path, host string
		want             answerIs
	}{
		{"rebound name, backup with the keys", "/v1/backup?include_keys=true", "evil.example.com:" + port, answerIs{403, "host_not_allowed"}},
		{"rebound name, backup without port", "/v1/backup", "evil.example.com", answerIs{403, "host_not_allowed"}},
		{"rebound name, info", "/v1/info", "evil.example.com:" + port, answerIs{403, "host_not_allowed"}},
		{"rebound name, health", "/healthz", "evil.example.com:" + port, answerIs{403, "host_not_allowed"}},
		{"a name ending in localhost", "/v1/info", "localhost.evil.example:" + port, answerIs{403, "host_not_allowed"}},
		{"a private address", "/v1/info", "192.168.1.10:" + port, answerIs{403, "host_not_allowed"}},
		{"the any address", "/v1/info", "0.0.0.0:" + port, answerIs{403, "host_not_allowed"}},
		{"loopback IPv4", "/v1/info", hostport, answerIs{200, ""}},
		{"another loopback IPv4", "/v1/info", "127.8.9.10:" + port, answerIs{200, ""}},
		{"localhost", "/v1/info", "localhost:" + port, answerIs{200, ""}},
		{"localhost, capitals, no port", "/v1/info", "LocalHost", answerIs{200, ""}},
		{"loopback IPv6", "/v1/info", "[::1]:" + port, answerIs{200, ""}},
		{"backup on loopback", "/v1/backup?keys=false", hostport, answerIs{200, ""}},
		{"rebound name, the dashboard", "/", "evil.example.com:" + port, answerIs{403, "host_not_allowed"}},
		{"the dashboard on loopback", "/", hostport, answerIs{200, ""}},
		{"the dashboard's script on loopback", "/ui/app.js", "localhost:" + port, answerIs{200, ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, code, body := sendAs(t, http.MethodGet, url+tc.path, tc.host, "", "", "", "")
			if diff := cmp.Diff(tc.want, answerIs{status, code}); diff != "" {
				t.Fatalf("Host %s (-want +got):\n%s\n%.300s", tc.host, diff, body)
			}
			if tc.want.Status != 200 && strings.Contains(body, strings.TrimSpace(string(private))) {
				t.Fatal("the refusal carries the private key")
			}
		})
	}
}

// TestNoTokens_RefusesForeignOrigin: without tokens a request whose Origin
// is not the node's own (a loopback origin on its port) is refused with
// 403 origin_not_allowed, and a refused append writes nothing. The
// dashboard's own requests (same origin: no Origin on its GETs, its own
// on anything else) pass. Before the fix every origin was served.
func TestNoTokens_RefusesForeignOrigin(t *testing.T) {
	url, hostport, st, _ := browserNode(t, nil)
	_, port, _ := strings.Cut(hostport, ":")
	body := `{"events": [{"type": "A"}]}`
	tests := []struct {
		name, method, path, origin string
		want                       answerIs
	}{
		{"foreign page reads", http.MethodGet, "/v1/backup", "http://evil.example", answerIs{403, "origin_not_allowed"}},
		{"foreign page appends", http.MethodPost, "/v1/streams/o", "http://evil.example", answerIs{403, "origin_not_allowed"}},
		{"sandboxed page", http.MethodPost, "/v1/streams/o", "null", answerIs{403, "origin_not_allowed"}},
		{"another loopback port", http.MethodPost, "/v1/streams/o", "http://127.0.0.1:1", answerIs{403, "origin_not_allowed"}},
		{"another scheme", http.MethodPost, "/v1/streams/o", "https://" + hostport, answerIs{403, "origin_not_allowed"}},
		{"foreign host on our port", http.MethodGet, "/v1/info", "http://evil.example:" + port, answerIs{403, "origin_not_allowed"}},
		{"own origin", http.MethodPost, "/v1/streams/o", "http://" + hostport, answerIs{200, ""}},
		{"own origin by name", http.MethodGet, "/v1/info", "http://localhost:" + port, answerIs{200, ""}},
		{"no origin (same-origin GET, curl)", http.MethodGet, "/v1/info", "", answerIs{200, ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := st.Head()
			b := ""
			if tc.method == http.MethodPost {
				b = body
			}
			status, code, out := sendAs(t, tc.method, url+tc.path, "", tc.origin, "application/json", b, "")
			if diff := cmp.Diff(tc.want, answerIs{status, code}); diff != "" {
				t.Fatalf("Origin %s (-want +got):\n%s\n%.300s", tc.origin, diff, out)
			}
			if tc.want.Status != 200 && st.Head() != before {
				t.Fatalf("a refused request changed the ledger: %+v -> %+v", before, st.Head())
			}
		})
	}
}

// TestPost_RequiresJSON: a POST whose body is not declared
// application/json (parameters allowed) is refused with 415
// unsupported_media_type before anything is written, with or without
// tokens: such a POST is what a page on another origin can send without a
// CORS preflight. Before the fix a POST without Content-Type was
// appended.
func TestPost_RequiresJSON(t *testing.T) {
	tokens, err := api.NewTokens([]api.Token{{Name: "writer", Role: api.RoleWriter, Token: "writer-token-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []struct {
		name   string
		tokens *api.Tokens
		token  string
	}{{"without tokens", nil, ""}, {"with tokens", tokens, "writer-token-0123456789"}} {
		t.Run(tok.name, func(t *testing.T) {
			url, _, st, _ := browserNode(t, tok.tokens)
			tests := []struct {
				name, path, contentType, body string
				want                          answerIs
			}{
				{"no content type", "/v1/streams/p", "", `{"events": [{"type": "A"}]}`, answerIs{415, "unsupported_media_type"}},
				{"text/plain (a form, fetch no-cors)", "/v1/streams/p", "text/plain", `{"events": [{"type": "A"}]}`, answerIs{415, "unsupported_media_type"}},
				{"form encoding", "/v1/streams/p", "application/x-www-form-urlencoded", `{"events": [{"type": "A"}]}`, answerIs{415, "unsupported_media_type"}},
				{"a type that starts like json", "/v1/streams/p", "application/jsonp", `{"events": [{"type": "A"}]}`, answerIs{415, "unsupported_media_type"}},
				{"not a media type", "/v1/streams/p", "application/json;;", `{"events": [{"type": "A"}]}`, answerIs{415, "unsupported_media_type"}},
				{"multi append without type", "/v1/append", "", `{"appends": [{"stream": "p", "events": [{"type": "A"}]}]}`, answerIs{415, "unsupported_media_type"}},
				{"json", "/v1/streams/p", "application/json", `{"events": [{"type": "A"}]}`, answerIs{200, ""}},
				{"json with charset", "/v1/streams/p", "application/json; charset=utf-8", `{"events": [{"type": "A"}]}`, answerIs{200, ""}},
				{"json in capitals", "/v1/append", "Application/JSON", `{"appends": [{"stream": "p", "events": [{"type": "A"}]}]}`, answerIs{200, ""}},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					before := st.Head()
					status, code, out := sendAs(t, http.MethodPost, url+tc.path, "", "", tc.contentType, tc.body, tok.token)
					if diff := cmp.Diff(tc.want, answerIs{status, code}); diff != "" {
						t.Fatalf("Content-Type %q (-want +got):\n%s\n%.300s", tc.contentType, diff, out)
					}
					if tc.want.Status != 200 && st.Head() != before {
						t.Fatalf("a refused POST changed the ledger: %+v -> %+v", before, st.Head())
					}
				})
			}
		})
	}
}

// TestTokens_HostAndOriginLeftToTheToken: with tokens, a foreign Host or
// Origin is not refused (a page cannot send the bearer token of another
// origin: the browser's CORS preflight, which the node never grants,
// stops it), and the token decides as usual.
func TestTokens_HostAndOriginLeftToTheToken(t *testing.T) {
	tokens, err := api.NewTokens([]api.Token{{Name: "reader", Role: api.RoleReader, Token: "reader-token-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	url, _, _, _ := browserNode(t, tokens)
	for _, tc := range []struct {
		name, host, origin, token string
		want                      answerIs
	}{
		{"foreign host, no token", "greffe.example.com", "", "", answerIs{401, "unauthorized"}},
		{"foreign host and origin, token", "greffe.example.com", "https://ops.example.com", "reader-token-0123456789", answerIs{200, ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, code, out := sendAs(t, http.MethodGet, url+"/v1/info", tc.host, tc.origin, "", "", tc.token)
			if diff := cmp.Diff(tc.want, answerIs{status, code}); diff != "" {
				t.Fatalf("(-want +got):\n%s\n%.300s", diff, out)
			}
		})
	}
}
