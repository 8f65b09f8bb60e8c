package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/client/verified"
)

// witnessFlags choose the witnesses whose cosignatures a checkpoint must
// carry (verify, and the verified reads and commands).
type witnessFlags struct {
	keys   []string
	quorum int
}

func (w *witnessFlags) register(c *cobra.Command) {
	c.Flags().StringArrayVar(&w.keys, "witness", nil, "a witness's cosignature/v1 verifier key (C2SP tlog-cosignature; repeatable): with --witness-quorum, a checkpoint must be cosigned by that many of them")
	c.Flags().IntVar(&w.quorum, "witness-quorum", 0, "refuse a checkpoint without valid cosignatures by at least this many --witness keys (0: none required)")
}

// parse returns the witness keys (none when no policy is asked).
func (w *witnessFlags) parse() ([]note.Verifier, error) {
	if len(w.keys) == 0 && w.quorum == 0 {
		return nil, nil
	}
	vs, err := audit.ParseWitnessKeys(w.keys)
	if err != nil {
		return nil, usageError{err}
	}
	if w.quorum < 0 || w.quorum > len(vs) {
		return nil, usageError{fmt.Errorf("--witness-quorum %d with %d --witness key(s): give at least as many keys as the quorum", w.quorum, len(vs))}
	}
	return vs, nil
}

// verifiedFlags are the flags of a command's verified mode: --verified,
// --state, the log's verifier keys and the witness policy.
type verifiedFlags struct {
	on      bool
	state   string
	endScan int
	vf      verifierFlags
	wf      witnessFlags
}

func (v *verifiedFlags) register(c *cobra.Command) {
	c.Flags().BoolVar(&v.on, "verified", false, "prove the answer: inclusion proofs against a signed checkpoint checked against the trusted state (docs/AUDIT.md, Verified reads); a proof that fails, a rollback or a fork exits 1")
	c.Flags().StringVar(&v.state, "state", "", "with --verified: the trusted state file (greffe verify --state's format), read and moved forward; default: trust on this run only")
	c.Flags().IntVar(&v.endScan, "max-end-scan", verified.DefaultMaxStreamEndScan, "with --verified: the most events after a stream's newest one read (proven) to prove that it is the newest; a stream page that claims its end beyond that exits 2 (stream_end_unproven; docs/AUDIT.md, What a verified read proves)")
	v.vf.register(c)
	v.wf.register(c)
}

// client returns the verified client, or nil without --verified.
func (v *verifiedFlags) client(ctx context.Context, c *client.Client) (*verified.Client, error) {
	if !v.on {
		if v.state != "" || v.wf.quorum > 0 || v.endScan != verified.DefaultMaxStreamEndScan {
			return nil, usageError{errors.New("--state, --witness-quorum and --max-end-scan apply with --verified")}
		}
		return nil, nil
	}
	vs, err := v.vf.parse()
	if err != nil {
		return nil, err
	}
	ws, err := v.wf.parse()
	if err != nil {
		return nil, err
	}
	endScan := v.endScan
	if endScan == 0 {
		endScan = -1 // --max-end-scan 0: read nothing after a stream's newest event
	}
	vc, err := verified.New(ctx, c, verified.Config{Verifiers: vs, Witnesses: ws, WitnessQuorum: v.wf.quorum, StateFile: v.state, MaxStreamEndScan: endScan})
	if errors.Is(err, audit.ErrConfig) {
		return nil, usageError{err}
	}
	return vc, err
}

// proofFault makes a failed verification exit 1 (a fault found), whatever
// else the error carries.
func proofFault(err error) error {
	if verified.IsProofFailure(err) {
		return &exitError{exitRefused, fmt.Errorf("not verified: %w", err)}
	}
	return err
}
