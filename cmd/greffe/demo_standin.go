package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// standIn is a local OpenAI-compatible stand-in runtime for greffe demo:
// it answers GET /v1/models with a fixed list, in the shape its flavour
// (Ollama or a llama.cpp server) answers, and a chat completion with
// "ok". POST /demo/stop closes its listener, so that the next probe finds
// nothing there: the demo's way to show a row turn red. It listens on
// 127.0.0.1 only.
type standIn struct {
	name   string
	models []string
	ln     net.Listener
	srv    *http.Server
	done   chan struct{} // closed when Serve returned
	stop   sync.Once
}

// startStandIn listens on addr (falling back to 127.0.0.1:0 when addr
// is taken or empty) and serves.
func startStandIn(addr, name, ownedBy string, models []string) (*standIn, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil && addr != "127.0.0.1:0" {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return nil, fmt.Errorf("stand-in %s: %w", name, err)
	}
	s := &standIn{name: name, models: models, ln: ln, done: make(chan struct{})}
	list := struct {
		Object string `json:"object"`
		Data   []any  `json:"data"`
	}{Object: "list"}
	for _, m := range models {
		list.Data = append(list.Data, map[string]any{"id": m, "object": "model", "created": 1767225600, "owned_by": ownedBy})
	}
	body, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	})
	mux.HandleFunc("POST /demo/stop", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "stand-in %s stopped: its next probe finds nothing listening\n", s.name)
		// Closing the listener refuses new connections; this one finishes.
		s.stop.Do(func() { s.ln.Close() })
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is the stand-in's OpenAI-compatible base, ".../v1".
func (s *standIn) URL() string { return "http://" + s.ln.Addr().String() + "/v1" }

// Addr is the address it listens on.
func (s *standIn) Addr() string { return s.ln.Addr().String() }

// StopURL is where POST stops it.
func (s *standIn) StopURL() string { return "http://" + s.ln.Addr().String() + "/demo/stop" }

// Close stops serving and waits.
func (s *standIn) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	<-s.done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
