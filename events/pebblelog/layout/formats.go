package layout

// StoreFormat names the layout, the hash, the tree and the write-ahead
// log, the value of MetaFormat; a store refuses to open one written with
// another (docs/FORMAT.md).
const StoreFormat = "greffe-ledger/3 event-format=1 hash=sha256 tree=rfc6962 log=greffe-wal stream-index=runs"

// Earlier formats hold the same keys and values, with runs of one event in
// the stream index; the store upgrades them to StoreFormat when it opens
// them, so that a binary of their time refuses the store from then on.
// FormatBeforeLog's binaries would open the store without the records only
// in greffe-wal/ after an unclean stop, and lose acknowledged events;
// FormatBeforeRuns's would read a run as its first event only.
const (
	FormatBeforeLog  = "greffe-ledger/1 event-format=1 hash=sha256 tree=rfc6962"
	FormatBeforeRuns = "greffe-ledger/2 event-format=1 hash=sha256 tree=rfc6962 log=greffe-wal"
)

// Upgradable reports whether a store of format f is upgraded in place to
// StoreFormat when it opens.
func Upgradable(f string) bool { return f == FormatBeforeLog || f == FormatBeforeRuns }

// Known reports whether a store recorded with format f has the keys and
// values this version reads: StoreFormat, or an earlier format the store
// upgrades.
func Known(f string) bool { return f == StoreFormat || Upgradable(f) }

// ReadFormats returns the store formats this binary opens, newest first:
// StoreFormat, which it writes, then the earlier ones it upgrades in place
// to StoreFormat. `greffe version` and GET /v1/info report them, so that
// an operator knows before upgrading whether a new binary will open an old
// folder, and that it then leaves the folder unreadable to the old binary
// (docs/OPERATIONS.md, "Upgrading").
func ReadFormats() []string { return []string{StoreFormat, FormatBeforeRuns, FormatBeforeLog} }

// WALFolder is the folder of the store's own write-ahead log inside the
// Pebble directory (docs/FORMAT.md, "The write-ahead log").
const WALFolder = "greffe-wal"
