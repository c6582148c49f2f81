package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

// testChangeLog checks sync's change log through the store's functions,
// whichever keeps it: the store's own buckets (the fallback) or the
// backend ([store.ChangeLogger]). Both must give the answers written here:
// every shared client version once, in the order written, nothing of a
// failed Update, of a private fact or of a reserved entity; seqs that
// increase; a head that is the last seq, a count that is the number of
// entries; and the same suffix from every cursor.
func testChangeLog(t *testing.T, b store.Backend) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	want := map[string][]string{}
	put := func(tx store.Tx, i int, tenant, entity, key string, private bool) (*store.Fact, error) {
		f, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: tenant, Agent: "a"}, Entity: entity,
			Key: key, Value: fmt.Sprintf("value %d", i), Confidence: 1, Private: private,
			Now: now.Add(time.Duration(i) * time.Second)})
		return f, err
	}
	for i := range 60 {
		tenant := "t"
		if i%4 == 0 {
			tenant = "u"
		}
		require.NoError(t, b.Update(ctx, func(tx store.Tx) error {
			f, err := put(tx, i, tenant, fmt.Sprintf("project:e%d", i%7), "k", false) // chains of several versions
			if err == nil {
				want[tenant] = append(want[tenant][:len(want[tenant]):len(want[tenant])], f.ID)
			}
			return err
		}))
	}
	require.NoError(t, b.Update(ctx, func(tx store.Tx) error {
		var ids []string
		for i := range 10 {
			f, err := put(tx, 100+i, "t", "project:batch", fmt.Sprintf("k%d", i), false)
			if err != nil {
				return err
			}
			ids = append(ids, f.ID)
		}
		if _, err := put(tx, 200, "t", "project:private", "k", true); err != nil {
			return err
		}
		if _, err := put(tx, 201, "t", store.ReservedPrefix+"test", "k", false); err != nil && !errors.Is(err, store.ErrInvalidFact) {
			return err
		}
		want["t"] = append(want["t"], ids...)
		return nil
	}))
	err := b.Update(ctx, func(tx store.Tx) error {
		if _, err := put(tx, 300, "t", "project:failed", "k", false); err != nil {
			return err
		}
		return errBoom
	})
	require.ErrorIs(t, err, errBoom)

	for tenant, ids := range want {
		seqs := stableLog(t, b, tenant, len(ids))
		var got []string
		var head, count uint64
		require.NoError(t, b.View(ctx, func(tx store.Tx) error {
			facts, next, more, err := store.SyncChanges(tx, tenant, 0, "", 100_000, 1<<30, 100_000)
			require.NoError(t, err)
			assert.False(t, more)
			for _, f := range facts {
				got = append(got, f.ID)
			}
			var pending []string
			last, more, err := store.SyncPending(tx, tenant, 0, 100_000, func(_ uint64, f *store.Fact, _ bool) bool {
				pending = append(pending, f.ID)
				return true
			})
			require.NoError(t, err)
			assert.False(t, more)
			assert.Equal(t, got, pending, "SyncPending walks what SyncChanges returns")
			assert.Equal(t, next, last, "SyncChanges and SyncPending end at the same seq")
			if head, err = store.SyncHead(tx, tenant); err != nil {
				return err
			}
			assert.Equal(t, head, next, "the walk ends at the head")
			count, err = store.SyncCount(tx, tenant)
			return err
		}))
		assert.Equal(t, ids, got, "tenant %s: the versions in the order written", tenant)
		assert.EqualValues(t, len(ids), count, "tenant %s: SyncCount", tenant)
		for i := 1; i < len(seqs); i++ {
			assert.Less(t, seqs[i-1], seqs[i], "tenant %s: seqs increase", tenant)
		}
		for _, i := range []int{0, 1, len(ids) / 2, len(ids) - 1} {
			require.NoError(t, b.View(ctx, func(tx store.Tx) error {
				facts, _, _, err := store.SyncChanges(tx, tenant, seqs[i], "", 100_000, 1<<30, 100_000)
				require.NoError(t, err)
				var rest []string
				for _, f := range facts {
					rest = append(rest, f.ID)
				}
				assert.Equal(t, ids[i+1:], append([]string{}, rest...), "tenant %s after entry %d", tenant, i)
				return nil
			}))
		}
	}
	require.NoError(t, b.View(ctx, func(tx store.Tx) error {
		count, err := store.SyncCount(tx, "nobody")
		assert.Zero(t, count)
		head, err2 := store.SyncHead(tx, "nobody")
		assert.Zero(t, head)
		return errors.Join(err, err2)
	}))
}

// stableLog waits until tenant's change log reads n entries from its
// start (a backend may show a committed entry only once older concurrent
// transactions, of other clients of its server, have ended: see
// store.ChangeLogger), and returns their seqs. It fails after 30 s.
func stableLog(t *testing.T, b store.Backend, tenant string, n int) []uint64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var seqs []uint64
		require.NoError(t, b.View(context.Background(), func(tx store.Tx) error {
			_, _, err := store.SyncPending(tx, tenant, 0, 100_000, func(seq uint64, _ *store.Fact, _ bool) bool {
				seqs = append(seqs, seq)
				return true
			})
			return err
		}))
		if len(seqs) >= n || time.Now().After(deadline) {
			require.Len(t, seqs, n, "entries of tenant %s's change log", tenant)
			return seqs
		}
		time.Sleep(10 * time.Millisecond)
	}
}
