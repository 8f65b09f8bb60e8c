package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/mod/sumdb/note"

	"github.com/greffe/greffe/witness"
)

func newWitnessCmd() *cobra.Command {
	var (
		dir, keyFile, addr, newKey, marker string
		logs                               []string
		asJSON, acceptLost                 bool
	)
	c := &cobra.Command{
		Use:   "witness --data DIR --key FILE --http ADDR --log ORIGIN=VKEY ...",
		Short: "Be a witness (C2SP tlog-witness) for other logs: cosign each checkpoint that extends the last one cosigned",
		Long: `witness makes greffe a witness of other logs (independent greffe operators
cross-witnessing each other, or any C2SP log): it serves POST /add-checkpoint
per C2SP tlog-witness and cosigns (cosignature/v1) a checkpoint only once it
has checked the log's signature and a consistency proof from the checkpoint
it cosigned last. It answers 200 with its cosignature lines, 409 with its
size for a stale old size, 422 for a bad proof, 403 for a bad log
signature, 404 for an unknown origin.

--data DIR keeps the newest cosigned checkpoint of each log, so that it
remembers across restarts. --key FILE holds a note signing key in the format
of a node's checkpoint keys (--new-key NAME creates it when missing). --log
ORIGIN=VKEY (repeatable) follows a log: its origin and checkpoint verifier
key (greffe info prints both; the key's name is the origin, so VKEY alone
is accepted). It prints its cosignature/v1 verifier key: give it to the
logs' operators (greffe serve --witness URL=VKEY) and to auditors (greffe
verify --witness VKEY).

A witness that lost state it had refuses to start (exit 2), naming what is
missing: a log's newest cosigned checkpoint gone from --data, or --data lost
whole while FILE.state, the record it keeps beside --key (or
--state-marker), says the key cosigned (keep it with the key, on other
storage than --data, in a writable folder). Started
empty, it would trust each log's next checkpoint on first use and could
cosign a fork of what it cosigned before. Restore --data from its backup,
or start anew deliberately with --accept-lost-state (logged at error
level; tell the logs' operators and auditors).

Exit codes: 0 stopped by a signal, 2 could not start.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if dir == "" || keyFile == "" || len(logs) == 0 {
				return usageError{errors.New("--data, --key and at least one --log are required")}
			}
			if newKey != "" {
				if err := createWitnessKey(keyFile, newKey); err != nil {
					return &exitError{exitCannot, err}
				}
			}
			signer, vkey, err := witness.LoadCosigner(keyFile)
			if err != nil {
				return usageError{fmt.Errorf("--key: %w", err)}
			}
			followed, err := parseLogs(logs)
			if err != nil {
				return usageError{err}
			}
			logger := slog.New(slog.NewTextHandler(c.ErrOrStderr(), nil))
			if marker == "" {
				marker = keyFile + ".state"
			}
			s, err := witness.OpenServer(witness.ServerConfig{Dir: dir, Signer: signer, Marker: marker, Logs: followed, Logger: logger,
				Unsafe: witness.ServerUnsafe{AcceptLostState: acceptLost}})
			if err != nil {
				return &exitError{exitCannot, err}
			}
			defer s.Close()
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return &exitError{exitCannot, fmt.Errorf("--http: %w", err)}
			}
			url := "http://" + ln.Addr().String()
			if asJSON {
				if err := printJSON(c.OutOrStdout(), map[string]any{"url": url, "name": signer.Name(), "vkey": vkey, "logs": len(followed)}); err != nil {
					_ = ln.Close()
					return err
				}
			} else {
				c.Printf("greffe witness %s serving %s (%d log(s))\nverifier key %s\n", signer.Name(), url, len(followed), vkey)
			}
			return s.Serve(c.Context(), ln)
		},
	}
	f := c.Flags()
	f.StringVar(&dir, "data", "", "folder of the newest cosigned checkpoint of each log (created on first start)")
	f.StringVar(&keyFile, "key", "", "the witness's note signing key file (PRIVATE+KEY+NAME+HASH+KEY)")
	f.StringVar(&newKey, "new-key", "", "create --key with a new Ed25519 key of this name (e.g. witness.example.org/w1) when the file does not exist")
	f.StringVar(&addr, "http", "127.0.0.1:7380", "HTTP listen address (add-checkpoint is public: the logs' signatures authenticate what is cosigned)")
	f.StringArrayVar(&logs, "log", nil, "a log to witness: ORIGIN=VKEY, its checkpoint origin and note verifier key (repeatable; a key rotation gives the origin twice)")
	f.BoolVar(&asJSON, "json", false, "print the start line as JSON")
	f.StringVar(&marker, "state-marker", "", "the file, kept with the key and outside --data, where the witness records which logs it cosigned, so that a lost --data is noticed (default: KEY.state beside --key; its folder must be writable)")
	f.BoolVar(&acceptLost, "accept-lost-state", false, "UNSAFE: start although state the witness had is missing (it trusts those logs anew and may cosign a fork of what it cosigned); logged at error level")
	return c
}

// parseLogs reads --log ORIGIN=VKEY (or VKEY, named after its origin).
func parseLogs(logs []string) (map[string][]note.Verifier, error) {
	out := map[string][]note.Verifier{}
	for _, l := range logs {
		origin, vkey, ok := strings.Cut(l, "=")
		if !ok || strings.Contains(origin, "+") {
			origin, vkey = "", l
		}
		v, err := note.NewVerifier(strings.TrimSpace(vkey))
		if err != nil {
			return nil, fmt.Errorf("--log %q: %w", l, err)
		}
		if origin == "" {
			origin = v.Name()
		}
		if v.Name() != origin {
			return nil, fmt.Errorf("--log %q: the key is named %q, not the origin %q", l, v.Name(), origin)
		}
		out[origin] = append(out[origin], v)
	}
	return out, nil
}

// createWitnessKey writes a new key file when path does not exist.
func createWitnessKey(path, name string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	skey, _, err := witness.GenerateKey(name)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("--new-key: %w", err)
	}
	if _, err := f.WriteString(skey + "\n"); err != nil {
		_ = f.Close()
		return fmt.Errorf("--new-key: %w", err)
	}
	return f.Close()
}
