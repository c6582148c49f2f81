package mem

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend {
		db := New()
		t.Cleanup(func() { _ = db.Close() })
		return db
	})
}

// TestModel runs random Puts, Deletes and rolled-back Updates, then checks
// every bucket's Gets and scans (both ways, of every prefix of one byte
// and of none, and from a random key) against a map of what was committed.
func TestModel(t *testing.T) {
	ctx := context.Background()
	db := New()
	defer db.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	model := map[string]map[string]string{}
	key := func() []byte { return fmt.Appendf(nil, "%c%d", 'a'+rng.IntN(4), rng.IntN(300)) }
	for round := range 300 {
		commit := round%5 != 4
		staged := map[string]map[string]*string{}
		err := db.Update(ctx, func(tx store.Tx) error {
			for range 1 + rng.IntN(20) {
				b, k := fmt.Sprint("b", rng.IntN(3)), key()
				if staged[b] == nil {
					staged[b] = map[string]*string{}
				}
				if rng.IntN(3) == 0 {
					require.NoError(t, tx.Delete(b, k))
					staged[b][string(k)] = nil
					continue
				}
				v := fmt.Sprint("v", round, rng.IntN(1000))
				require.NoError(t, tx.Put(b, k, []byte(v)))
				staged[b][string(k)] = &v
			}
			if !commit {
				return store.ErrStop
			}
			return nil
		})
		if !commit {
			require.ErrorIs(t, err, store.ErrStop)
			continue
		}
		require.NoError(t, err)
		for b, kv := range staged {
			if model[b] == nil {
				model[b] = map[string]string{}
			}
			for k, v := range kv {
				if v == nil {
					delete(model[b], k)
				} else {
					model[b][k] = *v
				}
			}
		}
	}
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		for b, kv := range model {
			keys := slices.Sorted(maps.Keys(kv))
			for _, k := range keys {
				v, err := tx.Get(b, []byte(k))
				require.NoError(t, err)
				require.Equal(t, kv[k], string(v))
			}
			for _, prefix := range []string{"", "a", "b", "c", "d", "e", "a1", "c29"} {
				var want []string
				for _, k := range keys {
					if bytes.HasPrefix([]byte(k), []byte(prefix)) {
						want = append(want, k)
					}
				}
				for _, reverse := range []bool{false, true} {
					var got []string
					require.NoError(t, tx.Scan(b, []byte(prefix), reverse, func(k, v []byte) error {
						require.Equal(t, kv[string(k)], string(v))
						got = append(got, string(k))
						return nil
					}))
					require.Equal(t, want, got, "bucket %s prefix %q reverse %v", b, prefix, reverse)
					slices.Reverse(want)
				}
				from := key()
				var got, wantFrom []string
				for _, k := range want {
					if k >= string(from) {
						wantFrom = append(wantFrom, k)
					}
				}
				require.NoError(t, tx.(store.Seeker).ScanFrom(b, []byte(prefix), from, func(k, _ []byte) error {
					got = append(got, string(k))
					return nil
				}))
				require.Equal(t, wantFrom, got, "bucket %s prefix %q from %q", b, prefix, from)
			}
		}
		return nil
	}))
}

// TestScanWhileWriting: a scan whose fn writes to the bucket it scans sees
// the keys written ahead of it and not those behind, in both directions.
func TestScanWhileWriting(t *testing.T) {
	ctx := context.Background()
	db := New()
	defer db.Close()
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		for _, k := range []string{"k2", "k4", "k6"} {
			if err := tx.Put("b", []byte(k), nil); err != nil {
				return err
			}
		}
		return nil
	}))
	for _, reverse := range []bool{false, true} {
		var seen []string
		require.ErrorIs(t, db.Update(ctx, func(tx store.Tx) error {
			err := tx.Scan("b", []byte("k"), reverse, func(k, _ []byte) error {
				seen = append(seen, string(k))
				if string(k) != "k4" {
					return nil
				}
				for _, w := range []string{"k1", "k3", "k5", "k7"} {
					if err := tx.Put("b", []byte(w), nil); err != nil {
						return err
					}
				}
				return tx.Delete("b", []byte(map[bool]string{false: "k6", true: "k2"}[reverse]))
			})
			if err != nil {
				return err
			}
			return store.ErrStop // roll back for the next direction
		}), store.ErrStop)
		want := []string{"k2", "k4", "k5", "k7"}
		if reverse {
			want = []string{"k6", "k4", "k3", "k1"}
		}
		require.Equal(t, want, seen, "reverse %v", reverse)
	}
}

// TestSnapshot: a View started before an Update commits reads the state
// before it to its end, while later Views read the new one.
func TestSnapshot(t *testing.T) {
	ctx := context.Background()
	db := New()
	defer db.Close()
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error { return tx.Put("b", []byte("k"), []byte("old")) }))
	inView, committed := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		assert.NoError(t, db.View(ctx, func(tx store.Tx) error {
			close(inView)
			<-committed
			v, err := tx.Get("b", []byte("k"))
			assert.NoError(t, err)
			assert.Equal(t, "old", string(v))
			_, err = tx.Get("b", []byte("new"))
			assert.ErrorIs(t, err, store.ErrNotFound)
			return nil
		}))
	})
	<-inView
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		if err := tx.Put("b", []byte("k"), []byte("new")); err != nil {
			return err
		}
		return tx.Put("b", []byte("new"), nil)
	}))
	close(committed)
	wg.Wait()
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		v, err := tx.Get("b", []byte("k"))
		require.Equal(t, "new", string(v))
		return err
	}))
}

func TestLongKey(t *testing.T) {
	db := New()
	defer db.Close()
	err := db.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.Put("b", bytes.Repeat([]byte("k"), MaxKeySize), nil); err != nil {
			return err
		}
		return tx.Put("b", bytes.Repeat([]byte("k"), MaxKeySize+1), nil)
	})
	require.ErrorContains(t, err, "longer than the 32768 allowed")
}
