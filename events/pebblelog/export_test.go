package pebblelog

// Flush writes the memtable to sstables (and separated values to blob
// files), for tests that need data below the memtable.
func (s *Store) Flush() error {
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	return s.db.Flush()
}
