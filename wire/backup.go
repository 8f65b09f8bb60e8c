package wire

// GET /v1/backup answers a tar stream (package backup's format), announced
// by its headers before the first byte (docs/API.md, docs/OPERATIONS.md).
const (
	BackupRoute        = "/v1/backup"
	HeaderBackupSize   = "Greffe-Backup-Size"   // events in the backup
	HeaderBackupRoot   = "Greffe-Backup-Root"   // base64 Merkle root at that size
	HeaderBackupBytes  = "Greffe-Backup-Bytes"  // bytes of the files (the manifest excluded)
	HeaderBackupLedger = "Greffe-Backup-Ledger" // ledger id
)

// BackupInfo is what the headers of GET /v1/backup announce: the backup's
// size (events) and Merkle root at that size, its ledger, and the bytes of
// its files (the manifest excluded), for progress.
type BackupInfo struct {
	Size     uint64
	Root     [32]byte
	LedgerID string
	Bytes    int64
}
