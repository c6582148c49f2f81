package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

// A word in more facts than a keyword query decodes the postings of
// (8,192) still finds the newest of them, the rare words beside it, and
// the exact word among thousands of longer ones it starts.
func TestSearchFactsCommonWords(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	const n = 9000
	at := func(i int) time.Time { return now.Add(time.Duration(i-n) * time.Second) }
	var ids []string // by i
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		for i := range n {
			value := fmt.Sprintf("note %d about topic7%04d", i, i)
			switch {
			case i == 0:
				value = "note about the zebra crossing"
			case i%1000 == 1:
				value = fmt.Sprintf("note %d about topic7", i)
			}
			f, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "t"},
				Entity: "e", Key: fmt.Sprint("k", i), Value: value, Confidence: 0.5, Now: at(i)})
			if err != nil {
				return err
			}
			ids = append(ids, f.ID)
		}
		return nil
	}))
	search := func(query string, limit int) []string {
		t.Helper()
		var res store.FactResult
		require.NoError(t, db.View(ctx, func(tx store.Tx) error {
			var err error
			res, err = store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: "t"},
				Terms: store.QueryWords(query), Limit: limit, Now: now, Policy: store.DefaultDecayPolicy})
			return err
		}))
		var out []string
		for _, f := range res.Facts {
			out = append(out, f.ID)
		}
		return out
	}

	// Every fact says note: the newest first, at equal confidence.
	assert.Equal(t, []string{ids[n-1], ids[n-2], ids[n-3]}, search("note", 3))
	// The oldest fact, past the newest postings of note, by its rare word.
	assert.Equal(t, ids[0], search("note zebra", 1)[0])
	// The nine facts that say topic7 exactly, old ones too (the shorter
	// first), before the 8,991 that say a longer word starting with it.
	var exact []string
	for i := 8001; i > 0; i -= 1000 {
		exact = append(exact, ids[i])
	}
	got := search("topic7", 12)
	require.Len(t, got, 12)
	assert.ElementsMatch(t, exact, got[:9])

	// Rerank reads fewer candidates, never fewer than the limit: the
	// best by their postings, which for topic7 are the exact words.
	var res store.FactResult
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		var err error
		res, err = store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: "t"},
			Terms: []string{"topic7"}, Limit: 5, Rerank: 2, Now: now, Policy: store.DefaultDecayPolicy})
		return err
	}))
	require.Len(t, res.Facts, 5)
	for _, f := range res.Facts {
		assert.Contains(t, exact, f.ID)
	}
}
