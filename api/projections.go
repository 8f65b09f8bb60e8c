package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/greffe/greffe/projections"
	"github.com/greffe/greffe/wire"
)

// maxProjectionWait bounds how long GET /v1/projections/{name} waits for
// min_position before answering projection_lagging.
const maxProjectionWait = 10 * time.Second

// ReadModels is what the projection routes need from the node's read
// models (*projections.Set implements it; node wires it). Every method is
// safe for concurrent use.
type ReadModels interface {
	// Status returns where every projection stands, sorted by name.
	Status() []projections.Status
	// Render renders the live projection name for q (a zero q.Time: the
	// node's clock), with the position rendered.
	Render(name string, q projections.Query) ([]byte, uint64, error)
	// RenderAt renders projection name as of the log prefix [0, upto),
	// replayed, judged at q.Time (zero: the time of the event at upto).
	RenderAt(ctx context.Context, name string, upto uint64, q projections.Query) ([]byte, error)
	// WaitFor waits until projection name has folded the first position
	// events, or ctx ends (a *projections.LaggingError).
	WaitFor(ctx context.Context, name string, position uint64) error
}

// MountProjections adds GET /v1/projections (status and lag) and GET
// /v1/projections/{name} (readers). Call it before Serve.
func (s *Server) MountProjections(set ReadModels) {
	s.Handle("GET /v1/projections", func(w http.ResponseWriter, r *http.Request) {
		out := wire.ProjectionsOut{Head: s.ledger.Head().Size, Projections: []wire.ProjectionStatus{}}
		for _, st := range set.Status() {
			spec, _ := projections.SpecByName(st.Name)
			out.Projections = append(out.Projections, wire.ProjectionStatus{Name: st.Name, Description: spec.Description, Timed: spec.Timed,
				Position: st.Position, Committed: st.Committed, Head: st.Head, Lag: st.Lag, Error: st.Error})
		}
		writeJSON(w, http.StatusOK, out)
	}, readerRoles()...)
	s.Handle("GET /v1/projections/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		q, at, minPos, err := projectionQuery(r)
		if err != nil {
			writeError(w, err)
			return
		}
		if _, ok := projections.SpecByName(name); !ok {
			writeError(w, &projections.UnknownError{Name: name})
			return
		}
		var b []byte
		if at != nil {
			b, err = set.RenderAt(r.Context(), name, *at, q)
		} else {
			if minPos > 0 {
				ctx, cancel := context.WithTimeout(r.Context(), maxProjectionWait)
				err = set.WaitFor(ctx, name, minPos)
				cancel()
				if err != nil {
					w.Header().Set("Retry-After", "1")
					writeError(w, err)
					return
				}
			}
			b, _, err = set.Render(name, q)
		}
		if err != nil {
			writeError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(append(b, '\n'))
	}, readerRoles()...)
}

// projectionQuery reads at (a log position, or an RFC 3339 time), time,
// key and min_position.
func projectionQuery(r *http.Request) (projections.Query, *uint64, uint64, error) {
	v := r.URL.Query()
	var q projections.Query
	var at *uint64
	bad := func(field, msg string) error {
		return &wire.Error{Code: wire.CodeInvalidQuery, Field: field, Message: msg}
	}
	if s := v.Get("time"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return q, nil, 0, bad("time", "time must be an RFC 3339 time, e.g. 2026-03-01T09:00:00Z")
		}
		q.Time = t
	}
	if s := v.Get("at"); s != "" {
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			at = &n
		} else if t, err := time.Parse(time.RFC3339Nano, s); err == nil && q.Time.IsZero() {
			q.Time = t
		} else {
			return q, nil, 0, bad("at", "at is a log position (an integer) or an RFC 3339 time, not both at and time")
		}
	}
	q.Key = v.Get("key")
	var minPos uint64
	if s := v.Get("min_position"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return q, nil, 0, bad("min_position", "min_position must be a non-negative integer")
		}
		minPos = n
	}
	if at != nil && minPos > 0 {
		return q, nil, 0, bad("min_position", "min_position applies to the live projection, not to an as-of render")
	}
	return q, at, minPos, nil
}
