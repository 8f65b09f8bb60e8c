package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/audit"
	"github.com/greffe/greffe/audit/offline"
	"github.com/greffe/greffe/audit/online"
	"github.com/greffe/greffe/node"
)

// verifierFlags are the flags that choose the checkpoint verifier set.
type verifierFlags struct {
	keys []string
	file string
}

func (v *verifierFlags) register(c *cobra.Command) {
	c.Flags().StringArrayVar(&v.keys, "verifier", nil, "checkpoint verifier key <name>+<hash>+<key> (repeatable; default: the node's published keys, or <data>/keys offline)")
	c.Flags().StringVar(&v.file, "verifiers", "", "file of checkpoint verifier keys, one per line")
}

// given returns the verifier keys of the flags and of the file, as text,
// the file read once.
func (v *verifierFlags) given() ([]string, error) {
	keys := append([]string(nil), v.keys...)
	if v.file != "" {
		more, err := audit.ReadVerifierFile(v.file)
		if err != nil {
			return nil, usageError{err}
		}
		keys = append(keys, more...)
	}
	return keys, nil
}

// parse returns the configured verifiers; none means "use the default".
func (v *verifierFlags) parse() ([]note.Verifier, error) {
	keys, err := v.given()
	if err != nil {
		return nil, err
	}
	vs, err := audit.ParseVerifiers(keys)
	if err != nil {
		return nil, usageError{err}
	}
	return vs, nil
}

func newVerifyCmd() *cobra.Command {
	var (
		r       remote
		vf      verifierFlags
		wf      witnessFlags
		data    string
		state   string
		cfg     audit.Config
		withPrj bool
		prjTime string
	)
	c := &cobra.Command{
		Use:   "verify (--data DIR | --server URL)",
		Short: "Re-derive and check everything from the stored event bytes: leaf hashes, tree, checkpoints and signatures, indexes, signed events (exit 0 verified, 1 fault found, 2 could not run)",
		Long: `verify replays a ledger without trusting the node that wrote or serves it.

--data DIR verifies a stopped node's data folder (or a copy) offline, read-only.
--server URL verifies a running node through what it serves to anyone: the
signed checkpoint, the C2SP tlog tiles and entry bundles, the proof API and
the read API.

With --state FILE it remembers the last verified checkpoint; the next run
demands a consistency proof from it to the new one, so a rewritten or forked
history is caught even when the new tree is self-consistent. Both
checkpoints and the proof are kept in FILE.evidence/.

With --witness VKEY (repeatable) and --witness-quorum K, the node's
checkpoint must carry valid cosignatures (C2SP tlog-cosignature) by at
least K of those witnesses: a node showing this auditor a history its
witnesses never saw is refused (checkpoint_not_witnessed, exit 1).

Exit codes: 0 verified, 1 a fault was found (the first bad position and what
is wrong with it are printed), 2 could not run.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if data != "" && c.Flags().Changed("server") {
				return usageError{errors.New("give --data or --server, not both")}
			}
			vs, err := vf.parse()
			if err != nil {
				return err
			}
			cfg.Verifiers, cfg.StateFile = vs, state
			if cfg.Witnesses, err = wf.parse(); err != nil {
				return err
			}
			cfg.WitnessQuorum = wf.quorum
			if data != "" && wf.quorum > 0 {
				return usageError{errors.New("--witness-quorum applies to --server: the witnesses' cosignatures are what the node serves")}
			}
			errw := c.ErrOrStderr()
			if !r.json && isTerminal(errw) {
				start := time.Now()
				cfg.Progress = func(done, total uint64) {
					if total == 0 {
						total = max(done, 1)
					}
					fmt.Fprintf(errw, "\r%s %d/%d events, %.0f events/s   ", bar(done, total), done, total, float64(done)/time.Since(start).Seconds())
				}
			}
			// Where the checkpoint keys come from, said in the report: an
			// auditor who trusts nothing the node says must not take the
			// node's own keys for granted (issue #16).
			trust := "the checkpoint keys given with --verifier/--verifiers"
			var rep *audit.Report
			if len(cfg.Verifiers) == 0 && data != "" {
				trust = "the checkpoint keys in " + data + "/keys, the node's own (trust on first use: give --verifier or --verifiers with keys you hold to check them)"
			} else if len(cfg.Verifiers) == 0 {
				trust = "the checkpoint keys the node publishes in GET /v1/info (trust on first use: give --verifier or --verifiers with keys you hold to check them)"
			}
			if data != "" {
				if len(cfg.Verifiers) == 0 {
					keys, err := node.VerifierKeys(data)
					if err != nil {
						return &exitError{exitCannot, err}
					}
					if cfg.Verifiers, err = audit.ParseVerifiers(keys); err != nil {
						return &exitError{exitCannot, err}
					}
				}
				rep, err = offline.VerifyDir(c.Context(), node.LedgerDir(data), cfg)
			} else {
				rep, err = online.VerifyServer(c.Context(), r.client(), cfg)
			}
			if cfg.Progress != nil {
				fmt.Fprintln(errw)
			}
			if err != nil {
				return &exitError{exitCannot, fmt.Errorf("verify could not run: %w", err)}
			}
			// --projections: rebuild every projection from position 0 and
			// compare it with the live one (cmd/greffe/verify_projections.go),
			// once the ledger is verified and its store released.
			var prj *projectionsReport
			if withPrj {
				if prj, err = runProjections(c.Context(), r, data, prjTime); err != nil {
					return err
				}
			}
			w := c.OutOrStdout()
			switch {
			case r.json && prj != nil:
				err = printJSON(w, map[string]any{"ledger": rep, "projections": prj})
			case r.json:
				err = printJSON(w, rep)
			default:
				printReport(w, rep)
				fmt.Fprintf(w, "trust       %s\n", trust)
				if prj != nil {
					fmt.Fprintln(w)
					printProjectionsReport(w, prj)
				}
			}
			if err != nil {
				return err
			}
			if !rep.Verified {
				return &exitError{exitRefused, fmt.Errorf("%d fault(s) found; first: %s", rep.FaultCount, rep.First)}
			}
			if prj != nil && !prj.Verified {
				return &exitError{exitRefused, errors.New("a live projection differs from its rebuild from position 0")}
			}
			return nil
		},
	}
	r.register(c)
	r.reads(c)
	vf.register(c)
	wf.register(c)
	f := c.Flags()
	f.StringVar(&data, "data", "", "a stopped node's data folder (verified offline, read-only)")
	f.StringVar(&state, "state", "", "auditor state file: remember the last verified checkpoint and demand a consistency proof from it next time")
	f.IntVar(&cfg.IndexSample, "index-sample", 0, "online: events looked up by id and by stream through the read API (0: 1024; -1: all)")
	f.IntVar(&cfg.ProofSample, "proof-sample", 0, "online: inclusion and consistency proofs fetched and checked (0: 64; -1: none)")
	f.IntVar(&cfg.MaxFaults, "max-faults", 0, "faults listed in the report, lowest positions first (0: 100)")
	f.BoolVar(&withPrj, "projections", false, "also rebuild every projection from position 0 and compare it byte for byte with the live one")
	f.StringVar(&prjTime, "time", "", "with --projections: judge timed projections at this RFC 3339 time (default: now)")
	return c
}

// runProjections runs verifyProjections (verify_projections.go) on the
// same source as the ledger verification.
func runProjections(ctx context.Context, r remote, data, at string) (*projectionsReport, error) {
	t := time.Now().UTC()
	if at != "" {
		var err error
		if t, err = parseTimeFlag("--time", at); err != nil {
			return nil, err
		}
	}
	var src liveProjections = remoteProjections{r.client()}
	if data != "" {
		off, err := openOffline(data)
		if err != nil {
			return nil, &exitError{exitCannot, err}
		}
		defer off.Close()
		src = off
	}
	rep, err := verifyProjections(ctx, src, t)
	if err != nil {
		return nil, &exitError{exitCannot, fmt.Errorf("verify --projections could not run: %w", err)}
	}
	return rep, nil
}

// printReport writes the human summary of a verification.
func printReport(w io.Writer, rep *audit.Report) {
	// Damaged storage stops the verification where it shows (docs/AUDIT.md):
	// the counts are what was verified before, and a store that did not
	// open at all (a damaged MANIFEST or write-ahead log) verified nothing.
	// Saying "0 events" then would read as an empty ledger (issue #13).
	stopped := rep.First != nil && rep.First.Kind == audit.KindStorageCorrupt
	fmt.Fprintf(w, "source      %s\n", rep.Source)
	if rep.LedgerID == "" && stopped {
		fmt.Fprintf(w, "ledger      not read: the store's files do not read back\n")
	} else {
		fmt.Fprintf(w, "ledger      %s (origin %s)\n", rep.LedgerID, rep.Origin)
	}
	switch {
	case stopped && rep.Events == 0:
		fmt.Fprintf(w, "events      none verified: damaged storage stopped the verification (FAULT below)\n")
	case stopped:
		fmt.Fprintf(w, "events      %d in %d streams verified, then damaged storage stopped the verification (FAULT below)\n", rep.Events, rep.Streams)
	default:
		fmt.Fprintf(w, "events      %d in %d streams\n", rep.Events, rep.Streams)
	}
	fmt.Fprintf(w, "checkpoints %d checked: each one's root and its signatures by the trusted keys\n", rep.Checkpoints)
	fmt.Fprintf(w, "signed      %d event signatures (DSSE) checked\n", rep.Signatures)
	if stopped && rep.Root == nil {
		fmt.Fprintf(w, "tree        not recomputed\n")
	} else {
		fmt.Fprintf(w, "tree        size %d, root %s\n", rep.Size, base64.StdEncoding.EncodeToString(rep.Root))
	}
	fmt.Fprintf(w, "time        %s (%.0f events/s)\n", rep.Elapsed.Round(time.Millisecond), rep.EventsPerSec)
	if st := rep.State; st != nil {
		switch {
		case st.Previous == nil:
			fmt.Fprintf(w, "state       first run: remembering the checkpoint of size %d (updated: %t)\n", st.Current, st.Updated)
		default:
			fmt.Fprintf(w, "state       remembered size %d, now %d: consistent %t, updated %t\n", *st.Previous, st.Current, st.Consistent, st.Updated)
		}
		if st.Evidence != "" {
			fmt.Fprintf(w, "evidence    %s\n", st.Evidence)
		}
	}
	if rep.Verified {
		fmt.Fprintln(w, "VERIFIED")
		return
	}
	fmt.Fprintf(w, "FAULT       %s\n", rep.First)
	if rep.FaultCount > 1 {
		fmt.Fprintf(w, "            and %d more fault(s); --json lists the first %d\n", rep.FaultCount-1, len(rep.Faults))
	}
}
