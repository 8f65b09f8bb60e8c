package kurrentgrpc

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/greffe/greffe/events"
)

// Error codes of the gRPC surface (the log's own codes come from events).
// They are sent in the status message and in the CodeTrailer trailer. Never
// renamed, never reused.
const (
	// CodeInvalidRequest: a request the protocol does not allow (no
	// options, a message out of order, a backwards subscription, an
	// unreadable id).
	CodeInvalidRequest = "invalid_request"
	// CodeInvalidFilter: a subscription or read filter whose regular
	// expression does not compile.
	CodeInvalidFilter = "invalid_filter"
	// CodeAppendOnly: Delete and Tombstone; greffe never removes history.
	CodeAppendOnly = "append_only"
	// CodeTooManyStreams: the caller (or the node) has as many Read calls
	// open as it may (Config.MaxReadsPerPrincipal, MaxReads); sent as
	// RESOURCE_EXHAUSTED. Close one, or retry later.
	CodeTooManyStreams = "too_many_streams"
)

// CodeTrailer is the trailer that carries the stable code of a refusal.
const CodeTrailer = "greffe-code"

// refusef builds a refusal of the gRPC surface: the one coded error shape
// below the API, *events.Error, with no field path (a gRPC request has no
// JSON body to point into).
func refusef(code, format string, args ...any) *events.Error {
	return events.Refusef(code, "", format, args...)
}

// grpcCode maps a stable code to the gRPC status code the EventStore client
// turns into its own error kinds (PermissionDenied → access denied,
// AlreadyExists → resource already exists, NotFound → resource not found);
// a code without a case of its own takes its kind's (events.Kind: what
// happened to the request), as the HTTP API's table does.
func grpcCode(code string, kind events.Kind) codes.Code {
	switch code {
	case events.CodeReservedStream, events.CodeReservedStreamName, CodeForbidden:
		return codes.PermissionDenied
	case CodeUnauthorized:
		return codes.Unauthenticated
	case events.CodeDuplicateEventID:
		return codes.AlreadyExists
	case events.CodeNotFound, events.CodeStreamNotFound:
		return codes.NotFound
	case events.CodeEventTooLarge, events.CodeAppendTooLarge, events.CodeTooManyEvents, CodeTooManyStreams:
		return codes.ResourceExhausted
	case events.CodeStoreFailed:
		return codes.Unavailable
	case events.CodeOutcomeUnknown:
		return codes.Unknown
	case CodeAppendOnly:
		return codes.Unimplemented
	case events.CodeWrongExpectedVersion:
		return codes.FailedPrecondition
	}
	switch kind {
	case events.KindFailed:
		return codes.Unavailable
	case events.KindUncertain:
		return codes.Unknown
	case events.KindCorrupt:
		return codes.DataLoss
	}
	return codes.InvalidArgument
}

// toStatus turns err into a gRPC status error, setting the code trailer on
// ctx's call when err carries a code. Nil stays nil.
func (s *Server) toStatus(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	code := events.CodeOf(err)
	// outcome_unknown wraps a context error; it keeps its code so that the
	// client knows the append may have been written.
	if code != events.CodeOutcomeUnknown {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return status.FromContextError(err).Err()
		case errors.Is(err, events.ErrClosed):
			return status.Error(codes.Unavailable, err.Error())
		case errors.Is(err, events.ErrCorrupt):
			s.cfg.Logger.Error("grpc call hit corrupt data", "err", err)
			return status.Error(codes.DataLoss, err.Error())
		}
	}
	if code == "" {
		s.cfg.Logger.Error("grpc call failed", "err", err)
		return status.Error(codes.Internal, err.Error())
	}
	kind := events.KindRefused
	if d, ok := events.AsCoded(err); ok {
		kind = d.Kind
	}
	_ = grpc.SetTrailer(ctx, metadata.Pairs(CodeTrailer, code))
	return status.Error(grpcCode(code, kind), err.Error())
}
