package receipts_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
)

func appendBy(t *testing.T, db store.Backend, tenant, kind, actor string) {
	t.Helper()
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		_, err := receipts.Append(tx, signerFromByte(1), tenant, kind, actor, map[string]string{"k": "v"}, testNow)
		return err
	}))
}

func counts(t *testing.T, db store.Backend, tenant string, actors ...string) []uint64 {
	t.Helper()
	var out []uint64
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		for _, a := range actors {
			n, err := receipts.ActorReceipts(tx, tenant, a)
			if err != nil {
				return err
			}
			out = append(out, n)
		}
		return nil
	}))
	return out
}

// Each receipt counts for its actor in its tenant; refusals and their
// summaries count for no one.
func TestActorReceipts(t *testing.T) {
	db := openDB(t)
	for range 3 {
		appendBy(t, db, "t1", "decision", "alice")
	}
	appendBy(t, db, "t1", "forget", "bob")
	appendBy(t, db, "t2", "decision", "alice")
	appendBy(t, db, "t1", receipts.KindRefusal, "alice")
	appendBy(t, db, "t1", receipts.KindRefusal+receipts.SummaryKindSuffix, "alice")
	assert.Equal(t, []uint64{3, 1, 0}, counts(t, db, "t1", "alice", "bob", "carol"))
	assert.Equal(t, []uint64{1, 0}, counts(t, db, "t2", "alice", "bob"))
}

// A store written before the counts existed has none until
// BuildActorCounts counts its receipts, once; receipts appended meanwhile
// are counted by it, not twice.
func TestBuildActorCounts(t *testing.T) {
	db := openDB(t)
	appendBy(t, db, "t1", "decision", "alice")
	appendBy(t, db, "t1", "decision", "bob")
	// Forget the counts, as in a store written by an older crux.
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		var keys [][]byte
		if err := tx.Scan("receipts.actors", nil, false, func(k, _ []byte) error {
			keys = append(keys, append([]byte(nil), k...))
			return nil
		}); err != nil {
			return err
		}
		for _, k := range keys {
			if err := tx.Delete("receipts.actors", k); err != nil {
				return err
			}
		}
		return nil
	}))
	appendBy(t, db, "t1", "decision", "alice") // appended before the build
	assert.Equal(t, []uint64{0, 0}, counts(t, db, "t1", "alice", "bob"))

	build := func() {
		require.NoError(t, db.Update(context.Background(), receipts.BuildActorCounts))
	}
	build()
	assert.Equal(t, []uint64{2, 1}, counts(t, db, "t1", "alice", "bob"))
	build() // a second build changes nothing
	assert.Equal(t, []uint64{2, 1}, counts(t, db, "t1", "alice", "bob"))
	appendBy(t, db, "t1", "decision", "alice")
	assert.Equal(t, []uint64{3, 1}, counts(t, db, "t1", "alice", "bob"))
}

// countingBackend counts the Updates run on it.
type countingBackend struct {
	store.Backend
	updates int
}

func (c *countingBackend) Update(ctx context.Context, fn func(store.Tx) error) error {
	c.updates++
	return c.Backend.Update(ctx, fn)
}

// On a store whose counts are built, BuildActorCountsBackend only reads.
func TestBuildActorCountsBackendReadsFirst(t *testing.T) {
	db := openDB(t)
	appendBy(t, db, "t1", "decision", "alice")
	c := &countingBackend{Backend: db}
	require.NoError(t, receipts.BuildActorCountsBackend(context.Background(), c))
	assert.Equal(t, 0, c.updates, "the counts were complete from the first receipt")
	assert.Equal(t, []uint64{1}, counts(t, db, "t1", "alice"))
}

// Of one UTC day's receipts, at most DailyCredit count towards the
// actor's credit; each new day credits again.
func TestDailyCredit(t *testing.T) {
	db := openDB(t)
	day := testNow.Truncate(24 * time.Hour)
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		for i := range receipts.DailyCredit + 20 {
			if _, err := receipts.Append(tx, signerFromByte(1), "t1", "decision", "alice", map[string]int{"n": i}, day.Add(time.Duration(i)*time.Second)); err != nil {
				return err
			}
		}
		_, err := receipts.Append(tx, signerFromByte(1), "t1", "decision", "alice", map[string]int{"n": -1}, day.Add(25*time.Hour))
		return err
	}))
	var s receipts.Standing
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		var err error
		s, err = receipts.ActorStanding(tx, "t1", "alice")
		return err
	}))
	assert.EqualValues(t, receipts.DailyCredit+21, s.Receipts)
	assert.EqualValues(t, receipts.DailyCredit+1, s.Credit)
}
