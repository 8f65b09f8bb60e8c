package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/greffe/greffe/aggregates"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
)

// Key registration: where the executor's key stands on the node
// (registered, revoked or unknown), registering it under an approval, and
// waiting for an operator to register it.

// KeyStatus says where the executor's key stands on the node.
type KeyStatus string

// Key statuses.
const (
	KeyRegistered    KeyStatus = "registered"
	KeyNotRegistered KeyStatus = "not_registered"
	KeyRevoked       KeyStatus = "revoked"
)

// KeyStatus reads the executor's stream and says whether its key is
// registered, revoked or unknown there.
func (x *Executor) KeyStatus(ctx context.Context) (KeyStatus, error) {
	stream := aggregates.ExecutorStream(x.cfg.ExecutorID)
	var evs []events.Event
	for from := uint64(0); ; {
		page, err := x.cfg.Client.ReadStream(ctx, stream, events.ReadOptions{From: from, Limit: 1000})
		if c := client.CodeOf(err); c == events.CodeNotFound || c == events.CodeStreamNotFound {
			break
		}
		if err != nil {
			return "", fmt.Errorf("read %s: %w", stream, err)
		}
		evs = append(evs, page.Events...)
		if page.Next == nil || len(page.Events) == 0 {
			break
		}
		from = *page.Next
	}
	st, err := aggregates.Fold(stream, evs)
	if err != nil {
		return "", fmt.Errorf("fold %s: %w", stream, err)
	}
	k, ok := st.(aggregates.Executor).Keys[x.keyID]
	switch {
	case !ok:
		return KeyNotRegistered, nil
	case k.Revoked:
		return KeyRevoked, nil
	}
	return KeyRegistered, nil
}

// Register sends RegisterExecutorKey under approvalID. A refusal (no
// approval yet, another host…) is a *wire.Error with the gate's code.
func (x *Executor) Register(ctx context.Context, approvalID string) error {
	_, err := x.send(ctx, "RegisterExecutorKey", uuid.New(), aggregates.RegisterExecutorKey{
		ExecutorID: aggregates.ID(x.cfg.ExecutorID), Host: aggregates.ID(x.cfg.Host), PublicKey: aggregates.Ed25519PublicKey(x.PublicKey()), ApprovalID: aggregates.OptionalID(approvalID),
	})
	return err
}

var errRegistered = errors.New("registered")

// waitRegistered follows the executor's stream from position from (read
// before the key's status, so nothing slips between) until the key is
// registered.
func (x *Executor) waitRegistered(ctx context.Context, from uint64) error {
	stream := aggregates.ExecutorStream(x.cfg.ExecutorID)
	err := x.cfg.Client.Subscribe(ctx, from, events.Filter{StreamPrefix: stream,
		Types: []string{events.TypeExecutorKeyRegistered, events.TypeExecutorKeyRevoked}}, func(e events.Event) error {
		if e.Stream != stream {
			return nil // "executor-gpu10" also starts with "executor-gpu1"
		}
		var d struct {
			KeyID string `json:"key_id"`
		}
		if json.Unmarshal(e.Data, &d) != nil || d.KeyID != x.keyID {
			return nil
		}
		if e.Type == events.TypeExecutorKeyRevoked {
			return fmt.Errorf("%w: %s", ErrKeyRevoked, x.keyID)
		}
		return errRegistered
	})
	if errors.Is(err, errRegistered) {
		x.cfg.Logger.Info("key registered", "key_id", x.keyID)
		return nil
	}
	return err
}
