package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

// TestCLI_JSONEverywhere: every runnable command takes --json, or carries
// the noJSONAnnotation saying why it does not. Cobra's own commands (help,
// completion) print help text and shell scripts.
func TestCLI_JSONEverywhere(t *testing.T) {
	root := newRoot()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	var missing []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if !c.Runnable() || c.Name() == "help" || strings.HasPrefix(c.CommandPath(), "greffe completion") {
			return
		}
		if c.Flags().Lookup("json") == nil && c.Annotations[noJSONAnnotation] == "" {
			missing = append(missing, c.CommandPath())
		}
	}
	walk(root)
	if d := cmp.Diff([]string(nil), missing); d != "" {
		t.Errorf("commands without --json nor a reason (-want +got):\n%s", d)
	}
}

// TestCLI_Completion: greffe completion prints a script for each shell,
// and greffe help lists it.
func TestCLI_Completion(t *testing.T) {
	tests := []struct {
		shell, marker string
	}{
		{"bash", "__start_greffe"},
		{"zsh", "#compdef greffe"},
		{"fish", "complete -c greffe"},
		{"powershell", "Register-ArgumentCompleter"},
	}
	for _, tc := range tests {
		t.Run(tc.shell, func(t *testing.T) {
			code, out, errs := runCLI(t, "", "completion", tc.shell)
			if code != exitOK || !strings.Contains(out, tc.marker) {
				t.Errorf("completion %s: exit %d, %d bytes without %q; stderr %q", tc.shell, code, len(out), tc.marker, errs)
			}
		})
	}
	code, out, _ := runCLI(t, "", "help")
	if code != exitOK || !strings.Contains(out, "completion") {
		t.Errorf("greffe help does not list completion: exit %d\n%s", code, out)
	}
}
