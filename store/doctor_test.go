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

func TestDiagnoseAndRepair(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	shared := store.Scope{Tenant: "t"}
	alice := store.Scope{Tenant: "t", Agent: "alice"}
	keep := putFact(t, db, store.NewFact{Scope: shared, Entity: "svc", Key: "port", Value: "8080", Now: now})
	v1 := putFact(t, db, store.NewFact{Scope: shared, Entity: "svc", Key: "host", Value: "db1", Now: now})
	bad := putFact(t, db, store.NewFact{Scope: shared, Entity: "svc", Key: "host", Value: "db2 BADTEXT", Now: now.Add(time.Second)})
	lone := putFact(t, db, store.NewFact{Scope: shared, Entity: "gone", Key: "k", Value: "only", Now: now})
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error { return store.SetPin(tx, alice, bad.ID, true) }))
	plantInvalidText(t, db, bad.ID, "BADTEXT")
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		if err := tx.Put("facts", []byte(lone.ID), []byte{0xff}); err != nil { // not CBOR at all
			return err
		}
		return tx.Put("forgets", []byte("r_broken"), []byte{0x61, 0xff}) // a forget record that does not read
	}))

	var problems []store.Problem
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		var err error
		problems, err = store.Diagnose(tx)
		return err
	}))
	byBucket := map[string]int{}
	for _, p := range problems {
		byBucket[p.Bucket]++
		assert.Equal(t, p.Bucket != "forgets", p.Repairable, p.String())
		assert.NotEqual(t, keep.ID, p.ID)
		assert.NotEqual(t, v1.ID, p.ID)
	}
	assert.Equal(t, 2, byBucket["facts"])
	assert.Equal(t, 2, byBucket["facts.entity"])
	assert.Equal(t, 1, byBucket["facts.key"], "one entry per chain: the chain whose only version cannot be read")
	assert.Equal(t, 2, byBucket["facts.rank"]+byBucket["facts.fresh"], "the confidence index entries, moved or not yet")
	assert.Positive(t, byBucket["facts.words"]+byBucket["facts.fresh"], "the keyword postings, moved or not yet")
	assert.Equal(t, 1, byBucket["forgets"])
	assert.Contains(t, problems[0].String(), "cannot be read")

	var removed []store.Problem
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		var err error
		removed, err = store.Repair(tx)
		return err
	}))
	assert.Len(t, removed, len(problems)-1+2, "every repairable problem, and alice's pin both ways")

	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		left, err := store.Diagnose(tx)
		require.NoError(t, err)
		require.Len(t, left, 1, "the forget record is listed, never removed")
		assert.Equal(t, "forgets", left[0].Bucket)

		pinned, err := store.PinnedByAnyone(tx, "t", bad.ID)
		require.NoError(t, err)
		assert.False(t, pinned)
		// The entity whose only fact went is no longer listed; svc is,
		// by its remaining current fact.
		entities, err := store.ListEntities(tx, shared)
		require.NoError(t, err)
		assert.Equal(t, []string{"svc"}, entities)
		hist, err := store.History(tx, shared, "svc", "host")
		require.NoError(t, err)
		require.Len(t, hist, 1)
		assert.Equal(t, v1.ID, hist[0].ID)
		return nil
	}))
	// The pair takes a new version after the one that is left; version 1
	// stays retired by the fact that is gone.
	f := putFact(t, db, store.NewFact{Scope: shared, Entity: "svc", Key: "host", Value: "db3", Now: now.Add(time.Hour)})
	assert.EqualValues(t, 2, f.Version)
	assert.Empty(t, f.Supersedes)
}

// TestRepairRemovesOnePostingOfABlock: a fact whose keyword postings were
// moved into blocks shared with other facts' postings is unreadable; the
// doctor reports its postings, and the repair removes them alone, so
// keyword queries still find every other fact of those blocks.
func TestRepairRemovesOnePostingOfABlock(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	s := store.Scope{Tenant: "t"}
	var ids []string
	for i := range 100 { // more than freshMax: the postings move to blocks
		ids = append(ids, putFact(t, db, store.NewFact{Scope: s, Entity: fmt.Sprintf("e%d", i), Key: "k",
			Value: fmt.Sprintf("shared words n%d MARKER", i), Now: now}).ID)
	}
	plantInvalidText(t, db, ids[10], "MARKER")
	var problems []store.Problem
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		var err error
		problems, err = store.Diagnose(tx)
		return err
	}))
	words := 0
	for _, p := range problems {
		if p.Bucket == "facts.key" {
			continue // names the chain e10/k, whose only fact that is
		}
		assert.Equal(t, ids[10], p.ID, p.String())
		if p.Bucket == "facts.words" {
			words++
		}
	}
	assert.Equal(t, len(store.Words("shared words n10 marker k e10")), words, "each of its postings")

	require.NoError(t, db.Update(ctx, func(tx store.Tx) error { _, err := store.Repair(tx); return err }))
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		left, err := store.Diagnose(tx)
		require.NoError(t, err)
		assert.Empty(t, left)
		r, err := store.SearchFacts(tx, store.FactQuery{Scope: s, Terms: store.Words("shared"), Now: now, Policy: store.DefaultDecayPolicy})
		require.NoError(t, err)
		assert.Len(t, r.Facts, 99, "every other fact")
		return nil
	}))
}

// TestFutureVersions: DiagnoseAt lists a version stored past the clock
// skew a replica is allowed (what a replica could push before that bound),
// with its chain's names; one within the skew, and every local write, is
// not, and Diagnose, without a clock, lists none.
func TestFutureVersions(t *testing.T) {
	db := openDB(t)
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	alice := store.Scope{Tenant: "t", Agent: "alice"}
	putFact(t, db, store.NewFact{Scope: alice, Entity: "acct", Key: "balance", Value: "100", Now: now})
	putFact(t, db, store.NewFact{Scope: alice, Entity: "acct", Key: "limit", Value: "5", Now: now.Add(store.MaxSyncClockSkew)})
	forged := putFact(t, db, store.NewFact{Scope: alice, Entity: "acct", Key: "balance", Value: "FORGED", Now: now.Add(48 * time.Hour)})

	var got []store.Problem
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		var err error
		got, err = store.DiagnoseAt(tx, now)
		return err
	}))
	require.Len(t, got, 1)
	assert.Equal(t, forged.ID, got[0].ID)
	assert.False(t, got[0].Repairable, "listed, never removed")
	assert.Equal(t, `facts "`+forged.ID+`": stored at 2026-03-03T00:00:00Z, 48h0m0s ahead of this clock (owner "alice", entity "acct", key "balance"); fact_history shows its chain`, got[0].String())
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		var err error
		got, err = store.Diagnose(tx)
		return err
	}))
	assert.Empty(t, got)
}
