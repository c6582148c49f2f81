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

// panelScan runs ScanFacts and returns the ids it visited, in order.
func panelScan(t *testing.T, db store.Backend, s store.FactScan) ([]string, store.ScanStats) {
	t.Helper()
	var ids []string
	var st store.ScanStats
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		var err error
		st, err = store.ScanFacts(tx, s, func(f *store.Fact) error { ids = append(ids, f.ID); return nil })
		return err
	}))
	return ids, st
}

func TestScanFactsFilters(t *testing.T) {
	db := openDB(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	old := putFact(t, db, store.NewFact{Entity: "proj", Key: "lang", Value: "Rust", Confidence: 0.5, Now: now})
	cur := putFact(t, db, store.NewFact{Entity: "proj", Key: "lang", Value: "Go", Confidence: 0.9, Now: now.Add(time.Minute)})
	mine := putFact(t, db, store.NewFact{Scope: store.Scope{Agent: "alice"}, Entity: "proj", Key: "lang", Value: "Zig", Private: true, Now: now})
	other := putFact(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "proj", Key: "owner", Value: "bob", Private: true, Now: now})
	putFact(t, db, store.NewFact{Entity: "__ops::x", Key: "lang", Value: "reserved", Now: now})
	putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: "u"}, Entity: "proj", Key: "lang", Value: "other tenant", Now: now})
	gone := putFact(t, db, store.NewFact{Entity: "misc", Key: "k", Value: "deleted", Now: now})
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		_, _, err := store.DeleteFact(tx, store.Scope{Tenant: "t", Agent: ""}, gone.ID, now)
		return err
	}))

	// Every path: rank index (the shared partition, then the agent's own,
	// each by stored confidence), entity chains, key index.
	ids, st := panelScan(t, db, store.FactScan{Scope: store.Scope{Tenant: "t", Agent: "alice"}})
	assert.Equal(t, []string{cur.ID, mine.ID}, ids)
	assert.True(t, st.Complete)
	assert.Equal(t, 4, st.Examined, "the shared live facts (superseded and reserved ones included) and alice's own; never bob's private fact")

	ids, _ = panelScan(t, db, store.FactScan{Scope: store.Scope{Tenant: "t", Agent: "alice"}, Entity: "proj"})
	assert.ElementsMatch(t, []string{cur.ID, mine.ID}, ids)
	ids, _ = panelScan(t, db, store.FactScan{Scope: store.Scope{Tenant: "t", Agent: "alice"}, Entity: "proj", Key: "lang", IncludeSuperseded: true})
	assert.ElementsMatch(t, []string{old.ID, cur.ID, mine.ID}, ids)
	ids, _ = panelScan(t, db, store.FactScan{Scope: store.Scope{Tenant: "t", Agent: "bob"}, Key: "owner"})
	assert.Equal(t, []string{other.ID}, ids)
	ids, _ = panelScan(t, db, store.FactScan{Scope: store.Scope{Tenant: "t"}, Key: "lang"})
	assert.Equal(t, []string{cur.ID}, ids, "anonymous: no private facts, no reserved entity")
	ids, st = panelScan(t, db, store.FactScan{Scope: store.Scope{Tenant: "t"}, Entity: "__ops::x"})
	assert.Empty(t, ids, "a reserved entity is never scanned")
	assert.Zero(t, st.Examined)
}

func TestScanFactsBounded(t *testing.T) {
	db := openDB(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		putFact(t, db, store.NewFact{Entity: "e", Key: fmt.Sprint("k", i), Value: "v", Confidence: float64(i+1) / 10, Now: now})
	}
	ids, st := panelScan(t, db, store.FactScan{Scope: store.Scope{Tenant: "t"}, MaxExamined: 4})
	assert.Len(t, ids, 4)
	assert.Equal(t, store.ScanStats{Examined: 4, Complete: false}, st)

	ids, st = panelScan(t, db, store.FactScan{Scope: store.Scope{Tenant: "t"}, MaxExamined: 10})
	assert.Len(t, ids, 10)
	assert.Equal(t, store.ScanStats{Examined: 10, Complete: true}, st, "a cap equal to the candidates is complete")

	ids, st = panelScan(t, db, store.FactScan{Scope: store.Scope{Tenant: "t"}, Entity: "e", MaxExamined: 3})
	assert.Len(t, ids, 3)
	assert.False(t, st.Complete)

	// fn may stop the scan.
	var n int
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		st, err := store.ScanFacts(tx, store.FactScan{Scope: store.Scope{Tenant: "t"}, Entity: "e"}, func(*store.Fact) error {
			n++
			if n == 2 {
				return store.ErrStop
			}
			return nil
		})
		assert.False(t, st.Complete)
		return err
	}))
	assert.Equal(t, 2, n)
}

func TestSuccessor(t *testing.T) {
	db := openDB(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	v1 := putFact(t, db, store.NewFact{Entity: "e", Key: "k", Value: "1", Now: now})
	putFact(t, db, store.NewFact{Entity: "e", Key: "k", Value: "2", Now: now})
	v3 := putFact(t, db, store.NewFact{Entity: "e", Key: "k", Value: "3", Now: now})
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		f, err := store.GetFact(tx, v1.ID)
		require.NoError(t, err)
		got, err := store.Successor(tx, f)
		require.NoError(t, err)
		assert.Equal(t, v3.ID, got.ID)
		got, err = store.Successor(tx, v3)
		require.NoError(t, err)
		assert.Same(t, v3, got, "a current fact is its own successor")
		return nil
	}))
}

func TestSetHorizonAndReverifyInPlace(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := store.DefaultDecayPolicy
	f := putFact(t, db, store.NewFact{Entity: "ops", Key: "build", Value: "green", Confidence: 0.9, HorizonClass: store.HorizonVolatile, Now: now})
	putFact(t, db, store.NewFact{Entity: "ops", Key: "owner", Value: "team", Confidence: 0.6, Now: now})
	later := now.Add(48 * time.Hour)
	query := func() []string {
		var vals []string
		require.NoError(t, db.View(ctx, func(tx store.Tx) error {
			res, err := store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: "t"}, Now: later, Policy: p})
			for _, r := range res.Facts {
				vals = append(vals, r.Value+"/"+r.Freshness)
			}
			return err
		}))
		return vals
	}
	assert.Equal(t, []string{"team/fresh", "green/stale"}, query(), "stale: ranks at half its confidence")

	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		g, err := store.GetFact(tx, f.ID)
		require.NoError(t, err)
		return store.Reverify(tx, g, later.Add(-time.Hour))
	}))
	assert.Equal(t, []string{"green/fresh", "team/fresh"}, query(), "reverified: full confidence again")

	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		g, err := store.GetFact(tx, f.ID)
		require.NoError(t, err)
		assert.ErrorIs(t, store.SetHorizon(tx, g, "weekly"), store.ErrInvalidFact)
		return store.SetHorizon(tx, g, store.HorizonNone)
	}))
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		g, err := store.GetFact(tx, f.ID)
		require.NoError(t, err)
		assert.Equal(t, store.HorizonNone, g.HorizonClass)
		assert.Equal(t, later.Add(-time.Hour), *g.ReverifiedAt)
		assert.Equal(t, f.StoredAt, g.StoredAt)
		assert.Equal(t, "green", g.Value)
		assert.EqualValues(t, 1, g.Version)
		return nil
	}))
	// The rank index still holds the fact exactly once.
	ids, st := panelScan(t, db, store.FactScan{Scope: store.Scope{Tenant: "t"}})
	assert.Equal(t, []string{f.ID}, ids[:1])
	assert.Equal(t, 2, st.Examined)

	// A deleted fact is refused.
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		g, _, err := store.DeleteFact(tx, store.Scope{Tenant: "t", Agent: ""}, f.ID, later)
		require.NoError(t, err)
		assert.ErrorIs(t, store.SetHorizon(tx, g, store.HorizonStable), store.ErrInvalidFact)
		assert.ErrorIs(t, store.Reverify(tx, g, later), store.ErrInvalidFact)
		return nil
	}))
}

func TestDecayPolicyHorizon(t *testing.T) {
	p := store.DefaultDecayPolicy
	for class, want := range map[string]time.Duration{
		store.HorizonVolatile: 24 * time.Hour, store.HorizonMedium: 35 * 24 * time.Hour, store.HorizonStable: 365 * 24 * time.Hour,
	} {
		got, ok := p.Horizon(class)
		assert.True(t, ok, class)
		assert.Equal(t, want, got, class)
	}
	_, ok := p.Horizon(store.HorizonNone)
	assert.False(t, ok)
}
