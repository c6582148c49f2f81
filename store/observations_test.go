package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

func gapKeys(t *testing.T, db store.Backend, tenant string) []string {
	t.Helper()
	var keys []string
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		return store.Gaps(tx, tenant, func(g *store.Gap) error {
			keys = append(keys, g.Key)
			return nil
		})
	}))
	return keys
}

func TestRecordGap(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	record := func(tenant, key string, at time.Time) *store.Gap {
		var g *store.Gap
		require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
			var err error
			g, err = store.RecordGap(tx, tenant, key, `{"query":"`+key+`"}`, at)
			return err
		}))
		return g
	}
	record("t", "a", t0)
	record("t", "b", t0.Add(time.Second))
	record("u", "a", t0)
	g := record("t", "a", t0.Add(2*time.Second))
	assert.Equal(t, 2, g.Count)
	assert.Equal(t, t0, g.FirstSeen)
	assert.Equal(t, []string{"a", "b"}, gapKeys(t, db, "t"), "most recently seen first")
	assert.Equal(t, []string{"a"}, gapKeys(t, db, "u"), "tenants are separate")

	require.Error(t, db.Update(ctx, func(tx store.Tx) error {
		_, err := store.RecordGap(tx, "t", "", "", t0)
		return err
	}))
}

func TestRecordGapBounded(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		for i := range store.MaxGapObservations + 3 {
			if _, err := store.RecordGap(tx, "t", fmt.Sprintf("k%04d", i), "v", t0.Add(time.Duration(i)*time.Second)); err != nil {
				return err
			}
		}
		return nil
	}))
	keys := gapKeys(t, db, "t")
	require.Len(t, keys, store.MaxGapObservations)
	assert.Equal(t, fmt.Sprintf("k%04d", store.MaxGapObservations+2), keys[0])
	assert.Equal(t, "k0003", keys[len(keys)-1], "the three least recently seen were evicted")
}
