package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
)

// gapTerms are the terms of a get_gaps tenant summary, term → count.
func gapTerms(t *testing.T, got map[string]any) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, term := range objects(t, got["tenant_summary"].(map[string]any), "terms") {
		out[term["term"].(string)] = int(term["count"].(float64))
	}
	return out
}

// gapValues are the values of a get_gaps answer's own records.
func gapValues(t *testing.T, got map[string]any) []string {
	t.Helper()
	var out []string
	for _, g := range objects(t, got, "gaps") {
		out = append(out, g["value"].(string))
	}
	return out
}

// miss runs a keyword query_facts that must find nothing, recording a gap.
func miss(t *testing.T, srv *crux.Server, c crux.Caller, args string) {
	t.Helper()
	require.Empty(t, rows(t, call(t, srv, c, "query_facts", args)))
}

func TestGetGapsRecordsZeroResultQueries(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	call(t, srv, alice, "store_fact", `{"entity":"project:crux","key":"lang","value":"Go"}`)
	assert.Empty(t, objects(t, call(t, srv, alice, "get_gaps", `{}`), "gaps"))

	// A query that finds something, and a filter-only query, record nothing.
	call(t, srv, alice, "query_facts", `{"query":"crux"}`)
	call(t, srv, alice, "query_facts", `{"entity":"nothing:here"}`)
	assert.Empty(t, objects(t, call(t, srv, alice, "get_gaps", `{}`), "gaps"))

	miss(t, srv, alice, `{"query":"kubernetes deployment"}`)
	clk.Advance(time.Minute)
	miss(t, srv, alice, `{"query":"billing","entity_prefix":"finance:"}`)
	clk.Advance(time.Minute)
	miss(t, srv, alice, `{"query":"kubernetes deployment"}`)

	got := call(t, srv, alice, "get_gaps", `{}`)
	gaps := objects(t, got, "gaps")
	require.Len(t, gaps, 2, "one record per distinct query")
	assert.EqualValues(t, 2, got["count"])
	assert.Equal(t, false, got["truncated"])
	assert.Equal(t, "__ops::gaps", gaps[0]["entity"])
	assert.Contains(t, gaps[0]["value"], "kubernetes deployment", "most recently seen first")
	assert.EqualValues(t, 2, gaps[0]["count"])
	assert.Contains(t, gaps[1]["value"], `"entity_prefix":"finance:"`)
	assert.NotContains(t, gaps[0]["value"], "alice", "a record does not name who asked")
	assert.Positive(t, got["total_tokens"])
	assert.True(t, strings.HasPrefix(gaps[0]["key"].(string), "gap:"))

	filtered := objects(t, call(t, srv, alice, "get_gaps", `{"query":"financ"}`), "gaps")
	require.Len(t, filtered, 1)
	assert.Contains(t, filtered[0]["value"], "billing")

	// Gap observations are never facts: query_facts does not return them.
	assert.Empty(t, rows(t, call(t, srv, alice, "query_facts", `{"entity_prefix":"__ops::"}`)))
	assert.Empty(t, rows(t, call(t, srv, alice, "query_facts", `{"query":"gaps"}`)))
}

func TestGetGapsPrivateToTheAgentThatAsked(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	miss(t, srv, alice, `{"query":"Secret-Roadmap Q3!","entity":"plans:acquisition"}`)
	clk.Advance(time.Minute)
	miss(t, srv, alice, `{"query":"Secret-Roadmap Q3!","entity":"plans:acquisition"}`)
	miss(t, srv, bob, `{"query":"Payroll of Carol?"}`)
	miss(t, srv, anon, `{"query":"anonymous roadmap"}`)

	raw := func(c crux.Caller, args string) string {
		t.Helper()
		res := result(t, srv, c, "get_gaps", args)
		b, err := json.Marshal(res)
		require.NoError(t, err)
		return string(b)
	}
	for _, tc := range []struct {
		who     crux.Caller
		own     string
		foreign []string // texts and words of other agents' queries
		terms   map[string]int
	}{
		{alice, "Secret-Roadmap Q3!", []string{"Payroll of Carol?", "anonymous roadmap", "payroll", "carol", "anonymous"},
			map[string]int{"secret": 2, "roadmap": 2, "q3": 2}},
		{bob, "Payroll of Carol?", []string{"Secret-Roadmap", "Q3!", "plans:acquisition", "anonymous roadmap", "secret", "roadmap", "q3", "anonymous"},
			map[string]int{"payroll": 1, "of": 1, "carol": 1}},
		{anon, "anonymous roadmap", []string{"Secret-Roadmap", "Q3!", "plans:acquisition", "Payroll of Carol?", "secret", "q3", "payroll", "carol"},
			map[string]int{"anonymous": 1, "roadmap": 1}},
	} {
		got := call(t, srv, tc.who, "get_gaps", `{}`)
		values := gapValues(t, got)
		require.Len(t, values, 1, "%s sees its own record only", tc.who.Name())
		assert.Contains(t, values[0], tc.own)
		assert.EqualValues(t, 1, got["count"])
		for _, text := range tc.foreign {
			assert.NotContains(t, raw(tc.who, `{}`), text, "%s must not see another agent's text", tc.who.Name())
		}
		// The tenant summary: every agent's records and words counted,
		// the caller's own words listed, counted over its own records.
		summary := got["tenant_summary"].(map[string]any)
		assert.EqualValues(t, 3, summary["records"])
		assert.EqualValues(t, 7, summary["distinct_terms"])
		assert.Equal(t, tc.terms, gapTerms(t, got))
		assert.EqualValues(t, len(tc.terms), summary["own_terms"])
		assert.Equal(t, false, summary["truncated"])
	}
	miss(t, srv, alice, `{"query":"roadmap"}`)
	terms := objects(t, call(t, srv, alice, "get_gaps", `{}`)["tenant_summary"].(map[string]any), "terms")
	assert.Equal(t, "roadmap", terms[0]["term"], "most asked first")
	assert.Equal(t, "q3", terms[1]["term"], "then by term")

	// query filters the agent's records and its words alike; another
	// agent's words are never probed, not even as a count.
	got := call(t, srv, bob, "get_gaps", `{"query":"road"}`)
	assert.Empty(t, objects(t, got, "gaps"), "bob's own query does not match")
	assert.EqualValues(t, 0, got["count"])
	assert.Empty(t, gapTerms(t, got))
	assert.EqualValues(t, 0, got["tenant_summary"].(map[string]any)["own_terms"])
	miss(t, srv, bob, `{"query":"roadmap"}`)
	got = call(t, srv, bob, "get_gaps", `{"query":"road"}`)
	assert.Equal(t, map[string]int{"roadmap": 1}, gapTerms(t, got), "bob's own asking counts once, not alice's")

	// Another tenant sees nothing of it.
	carol := crux.Caller{Agent: "carol", Authenticated: true, Tenant: "acme"}
	got = call(t, srv, carol, "get_gaps", `{}`)
	assert.Empty(t, objects(t, got, "gaps"))
	assert.Empty(t, gapTerms(t, got))
}

func TestGetGapsCutsStoredText(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	long := strings.Repeat("é", 400) + " tail" // 805 bytes
	args, err := json.Marshal(map[string]any{"query": long, "entity_prefix": strings.Repeat("p", 1000)})
	require.NoError(t, err)
	miss(t, srv, alice, string(args))
	clk.Advance(time.Second)
	huge := strings.Repeat("zq", 1<<19-16) // just under 1 MiB
	miss(t, srv, alice, `{"query":"`+huge+`"}`)

	values := gapValues(t, call(t, srv, alice, "get_gaps", `{}`))
	require.Len(t, values, 2)
	for _, v := range values {
		var g map[string]any
		require.NoError(t, json.Unmarshal([]byte(v), &g))
		assert.Equal(t, true, g["truncated"])
		q := g["query"].(string)
		assert.LessOrEqual(t, len(q), 512)
		assert.Greater(t, len(q), 500)
		assert.True(t, utf8.ValidString(q))
		assert.Less(t, len(v), 1500)
	}
	var g map[string]any
	require.NoError(t, json.Unmarshal([]byte(values[1]), &g))
	assert.Equal(t, strings.Repeat("p", 512), g["entity_prefix"], "filters are cut too")
	assert.NotContains(t, values[1], "tail")

	// At the limit nothing is cut.
	exact := strings.Repeat("a", 512)
	miss(t, srv, bob, `{"query":"`+exact+`"}`)
	values = gapValues(t, call(t, srv, bob, "get_gaps", `{}`))
	require.Len(t, values, 1)
	assert.Contains(t, values[0], `"query":"`+exact+`"`)
	assert.NotContains(t, values[0], "truncated")
}

func TestGetGapsLimits(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	for i := range 3 {
		clk.Advance(time.Second)
		miss(t, srv, alice, fmt.Sprintf(`{"query":"missing%d"}`, i))
	}
	got := call(t, srv, alice, "get_gaps", `{"limit":3}`)
	assert.Len(t, objects(t, got, "gaps"), 3)
	assert.EqualValues(t, 3, got["count"])
	assert.Equal(t, false, got["truncated"])
	got = call(t, srv, alice, "get_gaps", `{"limit":2}`)
	assert.Len(t, objects(t, got, "gaps"), 2)
	assert.EqualValues(t, 3, got["count"])
	assert.Equal(t, true, got["truncated"])

	// The summary lists 50 of the caller's words; another agent's count.
	words := func(n int) string {
		var ws []string
		for i := range n {
			ws = append(ws, fmt.Sprintf("term%02d", i))
		}
		return strings.Join(ws, " ")
	}
	srv, _, _ = newTestServer(t)
	miss(t, srv, bob, `{"query":"`+words(50)+`"}`)
	summary := call(t, srv, bob, "get_gaps", `{}`)["tenant_summary"].(map[string]any)
	assert.Len(t, objects(t, summary, "terms"), 50)
	assert.EqualValues(t, 50, summary["own_terms"])
	assert.Equal(t, false, summary["truncated"])
	miss(t, srv, bob, `{"query":"`+words(51)+`"}`)
	summary = call(t, srv, bob, "get_gaps", `{}`)["tenant_summary"].(map[string]any)
	assert.Len(t, objects(t, summary, "terms"), 50)
	assert.EqualValues(t, 51, summary["own_terms"])
	assert.Equal(t, true, summary["truncated"])
	summary = call(t, srv, alice, "get_gaps", `{}`)["tenant_summary"].(map[string]any)
	assert.Empty(t, objects(t, summary, "terms"))
	assert.EqualValues(t, 51, summary["distinct_terms"])
	assert.EqualValues(t, 2, summary["records"])
}

func TestGetGapsBoundedPerAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200 gaps")
	}
	srv, clk, _ := newTestServer(t)
	ctx := context.Background()
	miss(t, srv, bob, `{"query":"bobs question"}`)
	for i := range 205 {
		clk.Advance(time.Second)
		_, err := srv.CallTool(ctx, anon, "query_facts", json.RawMessage(fmt.Sprintf(`{"query":"missing%d"}`, i)))
		require.NoError(t, err)
	}
	got := call(t, srv, anon, "get_gaps", `{"limit":200}`)
	assert.EqualValues(t, 200, got["count"], "an agent keeps 200 records")
	assert.Contains(t, gapValues(t, got)[0], `"missing204"`)
	assert.EqualValues(t, 0, call(t, srv, anon, "get_gaps", `{"query":"missing0"}`)["count"], "the least recently seen was dropped")
	assert.EqualValues(t, 11, call(t, srv, anon, "get_gaps", `{"query":"missing5"}`)["count"], "missing5 and missing50 to 59 stay")
	assert.Len(t, gapValues(t, call(t, srv, bob, "get_gaps", `{}`)), 1, "anonymous floods do not push bob's records out")
	assert.Less(t, answerSize(t, srv, anon, "get_gaps", `{"limit":200}`), maxDefaultAnswer)
}

func TestGetGapsErrors(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for _, tc := range []struct{ args, param string }{
		{`{"query":"!!"}`, "query"},
		{`{"limit":0}`, "limit"},
		{`{"limit":201}`, "limit"},
		{`{"keyword":"x"}`, "keyword"},
	} {
		e := callErr(t, srv, alice, "get_gaps", tc.args)
		assert.Equal(t, crux.CodeInvalidParams, e.Code, tc.args)
		assert.Contains(t, e.Message, tc.param, tc.args)
	}
}
