package index_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/crux-go/crux/index"
)

func TestIsQuestion(t *testing.T) {
	for text, want := range map[string]bool{
		"When did Caroline go to the support group?": true,
		"what fields would she pursue":               true,
		"Did Melanie paint a sunrise ?  ":            true,
		"can the flow be calculated":                 true,
		"has anyone tried":                           true,
		"How-to guides for the index":                true,
		"Client Do sends a request":                  false,
		"being one field":                            false,
		"whether it can":                             false,
		"":                                           false,
	} {
		assert.Equal(t, want, index.IsQuestion(text), text)
	}
}

func TestQueryWeights(t *testing.T) {
	q := "When did Caroline paint her sunrise?"
	qt, _ := index.Query(q)
	ws := index.QueryWeights(q, qt)
	if assert.Len(t, ws, len(qt)) {
		for i, term := range qt {
			want := 1.0
			switch term.Words[0] {
			case "when", "did", "her":
				want = index.QuestionWordWeight
			}
			assert.Equal(t, want, ws[i], term.Words[0])
		}
	}
	// Not a question: every word counts in full.
	kw := "caroline did paint"
	qt, _ = index.Query(kw)
	assert.Nil(t, index.QueryWeights(kw, qt))
	// A question of question words alone asks by them.
	only := "Who did what?"
	qt, _ = index.Query(only)
	assert.Nil(t, index.QueryWeights(only, qt))
	// A question of one term asks by it.
	one := "When?"
	qt, _ = index.Query(one)
	assert.Nil(t, index.QueryWeights(one, qt))
}
