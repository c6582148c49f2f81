package index

import "strings"

// Phrase scores what a text holds of a query beyond its terms: the
// query's words side by side, in the query's order. BM25 counts terms
// wherever they stand, yet a passage that says "read the whole file"
// answers the query "read whole file" better than one that reads one file
// and writes another whole.
//
// A pair is two words of the query that follow each other, stop words
// between them passed over, with different terms; a text holds it where
// words of its two terms follow each other so, in that order.
// [Phrase.Score] adds, for every pair a text holds, [PairWeight] times the
// lesser weight of its two terms, where a term's weight is what it weighs
// in the query's BM25 (its idf, scaled by [QueryWeights]).
//
// A Phrase is not safe for concurrent use.
type Phrase struct {
	terms  map[string]int // a term of the query → its index
	pairs  map[[2]int]pair
	starts Starts
	seen   []bool // by pair, during ScoreSequence
}

// pair is one pair of a [Phrase]: its weight and its index.
type pair struct {
	weight float64
	at     int
}

// PairWeight is the share of the lesser weight of its two terms that a
// pair adds to the score of a text holding it: about what one of them
// would add again, so that the pair reorders texts close in BM25 without
// outweighing another word of the query. It was measured best, or near
// it, on three corpora of different kinds (conversations, a test
// collection of engineering abstracts, Go documentation), between 0.25
// and 1.
const PairWeight = 0.5

// NewPhrase returns the phrase of query text, whose terms are terms
// ([Query] of text) of weight each (weight[i] for terms[i]; a term of no
// positive weight is in no pair). It returns nil when text has no pair.
func NewPhrase(text string, terms []QueryTerm, weight []float64) *Phrase {
	p := &Phrase{terms: make(map[string]int, len(terms)), pairs: make(map[[2]int]pair)}
	for i, t := range terms {
		if i < len(weight) && weight[i] > 0 {
			p.terms[t.Term] = i
		}
	}
	prev := -1
	Split(text, func(w Word) {
		if IsStop(w.Lower) {
			return
		}
		i, ok := p.terms[Stem(w.Lower)]
		if !ok {
			prev = -1
			return
		}
		if k := [2]int{prev, i}; prev >= 0 && prev != i {
			if _, ok := p.pairs[k]; !ok {
				p.pairs[k] = pair{PairWeight * min(weight[prev], weight[i]), len(p.pairs)}
			}
		}
		prev = i
	})
	if len(p.pairs) == 0 {
		return nil
	}
	p.seen = make([]bool, len(p.pairs))
	for t := range p.terms {
		p.starts.Add(t)
	}
	return p
}

// Score returns what texts (the parts of one segment, such as its title
// and its text) add to the query's score: the weights of the query's
// pairs they hold, each once. A pair does not span two texts. A nil
// Phrase adds nothing. It is [Phrase.ScoreSequence] of [NewSequence] of
// texts.
func (p *Phrase) Score(texts ...string) float64 {
	if p == nil {
		return 0
	}
	return p.ScoreSequence(NewSequence(texts...))
}

// A Sequence is a text as a [Phrase] reads it: the term of each of its
// words in order, a stop word standing as an empty term. A caller that
// scores the same text for many queries (a cache of segments) analyses it
// once, with NewSequence, and scores it with [Phrase.ScoreSequence].
type Sequence struct {
	terms string   // the terms, one after the other
	ends  []uint32 // the end of each word's term in terms
	parts []int    // the index of the first word of each text after the first
}

// NewSequence returns the sequence of texts, the parts of one text that
// no pair spans.
func NewSequence(texts ...string) *Sequence { return sequence(Stem, texts) }

// Sequence is [NewSequence], with the stems the Analyzer remembers.
func (a *Analyzer) Sequence(texts ...string) *Sequence { return sequence(a.Stem, texts) }

func sequence(stem func(string) string, texts []string) *Sequence {
	var b strings.Builder
	s := new(Sequence)
	for i, text := range texts {
		if i > 0 {
			s.parts = append(s.parts, len(s.ends))
		}
		Split(text, func(w Word) {
			if !IsStop(w.Lower) {
				b.WriteString(stem(w.Lower))
			}
			s.ends = append(s.ends, uint32(b.Len()))
		})
	}
	s.terms = b.String()
	return s
}

// Bytes is about what s holds in memory.
func (s *Sequence) Bytes() int { return len(s.terms) + 4*len(s.ends) + 8*len(s.parts) + 64 }

// ScoreSequence is [Phrase.Score] of the texts of s.
func (p *Phrase) ScoreSequence(s *Sequence) float64 {
	if p == nil || s == nil {
		return 0
	}
	var score float64
	clear(p.seen)
	prev, start, part := -1, uint32(0), 0
	for j, end := range s.ends {
		if part < len(s.parts) && s.parts[part] == j {
			prev = -1
			part++
		}
		t := s.terms[start:end]
		start = end
		switch {
		case t == "": // a stop word
			continue
		case len(t) >= 2 && !p.starts.lets(t[0], t[1]):
			prev = -1
			continue
		}
		i, ok := p.terms[t]
		if !ok {
			prev = -1
			continue
		}
		if prev >= 0 && prev != i {
			if pr, ok := p.pairs[[2]int{prev, i}]; ok && !p.seen[pr.at] {
				p.seen[pr.at] = true
				score += pr.weight
			}
		}
		prev = i
	}
	return score
}
