package receipts

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"lukechampine.com/blake3"

	"github.com/crux-go/crux/internal/keyfile"
)

// Signer signs receipt bodies. An embedder may implement it over an HSM or
// a KMS. Sign must return a 64-byte Ed25519 signature of msg that verifies
// with Public; KeyID names the key in a [Keyring] and is normally
// Fingerprint(Public()). Sign is called inside store transactions, which
// may run more than once, so it must have no other effect than signing.
type Signer interface {
	// KeyID is the id verifiers look the public key up by.
	KeyID() string
	// Public is the Ed25519 public key.
	Public() ed25519.PublicKey
	// Sign returns the Ed25519 signature of msg.
	Sign(msg []byte) ([]byte, error)
}

// Fingerprint is the key id of pub: "p_" and the lowercase hex of the first
// 16 bytes of BLAKE3(pub), in CueCrux's passport-fingerprint format.
func Fingerprint(pub ed25519.PublicKey) string {
	sum := blake3.Sum256(pub)
	return "p_" + hex.EncodeToString(sum[:16])
}

// Ed25519Signer is a [Signer] holding an Ed25519 private key in memory.
// It is safe for concurrent use. Its String and GoString methods never
// print the key.
type Ed25519Signer struct {
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
	id   string
	// keyFile is the key file the key was read from ("" for none), and
	// class its [KeyClass]; see keyclass.go.
	keyFile string
	class   string
}

var _ Signer = (*Ed25519Signer)(nil)

// NewEd25519Signer returns a signer over priv, with key id
// Fingerprint(public key). It keeps a copy of priv. It panics if priv is
// not ed25519.PrivateKeySize bytes long.
func NewEd25519Signer(priv ed25519.PrivateKey) *Ed25519Signer {
	if len(priv) != ed25519.PrivateKeySize {
		panic(fmt.Sprintf("receipts: Ed25519 private key is %d bytes, want %d", len(priv), ed25519.PrivateKeySize))
	}
	priv = bytes.Clone(priv)
	pub := priv.Public().(ed25519.PublicKey)
	return &Ed25519Signer{priv: priv, pub: pub, id: Fingerprint(pub)}
}

// KeyID returns Fingerprint(Public()).
func (s *Ed25519Signer) KeyID() string { return s.id }

// Public returns a copy of the public key.
func (s *Ed25519Signer) Public() ed25519.PublicKey { return bytes.Clone(s.pub) }

// Sign returns the Ed25519 signature of msg. It never fails.
func (s *Ed25519Signer) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.priv, msg), nil }

// String names the signer by key id, without key material.
func (s *Ed25519Signer) String() string { return "ed25519 signer " + s.id }

// GoString is String, so %#v does not print the private key either.
func (s *Ed25519Signer) GoString() string { return s.String() }

// KeyFileName is the name of the signing key file in the directory given to
// [LoadOrCreateKey].
const KeyFileName = "signing.key"

// keyFileLen is the size of a key file: 64 lowercase hex digits and "\n".
const keyFileLen = 2*ed25519.SeedSize + 1

// LoadOrCreateKey returns the signer whose seed is stored in
// dir/signing.key, creating dir (0700) and the file first if needed.
//
// The file holds the 32-byte Ed25519 seed as 64 lowercase hex digits and a
// newline, mode 0600. A new file is written to a temporary file in dir
// (0600), flushed to disk, and hard-linked into place, which fails rather
// than replace an existing file; so processes racing to create it all end
// up with the key of whichever linked first. (On a file system without hard
// links it is created with O_EXCL instead, and a racing reader may then see
// it half-written and fail.)
//
// An existing file is never replaced: LoadOrCreateKey fails, naming the
// file, if it is not a regular file, if group or others may access it
// (except on Windows, where Unix permissions do not apply), or if its
// content is not exactly the format above.
func LoadOrCreateKey(dir string) (*Ed25519Signer, error) {
	if dir == "" {
		return nil, errors.New("receipts: key directory is empty")
	}
	path := filepath.Join(dir, KeyFileName)
	s, err := loadKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return s, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("receipts: key directory: %w", err)
	}
	if err := createKey(dir); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return loadKey(path) // another process created it first
		}
		return nil, err
	}
	return loadKey(path)
}

// LoadKey reads the existing key file at path, in the format of
// LoadOrCreateKey, with the same checks (a regular file, mode 0600). It
// never creates one: a missing file is an error wrapping fs.ErrNotExist.
func LoadKey(path string) (*Ed25519Signer, error) { return loadKey(path) }

// loadKey reads and checks the key file at path. A missing file is
// reported with an error wrapping fs.ErrNotExist.
func loadKey(path string) (*Ed25519Signer, error) {
	b, err := keyfile.Read(path, keyFileLen+1, true)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("receipts: key file %w", err)
	}
	seed, err := parseKeyFile(b)
	if err != nil {
		return nil, fmt.Errorf("receipts: key file %s is malformed: %w; it is left as it is (move it away to create a new key, which invalidates receipts signed with the old one)", path, err)
	}
	s := NewEd25519Signer(ed25519.NewKeyFromSeed(seed))
	s.keyFile, s.class = path, KeyClassPersistent
	return s, nil
}

// parseKeyFile checks the key file format and returns the seed.
func parseKeyFile(b []byte) ([]byte, error) {
	if len(b) != keyFileLen {
		return nil, fmt.Errorf("it is %d bytes long, want %d (64 lowercase hex digits and a newline)", len(b), keyFileLen)
	}
	if b[keyFileLen-1] != '\n' {
		return nil, errors.New("it does not end with a newline")
	}
	for i, c := range b[:keyFileLen-1] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return nil, fmt.Errorf("byte %d is not a lowercase hex digit", i)
		}
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := hex.Decode(seed, b[:keyFileLen-1]); err != nil {
		return nil, err
	}
	return seed, nil
}

// createKey writes a new key file in dir. It fails with an error wrapping
// fs.ErrExist if the file already exists.
func createKey(dir string) error {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return fmt.Errorf("receipts: new key: %w", err)
	}
	content := make([]byte, 0, keyFileLen)
	content = hex.AppendEncode(content, seed)
	content = append(content, '\n')

	if err := keyfile.Create(dir, KeyFileName, content); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		return fmt.Errorf("receipts: new key: %w", err)
	}
	return nil
}
