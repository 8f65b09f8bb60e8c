package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/wire"
)

// MountCommands adds POST /v1/commands (every role that sends a command;
// which role sends which command is the catalogue's rule,
// aggregates.MaySend, that the deciders apply: a refused role is a
// recorded role_not_allowed, 403) and GET /v1/policy (readers). Call it
// before Serve.
func (s *Server) MountCommands(h *commands.Handler) {
	s.Handle("POST /v1/commands", s.postCommand(h), commandRouteRoles()...)
	s.Handle("GET /v1/policy", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, h.Policy())
	}, readerRoles()...)
}

// positionHeader carries the log size that includes a command's outcome
// (also on refusals): read your own writes with min_position.
const positionHeader = "Greffe-Position"

func (s *Server) postCommand(h *commands.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in wire.CommandIn
		if err := decodeBody(w, r, &in); err != nil {
			writeError(w, err)
			return
		}
		p := PrincipalFrom(r.Context())
		res, err := h.Handle(r.Context(), commands.Request{Command: in.Command, ID: in.ID, Principal: p.Aggregates(), Actor: in.Actor,
			CorrelationID: in.CorrelationID, At: in.At, Data: in.Data})
		if err != nil {
			var re *commands.RefusedError
			if errors.As(err, &re) {
				w.Header().Set(positionHeader, strconv.FormatUint(re.Event.Position+1, 10))
			}
			writeError(w, err)
			return
		}
		out := wire.CommandOut{Command: res.Command, CommandID: res.CommandID.String(), Outcome: res.Outcome, Duplicate: res.Duplicate,
			Events: make([]wire.CommandEvent, len(res.Events)), Position: res.Position, Head: s.ledger.Head().Size, At: res.At, Retries: res.Retries}
		for i, e := range res.Events {
			out.Events[i] = wire.CommandEvent{ID: e.ID, Stream: e.Stream, Version: e.Version, Position: e.Position, Type: e.Type,
				LeafHash: e.LeafHash[:], RecordedAt: e.RecordedAt}
		}
		w.Header().Set(positionHeader, strconv.FormatUint(res.Position, 10))
		if s.proven(w, r, out, commandPositions(out), true) { // ?prove=1: api/proven.go
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}
