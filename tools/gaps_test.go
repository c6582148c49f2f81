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

func TestGetGapsRecordsZeroResultQueries(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	call(t, srv, alice, "store_fact", `{"entity":"project:crux","key":"lang","value":"Go"}`)
	assert.Empty(t, objects(t, call(t, srv, alice, "get_gaps", `{}`), "gaps"))

	// A query that finds something, and a filter-only query, record nothing.
	call(t, srv, alice, "query_facts", `{"query":"crux"}`)
	call(t, srv, alice, "query_facts", `{"entity":"nothing:here"}`)
	assert.Empty(t, objects(t, call(t, srv, alice, "get_gaps", `{}`), "gaps"))

	require.Empty(t, rows(t, call(t, srv, alice, "query_facts", `{"query":"kubernetes deployment"}`)))
	clk.Advance(time.Minute)
	require.Empty(t, rows(t, call(t, srv, bob, "query_facts", `{"query":"billing","entity_prefix":"finance:"}`)))
	clk.Advance(time.Minute)
	require.Empty(t, rows(t, call(t, srv, anon, "query_facts", `{"query":"kubernetes deployment"}`)))

	got := call(t, srv, bob, "get_gaps", `{}`)
	gaps := objects(t, got, "gaps")
	require.Len(t, gaps, 2, "one record per distinct query")
	assert.Equal(t, "__ops::gaps", gaps[0]["entity"])
	assert.Contains(t, gaps[0]["value"], "kubernetes deployment", "most recently seen first")
	assert.EqualValues(t, 2, gaps[0]["count"])
	assert.Contains(t, gaps[1]["value"], `"entity_prefix":"finance:"`)
	assert.NotContains(t, gaps[0]["value"], "alice", "gaps do not name who asked")
	assert.Positive(t, got["total_tokens"])
	assert.True(t, strings.HasPrefix(gaps[0]["key"].(string), "gap:"))

	filtered := objects(t, call(t, srv, alice, "get_gaps", `{"query":"financ"}`), "gaps")
	require.Len(t, filtered, 1)
	assert.Contains(t, filtered[0]["value"], "billing")
	assert.Len(t, objects(t, call(t, srv, alice, "get_gaps", `{"limit":1}`), "gaps"), 1)

	// Gap observations are never facts: query_facts does not return them.
	assert.Empty(t, rows(t, call(t, srv, alice, "query_facts", `{"entity_prefix":"__ops::"}`)))
	assert.Empty(t, rows(t, call(t, srv, alice, "query_facts", `{"query":"gaps"}`)))
}

func TestGetGapsTenantScoped(t *testing.T) {
	srv, _, _ := newTestServer(t)
	other := crux.Caller{Agent: "carol", Authenticated: true, Tenant: "acme"}
	call(t, srv, alice, "query_facts", `{"query":"secret roadmap"}`)
	assert.Empty(t, objects(t, call(t, srv, other, "get_gaps", `{}`), "gaps"))
	assert.Len(t, objects(t, call(t, srv, alice, "get_gaps", `{}`), "gaps"), 1)
}

func TestGetGapsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 1000 gaps")
	}
	srv, clk, _ := newTestServer(t)
	ctx := context.Background()
	for i := range 1005 {
		clk.Advance(time.Second)
		_, err := srv.CallTool(ctx, alice, "query_facts", json.RawMessage(fmt.Sprintf(`{"query":"missing%d"}`, i)))
		require.NoError(t, err)
	}
	gaps := objects(t, call(t, srv, alice, "get_gaps", `{"limit":1000}`), "gaps")
	require.Len(t, gaps, 1000)
	assert.Contains(t, gaps[0]["value"], "missing1004")
	assert.Contains(t, gaps[999]["value"], `"missing5"`, "the five least recently seen were dropped")
}

func TestGetGapsErrors(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for _, tc := range []struct{ args, param string }{
		{`{"query":"!!"}`, "query"},
		{`{"limit":0}`, "limit"},
		{`{"limit":1001}`, "limit"},
		{`{"keyword":"x"}`, "keyword"},
	} {
		e := callErr(t, srv, alice, "get_gaps", tc.args)
		assert.Equal(t, crux.CodeInvalidParams, e.Code, tc.args)
		assert.Contains(t, e.Message, tc.param, tc.args)
	}
}
