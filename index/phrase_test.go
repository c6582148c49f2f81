package index

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPhrase(t *testing.T) {
	terms, _ := Query("read the whole file")
	w := []float64{2, 3, 5} // read, whole, file
	p := NewPhrase("read the whole file", terms, w)
	pair := func(a, b float64) float64 { return PairWeight * min(a, b) }

	for _, c := range []struct {
		texts []string
		want  float64
		why   string
	}{
		{[]string{"it reads the whole file"}, pair(2, 3) + pair(3, 5), "both pairs, a stemmed form and a stop word between"},
		{[]string{"whole file; whole file, read whole"}, pair(3, 5) + pair(2, 3), "each pair once"},
		{[]string{"file whole read"}, 0, "the query's order only"},
		{[]string{"read a big whole file"}, pair(3, 5), "a word that is no term parts a pair"},
		{[]string{"read", "whole file"}, pair(3, 5), "a pair never spans two texts"},
		{[]string{"READ WHOLE"}, pair(2, 3), "case does not count"},
		{nil, 0, "no text"},
	} {
		assert.InDelta(t, c.want, p.Score(c.texts...), 1e-12, c.why)
	}

	one, _ := Query("file")
	assert.Nil(t, NewPhrase("file", one, []float64{1}), "one term: no pair")
	again, _ := Query("file files")
	assert.Nil(t, NewPhrase("file files", again, []float64{1}), "a pair is of two terms")
	assert.Nil(t, NewPhrase("read the whole file", terms, []float64{2, 0, 5}), "a term of no weight is in no pair, and breaks one")
	assert.Zero(t, (*Phrase)(nil).Score("read whole"))
}

// BenchmarkPhraseScore: the phrase of a question of nine words over a
// segment of about 1,200 bytes of prose, as query reranks twenty of them.
func BenchmarkPhraseScore(b *testing.B) {
	q := "what similarity laws must be obeyed when constructing aeroelastic models of heated high speed aircraft"
	terms, _ := Query(q)
	w := make([]float64, len(terms))
	for i := range w {
		w[i] = 1 + float64(i%3)
	}
	p := NewPhrase(q, terms, w)
	text := strings.Repeat("The boundary layer of a heated flat plate in high speed flow is studied with the similarity laws of the problem; ", 11)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		p.Score("Heated aircraft models", text)
	}
}
