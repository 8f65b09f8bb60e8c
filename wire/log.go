package wire

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/greffe/greffe/events"
)

// The bodies of the log's routes: appends, reads, streams and
// GET /v1/info (docs/API.md).

// EventIn is one event of an append request body.
type EventIn struct {
	// ID is the idempotency key (a UUID); the node generates one if empty.
	ID string `json:"id,omitempty"`
	// Type is the event's type.
	Type string `json:"type"`
	// Data is the event's data, a JSON object, stored as sent.
	Data json.RawMessage `json:"data,omitempty"`
	// Metadata is the event's metadata, a JSON object, stored as sent.
	Metadata json.RawMessage `json:"metadata,omitempty"`
	// CorrelationID groups events (an audit trail); empty when none.
	CorrelationID string `json:"correlation_id,omitempty"`
	// CausationID names what caused the event; empty when none.
	CausationID string `json:"causation_id,omitempty"`
	// Envelope carries DSSE signatures over Data (sig in base64).
	Envelope *events.Envelope `json:"envelope,omitempty"`
}

// StreamAppendIn is the body of POST /v1/streams/{stream} and one entry of
// POST /v1/append.
type StreamAppendIn struct {
	// Stream is the stream to append to (the path's, for POST
	// /v1/streams/{stream}).
	Stream string `json:"stream,omitempty"`
	// ExpectedVersion is the version the stream must be at for the append to
	// happen.
	ExpectedVersion events.Expected `json:"expected_version"`
	// Events are the events to append, in order.
	Events []EventIn `json:"events"`
}

// AppendIn is the body of POST /v1/append.
type AppendIn struct {
	// Appends are the appends, each to one stream; all happen or none.
	Appends []StreamAppendIn `json:"appends"`
}

// AppendedEvent is one stored event in an append response.
type AppendedEvent struct {
	// ID is the event's UUID (the one sent, or the one the node chose).
	ID uuid.UUID `json:"id"`
	// Stream is the stream the event was appended to.
	Stream string `json:"stream"`
	// Version is the event's index in its stream, from 0.
	Version uint64 `json:"version"`
	// Position is the event's index in the global log, from 0.
	Position uint64 `json:"position"`
	// LeafHash is the event's Merkle leaf hash, SHA-256(0x00 || its canonical
	// encoding), base64.
	LeafHash []byte `json:"leaf_hash"`
	// RecordedAt is when the node recorded it (RFC 3339, nanoseconds, UTC).
	RecordedAt time.Time `json:"recorded_at"`
}

// AppendOut is the response of both append routes.
type AppendOut struct {
	// Events are the appended events, in position order.
	Events []AppendedEvent `json:"events"`
	// Duplicate is true when every event was already in the log with the
	// same content: nothing was written and Events are the originals.
	Duplicate bool `json:"duplicate"`
}

// ReadOut is the response of the read routes. Next, when set, is the From
// of the next page in the same direction.
type ReadOut struct {
	// Events are the events read, in order.
	Events []events.Event `json:"events"`
	// Next is where to read from next; absent at the end.
	Next *uint64 `json:"next,omitempty"`
}

// AppendJSON appends the page's JSON to b with each event's data and
// metadata as stored (events.Event.AppendJSON): encoding/json would
// compact and HTML-escape them.
func (o ReadOut) AppendJSON(b []byte) []byte {
	if o.Events == nil {
		b = append(b, `{"events":null`...)
	} else {
		b = append(b, `{"events":[`...)
	}
	for i := range o.Events {
		if i > 0 {
			b = append(b, ',')
		}
		b = o.Events[i].AppendJSON(b)
	}
	if o.Events != nil {
		b = append(b, ']')
	}
	if o.Next != nil {
		b = append(b, `,"next":`...)
		b = strconv.AppendUint(b, *o.Next, 10)
	}
	return append(b, '}')
}

// InfoOut is the response of GET /v1/info.
type InfoOut struct {
	// LedgerID is the ledger's id: chosen once at creation, the same on every
	// node of a cluster.
	LedgerID string `json:"ledger_id"`
	// Origin is the ledger's origin: the name its checkpoints are signed
	// under.
	Origin string `json:"origin"`
	// NodeID is this node's id in the cluster; empty for a single node.
	NodeID string `json:"node_id,omitempty"`
	// Version is the node's greffe version.
	Version string `json:"version,omitempty"`
	// VerifierKeys are the note verifier keys of the ledger's checkpoints.
	VerifierKeys []string `json:"verifier_keys"`
	// Head is the log's head on this node.
	Head HeadOut `json:"head"`
	// Build is what the node's binary is (greffe version); nil from a
	// node before it was reported.
	Build *VersionOut `json:"build,omitempty"`
}

// VersionOut is what a greffe binary is: `greffe version --json`, and
// "build" in GET /v1/info (docs/OPERATIONS.md, "Install").
type VersionOut struct {
	// Version is the release (stamped with -ldflags at a release build,
	// or the module version of `go install …@vX`), else the source's
	// version with "-dev".
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from, "" when
	// unknown (built outside a checkout, or with -buildvcs=false);
	// Modified says the work tree had uncommitted changes.
	Commit string `json:"commit,omitempty"`
	// CommitTime is when the commit was made; absent when unknown.
	CommitTime time.Time `json:"commit_time,omitzero"`
	// Modified says the work tree had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"go_version"`
	// APIVersion is the HTTP API's version: the /v1 of its routes.
	APIVersion string `json:"api_version"`
	// StoreFormat is the store format the binary writes; StoreFormatsRead
	// those it opens (newest first; older ones are upgraded in place on
	// open, after which older binaries refuse the folder).
	StoreFormat string `json:"store_format"`
	// StoreFormatsRead are the store formats the binary can open.
	StoreFormatsRead []string `json:"store_formats_read"`
}

// HeadOut is the acknowledged head.
type HeadOut struct {
	// Size is the log's size: the number of events.
	Size uint64 `json:"size"`
	// Root is the Merkle root of the log's events, base64.
	Root string `json:"root"`
	// RecordedAt is when the newest event was recorded; absent for an empty
	// log.
	RecordedAt time.Time `json:"recorded_at,omitzero"`
}

// StreamsOut is a page of GET /v1/streams: streams in name order, and Next,
// the after of the next page, when the page was full ("" at the end).
type StreamsOut struct {
	// Streams are the streams, sorted by name.
	Streams []events.StreamInfo `json:"streams"`
	// Next is the name to list from next; absent at the end.
	Next string `json:"next,omitempty"`
}
