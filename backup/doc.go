// Package backup holds greffe's online backups (issue #13): the backup
// folder and its manifest, the stream a node serves on GET /v1/backup
// ([NewStream]), its receiver ([Fetch], [Receive]), the offline check of a
// backup folder ([Verify]) and the restore of one into a new data folder
// ([Restore]).
//
// A backup folder looks like a node's data folder, plus three files:
//
//	backup.json      the manifest (Manifest): identity, size, root, the
//	                 checkpoint note, and the size and SHA-256 of every file
//	backup.json.sig  the manifest's signature by the node's checkpoint keys
//	checkpoint       the signed checkpoint note at exactly the backup's size
//	ledger/…         a Pebble checkpoint of the node's whole ledger
//	keys/…           the node's verifier keys, and its private keys only
//	                 when an admin asked for them
//
// so that `greffe verify --data DIR` also reads it. The consistent copy
// itself is made by the store (pebblelog.Store.Backup); this package only
// moves, checks and places files.
//
// A backup folder is input that whoever holds it may have changed (issue
// #20): it is checked against keys given from outside, or trusted on first
// use and said so (signature.go, keys.go); only folders and regular files
// are read in it (folder.go); and only the keys its ledger committed to
// are restored.
//
// It may import events, events/pebblelog, audit (and its offline source,
// audit/offline), client, wire (the route and the headers that announce a
// backup), Pebble's vfs and x/mod's note; it must not import api, node or
// cmd (api serves its stream through the Taker, which node wires in; cmd
// wires the commands).
package backup
