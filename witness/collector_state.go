package witness

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/greffe/greffe/internal/atomicfile"
)

// collectorFile is the collector's state file, rewritten atomically after
// every cosignature it receives (JSON, hashes in base64):
//
//	{
//	  "origin": "greffe/<ledger id>",
//	  "witnesses": [
//	    {"key": "<cosignature/v1 vkey>", "url": "https://w.example/",
//	     "size": 120, "root": "<base64>", "cosigned_at": "2026-…Z"}
//	  ],
//	  "checkpoints": [
//	    {"size": 120, "root": "<base64>", "note": "<the log's signed note>",
//	     "cosignatures": {"<vkey>": "— w.example/w1 <base64>\n"}}
//	  ]
//	}
//
// witnesses says, per witness (named by its verifier key: a witness that
// moves to another URL keeps its place), the size and root of the newest
// checkpoint it cosigned: the next request's old size. checkpoints keeps
// the newest maxKept checkpoints that got a cosignature, with every
// cosignature line received for each, so that they are served on the
// checkpoint after a restart. A witness no longer configured is dropped on
// load, with its cosignatures. The file is node-local: every member of a
// cluster signs its own checkpoints and collects their cosignatures.
type collectorFile struct {
	Origin      string           `json:"origin"`
	Witnesses   []witnessRecord  `json:"witnesses"`
	Checkpoints []cosignedRecord `json:"checkpoints"`
}

type witnessRecord struct {
	Key        string    `json:"key"`
	URL        string    `json:"url"`
	Size       uint64    `json:"size"`
	Root       []byte    `json:"root,omitempty"`
	CosignedAt time.Time `json:"cosigned_at,omitzero"`
}

type cosignedRecord struct {
	Size         uint64            `json:"size"`
	Root         []byte            `json:"root"`
	Note         string            `json:"note"`
	Cosignatures map[string]string `json:"cosignatures"`
}

// maxKept bounds the checkpoints whose cosignatures are kept: the newest
// ones, which are the ones served. 64 checkpoints of 3 witnesses are about
// 60 KB of state.
const maxKept = 64

// readCollectorFile reads the state file; a missing file is the empty
// state.
func readCollectorFile(path string) (*collectorFile, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &collectorFile{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("witness state: %w", err)
	}
	var f collectorFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("witness state %s: %w", path, err)
	}
	return &f, nil
}

func writeCollectorFile(path string, f *collectorFile) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'))
}
