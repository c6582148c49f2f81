package receipts_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
)

// testBundle is a bundle of n receipts of tenant acme and two events,
// written by s, with the manifest's anchor as ChainWindow computes it.
func testBundle(t testing.TB, s receipts.Signer, n int) ([]byte, *receipts.Bundle) {
	t.Helper()
	db := openDB(t)
	for i := range n {
		appendOne(t, db, s, "acme", "forget", forgetPayload{Reason: "r", Facts: []string{string(rune('a' + i%26))}})
	}
	var w *receipts.Window
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		var err error
		w, err = receipts.ChainWindow(tx, "acme", time.Time{}, testNow.Add(time.Hour), 100000)
		return err
	}))
	b := &receipts.Bundle{
		Manifest: receipts.BundleManifest{
			BundleID: "bundle-test", Since: "1970-01-01T00:00:00Z", Until: testNow.Add(time.Hour).Format(time.RFC3339),
			GeneratedAt: testNow.Format(time.RFC3339Nano),
			Scope:       receipts.BundleScope{TenantID: "acme", Caller: "agent-7"}, Chain: w.Anchor("acme"),
		},
		Events: []receipts.BundleEvent{
			{FactID: "f_1", Entity: "project:crux", Key: "lang", Value: "Go <&>", Confidence: 1, StoredAt: testNow.Format(time.RFC3339Nano), Tokens: 2, Version: 1},
			{FactID: "f_2", Entity: "project:crux", Key: "lang", Value: "Go 1.26", Confidence: 0.9, StoredAt: testNow.Format(time.RFC3339Nano), Tokens: 2, Version: 2, Supersedes: "f_1"},
		},
		Receipts: w.Receipts,
	}
	var buf bytes.Buffer
	_, err := receipts.WriteBundle(&buf, b, s)
	require.NoError(t, err)
	return buf.Bytes(), b
}

func TestBundleRoundTrip(t *testing.T) {
	s := signerFromByte(3)
	data, b := testBundle(t, s, 5)
	rep := receipts.VerifyBundle(data, nil, testNow)
	require.True(t, rep.OK(), "%s: %s", rep.ErrorCode, rep.ErrorMessage)
	assert.Equal(t, "bundle-test", rep.BundleID)
	assert.Equal(t, 2, rep.FactCount)
	assert.Equal(t, 5, rep.ReceiptCount)
	assert.Equal(t, s.KeyID(), rep.SignerKeyID)
	assert.Equal(t, receipts.KeyClassUnknown, rep.KeyClass, "a key handed to NewEd25519Signer is of unknown class")
	assert.True(t, rep.SealValid && rep.SignatureValid && rep.ReceiptsValid)
	assert.Len(t, b.Receipts, 5)

	// With the signer's keyring it verifies; with another key's it does not.
	assert.True(t, receipts.VerifyBundle(data, receipts.NewKeyring(s.Public()), testNow).OK())
	other := receipts.VerifyBundle(data, receipts.NewKeyring(signerFromByte(4).Public()), testNow)
	assert.Equal(t, receipts.KeyNotFound, other.ErrorCode)
}

// Every byte of a bundle is covered: flipping any one of them, or any one
// bit, makes verification fail.
func TestBundleEveryByteFlipDetected(t *testing.T) {
	s := signerFromByte(3)
	data, _ := testBundle(t, s, 3)
	require.True(t, receipts.VerifyBundle(data, nil, testNow).OK())
	codes := map[receipts.Code]int{}
	for i := range data {
		for _, mask := range []byte{0xff, 0x01, 0x80} {
			flipped := bytes.Clone(data)
			flipped[i] ^= mask
			rep := receipts.VerifyBundle(flipped, nil, testNow)
			if rep.OK() {
				t.Fatalf("flipping byte %d of %d with %#x went undetected", i, len(data), mask)
			}
			codes[rep.ErrorCode]++
		}
	}
	t.Logf("%d bytes, %d flips: %v", len(data), 3*len(data), codes)
	// The seal catches flips the content checks would miss, and content
	// checks name flips inside the compressed stream.
	assert.Positive(t, codes[receipts.BundleSealMissing])
	assert.Positive(t, codes[receipts.BundleUnreadable]+codes[receipts.BundleSealInvalid])
}

// A bundle of 2,000 receipts, flipped at a stride of positions.
func TestBundleStridedFlipsDetected(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 2,000 receipts")
	}
	s := signerFromByte(3)
	data, _ := testBundle(t, s, 2000)
	require.True(t, receipts.VerifyBundle(data, nil, testNow).OK())
	stride := len(data)/400 + 1
	for i := 0; i < len(data); i += stride {
		flipped := bytes.Clone(data)
		flipped[i] ^= 0x01
		require.False(t, receipts.VerifyBundle(flipped, nil, testNow).OK(), "flip at %d of %d", i, len(data))
	}
}

// A bundle whose signer re-signs altered content verifies only if the
// receipts are genuine and consecutive and the anchor holds.
func TestBundleResignedContent(t *testing.T) {
	s := signerFromByte(3)
	_, b := testBundle(t, s, 4)
	write := func(b *receipts.Bundle) receipts.BundleReport {
		var buf bytes.Buffer
		_, err := receipts.WriteBundle(&buf, b, s)
		require.NoError(t, err)
		return receipts.VerifyBundle(buf.Bytes(), nil, testNow)
	}
	gap := *b
	gap.Receipts = []*receipts.Receipt{b.Receipts[0], b.Receipts[2], b.Receipts[3]}
	assert.Equal(t, receipts.ChainGap, write(&gap).ErrorCode)

	tampered := *b
	r := *b.Receipts[1]
	r.Body = bytes.Clone(r.Body)
	r.Body[len(r.Body)-1] ^= 1
	tampered.Receipts = []*receipts.Receipt{b.Receipts[0], &r, b.Receipts[2], b.Receipts[3]}
	rep := write(&tampered)
	assert.Equal(t, receipts.BundleReceiptInvalid, rep.ErrorCode)
	assert.Contains(t, rep.ErrorMessage, string(receipts.BodyHashMismatch))

	head := *b
	head.Manifest.Chain.HeadHash = "00" + head.Manifest.Chain.HeadHash[2:]
	assert.Equal(t, receipts.ChainHeadMismatch, write(&head).ErrorCode)

	short := *b
	short.Receipts = b.Receipts[:3]
	assert.Equal(t, receipts.ChainGap, write(&short).ErrorCode, "the anchor names seq 4 as the last")
	short.Manifest.Chain.LastSeq = 3
	assert.True(t, write(&short).OK(), "a stretch ending before the head verifies")

	other := *b
	other.Receipts = []*receipts.Receipt{b.Receipts[0]}
	other.Manifest.Chain.LastSeq = 1
	foreign := signerFromByte(9)
	var buf bytes.Buffer
	_, err := receipts.WriteBundle(&buf, &other, foreign)
	require.NoError(t, err)
	rep = receipts.VerifyBundle(buf.Bytes(), nil, testNow)
	assert.Equal(t, receipts.BundleReceiptInvalid, rep.ErrorCode, "receipts signed by a key the bundle does not carry")
	assert.Contains(t, rep.ErrorMessage, string(receipts.KeyNotFound))
	kr := receipts.NewKeyring(foreign.Public())
	require.NoError(t, kr.Add(s.KeyID(), s.Public()))
	assert.True(t, receipts.VerifyBundle(buf.Bytes(), kr, testNow).OK(), "a keyring with both keys verifies them")
}

func TestBundleNotABundle(t *testing.T) {
	for name, data := range map[string][]byte{
		"empty":   nil,
		"short":   []byte("hello"),
		"garbage": bytes.Repeat([]byte{0x42}, 4096),
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, receipts.BundleSealMissing, receipts.VerifyBundle(data, nil, testNow).ErrorCode)
		})
	}
}

func TestChainWindow(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	for i := range 6 {
		require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
			_, err := receipts.Append(tx, s, "acme", "decision", "agent", map[string]int{"i": i}, testNow.Add(time.Duration(i)*time.Minute))
			return err
		}))
	}
	window := func(since, until time.Time, max int) *receipts.Window {
		var w *receipts.Window
		require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
			var err error
			w, err = receipts.ChainWindow(tx, "acme", since, until, max)
			return err
		}))
		return w
	}
	seqs := func(w *receipts.Window) []uint64 {
		var out []uint64
		for _, r := range w.Receipts {
			out = append(out, r.Seq)
		}
		return out
	}
	w := window(testNow.Add(90*time.Second), testNow.Add(4*time.Minute), 10)
	assert.Equal(t, []uint64{3, 4}, seqs(w))
	assert.False(t, w.Truncated)
	assert.EqualValues(t, 6, w.HeadSeq)
	w = window(time.Time{}, testNow.Add(time.Hour), 4)
	assert.Equal(t, []uint64{1, 2, 3, 4}, seqs(w))
	assert.True(t, w.Truncated)
	assert.Empty(t, seqs(window(testNow.Add(time.Hour), testNow.Add(2*time.Hour), 4)))
	anchor := window(time.Time{}, testNow.Add(time.Hour), 10).Anchor("acme")
	assert.EqualValues(t, 1, anchor.FirstSeq)
	assert.EqualValues(t, 6, anchor.LastSeq)
	assert.Len(t, anchor.HeadHash, 64)
}

func TestGenerateEphemeralKeyClass(t *testing.T) {
	s, err := receipts.GenerateEphemeralKey()
	require.NoError(t, err)
	assert.Equal(t, receipts.KeyClassEphemeral, receipts.KeyClassOf(s))
	assert.Len(t, s.Public(), ed25519.PublicKeySize)
	p, err := receipts.LoadOrCreateKey(t.TempDir())
	require.NoError(t, err)
	assert.Equal(t, receipts.KeyClassPersistent, p.KeyClass())
	assert.NotEmpty(t, p.KeyFile())
}
