package store

import (
	"bytes"
	"cmp"
	"container/heap"
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
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
// term and a quarter of each longer word that starts with it ("topic7" in
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
// set; see hits.lengthMean), and facts are read in order of relevance times
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
// longer than. A quarter ranked better than a half or an eighth on every
// corpus of bench/eval.sh (conversations, Cranfield, Go docs): a longer
// word is more often another word than a form of the term.
const prefixWeight = 0.25

// rerankMin is the least number of candidates whose mean length is a
// keyword query's avgdl (see hits.lengthMean).
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
	// w is, as a posting decodes, the fact's term frequency for the
	// posting's word (its count times the word's weight, see
	// wordWeight); in hits.facts, the fact's weight, then its relevance.
	w         float64
	dl        uint32  // the fact's number of words
	best      float32 // as a posting decodes: the weight of its word (see wordWeight)
	uncounted bool    // a posting carried no counts: w and dl are to be read from the fact
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

// termCandidates gathers into h (when not nil) the facts whose words hold
// each of terms (exactly, or as the start of a longer word), at most about
// 2·commonMax a term, and returns the terms' statistics without idf. With
// h nil, it only counts.
func termCandidates(tx Tx, tenant string, terms []string, h *hits) ([]termStat, error) {
	stats := make([]termStat, len(terms))
	for _, t := range terms {
		prefetchScan(tx, bucketWords, indexKey(tenant, t), false)
	}
	prefetchScan(tx, bucketFresh, indexKey(tenant, ""), false)
	prefetchFactCount(tx, tenant)
	var scratch []candidate           // one block's postings
	var exactKeys, exactVals [][]byte // one term's exact-word blocks
	if h != nil {
		h.reset(len(terms))
		scratch = h.scratch
		defer func() { h.scratch = scratch }()
	}
	for i, t := range terms {
		stats[i].term = t
		// decode adds the postings of the block v, of a word of weight w,
		// to h (or only counts them) and returns how many.
		decode := func(v []byte, w float64) int {
			scratch = appendCandidates(scratch[:0], v, w)
			if h != nil {
				for j := range scratch {
					h.add(i, &scratch[j])
				}
			}
			return len(scratch)
		}
		// One scan of the term's range: k is tenant, NUL, word, NUL, last
		// id, and the word is t exactly when a NUL follows the prefix.
		// The exact word's blocks come first, oldest first (ids are
		// time-ordered; the tail block last); they are kept until the
		// scan passes them, then decoded newest first up to commonMax
		// postings, the older ones counted. The longer words' blocks come
		// after them, decoded up to commonMax postings in all, the others
		// counted.
		prefix := indexKey(tenant, t)
		exactKeys, exactVals = exactKeys[:0], exactVals[:0]
		exactLeft := true
		takeExact := func() {
			exactLeft = false
			for j := len(exactVals) - 1; j >= 0; j-- {
				if stats[i].df >= commonMax {
					stats[i].df += blockPostings(exactKeys[j], exactVals[j])
				} else {
					stats[i].df += decode(exactVals[j], 1)
				}
			}
		}
		longer := 0 // postings of longer words decoded
		err := tx.Scan(bucketWords, prefix, false, func(k, v []byte) error {
			if len(k) > len(prefix) && k[len(prefix)] == 0 {
				exactKeys, exactVals = append(exactKeys, k), append(exactVals, v)
				return nil
			}
			if exactLeft {
				takeExact()
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
			return nil, err
		}
		if exactLeft {
			takeExact()
		}
	}
	// The postings not yet moved to the keyword index (see indexLive).
	var starts index.Starts
	for _, t := range terms {
		starts.Add(t)
	}
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
		var c candidate // made for the first term the fact holds
		made := false
		for i, b := range best {
			switch {
			case b == 0:
				continue
			case b == 1:
				stats[i].df++
			default:
				stats[i].dfPre++
			}
			if h != nil {
				if !made {
					c, made = newCandidate(string(k[len(tenant)+1:]), v[:16], 1, 1, uint32(dl)), true
				}
				c.w, c.best, c.uncounted = tfs[i], float32(b), dl == 0
				h.add(i, &c)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return stats, nil
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

// hits are the facts the postings of a keyword query's terms name: each
// fact once, and for each term each fact holding it once.
type hits struct {
	// facts are the facts named, in the order first named; w is their
	// weight (see lengthMean), then their relevance (see score).
	facts []candidate
	terms [][]termHit // by term: the facts holding it
	// slots is a hash table of the facts of standard ids (see find): 0
	// for an empty slot, else 1 + the fact's index; its length a power of
	// two at least twice the number of facts.
	slots []int32
	other map[string]int32 // facts of non-standard ids
	// last is, by fact, 1 + the last term that named it, and at where in
	// that term's hits the fact is.
	last, at []int32
	scratch  []candidate // termCandidates' decoded block, kept for the next query
}

// termHit is a fact that holds a term: what its postings for the term
// give, combined (see add).
type termHit struct {
	fact      int32 // in hits.facts
	dl        uint32
	tf        float64
	best      float32
	uncounted bool
}

// hitsPool recycles hits, whose maps and slices would otherwise be most of
// what a keyword query allocates (a megabyte for a question of a dozen
// words over long facts) and so most of the garbage collector's work.
var hitsPool = sync.Pool{New: func() any { return new(hits) }}

// maxPooledHits is the most facts of a hits kept for reuse.
const maxPooledHits = 1 << 16

// getHits takes an empty hits from hitsPool.
func getHits() *hits { return hitsPool.Get().(*hits) }

// put gives h back to hitsPool, unless it has grown past maxPooledHits;
// nothing may point into it any more. Slots far more than the query
// needed are dropped, so that the next query does not clear them.
func (h *hits) put() {
	if cap(h.facts) > maxPooledHits {
		return
	}
	if len(h.slots) > minSlots && len(h.slots) > 8*len(h.facts) {
		h.slots = nil
	}
	hitsPool.Put(h)
}

// minSlots is the number of slots a hits starts with.
const minSlots = 1024

// reset empties h for a query of n terms.
func (h *hits) reset(n int) {
	h.facts, h.last, h.at = h.facts[:0], h.last[:0], h.at[:0]
	if h.slots == nil {
		h.slots = make([]int32, minSlots)
	}
	clear(h.slots)
	clear(h.other)
	if cap(h.terms) < n {
		h.terms = append(h.terms[:cap(h.terms)], make([][]termHit, n-cap(h.terms))...)
	}
	h.terms = h.terms[:n]
	for i := range h.terms {
		h.terms[i] = h.terms[i][:0]
	}
}

// add records that c, a candidate of a posting, holds term i: a fact
// named again for the same term sums its term frequencies and keeps the
// larger dl and weight of its words.
func (h *hits) add(i int, c *candidate) {
	var f int32
	var ok bool
	var slot *int32
	if c.id == "" {
		slot = h.find(&c.raw)
		f, ok = *slot-1, *slot != 0
	} else {
		f, ok = h.other[c.id]
	}
	if !ok {
		f = int32(len(h.facts))
		if c.id == "" {
			*slot = f + 1
		} else {
			if h.other == nil {
				h.other = make(map[string]int32)
			}
			h.other[c.id] = f
		}
		h.facts = append(h.facts, *c)
		h.last, h.at = append(h.last, 0), append(h.at, 0)
		if 2*len(h.facts) > len(h.slots) {
			h.grow()
		}
	} else if c.uncounted {
		h.facts[f].uncounted = true
	}
	if h.last[f] == int32(i+1) {
		t := &h.terms[i][h.at[f]]
		t.tf += c.w
		t.dl, t.best = max(t.dl, c.dl), max(t.best, c.best)
		t.uncounted = t.uncounted || c.uncounted
		return
	}
	h.last[f], h.at[f] = int32(i+1), int32(len(h.terms[i]))
	h.terms[i] = append(h.terms[i], termHit{fact: f, dl: c.dl, tf: c.w, best: c.best, uncounted: c.uncounted})
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
	return termCandidatesIDF(tx, tenant, terms, nil)
}

// termCandidatesIDF is termCandidates with each term's idf set from the
// tenant's fact count.
func termCandidatesIDF(tx Tx, tenant string, terms []string, h *hits) ([]termStat, error) {
	stats, err := termCandidates(tx, tenant, terms, h)
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
// postings of its terms name the candidates and give their relevance, and
// the candidates are read best bound first until no later one can enter
// the result (see above).
func searchTerms(tx Tx, q FactQuery) (FactResult, error) {
	hs, err := scoreCandidates(tx, q.Tenant, q.Terms, q.lengthSample())
	if err != nil {
		return FactResult{}, err
	}
	defer hs.put() // h and batch point into it; the result does not
	all := hs.facts
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
// tenant, each once with its relevance to them as w (see hits.score); the
// caller puts them back.
func scoreCandidates(tx Tx, tenant string, terms []string, sample int) (*hits, error) {
	h := getHits()
	stats, err := termCandidatesIDF(tx, tenant, terms, h)
	if err == nil {
		err = countUncounted(tx, h, stats)
	}
	if err != nil {
		h.put()
		return nil, err
	}
	h.score(stats, h.lengthMean(stats, sample))
	return h, nil
}

// countUncounted gives the facts of h whose postings carry no counts
// (written before format 10) their term frequencies and dl, read from the
// facts as scoreFacts would count them. A fact that cannot be read keeps
// what its postings gave; it leaves the result when it is read again.
func countUncounted(tx Tx, h *hits, stats []termStat) error {
	var ids []string
	var counted map[int32]int // fact → its counts in tfs and dls
	for f := range h.facts {
		if h.facts[f].uncounted {
			ids = append(ids, h.facts[f].factID())
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
	var tfs [][]float64
	var dls []int
	for f := range h.facts {
		if !h.facts[f].uncounted {
			continue
		}
		fact, err := GetFact(tx, h.facts[f].factID())
		var ce *CorruptRecordError
		if errors.Is(err, ErrNotFound) || errors.As(err, &ce) {
			continue // searchTerms meets it again, and skips it
		}
		if err != nil {
			return err
		}
		if counted == nil {
			counted = make(map[int32]int)
		}
		counted[int32(f)] = len(tfs)
		tf, dl := m.termFrequencies(fact)
		tfs, dls = append(tfs, tf), append(dls, dl)
	}
	for i, ts := range h.terms {
		for j := range ts {
			t := &ts[j]
			if !t.uncounted {
				continue
			}
			if c, ok := counted[t.fact]; ok {
				t.tf, t.dl, t.uncounted = tfs[c][i], uint32(min(dls[c], tfMax)), false
			}
		}
	}
	return nil
}

// find returns the slot of the fact of the standard id raw: the one
// holding it, or else the empty one where it goes. (Ids made in the same
// millisecond differ by one, so their bytes are mixed, by Fibonacci
// hashing, before they place the fact.)
func (h *hits) find(raw *[16]byte) *int32 {
	mask := uint64(len(h.slots) - 1)
	x := binary.LittleEndian.Uint64(raw[:8]) ^ binary.LittleEndian.Uint64(raw[8:])
	for i := (x * 0x9e3779b97f4a7c15) >> (64 - bits.Len64(mask)); ; i = (i + 1) & mask {
		s := &h.slots[i]
		if *s == 0 || h.facts[*s-1].raw == *raw {
			return s
		}
	}
}

// grow doubles the slots of h and places its facts again.
func (h *hits) grow() {
	h.slots = make([]int32, 2*len(h.slots))
	for f := range h.facts {
		if h.facts[f].id == "" {
			*h.find(&h.facts[f].raw) = int32(f) + 1
		}
	}
}

// lengthMean returns the mean number of words of the n facts of h (all
// when n is 0) that their postings weigh best: by their stored confidence
// times the sum of the idf of the terms they hold, a longer word counting
// prefixWeight; ties go to the newer fact, then to the smaller id. The
// facts of unknown length count for none; the mean is 1 when no fact is
// of known length. It leaves each fact's weight in its w, and its dl the
// largest its postings give.
func (h *hits) lengthMean(stats []termStat, n int) float64 {
	fs := h.facts
	for f := range fs {
		fs[f].w, fs[f].dl = 0, 0
	}
	for i, ts := range h.terms {
		for _, t := range ts {
			x := &fs[t.fact]
			x.w += stats[i].idf * float64(t.best)
			x.dl = max(x.dl, t.dl)
		}
	}
	for f := range fs {
		fs[f].w *= fs[f].conf()
	}
	count, sum := 0, 0.0
	add := func(c *candidate) {
		if c.dl > 0 {
			count++
			sum += float64(c.dl)
		}
	}
	if n > 0 && n < len(fs) {
		// The n best, kept in a heap whose root is the worst of them.
		w := worstFirst{fs: fs, at: make([]int32, n)}
		for f := range w.at {
			w.at[f] = int32(f)
		}
		heap.Init(&w)
		for f := n; f < len(fs); f++ {
			if weighsMore(&fs[f], &fs[w.at[0]]) {
				w.at[0] = int32(f)
				heap.Fix(&w, 0)
			}
		}
		for _, f := range w.at {
			add(&fs[f])
		}
	} else {
		for f := range fs {
			add(&fs[f])
		}
	}
	if count == 0 {
		return 1
	}
	return sum / float64(count)
}

// score sets each fact's w to its relevance: the BM25 weights of the terms
// it holds, for facts of mean length avg.
func (h *hits) score(stats []termStat, avg float64) {
	for f := range h.facts {
		h.facts[f].w = 0
	}
	for i, ts := range h.terms {
		for _, t := range ts {
			if t.tf > 0 {
				h.facts[t.fact].w += bm25(stats[i].idf, t.tf, int(t.dl), avg)
			}
		}
	}
}

// weighsMore reports whether a comes before b by weight (see lengthMean).
func weighsMore(a, b *candidate) bool {
	if a.w != b.w {
		return a.w > b.w
	}
	if c := bytes.Compare(a.rank[8:], b.rank[8:]); c != 0 {
		return c < 0 // ^stored_at: the newer first
	}
	return cmpCandidates(a, b) < 0
}

// worstFirst is a heap of facts (at, indexes in fs) whose root weighs
// least.
type worstFirst struct {
	fs []candidate
	at []int32
}

func (h *worstFirst) Len() int           { return len(h.at) }
func (h *worstFirst) Less(i, j int) bool { return weighsMore(&h.fs[h.at[j]], &h.fs[h.at[i]]) }
func (h *worstFirst) Swap(i, j int)      { h.at[i], h.at[j] = h.at[j], h.at[i] }
func (h *worstFirst) Push(x any)         { h.at = append(h.at, x.(int32)) }
func (h *worstFirst) Pop() any {
	x := h.at[len(h.at)-1]
	h.at = h.at[:len(h.at)-1]
	return x
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
