package commands_test

import (
	"bytes"
	"crypto/ed25519"
)

// pub returns the public half of a deterministic ed25519 key.
func pub(seed byte) []byte {
	k := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	return []byte(k.Public().(ed25519.PublicKey))
}
