package verify

import (
	"time"

	"github.com/greffe/greffe/audit"
)

// Run is one verification of a ledger by a source (audit/offline,
// audit/online): the faults it collects, and the report it builds. The
// source begins it (New), replays the log's events into it (Replay),
// checks what it holds against the replayed log (CheckStreamIndex,
// CheckIDIndex, CheckCheckpoints, CheckState, and its own checks, which
// report through Fault), fills in the report, and finishes it (Finish).
//
// audit.Fault is safe for concurrent use; the rest is called by the source's
// goroutine.
type Run struct {
	cfg    audit.Config
	faults *faults
	start  time.Time
	report *audit.Report
}

// New begins a verification of source (a data folder or a server's URL)
// with cfg, its defaults filled in (audit.Config's fields say which).
func New(cfg audit.Config, source string) *Run {
	cfg = withDefaults(cfg)
	return &Run{cfg: cfg, faults: newFaults(cfg.MaxFaults), start: time.Now(), report: &audit.Report{Source: source}}
}

// withDefaults fills in the defaults audit.Config documents.
func withDefaults(c audit.Config) audit.Config {
	if c.MaxFaults <= 0 {
		c.MaxFaults = 100
	}
	if c.IndexSample == 0 {
		c.IndexSample = 1024
	}
	if c.ProofSample == 0 {
		c.ProofSample = 64
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 8
	}
	return c
}

// Config returns the verification's configuration, defaults filled in.
func (run *Run) Config() audit.Config { return run.cfg }

// Report returns the report being built: the source fills in what it
// learnt (identity, counts, head), Finish the faults and the timing.
func (run *Run) Report() *audit.Report { return run.report }

// audit.Fault records f. A fault whose End is not above Position+1 covers
// Position alone. Safe for concurrent use.
func (run *Run) Fault(f audit.Fault) { run.faults.add(f) }

// Finish completes the report with the faults kept (the first
// Config.MaxFaults by position, and their count), the first one, and the
// time since New, and returns it.
func (run *Run) Finish() *audit.Report {
	finish(run.report, run.faults, run.start)
	return run.report
}

// StoredCheckpoint is a checkpoint note as stored under its size (or
// served, under the size it was asked for).
type StoredCheckpoint struct {
	Size uint64
	Note []byte
}

// BlamePosition returns pos as a fault position (even beyond the log: an
// entry pointing past the end is evidence that an event was there), or
// audit.NoPosition when it cannot be one.
func BlamePosition(pos uint64) int64 {
	if pos < 1<<62 {
		return int64(pos)
	}
	return audit.NoPosition
}

func u64p(v uint64) *uint64 { return &v }
