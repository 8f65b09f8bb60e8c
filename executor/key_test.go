package executor

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLoadOrCreateKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys", "executor.key")
	k1, created, err := LoadOrCreateKey(path)
	if err != nil || !created {
		t.Fatalf("first use: created=%v err=%v", created, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fs.FileMode(0o600), fi.Mode().Perm()); diff != "" {
		t.Errorf("key file mode (-want +got):\n%s", diff)
	}
	k2, created, err := LoadOrCreateKey(path)
	if err != nil || created {
		t.Fatalf("second use: created=%v err=%v", created, err)
	}
	if !k1.Equal(k2) {
		t.Fatal("the key read back is not the key written")
	}

	cases := []struct {
		name    string
		prepare func(t *testing.T) string
		want    error
	}{
		{"readable by its group", func(t *testing.T) string { return copyKey(t, path, 0o640) }, ErrKeyExposed},
		{"readable by others", func(t *testing.T) string { return copyKey(t, path, 0o604) }, ErrKeyExposed},
		{"not a key", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "k")
			if err := os.WriteFile(p, []byte("hello"), 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, ErrKeyInvalid},
		{"a folder", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "k")
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
			return p
		}, ErrKeyInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := LoadOrCreateKey(tc.prepare(t)); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func copyKey(t *testing.T, from string, mode os.FileMode) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}
