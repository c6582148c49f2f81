package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/index"
	"github.com/crux-go/crux/store"
)

// TestSearchDocumentsContext: with Context, a segment next to a hit (in
// its document, or in the document written next to it under an alike
// title) rises halfway to the hit's score; a segment of an unrelated
// document does not, nor does anything under a floor, and no hit is
// lowered.
func TestSearchDocumentsContext(t *testing.T) {
	db := openDB(t)
	long := strings.Repeat("the violin was tuned before the show. ", 25) + "\n\n" + strings.Repeat("then came the applause. ", 40)
	ingest(t, db, "t",
		store.Document{ID: "x", Title: "Quarterly report", Text: "revenue grew"},                   // seq 0
		store.Document{ID: "a", Title: "Alice, 8 May 2023", Text: "I went to the concert"},         // seq 1
		store.Document{ID: "b", Title: "Bob, 8 May 2023", Text: "what did you hear there"},         // seq 2: its title is alike
		store.Document{ID: "c", Title: "Unrelated heading words", Text: "nothing to see"},          // seq 3
		store.Document{ID: "d", Title: "Bob, 8 May 2023", Text: "a concert hall, a concert stage"}, // seq 4: not next to a
		store.Document{ID: "e", Title: "Alice, 8 May 2023", Text: "and the band played all night"}, // seq 5: after d, alike
		store.Document{ID: "long", Text: long},                                                     // seqs 6, 7
		store.Document{ID: "after", Text: "violin strings"})                                        // seq 8: no title, not linked
	for _, s := range []uint32{6, 7} {
		require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
			seg, err := store.GetSegment(tx, "t", s)
			if err == nil {
				assert.Equal(t, "long", seg.DocID, "seq %d", s)
			}
			return err
		}))
	}

	terms := queryTerms("concert")
	plain := searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: terms, Limit: 10})
	require.Len(t, plain.Hits, 2) // d, a
	score := map[uint32]float64{}
	for _, h := range plain.Hits {
		score[h.Seq] = h.Score
		assert.Zero(t, h.Context, "no context without Context")
	}
	res := searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: terms, Limit: 10, Context: true})
	got := map[uint32]store.DocHit{}
	for _, h := range res.Hits {
		got[h.Seq] = h
	}
	assert.ElementsMatch(t, []uint32{1, 2, 4, 5}, slices.Collect(func(yield func(uint32) bool) {
		for s := range got {
			if !yield(s) {
				return
			}
		}
	}), "the hits and their alike neighbours; not x or c")
	assert.InDelta(t, store.ContextShare*score[1], got[2].Context, 1e-12, "b takes half of a's score")
	assert.Zero(t, got[2].Score)
	assert.InDelta(t, store.ContextShare*score[4], got[5].Context, 1e-12)
	assert.Zero(t, got[1].Context+got[4].Context, "a and d, the hits, have no better neighbour")
	assert.Equal(t, score[1], got[1].Score)
	for i := 1; i < len(res.Hits); i++ {
		a, b := res.Hits[i-1], res.Hits[i]
		assert.GreaterOrEqual(t, a.Score+a.Context, b.Score+b.Context, "ranked by Score + Context")
	}
	assert.Equal(t, plain.Hits[0].Seq, res.Hits[0].Seq, "the best hit stays first")

	// A floor leaves the neighbours that score under it out.
	floored := searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: terms, Limit: 10, Context: true, MinScore: 1e-9})
	for _, h := range floored.Hits {
		assert.Contains(t, []uint32{1, 4}, h.Seq)
	}
	// The limit applies after the lift.
	one := searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: terms, Limit: 1, Context: true})
	require.Len(t, one.Hits, 1)
	assert.Equal(t, plain.Hits[0].Seq, one.Hits[0].Seq)

	// In a document: the segment after the one that holds the word.
	res = searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: queryTerms("tuned"), Limit: 10, Context: true})
	require.Len(t, res.Hits, 2)
	assert.Equal(t, uint32(6), res.Hits[0].Seq)
	assert.Equal(t, uint32(7), res.Hits[1].Seq)
	assert.InDelta(t, store.ContextShare*res.Hits[0].Score, res.Hits[1].Context, 1e-12)
	// A hit rises halfway to a better neighbour's score.
	res = searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: queryTerms("violin"), Limit: 10, Context: true})
	byseq := map[uint32]store.DocHit{}
	for _, h := range res.Hits {
		byseq[h.Seq] = h
	}
	require.Contains(t, byseq, uint32(8))
	assert.Zero(t, byseq[8].Context, "a document without a title links to no other")
	require.Contains(t, byseq, uint32(7))
	assert.InDelta(t, store.ContextShare*byseq[6].Score, byseq[7].Context, 1e-12)
}

// TestSearchDocumentsContextProbed: a neighbour holding only the query's
// commonest term, whose postings are probed rather than scored, still
// shows its BM25 score.
func TestSearchDocumentsContextProbed(t *testing.T) {
	db := openDB(t)
	docs := []store.Document{
		{ID: "a", Title: "Alice, 8 May 2023", Text: "the rare orchid, a rare sight"},
		{ID: "b", Title: "Bob, 8 May 2023", Text: "common ground"},
		{ID: "c", Title: "Carol, 9 June 2024", Text: "rare " + strings.Repeat("stamps and letters ", 20)},
	}
	for i := range 40 { // common is the longest list: a and c score over what it adds, and it is probed
		docs = append(docs, store.Document{ID: fmt.Sprintf("z%02d", i), Title: fmt.Sprintf("note %d", i), Text: "common words only"})
	}
	ingest(t, db, "t", docs...)
	terms := queryTerms("rare common")
	full := searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: terms, Limit: 100})
	var b float64
	for _, h := range full.Hits {
		if h.Seq == 1 {
			b = h.Score
		}
	}
	require.Positive(t, b)
	res := searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: terms, Limit: 2, Context: true})
	require.Len(t, res.Hits, 2)
	assert.Equal(t, uint32(0), res.Hits[0].Seq)
	assert.Equal(t, uint32(1), res.Hits[1].Seq)
	assert.InDelta(t, b, res.Hits[1].Score, 1e-12)
	assert.InDelta(t, store.ContextShare*(res.Hits[0].Score-b), res.Hits[1].Context, 1e-12)
}

// TestSearchDocumentsContextIsExact: the hits of a query with Context are
// those that lifting every segment by its neighbours, from the full BM25
// scores, gives, whichever way the postings were read (the longest list
// probed or scored).
func TestSearchDocumentsContextIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	docs := randomDocs(r, 150, "d")
	db := openDB(t)
	ingest(t, db, "t", docs...)
	stats := func() store.DocStats {
		var s store.DocStats
		require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
			var err error
			s, err = store.ReadDocStats(tx, "t")
			return err
		}))
		return s
	}()
	segs := make([]*store.Segment, stats.Next)
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		for s := range segs {
			seg, err := store.GetSegment(tx, "t", uint32(s))
			if err != nil {
				return err
			}
			segs[s] = seg
		}
		return nil
	}))
	alike := func(a, b *store.Segment) bool {
		if a.DocID == b.DocID {
			return true
		}
		wa, wb := index.LowerWords(a.Title), index.LowerWords(b.Title)
		both := 0
		for _, w := range wa {
			if slices.Contains(wb, w) {
				both++
			}
		}
		return len(wa) > 0 && len(wb) > 0 && float64(both) >= store.ContextTitleOverlap*float64(len(wa)+len(wb)-both)
	}
	for _, q := range []string{"alpha", "storage databases", "omega sigma kappa ranking", "the alpha of index"} {
		terms := queryTerms(q)
		full := searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: terms, Limit: 1 << 20})
		score := make([]float64, stats.Next)
		for _, h := range full.Hits {
			score[h.Seq] = h.Score
		}
		var want []store.DocHit
		for s := range score {
			best := score[s]
			if s > 0 && alike(segs[s-1], segs[s]) {
				best = max(best, score[s-1])
			}
			if s+1 < len(score) && alike(segs[s], segs[s+1]) {
				best = max(best, score[s+1])
			}
			h := store.DocHit{Seq: uint32(s), Score: score[s], Context: store.ContextShare * (best - score[s])}
			if h.Score+h.Context > 0 {
				want = append(want, h)
			}
		}
		slices.SortStableFunc(want, func(a, b store.DocHit) int {
			ra, rb := a.Score+a.Context, b.Score+b.Context
			switch {
			case ra > rb:
				return -1
			case ra < rb:
				return 1
			case a.Score > b.Score:
				return -1
			case a.Score < b.Score:
				return 1
			}
			return 0
		})
		for _, limit := range []int{1, 3, 10} {
			res := searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: terms, Limit: limit, Context: true})
			require.Len(t, res.Hits, min(limit, len(want)), "%s, limit %d", q, limit)
			for i, h := range res.Hits {
				assert.InDelta(t, want[i].Score+want[i].Context, h.Score+h.Context, 1e-9, "%s, limit %d: hit %d", q, limit, i)
				assert.InDelta(t, score[h.Seq], h.Score, 1e-9, "%s: its own score", q)
			}
		}
	}
}
