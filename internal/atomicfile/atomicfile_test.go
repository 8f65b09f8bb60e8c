package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFile_ReplacesAndLeavesNoTemporary(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	for _, content := range []string{"first\n", "second, longer than the first\n", "3\n"} {
		if err := WriteFile(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("after writing %q: read %q, %v", content, got, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("the folder holds %d entries, want only the file: %v", len(entries), entries)
	}
}

func TestWriteFile_MissingFolderNamesThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent", "state.json")
	err := WriteFile(path, []byte("x"))
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("WriteFile into a missing folder: %v, want an error naming %s", err, path)
	}
}
