package tools_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"lukechampine.com/blake3"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/tools"
)

func TestRouteAccessMatrixWithoutRouter(t *testing.T) {
	srv, _, _ := newTestServer(t)
	got := call(t, srv, alice, "route_access_matrix", `{}`)
	assert.Equal(t, false, got["enforcing"])
	routes := objects(t, got, "routes")
	var names []string
	for _, r := range routes {
		names = append(names, r["route"].(string))
		assert.Equal(t, "stdio", r["transport"])
		assert.Equal(t, false, r["enforced"])
		assert.Empty(t, r["required_any_scope"])
		assert.NotEmpty(t, r["passport_binding"])
		assert.NotEmpty(t, r["tenant_binding"])
	}
	assert.Equal(t, []string{"initialize", "tools/list", "tools/call"}, names)
	assert.Contains(t, routes[2]["notes"], "fail-open")
}

func TestRouteAccessMatrixEnforcing(t *testing.T) {
	signer, _, router := freeLocal(t)
	srv, _, _ := newTestServer(t, withSigner(signer), withRouter(router))
	got := call(t, srv, alice, "route_access_matrix", `{}`)
	assert.Equal(t, true, got["enforcing"])
	routes := objects(t, got, "routes")
	require.Len(t, routes, 3)
	assert.Equal(t, false, routes[0]["enforced"], "initialize needs no capability")
	assert.Equal(t, true, routes[2]["enforced"])
	assert.Equal(t, []any{"crux-mcp.<tool>", "corecrux.query.local"}, routes[2]["required_any_scope"])
}

func TestRouteAccessMatrixRejectsArguments(t *testing.T) {
	srv, _, _ := newTestServer(t)
	e := callErr(t, srv, alice, "route_access_matrix", `{"verbose":true}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, "verbose")
}

func TestExecplanGate(t *testing.T) {
	srv, _, _ := newTestServer(t)
	got := call(t, srv, alice, "execplan_gate", `{"slug":"crux-v1","milestone":"M2","status":"passed",
		"commit_sha":"ABCDEF1","token_budget":500,"tests_passing":true,"artifacts":["ci.log"],"notes":"green"}`)
	assert.Equal(t, "execplan:crux-v1", got["entity"])
	assert.Equal(t, "gate:M2", got["key"])
	assert.Equal(t, "abcdef1", got["commit_sha"])
	assert.Equal(t, "passed", got["status"])
	id := got["fact_id"].(string)

	// gate:M2 names the same milestone: a new version superseding the first.
	again := call(t, srv, alice, "execplan_gate", `{"slug":"crux-v1","milestone":"gate:M2","status":"failed",
		"commit_sha":"0123456789abcdef0123456789abcdef01234567","token_budget":1}`)
	assert.Equal(t, "gate:M2", again["key"])
	assert.EqualValues(t, 2, again["version"])

	q := call(t, srv, bob, "query_facts", `{"entity":"execplan:crux-v1","include_superseded":true}`)
	rs := rows(t, q)
	require.Len(t, rs, 2)
	for _, r := range rs {
		assert.Equal(t, "medium", r["horizon_class"])
		if r["fact_id"] == id {
			assert.Equal(t, again["fact_id"], r["superseded_by"])
			var rec map[string]any
			require.NoError(t, json.Unmarshal([]byte(r["value"].(string)), &rec))
			assert.Equal(t, "passed", rec["status"])
			assert.Equal(t, true, rec["tests_passing"])
			assert.Equal(t, []any{"ci.log"}, rec["artifacts"])
			assert.EqualValues(t, 500, rec["token_budget"])
			assert.Equal(t, "alice", rec["recorded_by"])
		}
	}
}

func TestExecplanGateErrors(t *testing.T) {
	srv, _, _ := newTestServer(t)
	ok := `"slug":"p","milestone":"M1","status":"passed","commit_sha":"abcdef12"`
	for _, tc := range []struct{ args, param string }{
		{`{"milestone":"M1","status":"passed","commit_sha":"abcdef12","token_budget":10}`, "slug"},
		{`{` + ok + `}`, "token_budget"},
		{`{` + ok + `,"token_budget":0}`, "token_budget"},
		{`{` + ok + `,"token_budget":-5}`, "token_budget"},
		{`{"slug":"execplan:p","milestone":"M1","status":"passed","commit_sha":"abcdef12","token_budget":10}`, "slug"},
		{`{"slug":"p","milestone":"gate:","status":"passed","commit_sha":"abcdef12","token_budget":10}`, "milestone"},
		{`{"slug":"p","milestone":"M1","status":"done","commit_sha":"abcdef12","token_budget":10}`, "status"},
		{`{"slug":"p","milestone":"M1","status":"passed","commit_sha":"abc12","token_budget":10}`, "commit_sha"},
		{`{"slug":"p","milestone":"M1","status":"passed","commit_sha":"xyz1234z","token_budget":10}`, "commit_sha"},
		{`{"slug":"p","milestone":"M1","status":"passed","commit_sha":"` + strings.Repeat("a", 65) + `","token_budget":10}`, "commit_sha"},
		{`{` + ok + `,"token_budget":10,"extra":1}`, "extra"},
	} {
		e := callErr(t, srv, alice, "execplan_gate", tc.args)
		assert.Equal(t, crux.CodeInvalidParams, e.Code, tc.args)
		assert.Contains(t, e.Message, tc.param, tc.args)
	}
}

func TestAuthPostureAuditWithoutRouter(t *testing.T) {
	srv, _, _ := newTestServer(t)
	got := call(t, srv, anon, "auth_posture_audit", `{}`)
	assert.Equal(t, "crux.auth_posture_audit.v1", got["schema"])
	assert.Equal(t, "anonymous", got["mcp_agent"])
	assert.Equal(t, false, got["authenticated"])
	assert.Equal(t, false, got["rcx_router_configured"])
	assert.NotContains(t, got, "token")
	assert.NotContains(t, got, "data_dir_configured")
	assert.Equal(t, false, got["agent_passports_enabled"])
	assert.Equal(t, false, got["passport_revocation_enforced"])
	assert.NotEmpty(t, got["receipt_signer_key_id"])
	checks := fmt.Sprint(got["recommended_checks"])
	assert.Contains(t, checks, "RCX router")
	assert.Contains(t, checks, "named agent")
	assert.Contains(t, checks, "CRUX_PASSPORT_REVOCATION")
	_, err := time.Parse(time.RFC3339Nano, got["checked_at"].(string))
	assert.NoError(t, err)
}

func TestAuthPostureAuditEnforcing(t *testing.T) {
	flags := crux.DefaultFlags()
	flags.AgentPassports = true
	flags.PassportRevocation = true
	signer, tok, router := freeLocal(t)
	srv, _, _ := newTestServer(t, withFlags(flags), withSigner(signer), withRouter(router))
	got := call(t, srv, alice, "auth_posture_audit", `{}`)
	assert.Equal(t, "alice", got["mcp_agent"])
	assert.Equal(t, true, got["authenticated"])
	assert.Equal(t, true, got["rcx_router_configured"])
	assert.Equal(t, map[string]any{"id": tok.TokenID, "tier": "free"}, got["token"])
	assert.Equal(t, true, got["agent_passports_enabled"])
	assert.Equal(t, true, got["passport_revocation_enforced"])
	assert.Empty(t, got["recommended_checks"])
}

func TestEgressPolicyCheck(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for _, tc := range []struct {
		name, args string
		allowed    bool
		scheme     string
		host       string
	}{
		{"https", `{"target":"https://api.example.com/v1","purpose":"sync"}`, true, "https", "api.example.com"},
		{"plain http", `{"target":"http://api.example.com/"}`, false, "http", "api.example.com"},
		{"plain http allowed", `{"target":"http://api.example.com/","allow_plain_http":true}`, true, "http", "api.example.com"},
		{"localhost", `{"target":"http://localhost:8080/x"}`, true, "http", "localhost"},
		{"localhost loopback off", `{"target":"http://localhost:8080/x","allow_loopback_http":false}`, false, "http", "localhost"},
		{"localhost.example.com", `{"target":"http://localhost.example.com/"}`, false, "http", "localhost.example.com"},
		{"127/8", `{"target":"http://127.3.4.5:9/"}`, true, "http", "127.3.4.5"},
		{"userinfo trick", `{"target":"http://127.0.0.1@evil.com/"}`, false, "http", "evil.com"},
		{"userinfo trick localhost", `{"target":"http://localhost:80@evil.com/"}`, false, "http", "evil.com"},
		{"0.0.0.0", `{"target":"http://0.0.0.0:8080/"}`, false, "http", "0.0.0.0"},
		{"ipv6 loopback", `{"target":"http://[::1]:8080/"}`, true, "http", "::1"},
		{"ipv6 non-loopback", `{"target":"http://[2001:db8::1]/"}`, false, "http", "2001:db8::1"},
		{"ipv6 unspecified", `{"target":"http://[::]/"}`, false, "http", "::"},
		{"uppercase", `{"target":"HTTP://LOCALHOST/"}`, true, "http", "localhost"},
		{"uppercase https", `{"target":"HTTPS://Example.COM/"}`, true, "https", "example.com"},
		{"missing host", `{"target":"https:///path"}`, false, "https", ""},
		{"opaque", `{"target":"http:evil.com"}`, false, "http", ""},
		{"no scheme", `{"target":"example.com/path"}`, false, "", ""},
		{"ftp", `{"target":"ftp://example.com/file"}`, false, "ftp", "example.com"},
		{"file", `{"target":"file:///etc/passwd"}`, false, "file", ""},
		{"decimal ip", `{"target":"http://2130706433/"}`, false, "http", "2130706433"},
	} {
		got := call(t, srv, alice, "egress_policy_check", tc.args)
		assert.Equal(t, "crux.egress_policy_check.v1", got["schema"], tc.name)
		assert.Equal(t, tc.allowed, got["allowed"], tc.name)
		assert.Equal(t, tc.scheme, got["scheme"], tc.name)
		assert.Equal(t, tc.host, got["host"], tc.name)
		assert.NotEmpty(t, got["reasons"], tc.name)
	}
	got := call(t, srv, alice, "egress_policy_check", `{"target":"https://a.example","purpose":"backup"}`)
	assert.Equal(t, "backup", got["purpose"])
	assert.Equal(t, "https://a.example", got["target"])
}

func TestEgressPolicyCheckErrors(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for _, args := range []string{`{}`, `{"target":""}`, `{"target":"   "}`, `{"target":"http://[::1"}`, `{"target":"https://a b.example/"}`, `{"target":"x","allow_plain_http":"yes"}`} {
		e := callErr(t, srv, alice, "egress_policy_check", args)
		assert.Equal(t, crux.CodeInvalidParams, e.Code, args)
		param := "target"
		if strings.Contains(args, "allow_plain_http") {
			param = "allow_plain_http"
		}
		assert.Contains(t, e.Message, param, args)
	}
}

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

func TestCheckEgressIsExported(t *testing.T) {
	d, err := tools.CheckEgress("http://[::ffff:127.0.0.1]/", true, false)
	require.NoError(t, err)
	assert.True(t, d.Allowed, "IPv4-mapped loopback is loopback")
}

func TestRecordDecision(t *testing.T) {
	srv, _, db := newTestServer(t)
	got := call(t, srv, alice, "record_decision", `{"action":"use bbolt","rationale":"embedded, fsync","alternatives":["sqlite","badger"],
		"confidence":0.8,"session_id":"s1","context_refs":["f_1"]}`)
	assert.Equal(t, "__decisions__::s1", got["entity"])
	assert.Equal(t, "use bbolt", got["action"])

	// decision_hash is BLAKE3 of the canonical JSON of the six fields.
	canonical := `{"action":"use bbolt","alternatives":["sqlite","badger"],"confidence":0.8,"context_refs":["f_1"],"rationale":"embedded, fsync","session_id":"s1"}`
	sum := blake3.Sum256([]byte(canonical))
	assert.Equal(t, hex.EncodeToString(sum[:]), got["decision_hash"])

	// The receipt is signed, chained and verifiable with the server's keyring.
	r := getReceipt(t, db, got["receipt_id"].(string))
	rep := receipts.Verify(r, srv.Keyring(), time.Now())
	assert.True(t, rep.OK(), "receipt verifies: %+v", rep)
	h, err := r.Header()
	require.NoError(t, err)
	assert.Equal(t, "decision", h.Kind)
	var payload map[string]any
	require.NoError(t, r.Payload(&payload))
	assert.Equal(t, got["decision_hash"], payload["decision_hash"])
	assert.Equal(t, got["decision_id"], payload["decision_id"])

	// Queryable with query_facts under the reserved prefix, by any agent.
	q := rows(t, call(t, srv, bob, "query_facts", `{"entity_prefix":"__decisions__::"}`))
	require.Len(t, q, 1)
	assert.Equal(t, got["decision_id"], q[0]["key"])
	assert.Equal(t, got["fact_id"], q[0]["fact_id"])
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(q[0]["value"].(string)), &rec))
	assert.Equal(t, "embedded, fsync", rec["rationale"])
	assert.Equal(t, got["receipt_id"], rec["receipt_id"])
	assert.Equal(t, "alice", rec["recorded_by"])
	assert.InDelta(t, 0.8, q[0]["confidence"], 1e-9)

	// Reserved: not returned unasked, and not writable or deletable by clients.
	assert.Empty(t, rows(t, call(t, srv, bob, "query_facts", `{"query":"bbolt"}`)))
	e := callErr(t, srv, bob, "store_fact", `{"entity":"__decisions__::s1","key":"x","value":"forged"}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	e = callErr(t, srv, bob, "delete_fact", `{"fact_id":"`+got["fact_id"].(string)+`"}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
}

func TestRecordDecisionAppendOnly(t *testing.T) {
	srv, _, _ := newTestServer(t)
	a := call(t, srv, alice, "record_decision", `{"action":"ship","rationale":"ready"}`)
	b := call(t, srv, alice, "record_decision", `{"action":"ship","rationale":"ready"}`)
	assert.Equal(t, "__decisions__::_default", a["entity"])
	assert.NotEqual(t, a["decision_id"], b["decision_id"])
	assert.Equal(t, a["decision_hash"], b["decision_hash"], "same content, same hash")
	assert.NotEqual(t, a["receipt_id"], b["receipt_id"])
	q := rows(t, call(t, srv, alice, "query_facts", `{"entity":"__decisions__::_default","include_superseded":true}`))
	require.Len(t, q, 2)
	for _, r := range q {
		assert.Empty(t, r["superseded_by"], "no decision supersedes another")
	}
	canonical := `{"action":"ship","alternatives":[],"confidence":1,"context_refs":[],"rationale":"ready","session_id":"_default"}`
	sum := blake3.Sum256([]byte(canonical))
	assert.Equal(t, hex.EncodeToString(sum[:]), a["decision_hash"])
	h, err := store.DecisionHash(store.DecisionContent{Action: "ship", Rationale: "ready", Confidence: 1, SessionID: "_default"})
	require.NoError(t, err)
	assert.Equal(t, a["decision_hash"], h)
}

func TestRecordDecisionTenantScoped(t *testing.T) {
	srv, _, _ := newTestServer(t)
	call(t, srv, alice, "record_decision", `{"action":"a","rationale":"r"}`)
	other := crux.Caller{Agent: "carol", Authenticated: true, Tenant: "acme"}
	assert.Empty(t, rows(t, call(t, srv, other, "query_facts", `{"entity_prefix":"__decisions__::"}`)))
	// Visible to every agent of the tenant, anonymous callers included.
	assert.Len(t, rows(t, call(t, srv, anon, "query_facts", `{"entity_prefix":"__decisions__::"}`)), 1)
}

func TestRecordDecisionErrors(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for _, tc := range []struct{ args, param string }{
		{`{"rationale":"r"}`, "action"},
		{`{"action":"a"}`, "rationale"},
		{`{"action":" ","rationale":"r"}`, "action"},
		{`{"action":"a","rationale":"\t"}`, "rationale"},
		{`{"action":"a","rationale":"r","confidence":1.5}`, "confidence"},
		{`{"action":"a","rationale":"r","session_id":""}`, "session_id"},
		{`{"action":"a","rationale":"r","session_id":"a\u0000b"}`, "session_id"},
		{`{"action":"a","rationale":"r","alternatives":"x"}`, "alternatives"},
		{`{"action":"a","rationale":"r","why":"x"}`, "why"},
	} {
		e := callErr(t, srv, alice, "record_decision", tc.args)
		assert.Equal(t, crux.CodeInvalidParams, e.Code, tc.args)
		assert.Contains(t, e.Message, tc.param, tc.args)
	}
	assert.Empty(t, rows(t, call(t, srv, alice, "query_facts", `{"entity_prefix":"__decisions__::"}`)), "nothing written")
}
