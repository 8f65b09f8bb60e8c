package node

import (
	"fmt"
	"path/filepath"

	"github.com/greffe/greffe/witness"
)

// WitnessConfig sends the node's checkpoints to witnesses (C2SP
// tlog-witness; `greffe serve --witness URL=VKEY --witness-quorum K`).
// The zero value: no witnesses.
type WitnessConfig struct {
	// Witnesses are the witnesses (witness.ParseWitness).
	Witnesses []witness.Witness
	// Quorum is how many of them must cosign a checkpoint before
	// GET /v1/checkpoint serves it as the latest (0: the newest at once,
	// with the cosignatures it has). At most len(Witnesses).
	Quorum int
}

// WitnessStateFile is the collector's node-local state, in the data
// folder: each witness's last cosigned size and the newest cosignatures.
// Losing it costs one 409 round trip per witness, nothing else.
const WitnessStateFile = "witnesses.json"

// openWitnesses starts the witness collector when witnesses are
// configured and hands it to the API (cosignatures on the checkpoint and
// in proven answers). No append waits for a witness: the collector polls
// the store's newest checkpoint on its own goroutines.
//
// REQUIRES: the store and its signers are set, the API is not built yet.
func (n *Node) openWitnesses() error {
	wc := n.cfg.Witness
	if len(wc.Witnesses) == 0 {
		if wc.Quorum > 0 {
			return fmt.Errorf("--witness-quorum %d without any --witness", wc.Quorum)
		}
		return nil
	}
	col, err := witness.OpenCollector(witness.CollectorConfig{
		Origin:    n.Store.Origin(),
		Log:       n.Store,
		Witnesses: wc.Witnesses,
		Quorum:    wc.Quorum,
		StateFile: filepath.Join(n.cfg.DataDir, WitnessStateFile),
		Logger:    n.cfg.Logger.With("component", "witness"),
	})
	if err != nil {
		return err
	}
	n.Witnesses = col
	// Closed before the store it reads (n.closers runs in order).
	n.closers = append([]func() error{col.Close}, n.closers...)
	return nil
}
