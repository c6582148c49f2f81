package store

import (
	"encoding/binary"
	"errors"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/crux-go/crux/index"
)

// MaxWordBytes is the longest word the keyword index holds; longer words are
// indexed by their first MaxWordBytes bytes.
const MaxWordBytes = index.MaxTermBytes

// Words splits text into the words the keyword index holds: maximal runs of
// letters and digits at least two bytes long, lowercased, cut to
// MaxWordBytes and stemmed (index.Words: "databases" and "database" are
// one word), without duplicates, in order of first appearance. Unlike the
// document index, it keeps common words: a fact may be asked for by any of
// its words.
func Words(text string) []string { return index.Words(text) }

// factText is the text whose words the keyword index holds for f.
func factText(f *Fact) string { return f.Value + " " + f.Key + " " + f.Entity }

// countWords returns the words of text as [Words] does, in the same
// order, with how many of text's words have each as their stem (its term
// frequency), and text's number of words: what the postings of a fact
// carry for BM25 (see postings.go).
func countWords(text string) (words []string, tfs []uint32, dl int) {
	var at map[string]int // once words is longer than distinctScan; until then words is searched
	index.Split(text, func(w index.Word) {
		dl++
		t := index.Stem(w.Lower)
		i := -1
		if at != nil {
			if j, ok := at[t]; ok {
				i = j
			}
		} else {
			for j, o := range words {
				if o == t {
					i = j
					break
				}
			}
		}
		if i >= 0 {
			tfs[i]++
			return
		}
		words, tfs = append(words, t), append(tfs, 1)
		if at != nil || len(words) > distinctScan {
			if at == nil {
				at = make(map[string]int, 2*len(words))
				for j, o := range words {
					at[o] = j
				}
			}
			at[t] = len(words) - 1
		}
	})
	return words, tfs, dl
}

// distinctScan is how many distinct words countWords finds by searching
// the list of those it found before a map takes over.
const distinctScan = 32

// FactQuery selects and ranks facts. Zero fields do not filter.
type FactQuery struct {
	Scope // the caller

	Entity       string // exact logical entity
	EntityPrefix string // logical entity prefix
	Key          string // exact key
	// Terms are keyword terms (see Words and QueryWords): a fact matches
	// when one of its words starts with any of them, and matching facts
	// rank by their relevance to them times their effective confidence.
	Terms []string

	// IncludeSuperseded also returns facts that a later one retired.
	IncludeSuperseded bool
	// AsOf, when set, returns the facts whose valid-time interval contains
	// it, superseded or not.
	AsOf time.Time
	// MinEffective drops facts whose effective confidence is below it.
	MinEffective float64
	// Limit caps the result; 0 means no cap.
	Limit int
	// Rerank, when set, is how many of a keyword query's candidates, the
	// best by their postings, give the mean length of its BM25 (see
	// [SearchFacts]), at least Limit; else 100 or twice Limit, whichever
	// is more (without a Limit, every candidate does). Every candidate is
	// scored exactly however many it is, so that a query of Limit k
	// returns the first k facts the same query without Limit returns
	// (Rerank set).
	Rerank int

	Now    time.Time
	Policy DecayPolicy
}

// RankedFact is a fact with its freshness at query time.
type RankedFact struct {
	*Fact
	Freshness string
	// Effective is EffectiveConfidence(Confidence, Freshness), except for a
	// fact the querying agent pinned: pinned facts survive decay, so they
	// rank at their stored confidence even when stale.
	Effective float64
	Pinned    bool // pinned by the querying agent
	// Score is what the fact ranks by: for a keyword query, its relevance
	// to the terms times Effective (see the package's keyword ranking);
	// otherwise Effective.
	Score float64
}

// FactResult is the outcome of [SearchFacts].
type FactResult struct {
	Facts []RankedFact
	// BelowFloor counts facts that matched every filter but fell below
	// MinEffective. For keyword and unfiltered queries, ranking stops early,
	// so the count is then a lower bound; it is at least 1 whenever the
	// result is not full (fewer than Limit facts) and some matching fact
	// lies below the floor.
	BelowFloor int
}

// SearchFacts returns the facts matching q, best first: with keyword terms
// by relevance times effective confidence, else by effective confidence,
// then newest first. Candidates come from an index (the entity chain, the
// key index, the keyword postings or the confidence index), so the work
// grows with the number of matching facts, not with the size of the store.
// Unfiltered queries visit candidates by stored confidence and stop as soon
// as no later one can enter the result; keyword queries score their
// candidates from their postings and read them best first, until no later
// one can enter the result (see searchTerms), so both read few more facts
// than they return.
func SearchFacts(tx Tx, q FactQuery) (FactResult, error) {
	switch {
	case q.Entity != "" || q.EntityPrefix != "":
		entity, exact := q.Entity, true
		if entity == "" {
			entity, exact = q.EntityPrefix, false
		}
		stored := q.storedNames(entity)
		var prefixes [][]byte
		for _, s := range stored {
			p := indexKey(q.Tenant, s)
			if exact {
				// "t\x00entity\x00" or "t\x00entity\x00key\x00": exactly this entity (and key).
				p = indexKey(q.Tenant, s, q.Key)
				if q.Key != "" {
					p = append(p, 0)
				}
			}
			prefixes = append(prefixes, p)
		}
		return rankIDs(tx, q, bucketEntity, prefixes)
	case q.Key != "":
		var res FactResult
		err := scanKeyIndex(tx, q.Tenant, append(indexKey(q.Tenant, q.Key), 0),
			func(_, stored string) bool { return !keyEntrySeen(stored, q.Agent) },
			func(v []byte) error { return q.rankInto(tx, &res, v) })
		if err != nil {
			return res, err
		}
		return q.scoreAndFinish(tx, res)
	case len(q.Terms) > 0:
		return searchTerms(tx, q)
	}
	// The shared pool's partition, then the caller's own: each in rank
	// order, so each stops early on its own.
	return rankStream(tx, q, bucketRank, func(visit func([]byte) error) error {
		for _, scope := range rankScopes(q.Agent) {
			if err := scanRank(tx, q.Tenant, scope, visit); err != nil {
				return err
			}
		}
		return nil
	})
}

// rankIDs ranks every fact whose id is the value of a key under one of the
// prefixes of bucket.
func rankIDs(tx Tx, q FactQuery, bucket string, prefixes [][]byte) (FactResult, error) {
	var res FactResult
	for _, p := range prefixes {
		err := tx.Scan(bucket, p, false, func(_, v []byte) error { return q.rankInto(tx, &res, v) })
		if err != nil {
			return res, err
		}
	}
	return q.scoreAndFinish(tx, res)
}

// scoreAndFinish scores the facts of res by their relevance to q's terms,
// if it has any, then finishes res.
func (q *FactQuery) scoreAndFinish(tx Tx, res FactResult) (FactResult, error) {
	if len(q.Terms) > 0 && len(res.Facts) > 0 {
		stats, err := termStats(tx, q.Tenant, q.Terms)
		if err != nil {
			return res, err
		}
		scoreFacts(res.Facts, stats)
	}
	return q.finish(res), nil
}

// rankInto reads the fact that the entity-index value v names, and adds
// it to res when it passes q.
func (q *FactQuery) rankInto(tx Tx, res *FactResult, v []byte) error {
	f, err := entryFact(tx, v)
	if err != nil {
		return SkipCorrupt(tx, err)
	}
	r, ok, err := q.rank(tx, f, true)
	if err != nil {
		return err
	}
	if ok {
		if r.Effective < q.MinEffective {
			res.BelowFloor++
		} else {
			res.Facts = append(res.Facts, r)
		}
	}
	return nil
}

// finish sorts the facts of res and cuts them to q.Limit.
func (q *FactQuery) finish(res FactResult) FactResult {
	sortRanked(res.Facts)
	if q.Limit > 0 && len(res.Facts) > q.Limit {
		res.Facts = res.Facts[:q.Limit]
	}
	return res
}

// rankStream ranks candidates that each yields as a rank key (^confidence,
// ^stored_at, fact id) read from the index bucket, in ascending key order, that is by stored
// confidence, highest first. A fact's effective confidence never exceeds
// its stored one, so once an entry cannot beat the weakest of a full
// result, no later one can either.
func rankStream(tx Tx, q FactQuery, index string, each func(visit func(key []byte) error) error) (FactResult, error) {
	var res FactResult
	err := each(func(k []byte) error {
		conf := math.Float64frombits(^binary.BigEndian.Uint64(k))
		if q.Limit > 0 && len(res.Facts) >= q.Limit {
			weakest := res.Facts[len(res.Facts)-1]
			stored := int64(^binary.BigEndian.Uint64(k[8:]))
			if conf < weakest.Effective || conf == weakest.Effective && stored < weakest.StoredAt.UnixNano() {
				return ErrStop
			}
		}
		f, err := indexedFact(tx, index, string(k[16:]))
		if err != nil {
			return SkipCorrupt(tx, err)
		}
		r, ok, err := q.rank(tx, f, false)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		if r.Effective < q.MinEffective {
			res.BelowFloor++
			if conf < q.MinEffective {
				return ErrStop // nothing later can reach the floor
			}
			return nil
		}
		res.Facts = insertRanked(res.Facts, r, q.Limit)
		return nil
	})
	if errors.Is(err, ErrStop) {
		err = nil
	}
	return res, err
}

// rank applies q's filters to f (the keyword terms only when checkTerms)
// and, when it passes, computes its freshness.
func (q *FactQuery) rank(tx Tx, f *Fact, checkTerms bool) (RankedFact, bool, error) {
	if !q.Sees(f) || f.Deleted {
		return RankedFact{}, false, nil
	}
	if !q.AsOf.IsZero() {
		if !f.ValidAt(q.AsOf) {
			return RankedFact{}, false, nil
		}
	} else if !q.IncludeSuperseded && f.SupersededBy != "" {
		return RankedFact{}, false, nil
	}
	switch {
	case q.Entity != "" && f.Entity != q.Entity,
		q.EntityPrefix != "" && !strings.HasPrefix(f.Entity, q.EntityPrefix),
		q.Key != "" && f.Key != q.Key:
		return RankedFact{}, false, nil
	}
	if IsReserved(f.Entity) && !IsReserved(q.Entity) && !IsReserved(q.EntityPrefix) {
		return RankedFact{}, false, nil
	}
	if checkTerms && len(q.Terms) > 0 && !matchesTerms(f, q.Terms) {
		return RankedFact{}, false, nil
	}
	r := RankedFact{Fact: f, Freshness: q.Policy.Freshness(f.HorizonClass, f.Anchor(), q.Now)}
	r.Effective = EffectiveConfidence(f.Confidence, r.Freshness)
	if r.Freshness == Stale && q.Agent != "" {
		var err error
		if r.Pinned, err = IsPinned(tx, Scope{Tenant: q.Tenant, Agent: q.Agent}, f.ID); err != nil {
			return RankedFact{}, false, err
		}
		if r.Pinned {
			r.Effective = f.Confidence
		}
	}
	r.Score = r.Effective
	return r, true, nil
}

func matchesTerms(f *Fact, terms []string) bool {
	for _, w := range Words(f.Value + " " + f.Key + " " + f.Entity) {
		for _, t := range terms {
			if strings.HasPrefix(w, t) {
				return true
			}
		}
	}
	return false
}

func less(a, b RankedFact) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	if a.Effective != b.Effective {
		return a.Effective > b.Effective
	}
	if !a.StoredAt.Equal(b.StoredAt) {
		return a.StoredAt.After(b.StoredAt)
	}
	return a.ID < b.ID
}

func sortRanked(rs []RankedFact) { sort.Slice(rs, func(i, j int) bool { return less(rs[i], rs[j]) }) }

// insertRanked inserts r into the sorted slice rs, keeping at most limit
// entries (0: no limit).
func insertRanked(rs []RankedFact, r RankedFact, limit int) []RankedFact {
	i := sort.Search(len(rs), func(i int) bool { return less(r, rs[i]) })
	if limit > 0 && i >= limit {
		return rs
	}
	rs = append(rs, RankedFact{})
	copy(rs[i+1:], rs[i:])
	rs[i] = r
	if limit > 0 && len(rs) > limit {
		rs = rs[:limit]
	}
	return rs
}

// QueryWords splits a question or keyword query into the words that rank
// facts by relevance: those of [Words] less stop words and, in a question,
// question words (index.QueryWords), or all of them when the query has no
// other.
func QueryWords(text string) []string { return index.QueryWords(text) }
