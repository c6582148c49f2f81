package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// TestUpgradeFormat9 opens a store written by the code of format 9, whose
// keyword postings and fresh entries carry no counts: keyword queries on
// it, before the upgrade, read the facts for them and rank as they do
// after; the upgrade rebuilds the keyword index with its counts (see
// upgradedWords), moves the fresh entries to it and to the confidence
// index, and rewrites nothing else of the buckets compared; facts and
// queries read as before, and new versions of its chains retire the
// format-9 facts they supersede (see upgradeAndRetire).
func TestUpgradeFormat9(t *testing.T) {
	db, err := bolt.Open(openFixtureOf(t, "format9"), nil)
	require.NoError(t, err)
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		require.NotEmpty(t, dump(t, tx, "facts.fresh"), "the fixture has fresh entries")
		return nil
	}))
	require.NoError(t, db.Close())
	upgradeAndRetire(t, "format9", 9)
}
