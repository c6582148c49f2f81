package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// TestUpgradeFormat8 opens a store written by the code of format 8: the
// upgrade rewrites the keys of the confidence index (their standard ids
// in 16 bytes) and nothing else of the buckets compared; every fact reads
// as before, and keyword and unfiltered queries find the same facts in
// the same order. New versions of its chains written afterwards, in the
// layout of format 9, retire the format-8 facts they supersede, which
// then read as retired, and crux doctor finds nothing amiss.
func TestUpgradeFormat8(t *testing.T) {
	path := openFixtureOf(t, "format8")
	ctx := context.Background()
	db, err := bolt.Open(path, nil)
	require.NoError(t, err)

	buckets := []string{"facts", "facts.entity", "facts.key", "facts.words", "facts.rank", "facts.active",
		"facts.fresh", "sync.log", "sync.log.new", "forgets", "forgets.facts", "receipts", "receipts.chain"}
	before := map[string]map[string]string{}
	var facts map[string]*store.Fact
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		format, err := store.StoredFormat(tx)
		require.NoError(t, err)
		require.Equal(t, 8, format)
		for _, b := range buckets {
			before[b] = dump(t, tx, b)
		}
		facts = readFacts(t, tx)
		return nil
	}))
	retired := 0
	for _, f := range facts {
		if f.SupersededBy != "" {
			retired++
		}
	}
	require.Greater(t, retired, 20, "the fixture holds retired facts")
	require.Greater(t, len(before["facts.rank"]), 50)
	found := map[fixtureQuery][]string{}
	for _, tenant := range []string{"default", "acme"} {
		for _, agent := range []string{"", "alice", "bob"} {
			for _, w := range []string{"widget3", "fixture", "upgrade", "setting2", ""} {
				q := fixtureQuery{tenant: tenant, agent: agent, words: w, limit: 1000}
				require.NoError(t, db.View(ctx, func(tx store.Tx) error { found[q] = searchFixture(t, tx, q); return nil }))
			}
		}
	}

	upgradeFrom(t, db, 8, buckets, before)
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		assert.Equal(t, facts, readFacts(t, tx))
		for q, ids := range found {
			assert.Equal(t, ids, searchFixture(t, tx, q), "%+v", q)
		}
		return nil
	}))

	// A new version of every current shared chain of tenant default.
	type chain struct{ entity, key string }
	olds := map[chain]*store.Fact{}
	for _, f := range facts {
		if f.Tenant == "default" && f.Current() && !f.Private && !store.IsReserved(f.Entity) {
			olds[chain{f.Entity, f.Key}] = f
		}
	}
	require.Greater(t, len(olds), 10)
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	news := map[string]*store.Fact{}
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		for c, old := range olds {
			now = now.Add(time.Second)
			f, gone, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "default", Agent: "alice"},
				Entity: c.entity, Key: c.key, Value: "written after the upgrade, zebra", Confidence: 1, Now: now})
			require.NoError(t, err)
			require.Equal(t, []string{old.ID}, gone)
			news[old.ID] = f
		}
		return nil
	}))
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		records := dump(t, tx, "facts")
		for id, f := range news {
			assert.Equal(t, before["facts"][id], records[id], "the record of %s is not rewritten", id)
			got, err := store.GetFact(tx, f.ID)
			require.NoError(t, err)
			assert.Equal(t, f.ID, got.ID)
			assert.True(t, got.StoredAt.Equal(f.StoredAt))
			old, err := store.GetFact(tx, id)
			require.NoError(t, err)
			assert.Equal(t, f.ID, old.SupersededBy)
			require.NotNil(t, old.ValidTo)
			assert.True(t, old.ValidTo.Equal(f.StoredAt))
			hist, err := store.History(tx, store.Scope{Tenant: "default"}, old.Entity, old.Key)
			require.NoError(t, err)
			require.GreaterOrEqual(t, len(hist), 2)
			assert.Equal(t, f.ID, hist[len(hist)-1].ID)
			assert.Equal(t, old.ID, hist[len(hist)-2].ID)
		}
		var ids []string
		for _, f := range news {
			ids = append(ids, f.ID)
		}
		assert.ElementsMatch(t, ids, searchFixture(t, tx, fixtureQuery{tenant: "default", words: "zebra", limit: 1000}))
		problems, err := store.Diagnose(tx)
		require.NoError(t, err)
		assert.Empty(t, problems)
		return nil
	}))
	require.NoError(t, db.Close())

	assertUpgraded(t, path)
}
