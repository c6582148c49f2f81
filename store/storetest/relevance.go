package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

// testFactRelevance stores facts with store.PutFact and checks that keyword
// queries rank them by relevance on the backend: the ranking reads the
// keyword index's blocks in key order, forwards and backwards, and
// counts, so a backend that scans out of order, or misses keys, ranks
// differently.
func testFactRelevance(t *testing.T, b store.Backend) {
	ctx := context.Background()
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	type fact struct {
		name, entity, value string
		conf                float64
		age                 time.Duration
	}
	facts := []fact{
		{"lgbtq", "person:caroline", "I went to an LGBTQ support group yesterday and it was powerful", 0.8, 96 * time.Hour},
		{"pie", "person:mel", "We baked a red apple pie for the picnic", 0.8, 90 * time.Hour},
		{"car", "person:mel", "My brother bought a red car last week", 0.8, 80 * time.Hour},
		{"tree", "person:mel", "The apple tree in our garden is blooming", 0.8, 70 * time.Hour},
		{"exact-low", "project:a", "status of topic7 is green", 0.5, 60 * time.Hour},
		{"exact-high", "project:b", "status of topic7 is amber", 0.9, 60 * time.Hour},
	}
	// Newer facts that hold one word of a question each, and older ones of
	// the same confidence holding longer words that start with "topic7".
	for i := range 5 {
		facts = append(facts, fact{fmt.Sprintf("support%d", i), "person:caroline", fmt.Sprintf("Thanks for the support with move number %d", i), 0.8, time.Duration(i) * time.Hour})
	}
	for i := range 30 {
		facts = append(facts, fact{fmt.Sprintf("longer%d", i), "project:c", fmt.Sprintf("status of topic7%02d is green", i), 0.5, 60*time.Hour + time.Duration(i)*time.Minute})
	}
	ids := make(map[string]string) // name → fact id
	names := make(map[string]string)
	require.NoError(t, b.Update(ctx, func(tx store.Tx) error {
		for _, f := range facts {
			stored, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "t"},
				Entity: f.entity, Key: f.name, Value: f.value, Confidence: f.conf, Now: now.Add(-f.age)})
			if err != nil {
				return err
			}
			ids[f.name], names[stored.ID] = stored.ID, f.name
		}
		return nil
	}))
	search := func(text string, limit int) []string {
		t.Helper()
		var res store.FactResult
		require.NoError(t, b.View(ctx, func(tx store.Tx) error {
			var err error
			res, err = store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: "t"},
				Terms: store.QueryWords(text), Limit: limit, Now: now, Policy: store.DefaultDecayPolicy})
			return err
		}))
		var out []string
		for i, f := range res.Facts {
			assert.Greater(t, f.Score, 0.0, "%q: row %d has no score", text, i)
			if i > 0 {
				assert.LessOrEqual(t, f.Score, res.Facts[i-1].Score, "%q: row %d scores above the row before", text, i)
			}
			out = append(out, names[f.ID])
		}
		return out
	}

	// The fact holding every word of the question first, though five newer
	// ones say "support".
	got := search("What did Caroline say about the LGBTQ support group?", 10)
	require.NotEmpty(t, got)
	assert.Equal(t, "lgbtq", got[0])
	assert.Len(t, got, 6, "the LGBTQ fact and the five that say support")

	// More of the question's words outrank fewer.
	got = search("red apple pie recipe", 3)
	assert.Equal(t, []string{"pie"}, got[:1])
	assert.ElementsMatch(t, []string{"pie", "car", "tree"}, got)

	// An exact word outranks the thirty longer words it starts, and the
	// higher confidence of two equal texts goes first.
	got = search("topic7", 5)
	assert.Equal(t, []string{"exact-high", "exact-low"}, got[:2])
	assert.Len(t, got, 5)

	// Question words alone still ask for something: none of them is
	// dropped when nothing else is left.
	got = search("what is it", 50)
	assert.Len(t, got, 34, "every fact that says is or it")
}
