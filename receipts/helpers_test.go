package receipts_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"lukechampine.com/blake3"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// testNow is the clock of the tests.
var testNow = time.Date(2026, 3, 14, 15, 9, 26, 535897932, time.UTC)

// forgetPayload is a typical kind-specific payload.
type forgetPayload struct {
	Reason string   `cbor:"reason"`
	Facts  []string `cbor:"facts"`
}

func openDB(tb testing.TB) *bolt.DB {
	tb.Helper()
	db, err := bolt.Open(filepath.Join(tb.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(tb, err)
	tb.Cleanup(func() { db.Close() })
	return db
}

// signerFromByte returns a deterministic signer.
func signerFromByte(b byte) *receipts.Ed25519Signer {
	return receipts.NewEd25519Signer(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize)))
}

func appendOne(tb testing.TB, db store.Backend, s receipts.Signer, tenant, kind string, payload any) *receipts.Receipt {
	tb.Helper()
	var r *receipts.Receipt
	err := db.Update(context.Background(), func(tx store.Tx) error {
		var err error
		r, err = receipts.Append(tx, s, tenant, kind, "agent-7", payload, testNow)
		return err
	})
	require.NoError(tb, err)
	return r
}

func getOne(tb testing.TB, db store.Backend, id string) *receipts.Receipt {
	tb.Helper()
	var r *receipts.Receipt
	require.NoError(tb, db.View(context.Background(), func(tx store.Tx) error {
		var err error
		r, err = receipts.Get(tx, id)
		return err
	}))
	return r
}

func chainOf(tb testing.TB, db store.Backend, tenant string, from uint64) []*receipts.Receipt {
	tb.Helper()
	var rs []*receipts.Receipt
	require.NoError(tb, db.View(context.Background(), func(tx store.Tx) error {
		return receipts.Chain(tx, tenant, from, func(r *receipts.Receipt) error {
			rs = append(rs, r)
			return nil
		})
	}))
	return rs
}

func verifyStored(tb testing.TB, db store.Backend, tenant string) error {
	tb.Helper()
	var verr error
	require.NoError(tb, db.View(context.Background(), func(tx store.Tx) error {
		verr = receipts.VerifyStoredChain(tx, tenant)
		return nil
	}))
	return verr
}

// clone deep-copies r.
func clone(r *receipts.Receipt) *receipts.Receipt {
	c := *r
	c.Body = bytes.Clone(r.Body)
	c.PayloadHash = bytes.Clone(r.PayloadHash)
	c.Sig = bytes.Clone(r.Sig)
	return &c
}

// rehash sets r's stored payload hash to the BLAKE3 of its body.
func rehash(r *receipts.Receipt) {
	sum := blake3.Sum256(r.Body)
	r.PayloadHash = sum[:]
}

// editSig decodes r's signature record, applies edit and re-encodes it.
func editSig(tb testing.TB, r *receipts.Receipt, edit func(*receipts.SigRecord)) {
	tb.Helper()
	s, err := r.SigRecord()
	require.NoError(tb, err)
	edit(&s)
	r.Sig, err = s.MarshalCBOR()
	require.NoError(tb, err)
}

// indexAfter returns the position just after the first occurrence of
// marker in b, failing the test if there is none.
func indexAfter(tb testing.TB, b []byte, marker string) int {
	tb.Helper()
	i := bytes.Index(b, []byte(marker))
	require.GreaterOrEqual(tb, i, 0, "marker %q not in body", marker)
	return i + len(marker)
}
