package store_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/index"
	"github.com/crux-go/crux/store"
)

var docTime = time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)

// ingest writes docs to tenant in one transaction.
func ingest(t *testing.T, db store.Backend, tenant string, docs ...store.Document) store.IngestStats {
	t.Helper()
	var a index.Analyzer
	prepared := make([]store.PreparedDocument, len(docs))
	for i, d := range docs {
		p, err := store.PrepareDocument(d, &a)
		require.NoError(t, err)
		prepared[i] = p
	}
	var st store.IngestStats
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		var err error
		st, err = store.PutDocuments(tx, tenant, prepared, docTime)
		return err
	}))
	return st
}

func docIndex(t *testing.T, db store.Backend, tenant string) []string {
	t.Helper()
	var out []string
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		var err error
		out, err = store.DocIndex(tx, tenant)
		return err
	}))
	return out
}

func searchDocs(t *testing.T, db store.Backend, q store.DocQuery) store.DocResult {
	t.Helper()
	var res store.DocResult
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		var err error
		res, err = store.SearchDocuments(tx, q)
		return err
	}))
	return res
}

func queryTerms(q string) []string {
	qt, _ := index.Query(q)
	out := make([]string, len(qt))
	for i, t := range qt {
		out[i] = t.Term
	}
	return out
}

// randomDocs returns n documents of words from a small vocabulary, so that
// terms repeat across documents, some long enough for several segments.
func randomDocs(r *rand.Rand, n int, prefix string) []store.Document {
	vocab := strings.Fields("alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega storage index " +
		"commit segment query ranking tenant document paragraph database databases the of and")
	docs := make([]store.Document, n)
	for i := range docs {
		var b strings.Builder
		words := 5 + r.IntN(400)
		for w := range words {
			if w > 0 && r.IntN(60) == 0 {
				b.WriteString(".\n\n")
			} else if w > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(vocab[r.IntN(len(vocab))])
		}
		docs[i] = store.Document{ID: fmt.Sprintf("%s%03d", prefix, i), Title: vocab[r.IntN(len(vocab))], Text: b.String()}
	}
	return docs
}

// TestPutDocumentsReplaceAndDelete: replacing and deleting documents leaves
// exactly the index that ingesting only the remaining documents builds.
func TestPutDocumentsReplaceAndDelete(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	docs := randomDocs(r, 300, "d")
	changed := randomDocs(r, 40, "d") // ids d000..d039, new texts

	db := openDB(t)
	st := ingest(t, db, "t", docs[:200]...)
	assert.Equal(t, 200, st.Documents)
	assert.Zero(t, st.Replaced)
	ingest(t, db, "t", docs[200:]...)
	st = ingest(t, db, "t", changed...)
	assert.Equal(t, 40, st.Replaced)
	for _, id := range []string{"d100", "d299", "d005"} {
		var ok bool
		require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
			var err error
			ok, err = store.DeleteDocument(tx, "t", id)
			return err
		}))
		assert.True(t, ok, id)
	}
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		ok, err := store.DeleteDocument(tx, "t", "d100")
		assert.False(t, ok, "deleting twice")
		return err
	}))
	ingest(t, db, "other", docs[:10]...) // another tenant changes nothing of t

	// The same documents, in the order the first store holds them: those
	// never replaced, then the replacements.
	var remaining []store.Document
	for _, d := range docs[40:] {
		if d.ID != "d100" && d.ID != "d299" {
			remaining = append(remaining, d)
		}
	}
	for _, d := range changed {
		if d.ID != "d005" {
			remaining = append(remaining, d)
		}
	}
	fresh := openDB(t)
	ingest(t, fresh, "t", remaining...)
	assert.Equal(t, docIndex(t, fresh, "t"), docIndex(t, db, "t"))
}

// TestPutDocumentsRepeatedID: a batch naming an id twice writes the last.
func TestPutDocumentsRepeatedID(t *testing.T) {
	db := openDB(t)
	st := ingest(t, db, "t", store.Document{ID: "a", Text: "first version"}, store.Document{ID: "a", Text: "second version"})
	assert.Equal(t, 1, st.Documents)
	res := searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: queryTerms("first"), Limit: 10})
	assert.Empty(t, res.Hits)
	res = searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: queryTerms("second"), Limit: 10})
	assert.Len(t, res.Hits, 1)
}

// bm25Reference ranks the segments of docs for terms by the textbook
// formula, computed from scratch.
func bm25Reference(docs []store.Document, terms []string, limit int) []store.DocHit {
	type seg struct {
		tf  map[string]int
		len int
	}
	var segs []seg
	for _, d := range docs {
		p, err := store.PrepareDocument(d, nil)
		if err != nil {
			panic(err)
		}
		for _, s := range p.Segments {
			x := seg{tf: map[string]int{}}
			index.Terms(d.Title+" "+s.Text, func(t string) { x.tf[t]++; x.len++ })
			segs = append(segs, x)
		}
	}
	total := 0
	for _, s := range segs {
		total += s.len
	}
	avg := float64(total) / float64(len(segs))
	var hits []store.DocHit
	for i, s := range segs {
		score := 0.0
		for _, t := range terms {
			if s.tf[t] == 0 {
				continue
			}
			df := 0
			for _, o := range segs {
				if o.tf[t] > 0 {
					df++
				}
			}
			idf := math.Log(1 + (float64(len(segs))-float64(df)+0.5)/(float64(df)+0.5))
			tf := float64(s.tf[t])
			score += idf * tf * (index.K1 + 1) / (tf + index.K1*(1-index.B+index.B*float64(s.len)/avg))
		}
		if score > 0 {
			hits = append(hits, store.DocHit{Seq: uint32(i), Score: score})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].Score > hits[j].Score })
	return hits[:min(limit, len(hits))]
}

// TestSearchDocumentsIsBM25: scores and order agree with the formula
// computed from scratch, and MinScore and All filter as documented.
func TestSearchDocumentsIsBM25(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	docs := randomDocs(r, 120, "d")
	db := openDB(t)
	ingest(t, db, "t", docs...) // one batch: seqs are 0, 1, ... in order
	for _, q := range []string{"alpha", "storage databases", "omega sigma kappa ranking", "nothing"} {
		terms := queryTerms(q)
		want := bm25Reference(docs, terms, 15)
		res := searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: terms, Limit: 15})
		require.Len(t, res.Hits, len(want), q)
		for i := range want {
			assert.InDelta(t, want[i].Score, res.Hits[i].Score, 1e-9, "%s: hit %d", q, i)
		}
		if len(want) > 3 {
			floor := want[2].Score
			cut := searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: terms, Limit: 15, MinScore: floor})
			for _, h := range cut.Hits {
				assert.GreaterOrEqual(t, h.Score, floor)
			}
			assert.Equal(t, res.Candidates, cut.Candidates)
			every := searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: terms, Limit: 100000})
			above := 0
			for _, h := range every.Hits {
				if h.Score >= floor {
					above++
				}
			}
			assert.Equal(t, len(every.Hits), every.Candidates)
			assert.Equal(t, every.Candidates-above, cut.BelowFloor, "%s: below_floor", q)
		}
	}
	// "databases" and "database" are one term.
	assert.Equal(t, queryTerms("databases"), queryTerms("database"))

	all := searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: queryTerms("alpha omega"), All: true, Limit: 1000})
	one := searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: queryTerms("alpha"), Limit: 1000})
	assert.Less(t, all.Candidates, one.Candidates)
	for _, h := range all.Hits {
		var text string
		require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
			s, err := store.GetSegment(tx, "t", h.Seq)
			if err == nil {
				text = s.Text
			}
			return err
		}))
		d := docs[slices.IndexFunc(docs, func(d store.Document) bool { return strings.Contains(d.Text, text) })]
		assert.True(t, strings.Contains(d.Title+" "+text, "alpha") && strings.Contains(d.Title+" "+text, "omega"))
	}
}

// TestSearchDocumentsTenants: a tenant's search sees only its documents.
func TestSearchDocumentsTenants(t *testing.T) {
	db := openDB(t)
	ingest(t, db, "a", store.Document{ID: "x", Text: "shared word apple"})
	ingest(t, db, "b", store.Document{ID: "x", Text: "shared word banana"})
	res := searchDocs(t, db, store.DocQuery{Tenant: "a", Terms: queryTerms("banana"), Limit: 10})
	assert.Empty(t, res.Hits)
	assert.Equal(t, []int{0}, res.DF)
	res = searchDocs(t, db, store.DocQuery{Tenant: "b", Terms: queryTerms("banana"), Limit: 10})
	assert.Len(t, res.Hits, 1)
	var seg *store.Segment
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		var err error
		seg, err = store.DocumentSegment(tx, "a", "x", 0)
		return err
	}))
	assert.Equal(t, "shared word apple", seg.Text)
}

func TestCheckDocument(t *testing.T) {
	for _, d := range []store.Document{
		{ID: ""},
		{ID: strings.Repeat("x", store.MaxDocIDBytes+1)},
		{ID: "a\nb"},
		{ID: "a", Title: "\xff"},
		{ID: "a", Text: "\xfe"},
		{ID: "a", Title: strings.Repeat("t", store.MaxDocTitleBytes+1)},
	} {
		err := store.CheckDocument(&d)
		var de *store.DocumentError
		assert.ErrorAs(t, err, &de, "%q", d.ID)
	}
	assert.NoError(t, store.CheckDocument(&store.Document{ID: "guide/intro.md", Title: "Intro", Text: "Hello."}))
}

// TestSearchDocumentsIsExact: the merged posting lists answer as the
// formula computed from scratch over every segment: the same hits and
// scores, candidates, below_floor and Also scores, for queries of one to
// five terms (common and rare), any limit, with and without a floor or
// All, over posting lists of many blocks written by two ingests.
func TestSearchDocumentsIsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	common := strings.Fields("storage index commit query")
	medium := strings.Fields("north south east west") // in about a tenth of the segments each
	rare := strings.Fields("alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega")
	docs := make([]store.Document, 600)
	for i := range docs {
		var b strings.Builder
		for range 3 + r.IntN(60) {
			w := common[r.IntN(len(common))]
			switch r.IntN(80) {
			case 0, 1, 2, 3, 4, 5, 6, 7, 8, 9:
				w = rare[r.IntN(len(rare))]
			case 10:
				w = medium[r.IntN(len(medium))]
			}
			b.WriteString(w + " ")
		}
		docs[i] = store.Document{ID: fmt.Sprint(i), Text: b.String()}
	}
	db := openDB(t)
	ingest(t, db, "t", docs[:300]...)
	ingest(t, db, "t", docs[300:]...)
	vocab := append(append(append([]string{}, common...), medium...), rare...)
	segs := refSegments(docs)
	for n := range 400 {
		var words []string
		from := vocab
		if n%2 == 1 {
			from = vocab[:len(common)+len(medium)] // terms of close document frequencies
		}
		for range 1 + r.IntN(5) {
			words = append(words, from[r.IntN(len(from))])
		}
		q := store.DocQuery{Tenant: "t", Terms: queryTerms(strings.Join(words, " ")), Limit: 1 + r.IntN(30), All: r.IntN(4) == 0}
		switch r.IntN(3) {
		case 1:
			q.MinScore = r.Float64() * 6
		case 2:
			q.MinScore = 50 // above what any one term adds
		}
		for range r.IntN(5) {
			q.Also = append(q.Also, uint32(r.IntN(620)))
		}
		got := searchDocs(t, db, q)
		want := searchReference(segs, q)
		require.Equal(t, want.DF, got.DF, "query %d: %+v", n, q)
		require.Equal(t, want.Candidates, got.Candidates, "query %d: %+v: candidates", n, q)
		require.Equal(t, want.BelowFloor, got.BelowFloor, "query %d: %+v: below_floor", n, q)
		require.Len(t, got.Hits, len(want.Hits), "query %d: %+v", n, q)
		for i := range want.Hits {
			assert.InDelta(t, want.Hits[i].Score, got.Hits[i].Score, 1e-9, "query %d: hit %d", n, i)
			if i+1 < len(want.Hits) && want.Hits[i].Score-want.Hits[i+1].Score > 1e-9 && (i == 0 || want.Hits[i-1].Score-want.Hits[i].Score > 1e-9) {
				assert.Equal(t, want.Hits[i].Seq, got.Hits[i].Seq, "query %d: hit %d", n, i) // not tied within rounding
			}
		}
		require.Len(t, got.AlsoScores, len(q.Also))
		for i := range q.Also {
			assert.InDelta(t, want.AlsoScores[i], got.AlsoScores[i], 1e-9, "query %d: also %d", n, i)
		}
	}
}

// refSeg is a segment as searchReference sees it: its terms' frequencies
// and its length.
type refSeg struct {
	tf  map[string]int
	len int
}

// refSegments are the segments of docs (ingested in order, one batch or
// several), numbered by seq.
func refSegments(docs []store.Document) []refSeg {
	var segs []refSeg
	for _, d := range docs {
		p, err := store.PrepareDocument(d, nil)
		if err != nil {
			panic(err)
		}
		for _, s := range p.Segments {
			x := refSeg{tf: map[string]int{}}
			index.Terms(d.Title+" "+s.Text, func(t string) { x.tf[t]++; x.len++ })
			segs = append(segs, x)
		}
	}
	return segs
}

// searchReference answers q over segs by the formula, computed from
// scratch for every segment.
func searchReference(segs []refSeg, q store.DocQuery) store.DocResult {
	total := 0
	for _, s := range segs {
		total += s.len
	}
	avg := float64(total) / float64(len(segs))
	res := store.DocResult{DF: make([]int, len(q.Terms)), AlsoScores: make([]float64, len(q.Also))}
	for i, t := range q.Terms {
		for _, s := range segs {
			if s.tf[t] > 0 {
				res.DF[i]++
			}
		}
	}
	scores := make([]float64, len(segs))
	var hits []store.DocHit
	for i, s := range segs {
		held := 0
		for j, t := range q.Terms {
			if s.tf[t] == 0 {
				continue
			}
			held++
			idf := math.Log(1 + (float64(len(segs))-float64(res.DF[j])+0.5)/(float64(res.DF[j])+0.5))
			tf := float64(s.tf[t])
			scores[i] += idf * tf * (index.K1 + 1) / (tf + index.K1*(1-index.B+index.B*float64(s.len)/avg))
		}
		if held == 0 || q.All && held < len(q.Terms) {
			scores[i] = 0
			continue
		}
		res.Candidates++
		if scores[i] < q.MinScore {
			res.BelowFloor++
			continue
		}
		hits = append(hits, store.DocHit{Seq: uint32(i), Score: scores[i]})
	}
	for i, s := range q.Also {
		if int(s) < len(segs) {
			res.AlsoScores[i] = scores[s]
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].Score > hits[j].Score })
	res.Hits = hits[:min(max(q.Limit, 1), len(hits))]
	return res
}

// TestSearchDocumentsWeights: a term's weight scales its score, so a
// segment holding a lighter term ranks below one holding a heavier term
// of the same idf.
func TestSearchDocumentsWeights(t *testing.T) {
	db := openDB(t)
	ingest(t, db, "t",
		store.Document{ID: "when", Text: "when the rain came"},
		store.Document{ID: "paint", Text: "paint the fence white"},
		store.Document{ID: "other", Text: "nothing here at all"})
	terms := queryTerms("when paint")
	plain := searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: terms, Limit: 10})
	require.Len(t, plain.Hits, 2)
	assert.InDelta(t, plain.Hits[0].Score, plain.Hits[1].Score, 1e-9, "same idf, same length")
	for _, ws := range [][]float64{{0.5, 1}, {1, 2}} {
		res := searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: terms, Weights: ws, Limit: 10})
		require.Len(t, res.Hits, 2)
		assert.Equal(t, uint32(1), res.Hits[0].Seq, "paint first with weights %v", ws)
		assert.InDelta(t, ws[0]/ws[1], res.Hits[1].Score/res.Hits[0].Score, 1e-9)
	}
	// A missing weight is 1.
	res := searchDocs(t, db, store.DocQuery{Tenant: "t", Terms: terms, Weights: []float64{0.5}, Limit: 10})
	assert.InDelta(t, plain.Hits[0].Score, res.Hits[0].Score, 1e-9)
}
