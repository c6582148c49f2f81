package receipts_test

import (
	"bytes"
	"testing"

	"github.com/crux-go/crux/receipts"
)

// FuzzVerifyBundle: whatever the bytes, VerifyBundle never panics, names a
// code when it refuses, and accepts nothing but a bundle sealed by the
// seed's key, which the fuzzer does not hold.
//
//	go test -run '^$' -fuzz FuzzVerifyBundle ./receipts
func FuzzVerifyBundle(f *testing.F) {
	s := signerFromByte(3)
	data, _ := testBundle(f, s, 3)
	f.Add(data)
	f.Add(data[:len(data)-1])
	f.Add(append(bytes.Clone(data), 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		rep := receipts.VerifyBundle(in, nil, testNow)
		if rep.OK() && (rep.SignerKeyID != s.KeyID() || !rep.SealValid || !rep.SignatureValid) {
			t.Fatalf("a bundle not sealed by the seed's key verifies (%d bytes, key %s)", len(in), rep.SignerKeyID)
		}
		if !rep.OK() && rep.ErrorCode == "" {
			t.Fatal("a failed verification names no code")
		}
	})
}
