package commands_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events"
)

// TestHandler_ResendReordered: a command re-sent with the same id, name and
// data but its keys in another order and other whitespace (another JSON
// library's retry after outcome_unknown) is the same command: the original
// outcome, duplicate, nothing appended. Before issue #15 the digest was
// over the compacted bytes and the re-send answered command_id_reused.
func TestHandler_ResendReordered(t *testing.T) {
	s := openStore(t)
	h, _ := newHandler(t, s, nil)
	id := uuid.NewString()
	first := commands.Request{Command: "GrantApproval", ID: id, Principal: owner,
		Data: json.RawMessage(`{"approval_id":"a1","approver":"owner","action":"startup","subject":"provider-p","uses":1,"expires_at":"2026-09-07T10:00:00Z"}`)}
	orig := mustHandle(t, h, first)
	head := s.Head().Size
	again := first
	again.Data = json.RawMessage("{\n  \"expires_at\": \"2026-09-07T10:00:00Z\",\n  \"uses\": 1,\n  \"subject\": \"provider-\\u0070\",\n  \"action\": \"startup\", \"approver\": \"owner\", \"approval_id\": \"a1\"\n}")
	res, err := h.Handle(context.Background(), again)
	if err != nil {
		t.Fatalf("re-send with keys reordered: %v", err)
	}
	if !res.Duplicate || s.Head().Size != head || res.Events[0].ID != orig.Events[0].ID {
		t.Fatalf("re-send: duplicate=%v, head %d -> %d", res.Duplicate, head, s.Head().Size)
	}
	// Other data under the same id is still another command.
	other := first
	other.Data = json.RawMessage(`{"approval_id":"a1","approver":"owner","action":"startup","subject":"provider-p","uses":2,"expires_at":"2026-09-07T10:00:00Z"}`)
	if _, err := h.Handle(context.Background(), other); commandsCode(err) != commands.CodeCommandIDReused {
		t.Fatalf("other data, same id: %v, want %s", err, commands.CodeCommandIDReused)
	}
}

// TestHandler_LegacyDigest: a command recorded by a node from before issue
// #15, whose metadata holds the digest over the compacted bytes, is
// recognised when it is re-sent after the upgrade with the same bytes (or
// other whitespace): duplicate, nothing appended. Another command under its
// id is still command_id_reused.
func TestHandler_LegacyDigest(t *testing.T) {
	s := openStore(t)
	h, _ := newHandler(t, s, nil)
	ctx := context.Background()
	id := uuid.New()
	data := `{"approval_id":"old","approver":"owner","action":"startup","subject":"provider-p","uses":1,"expires_at":"2026-09-07T10:00:00Z"}`
	sum := sha256.Sum256([]byte("GrantApproval\x00" + id.String() + "\x00" + data))
	legacy := "sha256:" + hex.EncodeToString(sum[:])
	meta, _ := json.Marshal(commands.Metadata{Command: "GrantApproval", CommandID: id.String(), CommandDigest: legacy})
	ev, _ := json.Marshal(aggregates.ApprovalGranted{ApprovalID: "old", Approver: "owner", Action: "startup", Subject: "provider-p", Uses: 1, ExpiresAt: t0.AddDate(0, 0, 1), At: t0})
	if _, err := s.Append(ctx, events.AppendRequest{Streams: []events.StreamAppend{{Stream: aggregates.ApprovalStream("old"), Expected: events.ExpectNoStream,
		Events: []events.Proposed{{ID: commands.EventID(id, 0), Type: aggregates.TypeApprovalGranted, Data: ev, Metadata: meta, CausationID: id.String(), CorrelationID: id.String(), Actor: "owner"}}}}}); err != nil {
		t.Fatal(err)
	}
	head := s.Head().Size
	resend := commands.Request{Command: "GrantApproval", ID: id.String(), Principal: owner, Data: json.RawMessage(" " + data + "\n")}
	res, err := h.Handle(ctx, resend)
	if err != nil || !res.Duplicate || s.Head().Size != head {
		t.Fatalf("re-send of a command recorded with the old digest: %+v, %v (head %d -> %d)", res, err, head, s.Head().Size)
	}
	resend.Data = json.RawMessage(`{"approval_id":"old","approver":"owner","action":"startup","subject":"provider-q","uses":1,"expires_at":"2026-09-07T10:00:00Z"}`)
	if _, err := h.Handle(ctx, resend); commandsCode(err) != commands.CodeCommandIDReused {
		t.Fatalf("another command under the old id: %v, want %s", err, commands.CodeCommandIDReused)
	}
}
