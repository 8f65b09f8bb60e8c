package witness

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/greffe/greffe/internal/atomicfile"
)

// stateRecord is what a witness knows of its own state: which logs it has
// cosigned at least once, so that the loss of one of their files, or of
// the whole folder, is noticed at start instead of being taken for a log
// never seen (which the witness would trust on first use again, and so
// cosign a fork of what it cosigned before: #20, finding 15). It is kept
// twice, the same JSON in both places:
//
//	<Dir>/STATE              beside the logs' files
//	ServerConfig.Marker      with the witness's key (the marker), when set
//
//	{"id": "<32 hex>", "witness": "witness.example.org/w1",
//	 "created_at": "2026-…Z",
//	 "logs": {"<origin hash>": "<origin>", …}}
//
// id names one state, made when the folder's record began: a marker whose
// id is not the folder's means the key cosigned from another folder. logs
// only grows: a log is added once its first cosigned checkpoint is on disk
// (its file written first, so that a crash between the two leaves a file
// not yet listed, which the next start adopts, never a listed log without
// its file). The marker exists because the folder may be lost whole (a
// volume recreated, a disk replaced) while the key, kept elsewhere,
// survives: what is beside the key then says that the key had cosigned
// with a state now gone.
type stateRecord struct {
	ID        string            `json:"id"`
	Witness   string            `json:"witness"`
	CreatedAt time.Time         `json:"created_at"`
	Logs      map[string]string `json:"logs"`
}

// stateFileName is the folder's copy of the record.
const stateFileName = "STATE"

// ErrStateLost is what OpenServer returns (as a *StateLostError) when
// state the witness had is missing.
var ErrStateLost = errors.New("witness: state lost")

// StateLostError says what state a witness had is missing: the logs whose
// newest cosigned checkpoint is gone, or a folder that is not the one the
// key cosigned with. It matches ErrStateLost.
type StateLostError struct {
	// Dir is the witness's folder; Marker the record kept with its key
	// ("" when none).
	Dir, Marker string
	// Logs are the origins, sorted, whose newest cosigned checkpoint is
	// missing from Dir/logs although the witness cosigned them.
	Logs []string
	// OtherState is set when the marker names another state than the
	// folder's: the key cosigned from another folder (its id, then the
	// folder's).
	OtherState [2]string
}

func (e *StateLostError) Error() string {
	var what string
	switch {
	case e.OtherState[0] != "":
		what = fmt.Sprintf("the key's marker %s says it cosigned with state %s, but the folder %s holds state %s (another witness's folder, or one the key never used)",
			e.Marker, e.OtherState[0], e.Dir, e.OtherState[1])
	default:
		what = fmt.Sprintf("the newest cosigned checkpoint of %s is missing from %s", strings.Join(e.Logs, ", "), filepath.Join(e.Dir, "logs"))
		if e.Marker != "" {
			what += " (" + e.Marker + " says it was cosigned)"
		}
	}
	return fmt.Sprintf("%v: %s; starting without it, the witness would trust the log's next checkpoint on first use and could cosign a fork of what it cosigned before. "+
		"Restore the folder from its backup, or start anew deliberately (greffe witness --accept-lost-state), knowing the logs' operators and auditors must then be told", ErrStateLost, what)
}

// Unwrap makes a *StateLostError match ErrStateLost.
func (e *StateLostError) Unwrap() error { return ErrStateLost }

// stateBook keeps the record in both places once OpenServer checked it.
// Safe for concurrent use.
type stateBook struct {
	folder string // <Dir>/STATE
	marker string // ServerConfig.Marker, "" when none

	mu  sync.Mutex
	rec stateRecord // guarded by mu
}

// openState reads the record's copies, checks that every configured log
// they list still has its file, adopts the files not yet listed (a folder
// from before the record existed, or a crash between a log's first file
// and its listing), and writes the result to both places: a start that
// cannot write the marker fails here rather than at the first cosignature.
// A missing state is refused with a *StateLostError unless
// cfg.Unsafe.AcceptLostState, which logs each loss at error level and
// starts without it. REQUIRES: the folder's lock held.
func openState(cfg ServerConfig) (*stateBook, error) {
	b := &stateBook{folder: filepath.Join(cfg.Dir, stateFileName), marker: cfg.Marker}
	folder, err := readState(b.folder)
	if err != nil {
		return nil, err
	}
	var marker *stateRecord
	if b.marker != "" {
		if marker, err = readState(b.marker); err != nil {
			return nil, err
		}
	}
	present, err := logFiles(cfg.Dir)
	if err != nil {
		return nil, err
	}
	configured := make(map[string]string, len(cfg.Logs))
	for origin := range cfg.Logs {
		configured[OriginHash(origin)] = origin
	}

	rec := stateRecord{Witness: cfg.Signer.Name(), CreatedAt: time.Now().UTC(), Logs: map[string]string{}}
	lost := &StateLostError{Dir: cfg.Dir, Marker: b.marker}
	switch {
	case folder != nil:
		rec.ID, rec.CreatedAt = folder.ID, folder.CreatedAt
		maps.Copy(rec.Logs, folder.Logs)
		if marker != nil && marker.ID != folder.ID && len(marker.Logs) > 0 {
			lost.OtherState = [2]string{marker.ID, folder.ID}
		}
	case marker != nil:
		rec.ID, rec.CreatedAt = marker.ID, marker.CreatedAt
	default:
		rec.ID = newStateID()
	}
	if marker != nil && lost.OtherState[0] == "" {
		maps.Copy(rec.Logs, marker.Logs)
	}
	for h := range rec.Logs {
		if _, ok := present[h]; ok {
			continue
		}
		// A log no longer configured stays listed: its loss matters, and
		// is refused, once it is configured again.
		if o, ok := configured[h]; ok {
			lost.Logs = append(lost.Logs, o)
			if cfg.Unsafe.AcceptLostState {
				delete(rec.Logs, h)
			}
		}
	}
	slices.Sort(lost.Logs)
	if len(lost.Logs) > 0 || lost.OtherState[0] != "" {
		if !cfg.Unsafe.AcceptLostState {
			return nil, lost
		}
		cfg.Logger.Error("witness: STARTING WITH LOST STATE (--accept-lost-state): the logs named trust their next checkpoint on first use; tell their operators and auditors",
			"lost", lost.Error(), "logs", lost.Logs, "state", rec.ID)
	}
	for h, origin := range present {
		if _, ok := rec.Logs[h]; !ok {
			rec.Logs[h] = origin
		}
	}
	b.rec = rec
	if err := b.writeLocked(); err != nil {
		return nil, err
	}
	return b, nil
}

// has reports whether the record lists the log of origin hash h.
func (b *stateBook) has(h string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.rec.Logs[h]
	return ok
}

// add lists a log whose first cosigned checkpoint is now on disk, in the
// folder's copy and then the marker.
func (b *stateBook) add(h, origin string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.rec.Logs[h]; ok {
		return nil
	}
	b.rec.Logs[h] = origin
	if err := b.writeLocked(); err != nil {
		delete(b.rec.Logs, h) // retried at the log's next cosignature
		return err
	}
	return nil
}

// writeLocked writes the record to the folder, then beside the key.
// REQUIRES: b.mu held (or b not yet shared).
func (b *stateBook) writeLocked() error {
	j, err := json.MarshalIndent(b.rec, "", "  ")
	if err != nil {
		return err
	}
	j = append(j, '\n')
	if err := atomicfile.WriteFile(b.folder, j); err != nil {
		return fmt.Errorf("witness state: %w", err)
	}
	if b.marker != "" {
		if err := atomicfile.WriteFile(b.marker, j); err != nil {
			return fmt.Errorf("witness state marker (kept with the key, so that a lost folder is noticed; --state-marker): %w", err)
		}
	}
	return nil
}

// readState reads one copy of the record; a missing file is nil.
func readState(path string) (*stateRecord, error) {
	j, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("witness state: %w", err)
	}
	var r stateRecord
	if err := json.Unmarshal(j, &r); err != nil || r.ID == "" {
		return nil, fmt.Errorf("witness state %s is not a witness's state record: %v", path, err)
	}
	if r.Logs == nil {
		r.Logs = map[string]string{}
	}
	return &r, nil
}

// logFiles lists the logs' files in <dir>/logs, by origin hash, each with
// the origin on its first line ("" when unreadable: load reports it for a
// configured log). Other names (atomicfile's temporary files) are skipped.
func logFiles(dir string) (map[string]string, error) {
	ents, err := os.ReadDir(filepath.Join(dir, "logs"))
	if err != nil {
		return nil, fmt.Errorf("witness folder: %w", err)
	}
	out := map[string]string{}
	for _, e := range ents {
		h := e.Name()
		if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" || !e.Type().IsRegular() {
			continue
		}
		var origin string
		if b, err := os.ReadFile(filepath.Join(dir, "logs", h)); err == nil {
			origin, _, _ = strings.Cut(string(b), "\n")
		}
		out[h] = origin
	}
	return out, nil
}

func newStateID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
