package replicator

// Trailing logs: how many raft entries a node keeps after a snapshot,
// derived from the write rate when Config.TrailingLogs is zero.

// trailingFor returns how many entries of avg bytes make about target
// bytes of log, within [minTrailingLogs, maxTrailingLogs].
func trailingFor(target, avg uint64) uint64 {
	if avg == 0 {
		return initialTrailingLogs
	}
	return min(max(target/avg, minTrailingLogs), maxTrailingLogs)
}

// adaptTrailingLogs re-derives TrailingLogs from the entries applied since
// the last tick, when it is not fixed. It changes it only when it moves by
// more than a quarter, so that it does not reload raft's configuration on
// every tick.
func (p *Replicator) adaptTrailingLogs() {
	if p.cfg.TrailingLogs != 0 {
		return
	}
	n, b := p.fsm.entries.Load(), p.fsm.entryBytes.Load()
	dn, db := n-p.lastEntries, b-p.lastBytes
	if dn < minSample {
		return
	}
	p.lastEntries, p.lastBytes = n, b
	want := trailingFor(p.cfg.TrailingBytes, db/dn)
	rc := p.raft.ReloadableConfig()
	if cur := rc.TrailingLogs; want*4 >= cur*3 && want*4 <= cur*5 {
		return
	}
	rc.TrailingLogs = want
	if err := p.raft.ReloadConfig(rc); err != nil {
		p.cfg.Logger.Warn("trailing logs", "want", want, "err", err)
		return
	}
	p.cfg.Logger.Debug("trailing logs derived from the write rate", "entries", want, "avg_entry_bytes", db/dn)
}
