package store

import (
	"cmp"
	"errors"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Neighbour context: what a segment says is often completed by the
// segments around it (the answer to a question asked in the segment
// before, the next paragraph of an explanation, the next turn of a
// conversation that a tenant holds one document per turn of). A
// DocQuery with Context lets a segment take part of the score of a
// better-scoring neighbour:
//
//   - the segments before and after it in its document, and
//   - the last segment of the document written just before its own, or
//     the first of the one written just after, when the two documents'
//     titles are alike (share at least ContextTitleOverlap of their words:
//     the turns of one conversation session, the parts of one chapter),
//
// rising ContextShare of the way from its own score towards the
// neighbour's. A segment holding no query term can so rank next to the
// one that does; a segment is never lowered.

// ContextShare is the part of the gap to a better neighbour's score that
// a segment takes.
const ContextShare = 0.5

// ContextTitleOverlap is the least share of their distinct words (the
// words both hold, of the words either holds) that makes the titles of
// two documents written one after the other alike.
const ContextTitleOverlap = 0.5

// contextNeighbours returns the seqs (below next) next to a hit that are
// not hits themselves, sorted.
func contextNeighbours(hits []DocHit, next uint32) []uint32 {
	in := make(map[uint32]bool, len(hits))
	for _, h := range hits {
		in[h.Seq] = true
	}
	var out []uint32
	for _, h := range hits {
		if h.Seq > 0 && !in[h.Seq-1] {
			out = append(out, h.Seq-1)
		}
		if h.Seq+1 < next && !in[h.Seq+1] {
			out = append(out, h.Seq+1)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// segHead is what linking neighbours reads of a segment record.
type segHead struct {
	doc, title string
}

// readSegHead reads the document id and title of segment seq of tenant
// (key is scratch space for its key); ok is false for a segment that is
// gone or unreadable.
func readSegHead(tx Tx, tenant string, seq uint32, key *[]byte) (segHead, bool, error) {
	*key = appendSegKey((*key)[:0], tenant, seq)
	v, err := tx.Get(bucketDocSegs, *key)
	if errors.Is(err, ErrNotFound) {
		return segHead{}, false, nil
	}
	if err != nil {
		return segHead{}, false, err
	}
	doc, _, _, title, _, ok := decodeSegHeader(v)
	if !ok || !utf8.ValidString(doc) || !utf8.ValidString(title) {
		return segHead{}, false, nil // crux doctor reports it
	}
	return segHead{doc: doc, title: title}, true, nil
}

// linker tells neighbours apart, reusing its word lists.
type linker struct{ a, b []string }

// linked reports whether the segments a and b, b written just after a,
// are neighbours: of one document, or of documents with alike titles.
func (l *linker) linked(a, b segHead) bool {
	switch {
	case a.doc == b.doc:
		return true
	case a.title == "" || b.title == "":
		return false
	case a.title == b.title:
		return true
	}
	l.a, l.b = titleWords(l.a[:0], a.title), titleWords(l.b[:0], b.title)
	if len(l.a) == 0 || len(l.b) == 0 {
		return false
	}
	both := 0
	for _, w := range l.a {
		if slices.ContainsFunc(l.b, func(x string) bool { return strings.EqualFold(w, x) }) {
			both++
		}
	}
	either := len(l.a) + len(l.b) - both
	return float64(both) >= ContextTitleOverlap*float64(either)
}

// titleWords appends the distinct words of title, as index.LowerWords
// finds them but not lowercased (they are compared without case), to
// out.
func titleWords(out []string, title string) []string {
	start := -1
	word := func(end int) {
		if w := title[start:end]; len(w) >= 2 && !slices.ContainsFunc(out, func(x string) bool { return strings.EqualFold(w, x) }) {
			out = append(out, w)
		}
		start = -1
	}
	for i, r := range title {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if start < 0 {
				start = i
			}
		case start >= 0:
			word(i)
		}
	}
	if start >= 0 {
		word(len(title))
	}
	return out
}

// liftContext lifts hits (best first) and their neighbours (nb, sorted,
// of BM25 scores nbScore) towards their better neighbours' scores, and
// returns the best limit, best first by Score + Context. A neighbour
// scoring under floor is left out, as BM25 left out the hits under it.
func liftContext(tx Tx, tenant string, hits []DocHit, nb []uint32, nbScore []float64, limit int, floor float64) ([]DocHit, error) {
	if len(hits) == 0 {
		return hits, nil
	}
	type entry struct {
		DocHit
		hit bool
	}
	all := make([]entry, 0, len(hits)+len(nb))
	for _, h := range hits {
		all = append(all, entry{h, true})
	}
	for i, s := range nb {
		all = append(all, entry{DocHit{Seq: s, Score: nbScore[i]}, false})
	}
	slices.SortFunc(all, func(a, b entry) int { return cmp.Compare(a.Seq, b.Seq) })
	if len(hits) >= limit {
		// limit hits score bar or more, and none is lowered: a neighbour
		// that cannot reach bar, even linked to the better hit next to
		// it, is not read.
		bar := hits[0].Score
		for _, h := range hits {
			bar = min(bar, h.Score)
		}
		keep := all[:0]
		for i, e := range all {
			if !e.hit {
				best := e.Score
				if i > 0 && all[i-1].hit && all[i-1].Seq+1 == e.Seq {
					best = max(best, all[i-1].Score)
				}
				if i+1 < len(all) && all[i+1].hit && all[i+1].Seq == e.Seq+1 {
					best = max(best, all[i+1].Score)
				}
				if e.Score+ContextShare*(best-e.Score) < bar {
					continue
				}
			}
			keep = append(keep, e)
		}
		all = keep
	}
	heads := make([]segHead, len(all))
	have := make([]bool, len(all))
	if _, ok := tx.(Prefetcher); ok {
		seqs := make([]uint32, len(all))
		for i, h := range all {
			seqs[i] = h.Seq
		}
		PrefetchSegments(tx, tenant, seqs) // one round trip for all
	}
	var key []byte
	for i, h := range all {
		var err error
		heads[i], have[i], err = readSegHead(tx, tenant, h.Seq, &key)
		if err != nil {
			return nil, err
		}
	}
	var l linker
	// next[i] says whether all[i] and all[i+1] are neighbours.
	next := make([]bool, len(all))
	for i := 0; i+1 < len(all); i++ {
		next[i] = have[i] && have[i+1] && all[i].Seq+1 == all[i+1].Seq && l.linked(heads[i], heads[i+1])
	}
	lifted := make([]DocHit, 0, len(all))
	for i, e := range all {
		h := e.DocHit
		if !have[i] {
			continue
		}
		best := h.Score
		if i > 0 && next[i-1] {
			best = max(best, all[i-1].Score)
		}
		if next[i] {
			best = max(best, all[i+1].Score)
		}
		if best > h.Score {
			h.Context = ContextShare * (best - h.Score)
		}
		if !e.hit && (h.Context == 0 || h.Score < floor) {
			continue // a neighbour is there for what it takes of a hit's score
		}
		lifted = append(lifted, h)
	}
	slices.SortFunc(lifted, func(a, b DocHit) int {
		if c := cmp.Compare(b.Score+b.Context, a.Score+a.Context); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	return lifted[:min(len(lifted), limit)], nil
}
