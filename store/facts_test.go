package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

func openDB(t *testing.T) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "facts.db"), &bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// putFact writes a fact in its own transaction and returns it; an empty
// tenant is "t" and a zero confidence is 1.
func putFact(t *testing.T, db store.Backend, n store.NewFact) *store.Fact {
	t.Helper()
	if n.Tenant == "" {
		n.Tenant = "t"
	}
	if n.Confidence == 0 {
		n.Confidence = 1
	}
	var f *store.Fact
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		var err error
		f, _, err = store.PutFact(tx, n)
		return err
	}))
	return f
}

func TestParseHorizon(t *testing.T) {
	for text, want := range map[string]string{
		"a few hours":        store.HorizonVolatile,
		"stable for years":   store.HorizonStable,
		"frozen":             store.HorizonStable,
		"the architecture":   store.HorizonStable,
		"next month":         store.HorizonMedium,
		"two weeks":          store.HorizonMedium,
		"1 day":              store.HorizonVolatile,
		"2 days":             store.HorizonVolatile,
		"3 days":             store.HorizonMedium,
		"a day":              store.HorizonMedium,
		"until the 24h mark": store.HorizonNone,
		"":                   store.HorizonNone,
		"HOURLY":             store.HorizonVolatile,
	} {
		assert.Equal(t, want, store.ParseHorizon(text), text)
	}
}

func TestFreshness(t *testing.T) {
	p := store.DefaultDecayPolicy
	now := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		class string
		age   time.Duration
		want  string
	}{
		{store.HorizonNone, 10000 * time.Hour, store.Fresh},
		{store.HorizonVolatile, 24 * time.Hour, store.Fresh},
		{store.HorizonVolatile, 24*time.Hour + time.Nanosecond, store.Stale},
		{store.HorizonMedium, 35 * 24 * time.Hour, store.Fresh},
		{store.HorizonMedium, 36 * 24 * time.Hour, store.Stale},
		{store.HorizonStable, 366 * 24 * time.Hour, store.Stale},
		{store.HorizonStable, -time.Hour, store.Unknown},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, p.Freshness(tt.class, now.Add(-tt.age), now), "%s %v", tt.class, tt.age)
	}
	assert.Equal(t, store.Unknown, p.Freshness(store.HorizonVolatile, time.Time{}, now))
	assert.Equal(t, 0.4, store.EffectiveConfidence(0.8, store.Stale))
	assert.Equal(t, 0.8, store.EffectiveConfidence(0.8, store.Unknown))
}

func TestWords(t *testing.T) {
	assert.Equal(t, []string{"deploy", "to", "stage", "42", "über"}, store.Words("Deploy to STAGING: deploy #42 a Über"))
	assert.Equal(t, store.Words("database"), store.Words("Databases"), "stemmed")
	long := store.Words(string(make([]byte, 0)) + "x" + fmt.Sprint(make([]int, 0)) + "ééééééééééééééééééééééééééééééééééééééééé")
	require.Len(t, long, 1)
	assert.LessOrEqual(t, len(long[0]), store.MaxWordBytes)
}

// TestRankAllMatchesBruteForce checks the early-stopping unfiltered ranking
// against sorting every fact, over random confidences and ages.
func TestRankAllMatchesBruteForce(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(1, 2))
	classes := []string{store.HorizonVolatile, store.HorizonMedium, store.HorizonStable, store.HorizonNone}
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		for i := range 400 {
			_, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "t"},
				Entity: fmt.Sprintf("e%d", i%37), Key: fmt.Sprintf("k%d", i%11), Value: fmt.Sprint(i),
				Confidence: float64(rng.IntN(11)) / 10, HorizonClass: classes[rng.IntN(4)],
				Now: now.Add(-time.Duration(rng.IntN(800)) * time.Hour),
			})
			if err != nil {
				return err
			}
		}
		return nil
	}))
	for _, q := range []store.FactQuery{
		{Limit: 10}, {Limit: 1}, {Limit: 50, IncludeSuperseded: true}, {Limit: 25, MinEffective: 0.45}, {Limit: 400, MinEffective: 0.45}, {Limit: 0},
	} {
		q.Tenant, q.Now, q.Policy = "t", now, store.DefaultDecayPolicy
		var fast, brute store.FactResult
		require.NoError(t, db.View(ctx, func(tx store.Tx) error {
			var err error
			if fast, err = store.SearchFacts(tx, q); err != nil {
				return err
			}
			// The same query through the entity index of every entity.
			all := q
			all.Limit = 0
			for i := range 37 {
				all.Entity = fmt.Sprintf("e%d", i)
				r, err := store.SearchFacts(tx, all)
				if err != nil {
					return err
				}
				brute.Facts = append(brute.Facts, r.Facts...)
				brute.BelowFloor += r.BelowFloor
			}
			return nil
		}))
		sort.Slice(brute.Facts, func(i, j int) bool {
			a, b := brute.Facts[i], brute.Facts[j]
			if a.Effective != b.Effective {
				return a.Effective > b.Effective
			}
			if !a.StoredAt.Equal(b.StoredAt) {
				return a.StoredAt.After(b.StoredAt)
			}
			return a.ID < b.ID
		})
		if q.Limit > 0 && len(brute.Facts) > q.Limit {
			brute.Facts = brute.Facts[:q.Limit]
		}
		ids := func(r store.FactResult) (out []string) {
			for _, f := range r.Facts {
				out = append(out, f.ID)
			}
			return out
		}
		assert.Equal(t, ids(brute), ids(fast), "%+v", q)
		if q.MinEffective > 0 {
			if len(fast.Facts) < q.Limit {
				assert.Positive(t, fast.BelowFloor)
			}
			assert.LessOrEqual(t, fast.BelowFloor, brute.BelowFloor)
		}
	}
}

func TestPutFactRollsBackOnBadSupersedes(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	now := time.Now()
	var first *store.Fact
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		var err error
		first, _, err = store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "t"}, Entity: "e", Key: "k", Value: "v1", Confidence: 1, Now: now})
		return err
	}))
	err := db.Update(ctx, func(tx store.Tx) error {
		_, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "t"}, Entity: "e", Key: "k", Value: "v2", Confidence: 1, Now: now, Supersedes: []string{"f_missing"}})
		return err
	})
	var se *store.SupersedeError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "f_missing", se.ID)
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		f, err := store.GetFact(tx, first.ID)
		require.NoError(t, err)
		assert.True(t, f.Current(), "the chain's current fact was not retired")
		h, err := store.History(tx, store.Scope{Tenant: "t", Agent: ""}, "e", "k")
		assert.Len(t, h, 1)
		return err
	}))
}

// failingGets is a transaction whose Get of key fails with err.
type failingGets struct {
	store.Tx
	key string
	err error
}

func (tx failingGets) Get(bucket string, key []byte) ([]byte, error) {
	if string(key) == tx.key {
		return nil, tx.err
	}
	return tx.Tx.Get(bucket, key)
}

// TestPutFactSupersedesStoreFailure: a store that fails to read a
// supersedes id is an error of the store, not a missing fact; an empty id
// is a missing fact.
func TestPutFactSupersedesStoreFailure(t *testing.T) {
	db := openDB(t)
	old := putFact(t, db, store.NewFact{Entity: "e", Key: "k", Value: "v1", Now: time.Now()})
	broken := errors.New("disk on fire")
	for _, tc := range []struct {
		id      string
		err     error // what reading id fails with; nil: no failure
		missing bool  // PutFact reports a *SupersedeError
	}{
		{id: old.ID, err: broken},
		{id: old.ID, err: store.ErrNotFound, missing: true},
		{id: "", missing: true},
	} {
		err := db.Update(context.Background(), func(tx store.Tx) error {
			if tc.err != nil {
				tx = failingGets{Tx: tx, key: tc.id, err: tc.err}
			}
			_, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "t"}, Entity: "x", Key: "k", Value: "v",
				Confidence: 1, Now: time.Now(), Supersedes: []string{tc.id}})
			return err
		})
		var se *store.SupersedeError
		assert.Equal(t, tc.missing, errors.As(err, &se), "id %q failing with %v: %v", tc.id, tc.err, err)
		if tc.err != nil && !tc.missing {
			assert.ErrorIs(t, err, tc.err)
		}
	}
}

func TestPassports(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		return store.PutPassport(tx, &store.Passport{PrincipalID: "alice", Tenant: "t", Tier: store.TierBasic, IssuedAt: now})
	}))
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		p, err := store.GetPassport(tx, "t", "alice")
		require.NoError(t, err)
		assert.Equal(t, store.TierBasic, p.Tier)
		assert.False(t, p.Revoked())
		_, err = store.GetPassport(tx, "other", "alice")
		assert.ErrorIs(t, err, store.ErrNotFound)
		return nil
	}))
	for n, want := range map[uint64]string{0: "unverified", 9: "unverified", 10: "basic", 100: "established", 499: "established", 500: "trusted", 2000: "elite"} {
		assert.Equal(t, want, store.TierFor(n), n)
	}
	assert.Equal(t, 3, store.TierRank(store.TierTrusted))
	assert.Equal(t, -1, store.TierRank("gold"))
}

func TestPins(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		require.NoError(t, store.SetPin(tx, store.Scope{Tenant: "t", Agent: "alice"}, "f_1", true))
		require.NoError(t, store.SetPin(tx, store.Scope{Tenant: "t", Agent: "alice"}, "f_2", true))
		require.NoError(t, store.SetPin(tx, store.Scope{Tenant: "t", Agent: "alice"}, "f_2", false))
		return store.SetPin(tx, store.Scope{Tenant: "t", Agent: "bob"}, "f_3", true)
	}))
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		for _, c := range []struct {
			agent, id string
			want      bool
		}{{"alice", "f_1", true}, {"alice", "f_2", false}, {"bob", "f_1", false}, {"bob", "f_3", true}, {"", "f_1", false}} {
			got, err := store.IsPinned(tx, store.Scope{Tenant: "t", Agent: c.agent}, c.id)
			require.NoError(t, err)
			assert.Equal(t, c.want, got, "%s %s", c.agent, c.id)
		}
		any1, err := store.PinnedByAnyone(tx, "t", "f_1")
		require.NoError(t, err)
		assert.True(t, any1)
		any2, err := store.PinnedByAnyone(tx, "t", "f_2")
		require.NoError(t, err)
		assert.False(t, any2)
		other, err := store.PinnedByAnyone(tx, "u", "f_1")
		require.NoError(t, err)
		assert.False(t, other, "pins are per tenant")
		var ids []string
		require.NoError(t, store.Pinned(tx, store.Scope{Tenant: "t", Agent: "alice"}, func(id string) error { ids = append(ids, id); return nil }))
		assert.Equal(t, []string{"f_1"}, ids)
		return nil
	}))
}

func TestReadHistoryWalksEveryVersionOnce(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	alice := store.Scope{Tenant: "t", Agent: "alice"}
	// Shared and private writes interleaved, with two of them at the same instant.
	var want []string // newest first
	for i := range 23 {
		at := t0.Add(time.Duration(i) * time.Second)
		if i == 7 {
			at = t0.Add(6 * time.Second)
		}
		f := putFact(t, db, store.NewFact{Scope: alice, Entity: "e", Key: "k", Value: fmt.Sprint(i), Private: i%3 == 0, Now: at})
		want = append([]string{f.ID}, want...)
	}
	putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: "t", Agent: "bob"}, Entity: "e", Key: "k", Value: "bob's", Private: true, Now: t0})

	walk := func(s store.Scope, chains store.HistoryChain, limit int, between func()) []string {
		var got []string
		var from store.HistoryPos
		for range 100 {
			var p *store.HistoryPage
			require.NoError(t, db.View(ctx, func(tx store.Tx) error {
				var err error
				p, err = store.ReadHistory(tx, store.HistoryQuery{Scope: s, Entity: "e", Key: "k", Chains: chains, From: from, Limit: limit})
				return err
			}))
			require.LessOrEqual(t, len(p.Facts), limit)
			for _, f := range p.Facts {
				got = append(got, f.ID)
			}
			if !p.More {
				return got
			}
			from = p.Next
			if between != nil {
				between()
				between = nil
			}
		}
		t.Fatal("the walk does not end")
		return nil
	}
	for _, limit := range []int{1, 2, 5, 22, 23, 24} {
		assert.Equal(t, want, walk(alice, store.BothChains, limit, nil), "limit %d", limit)
	}
	// A version written during the walk does not join it.
	assert.Equal(t, want, walk(alice, store.BothChains, 4, func() {
		putFact(t, db, store.NewFact{Scope: alice, Entity: "e", Key: "k", Value: "late", Now: t0.Add(time.Hour)})
	}))
	var shared []string
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		h, err := store.History(tx, store.Scope{Tenant: "t"}, "e", "k")
		for i := len(h) - 1; i >= 0; i-- {
			shared = append(shared, h[i].ID)
		}
		return err
	}))
	assert.Equal(t, shared, walk(store.Scope{Tenant: "t"}, store.BothChains, 3, nil), "anonymous: the shared chain")
	assert.Equal(t, shared, walk(alice, store.SharedChain, 3, nil))
	assert.Len(t, walk(alice, store.PrivateChain, 3, nil), 8)
	assert.Empty(t, walk(store.Scope{Tenant: "t", Agent: "carol"}, store.PrivateChain, 3, nil))

	// After(n) resumes right after the first n facts.
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		p, err := store.ReadHistory(tx, store.HistoryQuery{Scope: alice, Entity: "e", Key: "k", Limit: 10})
		require.NoError(t, err)
		q, err := store.ReadHistory(tx, store.HistoryQuery{Scope: alice, Entity: "e", Key: "k", From: p.After(4), Limit: 3})
		require.NoError(t, err)
		assert.Equal(t, p.Facts[4:7], q.Facts)
		return nil
	}))
}

// TestNewFactIDOrdered: fact ids keep the f_ + 32 lowercase hex form, are
// unique, and sort in the order they were made, also many to a
// millisecond.
func TestNewFactIDOrdered(t *testing.T) {
	form := regexp.MustCompile(`^f_[0-9a-f]{32}$`)
	prev := ""
	seen := make(map[string]bool)
	for i := range 20_000 {
		id := store.NewFactID()
		require.Regexp(t, form, id)
		require.False(t, seen[id], "id %s made twice", id)
		seen[id] = true
		require.Greater(t, id, prev, "id %d", i)
		prev = id
	}
	ms, err := strconv.ParseUint(prev[2:14], 16, 64)
	require.NoError(t, err)
	assert.InDelta(t, time.Now().UnixMilli(), int64(ms), 5000, "the first 12 digits are the time in ms")
}

// TestKeywordSearchAcrossFreshPostings: keyword queries find every live
// fact whose words match, whether its postings still wait in facts.fresh or
// were already moved to facts.words, and never a deleted one, deleted
// before or after the move; the doctor finds nothing amiss.
func TestKeywordSearchAcrossFreshPostings(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	s := store.Scope{Tenant: "t"}
	var facts []*store.Fact
	deleted := map[string]bool{}
	for i := range 300 { // several moves of freshMax facts, and some left over
		facts = append(facts, putFact(t, db, store.NewFact{Scope: s, Entity: fmt.Sprintf("e%d", i),
			Key: "k", Value: fmt.Sprintf("word%d common%d", i%10, i%3), Now: now.Add(time.Duration(i) * time.Second)}))
		if i%7 == 0 { // delete a fact of the moment, its postings still fresh
			f := facts[i]
			require.NoError(t, db.Update(ctx, func(tx store.Tx) error { _, _, err := store.DeleteFact(tx, s, f.ID, now); return err }))
			deleted[f.ID] = true
		}
	}
	// Facts whose ids sort before the others (an id chosen by the caller),
	// so that their postings go inside the blocks already written, not
	// after them; and one id that is not of the standard form.
	for i, id := range []string{"f_00000000000000000000000000000001", "f_0000000000000000000000000000000a", "custom-id"} {
		facts = append(facts, putFact(t, db, store.NewFact{Scope: s, Entity: "early", Key: fmt.Sprint(i),
			Value: "word3 common1 early", ID: id, Now: now}))
	}
	for range 70 { // and move them
		putFact(t, db, store.NewFact{Scope: s, Entity: "filler", Key: "k", Value: "filler", Now: now})
	}
	for _, i := range []int{3, 17, 101, 301} { // and older ones, moved by now
		f := facts[i]
		require.NoError(t, db.Update(ctx, func(tx store.Tx) error { _, _, err := store.DeleteFact(tx, s, f.ID, now); return err }))
		deleted[f.ID] = true
	}
	for _, query := range []string{"word3", "common1", "word", "word7 common2", "e29", "early"} {
		terms := store.Words(query)
		var want []string
		for _, f := range facts {
			if deleted[f.ID] {
				continue
			}
			for _, w := range store.Words(f.Value + " " + f.Key + " " + f.Entity) {
				if slices.ContainsFunc(terms, func(t string) bool { return strings.HasPrefix(w, t) }) {
					want = append(want, f.ID)
					break
				}
			}
		}
		var got []string
		require.NoError(t, db.View(ctx, func(tx store.Tx) error {
			r, err := store.SearchFacts(tx, store.FactQuery{Scope: s, Terms: terms, Now: now, Policy: store.DefaultDecayPolicy})
			for _, f := range r.Facts {
				got = append(got, f.ID)
			}
			return err
		}))
		require.NotEmpty(t, want)
		assert.ElementsMatch(t, want, got, "%v", terms)
	}
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		problems, err := store.Diagnose(tx)
		assert.Empty(t, problems)
		return err
	}))
}

// TestUnfilteredAcrossFreshEntries: an unfiltered query and an unfiltered
// ScanFacts see every live fact the caller may see, in rank order, whether
// its rank entry waits in facts.fresh or was moved to facts.rank, private
// partitions included.
func TestUnfilteredAcrossFreshEntries(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	var want []string    // alice's view, best first
	for i := range 150 { // two moves of freshMax facts, and some left over
		s := store.Scope{Tenant: "t", Agent: "alice"}
		private := i%3 == 0
		if i%5 == 0 {
			s.Agent, private = "bob", true
		}
		f := putFact(t, db, store.NewFact{Scope: s, Entity: fmt.Sprintf("e%d", i), Key: "k", Value: "v",
			Confidence: float64(i%7+1) / 8, Private: private, Now: now.Add(time.Duration(i) * time.Minute)})
		if f.VisibleTo("alice") {
			want = append(want, f.ID)
		}
	}
	var got, scanned []string
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		alice := store.Scope{Tenant: "t", Agent: "alice"}
		r, err := store.SearchFacts(tx, store.FactQuery{Scope: alice, Now: now, Policy: store.DefaultDecayPolicy})
		for _, f := range r.Facts {
			got = append(got, f.ID)
		}
		if err != nil {
			return err
		}
		_, err = store.ScanFacts(tx, store.FactScan{Scope: alice}, func(f *store.Fact) error {
			scanned = append(scanned, f.ID)
			return nil
		})
		return err
	}))
	assert.ElementsMatch(t, want, got)
	assert.ElementsMatch(t, want, scanned)
}

// BenchmarkPutFact is PutFact in a transaction of its own, without fsync,
// in a store of 2,000 facts, written as bench's store_fact benchmarks
// write them: nine words a fact, seven of them on every fact.
func BenchmarkPutFact(b *testing.B) {
	db, err := bolt.Open(filepath.Join(b.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(b, err)
	defer db.Close()
	put := func(i int) {
		require.NoError(b, db.Update(context.Background(), func(tx store.Tx) error {
			_, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "t"},
				Entity: fmt.Sprintf("project:%d", i%1000), Key: fmt.Sprintf("k%d", i%7),
				Value: fmt.Sprintf("value %d of the durable write benchmark", i), Confidence: 1, Now: time.Now()})
			return err
		}))
	}
	i := 0
	for ; i < 2_000; i++ {
		put(i)
	}
	for b.Loop() {
		put(i)
		i++
	}
}
