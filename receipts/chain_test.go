package receipts_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
)

// appendN appends n receipts to tenant and returns its chain.
func appendN(t *testing.T, db store.Backend, s receipts.Signer, tenant string, n int) []*receipts.Receipt {
	t.Helper()
	for i := range n {
		appendOne(t, db, s, tenant, "decision", map[string]int{"i": i})
	}
	return chainOf(t, db, tenant, 0)
}

func chainKey(tenant string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte(tenant), 0), seq)
}

func TestVerifyChain(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	rs := appendN(t, db, s, "acme", 5)
	require.Len(t, rs, 5)
	require.NoError(t, receipts.VerifyChain(rs))
	require.NoError(t, verifyStored(t, db, "acme"))

	cl := func(rs []*receipts.Receipt) []*receipts.Receipt {
		out := make([]*receipts.Receipt, len(rs))
		for i, r := range rs {
			out[i] = clone(r)
		}
		return out
	}
	tests := []struct {
		name   string
		build  func() []*receipts.Receipt
		seq    uint64 // 0: the chain is intact
		reason string
	}{
		{"whole chain", func() []*receipts.Receipt { return cl(rs) }, 0, ""},
		{"suffix", func() []*receipts.Receipt { return cl(rs[2:]) }, 0, ""},
		{"empty", func() []*receipts.Receipt { return nil }, 0, ""},
		{"dropped receipt", func() []*receipts.Receipt {
			c := cl(rs)
			return append(c[:2], c[3:]...)
		}, 3, "gap"},
		{"reordered", func() []*receipts.Receipt {
			c := cl(rs)
			c[1], c[2] = c[2], c[1]
			return c
		}, 2, "gap"},
		{"reversed tail", func() []*receipts.Receipt {
			c := cl(rs)
			return []*receipts.Receipt{c[0], c[1], c[2], c[4], c[3]}
		}, 4, "gap"},
		{"out of order", func() []*receipts.Receipt {
			c := cl(rs)
			return []*receipts.Receipt{c[2], c[3], c[1]}
		}, 2, "out of order"},
		{"duplicate seq", func() []*receipts.Receipt {
			c := cl(rs)
			return []*receipts.Receipt{c[0], c[1], c[1], c[2]}
		}, 2, "duplicate"},
		{"prev_hash altered", func() []*receipts.Receipt {
			c := cl(rs)
			c[3].Body[indexAfter(t, c[3].Body, "prev_hash")+2+5] ^= 0x01
			return c
		}, 4, "prev_hash"},
		{"previous body altered", func() []*receipts.Receipt {
			c := cl(rs)
			c[2].Body[len(c[2].Body)-1] ^= 0x01 // in the payload
			return c
		}, 4, "prev_hash"},
		{"first prev_hash not zero", func() []*receipts.Receipt {
			c := cl(rs)
			c[0].Body[indexAfter(t, c[0].Body, "prev_hash")+2] ^= 0x01
			return c
		}, 1, "not zero"},
		{"stored seq disagrees with the body", func() []*receipts.Receipt {
			c := cl(rs)
			c[1].Seq = 9
			return c
		}, 2, "stored as"},
		{"body not a receipt", func() []*receipts.Receipt {
			c := cl(rs)
			c[1].Body = []byte{0x01}
			return c
		}, 2, "body"},
		{"nil receipt", func() []*receipts.Receipt {
			c := cl(rs)
			return []*receipts.Receipt{c[0], nil}
		}, 2, "nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := receipts.VerifyChain(tt.build())
			if tt.seq == 0 {
				assert.NoError(t, err)
				return
			}
			var ce *receipts.ChainError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "acme", ce.Tenant)
			assert.Equal(t, tt.seq, ce.Seq, ce.Reason)
			assert.Contains(t, ce.Reason, tt.reason)
			assert.Contains(t, err.Error(), tt.reason)
			assert.Contains(t, err.Error(), string(ce.Code))
			assert.Contains(t, []receipts.Code{receipts.ChainGap, receipts.ChainSeqOrder, receipts.ChainPrevHashMismatch,
				receipts.ChainRecordMismatch}, ce.Code, ce.Reason)
		})
	}

	t.Run("mixed tenants", func(t *testing.T) {
		b := appendN(t, db, s, "globex", 1)
		var ce *receipts.ChainError
		require.ErrorAs(t, receipts.VerifyChain([]*receipts.Receipt{rs[0], b[0]}), &ce)
		assert.Equal(t, "acme", ce.Tenant)
		assert.Contains(t, ce.Reason, "globex")
	})
}

func TestChainFrom(t *testing.T) {
	db := openDB(t)
	rs := appendN(t, db, signerFromByte(1), "acme", 5)
	for _, from := range []uint64{0, 1, 3, 5, 6} {
		got := chainOf(t, db, "acme", from)
		start := min(max(int(from), 1)-1, len(rs))
		if start == len(rs) {
			assert.Empty(t, got, "from %d", from)
		} else {
			assert.Equal(t, rs[start:], got, "from %d", from)
		}
	}

	// fn returning store.ErrStop ends the walk without error.
	var n int
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		return receipts.Chain(tx, "acme", 0, func(*receipts.Receipt) error {
			n++
			if n == 2 {
				return store.ErrStop
			}
			return nil
		})
	}))
	assert.Equal(t, 2, n)
}

func TestTenantsChainIndependently(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	tenants := []string{"a", "ab", "", "b"} // "a" is a prefix of "ab"; "" is the bootstrap tenant
	for range 3 {
		for _, tenant := range tenants {
			appendOne(t, db, s, tenant, "observation", nil)
		}
	}
	for _, tenant := range tenants {
		rs := chainOf(t, db, tenant, 0)
		require.Len(t, rs, 3, tenant)
		for i, r := range rs {
			assert.Equal(t, tenant, r.Tenant)
			assert.Equal(t, uint64(i+1), r.Seq)
		}
		h, err := rs[0].Header()
		require.NoError(t, err)
		assert.Equal(t, make([]byte, 32), h.PrevHash, "each tenant's chain starts from zero")
		assert.NoError(t, receipts.VerifyChain(rs), tenant)
		assert.NoError(t, verifyStored(t, db, tenant), tenant)
	}
	assert.Empty(t, chainOf(t, db, "c", 0))
	assert.NoError(t, verifyStored(t, db, "c"), "an empty chain is intact")

	err := db.View(context.Background(), func(tx store.Tx) error {
		return receipts.Chain(tx, "a\x00", 0, func(*receipts.Receipt) error { return nil })
	})
	assert.ErrorContains(t, err, "NUL")
}

// TestVerifyStoredChainTamper alters the stored chain behind the package's
// back.
func TestVerifyStoredChainTamper(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, tx store.Tx, rs []*receipts.Receipt) error
		seq    uint64
		reason string
		code   receipts.Code
	}{
		{
			name: "index entry dropped",
			tamper: func(_ *testing.T, tx store.Tx, _ []*receipts.Receipt) error {
				return tx.Delete("receipts.chain", chainKey("acme", 3))
			},
			seq: 3, reason: "gap", code: receipts.ChainGap,
		},
		{
			name: "first receipt dropped",
			tamper: func(_ *testing.T, tx store.Tx, _ []*receipts.Receipt) error {
				return tx.Delete("receipts.chain", chainKey("acme", 1))
			},
			seq: 1, reason: "starts at seq 2", code: receipts.ChainGap,
		},
		{
			name: "receipt record dropped",
			tamper: func(_ *testing.T, tx store.Tx, rs []*receipts.Receipt) error {
				return tx.Delete("receipts", []byte(rs[2].ID))
			},
			seq: 3, reason: "does not exist", code: receipts.ChainReceiptMissing,
		},
		{
			name: "index entries swapped",
			tamper: func(_ *testing.T, tx store.Tx, rs []*receipts.Receipt) error {
				if err := tx.Put("receipts.chain", chainKey("acme", 2), []byte(rs[2].ID)); err != nil {
					return err
				}
				return tx.Put("receipts.chain", chainKey("acme", 3), []byte(rs[1].ID))
			},
			seq: 2, reason: "gap", code: receipts.ChainGap,
		},
		{
			name: "tail truncated, head intact",
			tamper: func(_ *testing.T, tx store.Tx, rs []*receipts.Receipt) error {
				if err := tx.Delete("receipts", []byte(rs[4].ID)); err != nil {
					return err
				}
				return tx.Delete("receipts.chain", chainKey("acme", 5))
			},
			seq: 5, reason: "chain head says seq 5", code: receipts.ChainHeadMismatch,
		},
		{
			name: "head hash altered",
			tamper: func(_ *testing.T, tx store.Tx, _ []*receipts.Receipt) error {
				v, err := tx.Get("receipts.head", []byte("acme\x00"))
				if err != nil {
					return err
				}
				v = append([]byte(nil), v...)
				v[20] ^= 0x01
				return tx.Put("receipts.head", []byte("acme\x00"), v)
			},
			seq: 5, reason: "hash", code: receipts.ChainHeadMismatch,
		},
		{
			name: "head missing",
			tamper: func(_ *testing.T, tx store.Tx, _ []*receipts.Receipt) error {
				return tx.Delete("receipts.head", []byte("acme\x00"))
			},
			seq: 0, reason: "chain head says seq 0", code: receipts.ChainHeadMismatch,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openDB(t)
			rs := appendN(t, db, signerFromByte(1), "acme", 5)
			require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error { return tt.tamper(t, tx, rs) }))
			err := verifyStored(t, db, "acme")
			var ce *receipts.ChainError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.seq, ce.Seq, ce.Reason)
			assert.Equal(t, tt.code, ce.Code, ce.Reason)
			assert.Contains(t, ce.Reason, tt.reason)

			// AuditChain finds the same defect.
			a := audit(t, db, "acme", receipts.NewKeyring(signerFromByte(1).Public()))
			assert.False(t, a.OK())
			assert.Equal(t, tt.code, a.ErrorCode, a.ErrorMessage)
			assert.Equal(t, tt.seq, a.ErrorSeq, a.ErrorMessage)
			assert.Contains(t, a.ErrorMessage, tt.reason)
		})
	}
}

// audit runs AuditChain on tenant's stored chain.
func audit(tb testing.TB, db store.Backend, tenant string, kr *receipts.Keyring) receipts.ChainAudit {
	tb.Helper()
	var a receipts.ChainAudit
	require.NoError(tb, db.View(context.Background(), func(tx store.Tx) error {
		var err error
		a, err = receipts.AuditChain(tx, tenant, kr, testNow)
		return err
	}))
	return a
}

func TestChainErrorCodes(t *testing.T) {
	db := openDB(t)
	rs := appendN(t, db, signerFromByte(1), "acme", 3)
	for _, tt := range []struct {
		name string
		rs   []*receipts.Receipt
		code receipts.Code
	}{
		{"gap", []*receipts.Receipt{rs[0], rs[2]}, receipts.ChainGap},
		{"duplicate", []*receipts.Receipt{rs[0], rs[0]}, receipts.ChainSeqOrder},
		{"out of order", []*receipts.Receipt{rs[1], rs[0]}, receipts.ChainSeqOrder},
		{"nil", []*receipts.Receipt{rs[0], nil}, receipts.ChainRecordMismatch},
	} {
		var ce *receipts.ChainError
		require.ErrorAs(t, receipts.VerifyChain(tt.rs), &ce, tt.name)
		assert.Equal(t, tt.code, ce.Code, tt.name)
	}
}

func TestAuditChain(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	kr := receipts.NewKeyring(s.Public())

	empty := audit(t, db, "acme", kr)
	assert.True(t, empty.OK())
	assert.Equal(t, receipts.ChainAudit{TenantID: "acme", ErrorCode: receipts.OK}, empty)

	rs := appendN(t, db, s, "acme", 4)
	a := audit(t, db, "acme", kr)
	require.True(t, a.OK(), a.ErrorMessage)
	assert.Equal(t, uint64(4), a.Receipts)
	assert.Equal(t, uint64(4), a.HeadSeq)
	assert.Equal(t, hex.EncodeToString(rs[3].PayloadHash), a.HeadHash)
	assert.Zero(t, a.ErrorSeq)

	// Another key: the first receipt does not verify, and AuditChain says
	// so with Verify's code.
	a = audit(t, db, "acme", receipts.NewKeyring(signerFromByte(2).Public()))
	assert.Equal(t, receipts.KeyNotFound, a.ErrorCode)
	assert.Equal(t, uint64(1), a.ErrorSeq)
	assert.Zero(t, a.Receipts)
	a = audit(t, db, "acme", nil)
	assert.Equal(t, receipts.KeyringMissing, a.ErrorCode)

	// A stored body altered in place: seq 3 fails on its own (the body
	// hash), before seq 4's prev_hash would.
	tamperRecord(t, db, rs[2].ID, func(v []byte) []byte {
		return bytes.Replace(v, []byte("agent-7"), []byte("agent-8"), 1)
	})
	a = audit(t, db, "acme", kr)
	assert.Equal(t, receipts.BodyHashMismatch, a.ErrorCode, a.ErrorMessage)
	assert.Equal(t, uint64(3), a.ErrorSeq)
	assert.Equal(t, uint64(2), a.Receipts)
	assert.Contains(t, a.ErrorMessage, rs[2].ID)
	var ce *receipts.ChainError
	require.ErrorAs(t, verifyStored(t, db, "acme"), &ce)
	assert.Equal(t, receipts.ChainPrevHashMismatch, ce.Code, "the links alone break one seq later")
	assert.Equal(t, uint64(4), ce.Seq)

	// A stored record that does not decode.
	tamperRecord(t, db, rs[1].ID, func([]byte) []byte { return []byte{0xff} })
	a = audit(t, db, "acme", kr)
	assert.Equal(t, receipts.ChainRecordUnreadable, a.ErrorCode, a.ErrorMessage)
	assert.Equal(t, uint64(2), a.ErrorSeq)

	assert.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		_, err := receipts.AuditChain(tx, "a\x00", kr, testNow)
		assert.ErrorContains(t, err, "NUL")
		return nil
	}))
}

// tamperRecord rewrites the stored record of receipt id behind the
// package's back.
func tamperRecord(tb testing.TB, db store.Backend, id string, edit func([]byte) []byte) {
	tb.Helper()
	require.NoError(tb, db.Update(context.Background(), func(tx store.Tx) error {
		v, err := tx.Get("receipts", []byte(id))
		if err != nil {
			return err
		}
		w := edit(bytes.Clone(v))
		require.NotEqual(tb, v, w, "the edit changed nothing")
		return tx.Put("receipts", []byte(id), w)
	}))
}

func TestChainNewestFirst(t *testing.T) {
	db := openDB(t)
	rs := appendN(t, db, signerFromByte(1), "acme", 4)
	appendN(t, db, signerFromByte(1), "acmex", 2)
	var got []*receipts.Receipt
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		return receipts.ChainNewestFirst(tx, "acme", func(r *receipts.Receipt) error {
			got = append(got, r)
			if len(got) == 3 {
				return store.ErrStop
			}
			return nil
		})
	}))
	assert.Equal(t, []*receipts.Receipt{rs[3], rs[2], rs[1]}, got)
}
