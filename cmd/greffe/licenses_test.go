package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The licences of what the greffe binary ships (issue #16). greffe is
// under the Apache License 2.0 (LICENSE); every module linked into the
// binary must be under a licence that lets it be distributed with it.
// The modules are those of the binary's packages (go list -deps: exactly
// what go build links for this platform, tests and tools excluded); each
// module's licence is read from its LICENSE file in the module cache and
// classified by its text, as go-licenses and pkg.go.dev do, not taken
// from metadata the module could get wrong.
//
// Run with -v to print the list (go test ./cmd/greffe -run
// TestLicenses_OfTheBinary -v); docs/OPERATIONS.md ("Licences") says how.

// licenceRule recognises one licence by phrases of its text (all must
// appear, whitespace-normalised and case-folded).
type licenceRule struct {
	id      string
	phrases []string
}

// licenceRules are tried in order; the first whose phrases all appear
// names the licence. MPL-2.0 comes first because its text names the GNU
// licences (its "Secondary Licenses"); the copyleft ones then come before
// the permissive ones, so that a file holding several licences is
// classified by the strictest.
var licenceRules = []licenceRule{
	{"MPL-2.0", []string{"mozilla public license", "version 2.0", "secondary license"}},
	{"AGPL-3.0", []string{"gnu affero general public license"}},
	{"LGPL", []string{"gnu lesser general public license"}},
	{"GPL", []string{"gnu general public license"}},
	{"SSPL", []string{"server side public license"}},
	{"BUSL", []string{"business source license"}},
	{"Apache-2.0", []string{"apache license", "version 2.0"}},
	{"BSD-3-Clause", []string{"redistribution and use in source and binary forms", "neither the name"}},
	{"BSD-3-Clause", []string{"redistribution and use in source and binary forms", "may be used to endorse or promote"}},
	{"BSD-2-Clause", []string{"redistribution and use in source and binary forms"}},
	{"MIT", []string{"permission is hereby granted, free of charge"}},
	{"ISC", []string{"permission to use, copy, modify, and/or distribute this software for any purpose"}},
}

// compatible are the licences whose code may ship in an Apache-2.0
// binary (the Apache Software Foundation's category A, plus MPL-2.0,
// category B: shipped unmodified, its files keep their licence and their
// source stays available from the module). Anything else, or a licence
// not recognised, fails the test until someone reads it.
var compatible = map[string]bool{
	"Apache-2.0": true, "MIT": true, "BSD-2-Clause": true, "BSD-3-Clause": true, "ISC": true, "MPL-2.0": true,
}

var licenceFile = regexp.MustCompile(`(?i)^(licen[cs]e|copying)(\.(md|txt))?$`)

type shipped struct {
	path, version, dir string
}

// binaryModules lists the modules of the packages linked into the greffe
// binary, the main module excluded.
func binaryModules(t *testing.T) []shipped {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}}\t{{.Version}}\t{{.Dir}}{{end}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var mods []shipped
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 3 {
			continue
		}
		m := shipped{f[0], f[1], f[2]}
		if !slices.Contains(mods, m) {
			mods = append(mods, m)
		}
	}
	slices.SortFunc(mods, func(a, b shipped) int { return strings.Compare(a.path, b.path) })
	return mods
}

// classify names the licence of the module in dir, and the file it read.
func classify(dir string) (id, file string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", "", err
	}
	for _, e := range entries {
		if e.IsDir() || !licenceFile.MatchString(e.Name()) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", "", err
		}
		return classifyText(string(b)), e.Name(), nil
	}
	return "", "", fmt.Errorf("no LICENSE, LICENCE or COPYING file in %s", dir)
}

func classifyText(text string) string {
	norm := strings.ToLower(strings.Join(strings.Fields(text), " "))
	for _, r := range licenceRules {
		all := true
		for _, p := range r.phrases {
			if !strings.Contains(norm, p) {
				all = false
				break
			}
		}
		if all {
			return r.id
		}
	}
	return "unknown"
}

func TestLicenses_Classify(t *testing.T) {
	// The rules themselves, on this repository's own LICENSE and on
	// excerpts that must not pass.
	own, err := os.ReadFile("../../LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, text, want string }{
		{"greffe's LICENSE", string(own), "Apache-2.0"},
		{"GPL", "GNU GENERAL PUBLIC LICENSE Version 3, 29 June 2007", "GPL"},
		{"AGPL", "GNU AFFERO GENERAL PUBLIC LICENSE Version 3", "AGPL-3.0"},
		{"MPL-2.0, which names the GNU licences", "Mozilla Public License, version 2.0 ... \"Secondary License\" means either the GNU General Public License ... GNU Affero General Public License", "MPL-2.0"},
		{"MIT", "Permission is hereby granted, free of charge, to any person obtaining a copy", "MIT"},
		{"nothing known", "All rights reserved.", "unknown"},
	}
	for _, tc := range tests {
		if got := classifyText(tc.text); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if compatible["GPL"] || compatible["unknown"] || !compatible["Apache-2.0"] {
		t.Error("the compatibility table lets a GPL or unknown licence through, or refuses Apache-2.0")
	}
}

func TestLicenses_OfTheBinary(t *testing.T) {
	mods := binaryModules(t)
	if len(mods) < 10 {
		t.Fatalf("only %d modules found in the binary: go list misread?", len(mods))
	}
	for _, m := range mods {
		id, file, err := classify(m.dir)
		switch {
		case err != nil:
			t.Errorf("%s %s: %v; read its licence and add the module here once it is known to be compatible", m.path, m.version, err)
		case !compatible[id]:
			t.Errorf("%s %s: %s licence (%s) cannot ship in greffe's Apache-2.0 binary; replace the dependency or, if the text was misread, fix licenceRules", m.path, m.version, id, file)
		default:
			t.Logf("%-60s %-12s %s", m.path+" "+m.version, id, file)
		}
	}
}
