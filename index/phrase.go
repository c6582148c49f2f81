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
//
// A Phrase is not safe for concurrent use.
type Phrase struct {
	terms  map[string]int // a term of the query → its index
	pairs  map[[2]int]pair
	starts Starts
	// words remembers what each word Score met is: the index of its
	// term, notTerm or stopWord; a text repeats its words, and a query's
	// segments each other's.
	words map[string]int
	seen  []bool // by pair, during Score
}

// pair is one pair of a [Phrase]: its weight and its index.
type pair struct {
	weight float64
	at     int
}

// What a word Score meets is besides a term of the query.
const (
	notTerm  = -1
	stopWord = -2
)

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
	p := &Phrase{terms: make(map[string]int, len(terms)), pairs: make(map[[2]int]pair), words: make(map[string]int)}
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
// Phrase adds nothing.
//
// Only the words that may stem to a term of the query are looked at
// (SplitStarting); whether two of them follow each other is then told by
// the text between them, which must hold stop words alone.
func (p *Phrase) Score(texts ...string) float64 {
	if p == nil {
		return 0
	}
	var score float64
	clear(p.seen)
	for _, text := range texts {
		prev, prevEnd := -1, 0
		SplitStarting(text, &p.starts, func(w Word) {
			i := p.word(w.Lower)
			switch {
			case i == stopWord:
				return
			case i == notTerm:
				prev = -1
				return
			case prev >= 0 && prev != i:
				if pr, ok := p.pairs[[2]int{prev, i}]; ok && !p.seen[pr.at] && onlyStops(text[prevEnd:w.Start]) {
					p.seen[pr.at] = true
					score += pr.weight
				}
			}
			prev, prevEnd = i, w.End
		})
	}
	return score
}

// word returns what the lowercased word w is: the index of its term,
// notTerm or stopWord.
func (p *Phrase) word(w string) int {
	if i, ok := p.words[w]; ok {
		return i
	}
	i := stopWord
	if !IsStop(w) {
		var ok bool
		if i, ok = p.terms[Stem(w)]; !ok {
			i = notTerm
		}
	}
	p.words[w] = i
	return i
}

// onlyStops reports whether text holds no word but stop words.
func onlyStops(text string) bool {
	only := true
	Split(text, func(w Word) { only = only && IsStop(w.Lower) })
	return only
}
