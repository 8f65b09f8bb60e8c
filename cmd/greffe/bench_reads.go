package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/api"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/client/verified"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/events/pebblelog"
)

// readFigure is one line of `greffe bench --reads`: the rate of one kind
// of read, unverified and verified (client/verified: ?prove=1 and every
// proof checked), one reader, over loopback.
type readFigure struct {
	What              string  `json:"what"`
	Events            int     `json:"events_per_read"`
	ReadsPerSec       float64 `json:"reads_per_sec"`
	VerifiedPerSec    float64 `json:"verified_reads_per_sec"`
	VerifiedOverPlain float64 `json:"verified_over_unverified"`
}

// benchReadsEvents is the log an embedded read bench fills first: enough
// for pages of 1,000 at positions spread over a tree of realistic depth.
const benchReadsEvents = 20000

// benchReads measures reads of 1 event (by id), and of global-log pages
// of 100 and 1,000 events, each for d unverified then for d verified,
// alternating twice so that the machine's drift falls on both.
func benchReads(ctx context.Context, c *client.Client, d time.Duration) ([]readFigure, error) {
	info, err := c.Info(ctx)
	if err != nil {
		return nil, err
	}
	head := info.Head.Size
	if head < 1000 {
		return nil, fmt.Errorf("bench --reads needs a log of at least 1,000 events; the node holds %d", head)
	}
	vc, err := verified.New(ctx, c, verified.Config{})
	if err != nil {
		return nil, err
	}
	first, err := c.ReadAll(ctx, events.ReadOptions{Limit: 1})
	if err != nil || len(first.Events) == 0 {
		return nil, fmt.Errorf("bench --reads: read the first event: %w", err)
	}
	id := first.Events[0].ID.String()
	type read func(i int, verify bool) error
	page := func(n int) read {
		return func(i int, verify bool) error {
			o := events.ReadOptions{From: uint64(i*n) % (head - uint64(n) + 1), Limit: n}
			if verify {
				_, err := vc.ReadAll(ctx, o)
				return err
			}
			_, err := c.ReadAll(ctx, o)
			return err
		}
	}
	kinds := []struct {
		what string
		n    int
		r    read
	}{
		{"event by id", 1, func(_ int, verify bool) error {
			if verify {
				_, err := vc.Event(ctx, id)
				return err
			}
			_, err := c.Event(ctx, id)
			return err
		}},
		{"global page", 100, page(100)},
		{"global page", 1000, page(1000)},
	}
	out := make([]readFigure, len(kinds))
	for k, kind := range kinds {
		var count [2]int
		var spent [2]time.Duration
		for range 2 {
			for v := range 2 {
				start := time.Now()
				for i := 0; time.Since(start) < d/4; i++ {
					if err := kind.r(i, v == 1); err != nil {
						return nil, fmt.Errorf("%s of %d (verified %t): %w", kind.what, kind.n, v == 1, err)
					}
					count[v]++
				}
				spent[v] += time.Since(start)
			}
		}
		plain, ver := float64(count[0])/spent[0].Seconds(), float64(count[1])/spent[1].Seconds()
		out[k] = readFigure{What: kind.what, Events: kind.n, ReadsPerSec: plain, VerifiedPerSec: ver, VerifiedOverPlain: ver / plain}
	}
	return out, nil
}

// embeddedReadNode serves a store of benchReadsEvents events in dir over
// loopback, for bench --reads --embedded; close stops it.
func embeddedReadNode(ctx context.Context, dir string, payload int) (base string, close func(), err error) {
	skey, vkey, err := note.GenerateKey(rand.Reader, events.Origin("bench-reads"))
	if err != nil {
		return "", nil, err
	}
	signer, _ := note.NewSigner(skey)
	s, err := pebblelog.Open(pebblelog.Config{Dir: filepath.Join(dir, "reads"), LedgerID: "bench-reads", Signers: []note.Signer{signer}})
	if err != nil {
		return "", nil, err
	}
	data := json.RawMessage(`{"p":"` + strings.Repeat("x", max(payload-8, 0)) + `"}`)
	for i := 0; i < benchReadsEvents; i += 1000 {
		evs := make([]events.Proposed, 1000)
		for j := range evs {
			evs[j] = events.Proposed{ID: uuid.New(), Type: "Benched", Data: data, Metadata: json.RawMessage(`{}`)}
		}
		if _, err := s.Append(ctx, events.AppendRequest{Streams: []events.StreamAppend{{Stream: fmt.Sprintf("bench-%d", i/1000), Events: evs}}}); err != nil {
			_ = s.Close()
			return "", nil, err
		}
	}
	srv, err := api.New(api.Config{Addr: "127.0.0.1:0", Verifiers: func() []string { return []string{vkey} }}, s)
	if err != nil {
		_ = s.Close()
		return "", nil, err
	}
	addr, err := srv.Listen()
	if err != nil {
		_ = s.Close()
		return "", nil, err
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	return "http://" + addr.String(), func() { _ = srv.Close(); <-done; _ = s.Close() }, nil
}

func printReadFigures(w io.Writer, figs []readFigure) {
	fmt.Fprintf(w, "%-14s %7s %14s %14s %9s\n", "read", "events", "unverified/s", "verified/s", "ratio")
	for _, f := range figs {
		fmt.Fprintf(w, "%-14s %7d %14.0f %14.0f %8.2fx\n", f.What, f.Events, f.ReadsPerSec, f.VerifiedPerSec, f.VerifiedOverPlain)
	}
}
