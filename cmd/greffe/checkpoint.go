package main

import (
	"github.com/spf13/cobra"

	"github.com/greffe/greffe/events"
)

func newCheckpointCmd() *cobra.Command {
	var (
		r    remote
		size uint64
	)
	c := &cobra.Command{
		Use:   "checkpoint",
		Short: "Print the node's latest signed checkpoint (C2SP tlog-checkpoint), or the one of --size",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl := r.client()
			note, err := cl.Checkpoint(c.Context(), size)
			if err != nil {
				return err
			}
			if !r.json {
				_, err = c.OutOrStdout().Write(note)
				return err
			}
			info, err := cl.Info(c.Context())
			if err != nil {
				return err
			}
			cp, _, err := events.OpenCheckpoint(note, info.Origin, verifiers(info.VerifierKeys)...)
			if err != nil {
				return &exitError{exitRefused, err}
			}
			return printJSON(c.OutOrStdout(), map[string]any{"origin": cp.Origin, "size": cp.Size, "root": cp.Root[:], "note": string(note)})
		},
	}
	r.register(c)
	r.reads(c)
	c.Flags().Uint64Var(&size, "size", 0, "checkpoint of this size (0: latest)")
	return c
}
