package backup

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/note"
)

// The manifest's signature (format 2, issue #20).
//
// backup.json.sig is a signed note (golang.org/x/mod/sumdb/note, the form
// of the node's checkpoints) by every checkpoint signing key of the node
// that took the backup, over three lines:
//
//	greffe-backup/2 manifest
//	<origin>
//	<hex SHA-256 of backup.json's bytes>
//
// The manifest lists the size and SHA-256 of every file and holds the
// checkpoint note, so the signature covers the whole folder. The bytes of
// backup.json are hashed as they are stored, never re-encoded. The first
// line keeps the note apart from a checkpoint, whose first line is the
// origin ("greffe/<ledger id>"): neither can be taken for the other.

// maxSigBytes bounds the signature file: three short lines and a line per
// signature, and note.Open reads at most 100 signatures.
const maxSigBytes = 64 << 10

// manifestSigText is the signed text for the manifest bytes manifest.
func manifestSigText(origin string, manifest []byte) string {
	sum := sha256.Sum256(manifest)
	return fmt.Sprintf("%s manifest\n%s\n%s\n", Format, origin, hex.EncodeToString(sum[:]))
}

// signManifest signs the manifest bytes with every signer.
func signManifest(origin string, manifest []byte, signers []note.Signer) ([]byte, error) {
	if len(signers) == 0 {
		return nil, errors.New("backup: no signing key to sign the manifest with")
	}
	return note.Sign(&note.Note{Text: manifestSigText(origin, manifest)}, signers...)
}

// checkManifestSig checks that sig is a signature of the manifest bytes by
// at least one of the verifiers (and by none of them badly), and returns
// the verifier keys' hashes that signed. A signature by another key is
// ignored.
func checkManifestSig(sig []byte, origin string, manifest []byte, vs []note.Verifier) ([]note.Signature, error) {
	n, err := note.Open(sig, note.VerifierList(vs...))
	var unverified *note.UnverifiedNoteError
	switch {
	case errors.As(err, &unverified):
		var by []string
		for _, s := range unverified.Note.UnverifiedSigs {
			by = append(by, fmt.Sprintf("%s+%08x", s.Name, s.Hash))
		}
		return nil, fmt.Errorf("no signature by a trusted key (signed by %s; trusted: %s)", orNone(by), verifierNames(vs))
	case err != nil:
		return nil, fmt.Errorf("the signature does not verify: %v", err)
	}
	if want := manifestSigText(origin, manifest); n.Text != want {
		return nil, fmt.Errorf("the signature is of another manifest (it signs %q, this manifest is %q)",
			strings.TrimSpace(n.Text), strings.TrimSpace(want))
	}
	return n.Sigs, nil
}

// sigBindsManifest checks, without any key, that sig is a well-formed
// note of the manifest bytes: what a receiver can check before it knows
// whom to trust.
func sigBindsManifest(sig []byte, origin string, manifest []byte) error {
	_, err := note.Open(sig, note.VerifierList())
	var unverified *note.UnverifiedNoteError
	if !errors.As(err, &unverified) {
		return fmt.Errorf("the manifest's signature is not a signed note: %v", err)
	}
	if want := manifestSigText(origin, manifest); unverified.Note.Text != want {
		return errors.New("the manifest's signature is of another manifest")
	}
	if len(unverified.Note.UnverifiedSigs) == 0 {
		return errors.New("the manifest's signature holds no signature")
	}
	return nil
}

func verifierNames(vs []note.Verifier) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprintf("%s+%08x", v.Name(), v.KeyHash())
	}
	return orNone(out)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
