package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// logged returns the ids of tenant's change log after seq after, in log
// order, as SyncChanges and SyncPending return them, and the head.
func logged(t *testing.T, db store.Backend, tenant string, after uint64) (changes, pending []string, head uint64) {
	t.Helper()
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		facts, next, more, err := store.SyncChanges(tx, tenant, after, "", 100_000, 1<<30, 100_000)
		require.NoError(t, err)
		assert.False(t, more)
		changes = []string{}
		for _, f := range facts {
			changes = append(changes, f.ID)
		}
		last, more, err := store.SyncPending(tx, tenant, after, 100_000, func(seq uint64, f *store.Fact, _ bool) bool {
			pending = append(pending, f.ID)
			return true
		})
		require.NoError(t, err)
		assert.False(t, more)
		assert.Equal(t, next, last, "SyncChanges and SyncPending end at the same seq")
		head, err = store.SyncHead(tx, tenant)
		require.NoError(t, err)
		if len(changes) > 0 {
			assert.Equal(t, head, next, "the walk ends at the head")
		}
		return nil
	}))
	return changes, pending, head
}

// TestChangeLogStaged writes more versions than sync.log.new holds, one
// transaction each and several in one, in two tenants, and reads the log
// back whole and from every cursor: every version once, in the order
// written, numbered without gaps, whichever bucket its entry is in.
func TestChangeLogStaged(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	want := map[string][]string{}
	for i := range 130 {
		tenant := "t"
		if i%5 == 0 {
			tenant = "u"
		}
		f := putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: tenant}, Entity: fmt.Sprintf("e%d", i%9),
			Key: "k", Value: fmt.Sprintf("value %d", i), Now: now.Add(time.Duration(i) * time.Second)})
		want[tenant] = append(want[tenant], f.ID)
	}
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		for i := range 70 {
			f, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "t"}, Entity: "batch",
				Key: fmt.Sprintf("k%d", i), Value: "v", Confidence: 1, Now: now.Add(time.Hour)})
			require.NoError(t, err)
			want["t"] = append(want["t"], f.ID)
		}
		return nil
	}))
	var staged, moved int
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		staged = len(dump(t, tx, "sync.log.new"))
		moved = len(dump(t, tx, "sync.log"))
		return nil
	}))
	assert.Less(t, staged, 48, "sync.log.new is flushed once it holds 48 entries")
	assert.Positive(t, staged, "the newest entries wait in sync.log.new")
	assert.Equal(t, 200, staged+moved, "every version is logged once")
	for tenant, ids := range want {
		changes, pending, head := logged(t, db, tenant, 0)
		assert.Equal(t, ids, changes, "tenant %s", tenant)
		assert.Equal(t, ids, pending, "tenant %s", tenant)
		assert.EqualValues(t, len(ids), head, "tenant %s", tenant)
		for _, after := range []int{1, 20, max(0, len(ids)-30), len(ids) - 1, len(ids)} {
			changes, _, _ := logged(t, db, tenant, uint64(after))
			assert.Equal(t, ids[after:], changes, "tenant %s after %d", tenant, after)
		}
	}
}

// TestUpgradeFormat6 opens a store written by the code of format 6, whose
// change log is all in sync.log: the upgrade rewrites the keyword posting
// blocks (smaller, finding the same facts) and the format record and
// nothing else, the log reads as before, and versions written afterwards
// continue it.
func TestUpgradeFormat6(t *testing.T) {
	path := openFixtureOf(t, "format6")
	ctx := context.Background()
	db, err := bolt.Open(path, nil)
	require.NoError(t, err)

	buckets := []string{"facts", "facts.entity", "facts.key", "facts.rank", "facts.active", "facts.fresh",
		"sync.log", "forgets", "forgets.facts", "receipts", "receipts.chain", "receipts.head"}
	before := map[string]map[string]string{}
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		format, err := store.StoredFormat(tx)
		require.NoError(t, err)
		require.Equal(t, 6, format)
		for _, b := range buckets {
			before[b] = dump(t, tx, b)
		}
		return nil
	}))
	require.Greater(t, len(before["sync.log"]), 100, "the fixture's change log has entries")
	search := func(q fixtureQuery) []string {
		var ids []string
		require.NoError(t, db.View(ctx, func(tx store.Tx) error { ids = searchFixture(t, tx, q); return nil }))
		return ids
	}
	found := map[fixtureQuery][]string{}
	var oldWords map[string]string
	require.NoError(t, db.View(ctx, func(tx store.Tx) error { oldWords = dump(t, tx, "facts.words"); return nil }))
	for _, tenant := range []string{"default", "acme"} {
		for _, agent := range []string{"", "alice", "bob"} {
			for _, w := range []string{"widget3", "fixture", "value 7", "upgrade", "setting2"} {
				q := fixtureQuery{tenant: tenant, agent: agent, words: w, limit: 1000}
				found[q] = search(q)
			}
		}
	}
	n := 0
	for _, ids := range found {
		n += len(ids)
	}
	require.Greater(t, n, 100, "the queries find facts")
	tenants := []string{"default", "acme"}
	oldLog := map[string][]string{}
	heads := map[string]uint64{}
	for _, tenant := range tenants {
		oldLog[tenant], _, heads[tenant] = logged(t, db, tenant, 0)
		require.NotEmpty(t, oldLog[tenant], "tenant %s", tenant)
	}

	upgradeFrom(t, db, 6, buckets, before)
	for q, ids := range found {
		assert.Equal(t, ids, search(q), "%+v", q)
	}
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		words := dump(t, tx, "facts.words")
		counted, err := store.CountedPostings(tx)
		require.NoError(t, err)
		assert.Equal(t, upgradedWords(oldWords, before["facts.fresh"], readFacts(t, tx)), counted)
		oldSize, newSize := 0, 0
		for _, v := range oldWords {
			oldSize += len(v)
		}
		for _, v := range words {
			newSize += len(v)
		}
		assert.Less(t, 3*newSize, 2*oldSize, "blocks of %d bytes, were %d", newSize, oldSize)
		problems, err := store.Diagnose(tx)
		require.NoError(t, err)
		assert.Empty(t, problems)
		return nil
	}))
	for _, tenant := range tenants {
		changes, _, head := logged(t, db, tenant, 0)
		assert.Equal(t, oldLog[tenant], changes, "tenant %s", tenant)
		assert.Equal(t, heads[tenant], head, "tenant %s", tenant)
	}

	// New versions continue each tenant's log.
	var added []string
	for i := range 60 {
		f := putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: "acme"}, Entity: "after:upgrade",
			Key: fmt.Sprintf("k%d", i%4), Value: fmt.Sprintf("written after the upgrade %d", i),
			Now: time.Date(2026, 12, 1, 0, 0, i, 0, time.UTC)})
		added = append(added, f.ID)
	}
	changes, _, head := logged(t, db, "acme", heads["acme"])
	assert.Equal(t, added, changes)
	assert.Equal(t, heads["acme"]+60, head)
	changes, _, _ = logged(t, db, "acme", 0)
	assert.Equal(t, append(oldLog["acme"], added...), changes)
	require.NoError(t, db.Close())

	assertUpgraded(t, path)
}
