package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/greffe/greffe/client/verified"
	"github.com/greffe/greffe/wire"
)

// readData returns the JSON of --data: literal JSON, @FILE, or @- for
// stdin.
func readData(s string, stdin io.Reader) (json.RawMessage, error) {
	var b []byte
	var err error
	switch {
	case s == "@-":
		b, err = io.ReadAll(stdin)
	case strings.HasPrefix(s, "@"):
		b, err = os.ReadFile(s[1:])
	default:
		b = []byte(s)
	}
	if err != nil {
		return nil, usageError{fmt.Errorf("--data: %w", err)}
	}
	if !json.Valid(b) {
		return nil, usageError{fmt.Errorf("--data is not valid JSON")}
	}
	return b, nil
}

func newCmdCmd() *cobra.Command {
	var (
		r    remote
		in   wire.CommandIn
		data string
		at   string
		vf   verifiedFlags
	)
	c := &cobra.Command{
		Use:   "cmd NAME --data JSON|@FILE",
		Short: "Send one command (GrantApproval, SubmitMission, …): print the events it appended, or its refusal's code and details (exit 1)",
		Long: `cmd sends one command to POST /v1/commands.

The command id is its idempotency key: without --id a new one is generated
and printed; re-sending with the same --id returns the original outcome and
appends nothing, so a command whose answer was lost (exit 3) is re-sent
with the same id.

With --verified it returns once the events appended are proven included in
a signed checkpoint that extends the trusted state (--state FILE) and, with
--witness-quorum, was cosigned by that many --witness keys (greffe read
--help); a proof that fails exits 1, naming the events (they are written).

Exit codes: 0 appended (or nothing to append), 1 refused (the gate's code,
sentence and details are printed) or malformed, or not verified, 2 could
not run, 3 outcome unknown: re-send with the same --id.`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			in.Command = args[0]
			d, err := readData(data, c.InOrStdin())
			if err != nil {
				return err
			}
			in.Data = d
			if in.ID == "" {
				in.ID = uuid.NewString()
			}
			if at != "" {
				t, err := parseTimeFlag("--at", at)
				if err != nil {
					return err
				}
				in.At = &t
			}
			vc, err := vf.client(c.Context(), r.client())
			if err != nil {
				return err
			}
			var out wire.CommandOut
			if vc != nil {
				out, err = vc.Command(c.Context(), in)
			} else {
				out, err = r.client().Command(c.Context(), in)
			}
			if verified.IsProofFailure(err) {
				return proofFault(err)
			}
			if err != nil {
				var ae *wire.Error
				if errors.As(err, &ae) && r.json {
					_ = printJSON(c.OutOrStdout(), wire.ErrorBody{Error: ae})
				} else if errors.As(err, &ae) && len(ae.Details) > 0 {
					b, _ := json.Marshal(ae.Details)
					fmt.Fprintf(c.ErrOrStderr(), "details: %s\n", b)
				}
				return err
			}
			if r.json {
				return printJSON(c.OutOrStdout(), out)
			}
			printCommandOut(c.OutOrStdout(), out)
			return nil
		},
	}
	r.register(c)
	vf.register(c)
	f := c.Flags()
	f.StringVar(&data, "data", "{}", "the command's data: JSON, @FILE, or @- for stdin")
	f.StringVar(&in.ID, "id", "", "the command id (a UUID; generated if empty): its idempotency key")
	f.StringVar(&in.CorrelationID, "correlation-id", "", "groups commands in the audit trail (default: the command id)")
	f.StringVar(&in.Actor, "actor", "", "who you act for; recorded as on_behalf_of (your token's name is the actor)")
	f.StringVar(&at, "at", "", "the command's time (RFC 3339); only a node on a test or demo clock accepts it")
	return c
}

func printCommandOut(w io.Writer, out wire.CommandOut) {
	switch {
	case out.Duplicate:
		fmt.Fprintf(w, "%s %s: already applied; the original events:\n", out.Command, out.CommandID)
	case len(out.Events) == 0:
		fmt.Fprintf(w, "%s %s: unchanged (nothing to append) at %s\n", out.Command, out.CommandID, out.At.Format(time.RFC3339))
		return
	default:
		fmt.Fprintf(w, "%s %s: %d event(s) at %s\n", out.Command, out.CommandID, len(out.Events), out.At.Format(time.RFC3339))
	}
	for _, e := range out.Events {
		fmt.Fprintf(w, "  %-24s %s@%d position %d\n", e.Type, e.Stream, e.Version, e.Position)
	}
}
