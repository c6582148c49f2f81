package store

import (
	"bytes"
	"cmp"
	"container/heap"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"sort"
	"strings"
	"sync"

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
// the facts scored (for a query without entity or key filter, see below).
// idf is ln(1 + (N − df + 0.5)/(df + 0.5)), df the number
// of facts holding the exact word (those holding a longer one when none
// does) and N the tenant's number of facts (see factCount). A fact that
// matches more of the terms, or rarer ones, so scores higher. The score a
// query ranks by is the relevance times the fact's effective confidence;
// ties go to the higher effective confidence, then to the newer fact.
//
// Candidates come from the keyword postings, which carry each fact's
// stored confidence, the word's term frequency and the fact's number of
// words (see postings.go): every fact a posting names gets its relevance
// from the postings alone, with avgdl the mean dl of the best of them by
// their postings (stored confidence times the summed idf of the terms
// they hold: at least rerankMin or twice the limit, FactQuery.Rerank when
// set; see weighedDL), and facts are read in order of relevance times
// stored confidence, which
// bounds their score (effective confidence never exceeds stored, but for
// a pinned fact, which ranks at it). Once the result holds the limit and
// the next bound is below the weakest score, no later fact can enter it:
// the result is the one scoring every candidate would give, having read
// about as many facts as it returns (and those it may not see: private
// facts of others, retired or deleted ones). A posting written before
// format 10 carries no counts; its fact is read for them. A word in more
// than commonMax facts names only its newest commonMax, so that its cost
// does not grow with the store.

// prefixWeight is what a word counts towards a term it starts with but is
// longer than.
const prefixWeight = 0.5

// rerankMin is the least number of candidates whose mean length is a
// keyword query's avgdl (see weighedDL).
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
	// w is, within a term's list, the fact's term frequency for the term
	// (each word's count times its weight, see wordWeight); merged, the
	// fact's relevance.
	w         float64
	dl        uint32  // the fact's number of words
	best      float32 // within a term's list: the weight of the fact's best word for it (see wordWeight)
	uncounted bool    // a posting carried no counts: w and dl are to be read from the fact
}

// candidateBufs recycles the candidate slices of keyword queries, which
// would otherwise be most of what a query allocates (a megabyte for a
// question of a dozen words over long facts) and so most of the garbage
// collector's work.
var candidateBufs sync.Pool // of *[]candidate

// maxPooledCandidates is the largest slice candidateBufs keeps.
const maxPooledCandidates = 1 << 16

// getCandidates returns an empty slice with room for n candidates.
func getCandidates(n int) []candidate {
	if p, ok := candidateBufs.Get().(*[]candidate); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]candidate, 0, n)
}

// putCandidates gives back a slice no longer used (nor any pointer into
// it) for getCandidates to hand out again.
func putCandidates(s []candidate) {
	if c := cap(s); c == 0 || c > maxPooledCandidates {
		return
	}
	s = s[:0]
	candidateBufs.Put(&s)
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

// appendCandidates appends to list a candidate for every posting of the
// block v, of a word of weight w (see wordWeight). A block that does not
// decode adds nothing (crux doctor reports it).
func appendCandidates(list []candidate, v []byte, w float64) []candidate {
	start := len(list)
	if len(v) > 0 && blockLayout(v[0]) != 0 {
		r := newBlockReader(v)
		for len(r.v) > 0 {
			if r.next() != nil {
				list = list[:start]
				goto slow
			}
			c := candidate{w: w * float64(r.tf), dl: r.dl, best: float32(w)}
			if r.tf == 0 {
				c.w, c.uncounted = w, true
			}
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
		list = append(list, newCandidate(p.id, p.rank, w, p.tf, p.dl))
	}
	return list
}

// newCandidate is the candidate of the fact id of rank prefix rank, for a
// word of weight w that the fact holds tf times (0: unknown), dl its
// number of words.
func newCandidate(id string, rank []byte, w float64, tf, dl uint32) candidate {
	c := candidate{w: w * float64(tf), dl: dl, best: float32(w)}
	if tf == 0 {
		c.w, c.uncounted = w, true
	}
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
// exact word's candidates are its commonMax newest postings (at least;
// whole blocks are read, from the tail back: ids are time-ordered), the
// longer words starting with the term add at most commonMax in all, and
// each block not decoded counts towards df as holding blockMax postings
// (a word's older blocks are full, but for the halves of a split one),
// its tail block as what it holds. A word held by that many facts has an
// idf too low for the facts it alone names to rank high.
const commonMax = 8192

// termCandidates returns, for each of terms, the facts whose words hold it
// (exactly, or as the start of a longer word), sorted by fact id, each
// once with its term frequency, at most about 2·commonMax of them, and
// the terms' statistics without idf. With collect false, it only counts.
func termCandidates(tx Tx, tenant string, terms []string, collect bool) ([][]candidate, []termStat, error) {
	lists := make([][]candidate, len(terms))
	runs := make([][]int, len(terms)) // where each run of lists[i] sorted by id starts
	stats := make([]termStat, len(terms))
	for _, t := range terms {
		prefetchScan(tx, bucketWords, wordPrefix(tenant, t), true)
		prefetchScan(tx, bucketWords, indexKey(tenant, t), false)
	}
	prefetchScan(tx, bucketFresh, indexKey(tenant, ""), false)
	prefetchFactCount(tx, tenant)
	scratch, newest := getCandidates(blockMax), getCandidates(blockMax)
	defer func() { putCandidates(scratch); putCandidates(newest) }()
	for i, t := range terms {
		stats[i].term = t
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
		// The exact word's blocks, newest first, up to commonMax
		// postings; cut is the key of the oldest block decoded when older
		// ones are left, which are counted below.
		var cut []byte
		var ends []int // where each block decoded ends in newest, newest first
		newest = newest[:0]
		err := tx.Scan(bucketWords, wordPrefix(tenant, t), true, func(k, v []byte) error {
			newest = appendCandidates(newest, v, 1)
			stats[i].df = len(newest)
			ends = append(ends, len(newest))
			if stats[i].df >= commonMax {
				cut = bytes.Clone(k)
				return ErrStop
			}
			return nil
		})
		if err != nil && err != ErrStop {
			return nil, nil, err
		}
		if collect {
			lists[i] = inOrder(getCandidates(len(newest)+blockMax), newest, ends)
			runs[i] = append(runs[i], 0)
		}
		// Then the exact word's older blocks, counted, and the longer
		// words' blocks: k is tenant, NUL, word, NUL, last id, and the
		// word is t exactly when a NUL follows the prefix, the exact
		// word's blocks coming first.
		prefix := indexKey(tenant, t)
		var last []byte
		longer := 0 // postings of longer words decoded
		err = tx.Scan(bucketWords, prefix, false, func(k, v []byte) error {
			if len(k) > len(prefix) && k[len(prefix)] == 0 {
				if cut != nil && bytes.Compare(k, cut) < 0 {
					stats[i].df += blockPostings(k, v)
				}
				return nil
			}
			if j := bytes.IndexByte(k[len(prefix):], 0); j >= 0 && !bytes.Equal(k[:len(prefix)+j], last) {
				last = append(last[:0], k[:len(prefix)+j]...)
				if collect {
					runs[i] = append(runs[i], len(lists[i])) // a word's postings are sorted by id
				}
			}
			if longer >= commonMax {
				stats[i].dfPre += blockPostings(k, v)
				return nil
			}
			n := decode(v, prefixWeight)
			longer += n
			stats[i].dfPre += n
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	// The postings not yet moved to the keyword index (see indexLive).
	var starts index.Starts
	for _, t := range terms {
		starts.Add(t)
	}
	fresh := make([]bool, len(terms))
	best := make([]float64, len(terms))
	tfs := make([]float64, len(terms))
	err := tx.Scan(bucketFresh, indexKey(tenant, ""), false, func(k, v []byte) error {
		words, counts, ok := freshWords(v)
		if !ok {
			return nil // malformed; the fact stays reachable by the other indexes
		}
		clear(best)
		clear(tfs)
		var dl uint64
		if counts != nil {
			var n int
			dl, n = binary.Uvarint(counts)
			counts = counts[n:]
		}
		for w := range bytes.SplitSeq(words, []byte{0}) {
			tf := uint64(1)
			if counts != nil {
				var n int
				tf, n = binary.Uvarint(counts)
				counts = counts[n:]
			}
			if !starts.Lets(w) {
				continue
			}
			for i, t := range terms {
				x := wordWeight(w, t)
				best[i] = max(best[i], x)
				tfs[i] += x * float64(tf)
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
				c := newCandidate(string(k[len(tenant)+1:]), v[:16], 1, 1, uint32(dl))
				c.w, c.best, c.uncounted = tfs[i], float32(b), dl == 0
				lists[i] = append(lists[i], c)
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	for i := range lists {
		lists[i] = mergeRuns(lists[i], runs[i], sumWeights)
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
	defer func() { putCandidates(buf) }()
	for len(bounds) > 2 {
		if buf == nil {
			buf = getCandidates(len(list))
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

// sumWeights combines the weights of a fact's candidates: within a term,
// the term frequencies its words give; across terms, their relevance.
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
			x.dl = max(x.dl, b[0].dl)
			x.best = max(x.best, b[0].best)
			x.uncounted = x.uncounted || b[0].uncounted
			dst, a, b = append(dst, x), a[1:], b[1:]
		}
	}
	return append(append(dst, a...), b...)
}

// inOrder appends to dst the postings of read, blocks of one word read
// newest first, each ending where ends says, in the order of their ids:
// the blocks of a word cover disjoint ranges of ids.
func inOrder(dst, read []candidate, ends []int) []candidate {
	for j := len(ends) - 1; j >= 0; j-- {
		from := 0
		if j > 0 {
			from = ends[j-1]
		}
		dst = append(dst, read[from:ends[j]]...)
	}
	return dst
}

// blockPostings is the number of postings a block of the keyword index
// counts without being decoded (see commonMax): what a word's tail block
// holds, blockMax for any other.
func blockPostings(k, v []byte) int {
	if len(k) == 0 || k[len(k)-1] != tailMark[0] { // no fact id ends in it
		return blockMax
	}
	return len(appendCandidates(nil, v, 0))
}

// factCount returns the N of idf for tenant, read in the round trip of
// the postings: the larger of the tenant's change-log count (its shared
// versions, superseded ones included, as the postings include them) and
// its current facts counted over at most activeScanMax entities of
// facts.active (all of them in a tenant of that many entities or fewer,
// whatever is private). setIDF raises it to the largest df of the terms.
func factCount(tx Tx, tenant string) (int, error) {
	sum, _, err := sumCounts(tx, bucketActive, indexKey(tenant, ""), activeScanMax, math.MaxInt32)
	if err != nil {
		return 0, err
	}
	n := int(sum) // activeScanMax counts of at most MaxInt32
	logged, err := SyncCount(tx, tenant)
	if err != nil {
		return 0, err
	}
	return max(n, int(min(logged, math.MaxInt32))), nil
}

// prefetchFactCount announces the reads of factCount (see Prefetcher).
func prefetchFactCount(tx Tx, tenant string) {
	prefetchSumCounts(tx, bucketActive, indexKey(tenant, ""), activeScanMax, math.MaxInt32)
	prefetchChangeHead(tx, tenant)
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
	_, stats, err := termCandidatesIDF(tx, tenant, terms, false)
	return stats, err
}

// termCandidatesIDF is termCandidates with each term's idf set from the
// tenant's fact count.
func termCandidatesIDF(tx Tx, tenant string, terms []string, collect bool) ([][]candidate, []termStat, error) {
	lists, stats, err := termCandidates(tx, tenant, terms, collect)
	if err != nil {
		return nil, nil, err
	}
	n, err := factCount(tx, tenant)
	if err != nil {
		return nil, nil, err
	}
	setIDF(stats, n)
	return lists, stats, nil
}

// searchTerms runs a keyword query without entity or key filter: the
// postings of its terms name the candidates and give their relevance, and
// the candidates are read best bound first until no later one can enter
// the result (see above).
func searchTerms(tx Tx, q FactQuery) (FactResult, error) {
	all, err := scoreCandidates(tx, q.Tenant, q.Terms, q.lengthSample())
	if err != nil {
		return FactResult{}, err
	}
	defer putCandidates(all) // h and batch point into it; the result does not
	h := make(boundHeap, len(all))
	for i := range all {
		h[i] = bound{ub: all[i].w * all[i].conf(), c: &all[i]}
	}
	heap.Init(&h)
	var res FactResult
	full := func() bool { return q.Limit > 0 && len(res.Facts) >= q.Limit }
	var batch []*candidate
	for len(h) > 0 {
		// The next candidates that may enter the result, read together
		// (see Prefetcher): as many as the result lacks, at least 16. (32
		// or 64 where reads cost a round trip saved one for ties, but made
		// the median query slower: more facts decoded than it needs.)
		batch = batch[:0]
		for len(h) > 0 && len(batch) < max(16, q.Limit-len(res.Facts)) {
			if full() && h[0].ub < res.Facts[len(res.Facts)-1].Score {
				break // nor any later one
			}
			if b := heap.Pop(&h).(bound); !full() || mayBeat(b, res.Facts[len(res.Facts)-1]) {
				batch = append(batch, b.c)
			}
		}
		if len(batch) == 0 {
			break
		}
		prefetchCandidates(tx, batch)
		for _, c := range batch {
			if full() && !mayBeat(bound{c.w * c.conf(), c}, res.Facts[len(res.Facts)-1]) {
				continue
			}
			f, err := indexedFact(tx, bucketWords, c.factID())
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
			r.Score = c.w * r.Effective
			res.Facts = insertRanked(res.Facts, r, q.Limit)
		}
	}
	return q.finish(res), nil
}

// lengthSample is how many of a keyword query's candidates set avgdl (see
// weighedDL): FactQuery.Rerank when set (at least the limit), else
// rerankMin or twice the limit, 0 (every candidate) without a limit.
func (q *FactQuery) lengthSample() int {
	switch {
	case q.Rerank > 0:
		return max(q.Rerank, q.Limit)
	case q.Limit <= 0:
		return 0
	}
	return max(rerankMin, 2*q.Limit)
}

// scoreCandidates returns the facts that the postings of terms name in
// tenant, sorted by fact id, each once with its relevance to them as w,
// avgdl the mean dl of the sample best by their postings (see weighedDL).
func scoreCandidates(tx Tx, tenant string, terms []string, sample int) ([]candidate, error) {
	lists, stats, err := termCandidatesIDF(tx, tenant, terms, true)
	if err != nil {
		return nil, err
	}
	if err := countUncounted(tx, lists, stats); err != nil {
		return nil, err
	}
	all, avg := weighedDL(lists, stats, sample)
	for i := range all {
		all[i].w = 0
	}
	// Each term's candidates are among all, in the same order: found by
	// walking all, or by a binary search when they are few.
	for i, l := range lists {
		search := len(l)*bits.Len(uint(len(all))) < len(all)
		j := 0
		for _, c := range l {
			if search {
				j += sort.Search(len(all)-j, func(x int) bool { return cmpCandidates(&all[j+x], &c) >= 0 })
			} else {
				for cmpCandidates(&all[j], &c) < 0 {
					j++
				}
			}
			if c.w > 0 {
				all[j].w += bm25(stats[i].idf, c.w, int(c.dl), avg)
			}
		}
		putCandidates(l)
	}
	return all, nil
}

// countUncounted gives the candidates of lists whose postings carry no
// counts (written before format 10) their term frequency and dl, read from
// their facts as scoreFacts would count them. A fact that cannot be read
// keeps what its postings gave; it leaves the result when it is read
// again.
func countUncounted(tx Tx, lists [][]candidate, stats []termStat) error {
	type count struct {
		tf []float64
		dl int
	}
	var ids []string
	var counts map[string]*count
	for _, l := range lists {
		for j := range l {
			if !l[j].uncounted {
				continue
			}
			if counts == nil {
				counts = make(map[string]*count)
			}
			if id := l[j].factID(); counts[id] == nil {
				ids = append(ids, id)
				counts[id] = &count{}
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if _, ok := tx.(Prefetcher); ok {
		keys := make([][]byte, len(ids))
		for i, id := range ids {
			keys[i] = []byte(id)
		}
		prefetch(tx, bucketFacts, keys)
	}
	m := newMatcher(stats)
	for _, id := range ids {
		f, err := GetFact(tx, id)
		var ce *CorruptRecordError
		if errors.Is(err, ErrNotFound) || errors.As(err, &ce) {
			delete(counts, id) // searchTerms meets it again, and skips it
			continue
		}
		if err != nil {
			return err
		}
		counts[id].tf, counts[id].dl = m.termFrequencies(f)
	}
	for i, l := range lists {
		for j := range l {
			if !l[j].uncounted {
				continue
			}
			if c := counts[l[j].factID()]; c != nil {
				l[j].w, l[j].dl, l[j].uncounted = c.tf[i], uint32(min(c.dl, tfMax)), false
			}
		}
	}
	return nil
}

// weighedDL returns the facts that lists name, sorted by id, each once,
// and the mean number of words of the n of them (all when n is 0) that
// their postings weigh best: by their stored confidence times the sum of
// the idf of the terms they hold, a longer word counting prefixWeight;
// ties go to the newer fact, then to the smaller id. The facts of unknown
// length count for none; the mean is 1 when no fact is of known length.
func weighedDL(lists [][]candidate, stats []termStat, n int) ([]candidate, float64) {
	total := 0
	for _, l := range lists {
		total += len(l)
	}
	all := getCandidates(total)
	starts := make([]int, 0, len(lists))
	for i, l := range lists {
		starts = append(starts, len(all))
		for _, c := range l {
			c.w = stats[i].idf * float64(c.best)
			all = append(all, c)
		}
	}
	all = mergeRuns(all, starts, sumWeights)
	for i := range all {
		all[i].w *= all[i].conf()
	}
	best := all
	if n > 0 && n < len(all) {
		// The n best, kept in a heap whose root is the worst of them.
		h := make(worstFirst, n)
		copy(h, all[:n])
		heap.Init(&h)
		for i := n; i < len(all); i++ {
			if weighsMore(&all[i], &h[0]) {
				h[0] = all[i]
				heap.Fix(&h, 0)
			}
		}
		best = h
	}
	count, sum := 0, 0.0
	for _, c := range best {
		if c.dl > 0 {
			count++
			sum += float64(c.dl)
		}
	}
	if count == 0 {
		return all, 1
	}
	return all, sum / float64(count)
}

// weighsMore reports whether a comes before b by weight (see weighedDL).
func weighsMore(a, b *candidate) bool {
	if a.w != b.w {
		return a.w > b.w
	}
	if c := bytes.Compare(a.rank[8:], b.rank[8:]); c != 0 {
		return c < 0 // ^stored_at: the newer first
	}
	return cmpCandidates(a, b) < 0
}

// worstFirst is a heap of candidates whose root weighs least.
type worstFirst []candidate

func (h worstFirst) Len() int           { return len(h) }
func (h worstFirst) Less(i, j int) bool { return weighsMore(&h[j], &h[i]) }
func (h worstFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *worstFirst) Push(x any)        { *h = append(*h, x.(candidate)) }
func (h *worstFirst) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// prefetchCandidates announces the reads of the facts of cs (see
// Prefetcher).
func prefetchCandidates(tx Tx, cs []*candidate) {
	if _, ok := tx.(Prefetcher); !ok {
		return
	}
	ids := make([][]byte, len(cs))
	for i := range cs {
		ids[i] = []byte(cs[i].factID())
	}
	prefetch(tx, bucketFacts, ids)
}

// mayBeat reports whether the candidate of b may rank before the fact r
// (see less): at best it scores b.ub with its stored confidence as its
// effective one, and it is of its stored_at and id.
func mayBeat(b bound, r RankedFact) bool {
	if b.ub != r.Score {
		return b.ub > r.Score
	}
	if conf := b.c.conf(); conf != r.Effective {
		return conf > r.Effective
	}
	at, rat := int64(^binary.BigEndian.Uint64(b.c.rank[8:])), r.StoredAt.UnixNano()
	if at != rat {
		return at > rat
	}
	return b.c.factID() < r.ID
}

// bound is a candidate with the most it can score: its relevance times
// its stored confidence.
type bound struct {
	ub float64
	c  *candidate
}

// boundHeap orders candidates by bound, highest first, then newest first,
// then by id.
type boundHeap []bound

func (h boundHeap) Len() int { return len(h) }
func (h boundHeap) Less(i, j int) bool {
	if h[i].ub != h[j].ub {
		return h[i].ub > h[j].ub
	}
	if c := bytes.Compare(h[i].c.rank[8:], h[j].c.rank[8:]); c != 0 {
		return c < 0 // ^stored_at: the newer first
	}
	return cmpCandidates(h[i].c, h[j].c) < 0
}
func (h boundHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *boundHeap) Push(x any)   { *h = append(*h, x.(bound)) }
func (h *boundHeap) Pop() any {
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
