// Command greffe is the ledger's single binary: the node (serve), its
// clients (append, read, tail, cmd, …) and the auditor's tools (verify,
// prove). main only maps errors to exit codes and handles signals; every
// command parses flags, builds a Config and calls into a package.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/greffe/greffe/client"
	"github.com/greffe/greffe/events"
	"github.com/greffe/greffe/node"
	"github.com/greffe/greffe/wire"
)

// Exit codes (README.md, "CLI exit codes"). Stable.
const (
	exitOK        = 0 // done; verify: verified
	exitRefused   = 1 // the node refused (4xx), or verify found a fault
	exitCannot    = 2 // usage error, or could not run (unreachable, 5xx)
	exitUncertain = 3 // the outcome is unknown: retry with the same ids
	// exitRemoved: serve stopped because a committed configuration removed
	// this node from its cluster. Not 0, so that a service manager does not
	// take it for a clean stop; its own code, so that one can be told not
	// to restart it (systemd: RestartPreventExitStatus=4).
	exitRemoved = 4
)

// exitError carries an exit code chosen by a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal cancels ctx (graceful); the second exits at once.
		<-ctx.Done()
		stop()
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		os.Exit(130)
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the CLI and returns its exit code. Tests call it directly.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code := exitCodeOf(err)
	fmt.Fprintln(stderr, "greffe:", describe(err))
	if code == exitCannot && isUsage(err) {
		fmt.Fprintln(stderr, "Try: greffe help")
	}
	return code
}

func describe(err error) string {
	var ue *client.UnreachableError
	if errors.As(err, &ue) {
		return ue.Error() + "; " + startHint // cmd/greffe/hints.go
	}
	return describeAPI(err)
}

func exitCodeOf(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, node.ErrRemoved) {
		return exitRemoved
	}
	var ae *wire.Error
	if errors.As(err, &ae) {
		switch {
		case ae.Code == events.CodeOutcomeUnknown:
			return exitUncertain
		case ae.Status/100 == 4:
			return exitRefused
		}
		return exitCannot
	}
	if events.CodeOf(err) == events.CodeOutcomeUnknown || errors.Is(err, events.ErrOutcomeUnknown) {
		return exitUncertain
	}
	// A coded error met in this process: its kind says, as the node's
	// status would (a failure is a 5xx there).
	if d, ok := events.AsCoded(err); ok {
		switch d.Kind {
		case events.KindUncertain:
			return exitUncertain
		case events.KindFailed:
			return exitCannot
		}
		return exitRefused // refused, or corrupt: a fault found
	}
	if events.CodeOf(err) != "" {
		return exitRefused
	}
	return exitCannot
}

type usageError struct{ error }

// noJSONAnnotation marks a runnable command without a --json flag; its
// value says why (a test holds every other command to --json).
const noJSONAnnotation = "greffe/no-json"

func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "greffe",
		Short: "greffe: the append-only, tamper-evident ledger of an AI control plane",
		Long: `greffe: the append-only, tamper-evident ledger of an AI control plane.

Every command that prints a result takes --json. Long operations (verify,
bench, apply, export, mirror, backup, restore) draw a progress bar on a
terminal and print plain lines otherwise.

Shell completion: greffe completion bash|zsh|fish|powershell prints a
script; e.g. source <(greffe completion bash), or see
greffe completion bash --help (docs/OPERATIONS.md).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Cobra's completion command, kept visible: operators discover it
		// in greffe help.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: false, HiddenDefaultCmd: false},
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newServeCmd(), newAppendCmd(), newReadCmd(), newTailCmd(), newCheckpointCmd(),
		newInfoCmd(), newBenchCmd(), newClusterCmd(),
		newExportCmd(), newMirrorCmd(),
		newExecutorCmd(),
		newVerifyCmd(), newProveCmd(), newKeysCmd(), newBackupCmd(), newRestoreCmd(),
		newCmdCmd(), newApplyCmd(), newMatrixCmd(), newDemoCmd(), newVerifyProjectionsCmd(),
		newWitnessCmd(), newVersionCmd(), newStreamsCmd(), newEndpointCmd(),
	)
	root.AddCommand(newDigestCmd())
	return root
}
