package projections

// Store is where the runner keeps each model's rows, checkpoint and
// version: a sorted key-value store whose batches commit atomically. The
// node's is Pebble (projections/pebblestore), opened by whoever opens the
// Set, so that this package, which api reads for the models' types, links
// no storage engine. The Set owns the Store it is given and closes it.
type Store interface {
	// Get returns a copy of key's value, or ok false when there is none.
	Get(key []byte) (value []byte, ok bool, err error)
	// Scan calls fn for each key in [lo, hi), in order; key and value are
	// valid during the call only.
	Scan(lo, hi []byte, fn func(key, value []byte) error) error
	// NewBatch starts a batch of writes that commit together.
	NewBatch() Batch
	// Close closes the store.
	Close() error
}

// Batch is a set of writes that commit atomically, or not at all.
type Batch interface {
	Set(key, value []byte) error
	Delete(key []byte) error
	// DeleteRange deletes every key in [lo, hi).
	DeleteRange(lo, hi []byte) error
	// Commit writes the batch; sync waits until it is on disk (the rows
	// are derived: a commit without sync may be lost to a crash, which
	// the restart folds again).
	Commit(sync bool) error
	// Close releases the batch, committed or not.
	Close() error
}
