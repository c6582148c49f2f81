package receipts_test

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"lukechampine.com/blake3"

	"github.com/crux-go/crux/receipts"
)

func TestFingerprint(t *testing.T) {
	pub := signerFromByte(1).Public()
	sum := blake3.Sum256(pub)
	fp := receipts.Fingerprint(pub)
	assert.Equal(t, "p_"+hex.EncodeToString(sum[:16]), fp)
	assert.Regexp(t, regexp.MustCompile(`^p_[0-9a-f]{32}$`), fp)
	assert.Equal(t, fp, signerFromByte(1).KeyID())
	assert.NotEqual(t, fp, signerFromByte(2).KeyID())
}

func TestEd25519Signer(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	s := receipts.NewEd25519Signer(priv)
	msg := []byte("body")
	sig, err := s.Sign(msg)
	require.NoError(t, err)
	assert.True(t, ed25519.Verify(s.Public(), msg, sig))
	assert.Equal(t, receipts.Fingerprint(priv.Public().(ed25519.PublicKey)), s.KeyID())

	// Neither the key nor its seed shows up in formatted output.
	seedHex := hex.EncodeToString(priv.Seed())
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		out := fmt.Sprintf(verb, s)
		assert.NotContains(t, out, seedHex[:16], verb)
		assert.Contains(t, out, s.KeyID(), verb)
	}
	// The public key returned is a copy.
	pub := s.Public()
	pub[0] ^= 0xff
	assert.NotEqual(t, pub, s.Public())

	assert.Panics(t, func() { receipts.NewEd25519Signer(priv[:10]) })
}

func TestLoadOrCreateKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data") // created by LoadOrCreateKey
	s1, err := receipts.LoadOrCreateKey(dir)
	require.NoError(t, err)

	path := filepath.Join(dir, receipts.KeyFileName)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	if runtime.GOOS != "windows" {
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Regexp(t, regexp.MustCompile(`\A[0-9a-f]{64}\n\z`), string(b))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left behind")

	// A restart loads the same key.
	s2, err := receipts.LoadOrCreateKey(dir)
	require.NoError(t, err)
	assert.Equal(t, s1.KeyID(), s2.KeyID())
	assert.Equal(t, s1.Public(), s2.Public())
	sig, err := s1.Sign([]byte("m"))
	require.NoError(t, err)
	assert.True(t, ed25519.Verify(s2.Public(), []byte("m"), sig))

	// It is the key the file says.
	seed, err := hex.DecodeString(string(b[:64]))
	require.NoError(t, err)
	assert.Equal(t, receipts.NewEd25519Signer(ed25519.NewKeyFromSeed(seed)).KeyID(), s1.KeyID())
}

func TestLoadOrCreateKeyPermissions(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Unix permissions")
	}
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o660, 0o602} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			_, err := receipts.LoadOrCreateKey(dir)
			require.NoError(t, err)
			path := filepath.Join(dir, receipts.KeyFileName)
			require.NoError(t, os.Chmod(path, mode))
			_, err = receipts.LoadOrCreateKey(dir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "group or others")
			assert.Contains(t, err.Error(), path)
			fi, err := os.Stat(path)
			require.NoError(t, err)
			assert.Equal(t, mode, fi.Mode().Perm(), "the file is left alone")
		})
	}
	t.Run("0400 is fine", func(t *testing.T) {
		dir := t.TempDir()
		s1, err := receipts.LoadOrCreateKey(dir)
		require.NoError(t, err)
		require.NoError(t, os.Chmod(filepath.Join(dir, receipts.KeyFileName), 0o400))
		s2, err := receipts.LoadOrCreateKey(dir)
		require.NoError(t, err)
		assert.Equal(t, s1.KeyID(), s2.KeyID())
	})
}

func TestLoadOrCreateKeyMalformed(t *testing.T) {
	valid := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		name    string
		content string
		want    string
	}{
		{"empty", "", "0 bytes"},
		{"short", valid[:62] + "\n", "bytes long"},
		{"no newline", valid, "bytes long"},
		{"two newlines", valid + "\n\n", "bytes long"},
		{"CR LF", valid[:63] + "\r\n", "lowercase hex"},
		{"uppercase", "0123456789ABCDEF" + valid[16:] + "\n", "lowercase hex"},
		{"not hex", "zz" + valid[2:] + "\n", "lowercase hex"},
		{"space instead of newline", valid + " ", "newline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, receipts.KeyFileName)
			require.NoError(t, os.WriteFile(path, []byte(tt.content), 0o600))
			_, err := receipts.LoadOrCreateKey(dir)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "malformed")
			assert.Contains(t, err.Error(), tt.want)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, tt.content, string(b), "never silently replaced")
		})
	}
	t.Run("valid hand-written file", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, receipts.KeyFileName), []byte(valid+"\n"), 0o600))
		s, err := receipts.LoadOrCreateKey(dir)
		require.NoError(t, err)
		seed, _ := hex.DecodeString(valid)
		assert.Equal(t, receipts.NewEd25519Signer(ed25519.NewKeyFromSeed(seed)).KeyID(), s.KeyID())
	})
	t.Run("directory in the way", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(dir, receipts.KeyFileName), 0o700))
		_, err := receipts.LoadOrCreateKey(dir)
		assert.ErrorContains(t, err, "not a regular file")
	})
	t.Run("empty dir name", func(t *testing.T) {
		_, err := receipts.LoadOrCreateKey("")
		assert.Error(t, err)
	})
}

// TestLoadOrCreateKeyRace: concurrent first loads all end up with one key.
func TestLoadOrCreateKeyRace(t *testing.T) {
	for range 10 {
		dir := t.TempDir()
		const n = 16
		ids := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				s, err := receipts.LoadOrCreateKey(dir)
				errs[i] = err
				if err == nil {
					ids[i] = s.KeyID()
				}
			})
		}
		close(start)
		wg.Wait()
		for i := range n {
			require.NoError(t, errs[i])
			assert.Equal(t, ids[0], ids[i])
		}
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Len(t, entries, 1)
	}
}
