package pebblelog

// ReadFormats returns the store formats this binary opens, newest first:
// StoreFormat, which it writes, then the earlier ones Open upgrades in
// place to StoreFormat (keys.go). `greffe version` and GET /v1/info
// report them, so that an operator knows before upgrading whether a new
// binary will open an old folder, and that it then leaves the folder
// unreadable to the old binary (docs/OPERATIONS.md, "Upgrading").
func ReadFormats() []string { return []string{storeFormat, formatBeforeRuns, formatBeforeLog} }
