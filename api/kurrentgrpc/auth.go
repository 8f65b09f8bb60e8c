package kurrentgrpc

import (
	"context"
	"encoding/base64"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// Authentication. KurrentDB clients send the user and password of
// esdb://USER:PASSWORD@host as HTTP basic auth in the "authorization"
// metadata of every call, and only over TLS (their credentials declare
// RequireTransportSecurity). A node with tokens checks them here: the user is
// the token's name and the password the token itself. Without an
// Authenticator the surface accepts anyone, which New allows on loopback only.

// Principal is who a call authenticated as.
type Principal struct {
	// Name is recorded as the actor of the events it appends.
	Name string
	// MayAppend is false for a read-only principal: its appends are refused
	// with CodeForbidden.
	MayAppend bool
}

// Authenticator checks a user and password; ok is false for unknown ones.
type Authenticator func(user, password string) (p Principal, ok bool)

// Error codes of authentication (also those of the HTTP API).
const (
	// CodeUnauthorized: no credentials, or unknown ones.
	CodeUnauthorized = "unauthorized"
	// CodeForbidden: known credentials whose role may not append.
	CodeForbidden = "forbidden"
)

type principalKey struct{}

// principal returns the call's principal: the authenticated one, or the
// configured Actor with every right when the surface has no Authenticator.
func (s *Server) principal(ctx context.Context) Principal {
	if p, ok := ctx.Value(principalKey{}).(Principal); ok {
		return p
	}
	return Principal{Name: s.cfg.Actor, MayAppend: true}
}

// authenticate checks the call's credentials. The Streams service needs
// them; server features and gossip (a version and this address, as GET
// /healthz tells) are answered to anyone, since clients call them first.
func (s *Server) authenticate(ctx context.Context, method string) (context.Context, error) {
	if s.cfg.Authenticate == nil || !strings.HasPrefix(method, "/event_store.client.streams.Streams/") {
		return ctx, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	var user, password string
	ok := false
	if v := md.Get("authorization"); len(v) == 1 {
		if enc, found := strings.CutPrefix(v[0], "Basic "); found {
			if raw, err := base64.StdEncoding.DecodeString(enc); err == nil {
				user, password, ok = strings.Cut(string(raw), ":")
			}
		}
	}
	if !ok {
		return ctx, s.toStatus(ctx, refusef(CodeUnauthorized, "send credentials: esdb://NAME:TOKEN@host?tls=true, with a token of this node"))
	}
	p, known := s.cfg.Authenticate(user, password)
	if !known {
		return ctx, s.toStatus(ctx, refusef(CodeUnauthorized, "user %q with this password is not known to this node; the user is a token's name, the password the token", user))
	}
	return context.WithValue(ctx, principalKey{}, p), nil
}

func (s *Server) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, err := s.authenticate(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (s *Server) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, err := s.authenticate(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return h(srv, authedStream{ServerStream: ss, ctx: ctx})
}

// authedStream carries the authenticated context to the handler.
type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (a authedStream) Context() context.Context { return a.ctx }
