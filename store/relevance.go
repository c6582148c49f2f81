package store

import (
	"bytes"
	"cmp"
	"container/heap"
	"encoding/binary"
	"math"
	"strings"

	"github.com/crux-go/crux/index"
)

// Keyword queries over facts rank by relevance.
//
// A fact's relevance to the terms of a [FactQuery] is BM25 over its words
// (those of its value, key and entity, read as one text, stop words
// included): each term adds
//
//	idf · tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl))
//
// with k1 = 1.2 and b = 0.75, where tf counts the fact's words equal to the
// term and half of each longer word that starts with it ("topic7" in
// "topic700"), so that an exact word outranks the longer words it is a
// prefix of; dl is the fact's number of words and avgdl their mean over
// the facts scored. idf is ln(1 + (N − df + 0.5)/(df + 0.5)), df the number
// of facts holding the exact word (those holding a longer one when none
// does) and N the tenant's number of facts (see factCount). A fact that
// matches more of the terms, or rarer ones, so scores higher. The score a
// query ranks by is the relevance times the fact's effective confidence;
// ties go to the higher effective confidence, then to the newer fact.
//
// Candidates come from the keyword postings, which carry each fact's
// stored confidence but not its words: every fact holding a term is first
// weighed by its stored confidence times the sum of the idf of the terms
// it holds (a longer word counting half), which the postings alone give,
// and the best of them by that weight, at least rerankMin or twice the
// limit (FactQuery.Rerank when set), are read and scored exactly. Facts
// past that cut are the ones whose postings match fewer, or more common,
// terms. A word in more than commonMax facts names only its newest
// commonMax, so that its cost does not grow with the store.

// prefixWeight is what a word counts towards a term it starts with but is
// longer than.
const prefixWeight = 0.5

// rerankMin is the least number of facts a keyword query reads and scores
// exactly (see above).
const rerankMin = 100

// activeScanMax bounds the entries of facts.active a keyword query reads
// to count the tenant's current facts: one page of a backend's scan (see
// factCount).
const activeScanMax = 256

// termStat is a query term's document frequency and weight.
type termStat struct {
	term  string
	df    int // facts holding the word exactly
	dfPre int // facts holding a longer word that starts with it
	idf   float64
}

// candidate is a fact that a posting names.
type candidate struct {
	raw  [16]byte // a standard id's 16 bytes
	id   string   // a non-standard id; "" for a standard one
	rank [16]byte // ^confidence, ^stored_at
	w    float64  // within a term's list: 1 for the exact word, prefixWeight for a longer one; merged: the weight of stage one
}

// factID is c's fact id.
func (c *candidate) factID() string {
	if c.id != "" {
		return c.id
	}
	return standardID(c.raw[:])
}

// cmpCandidates orders candidates by fact id.
func cmpCandidates(a, b *candidate) int {
	if a.id == "" && b.id == "" {
		if c := cmp.Compare(binary.BigEndian.Uint64(a.raw[:8]), binary.BigEndian.Uint64(b.raw[:8])); c != 0 {
			return c
		}
		return cmp.Compare(binary.BigEndian.Uint64(a.raw[8:]), binary.BigEndian.Uint64(b.raw[8:]))
	}
	return strings.Compare(a.factID(), b.factID())
}

// conf is the stored confidence in c's rank.
func (c *candidate) conf() float64 {
	return math.Float64frombits(^binary.BigEndian.Uint64(c.rank[:8]))
}

// appendCandidates appends to list a candidate of weight w for every posting
// of the block v. A block that does not decode adds nothing (crux doctor
// reports it).
func appendCandidates(list []candidate, v []byte, w float64) []candidate {
	start := len(list)
	if len(v) > 0 && (v[0] == blockMark || v[0] == blockMark7) {
		r := blockReader{v: v[1:], v8: v[0] == blockMark}
		for len(r.v) > 0 {
			if r.next() != nil {
				list = list[:start]
				goto slow
			}
			c := candidate{w: w}
			if r.std {
				c.raw = r.raw
			} else {
				c.id = string(r.id)
			}
			copy(c.rank[:8], r.conf[:])
			binary.BigEndian.PutUint64(c.rank[8:], r.prevAt)
			list = append(list, c)
		}
		if len(list) > start {
			return list
		}
	}
slow:
	ps, err := decodeBlock(v)
	if err != nil {
		return list
	}
	for _, p := range ps {
		list = append(list, newCandidate(p.id, p.rank, w))
	}
	return list
}

// newCandidate is the candidate of the fact id of rank prefix rank.
func newCandidate(id string, rank []byte, w float64) candidate {
	c := candidate{w: w}
	if raw, ok := compactID(id); ok {
		c.raw = raw
	} else {
		c.id = id
	}
	copy(c.rank[:], rank)
	return c
}

// commonMax bounds the postings of one term a keyword query decodes, so
// that a word in most facts costs about what a rare one does: past it, the
// exact word's candidates are its commonMax newest postings (ids are
// time-ordered; see newestPostings), the longer words starting with the
// term add at most commonMax in all, and each block not decoded counts
// towards df as holding blockMax postings (a word's older blocks are full,
// but for the halves of a split one), its tail block as what it holds. A
// word held by that many facts has an idf too low for its postings to
// decide which facts are read.
const commonMax = 8192

// termCandidates returns, for each of terms, the facts whose words hold it
// (exactly, or as the start of a longer word), sorted by fact id, each
// once with the weight of its best word, at most about 2·commonMax of
// them, and the terms' statistics without idf. With collect false, it
// only counts.
func termCandidates(tx Tx, tenant string, terms []string, collect bool) ([][]candidate, []termStat, error) {
	lists := make([][]candidate, len(terms))
	runs := make([][]int, len(terms)) // where each run of lists[i] sorted by id starts
	stats := make([]termStat, len(terms))
	for _, t := range terms {
		prefetchScan(tx, bucketWords, indexKey(tenant, t), false)
	}
	prefetchScan(tx, bucketFresh, indexKey(tenant, ""), false)
	prefetchFactCount(tx, tenant)
	var scratch []candidate
	for i, t := range terms {
		stats[i].term = t
		prefix := indexKey(tenant, t)
		var last []byte
		exactCut := false // the exact word's postings passed commonMax: lists[i] holds none of them
		longer := 0       // postings of longer words decoded
		// decode adds the postings of v, of weight w, to lists[i] (or
		// only counts them) and returns how many.
		decode := func(v []byte, w float64) int {
			if !collect {
				scratch = appendCandidates(scratch[:0], v, w)
				return len(scratch)
			}
			at := len(lists[i])
			lists[i] = appendCandidates(lists[i], v, w)
			return len(lists[i]) - at
		}
		err := tx.Scan(bucketWords, prefix, false, func(k, v []byte) error {
			// k is tenant, NUL, word, NUL, last id: the word is t exactly
			// when a NUL follows the prefix. The exact word's blocks come
			// first.
			exact := len(k) > len(prefix) && k[len(prefix)] == 0
			if j := bytes.IndexByte(k[len(prefix):], 0); j >= 0 && !bytes.Equal(k[:len(prefix)+j], last) {
				last = append(last[:0], k[:len(prefix)+j]...)
				if collect {
					runs[i] = append(runs[i], len(lists[i])) // a word's postings are sorted by id
				}
			}
			switch {
			case exact && !exactCut:
				stats[i].df += decode(v, 1)
				if stats[i].df > commonMax {
					exactCut, lists[i], runs[i] = true, lists[i][:0], runs[i][:0]
				}
			case exact:
				stats[i].df += blockPostings(k, v)
			case longer >= commonMax:
				stats[i].dfPre += blockPostings(k, v)
			default:
				n := decode(v, prefixWeight)
				longer += n
				stats[i].dfPre += n
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		if exactCut && collect {
			if lists[i], runs[i], err = newestPostings(tx, tenant, t, lists[i], runs[i]); err != nil {
				return nil, nil, err
			}
		}
	}
	// The postings not yet moved to the keyword index (see indexLive).
	var starts index.Starts
	for _, t := range terms {
		starts.Add(t)
	}
	fresh := make([]bool, len(terms))
	err := tx.Scan(bucketFresh, indexKey(tenant, ""), false, func(k, v []byte) error {
		words, ok := freshWords(v)
		if !ok {
			return nil // malformed; the fact stays reachable by the other indexes
		}
		best := make([]float64, len(terms))
		for w := range bytes.SplitSeq(words, []byte{0}) {
			if !starts.Lets(w) {
				continue
			}
			for i, t := range terms {
				best[i] = max(best[i], wordWeight(w, t))
			}
		}
		for i, b := range best {
			switch {
			case b == 0:
				continue
			case b == 1:
				stats[i].df++
			default:
				stats[i].dfPre++
			}
			if collect {
				if !fresh[i] {
					fresh[i], runs[i] = true, append(runs[i], len(lists[i]))
				}
				lists[i] = append(lists[i], newCandidate(string(k[len(tenant)+1:]), v[:16], b))
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	for i := range lists {
		lists[i] = mergeRuns(lists[i], runs[i], maxWeight)
	}
	return lists, stats, nil
}

// wordWeight is what a word's stem w counts towards term t: 1 when it is
// t, prefixWeight when it is longer and starts with t, else 0.
func wordWeight[W string | []byte](w W, t string) float64 {
	switch {
	case len(w) < len(t) || string(w[:len(t)]) != t:
		return 0
	case len(w) == len(t):
		return 1
	}
	return prefixWeight
}

// mergeRuns merges the runs of list, each sorted by fact id and holding a
// fact once, starting at starts (ascending; the first is 0), into one
// sorted list holding each fact once, with the weights of its candidates
// combined by combine.
func mergeRuns(list []candidate, starts []int, combine func(a, b float64) float64) []candidate {
	bounds := append(starts, len(list))
	var buf []candidate
	for len(bounds) > 2 {
		if buf == nil {
			buf = make([]candidate, 0, len(list))
		}
		buf = buf[:0]
		var next []int
		for j := 0; j+1 < len(bounds); j += 2 {
			next = append(next, len(buf))
			if j+2 < len(bounds) {
				buf = mergeTwo(buf, list[bounds[j]:bounds[j+1]], list[bounds[j+1]:bounds[j+2]], combine)
			} else {
				buf = append(buf, list[bounds[j]:bounds[j+1]]...)
			}
		}
		list, buf, bounds = buf, list, append(next, len(buf))
	}
	return list
}

// maxWeight and sumWeights combine the weights of a fact's candidates:
// within a term, its best word's; across terms, the sum.
func maxWeight(a, b float64) float64  { return max(a, b) }
func sumWeights(a, b float64) float64 { return a + b }

// mergeTwo appends to dst the candidates of a and b, each sorted by fact
// id, in that order, a fact in both once with their weights combined.
func mergeTwo(dst, a, b []candidate, combine func(a, b float64) float64) []candidate {
	for len(a) > 0 && len(b) > 0 {
		switch c := cmpCandidates(&a[0], &b[0]); {
		case c < 0:
			dst, a = append(dst, a[0]), a[1:]
		case c > 0:
			dst, b = append(dst, b[0]), b[1:]
		default:
			x := a[0]
			x.w = combine(x.w, b[0].w)
			dst, a, b = append(dst, x), a[1:], b[1:]
		}
	}
	return append(append(dst, a...), b...)
}

// newestPostings appends to list a candidate for each of the commonMax
// newest postings of word (at least; whole blocks are read), reading its
// blocks from the tail back, and to runs where each block's run starts.
func newestPostings(tx Tx, tenant, word string, list []candidate, runs []int) ([]candidate, []int, error) {
	n := 0
	err := tx.Scan(bucketWords, wordPrefix(tenant, word), true, func(_, v []byte) error {
		at := len(list)
		runs = append(runs, at)
		list = appendCandidates(list, v, 1)
		if n += len(list) - at; n >= commonMax {
			return ErrStop
		}
		return nil
	})
	if err == ErrStop {
		err = nil
	}
	return list, runs, err
}

// blockPostings is the number of postings a block of the keyword index
// counts without being decoded (see commonMax): what a word's tail block
// holds, blockMax for any other.
func blockPostings(k, v []byte) int {
	if !isTailKey(k) {
		return blockMax
	}
	return len(appendCandidates(nil, v, 0))
}

// factCount returns the N of idf for tenant, read in the round trip of
// the postings: the larger of the tenant's change-log head (its shared
// versions, superseded ones included, as the postings include them) and
// its current facts counted over at most activeScanMax entities of
// facts.active (all of them in a tenant of that many entities or fewer,
// whatever is private). setIDF raises it to the largest df of the terms.
func factCount(tx Tx, tenant string) (int, error) {
	n, entries := 0, 0
	err := tx.Scan(bucketActive, indexKey(tenant, ""), false, func(_, v []byte) error {
		if len(v) == 8 {
			n += int(min(binary.BigEndian.Uint64(v), math.MaxInt32))
		}
		if entries++; entries >= activeScanMax {
			return ErrStop
		}
		return nil
	})
	if err != nil && err != ErrStop {
		return 0, err
	}
	head, err := SyncHead(tx, tenant)
	if err != nil {
		return 0, err
	}
	return max(n, int(min(head, math.MaxInt32))), nil
}

// prefetchFactCount announces the reads of factCount (see Prefetcher).
func prefetchFactCount(tx Tx, tenant string) {
	prefetchScan(tx, bucketActive, indexKey(tenant, ""), false)
	prefix := append([]byte(tenant), 0)
	prefetchScan(tx, bucketSyncNew, prefix, true)
	prefetchScan(tx, bucketSyncLog, prefix, true)
}

// setIDF computes the idf of each of stats for a tenant of n facts (see
// factCount).
func setIDF(stats []termStat, n int) {
	for _, s := range stats {
		n = max(n, s.df+s.dfPre)
	}
	for i := range stats {
		df := stats[i].df
		if df == 0 {
			df = stats[i].dfPre
		}
		stats[i].idf = index.IDF(n, df)
	}
}

// termStats returns the statistics, idf included, of terms in tenant.
func termStats(tx Tx, tenant string, terms []string) ([]termStat, error) {
	_, stats, err := termCandidates(tx, tenant, terms, false)
	if err != nil {
		return nil, err
	}
	n, err := factCount(tx, tenant)
	if err != nil {
		return nil, err
	}
	setIDF(stats, n)
	return stats, nil
}

// searchTerms runs a keyword query without entity or key filter: the
// postings of its terms name the candidates, the best of which by their
// postings alone are read and scored (see above).
func searchTerms(tx Tx, q FactQuery) (FactResult, error) {
	lists, stats, err := termCandidates(tx, q.Tenant, q.Terms, true)
	if err != nil {
		return FactResult{}, err
	}
	n, err := factCount(tx, q.Tenant)
	if err != nil {
		return FactResult{}, err
	}
	setIDF(stats, n)
	h := candHeap(mergeCandidates(lists, stats))
	heap.Init(&h)
	want := 0 // facts to score; 0: every candidate
	if q.Limit > 0 {
		want = max(rerankMin, 2*q.Limit)
		if q.Rerank > 0 {
			want = max(q.Rerank, q.Limit)
		}
	}
	var res FactResult
	var batch []candidate
	for len(h) > 0 && (want == 0 || len(res.Facts) < want) {
		// The next candidates, read together (see Prefetcher).
		batch = batch[:0]
		for len(h) > 0 && len(batch) < max(16, want-len(res.Facts)) {
			batch = append(batch, heap.Pop(&h).(candidate))
		}
		prefetchCandidates(tx, batch)
		for i := range batch {
			f, err := indexedFact(tx, bucketWords, batch[i].factID())
			if err != nil {
				if err := SkipCorrupt(tx, err); err != nil {
					return FactResult{}, err
				}
				continue
			}
			r, ok, err := q.rank(tx, f, false)
			if err != nil {
				return FactResult{}, err
			}
			if !ok {
				continue
			}
			if r.Effective < q.MinEffective {
				res.BelowFloor++
				continue
			}
			res.Facts = append(res.Facts, r)
		}
	}
	scoreFacts(res.Facts, stats)
	return q.finish(res), nil
}

// prefetchCandidates announces the reads of the facts of cs (see
// Prefetcher).
func prefetchCandidates(tx Tx, cs []candidate) {
	if _, ok := tx.(Prefetcher); !ok {
		return
	}
	ids := make([][]byte, len(cs))
	for i := range cs {
		ids[i] = []byte(cs[i].factID())
	}
	prefetch(tx, bucketFacts, ids)
}

// mergeCandidates merges the terms' candidate lists, each sorted by fact
// id, into one candidate a fact, weighed by its stored confidence times
// the idf of the terms it holds (each times its word's weight).
func mergeCandidates(lists [][]candidate, stats []termStat) []candidate {
	total := 0
	for _, l := range lists {
		total += len(l)
	}
	all := make([]candidate, 0, total)
	starts := make([]int, 0, len(lists))
	for i, l := range lists {
		starts = append(starts, len(all))
		for _, c := range l {
			c.w *= stats[i].idf
			all = append(all, c)
		}
	}
	all = mergeRuns(all, starts, sumWeights)
	for i := range all {
		all[i].w *= all[i].conf()
	}
	return all
}

// candHeap orders candidates by weight, highest first, then newest first.
type candHeap []candidate

func (h candHeap) Len() int { return len(h) }
func (h candHeap) Less(i, j int) bool {
	if h[i].w != h[j].w {
		return h[i].w > h[j].w
	}
	if c := bytes.Compare(h[i].rank[8:], h[j].rank[8:]); c != 0 {
		return c < 0 // ^stored_at: the newer first
	}
	return cmpCandidates(&h[i], &h[j]) < 0
}
func (h candHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *candHeap) Push(x any)   { *h = append(*h, x.(candidate)) }
func (h *candHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// scoreFacts sets the Score of every fact of rs: its relevance to the
// terms of stats times its effective confidence.
func scoreFacts(rs []RankedFact, stats []termStat) {
	if len(rs) == 0 {
		return
	}
	m := newMatcher(stats)
	tfs := make([][]float64, len(rs))
	dls := make([]int, len(rs))
	total := 0
	for i := range rs {
		tfs[i], dls[i] = m.termFrequencies(rs[i].Fact)
		total += dls[i]
	}
	avg := float64(total) / float64(len(rs))
	for i := range rs {
		rel := 0.0
		for j, tf := range tfs[i] {
			if tf > 0 {
				rel += bm25(stats[j].idf, tf, dls[i], avg)
			}
		}
		rs[i].Score = rel * rs[i].Effective
	}
}

// BM25's parameters for facts (see above): the textbook values, which
// short texts of a few sentences suit; documents have their own (see
// index.K1).
const (
	factK1 = 1.2
	factB  = 0.75
)

// bm25 is a term's BM25 weight in a fact, for a fractional term frequency.
func bm25(idf, tf float64, dl int, avgdl float64) float64 {
	if avgdl <= 0 {
		avgdl = 1
	}
	return idf * tf * (factK1 + 1) / (tf + factK1*(1-factB+factB*float64(dl)/avgdl))
}

// A matcher finds the terms of a query in facts' words.
type matcher struct {
	stats  []termStat
	starts index.Starts
	// words remembers the terms each word seen holds: the facts scored
	// for one query repeat their words.
	words map[string][]termMatch
}

// termMatch is a term a word holds, and what it counts for it (see
// wordWeight).
type termMatch struct {
	term int
	w    float64
}

func newMatcher(stats []termStat) *matcher {
	m := &matcher{stats: stats, words: make(map[string][]termMatch)}
	for _, s := range stats {
		m.starts.Add(s.term)
	}
	return m
}

// termFrequencies returns how often f's words hold each term (a longer
// word counting prefixWeight) and f's number of words. The words that
// cannot hold a term (see index.Starts) are only counted.
func (m *matcher) termFrequencies(f *Fact) ([]float64, int) {
	tf := make([]float64, len(m.stats))
	each := func(w index.Word) {
		ms, ok := m.words[w.Lower]
		if !ok {
			s := index.Stem(w.Lower)
			for j := range m.stats {
				if x := wordWeight(s, m.stats[j].term); x > 0 {
					ms = append(ms, termMatch{j, x})
				}
			}
			m.words[w.Lower] = ms
		}
		for _, x := range ms {
			tf[x.term] += x.w
		}
	}
	dl := index.SplitStarting(f.Value, &m.starts, each)
	dl += index.SplitStarting(f.Key, &m.starts, each)
	dl += index.SplitStarting(f.Entity, &m.starts, each)
	return tf, dl
}
