package tools_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
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

// TestRouteAccessMatrixOverHTTP: a call carried by HTTP gets the routes of
// the HTTP endpoint, with what the transport says it asks of a request.
func TestRouteAccessMatrixOverHTTP(t *testing.T) {
	signer, _, router := freeLocal(t)
	srv, _, _ := newTestServer(t, withSigner(signer), withRouter(router))
	for _, tc := range []struct {
		name    string
		tr      crux.Transport
		routes  []string
		binding string // in passport_binding
		note    string // in the notes of tools/call
		getNote string // in the notes of GET
	}{
		{"tokens required", crux.Transport{Kind: crux.TransportHTTP, Path: "/mcp", Tokens: true},
			[]string{"POST /mcp initialize", "POST /mcp tools/list", "POST /mcp tools/call", "GET /mcp", "DELETE /mcp"},
			"bearer token maps to", "refused with 401", "only the caller that opened the session"},
		{"tokens or anonymous", crux.Transport{Kind: crux.TransportHTTP, Path: "/mcp", Tokens: true, Anonymous: true},
			[]string{"POST /mcp initialize", "POST /mcp tools/list", "POST /mcp tools/call", "GET /mcp", "DELETE /mcp"},
			"without a token is anonymous", "optional", "Mcp-Session-Id"},
		{"no tokens, stateless", crux.Transport{Kind: crux.TransportHTTP, Path: "/x", Stateless: true},
			[]string{"POST /x initialize", "POST /x tools/list", "POST /x tools/call", "GET /x", "DELETE /x"},
			"every request is anonymous", "no authentication", "405"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			caller := alice
			caller.Transport = tc.tr
			got := call(t, srv, caller, "route_access_matrix", `{}`)
			assert.Equal(t, true, got["enforcing"])
			routes := objects(t, got, "routes")
			var names []string
			for _, r := range routes {
				names = append(names, r["route"].(string))
				assert.Equal(t, "http", r["transport"])
				assert.Contains(t, r["passport_binding"], tc.binding)
				assert.NotEmpty(t, r["tenant_binding"])
			}
			assert.Equal(t, tc.routes, names)
			assert.Equal(t, true, routes[2]["enforced"])
			assert.Equal(t, []any{"crux-mcp.<tool>", "corecrux.query.local"}, routes[2]["required_any_scope"])
			assert.Contains(t, routes[2]["notes"], tc.note)
			assert.Contains(t, routes[3]["notes"], tc.getNote)
		})
	}
	// stdio, named or not, keeps the stdio routes.
	for _, kind := range []string{"", crux.TransportStdio} {
		caller := alice
		caller.Transport = crux.Transport{Kind: kind}
		routes := objects(t, call(t, srv, caller, "route_access_matrix", `{}`), "routes")
		require.Len(t, routes, 3)
		assert.Equal(t, "stdio", routes[0]["transport"])
	}
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
