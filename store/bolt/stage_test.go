package bolt

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/bbolt"

	"github.com/crux-go/crux/store"
)

// TestStagedBucket writes a staged bucket at random, transaction after
// transaction, and checks after each that Get, Scan (both ways, with and
// without a prefix) and ScanFrom read it as a plain map of what was
// written, that the stage never stays larger than stageBytes, and that the
// entries do move into the bucket itself.
func TestStagedBucket(t *testing.T) {
	bucket := store.StagedIndexes()[0]
	stage := stages[bucket]
	path := filepath.Join(t.TempDir(), "crux.db")
	db, err := Open(path, &Options{NoSync: true})
	require.NoError(t, err)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	model := map[string]string{}
	key := func() string { return fmt.Sprintf("t\x00e%d\x00k%02d", rng.IntN(4), rng.IntN(40)) }
	moved := false
	for round := range 300 {
		require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
			for range 1 + rng.IntN(6) {
				k := key()
				if rng.IntN(4) == 0 {
					delete(model, k)
					if err := tx.Delete(bucket, []byte(k)); err != nil {
						return err
					}
					continue
				}
				v := fmt.Sprintf("v%d-%d", round, rng.IntN(1000))
				model[k] = v
				if err := tx.Put(bucket, []byte(k), []byte(v)); err != nil {
					return err
				}
			}
			return nil
		}))
		checkStaged(t, db, bucket, model)
		require.NoError(t, db.bdb.View(func(btx *bbolt.Tx) error {
			if s := btx.Bucket([]byte(stage)); s != nil {
				assert.LessOrEqual(t, stageSize(s), stageBytes, "round %d", round)
			}
			if b := btx.Bucket([]byte(bucket)); b != nil && b.Stats().KeyN > 0 {
				moved = true
			}
			return nil
		}))
		if round%100 == 99 {
			require.NoError(t, db.Close())
			db, err = Open(path, &Options{NoSync: true})
			require.NoError(t, err)
		}
	}
	assert.True(t, moved, "the stage moved into the bucket")

	// A scan that deletes each key it visits, and puts one after it, sees
	// every key once, in order, and those it put.
	var want []string
	for k := range model {
		want = append(want, k)
	}
	slices.Sort(want)
	var seen []string
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		return tx.Scan(bucket, nil, false, func(k, _ []byte) error {
			seen = append(seen, string(k))
			if bytes.HasSuffix(k, []byte("+")) {
				return tx.Delete(bucket, k)
			}
			if err := tx.Delete(bucket, k); err != nil {
				return err
			}
			return tx.Put(bucket, append(bytes.Clone(k), '+'), nil)
		})
	}))
	var wantSeen []string
	for _, k := range want {
		wantSeen = append(wantSeen, k, k+"+")
	}
	assert.Equal(t, wantSeen, seen)
	checkStaged(t, db, bucket, map[string]string{})
	require.NoError(t, db.Close())
}

// checkStaged checks that bucket of db reads as model.
func checkStaged(t *testing.T, db *DB, bucket string, model map[string]string) {
	t.Helper()
	var keys []string
	for k := range model {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		for _, prefix := range []string{"", "t\x00", "t\x00e1", "t\x00e2\x00k1", "t\x00e9"} {
			var want []string
			for _, k := range keys {
				if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
					want = append(want, k+"="+model[k])
				}
			}
			for _, reverse := range []bool{false, true} {
				var got []string
				require.NoError(t, tx.Scan(bucket, []byte(prefix), reverse, func(k, v []byte) error {
					got = append(got, string(k)+"="+string(v))
					return nil
				}))
				if reverse {
					slices.Reverse(got)
				}
				assert.Equal(t, want, got, "prefix %q reverse %v", prefix, reverse)
			}
			from := prefix + "\x00e2\x00k2"
			var wantFrom, gotFrom []string
			for _, w := range want {
				if w >= from {
					wantFrom = append(wantFrom, w)
				}
			}
			require.NoError(t, tx.(store.Seeker).ScanFrom(bucket, []byte(prefix), []byte(from), func(k, v []byte) error {
				gotFrom = append(gotFrom, string(k)+"="+string(v))
				return nil
			}))
			assert.Equal(t, wantFrom, gotFrom, "prefix %q from %q", prefix, from)
		}
		for i := range 4 {
			for j := range 40 {
				k := fmt.Sprintf("t\x00e%d\x00k%02d", i, j)
				v, err := tx.Get(bucket, []byte(k))
				if want, ok := model[k]; ok {
					require.NoError(t, err, k)
					assert.Equal(t, want, string(v), k)
				} else {
					assert.ErrorIs(t, err, store.ErrNotFound, k)
				}
			}
		}
		return nil
	}))
}
