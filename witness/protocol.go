package witness

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	fnote "github.com/transparency-dev/formats/note"
	"golang.org/x/mod/sumdb/note"
)

// The add-checkpoint call of C2SP tlog-witness, as both ends use it.
const (
	// AddCheckpointPath is appended to a witness's base URL (its
	// submission prefix).
	AddCheckpointPath = "/add-checkpoint"
	// ContentTypeSize is the content type of a 409 answer whose body is the
	// size of the witness's latest cosigned checkpoint, in decimal and a
	// newline.
	ContentTypeSize = "text/x.tlog.size"
	// MaxProofLines bounds the consistency proof of a request: "the client
	// MUST NOT send more than 63 consistency proof lines" (tlog-witness).
	MaxProofLines = 63
	// MaxRequestBytes bounds an add-checkpoint body: the transparency-dev
	// witness's limit (16 KiB), enough for 63 proof lines and a checkpoint
	// with a few post-quantum signatures.
	MaxRequestBytes = 16 << 10
	// MaxResponseBytes bounds the cosignature lines read from a witness's
	// answer: a note holds at most 100 signatures, and an ML-DSA-44
	// cosignature line is about 3.3 KB.
	MaxResponseBytes = 400 << 10
)

// AddCheckpointRequest is the body of POST <prefix>/add-checkpoint:
//
//	old <size>\n
//	<base64 hash>\n        (zero to 63 consistency proof lines)
//	\n
//	<signed checkpoint note>
//
// OldSize is the size of the checkpoint the witness last cosigned for the
// log (0 when none), Proof the RFC 6962 consistency proof from it to
// Checkpoint (empty from size 0).
type AddCheckpointRequest struct {
	OldSize    uint64
	Proof      [][]byte
	Checkpoint []byte
}

// Marshal encodes the request body.
func (r AddCheckpointRequest) Marshal() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "old %d\n", r.OldSize)
	for _, h := range r.Proof {
		b.WriteString(base64.StdEncoding.EncodeToString(h))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.Write(r.Checkpoint)
	return b.Bytes()
}

// ErrMalformedRequest is returned by ParseAddCheckpoint for a body that is
// not an add-checkpoint request (answered 400).
var ErrMalformedRequest = errors.New("witness: malformed add-checkpoint request")

// ParseAddCheckpoint decodes a request body strictly: lines end in "\n",
// the size is decimal without leading zeroes, every proof line is base64
// and there are at most MaxProofLines of them. The checkpoint (whatever
// follows the empty line) aliases b.
func ParseAddCheckpoint(b []byte) (AddCheckpointRequest, error) {
	var r AddCheckpointRequest
	line, rest, ok := bytes.Cut(b, []byte{'\n'})
	if !ok {
		return r, fmt.Errorf("%w: no old size line", ErrMalformedRequest)
	}
	sz, found := strings.CutPrefix(string(line), "old ")
	n, err := strconv.ParseUint(sz, 10, 64)
	if !found || err != nil || (len(sz) > 1 && sz[0] == '0') {
		return r, fmt.Errorf("%w: the first line must be \"old <size>\", got %q", ErrMalformedRequest, line)
	}
	r.OldSize = n
	for {
		line, rest, ok = bytes.Cut(rest, []byte{'\n'})
		if !ok {
			return r, fmt.Errorf("%w: no empty line before the checkpoint", ErrMalformedRequest)
		}
		if len(line) == 0 {
			break
		}
		if len(r.Proof) == MaxProofLines {
			return r, fmt.Errorf("%w: more than %d consistency proof lines", ErrMalformedRequest, MaxProofLines)
		}
		h, err := base64.StdEncoding.DecodeString(string(line))
		if err != nil {
			return r, fmt.Errorf("%w: proof line %d is not base64", ErrMalformedRequest, len(r.Proof)+1)
		}
		r.Proof = append(r.Proof, h)
	}
	r.Checkpoint = rest
	return r, nil
}

// ParseCosignatureVerifier reads a witness's cosignature/v1 verifier key,
// <name>+<hash>+<base64 key> as C2SP signed-note encodes it: key type 0x04
// (Ed25519 cosignature/v1) or 0x06 (ML-DSA-44). The hash must be the key's.
//
// A plain Ed25519 note key (type 0x01) is refused, with the cosignature/v1
// key it converts to in the error: its key hash never matches a
// cosignature line, so a verifier built from it would find none.
func ParseCosignatureVerifier(vkey string) (note.Verifier, error) {
	vkey = strings.TrimSpace(vkey)
	name, rest, _ := strings.Cut(vkey, "+")
	hash, key64, _ := strings.Cut(rest, "+")
	key, err := base64.StdEncoding.DecodeString(key64)
	if err != nil || len(key) == 0 || name == "" || len(hash) != 8 {
		return nil, fmt.Errorf("witness key %q: not a verifier key <name>+<hash>+<base64 key>", vkey)
	}
	if key[0] == 0x01 {
		conv, err := fnote.VKeyToCosignatureV1(vkey)
		if err != nil {
			return nil, fmt.Errorf("witness key %q: a plain Ed25519 note key (type 0x01) whose hash does not match: %w", vkey, err)
		}
		return nil, fmt.Errorf("witness key %q is a plain Ed25519 note key (type 0x01), which never matches a cosignature; its cosignature/v1 key (type 0x04) is %s", vkey, conv)
	}
	v, err := fnote.NewVerifierForCosignatureV1(vkey)
	if err != nil {
		return nil, fmt.Errorf("witness key %q: %w (cosignature/v1 keys are of type 0x04 or 0x06)", vkey, err)
	}
	if got := fmt.Sprintf("%08x", v.KeyHash()); got != hash {
		return nil, fmt.Errorf("witness key %q: the key hash is %s, not %s", vkey, got, hash)
	}
	return v, nil
}

// NewCosigner returns a cosignature/v1 signer for a note signer key
// (PRIVATE+KEY+<name>+<hash>+<base64 key>, the format of greffe's
// checkpoint keys, <data>/keys/*.key), and the cosignature/v1 verifier key
// (type 0x04) that the logs it witnesses verify it with. Only Ed25519 keys
// (types 0x01 and 0x04) are read.
func NewCosigner(skey string) (note.Signer, string, error) {
	skey = strings.TrimSpace(skey)
	s, err := fnote.NewSignerForCosignatureV1(skey)
	if err != nil {
		return nil, "", fmt.Errorf("witness signer key: %w", err)
	}
	// PRIVATE+KEY+<name>+<hash>+<base64>: the base64 may hold "+" too.
	rest := skey
	for range 4 {
		_, rest, _ = strings.Cut(rest, "+")
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(key) != 1+ed25519.SeedSize || (key[0] != 0x01 && key[0] != 0x04) {
		return nil, "", errors.New("witness signer key: only Ed25519 note keys (type 0x01 or 0x04) are supported")
	}
	pub := ed25519.NewKeyFromSeed(key[1:]).Public().(ed25519.PublicKey)
	vkey := fmt.Sprintf("%s+%08x+%s", s.Name(), s.KeyHash(), base64.StdEncoding.EncodeToString(append([]byte{0x04}, pub...)))
	v, err := ParseCosignatureVerifier(vkey)
	if err != nil || v.KeyHash() != s.KeyHash() {
		return nil, "", fmt.Errorf("witness signer key: its verifier key does not check: %v", err)
	}
	return s, vkey, nil
}

// LoadCosigner reads NewCosigner's key from a file.
func LoadCosigner(path string) (note.Signer, string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("witness signer key: %w", err)
	}
	return NewCosigner(string(b))
}

// GenerateKey creates an Ed25519 note signer key named name (the
// witness's name, e.g. "witness.example.org/w1") and returns it with its
// cosignature/v1 verifier key.
func GenerateKey(name string) (skey, vkey string, err error) {
	skey, _, err = note.GenerateKey(rand.Reader, name)
	if err != nil {
		return "", "", fmt.Errorf("witness key: %w", err)
	}
	if _, vkey, err = NewCosigner(skey); err != nil {
		return "", "", err
	}
	return skey, vkey, nil
}

// signatureLines returns the note signature lines of signer over text
// ("— <name> <base64>\n"), as add-checkpoint answers them.
func signatureLines(text string, signer note.Signer) ([]byte, error) {
	signed, err := note.Sign(&note.Note{Text: text}, signer)
	if err != nil {
		return nil, err
	}
	return signed[len(text)+1:], nil
}

// cosignatureLine returns the signature line of v's verified signature in
// n ("" when n has none).
func cosignatureLine(n *note.Note, v note.Verifier) string {
	for _, s := range n.Sigs {
		if s.Name == v.Name() && s.Hash == v.KeyHash() {
			return "— " + s.Name + " " + s.Base64 + "\n"
		}
	}
	return ""
}
