package api

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"

	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/wire"
)

// Signed events at the edge. An appended event may carry a DSSE envelope
// over its data; the node refuses the append unless every signature of
// every envelope verifies against the key ring as of the log's head (the
// keys registered and not revoked by ExecutorKeyRegistered/Revoked events).
// The check is a courtesy to honest clients, not the security boundary: a
// key revoked between this check and the append's position, or bytes
// changed on disk, are caught by `greffe verify`, which checks every
// envelope against the ring at the event's own position.

// KeyRing resolves the keys that may sign events (node/keyring.go keeps
// one current by subscription). Safe for concurrent use.
type KeyRing interface {
	// LookupAt waits until the ring has folded the first size events of the
	// log (or ctx ends) and returns a lookup valid from then on. An error
	// means the ring is unavailable: signed appends are then refused.
	LookupAt(ctx context.Context, size uint64) (events.KeyLookup, error)
}

// keyRingKey carries the server's key ring in request contexts.
type keyRingKey struct{}

// UseKeyRing makes the server check the envelopes of appended events
// against kr. Call it once, before Serve. Without a key ring every signed
// append is refused (unknown_key): the node fails closed.
func (s *Server) UseKeyRing(kr KeyRing) {
	next := s.handler
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyRingKey{}, kr)))
	})
}

// checkEnvelopes verifies every envelope of req against the key ring at
// the current head. Envelopes without signatures are left to validation
// (invalid_envelope).
func (s *Server) checkEnvelopes(r *http.Request, req *events.AppendRequest) error {
	var lookup events.KeyLookup
	for i, sa := range req.Streams {
		for j, p := range sa.Events {
			if p.Envelope == nil || len(p.Envelope.Signatures) == 0 {
				continue
			}
			if lookup == nil {
				var err error
				if lookup, err = s.keyLookup(r); err != nil {
					return err
				}
			}
			if _, err := events.VerifyEnvelope(p.Data, p.Envelope, lookup); err != nil {
				var se *events.SignatureError
				if !errors.As(err, &se) {
					return err
				}
				field := req.Streams[i].FieldPath(fmt.Sprintf("events[%d].envelope", j))
				return &wire.Error{Code: wire.CodeSignatureInvalid, Field: field,
					Message: fmt.Sprintf("the signature by %q does not verify against the key ring at position %d: %s; sign with a registered, unrevoked executor key", se.KeyID, s.ledger.Head().Size, se.Reason),
					Details: map[string]any{"reason": se.Reason, "key_id": se.KeyID}}
			}
		}
	}
	return nil
}

// keyLookup returns the ring's lookup at the current head; without a ring,
// a lookup that knows no key.
func (s *Server) keyLookup(r *http.Request) (events.KeyLookup, error) {
	kr, ok := r.Context().Value(keyRingKey{}).(KeyRing)
	if !ok {
		return func(string) (ed25519.PublicKey, bool, bool) { return nil, false, false }, nil
	}
	l, err := kr.LookupAt(r.Context(), s.ledger.Head().Size)
	if err != nil {
		return nil, &wire.Error{Code: wire.CodeUnavailable,
			Message: fmt.Sprintf("the key ring is not available (%v); retry later or append unsigned events", err)}
	}
	return l, nil
}
