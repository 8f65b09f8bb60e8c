package replicator

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A raft folder belongs to one node id for good (issue #20; issue #24,
// item 7). Raft identifies a server by its id: a member restarted on its
// folder with another --node-id is a stranger to its own log and to the
// cluster, which used to make it conclude it had been removed, and exit 0.
// The folder records the id it was first started with, in Dir/node-id, and
// Open refuses another before anything in the folder is written.
//
// Folders made before this record existed record their id at their next
// start.

// nodeIDFile, in Config.Dir, holds the node id the folder belongs to, and
// a newline.
const nodeIDFile = "node-id"

// maxNodeIDFile bounds what is read of nodeIDFile (an id is at most 64
// bytes).
const maxNodeIDFile = 256

// ErrNodeIDChanged is matched (errors.Is) by the refusal of a folder
// started with another node id than the one it recorded.
var ErrNodeIDChanged = errors.New("replicator: the raft folder belongs to another node id")

// CheckNodeID checks that the raft folder dir (Config.Dir) on fsys (nil:
// the operating system's) does not belong to another node than id. A
// folder that records no id passes. It reads only, so that a node can
// check before it touches anything in its data folder.
func CheckNodeID(fsys vfs.FS, dir, id string) error {
	_, err := readNodeID(fsys, dir, id)
	return err
}

// readNodeID returns whether dir records an id, refusing one other than
// id.
func readNodeID(fsys vfs.FS, dir, id string) (recorded bool, err error) {
	if fsys == nil {
		fsys = vfs.Default
	}
	path := fsys.PathJoin(dir, nodeIDFile)
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("raft folder %s: %w", dir, err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxNodeIDFile))
	if err != nil {
		return false, fmt.Errorf("raft folder %s: read %s: %w", dir, path, err)
	}
	was := strings.TrimSpace(string(raw))
	if was == id {
		return true, nil
	}
	return true, fmt.Errorf("%w: %s belongs to node %q (recorded in %s), not to %q: "+
		"start it with --node-id %s, or give node %s an empty data folder of its own; nothing was changed",
		ErrNodeIDChanged, dir, was, path, id, was, id)
}

// recordNodeID writes id into dir, durably: a temporary file, synced,
// renamed into place, and dir synced.
func recordNodeID(fsys vfs.FS, dir, id string) error {
	path := fsys.PathJoin(dir, nodeIDFile)
	tmp := path + ".tmp"
	if err := writeFileSynced(fsys, tmp, []byte(id+"\n")); err != nil {
		return fmt.Errorf("record the node id in %s: %w", path, err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("record the node id in %s: %w", path, err)
	}
	if err := syncDir(fsys, dir); err != nil {
		return fmt.Errorf("record the node id in %s: %w", path, err)
	}
	return nil
}
