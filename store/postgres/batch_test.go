package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/internal/pgtest"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/postgres"
)

// Concurrent Updates share transactions: one that fails leaves nothing,
// the others commit everything, and a panicking one does not take the
// others' writes with it.
func TestGroupCommitIsolatesCalls(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	errOdd := errors.New("odd call fails")
	var wg sync.WaitGroup
	const calls = 64
	errs := make([]error, calls)
	panics := make([]any, calls)
	for i := range calls {
		wg.Go(func() {
			defer func() { panics[i] = recover() }()
			errs[i] = db.Update(ctx, func(tx store.Tx) error {
				if err := tx.Put("b", fmt.Appendf(nil, "k%02d", i), []byte("v")); err != nil {
					return err
				}
				if err := tx.Put("b", []byte("last"), fmt.Appendf(nil, "%02d", i)); err != nil {
					return err
				}
				switch {
				case i%10 == 9:
					panic("boom")
				case i%2 == 1:
					return errOdd
				}
				return nil
			})
		})
	}
	wg.Wait()
	var keys []string
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		return tx.Scan("b", []byte("k"), false, func(k, _ []byte) error {
			keys = append(keys, string(k))
			return nil
		})
	}))
	var want []string
	for i := range calls {
		switch {
		case i%10 == 9:
			assert.Equal(t, "boom", panics[i], "call %d", i)
		case i%2 == 1:
			assert.ErrorIs(t, errs[i], errOdd, "call %d", i)
		default:
			assert.NoError(t, errs[i], "call %d", i)
			assert.Nil(t, panics[i], "call %d", i)
			want = append(want, fmt.Sprintf("k%02d", i))
		}
	}
	assert.Equal(t, want, keys, "the writes of the calls that succeeded, and only those")
	var last []byte
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		v, err := tx.Get("b", []byte("last"))
		last = v
		return err
	}))
	var n int
	_, err := fmt.Sscanf(string(last), "%d", &n)
	require.NoError(t, err)
	assert.Equal(t, 0, n%2, "last written by a call that succeeded, got %q", last)
}

// A cancelled call in a shared transaction returns its context's error
// and its writes are dropped; the others commit.
func TestGroupCommitCancelledCall(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	cctx, cancel := context.WithCancel(ctx)
	started := make(chan struct{})
	var wg sync.WaitGroup
	var cerr error
	wg.Go(func() {
		cerr = db.Update(cctx, func(tx store.Tx) error {
			if err := tx.Put("b", []byte("cancelled"), nil); err != nil {
				return err
			}
			close(started)
			for cctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			return tx.Put("b", []byte("cancelled2"), nil) // fails: ctx ended
		})
	})
	<-started
	wg.Go(func() {
		assert.NoError(t, db.Update(ctx, func(tx store.Tx) error { return tx.Put("b", []byte("kept"), nil) }))
	})
	cancel()
	wg.Wait()
	assert.ErrorIs(t, cerr, context.Canceled)
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		_, err := tx.Get("b", []byte("kept"))
		assert.NoError(t, err)
		_, err = tx.Get("b", []byte("cancelled"))
		assert.ErrorIs(t, err, store.ErrNotFound)
		return nil
	}))
}

// A keyword query reads its postings and fresh entries in one round trip
// and its candidates' facts in another; a store_fact reads what it needs
// in one and commits in a second.
func TestRoundTrips(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	now := time.Now()
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		for i := range 500 {
			if _, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "t"},
				Entity: fmt.Sprintf("e:%d", i), Key: "k", Value: fmt.Sprintf("note %d on topic%d", i, i%5),
				Confidence: 0.5, Now: now.Add(-time.Duration(i) * time.Second)}); err != nil {
				return err
			}
		}
		return nil
	}))
	before := postgres.RoundTrips(db)
	var res store.FactResult
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		var err error
		res, err = store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: "t"}, Terms: []string{"topic3"}, Limit: 10, Now: now})
		return err
	}))
	require.Len(t, res.Facts, 10)
	for _, f := range res.Facts {
		assert.Contains(t, f.Value, "topic3")
	}
	assert.LessOrEqual(t, postgres.RoundTrips(db)-before, uint64(3), "reads and the rollback")

	before = postgres.RoundTrips(db)
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		_, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "t"}, Entity: "e:new", Key: "k", Value: "v", Confidence: 0.5, Now: now})
		return err
	}))
	assert.Equal(t, uint64(2), postgres.RoundTrips(db)-before, "the reads, then the writes with COMMIT")
}

// The calls of a batch probe: their reads go to the server together, a
// few round trips for all, and each call still runs at its place in the
// batch's order, seeing the writes of the calls before it.
func TestProbesShareRoundTrips(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	now := time.Now()
	put := func(entity string) error {
		return db.Update(ctx, func(tx store.Tx) error {
			_, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "t"}, Entity: entity, Key: "k", Value: "v of " + entity, Confidence: 0.5, Now: now})
			return err
		})
	}
	require.NoError(t, put("e:shared")) // a chain with a current version: its readers read it too
	before := postgres.RoundTrips(db)

	// A first call holds the batch open until the others have joined it.
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		assert.NoError(t, db.Update(ctx, func(tx store.Tx) error {
			<-release
			return tx.Put("b", []byte("first"), []byte("v"))
		}))
	})
	for postgres.Joined(db) < 1 {
		time.Sleep(time.Millisecond)
	}
	const calls = 32
	errs := make([]error, calls)
	for i := range calls {
		wg.Go(func() {
			entity := fmt.Sprintf("e:%d", i)
			if i%2 == 1 {
				entity = "e:shared"
			}
			errs[i] = put(entity)
		})
	}
	for postgres.Joined(db) < calls+1 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "call %d", i)
	}
	trips := postgres.RoundTrips(db) - before
	assert.LessOrEqual(t, trips, uint64(6), "round trips of a batch of %d store_facts", calls)

	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		for i := 0; i < calls; i += 2 {
			res, err := store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: "t"}, Entity: fmt.Sprintf("e:%d", i), Now: now})
			require.NoError(t, err)
			require.Len(t, res.Facts, 1, "e:%d", i)
			assert.Equal(t, uint32(1), res.Facts[0].Version)
		}
		var versions []uint32
		current := 0
		res, err := store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: "t"}, Entity: "e:shared", IncludeSuperseded: true, Now: now})
		require.NoError(t, err)
		for _, f := range res.Facts {
			versions = append(versions, f.Version)
			if f.SupersededBy == "" {
				current++
			}
		}
		sort.Slice(versions, func(i, j int) bool { return versions[i] < versions[j] })
		want := make([]uint32, calls/2+1)
		for i := range want {
			want[i] = uint32(i + 1)
		}
		assert.Equal(t, want, versions, "one chain, each call a version after the one before")
		assert.Equal(t, 1, current, "one current version")
		return nil
	}))
}

// The store_fact that moves the fresh postings into the keyword index
// reads the blocks of all their words in one round trip, not one or two
// per word.
func TestRoundTripsOfFreshFlush(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	now := time.Now()
	put := func(i int) error {
		return db.Update(ctx, func(tx store.Tx) error {
			_, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "t"}, Entity: fmt.Sprintf("e:%d", i), Key: "k",
				Value: fmt.Sprintf("value %d w%dz other%d", i, i, i), Confidence: 0.5, Now: now})
			return err
		})
	}
	// Enough facts that every later one flushes at some point, with words
	// of their own (about 6 each) and shared ones.
	most := uint64(0)
	for i := range 200 {
		before := postgres.RoundTrips(db)
		require.NoError(t, put(i))
		most = max(most, postgres.RoundTrips(db)-before)
	}
	assert.LessOrEqual(t, most, uint64(4), "round trips of the costliest store_fact")
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		res, err := store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: "t"}, Terms: []string{"w7z"}, Limit: 10, Now: now})
		require.NoError(t, err)
		require.Len(t, res.Facts, 1)
		assert.Equal(t, "e:7", res.Facts[0].Entity)
		return nil
	}))
}

// Prefetched scans of one bucket go to the server as one statement per
// direction and kind of bound, and every scan still sees exactly its
// rows, in order, across pages.
func TestPrefetchedScansTogether(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	counts := map[string]int{"a/": 300, "b/": 3, "c/": 40, "d/": 0, "e/": 20}
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		for p, n := range counts {
			for i := range n {
				if err := tx.Put("b", fmt.Appendf(nil, "%s%04d", p, i), fmt.Appendf(nil, "v%s%d", p, i)); err != nil {
					return err
				}
			}
		}
		return tx.Put("b", []byte("z"), []byte("last"))
	}))
	before := postgres.RoundTrips(db)
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		p := tx.(store.Prefetcher)
		for _, prefix := range []string{"a/", "b/", "c/", "d/", "e/"} {
			p.PrefetchScan("b", []byte(prefix), false)
			p.PrefetchScan("b", []byte(prefix), true)
		}
		for prefix, n := range counts {
			for _, reverse := range []bool{false, true} {
				var got []string
				require.NoError(t, tx.Scan("b", []byte(prefix), reverse, func(k, v []byte) error {
					assert.Equal(t, expectValue(prefix, string(k)), string(v))
					got = append(got, string(k))
					return nil
				}))
				var want []string
				for i := range n {
					want = append(want, fmt.Sprintf("%s%04d", prefix, i))
				}
				if reverse {
					slices.Reverse(want)
				}
				assert.Equal(t, want, got, "%s reverse=%v", prefix, reverse)
			}
		}
		return nil
	}))
	// The prefetches in one round trip; "a/" needs a second page; then
	// the rollback.
	assert.LessOrEqual(t, postgres.RoundTrips(db)-before, uint64(3))
}

// expectValue is the value stored under key k of prefix p in
// TestPrefetchedScansTogether.
func expectValue(p, k string) string {
	var i int
	fmt.Sscanf(k[len(p):], "%d", &i)
	return fmt.Sprintf("v%s%d", p, i)
}

// Two servers that both read a key as absent and then insert it: the
// commit that comes second is aborted (a serialization failure, or a
// unique violation on the key the first inserted), and its
// Update runs again, now reading the key, instead of failing.
func TestInsertOfKeyReadAbsentRetries(t *testing.T) {
	first, schema := openSchema(t)
	second, err := postgres.Open(context.Background(), pgtest.DSN(t), &postgres.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { second.Close() })
	ctx := context.Background()
	var read sync.WaitGroup // both have read the key as absent in their first run
	read.Add(2)
	var runs [2]int
	var wg sync.WaitGroup
	for i, db := range []*postgres.DB{first, second} {
		wg.Go(func() {
			assert.NoError(t, db.Update(ctx, func(tx store.Tx) error {
				runs[i]++
				v, err := tx.Get("b", []byte("k"))
				switch {
				case errors.Is(err, store.ErrNotFound):
					v = nil
				case err != nil:
					return err
				}
				if runs[i] == 1 {
					read.Done()
					read.Wait()
				}
				return tx.Put("b", []byte("k"), append(v, byte('a'+i)))
			}))
		})
	}
	wg.Wait()
	var v []byte
	require.NoError(t, first.View(ctx, func(tx store.Tx) error {
		v, err = tx.Get("b", []byte("k"))
		return err
	}))
	assert.ElementsMatch(t, []byte("ab"), v, "each server's write, one after the other")
	assert.Equal(t, 3, runs[0]+runs[1], "the second to commit ran again once")
}
