package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// TestPostingBlockKeys adds postings to a few words, mostly in id order
// (as new facts come) and some out of it, and removes some, checking after
// each round that the postings read back are those written and that the
// blocks are keyed as postings.go says: every block of a word but the tail
// under its last id, the tail block (the greatest ids) under the word's
// key ending in 0xff, blocks of at most 48 postings with disjoint ranges in
// key order, and the blocks before the tail full when ids came in order.
func TestPostingBlockKeys(t *testing.T) {
	ctx := context.Background()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(t, err)
	defer db.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	rank := make([]byte, 16)
	model := map[string]map[string]bool{} // word → ids
	words := []string{"rare", "common", "often"}
	ids := make([]string, 0, 400)
	for i := range 400 {
		ids = append(ids, fmt.Sprintf("f_%032x", 1000+i))
	}
	check := func(inOrder bool) {
		t.Helper()
		require.NoError(t, db.View(ctx, func(tx store.Tx) error {
			got := map[string]map[string]bool{}
			blocks := map[string][][]string{} // word → its blocks' ids, in key order
			err := tx.Scan("facts.words", []byte("default\x00"), false, func(k, v []byte) error {
				parts := strings.SplitN(string(k), "\x00", 3)
				require.Len(t, parts, 3, "%q", k)
				bids, err := store.BlockIDs(v)
				require.NoError(t, err, "%q", k)
				require.NotEmpty(t, bids)
				assert.LessOrEqual(t, len(bids), 48, "%q", k)
				assert.True(t, slices.IsSorted(bids), "%q", k)
				w := parts[1]
				if n := len(blocks[w]); n > 0 {
					prev := blocks[w][n-1]
					assert.Less(t, prev[len(prev)-1], bids[0], "the blocks of %s overlap", w)
				}
				if parts[2] != "\xff" {
					assert.Equal(t, bids[len(bids)-1], parts[2], "a block is keyed by its last id")
				}
				blocks[w] = append(blocks[w], bids)
				if got[w] == nil {
					got[w] = map[string]bool{}
				}
				for _, id := range bids {
					got[w][id] = true
				}
				return nil
			})
			require.NoError(t, err)
			for w, ids := range model {
				if len(ids) == 0 {
					delete(model, w)
				}
			}
			assert.Equal(t, model, got)
			tails := 0
			require.NoError(t, tx.Scan("facts.words", []byte("default\x00"), false, func(k, _ []byte) error {
				if strings.HasSuffix(string(k), "\x00\xff") {
					tails++
				}
				return nil
			}))
			assert.Equal(t, len(got), tails, "each word has one tail block")
			if inOrder {
				for w, bs := range blocks {
					for _, b := range bs[:len(bs)-1] {
						assert.Len(t, b, 48, "a block before the tail of %s", w)
					}
				}
			}
			return nil
		}))
	}
	add := func(w, id string) {
		require.NoError(t, db.Update(ctx, func(tx store.Tx) error { return store.AddPosting(tx, "default", w, id, rank) }))
		if model[w] == nil {
			model[w] = map[string]bool{}
		}
		model[w][id] = true
	}
	// New facts, in id order: "common" on every one, "often" on one in
	// three, "rare" on the first only.
	for i, id := range ids[:300] {
		if i%2 == 1 {
			continue // room for later ids out of order
		}
		add("common", id)
		if i%3 == 0 {
			add("often", id)
		}
		if i == 0 {
			add("rare", id)
		}
	}
	check(true)
	// Older ids (a sync from a peer, say), into blocks before the tail.
	for i := 1; i < 300; i += 2 {
		add("common", ids[i])
	}
	add("rare", ids[350])
	check(false)
	// Removals, emptying the tail of "rare" and of "often", and new ids
	// after that.
	for _, w := range words {
		for id := range model[w] {
			if rng.IntN(3) == 0 || w != "common" {
				require.NoError(t, db.Update(ctx, func(tx store.Tx) error { return store.RemovePosting(tx, "default", w, id) }))
				delete(model[w], id)
			}
		}
	}
	check(false)
	for _, id := range ids[300:] {
		for _, w := range words {
			add(w, id)
		}
	}
	check(false)
}

// BenchmarkAddPostings adds the postings of new facts (time-ordered ids,
// six words each, drawn from 2,000 words of which a few are common) to
// the keyword index, as facts.fresh moves them there, one posting at a
// time in one transaction.
func BenchmarkAddPostings(b *testing.B) {
	ctx := context.Background()
	db, err := bolt.Open(filepath.Join(b.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(b, err)
	defer db.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	zipf := rand.NewZipf(rng, 1.1, 1, 1999)
	rank := make([]byte, 16)
	i := 0
	require.NoError(b, db.Update(ctx, func(tx store.Tx) error {
		for b.Loop() {
			id := fmt.Sprintf("f_%012x%020x", 1_700_000_000_000+i/24, i/6) // a fact of six words, four a millisecond
			rank[15] = byte(i)
			if err := store.AddPosting(tx, "default", fmt.Sprintf("w%d", zipf.Uint64()), id, rank); err != nil {
				return err
			}
			i++
		}
		return nil
	}))
}
