// Package backup holds greffe's online backups (issue #13): the backup
// folder and its manifest, the stream a node serves on GET /v1/backup
// ([NewStream]), its receiver ([Fetch], [Receive]), the offline check of a
// backup folder ([Verify]) and the restore of one into a new data folder
// ([Restore]).
//
// A backup folder looks like a node's data folder, plus two files:
//
//	backup.json   the manifest (Manifest): identity, size, root, the
//	              checkpoint note, and the size and SHA-256 of every file
//	checkpoint    the signed checkpoint note at exactly the backup's size
//	ledger/…      a Pebble checkpoint of the node's whole ledger
//	keys/…        the node's checkpoint signing keys (private keys included),
//	              unless the backup was taken without them
//
// so that `greffe verify --data DIR` also reads it. The consistent copy
// itself is made by the store (pebblelog.Store.Backup); this package only
// moves, checks and places files.
//
// It may import events, events/pebblelog, audit, client, Pebble's vfs and
// x/mod's note; it must not import api, node or cmd (api serves its stream,
// node mounts the route, cmd wires the commands).
package backup
