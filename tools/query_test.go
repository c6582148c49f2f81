package tools_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/tools"
)

// guideDocs are the documents the retrieval tests search.
var guideDocs = []crux.Document{
	{ID: "guide/storage.md", Title: "Storage", Text: "crux keeps its records in a bbolt file.\n\nEvery commit is synced to disk before the call returns."},
	{ID: "guide/retrieval.md", Title: "Retrieval", Text: "Documents are cut into segments and ranked with BM25 fused with an entity graph."},
	{ID: "notes/payments.txt", Text: "The payments-gateway rejects refunds older than ninety days."},
	{ID: "notes/deploys.txt", Text: "Deploys run every Tuesday from the release branch."},
}

func ingestGuide(t *testing.T, srv *crux.Server, tenant string) {
	t.Helper()
	st, err := srv.Ingest(context.Background(), tenant, guideDocs, nil)
	require.NoError(t, err)
	require.Equal(t, len(guideDocs), st.Documents)
}

func resultIDs(t *testing.T, got map[string]any) []string {
	var ids []string
	for _, r := range objects(t, got, "results") {
		ids = append(ids, r["result_id"].(string))
	}
	return ids
}

func TestQueryRanksAndCovers(t *testing.T) {
	srv, _, _ := newTestServer(t)
	ingestGuide(t, srv, "docs")

	got := call(t, srv, alice, "query", `{"tenant_id":"docs","query":"is the commit synced?"}`)
	res := objects(t, got, "results")
	require.NotEmpty(t, res)
	assert.Equal(t, "guide/storage.md", res[0]["doc_id"], "doc_id is the ingested id")
	assert.Equal(t, "0:guide/storage.md", res[0]["result_id"])
	assert.Equal(t, []any{"bm25"}, res[0]["lanes"])
	assert.Equal(t, "Storage", res[0]["title"])
	assert.Contains(t, res[0]["snippet"], "synced")
	assert.Equal(t, "crc-v1", got["contract"])
	assert.Equal(t, "search", got["kind"])
	cov := got["coverage"].(map[string]any)
	assert.Equal(t, 1.0, cov["score"])
	assert.Empty(t, cov["gaps"])

	// Stemming: "documents ranking" finds "Documents are ... ranked".
	got = call(t, srv, alice, "query", `{"tenant_id":"docs","query":"documents ranking"}`)
	assert.Equal(t, []string{"0:guide/retrieval.md"}, resultIDs(t, got))

	// Unknown words are gaps, recorded for get_gaps when coverage is low.
	got = call(t, srv, alice, "query", `{"tenant_id":"docs","query":"kubernetes helm refunds"}`)
	cov = got["coverage"].(map[string]any)
	assert.InDelta(t, 1.0/3, cov["score"], 1e-4)
	assert.Equal(t, []any{"kubernetes", "helm"}, cov["gaps"])
	gaps := call(t, srv, alice, "get_gaps", `{}`)
	require.Len(t, objects(t, gaps, "gaps"), 1)
	assert.Contains(t, objects(t, gaps, "gaps")[0]["value"], "kubernetes helm refunds")

	// legacy leaves the contract out.
	got = call(t, srv, alice, "query", `{"tenant_id":"docs","query":"deploys","contract":"Legacy"}`)
	assert.NotContains(t, got, "contract")
	assert.NotContains(t, got, "kind")

	// An empty tenant answers nothing, with zero coverage.
	got = call(t, srv, alice, "query", `{"tenant_id":"empty","query":"deploys"}`)
	assert.Empty(t, objects(t, got, "results"))
	assert.Equal(t, 0.0, got["coverage"].(map[string]any)["score"])
}

func TestQueryArguments(t *testing.T) {
	srv, _, _ := newTestServer(t)
	ingestGuide(t, srv, "docs")
	e := callErr(t, srv, alice, "query", `{"tenant_id":"docs","query":"the of and"}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Equal(t, "query", paramOf(t, e).Param)
	assert.Contains(t, e.Message, "common words")
	assertInvalidParam(t, callErr(t, srv, alice, "query", `{"tenant_id":"docs","query":"!!"}`), "query", "query",
		"needs a word of at least two letters or digits")
	assertInvalidParam(t, callErr(t, srv, alice, "query", `{"tenant_id":"*","query":"deploys"}`), "query", "tenant_id",
		`must name one tenant, not "*"`)
	e = callErr(t, srv, alice, "query", `{"query":"deploys"}`)
	assert.Equal(t, "tenant_id", paramOf(t, e).Param)
	e = callErr(t, srv, alice, "query", `{"tenant_id":"docs","query":"deploys","limit":101}`)
	assert.Equal(t, "limit", paramOf(t, e).Param)
	var many []string
	for i := range 70 {
		many = append(many, fmt.Sprintf("w%dx", i))
	}
	e = callErr(t, srv, alice, "query", `{"tenant_id":"docs","query":"`+strings.Join(many, " ")+`"}`)
	assert.Contains(t, e.Message, "more than 64 distinct words")
}

// TestRetrievalTenants: a caller bound to a tenant other than the default
// may name only its own; the default caller may name any.
func TestRetrievalTenants(t *testing.T) {
	srv, _, _ := newTestServer(t)
	ingestGuide(t, srv, "acme")
	ingestGuide(t, srv, "globex")
	acme := crux.Caller{Agent: "ann", Authenticated: true, Tenant: "acme"}
	for _, tc := range []struct{ tool, args string }{
		{"query", `{"tenant_id":"globex","query":"deploys"}`},
		{"query_scan", `{"tenant_id":"globex","query":"deploys"}`},
		{"query_expand", `{"tenant_id":"globex","result_ids":["0:notes/deploys.txt"]}`},
	} {
		e := callErr(t, srv, acme, tc.tool, tc.args)
		assert.Equal(t, crux.CodeForbidden, e.Code, tc.tool)
		assert.Contains(t, e.Message, `bound to tenant "acme"`)
		ok := strings.Replace(tc.args, "globex", "acme", 1)
		call(t, srv, acme, tc.tool, ok)
		call(t, srv, alice, tc.tool, tc.args) // the default tenant's caller names any
	}
}

func TestQueryBudgetAndFloor(t *testing.T) {
	srv, _, _ := newTestServer(t)
	var docs []crux.Document
	for i := range 30 {
		docs = append(docs, crux.Document{ID: fmt.Sprintf("d%02d", i), Text: strings.Repeat("gadget ", i+1) + strings.Repeat("filler text here ", 30)})
	}
	_, err := srv.Ingest(context.Background(), "t", docs, nil)
	require.NoError(t, err)

	got := call(t, srv, alice, "query", `{"tenant_id":"t","query":"gadget","limit":30}`)
	all := objects(t, got, "results")
	require.Len(t, all, 30)
	assert.Equal(t, 30.0, got["total_candidates"])
	assert.Equal(t, "d29", all[0]["doc_id"], "most occurrences first")
	for i := 1; i < len(all); i++ {
		assert.GreaterOrEqual(t, all[i-1]["fused_score"], all[i]["fused_score"])
		assert.Equal(t, float64(i+1), all[i]["rank"])
	}

	budget := int(all[0]["token_count"].(float64) + all[1]["token_count"].(float64))
	got = call(t, srv, alice, "query", fmt.Sprintf(`{"tenant_id":"t","query":"gadget","limit":30,"token_budget":%d}`, budget))
	assert.Len(t, objects(t, got, "results"), 2)
	assert.Equal(t, true, got["budget_truncated"])
	assert.Equal(t, float64(budget), got["tokens_returned"])

	floor := all[9]["score"].(float64) // as shown, rounded: the floor keeps what shows it
	got = call(t, srv, alice, "query", fmt.Sprintf(`{"tenant_id":"t","query":"gadget","limit":30,"min_score":%v}`, floor))
	kept := objects(t, got, "results")
	assert.Len(t, kept, 10)
	assert.Equal(t, 20.0, got["coverage"].(map[string]any)["below_floor"])
}

// TestQueryEntityGraph: a fact whose words match the query brings in the
// segments that mention its entity, marked with the graph lane, and the
// fact is listed.
func TestQueryEntityGraph(t *testing.T) {
	srv, _, _ := newTestServer(t)
	ingestGuide(t, srv, tenant)
	storeID(t, srv, alice, `{"entity":"payments-gateway","key":"owner","value":"team billing owns refunds policy"}`)

	got := call(t, srv, alice, "query", `{"tenant_id":"default","query":"billing team"}`)
	res := objects(t, got, "results")
	require.Len(t, res, 1, "no document says billing: the graph lane alone finds it")
	assert.Equal(t, "notes/payments.txt", res[0]["doc_id"])
	assert.Equal(t, []any{"entity_graph"}, res[0]["lanes"])
	assert.Equal(t, []any{"payments-gateway"}, res[0]["entities"])
	assert.Equal(t, 0.0, res[0]["score"])
	facts := objects(t, got, "facts")
	require.Len(t, facts, 1)
	assert.Equal(t, "owner", facts[0]["key"])

	// Both lanes: refunds is in the document and in the fact.
	got = call(t, srv, alice, "query", `{"tenant_id":"default","query":"refunds"}`)
	res = objects(t, got, "results")
	require.NotEmpty(t, res)
	assert.Equal(t, []any{"bm25", "entity_graph"}, res[0]["lanes"])

	// Another agent's private fact links nothing for bob.
	storeID(t, srv, alice, `{"entity":"deploys","key":"secret","value":"zebra crossing","private":true}`)
	got = call(t, srv, bob, "query", `{"tenant_id":"default","query":"zebra"}`)
	assert.Empty(t, objects(t, got, "results"))
	got = call(t, srv, alice, "query", `{"tenant_id":"default","query":"zebra"}`)
	assert.Equal(t, []string{"0:notes/deploys.txt"}, resultIDs(t, got))

	// A floor leaves graph-only results out, counted.
	got = call(t, srv, alice, "query", `{"tenant_id":"default","query":"billing team","min_score":0.1}`)
	assert.Empty(t, objects(t, got, "results"))
	assert.Equal(t, 1.0, got["coverage"].(map[string]any)["below_floor"])

	// A segment both lanes find, under the floor, is counted once.
	got = call(t, srv, alice, "query", `{"tenant_id":"default","query":"refunds","min_score":100}`)
	assert.Empty(t, objects(t, got, "results"))
	require.Greater(t, got["total_candidates"], 0.0)
	assert.Equal(t, got["total_candidates"], got["coverage"].(map[string]any)["below_floor"],
		"every BM25 candidate is under the floor, the graph lane's among them, none counted twice")
}

// TestQueryGraphLaneShowsBM25: a segment the graph lane brings in from
// beyond the BM25 lane's depth shows its BM25 score, and a floor keeps it
// when that score reaches it.
func TestQueryGraphLaneShowsBM25(t *testing.T) {
	srv, _, _ := newTestServer(t)
	var docs []crux.Document
	for i := range tools.ExportLaneDepth + 10 { // more BM25 candidates than the lane ranks
		docs = append(docs, crux.Document{ID: fmt.Sprintf("d%02d", i), Text: strings.Repeat("gadget ", 5) + "filler"})
	}
	// Two words longer than the others, it scores a little under them.
	docs = append(docs, crux.Document{ID: "zz/acme", Text: strings.Repeat("gadget ", 5) + "filler acme corporation"})
	_, err := srv.Ingest(context.Background(), tenant, docs, nil)
	require.NoError(t, err)
	storeID(t, srv, alice, `{"entity":"acme corporation","key":"makes","value":"gadget"}`)

	got := call(t, srv, alice, "query", `{"tenant_id":"default","query":"gadget"}`)
	var acme map[string]any
	for _, r := range objects(t, got, "results") {
		if r["doc_id"] == "zz/acme" {
			acme = r
		}
	}
	require.NotNil(t, acme, "the graph lane brings it in")
	assert.Equal(t, []any{"entity_graph"}, acme["lanes"], "beyond the BM25 lane's depth")
	score := acme["score"].(float64)
	assert.Greater(t, score, 0.0, "its BM25 score is shown")

	got = call(t, srv, alice, "query", fmt.Sprintf(`{"tenant_id":"default","query":"gadget","min_score":%v}`, score))
	found := false
	for _, r := range objects(t, got, "results") {
		found = found || r["doc_id"] == "zz/acme"
	}
	assert.True(t, found, "a floor at its shown score keeps it")
}

func TestQueryScanAndExpand(t *testing.T) {
	srv, _, _ := newTestServer(t)
	ingestGuide(t, srv, "docs")
	got := call(t, srv, alice, "query_scan", `{"tenant_id":"docs","query":"segments disk"}`)
	rows := objects(t, got, "results")
	require.Len(t, rows, 2)
	for _, r := range rows {
		assert.NotContains(t, r, "snippet")
		assert.NotContains(t, r, "content")
	}
	assert.Greater(t, got["tokens_returned"], 0.0)

	ids := resultIDs(t, got)
	exp := call(t, srv, alice, "query_expand", fmt.Sprintf(`{"tenant_id":"docs","result_ids":[%q,%q]}`, ids[1], ids[0]))
	res := objects(t, exp, "results")
	require.Len(t, res, 2)
	assert.Equal(t, ids[1], res[0]["result_id"], "in the order asked")
	assert.Equal(t, "addressed", exp["kind"])
	byID := map[string]string{}
	for _, d := range guideDocs {
		byID[d.ID] = d.Text
	}
	for _, r := range res {
		assert.Equal(t, byID[r["doc_id"].(string)], r["content"])
	}

	exp = call(t, srv, alice, "query_expand", fmt.Sprintf(`{"tenant_id":"docs","result_ids":[%q,%q],"token_budget":1}`, ids[0], ids[1]))
	assert.Len(t, objects(t, exp, "results"), 1, "the first always")
	assert.Equal(t, []any{ids[1]}, exp["omitted"])
	assert.Equal(t, true, exp["budget_truncated"])

	assertInvalidParam(t, callErr(t, srv, alice, "query_expand", `{"tenant_id":"docs","result_ids":["0:guide/storage.md","guide"]}`),
		"query_expand", "result_ids[1]", `"guide" is not a result id "<segment_index>:<doc_id>"`)
	assertInvalidParam(t, callErr(t, srv, alice, "query_expand", `{"tenant_id":"docs","result_ids":["7:guide/storage.md"]}`),
		"query_expand", "result_ids[0]", `"7:guide/storage.md" is not a segment of a document in tenant "docs"`)
	assertInvalidParam(t, callErr(t, srv, alice, "query_expand", `{"tenant_id":"other","result_ids":["0:guide/storage.md"]}`),
		"query_expand", "result_ids[0]", `"0:guide/storage.md" is not a segment of a document in tenant "other"`)
}

// TestIngestReplaceDelete: re-ingesting an id replaces it, deleting removes
// it, and a bad document fails the whole call naming it.
func TestIngestReplaceDelete(t *testing.T) {
	srv, _, _ := newTestServer(t)
	ingestGuide(t, srv, "docs")
	st, err := srv.Ingest(context.Background(), "docs", []crux.Document{{ID: "notes/deploys.txt", Text: "Deploys moved to Thursday."}}, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, st.Replaced)
	got := call(t, srv, alice, "query", `{"tenant_id":"docs","query":"tuesday"}`)
	assert.Empty(t, objects(t, got, "results"))
	got = call(t, srv, alice, "query", `{"tenant_id":"docs","query":"thursday"}`)
	assert.Equal(t, []string{"0:notes/deploys.txt"}, resultIDs(t, got))

	gone, err := srv.DeleteDocuments(context.Background(), "docs", "notes/deploys.txt", "missing")
	require.NoError(t, err)
	assert.Equal(t, []string{"notes/deploys.txt"}, gone)
	got = call(t, srv, alice, "query", `{"tenant_id":"docs","query":"thursday"}`)
	assert.Empty(t, objects(t, got, "results"))

	_, err = srv.Ingest(context.Background(), "docs", []crux.Document{{ID: "ok", Text: "fine words"}, {ID: "bad", Text: "\xff"}}, nil)
	require.ErrorContains(t, err, `document "bad": text is not valid UTF-8`)
	got = call(t, srv, alice, "query", `{"tenant_id":"docs","query":"fine words"}`)
	assert.Empty(t, objects(t, got, "results"), "nothing of a failed call is written")
}

// TestQueryFactsStems: query_facts matches words by their stems, as the
// document index does.
func TestQueryFactsStems(t *testing.T) {
	srv, _, _ := newTestServer(t)
	storeID(t, srv, alice, `{"entity":"svc:api","key":"db","value":"the primary database is PostgreSQL"}`)
	for _, q := range []string{"databases", "Database", "data", "postgresql"} {
		assert.Len(t, rows(t, call(t, srv, alice, "query_facts", `{"query":"`+q+`"}`)), 1, q)
	}
	assert.Empty(t, rows(t, call(t, srv, alice, "query_facts", `{"query":"tabase"}`)))
}

// TestQueryDistinctDocuments: of the best segments, the best of each
// document come first, then a document's other segments.
func TestQueryDistinctDocuments(t *testing.T) {
	srv, _, _ := newTestServer(t)
	para := strings.Repeat("the gadget gadget gadget works. ", 30) // about 1,000 bytes: a segment each
	docs := []crux.Document{
		{ID: "big", Text: para + "\n\n" + para + "\n\n" + para},
		{ID: "one", Text: "a gadget " + strings.Repeat("and other words ", 20)},
		{ID: "two", Text: "one gadget " + strings.Repeat("and more words ", 25)},
	}
	_, err := srv.Ingest(context.Background(), "t", docs, nil)
	require.NoError(t, err)
	docsOf := func(got map[string]any) []string {
		var out []string
		for _, r := range objects(t, got, "results") {
			out = append(out, r["doc_id"].(string))
		}
		return out
	}
	got := call(t, srv, alice, "query", `{"tenant_id":"t","query":"gadget","limit":3}`)
	assert.Equal(t, []string{"big", "one", "two"}, docsOf(got), "one segment of each document, though big's three score higher")
	res := objects(t, got, "results")
	assert.Greater(t, res[0]["score"], res[1]["score"])
	got = call(t, srv, alice, "query", `{"tenant_id":"t","query":"gadget","limit":5}`)
	assert.Equal(t, []string{"big", "one", "two", "big", "big"}, docsOf(got))
	scan := call(t, srv, alice, "query_scan", `{"tenant_id":"t","query":"gadget","limit":3}`)
	assert.Equal(t, []string{"big", "big", "big"}, docsOf(scan), "query_scan ranks segments by BM25 alone")
}

// TestQueryPhrase: of two segments with the same BM25, the one saying
// the query's words in the query's order ranks first, by a phrase bonus
// its fused score shows; query_scan ranks by BM25 alone.
func TestQueryPhrase(t *testing.T) {
	srv, _, _ := newTestServer(t)
	docs := []crux.Document{
		{ID: "scattered", Text: "the file was read, whole chapters of it"},
		{ID: "phrase", Text: "the whole file was read, chapters of it"},
	}
	_, err := srv.Ingest(context.Background(), "t", docs, nil)
	require.NoError(t, err)
	got := call(t, srv, alice, "query", `{"tenant_id":"t","query":"whole file"}`)
	res := objects(t, got, "results")
	require.Len(t, res, 2)
	assert.Equal(t, "phrase", res[0]["doc_id"])
	assert.Equal(t, res[0]["score"], res[1]["score"], "the same BM25")
	assert.Greater(t, res[0]["fused_score"], res[0]["score"], "the phrase bonus")
	assert.Equal(t, res[1]["fused_score"], res[1]["score"], "no bonus for the words apart")
	scan := call(t, srv, alice, "query_scan", `{"tenant_id":"t","query":"whole file"}`)
	assert.Equal(t, "scattered", objects(t, scan, "results")[0]["doc_id"], "equal BM25: the first ingested")
}

// TestQueryGraphNeverDemotes: the entity-graph lane reorders close
// results but never puts a segment above one BM25 scores clearly higher,
// however many of its segments the lane ranks.
func TestQueryGraphNeverDemotes(t *testing.T) {
	srv, _, _ := newTestServer(t)
	docs := []crux.Document{{ID: "answer", Text: "the refunds policy: refunds within thirty days"}}
	for i := range 12 {
		docs = append(docs, crux.Document{ID: fmt.Sprintf("acme%02d", i),
			Text: "acme corporation " + strings.Repeat("memo ", i) + "mentions a policy " + strings.Repeat("among many other words ", 10)})
	}
	_, err := srv.Ingest(context.Background(), tenant, docs, nil)
	require.NoError(t, err)
	storeID(t, srv, alice, `{"entity":"acme corporation","key":"owns","value":"the refunds policy"}`)

	got := call(t, srv, alice, "query", `{"tenant_id":"default","query":"refunds policy"}`)
	res := objects(t, got, "results")
	require.NotEmpty(t, res)
	assert.Equal(t, "answer", res[0]["doc_id"], "the strong BM25 hit stays first")
	assert.Equal(t, []any{"bm25"}, res[0]["lanes"])
	graph := 0
	for _, r := range res[1:] {
		if slices.Contains(r["lanes"].([]any), any("entity_graph")) {
			graph++
			assert.Equal(t, []any{"acme corporation"}, r["entities"])
		}
		assert.LessOrEqual(t, r["fused_score"], res[0]["fused_score"])
	}
	assert.Positive(t, graph, "the lane still ranks the entity's segments")
	require.Len(t, objects(t, got, "facts"), 1)
}
