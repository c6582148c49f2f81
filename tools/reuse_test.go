package tools_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
)

func reuseServer(t *testing.T) *crux.Server {
	f := crux.DefaultFlags()
	f.ReuseCheck = true
	srv, _, _ := newTestServer(t, withFlags(f))
	return srv
}

func TestReuseCheckFlagOff(t *testing.T) {
	srv, _, _ := newTestServer(t)
	e := callErr(t, srv, alice, "reuse_check", `{"tenant_id":"default","description":"a cache"}`)
	assert.Equal(t, crux.CodeCapabilityDenied, e.Code)
	assert.Contains(t, e.Message, "CORECRUXD_FEATURE_REUSE_CHECK")
}

func TestReuseCheckCandidates(t *testing.T) {
	srv := reuseServer(t)
	ingestGuide(t, srv, tenant)
	storeID(t, srv, alice, `{"entity":"feature:ratelimit","key":"name","value":"Token-bucket rate limiter"}`)
	storeID(t, srv, alice, `{"entity":"feature:ratelimit","key":"files","value":"internal/limit/bucket.go, internal/limit/bucket_test.go"}`)
	storeID(t, srv, alice, `{"entity":"feature:ratelimit","key":"maturity","value":"production"}`)
	storeID(t, srv, alice, `{"entity":"feature:ratelimit","key":"description","value":"limits requests per client with a token bucket"}`)

	got := call(t, srv, alice, "reuse_check", `{"tenant_id":"default","description":"rate limiter for client requests"}`)
	assert.Equal(t, "reuse-candidate-found", got["verdict"])
	caps := objects(t, got, "capability_candidates")
	require.NotEmpty(t, caps)
	assert.Equal(t, "feature:ratelimit", caps[0]["id"])
	assert.Equal(t, "Token-bucket rate limiter", caps[0]["name"])
	assert.Equal(t, "production", caps[0]["maturity"])
	assert.Equal(t, []any{"internal/limit/bucket.go", "internal/limit/bucket_test.go"}, caps[0]["files"])
	assert.ElementsMatch(t, []any{"rate", "limiter", "client", "requests"}, caps[0]["overlap_terms"])

	got = call(t, srv, alice, "reuse_check", `{"tenant_id":"default","description":"rank documents in segments with BM25","limit":1}`)
	docs := objects(t, got, "retrieval_candidates")
	require.Len(t, docs, 1)
	assert.Equal(t, "guide/retrieval.md", docs[0]["doc_id"])
	caps = objects(t, got, "capability_candidates")
	require.Len(t, caps, 1, "limit applies per source")
	assert.Contains(t, []any{"tool:query", "tool:query_scan", "tool:query_expand"}, caps[0]["id"], "the catalogue lens finds the retrieval tools")

	got = call(t, srv, alice, "reuse_check", `{"tenant_id":"default","description":"zygomorphic xylophone tuner"}`)
	assert.Equal(t, "nothing-found", got["verdict"])
	assert.Empty(t, objects(t, got, "retrieval_candidates"))
	assert.Empty(t, objects(t, got, "capability_candidates"))

	assertInvalidParam(t, callErr(t, srv, alice, "reuse_check", `{"tenant_id":"default","description":"the and of"}`),
		"reuse_check", "description", "holds only common words (the, and, of), which the index does not keep; ask with a word that says what you look for")
}
