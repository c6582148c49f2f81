package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
)

// TestQueryFactsRanksByRelevance: with a query, the fact that holds more of
// its words, or rarer ones, comes first, whatever was stored later; the
// question's own words carry no weight; an exact word outranks the longer
// words it starts; every row says its score, best first.
func TestQueryFactsRanksByRelevance(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	put := func(entity, key, value string) {
		call(t, srv, alice, "store_fact", fmt.Sprintf(`{"entity":%q,"key":%q,"value":%q}`, entity, key, value))
		clk.Advance(time.Minute)
	}
	put("caroline", "t1", "I went to a LGBTQ support group yesterday and it was so powerful.")
	for i := range 12 {
		put("melanie", fmt.Sprint("s", i), fmt.Sprintf("Thanks for the support, it means a lot %d", i))
	}
	for i := range 5 {
		put("notes", fmt.Sprint("topic700-", i), fmt.Sprintf("about topic700 number %d", i))
	}
	put("notes", "topic7", "about topic7 itself")
	put("notes", "filler", "what did who when how")

	got := rows(t, call(t, srv, alice, "query_facts", `{"query":"When did Caroline go to the LGBTQ support group?"}`))
	require.NotEmpty(t, got)
	assert.Equal(t, "t1", got[0]["key"], "the turn with every word of the question first, not the newest with one")
	for i := 1; i < len(got); i++ {
		assert.GreaterOrEqual(t, got[i-1]["score"], got[i]["score"], "rows are best first")
		assert.NotEqual(t, "filler", got[i]["key"], "question words alone match nothing")
	}
	assert.Greater(t, got[0]["score"], 0.0)

	got = rows(t, call(t, srv, alice, "query_facts", `{"query":"topic7"}`))
	require.Len(t, got, 6)
	assert.Equal(t, "topic7", got[0]["key"], "the exact word before the longer words it starts")
	assert.Greater(t, got[0]["score"], got[1]["score"])

	// Filters keep the ranking: within one entity too.
	got = rows(t, call(t, srv, alice, "query_facts", `{"query":"support group","entity":"caroline"}`))
	require.Len(t, got, 1)
	assert.Equal(t, "t1", got[0]["key"])

	// A query of question words only still asks for them.
	got = rows(t, call(t, srv, alice, "query_facts", `{"query":"who when"}`))
	require.Len(t, got, 1)
	assert.Equal(t, "filler", got[0]["key"])

	// Without a query, the score is the effective confidence.
	got = rows(t, call(t, srv, alice, "query_facts", `{"entity":"caroline"}`))
	require.Len(t, got, 1)
	assert.Equal(t, got[0]["effective_confidence"], got[0]["score"])
}

// TestQueryFactsBoundsLargeValues: three values of 400 KB make a default
// answer of well under 64 KiB, each cut value saying its length; a
// token_budget large enough brings a value whole.
func TestQueryFactsBoundsLargeValues(t *testing.T) {
	srv, _, _ := newTestServer(t)
	big := strings.Repeat("enormous payload ", 400_000/17)
	for i := range 3 {
		call(t, srv, alice, "store_fact", fmt.Sprintf(`{"entity":"blob","key":"k%d","value":%q}`, i, big))
	}
	for _, args := range []string{`{"query":"enormous"}`, `{"entity":"blob"}`, `{}`} {
		res := result(t, srv, alice, "query_facts", args)
		b, err := json.Marshal(res)
		require.NoError(t, err)
		assert.Less(t, len(b), 64<<10, args)
		got := rows(t, structured(t, res))
		require.Len(t, got, 3, args)
		for _, r := range got {
			assert.EqualValues(t, len(big), r["value_bytes"], args)
			assert.True(t, strings.HasPrefix(big, r["value"].(string)), args)
			assert.Less(t, len(r["value"].(string)), len(big), args)
		}
	}
	got := rows(t, call(t, srv, alice, "query_facts", fmt.Sprintf(`{"entity":"blob","top_k":1,"token_budget":%d}`, len(big))))
	require.Len(t, got, 1)
	assert.Equal(t, big, got[0]["value"])
	assert.Nil(t, got[0]["value_bytes"])
}

// TestQueryBoundsLargeDocuments: three documents of 400 KB that all match
// make a query answer of less than 64 KiB, with the default limit or the
// largest; past the default token_budget, budget_truncated says
// segments were left out.
func TestQueryBoundsLargeDocuments(t *testing.T) {
	srv, _, _ := newTestServer(t)
	var docs []crux.Document
	for i := range 3 {
		docs = append(docs, crux.Document{ID: fmt.Sprintf("big%d", i), Text: strings.Repeat(fmt.Sprintf("enormous payload number %d. ", i), 400_000/27)})
	}
	_, err := srv.Ingest(context.Background(), "t", docs, nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		args      string
		truncated bool // the default token_budget leaves segments out
	}{
		{`{"tenant_id":"t","query":"enormous payload"}`, false},
		{`{"tenant_id":"t","query":"enormous payload","limit":100}`, true},
	} {
		res := result(t, srv, alice, "query", tc.args)
		b, err := json.Marshal(res)
		require.NoError(t, err)
		assert.Less(t, len(b), 64<<10, tc.args)
		got := structured(t, res)
		assert.NotEmpty(t, objects(t, got, "results"), tc.args)
		assert.Equal(t, tc.truncated, got["budget_truncated"] == true, tc.args)
	}
}
