package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/postgres"
)

// A parked connection's transaction is rolled back before the next one
// begins on it: each View, taking the connection the View before it
// parked, sees the write committed in between (a View still in the old
// snapshot would read the old value), and so does an Update, which sees
// the latest value to increment it. The connection stays parked as long
// as the test runs, so that every transaction but the first takes it.
func TestParkedRollsBack(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	postgres.SetParkFor(db, time.Hour)
	get := func() string {
		t.Helper()
		var v []byte
		require.NoError(t, db.View(ctx, func(tx store.Tx) error {
			var err error
			v, err = tx.Get("b", []byte("k"))
			v = append([]byte(nil), v...)
			return err
		}))
		return string(v)
	}
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error { return tx.Put("b", []byte("k"), []byte("0")) }))
	for i := range 5 {
		require.Equal(t, fmt.Sprint(2*i), get())
		require.Equal(t, 1, postgres.Parked(db))
		// A write on another connection, then one on the parked one.
		require.NoError(t, db.Update(ctx, func(tx store.Tx) error { return tx.Put("b", []byte("k"), []byte(fmt.Sprint(2*i+1))) }))
		require.Equal(t, fmt.Sprint(2*i+1), get())
		require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
			v, err := tx.Get("b", []byte("k"))
			if err != nil {
				return err
			}
			var n int
			fmt.Sscan(string(v), &n)
			return tx.Put("b", []byte("k"), []byte(fmt.Sprint(n+1)))
		}))
		assert.Equal(t, 0, postgres.Parked(db), "the Update took the parked connection")
	}
}
