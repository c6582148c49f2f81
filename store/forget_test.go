package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

var forgetT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// forget selects q and forgets the selection under id, returning it.
func forgetSel(t *testing.T, db store.Backend, id string, q store.ForgetQuery, now time.Time, window time.Duration) *store.ForgetSelection {
	t.Helper()
	var sel *store.ForgetSelection
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		var err error
		if sel, err = store.SelectForget(tx, q); err != nil {
			return err
		}
		return store.Forget(tx, &store.ForgetRecord{
			ID: id, Tenant: q.Tenant, Passport: q.Agent, Reason: "test", Scope: q.Selector,
			InitiatedAt: now, WindowEndsAt: now.Add(window),
		}, sel.Facts)
	}))
	return sel
}

func forgetRestore(db store.Backend, id string, now time.Time) ([]store.RestoredFact, error) {
	var out []store.RestoredFact
	err := db.Update(context.Background(), func(tx store.Tx) error {
		_, restored, err := store.RestoreForget(tx, id, now, func(*store.ForgetRecord, []store.RestoredFact) (string, error) {
			return "r_restore_" + id, nil
		})
		out = restored
		return err
	})
	return out, err
}

func forgetPurge(db store.Backend, id string, now time.Time) ([]string, error) {
	var out []string
	err := db.Update(context.Background(), func(tx store.Tx) error {
		_, err := store.PurgeForget(tx, id, now, func(_ *store.ForgetRecord, ids []string) (string, error) {
			out = ids
			return "r_purge_" + id, nil
		})
		return err
	})
	return out, err
}

func factIDs(fs []*store.Fact) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.ID)
	}
	return out
}

func forgetCurrent(t *testing.T, db store.Backend, entity string) []string {
	t.Helper()
	var out []string
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		res, err := store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: "t"}, Entity: entity, Now: forgetT0})
		for _, r := range res.Facts {
			out = append(out, r.Value)
		}
		return err
	}))
	return out
}

func TestParseScope(t *testing.T) {
	for _, tc := range []struct {
		scope store.ForgetScope
		ok    bool
	}{
		{store.ForgetScope{Type: store.ScopeEntityPrefix, Value: "p"}, true},
		{store.ForgetScope{Type: store.ScopeKeyGlob, Value: "a*"}, true},
		{store.ForgetScope{Type: store.ScopeKeyGlob, Value: "[a"}, false},
		{store.ForgetScope{Type: store.ScopeBeforeTimestamp, Value: "2026-01-01T00:00:00Z"}, true},
		{store.ForgetScope{Type: store.ScopeBeforeTimestamp, Value: "2026-01-01"}, false},
		{store.ForgetScope{Type: store.ScopeTenantID, Value: "t"}, true},
		{store.ForgetScope{Type: store.ScopeTenantID, Value: "other"}, false},
		{store.ForgetScope{Type: store.ScopePassportID, Value: ""}, false},
		{store.ForgetScope{Type: "everything", Value: "x"}, false},
	} {
		_, err := store.ParseScope(tc.scope, "t")
		if tc.ok {
			assert.NoError(t, err, tc.scope.String())
		} else {
			assert.ErrorIs(t, err, store.ErrInvalidScope, tc.scope.String())
		}
	}
}

func TestSelectForget(t *testing.T) {
	db := openDB(t)
	a1 := putFact(t, db, store.NewFact{Scope: store.Scope{Agent: "alice"}, Entity: "proj:a", Key: "k", Value: "1", Now: forgetT0})
	a2 := putFact(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "proj:a", Key: "k", Value: "2", Now: forgetT0.Add(time.Minute)})
	priv := putFact(t, db, store.NewFact{Scope: store.Scope{Agent: "alice"}, Entity: "proj:p", Key: "k", Value: "p", Private: true, Now: forgetT0.Add(2 * time.Minute)})
	other := putFact(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "proj:b", Key: "k", Value: "b", Private: true, Now: forgetT0})
	putFact(t, db, store.NewFact{Entity: "__ops::x", Key: "k", Value: "r", Now: forgetT0})
	putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: "u", Agent: "alice"}, Entity: "proj:a", Key: "k", Value: "u", Now: forgetT0})

	sel := func(q store.ForgetQuery) *store.ForgetSelection {
		t.Helper()
		q.Tenant, q.Agent = "t", "alice"
		var s *store.ForgetSelection
		require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
			var err error
			s, err = store.SelectForget(tx, q)
			return err
		}))
		return s
	}
	s := sel(store.ForgetQuery{AnyWriter: true, Selector: store.ForgetScope{Type: store.ScopeEntityPrefix, Value: "proj:"}})
	assert.Equal(t, []string{a1.ID, a2.ID, priv.ID}, factIDs(s.Facts), "oldest first; bob's private fact and other tenants left out")
	assert.Equal(t, 3, s.Matched)

	s = sel(store.ForgetQuery{AnyWriter: true, Selector: store.ForgetScope{Type: store.ScopeTenantID, Value: "t"}, Limit: 2})
	assert.Equal(t, []string{a1.ID, a2.ID}, factIDs(s.Facts))
	assert.True(t, s.Capped)
	assert.Equal(t, 3, s.Matched, "the reserved fact is never selected")

	s = sel(store.ForgetQuery{AnyWriter: true, Selector: store.ForgetScope{Type: store.ScopePassportID, Value: "bob"}})
	assert.Equal(t, []string{a2.ID}, factIDs(s.Facts))

	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		return store.SetPin(tx, store.Scope{Tenant: "t", Agent: "bob"}, a1.ID, true)
	}))
	s = sel(store.ForgetQuery{AnyWriter: true, Selector: store.ForgetScope{Type: store.ScopeKeyGlob, Value: "?"}})
	assert.Equal(t, []string{a2.ID, priv.ID}, factIDs(s.Facts))
	assert.Equal(t, 1, s.PinnedSkipped)
	s = sel(store.ForgetQuery{AnyWriter: true, Selector: store.ForgetScope{Type: store.ScopeKeyGlob, Value: "?"}, IncludePinned: true})
	assert.Len(t, s.Facts, 2, "include_pinned does not override bob's pin for alice")
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		return store.SetPin(tx, store.Scope{Tenant: "t", Agent: "alice"}, a1.ID, true)
	}))
	s = sel(store.ForgetQuery{AnyWriter: true, Selector: store.ForgetScope{Type: store.ScopeKeyGlob, Value: "?"}, IncludePinned: true})
	assert.Len(t, s.Facts, 2, "alice's own pin alone would yield, but bob's still holds")
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		return store.SetPin(tx, store.Scope{Tenant: "t", Agent: "bob"}, a1.ID, false)
	}))
	s = sel(store.ForgetQuery{AnyWriter: true, Selector: store.ForgetScope{Type: store.ScopeKeyGlob, Value: "?"}, IncludePinned: true})
	assert.Len(t, s.Facts, 3, "only alice's own pin: include_pinned overrides it")
	assert.NotContains(t, factIDs(s.Facts), other.ID)

	// Without AnyWriter, alice's own facts only; bob's shared one is
	// counted, his private one neither selected nor counted.
	s = sel(store.ForgetQuery{Selector: store.ForgetScope{Type: store.ScopeTenantID, Value: "t"}, IncludePinned: true})
	assert.Equal(t, []string{a1.ID, priv.ID}, factIDs(s.Facts))
	assert.Equal(t, 1, s.OthersSkipped)
	s = sel(store.ForgetQuery{Selector: store.ForgetScope{Type: store.ScopePassportID, Value: "bob"}})
	assert.Empty(t, s.Facts)
	assert.Equal(t, 1, s.OthersSkipped)
}

func TestForgetTombstones(t *testing.T) {
	db := openDB(t)
	v1 := putFact(t, db, store.NewFact{Entity: "e", Key: "k", Value: "one", Now: forgetT0})
	v2 := putFact(t, db, store.NewFact{Entity: "e", Key: "k", Value: "two", Now: forgetT0.Add(time.Second)})
	q := store.ForgetQuery{Scope: store.Scope{Tenant: "t"}, Selector: store.ForgetScope{Type: store.ScopeEntityPrefix, Value: "e"}}
	forgetSel(t, db, "r_1", q, forgetT0.Add(time.Minute), 24*time.Hour)

	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		for _, id := range []string{v1.ID, v2.ID} {
			f, err := store.GetFact(tx, id)
			require.NoError(t, err)
			assert.True(t, store.IsForgotten(f))
			assert.Empty(t, f.Value)
			assert.True(t, f.Deleted)
			assert.Equal(t, "r_1", f.SourceReceipt)
			assert.False(t, f.VisibleTo("alice"))
			assert.False(t, f.VisibleTo(""))
		}
		h, err := store.History(tx, store.Scope{Tenant: "t", Agent: "alice"}, "e", "k")
		assert.Empty(t, h)
		names, err2 := store.ListEntities(tx, store.Scope{Tenant: "t", Agent: ""})
		assert.Empty(t, names)
		rec, err3 := store.GetForget(tx, "r_1")
		require.NoError(t, err3)
		assert.Equal(t, store.ForgetForgotten, rec.State)
		assert.Equal(t, 2, rec.FactCount)
		var hashes []string
		require.NoError(t, store.ForgottenFacts(tx, "r_1", func(ff *store.ForgottenFact) error {
			hashes = append(hashes, ff.ValueHash)
			assert.NotEmpty(t, ff.Original)
			return nil
		}))
		assert.ElementsMatch(t, []string{store.ValueHash("one"), store.ValueHash("two")}, hashes)
		return errors.Join(err, err2)
	}))
	assert.Empty(t, forgetCurrent(t, db, "e"))
	// A new version gets the next number: forgotten ones keep theirs.
	v3 := putFact(t, db, store.NewFact{Entity: "e", Key: "k", Value: "three", Now: forgetT0.Add(time.Hour)})
	assert.EqualValues(t, 3, v3.Version)
	assert.Empty(t, v3.Supersedes)
}

func TestRestoreForget(t *testing.T) {
	db := openDB(t)
	putFact(t, db, store.NewFact{Entity: "e", Key: "k", Value: "one", Now: forgetT0})
	putFact(t, db, store.NewFact{Entity: "e", Key: "k", Value: "two", Now: forgetT0.Add(time.Second)})
	q := store.ForgetQuery{Scope: store.Scope{Tenant: "t"}, Selector: store.ForgetScope{Type: store.ScopeEntityPrefix, Value: "e"}}
	forgetSel(t, db, "r_1", q, forgetT0, 24*time.Hour)

	_, err := forgetRestore(db, "r_1", forgetT0.Add(24*time.Hour))
	assert.ErrorIs(t, err, store.ErrRecoveryWindowClosed)
	restored, err := forgetRestore(db, "r_1", forgetT0.Add(time.Hour))
	require.NoError(t, err)
	assert.Len(t, restored, 2)
	assert.Equal(t, []string{"two"}, forgetCurrent(t, db, "e"))
	_, err = forgetRestore(db, "r_1", forgetT0.Add(time.Hour))
	assert.ErrorIs(t, err, store.ErrForgetRestored)
	_, err = forgetPurge(db, "r_1", forgetT0.Add(48*time.Hour))
	assert.ErrorIs(t, err, store.ErrForgetRestored)
	_, err = forgetRestore(db, "r_unknown", forgetT0)
	assert.ErrorIs(t, err, store.ErrNotFound)
}

// TestRestoreChainMovedOn: two forgets of one chain, restored in the order
// that makes the older version come back first; the newer one then retires
// it, and the chain has one current fact throughout.
func TestRestoreChainMovedOn(t *testing.T) {
	db := openDB(t)
	v1 := putFact(t, db, store.NewFact{Entity: "e", Key: "k", Value: "one", Now: forgetT0})
	q := store.ForgetQuery{Scope: store.Scope{Tenant: "t"}, Selector: store.ForgetScope{Type: store.ScopeEntityPrefix, Value: "e"}}
	forgetSel(t, db, "r_1", q, forgetT0, 24*time.Hour)
	v2 := putFact(t, db, store.NewFact{Entity: "e", Key: "k", Value: "two", Now: forgetT0.Add(time.Minute)})
	forgetSel(t, db, "r_2", q, forgetT0.Add(time.Minute), 24*time.Hour)

	restored, err := forgetRestore(db, "r_1", forgetT0.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, []store.RestoredFact{{ID: v1.ID}}, restored)
	assert.Equal(t, []string{"one"}, forgetCurrent(t, db, "e"))

	restored, err = forgetRestore(db, "r_2", forgetT0.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, []store.RestoredFact{{ID: v2.ID, Retired: v1.ID}}, restored)
	assert.Equal(t, []string{"two"}, forgetCurrent(t, db, "e"))
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		names, err := store.ListEntities(tx, store.Scope{Tenant: "t", Agent: ""})
		assert.Equal(t, []string{"e"}, names)
		f, err2 := store.GetFact(tx, v1.ID)
		assert.Equal(t, v2.ID, f.SupersededBy)
		return errors.Join(err, err2)
	}))
}

func TestPurgeForget(t *testing.T) {
	db := openDB(t)
	f := putFact(t, db, store.NewFact{Scope: store.Scope{Agent: "alice"}, Entity: "e", Key: "k", Value: "secret", Now: forgetT0})
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		return store.SetPin(tx, store.Scope{Tenant: "t", Agent: "alice"}, f.ID, true)
	}))
	q := store.ForgetQuery{Scope: store.Scope{Tenant: "t", Agent: "alice"}, IncludePinned: true, Selector: store.ForgetScope{Type: store.ScopeEntityPrefix, Value: "e"}}
	forgetSel(t, db, "r_1", q, forgetT0, 24*time.Hour)
	forgetSel(t, db, "r_0", store.ForgetQuery{Scope: store.Scope{Tenant: "t"}, Selector: store.ForgetScope{Type: store.ScopeEntityPrefix, Value: "none"}}, forgetT0.Add(-time.Hour), 24*time.Hour)

	due := func(now time.Time) []string {
		var out []string
		require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
			var err error
			out, err = store.DueForgets(tx, now)
			return err
		}))
		return out
	}
	assert.Empty(t, due(forgetT0.Add(22*time.Hour)))
	assert.Equal(t, []string{"r_0"}, due(forgetT0.Add(23*time.Hour)))
	assert.Equal(t, []string{"r_0", "r_1"}, due(forgetT0.Add(24*time.Hour)), "earliest window first")
	_, err := forgetPurge(db, "r_1", forgetT0.Add(23*time.Hour))
	assert.ErrorIs(t, err, store.ErrWindowOpen)

	purged, err := forgetPurge(db, "r_1", forgetT0.Add(24*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, []string{f.ID}, purged)
	assert.Equal(t, []string{"r_0"}, due(forgetT0.Add(48*time.Hour)))
	_, err = forgetPurge(db, "r_1", forgetT0.Add(48*time.Hour))
	assert.ErrorIs(t, err, store.ErrForgetPurged)
	_, err = forgetRestore(db, "r_1", forgetT0)
	assert.ErrorIs(t, err, store.ErrForgetPurged)

	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		rec, err := store.GetForget(tx, "r_1")
		require.NoError(t, err)
		assert.Equal(t, store.ForgetPurged, rec.State)
		assert.Equal(t, "r_purge_r_1", rec.PurgeReceipt)
		err = store.ForgottenFacts(tx, "r_1", func(ff *store.ForgottenFact) error {
			assert.Nil(t, ff.Original, "the value is gone")
			assert.True(t, ff.Purged)
			assert.Equal(t, store.ValueHash("secret"), ff.ValueHash)
			return nil
		})
		require.NoError(t, err)
		pinned, err := store.IsPinned(tx, store.Scope{Tenant: "t", Agent: "alice"}, f.ID)
		assert.False(t, pinned)
		mark, err2 := store.NeedsCompaction(tx)
		assert.Equal(t, "r_purge_r_1", mark)
		return errors.Join(err, err2)
	}))

	// A purge that removed no value (r_0 matched nothing) leaves the mark
	// as it was; the mark is cleared only by the compaction that saw it.
	_, err = forgetPurge(db, "r_0", forgetT0.Add(48*time.Hour))
	require.NoError(t, err)
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error { return store.CompactionDone(tx, "r_purge_r_0") }))
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		mark, err := store.NeedsCompaction(tx)
		assert.Equal(t, "r_purge_r_1", mark)
		if err == nil {
			err = store.CompactionDone(tx, mark)
		}
		return err
	}))
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		mark, err := store.NeedsCompaction(tx)
		assert.Empty(t, mark)
		return err
	}))
}
