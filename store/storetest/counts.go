package storetest

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

// testSumCounts checks a backend's [store.CountSummer] against the scan it
// stands for: over the first limit keys of a prefix, the sum of the values
// that are 8-byte big-endian counts, each capped, and the number of keys.
// Values of other lengths, counts at and above 2^63 (negative as a signed
// integer), counts above the cap, keys outside the prefix and a limit
// below, at and above the number of keys are all met. A backend without
// the interface has nothing to check.
func testSumCounts(t *testing.T, b store.Backend) {
	ctx := context.Background()
	count := func(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }
	values := [][]byte{count(3), count(math.MaxUint64), []byte("not a count"), count(1 << 63), count(7),
		count(math.MaxInt32 + 5), {}, count(0), count(1<<63 - 1), count(40)}
	require.NoError(t, b.Update(ctx, func(tx store.Tx) error {
		for i, v := range values {
			if err := tx.Put("counts", fmt.Appendf(nil, "p/%02d", i), v); err != nil {
				return err
			}
		}
		if err := tx.Put("counts", []byte("o/1"), count(1000)); err != nil {
			return err
		}
		return tx.Put("counts", []byte("q/1"), count(2000))
	}))
	require.NoError(t, b.View(ctx, func(tx store.Tx) error {
		cs, ok := tx.(store.CountSummer)
		if !ok {
			t.Skip("the backend has no CountSummer")
		}
		for _, prefix := range []string{"p/", "", "p/0", "none/"} {
			for _, limit := range []int{0, 1, 3, 5, len(values), 100} {
				for _, most := range []uint64{10, math.MaxInt32, math.MaxInt64, math.MaxUint64} {
					var want uint64
					wantKeys := 0
					if limit > 0 {
						require.NoError(t, tx.Scan("counts", []byte(prefix), false, func(_, v []byte) error {
							if len(v) == 8 {
								want += min(binary.BigEndian.Uint64(v), most)
							}
							if wantKeys++; wantKeys >= limit {
								return store.ErrStop
							}
							return nil
						}))
					}
					if most > math.MaxInt32 && prefix != "none/" && limit > 1 {
						continue // sums past 2^63 overflow on a server: the store caps each count at MaxInt32
					}
					cs.PrefetchSumCounts("counts", []byte(prefix), limit, most)
					got, keys, err := cs.SumCounts("counts", []byte(prefix), limit, most)
					require.NoError(t, err)
					assert.Equal(t, want, got, "sum over prefix %q, limit %d, cap %d", prefix, limit, most)
					assert.Equal(t, wantKeys, keys, "keys of prefix %q, limit %d", prefix, limit)
				}
			}
		}
		return nil
	}))
}
