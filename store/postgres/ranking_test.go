package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// The same facts in PostgreSQL and in bbolt rank the same: every keyword
// query, with and without an entity filter, returns the same facts in the
// same order with the same scores. The words are drawn unevenly from a
// vocabulary whose words start one another (a query's term also matches
// the longer words), over 2,000 facts written in several transactions, so
// that words span several blocks of the keyword index and some postings
// are still fresh.
func TestRankingsMatchBolt(t *testing.T) {
	ctx := context.Background()
	pg := openTest(t)
	bb, err := bolt.Open(filepath.Join(t.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { bb.Close() })

	rng := rand.New(rand.NewPCG(7, 30))
	var vocab []string
	for i := range 120 {
		w := fmt.Sprintf("w%d", i)
		vocab = append(vocab, w, w+"x", w+"xyz")
	}
	word := func() string { return vocab[min(len(vocab)-1, int(rng.ExpFloat64()*40))] }
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	var facts []store.NewFact
	for i := range 2000 {
		words := make([]string, 3+rng.IntN(20))
		for j := range words {
			words[j] = word()
		}
		facts = append(facts, store.NewFact{Scope: store.Scope{Tenant: "t"}, ID: store.NewFactID(),
			Entity: fmt.Sprintf("e%d", rng.IntN(40)), Key: fmt.Sprintf("k%d", i), Value: strings.Join(words, " "),
			Confidence: float64(1+rng.IntN(10)) / 10, Now: now.Add(time.Duration(i-2000) * time.Minute)})
	}
	for _, db := range []store.Backend{pg, bb} {
		for start := 0; start < len(facts); start += 250 {
			require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
				for _, n := range facts[start:min(len(facts), start+250)] {
					if _, _, err := store.PutFact(tx, n); err != nil {
						return err
					}
				}
				return nil
			}))
		}
	}
	search := func(db store.Backend, q store.FactQuery) []string {
		t.Helper()
		var res store.FactResult
		require.NoError(t, db.View(ctx, func(tx store.Tx) error {
			var err error
			res, err = store.SearchFacts(tx, q)
			return err
		}))
		var out []string
		for _, f := range res.Facts {
			out = append(out, fmt.Sprintf("%s %.12g", f.ID, f.Score))
		}
		return out
	}
	for i := range 40 {
		terms := make([]string, 1+rng.IntN(4))
		for j := range terms {
			terms[j] = word()
		}
		q := store.FactQuery{Scope: store.Scope{Tenant: "t"}, Terms: store.QueryWords(strings.Join(terms, " ")),
			Limit: []int{10, 100}[i%2], Now: now, Policy: store.DefaultDecayPolicy}
		if i%5 == 4 {
			q.Entity = fmt.Sprintf("e%d", rng.IntN(40))
		}
		want := search(bb, q)
		require.NotEmpty(t, want, "%v", q.Terms)
		assert.Equal(t, want, search(pg, q), "%v entity %q", q.Terms, q.Entity)
	}
}
