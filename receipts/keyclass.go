package receipts

import (
	"crypto/ed25519"
	"crypto/rand"
)

// Key classes: where a signing key lives, as audit bundles record it
// (key_class) and context_custody_audit reports it. A receipt signed by an
// ephemeral key cannot be verified once the process that held the key has
// exited and its public key is lost.
const (
	// KeyClassPersistent: the key was read from a key file
	// ([LoadOrCreateKey], [LoadKey]), so it survives restarts.
	KeyClassPersistent = "persistent"
	// KeyClassEnv: the key came from the environment.
	KeyClassEnv = "env"
	// KeyClassEphemeral: the key was generated for this process and is
	// held only in memory ([GenerateEphemeralKey]).
	KeyClassEphemeral = "ephemeral"
	// KeyClassUnknown: crux was handed the key and does not know where it
	// is kept ([NewEd25519Signer], or a Signer that does not say).
	KeyClassUnknown = "unknown"
)

// KeyClasser is implemented by a [Signer] that knows where its key lives.
// KeyClass returns one of the KeyClass constants.
type KeyClasser interface {
	KeyClass() string
}

// KeyClassOf returns s's key class: what s reports through [KeyClasser],
// else [KeyClassUnknown].
func KeyClassOf(s Signer) string {
	if kc, ok := s.(KeyClasser); ok {
		if c := kc.KeyClass(); c != "" {
			return c
		}
	}
	return KeyClassUnknown
}

// GenerateEphemeralKey returns a signer over a fresh Ed25519 key held only
// in memory: its key class is [KeyClassEphemeral].
func GenerateEphemeralKey() (*Ed25519Signer, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	s := NewEd25519Signer(priv)
	s.class = KeyClassEphemeral
	return s, nil
}

// KeyClass returns where the key lives: [KeyClassPersistent] for a key
// read from a key file, [KeyClassEphemeral] for one made by
// [GenerateEphemeralKey], [KeyClassUnknown] for one given to
// [NewEd25519Signer].
func (s *Ed25519Signer) KeyClass() string {
	if s.class == "" {
		return KeyClassUnknown
	}
	return s.class
}

// KeyFile returns the key file the key was read from, or "" when it was
// not read from one.
func (s *Ed25519Signer) KeyFile() string { return s.keyFile }
