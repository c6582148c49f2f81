package storetest_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/examples/memstore"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/store/storetest"
)

// TestFaultyConformance: disarmed, the wrapper keeps the whole contract of
// the backend it wraps.
func TestFaultyConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		return storetest.NewFaulty(db)
	})
}

// work is one Update that reads, scans two keys, writes and deletes:
// begin, get, scan, step, step, put, delete, commit.
func work(ctx context.Context, b store.Backend) error {
	return b.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.Get("b", []byte("a")); err != nil {
			return err
		}
		if err := tx.Scan("b", nil, false, func(k, v []byte) error { return nil }); err != nil {
			return err
		}
		if err := tx.Put("b", []byte("c"), []byte("3")); err != nil {
			return err
		}
		return tx.Delete("b", []byte("a"))
	})
}

// TestFaultyFailsTheNthOperation: armed with n, the n-th operation fails
// with ErrInjected and the transaction commits nothing, whichever
// operation it is.
func TestFaultyFailsTheNthOperation(t *testing.T) {
	ctx := context.Background()
	want := []storetest.Op{storetest.OpBegin, storetest.OpGet, storetest.OpScan, storetest.OpStep,
		storetest.OpStep, storetest.OpPut, storetest.OpDelete, storetest.OpCommit}
	mem := memstore.New()
	require.NoError(t, mem.Update(ctx, func(tx store.Tx) error {
		if err := tx.Put("b", []byte("a"), []byte("1")); err != nil {
			return err
		}
		return tx.Put("b", []byte("b"), []byte("2"))
	}))
	f := storetest.NewFaulty(mem, "b")
	before, err := f.Snapshot(ctx)
	require.NoError(t, err)
	require.Equal(t, storetest.Snapshot{"b": {"a": "1", "b": "2"}}, before)

	for n := 1; n <= len(want); n++ {
		f.Arm(n)
		err := work(ctx, f)
		require.ErrorIs(t, err, storetest.ErrInjected, "operation %d", n)
		op, ok := f.Injected()
		require.True(t, ok)
		assert.Equal(t, want[n-1], op, "operation %d", n)
		after, err := f.Snapshot(ctx)
		require.NoError(t, err)
		assert.Nil(t, before.Diff(after, 10), "a fault at operation %d (%s) left changes", n, op)
	}

	f.Arm(len(want) + 1)
	require.NoError(t, work(ctx, f))
	_, ok := f.Injected()
	assert.False(t, ok)
	assert.Equal(t, len(want), f.Ops())
	after, err := f.Snapshot(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{`b "a": deleted`, `b "c": added`}, before.Diff(after, 10))
	assert.Equal(t, []string{`b "a": deleted`}, before.Diff(after, 1), "the limit caps the lines")
}

// TestFaultyView: a read-only transaction fails at its start, at a get or
// at a scan step, and a disarmed backend fails nothing.
func TestFaultyView(t *testing.T) {
	ctx := context.Background()
	f := storetest.NewFaulty(memstore.New())
	require.NoError(t, f.Update(ctx, func(tx store.Tx) error { return tx.Put("b", []byte("k"), []byte("v")) }))
	read := func() error {
		return f.View(ctx, func(tx store.Tx) error {
			if _, err := tx.Get("b", []byte("k")); err != nil {
				return err
			}
			return tx.Scan("b", nil, false, func(k, v []byte) error { return nil })
		})
	}
	for n, op := range []storetest.Op{storetest.OpBegin, storetest.OpGet, storetest.OpScan, storetest.OpStep} {
		f.Arm(n + 1)
		require.True(t, errors.Is(read(), storetest.ErrInjected), "operation %d", n+1)
		got, _ := f.Injected()
		assert.Equal(t, op, got)
	}
	f.Arm(0)
	require.NoError(t, read())
	assert.Equal(t, 4, f.Ops())
	s, err := f.Snapshot(ctx)
	require.NoError(t, err)
	assert.Equal(t, storetest.Snapshot{"b": {"k": "v"}}, s, "buckets seen through the wrapper are snapshotted")
}
