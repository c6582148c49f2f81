package receipts_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
)

func TestTenantsAndAnUnreadableReceipt(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(2)
	appendOne(t, db, s, "b", "forget", nil)
	r := appendOne(t, db, s, "a", "forget", nil)
	appendOne(t, db, s, "", "forget", nil)
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		tenants, err := receipts.Tenants(tx)
		assert.Equal(t, []string{"", "a", "b"}, tenants)
		return err
	}))

	// A stored receipt record that does not decode is a typed error naming
	// it, and breaks the stored chain's verification.
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		return tx.Put("receipts", []byte(r.ID), []byte{0x61, 0xff})
	}))
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		_, err := receipts.Get(tx, r.ID)
		var ce *store.CorruptRecordError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, "receipts", ce.Bucket)
		assert.Equal(t, r.ID, ce.ID)
		assert.ErrorAs(t, receipts.VerifyStoredChain(tx, "a"), &ce)
		return nil
	}))
}
