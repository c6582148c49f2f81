package index

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
type Phrase struct {
	terms  map[string]int // a term of the query → its index
	pairs  map[[2]int]float64
	starts Starts
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
	p := &Phrase{terms: make(map[string]int, len(terms)), pairs: make(map[[2]int]float64)}
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
		if prev >= 0 && prev != i {
			p.pairs[[2]int{prev, i}] = PairWeight * min(weight[prev], weight[i])
		}
		prev = i
	})
	if len(p.pairs) == 0 {
		return nil
	}
	for t := range p.terms {
		p.starts.Add(t)
	}
	return p
}

// Score returns what texts (the parts of one segment, such as its title
// and its text) add to the query's score: the weights of the query's
// pairs they hold, each once. A pair does not span two texts. A nil
// Phrase adds nothing.
func (p *Phrase) Score(texts ...string) float64 {
	if p == nil {
		return 0
	}
	var score float64
	var seen map[[2]int]bool
	prev := -1
	pair := func(w Word) {
		if IsStop(w.Lower) {
			return
		}
		i := -1
		if p.starts.Lets([]byte(w.Lower)) {
			if t, ok := p.terms[Stem(w.Lower)]; ok {
				i = t
			}
		}
		if prev >= 0 && i >= 0 && prev != i {
			k := [2]int{prev, i}
			if pw, ok := p.pairs[k]; ok && !seen[k] {
				if seen == nil {
					seen = make(map[[2]int]bool, len(p.pairs))
				}
				seen[k] = true
				score += pw
			}
		}
		prev = i
	}
	for _, text := range texts {
		prev = -1
		Split(text, pair)
	}
	return score
}
