package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// StreamLister is the capability of a Ledger that lists its streams
// (*pebblelog.Store): ListStreams returns, in name order, at most limit
// streams named with prefix and sorting after after. Safe for concurrent
// use.
type StreamLister interface {
	ListStreams(ctx context.Context, prefix, after string, limit int) ([]events.StreamInfo, error)
}

func (s *Server) streamRoutes() {
	s.Handle("GET /v1/streams", s.listStreams, readerRoles()...)
}

// listStreams serves GET /v1/streams?prefix=P&after=NAME&limit=N: the
// streams in name order with their last version and position, and next
// (the after of the next page) when the page is full.
func (s *Server) listStreams(w http.ResponseWriter, r *http.Request) {
	l, ok := s.ledger.(StreamLister)
	if !ok {
		writeError(w, &wire.Error{Code: wire.CodeInternal, Message: "this node's store cannot list streams"})
		return
	}
	q := r.URL.Query()
	limit := events.DefaultListStreams
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > events.MaxListStreams {
			writeError(w, &wire.Error{Code: wire.CodeInvalidQuery, Field: "limit", Message: fmt.Sprintf("limit %q: use 1 to %d", v, events.MaxListStreams)})
			return
		}
		limit = n
	}
	list, err := l.ListStreams(r.Context(), q.Get("prefix"), q.Get("after"), limit)
	if err != nil {
		writeError(w, err)
		return
	}
	out := wire.StreamsOut{Streams: list}
	if out.Streams == nil {
		out.Streams = []events.StreamInfo{}
	}
	if len(list) == limit {
		out.Next = list[len(list)-1].Name
	}
	writeJSON(w, http.StatusOK, out)
}
