package node

import (
	"fmt"
	"path/filepath"

	"github.com/greffe/greffe/commands"
	"github.com/greffe/greffe/events/pebblelog"
	"github.com/greffe/greffe/projections"
	"github.com/greffe/greffe/projections/pebblestore"
)

// The Pebble store is what the commands handler and the projections'
// runners need from the log.
var (
	_ commands.Log       = (*pebblelog.Store)(nil)
	_ projections.Source = (*pebblelog.Store)(nil)
)

// openDomain wires the domain: the command handler (the single writer of
// the aggregates' streams) and the read models, whose rows live in a Pebble
// instance of their own, <data>/projections, so they can be dropped and
// rebuilt from the log without touching it. It mounts POST /v1/commands,
// GET /v1/policy and GET /v1/projections[/{name}] on the API, and registers
// the projections' Close so that Node.Close stops the runners (committing
// what they folded) after the API and before the store.
//
// REQUIRES: n.Store and n.API are open, and the API is not serving yet.
func (n *Node) openDomain() error {
	h, err := commands.New(commands.Config{Log: n.Store, Clock: n.cfg.Clock, SetClock: n.cfg.SetClock, Policy: n.cfg.Policy})
	if err != nil {
		return fmt.Errorf("commands: %w", err)
	}
	rows, err := pebblestore.Open(filepath.Join(n.cfg.DataDir, "projections"), n.cfg.Logger)
	if err != nil {
		return err
	}
	set, err := projections.Open(projections.Config{
		Store:    rows,
		Source:   n.Store,
		LedgerID: n.Store.LedgerID(),
		Env:      projections.Env{Policy: h.Policy()},
		Clock:    h.Clock(),
		Logger:   n.cfg.Logger,
	})
	if err != nil {
		return err
	}
	n.closers = append([]func() error{set.Close}, n.closers...)
	n.Commands, n.Projections = h, set
	n.API.MountCommands(h)
	n.API.MountProjections(set)
	return nil
}
