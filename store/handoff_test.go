package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

func TestHandoffRecord(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	h := &store.Handoff{ID: "ho_1", Tenant: "t1", From: "alice", Target: "bob", ContentHash: "ab", CreatedAt: now}
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error { return store.PutHandoff(tx, h) }))
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		got, err := store.GetHandoff(tx, "t1", "ho_1")
		require.NoError(t, err)
		assert.Equal(t, h.ContentHash, got.ContentHash)
		assert.Equal(t, "bob", got.Target)
		assert.False(t, got.Accepted)
		_, err = store.GetHandoff(tx, "t2", "ho_1")
		assert.ErrorIs(t, err, store.ErrNotFound, "tenants are separate")
		_, err = store.GetHandoff(tx, "t1", "")
		assert.ErrorIs(t, err, store.ErrNotFound)
		return nil
	}))
	require.ErrorIs(t, db.Update(ctx, func(tx store.Tx) error {
		return store.PutHandoff(tx, &store.Handoff{Tenant: "t1"})
	}), store.ErrEmptyKey, "an empty id is refused")
}

func TestHandoffsOfATenant(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		for _, h := range []*store.Handoff{{ID: "ho_2", Tenant: "t1"}, {ID: "ho_1", Tenant: "t1"}, {ID: "ho_3", Tenant: "t10"}, {ID: "ho_4", Tenant: "t"}} {
			if err := store.PutHandoff(tx, h); err != nil {
				return err
			}
		}
		return nil
	}))
	var ids []string
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		return store.Handoffs(tx, "t1", func(h *store.Handoff) error {
			ids = append(ids, h.ID)
			return nil
		})
	}))
	assert.Equal(t, []string{"ho_1", "ho_2"}, ids, "t1's only, in id order")
	ids = nil
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		return store.Handoffs(tx, "t1", func(h *store.Handoff) error {
			ids = append(ids, h.ID)
			return store.ErrStop
		})
	}))
	assert.Equal(t, []string{"ho_1"}, ids)
}
