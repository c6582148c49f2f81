package store

import (
	"encoding/binary"
	"sync"
	"time"

	"github.com/crux-go/crux/index"
)

// DocQuery ranks the segments of a tenant's documents with BM25.
type DocQuery struct {
	Tenant string
	Terms  []string // distinct index terms (index.Query)
	// Weights, when not nil, scales the score of each term of Terms
	// (index.QueryWeights); a missing or non-positive weight is 1.
	Weights []float64
	// All keeps only the segments holding every term.
	All bool
	// Limit is the most hits returned (at least 1).
	Limit int
	// MinScore drops the hits scoring below it; they are counted in
	// BelowFloor.
	MinScore float64
	// Also names segments whose scores to report in AlsoScores, ranked
	// or not.
	Also []uint32
	// Context lifts segments towards the scores of their better
	// neighbours (see ContextShare) before the best Limit are kept, and
	// ranks hits by Score + Context.
	Context bool
}

// DocHit is one ranked segment.
type DocHit struct {
	Seq   uint32
	Score float64 // BM25 of the query
	// Context is what the segment took of a better neighbour's score
	// (with DocQuery.Context; 0 without).
	Context float64
}

// DocResult is the outcome of [SearchDocuments].
type DocResult struct {
	Hits       []DocHit  // best first (by Score + Context with DocQuery.Context, then Score); ties by seq
	DF         []int     // per query term, the segments holding it
	Candidates int       // segments holding a query term (every term, with All)
	BelowFloor int       // candidates that scored under MinScore
	AlsoScores []float64 // the scores of q.Also, 0 for a segment holding no term
	Stats      DocStats
}

// accumulator sums the scores of the segments a query touches. Its arrays
// are indexed by seq and reused across queries (accumulators pool).
type accumulator struct {
	score   []float64
	count   []uint8
	touched []uint32
	marked  []uint64 // a bit per seq: the touched segments and those to probe besides
}

var accumulators = sync.Pool{New: func() any { return new(accumulator) }}

// maxDenseSeqs bounds the seq range whose scores an accumulator keeps in
// arrays; a tenant with more seqs is ranked with a map.
const maxDenseSeqs = 1 << 22

// PrefetchDocSearch announces the reads of a [SearchDocuments] of terms in
// tenant (see [Prefetcher]), so that a caller that reads other things
// first (the facts of a graph lane) sends them together. It changes no
// result.
func PrefetchDocSearch(tx Tx, tenant string, terms []string) {
	if _, ok := tx.(Prefetcher); !ok {
		return
	}
	prefetch(tx, bucketDocStats, [][]byte{[]byte(tenant)})
	for _, t := range terms {
		prefetchScan(tx, bucketDocTerms, termPrefix(tenant, t), false)
	}
}

// PrefetchSegments announces the reads of the segments seqs of tenant
// (see [Prefetcher]): [GetSegment] of each then costs no round trip of its
// own. It changes no result.
func PrefetchSegments(tx Tx, tenant string, seqs []uint32) {
	if _, ok := tx.(Prefetcher); !ok || len(seqs) == 0 {
		return
	}
	keys := make([][]byte, len(seqs))
	for i, seq := range seqs {
		keys[i] = segKey(tenant, seq)
	}
	prefetch(tx, bucketDocSegs, keys)
}

// SearchDocuments ranks the segments of q.Tenant by the BM25 of q.Terms.
// It reads the posting blocks of the terms and the tenant's statistics,
// nothing else: the work grows with the postings of the query's terms.
func SearchDocuments(tx Tx, q DocQuery) (DocResult, error) {
	var res DocResult
	PrefetchDocSearch(tx, q.Tenant, q.Terms)
	stats, err := ReadDocStats(tx, q.Tenant)
	if err != nil || stats.Segments == 0 || len(q.Terms) == 0 {
		res.Stats, res.DF, res.AlsoScores = stats, make([]int, len(q.Terms)), make([]float64, len(q.Also))
		return res, err
	}
	res.Stats = stats
	blocks := make([][][]byte, len(q.Terms))
	res.DF = make([]int, len(q.Terms))
	for i, t := range q.Terms {
		err := tx.Scan(bucketDocTerms, termPrefix(q.Tenant, t), false, func(k, v []byte) error {
			n, err := docBlockLen(v)
			if err != nil {
				return nil // crux doctor reports it
			}
			res.DF[i] += n
			blocks[i] = append(blocks[i], v)
			return nil
		})
		if err != nil {
			return res, err
		}
	}
	avg := stats.AvgLen()
	if stats.Next <= maxDenseSeqs {
		acc := accumulators.Get().(*accumulator)
		defer accumulators.Put(acc)
		if len(acc.score) < int(stats.Next) {
			acc.score = make([]float64, stats.Next)
			acc.count = make([]uint8, stats.Next)
			acc.marked = make([]uint64, (stats.Next+63)/64)
		}
		defer acc.reset(q.All)
		// The term with the longest posting list is added last. When no
		// segment holding that term alone can rank (what one term adds is
		// under idf·(k1+1), and the limit's best of the other terms'
		// scores reach that already, or the floor is above it, or every
		// term is required), its postings are probed: only the segments
		// the other terms (or q.Also) touched take its score, and the
		// rest are counted, not scored. The answer is the same either way.
		long := -1
		if len(q.Terms) >= 2 {
			long = 0
			for i, df := range res.DF {
				if df > res.DF[long] {
					long = i
				}
			}
		}
		ws := make([]termWeight, len(q.Terms))
		for i := range q.Terms {
			ws[i] = newTermWeight(q.weight(i)*index.IDF(stats.Segments, res.DF[i]), avg)
			if i == long {
				continue
			}
			for _, v := range blocks[i] {
				acc.addBlock(v, stats.Next, ws[i], q.All, false)
			}
		}
		unscored := 0 // postings of the long list probed past, with no score
		var probe bool
		if long >= 0 {
			switch {
			case q.All:
				probe = true
			case q.MinScore > 0:
				probe = ws[long].c < q.MinScore
			default:
				probe = acc.atLeast(max(q.Limit, 1), ws[long].c)
			}
			if probe {
				acc.mark(q.Also, stats.Next)
				found := 0
				for _, v := range blocks[long] {
					found += acc.addBlock(v, stats.Next, ws[long], q.All, true)
				}
				acc.unmark(q.Also, stats.Next)
				unscored = res.DF[long] - found
			} else {
				for _, v := range blocks[long] {
					acc.addBlock(v, stats.Next, ws[long], q.All, false)
				}
			}
		}
		var top topHits
		top.init(q)
		for _, s := range acc.touched {
			if score := acc.score[s]; score > 0 && (!q.All || int(acc.count[s]) >= len(q.Terms)) {
				top.offer(s, score)
			}
		}
		if !q.All { // with every term required, a segment of one term is no candidate
			top.candidates += unscored
			if q.MinScore > 0 {
				top.below += unscored // each scores under idf·(k1+1), under the floor
			}
		}
		res.finish(&top)
		res.AlsoScores = make([]float64, len(q.Also))
		for i, s := range q.Also {
			if s < stats.Next && (!q.All || int(acc.count[s]) >= len(q.Terms)) {
				res.AlsoScores[i] = acc.score[s]
			}
		}
		if !q.Context {
			return res, nil
		}
		nb := contextNeighbours(res.Hits, stats.Next)
		if probe {
			// The long list scored only the segments the other terms
			// touched; the neighbours that only it may hold take their
			// scores now.
			var fresh []uint32
			for _, s := range nb {
				if acc.score[s] == 0 {
					fresh = append(fresh, s)
				}
			}
			if len(fresh) > 0 {
				for _, s := range acc.touched { // only the fresh are to take a score
					acc.marked[s/64] = 0
				}
				acc.mark(fresh, stats.Next)
				for _, v := range blocks[long] {
					acc.addBlock(v, stats.Next, ws[long], q.All, true)
				}
				acc.unmark(fresh, stats.Next)
			}
		}
		scores := make([]float64, len(nb))
		for i, s := range nb {
			if !q.All || int(acc.count[s]) >= len(q.Terms) {
				scores[i] = acc.score[s]
			}
		}
		res.Hits, err = liftContext(tx, q.Tenant, res.Hits, nb, scores, max(q.Limit, 1), q.MinScore)
		return res, err
	}
	type sc struct {
		score float64
		count int
	}
	m := make(map[uint32]*sc)
	for i := range q.Terms {
		idf := q.weight(i) * index.IDF(stats.Segments, res.DF[i])
		for _, v := range blocks[i] {
			ps, err := decodeDocBlock(nil, v)
			if err != nil {
				continue
			}
			for _, p := range ps {
				e := m[p.seq]
				if e == nil {
					e = new(sc)
					m[p.seq] = e
				}
				e.count++
				e.score += index.BM25(idf, int(p.tf), int(p.dl), avg)
			}
		}
	}
	var top topHits
	top.init(q)
	for s, e := range m {
		if e.score > 0 && (!q.All || e.count >= len(q.Terms)) {
			top.offer(s, e.score)
		}
	}
	res.finish(&top)
	res.AlsoScores = make([]float64, len(q.Also))
	for i, s := range q.Also {
		if e := m[s]; e != nil && (!q.All || e.count >= len(q.Terms)) {
			res.AlsoScores[i] = e.score
		}
	}
	if q.Context {
		nb := contextNeighbours(res.Hits, stats.Next)
		scores := make([]float64, len(nb))
		for i, s := range nb {
			if e := m[s]; e != nil && (!q.All || e.count >= len(q.Terms)) {
				scores[i] = e.score
			}
		}
		res.Hits, err = liftContext(tx, q.Tenant, res.Hits, nb, scores, max(q.Limit, 1), q.MinScore)
	}
	return res, err
}

// weight is the weight of term i of q.Terms.
func (q *DocQuery) weight(i int) float64 {
	if i < len(q.Weights) && q.Weights[i] > 0 {
		return q.Weights[i]
	}
	return 1
}

// termWeight is the BM25 of one term, factored for the inner loop:
// score(tf, dl) = c * tf / (tf + k + kdl*dl).
type termWeight struct{ c, k, kdl float64 }

func newTermWeight(idf, avg float64) termWeight {
	if avg <= 0 {
		avg = 1
	}
	return termWeight{c: idf * (index.K1 + 1), k: index.K1 * (1 - index.B), kdl: index.K1 * index.B / avg}
}

// addBlock adds the scores of the postings of block v (seqs below next)
// to the accumulator, decoding the block in place, and with count, counts
// the terms each segment holds. A segment is touched when its score
// first turns positive (every posting adds a positive score). With probe,
// only the segments already touched or marked take a score; it returns
// how many postings took one. A malformed block adds the postings before
// the fault and no more (crux doctor reports it).
func (a *accumulator) addBlock(v []byte, next uint32, w termWeight, count, probe bool) int {
	found := 0
	n, i := uvarintSlow(v, 0)
	if i < 0 || n == 0 || n > docBlockMax {
		return 0
	}
	var seq uint64
	for range n {
		// Values of one byte (most seq deltas, term frequencies and
		// segment lengths) are decoded here; the call would be the cost.
		var d, tf, dl uint64
		if i < len(v) && v[i] < 0x80 {
			d, i = uint64(v[i]), i+1
		} else if d, i = uvarintSlow(v, i); i < 0 {
			return found
		}
		if i < len(v) && v[i] < 0x80 {
			tf, i = uint64(v[i]), i+1
		} else if tf, i = uvarintSlow(v, i); i < 0 {
			return found
		}
		if i < len(v) && v[i] < 0x80 {
			dl, i = uint64(v[i]), i+1
		} else if dl, i = uvarintSlow(v, i); i < 0 {
			return found
		}
		if seq += d; seq >= uint64(next) {
			return found
		}
		s := uint32(seq)
		if tf == 0 {
			continue // adds nothing; only a damaged block holds one
		}
		if probe && a.marked[s/64]&(1<<(s%64)) == 0 { // the bits stay in cache; scores would not
			continue
		}
		found++
		if a.score[s] == 0 {
			a.touched = append(a.touched, s)
			a.marked[s/64] |= 1 << (s % 64)
		}
		if count {
			a.count[s]++
		}
		f := float64(tf)
		a.score[s] += w.c * f / (f + w.k + w.kdl*float64(dl))
	}
	return found
}

// uvarintSlow decodes the uvarint at v[i:], returning it and the index
// after it, or -1 for a malformed, truncated or overlong one.
func uvarintSlow(v []byte, i int) (uint64, int) {
	if i < 0 || i >= len(v) {
		return 0, -1
	}
	x, k := binary.Uvarint(v[i:])
	if k <= 0 || x > 1<<32-1 {
		return 0, -1
	}
	return x, i + k
}

// atLeast reports whether k or more touched segments score x or more.
func (a *accumulator) atLeast(k int, x float64) bool {
	for _, s := range a.touched {
		if a.score[s] >= x {
			if k--; k == 0 {
				return true
			}
		}
	}
	return false
}

// mark and unmark set and clear the marks of seqs (those below next).
func (a *accumulator) mark(seqs []uint32, next uint32) {
	for _, s := range seqs {
		if s < next {
			a.marked[s/64] |= 1 << (s % 64)
		}
	}
}

func (a *accumulator) unmark(seqs []uint32, next uint32) {
	for _, s := range seqs {
		if s < next {
			a.marked[s/64] &^= 1 << (s % 64)
		}
	}
}

// reset clears what a query left; counted says whether it counted terms
// (addBlock's count).
func (a *accumulator) reset(counted bool) {
	score, marked := a.score, a.marked
	for _, s := range a.touched {
		score[s] = 0
		marked[s/64] = 0 // its other bits are touched segments too (unmark cleared the rest)
	}
	if counted {
		for _, s := range a.touched {
			a.count[s] = 0
		}
	}
	a.touched = a.touched[:0]
}

// topHits keeps the best limit of the candidates offered, counting them
// and those under the floor.
type topHits struct {
	h          hitHeap
	limit      int
	floor      float64
	bar        float64 // a score under it is not kept: the floor, or the worst kept hit's once limit are kept
	candidates int
	below      int
}

func (t *topHits) init(q DocQuery) {
	t.limit, t.floor, t.bar = max(q.Limit, 1), q.MinScore, q.MinScore
	t.h = make(hitHeap, 0, min(t.limit, 64))
}

// offer counts a candidate of score > 0 and keeps it if it is among the
// best so far. Most candidates are turned away by the bar, here, without
// a call.
func (t *topHits) offer(seq uint32, score float64) {
	t.candidates++
	if score < t.bar {
		if score < t.floor {
			t.below++
		}
		return
	}
	t.keep(seq, score)
}

// keep adds a candidate at or over the bar if it is among the best so far.
func (t *topHits) keep(seq uint32, score float64) {
	x := DocHit{Seq: seq, Score: score}
	switch {
	case len(t.h) < t.limit:
		t.h.push(x)
	case better(x, t.h[0]):
		t.h[0] = x
		t.h.down(0)
	default:
		return
	}
	if len(t.h) == t.limit {
		t.bar = max(t.floor, t.h[0].Score)
	}
}

// finish moves the kept hits, best first, and the counts into res.
func (res *DocResult) finish(t *topHits) {
	res.Candidates, res.BelowFloor = t.candidates, t.below
	res.Hits = make([]DocHit, len(t.h))
	for i := len(t.h) - 1; i >= 0; i-- {
		res.Hits[i] = t.h.pop()
	}
}

// better orders hits: higher score, then lower seq.
func better(a, b DocHit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.Seq < b.Seq
}

// hitHeap is a min-heap of hits: the worst kept hit on top. Its methods
// are container/heap's, without the interface calls.
type hitHeap []DocHit

func (h *hitHeap) push(x DocHit) {
	*h = append(*h, x)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !better(s[p], s[i]) {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *hitHeap) pop() DocHit {
	s := *h
	top := s[0]
	s[0] = s[len(s)-1]
	*h = s[:len(s)-1]
	h.down(0)
	return top
}

func (h hitHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		worst := l
		if r := l + 1; r < len(h) && better(h[l], h[r]) {
			worst = r
		}
		if !better(h[i], h[worst]) {
			return
		}
		h[i], h[worst] = h[worst], h[i]
		i = worst
	}
}

// Segment is one segment of a document, as the retrieval tools show it.
type Segment struct {
	Seq    uint32
	DocID  string
	Title  string
	Index  int // its place in the document, from 0
	Text   string
	Tokens int // EstimateTokens(Text)
}

// GetSegment returns the segment of tenant numbered seq, or ErrNotFound.
func GetSegment(tx Tx, tenant string, seq uint32) (*Segment, error) {
	rec, err := getSegRecord(tx, segKey(tenant, seq))
	if err != nil {
		return nil, err
	}
	return &Segment{Seq: seq, DocID: rec.Doc, Title: rec.Title, Index: rec.Index, Text: rec.Text, Tokens: EstimateTokens(rec.Text)}, nil
}

// DocumentSegment returns segment i of the document id of tenant, or
// ErrNotFound when there is no such document or segment.
func DocumentSegment(tx Tx, tenant, id string, i int) (*Segment, error) {
	rec, err := getDocRecord(tx, tenant, id)
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= rec.Segments {
		return nil, ErrNotFound
	}
	return GetSegment(tx, tenant, rec.First+uint32(i))
}

// DocumentInfo is a document's record: its segments and tokens.
type DocumentInfo struct {
	ID         string
	Segments   int
	Tokens     int
	IngestedAt time.Time
}

// GetDocument returns the record of the document id of tenant, or
// ErrNotFound.
func GetDocument(tx Tx, tenant, id string) (*DocumentInfo, error) {
	rec, err := getDocRecord(tx, tenant, id)
	if err != nil {
		return nil, err
	}
	return &DocumentInfo{ID: id, Segments: rec.Segments, Tokens: rec.Tokens, IngestedAt: time.Unix(rec.IngestedAt, 0).UTC()}, nil
}
