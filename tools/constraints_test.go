package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
)

const (
	maxShellPatternBytes = 1024 // the longest shell_pattern assertion
	maxListedConstraints = 100  // get_constraints returns at most this many
)

func declare(t *testing.T, srv *crux.Server, c crux.Caller, typ, assertion, severity string) string {
	t.Helper()
	args, err := json.Marshal(map[string]string{"constraint_type": typ, "assertion": assertion, "severity": severity})
	require.NoError(t, err)
	return call(t, srv, c, "declare_constraint", string(args))["constraint_id"].(string)
}

func TestDeclareConstraint(t *testing.T) {
	srv, clk, db := newTestServer(t)
	got := call(t, srv, alice, "declare_constraint", `{"constraint_type":"policy","assertion":"never push to main"}`)
	assert.Regexp(t, `^c_[0-9a-f]{32}$`, got["constraint_id"])
	assert.Regexp(t, `^[0-9a-f]{64}$`, got["constraint_hash"])
	assert.Equal(t, "policy", got["constraint_type"])
	assert.Equal(t, "never push to main", got["assertion"])
	assert.Equal(t, "medium", got["severity"], "severity defaults to medium")
	assert.Equal(t, "active", got["status"])
	assert.Equal(t, "2026-03-01T12:00:00Z", got["created_at"])

	r := getReceipt(t, db, got["receipt_id"].(string))
	assert.True(t, receipts.Verify(r, srv.Keyring(), clk.Now()).OK(), "the constraint receipt is signed")
	h, err := r.Header()
	require.NoError(t, err)
	assert.Equal(t, "constraint", h.Kind)
	var payload map[string]any
	require.NoError(t, r.Payload(&payload))
	assert.Equal(t, got["constraint_id"], payload["constraint_id"])
	assert.Equal(t, got["constraint_hash"], payload["constraint_hash"])

	// The hash is the content's: the same rule declared again has the same hash.
	again := call(t, srv, bob, "declare_constraint", `{"constraint_type":"policy","assertion":"never push to main"}`)
	assert.Equal(t, got["constraint_hash"], again["constraint_hash"])
	assert.NotEqual(t, got["constraint_id"], again["constraint_id"])
}

func TestDeclareConstraintErrors(t *testing.T) {
	srv, _, _ := newTestServer(t)
	tests := []struct{ name, args, param string }{
		{"unknown type", `{"constraint_type":"rule","assertion":"x"}`, "constraint_type"},
		{"missing assertion", `{"constraint_type":"policy"}`, "assertion"},
		{"empty assertion", `{"constraint_type":"policy","assertion":""}`, "assertion"},
		{"unknown severity", `{"constraint_type":"policy","assertion":"x","severity":"urgent"}`, "severity"},
		{"invalid regexp", `{"constraint_type":"shell_pattern","assertion":"rm (-rf"}`, "assertion"},
		{"backreference is not RE2", `{"constraint_type":"shell_pattern","assertion":"(a)\\1"}`, "assertion"},
		{"pattern too long", `{"constraint_type":"shell_pattern","assertion":"` + strings.Repeat("a", maxShellPatternBytes+1) + `"}`, "assertion"},
		{"unknown argument", `{"constraint_type":"policy","assertion":"x","scope":"all"}`, "scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := callErr(t, srv, alice, "declare_constraint", tt.args)
			assert.Equal(t, crux.CodeInvalidParams, e.Code)
			assert.Equal(t, tt.param, paramOf(t, e).Param, e.Message)
		})
	}
	assert.Equal(t, 0.0, call(t, srv, alice, "get_constraints", `{}`)["count"], "nothing was stored")
}

func TestGetConstraints(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	low := declare(t, srv, alice, "boundary", "stay inside the repo", "low")
	clk.Advance(time.Second)
	high1 := declare(t, srv, alice, "policy", "ask before deploying", "high")
	clk.Advance(time.Second)
	crit := declare(t, srv, bob, "shell_pattern", `rm\s+-rf`, "critical")
	clk.Advance(time.Second)
	high2 := declare(t, srv, alice, "relationship", "alice reviews bob's changes", "high")

	got := call(t, srv, alice, "get_constraints", `{}`)
	assert.Equal(t, 4.0, got["count"])
	assert.Equal(t, false, got["truncated"])
	var ids []string
	for _, c := range objects(t, got, "constraints") {
		ids = append(ids, c["constraint_id"].(string))
		assert.Equal(t, "active", c["status"])
		assert.NotEmpty(t, c["created_at"])
	}
	assert.Equal(t, []string{crit, high1, high2, low}, ids, "severity first, then oldest first")

	got = call(t, srv, alice, "get_constraints", `{"constraint_type":"relationship"}`)
	require.Len(t, objects(t, got, "constraints"), 1)
	assert.Equal(t, high2, objects(t, got, "constraints")[0]["constraint_id"])

	// shell_pattern is not in the filter enum.
	e := callErr(t, srv, alice, "get_constraints", `{"constraint_type":"shell_pattern"}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Equal(t, "constraint_type", paramOf(t, e).Param)

	assert.Equal(t, 0.0, call(t, srv, alice, "get_constraints", `{"status":"suspended"}`)["count"])
	e = callErr(t, srv, alice, "get_constraints", `{"status":"deleted"}`)
	assert.Equal(t, "status", paramOf(t, e).Param)

	// Constraints are the tenant's: every agent sees them, another tenant none.
	assert.Equal(t, 4.0, call(t, srv, anon, "get_constraints", `{}`)["count"])
	other := crux.Caller{Agent: "alice", Authenticated: true, Tenant: "other"}
	assert.Equal(t, 0.0, call(t, srv, other, "get_constraints", `{}`)["count"])
}

func TestGetConstraintsBounded(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for i := 0; i < maxListedConstraints; i++ {
		declare(t, srv, alice, "policy", "rule number "+strings.Repeat("x", i%7+1), "low")
	}
	got := call(t, srv, alice, "get_constraints", `{}`)
	assert.Equal(t, float64(maxListedConstraints), got["count"])
	assert.Equal(t, false, got["truncated"])
	declare(t, srv, alice, "policy", "one rule too many", "low")
	got = call(t, srv, alice, "get_constraints", `{}`)
	assert.Equal(t, float64(maxListedConstraints), got["count"])
	assert.Equal(t, true, got["truncated"])
	assert.Less(t, answerSize(t, srv, alice, "get_constraints", `{}`), maxDefaultAnswer)
}

func matchedIDs(t *testing.T, got map[string]any) []string {
	var ids []string
	for _, m := range objects(t, got, "matched_constraints") {
		ids = append(ids, m["constraint_id"].(string))
	}
	return ids
}

func TestCheckConstraintsVerdicts(t *testing.T) {
	srv, _, _ := newTestServer(t)
	got := call(t, srv, alice, "check_constraints", `{}`)
	assert.Equal(t, "pass", got["verdict"], "a bare {} passes")
	assert.Empty(t, got["matched_constraints"])

	crit := declare(t, srv, alice, "policy", "never drop the production database", "critical")
	high := declare(t, srv, alice, "boundary", "never push to main", "high")
	low := declare(t, srv, alice, "context_flag", "small commits", "low")

	got = call(t, srv, alice, "check_constraints", `{"action_description":"drop production database tables"}`)
	assert.Equal(t, "block", got["verdict"])
	assert.Equal(t, []string{crit}, matchedIDs(t, got))
	assert.Equal(t, 1.0, objects(t, got, "matched_constraints")[0]["match_score"], "drop, production, database: all found")
	assert.Equal(t, "critical", objects(t, got, "matched_constraints")[0]["severity"])

	got = call(t, srv, alice, "check_constraints", `{"action_description":"git push origin main"}`)
	assert.Equal(t, "warn", got["verdict"])
	assert.Equal(t, []string{high}, matchedIDs(t, got))

	got = call(t, srv, alice, "check_constraints", `{"action_description":"make one small change"}`)
	assert.Equal(t, "pass", got["verdict"], "low matches are reported but pass")
	assert.Equal(t, []string{low}, matchedIDs(t, got))
	assert.Equal(t, 0.5, objects(t, got, "matched_constraints")[0]["match_score"], "small of small, commits")

	got = call(t, srv, alice, "check_constraints", `{"action_description":"read the readme"}`)
	assert.Equal(t, "pass", got["verdict"])
	assert.Empty(t, got["matched_constraints"])
	assert.Equal(t, 3.0, got["constraints_checked"])

	// tool_parameters count, and prefixes of four letters or more match.
	got = call(t, srv, alice, "check_constraints", `{"tool_name":"git","tool_parameters":{"args":["pushing","main"]}}`)
	assert.Equal(t, "warn", got["verdict"])
	assert.Contains(t, got, "enrichment_receipt", "with tool_name the action is enriched first")

	// Another tenant's constraints do not apply.
	other := crux.Caller{Agent: "alice", Authenticated: true, Tenant: "other"}
	got = call(t, srv, other, "check_constraints", `{"action_description":"drop production database tables"}`)
	assert.Equal(t, "pass", got["verdict"])
}

func TestCheckConstraintsShellPattern(t *testing.T) {
	srv, _, _ := newTestServer(t)
	id := declare(t, srv, alice, "shell_pattern", `rm\s+-rf\s+/`, "critical")
	for _, tool := range []string{"Bash", "bash", "SHELL", "sh"} {
		got := call(t, srv, bob, "check_constraints", `{"tool_name":"`+tool+`","tool_parameters":{"command":"sudo rm -rf /var/lib"}}`)
		assert.Equal(t, "block", got["verdict"], tool)
		assert.Equal(t, []string{id}, matchedIDs(t, got), tool)
		assert.Equal(t, 1.0, objects(t, got, "matched_constraints")[0]["match_score"])
	}
	got := call(t, srv, bob, "check_constraints", `{"tool_name":"bash","tool_parameters":{"command":["rm","-rf","/tmp"]}}`)
	assert.Equal(t, "block", got["verdict"], "an array command is joined by spaces")
	// Not a shell tool, or no command: the pattern is not applied, and it
	// never matches by keywords.
	got = call(t, srv, bob, "check_constraints", `{"tool_name":"Write","tool_parameters":{"command":"rm -rf /"}}`)
	assert.Equal(t, "pass", got["verdict"])
	got = call(t, srv, bob, "check_constraints", `{"action_description":"rm -rf /"}`)
	assert.Equal(t, "pass", got["verdict"])
	got = call(t, srv, bob, "check_constraints", `{"tool_name":"bash","tool_parameters":{"command":"ls -la /"}}`)
	assert.Equal(t, "pass", got["verdict"])
}

func TestCheckConstraintsHostilePattern(t *testing.T) {
	srv, _, _ := newTestServer(t)
	declare(t, srv, alice, "shell_pattern", `(a+)+$`, "critical")
	declare(t, srv, alice, "shell_pattern", `(x+x+)+y`, "high")
	long := strings.Repeat("a", 100000) + "!"
	args, err := json.Marshal(map[string]any{"tool_name": "bash", "tool_parameters": map[string]any{"command": strings.Repeat("x", 100000)}})
	require.NoError(t, err)
	// RE2 runs in linear time: both calls return (a backtracking engine would not).
	got := call(t, srv, alice, "check_constraints", string(args))
	assert.Equal(t, "pass", got["verdict"])
	args, err = json.Marshal(map[string]any{"tool_name": "bash", "tool_parameters": map[string]any{"command": long}})
	require.NoError(t, err)
	got = call(t, srv, alice, "check_constraints", string(args))
	assert.Equal(t, "pass", got["verdict"], "the trailing ! defeats $")
}

func TestCheckConstraintsTenantID(t *testing.T) {
	srv, _, _ := newTestServer(t)
	declare(t, srv, alice, "policy", "never push to main", "critical")
	got := call(t, srv, alice, "check_constraints", `{"tenant_id":"default","action_description":"push main"}`)
	assert.Equal(t, "block", got["verdict"])
	e := callErr(t, srv, alice, "check_constraints", `{"tenant_id":"someone-else","action_description":"push main"}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Equal(t, "tenant_id", paramOf(t, e).Param)
	e = callErr(t, srv, alice, "check_constraints", `{"tool_parameters":"rm"}`)
	assert.Equal(t, "tool_parameters", paramOf(t, e).Param)
}

const (
	hashA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	hashB = "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"
)

func TestAuditConfig(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	got := call(t, srv, alice, "audit_config", `{"path":".mcp.json","sha256":"`+hashA+`","auditor":"alice@example.com","note":"PR 12"}`)
	assert.Equal(t, hashA, got["sha256"])
	assert.Equal(t, ".mcp.json", got["path"])
	assert.Equal(t, "alice@example.com", got["auditor"])
	assert.Equal(t, "2026-03-01T12:00:00Z", got["audited_at"])
	assert.Regexp(t, `^f_[0-9a-f]{32}$`, got["fact_id"])
	assert.Equal(t, 1.0, got["version"])

	// Idempotent on the hash: a re-audit is a new version of the same record.
	clk.Advance(time.Hour)
	again := call(t, srv, bob, "audit_config", `{"path":"config/.mcp.json","sha256":"`+hashA+`","auditor":"bob"}`)
	assert.Equal(t, 2.0, again["version"])
	assert.Equal(t, "2026-03-01T13:00:00Z", again["audited_at"])
	hist := call(t, srv, alice, "fact_history", `{"entity":"__ops::config-audit","key":"sha256:`+hashA+`"}`)
	require.Len(t, objects(t, hist, "versions"), 2)
	assert.Equal(t, got["fact_id"], objects(t, hist, "versions")[1]["fact_id"], "newest first")

	// Reserved: never in an unfiltered query.
	assert.Empty(t, rows(t, call(t, srv, alice, "query_facts", `{}`)))
}

func TestAuditConfigReceipt(t *testing.T) {
	srv, clk, db := newTestServer(t)
	got := call(t, srv, alice, "audit_config", `{"path":"CLAUDE.md","sha256":"`+hashA+`","auditor":"alice"}`)
	r := getReceipt(t, db, got["receipt_id"].(string))
	assert.True(t, receipts.Verify(r, srv.Keyring(), clk.Now()).OK())
	h, err := r.Header()
	require.NoError(t, err)
	assert.Equal(t, "config_audit", h.Kind)
}

func TestAuditConfigErrors(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for name, tt := range map[string]struct{ args, param string }{
		"uppercase hex":   {`{"path":"p","sha256":"` + strings.ToUpper(hashA) + `","auditor":"a"}`, "sha256"},
		"63 digits":       {`{"path":"p","sha256":"` + hashA[:63] + `","auditor":"a"}`, "sha256"},
		"65 digits":       {`{"path":"p","sha256":"` + hashA + `0","auditor":"a"}`, "sha256"},
		"not hex":         {`{"path":"p","sha256":"` + strings.Repeat("g", 64) + `","auditor":"a"}`, "sha256"},
		"missing auditor": {`{"path":"p","sha256":"` + hashA + `"}`, "auditor"},
		"missing path":    {`{"sha256":"` + hashA + `","auditor":"a"}`, "path"},
		"control in path": {`{"path":"p\u0000","sha256":"` + hashA + `","auditor":"a"}`, "path"},
	} {
		t.Run(name, func(t *testing.T) {
			e := callErr(t, srv, alice, "audit_config", tt.args)
			assert.Equal(t, crux.CodeInvalidParams, e.Code)
			assert.Equal(t, tt.param, paramOf(t, e).Param, e.Message)
		})
	}
}

func TestCheckConfigAudit(t *testing.T) {
	srv, _, _ := newTestServer(t)
	call(t, srv, alice, "audit_config", `{"path":"old/settings.json","sha256":"`+hashA+`","auditor":"alice"}`)
	got := call(t, srv, bob, "check_config_audit", `{"paths":[{"path":"settings.json","sha256":"`+hashA+`"},{"path":".mcp.json","sha256":"`+hashB+`"}]}`)
	audited := objects(t, got, "audited")
	require.Len(t, audited, 1)
	assert.Equal(t, map[string]any{"path": "settings.json", "sha256": hashA, "audited_at": "2026-03-01T12:00:00Z",
		"auditor": "alice", "audited_path": "old/settings.json"}, audited[0])
	unaudited := objects(t, got, "unaudited")
	require.Len(t, unaudited, 1)
	assert.Equal(t, map[string]any{"path": ".mcp.json", "sha256": hashB}, unaudited[0])
	assert.Equal(t, "1 of 2 config files audited; unaudited: .mcp.json", got["content"])

	// Another tenant's audits do not count.
	other := crux.Caller{Agent: "alice", Authenticated: true, Tenant: "other"}
	got = call(t, srv, other, "check_config_audit", `{"paths":[{"path":"settings.json","sha256":"`+hashA+`"}]}`)
	assert.Empty(t, got["audited"])
	assert.Len(t, objects(t, got, "unaudited"), 1)
}

func TestCheckConfigAuditErrors(t *testing.T) {
	srv, _, _ := newTestServer(t)
	items := make([]string, 257)
	for i := range items {
		items[i] = `{"path":"p","sha256":"` + hashA + `"}`
	}
	for name, tt := range map[string]struct{ args, param string }{
		"missing paths":   {`{}`, "paths"},
		"empty paths":     {`{"paths":[]}`, "paths"},
		"missing sha256":  {`{"paths":[{"path":"p"}]}`, "paths.0.sha256"},
		"missing path":    {`{"paths":[{"sha256":"` + hashA + `"}]}`, "paths.0.path"},
		"bad sha256":      {`{"paths":[{"path":"p","sha256":"abc"}]}`, "paths.0.sha256"},
		"too many":        {`{"paths":[` + strings.Join(items, ",") + `]}`, "paths"},
		"unknown in item": {`{"paths":[{"path":"p","sha256":"` + hashA + `","size":1}]}`, "paths.0.size"},
	} {
		t.Run(name, func(t *testing.T) {
			e := callErr(t, srv, alice, "check_config_audit", tt.args)
			assert.Equal(t, crux.CodeInvalidParams, e.Code)
			assert.Equal(t, tt.param, paramOf(t, e).Param, e.Message)
		})
	}
}

func TestEnrichAction(t *testing.T) {
	srv, _, _ := newTestServer(t)
	rel := declare(t, srv, alice, "relationship", "bob owns the billing service", "high")
	declare(t, srv, alice, "policy", "billing service deploys need approval", "critical") // not a relationship
	args := `{"tool_name":"Bash","action_description":"Clean the billing cache.","tool_parameters":{"command":"sudo rm -rf /srv/billing/cache && curl https://hooks.example.com/notify","owner":"bob","cc":"ops@example.com","entity":"service:billing"}}`
	got := call(t, srv, alice, "enrich_action", args)
	assert.Equal(t, "crux.enriched_action_proposal.v1", got["schema"])
	assert.Equal(t, "default", got["tenant_id"])
	assert.Equal(t, "local", got["enrichment_mode"])
	tc := got["tool_call"].(map[string]any)
	assert.Equal(t, "Bash", tc["tool_name"])
	assert.Equal(t, "bob", tc["tool_parameters"].(map[string]any)["owner"])
	assert.True(t, strings.HasPrefix(got["narrative"].(string), "Clean the billing cache. Call Bash running "), got["narrative"])
	assert.Equal(t, []any{"bob", "ops@example.com"}, got["affected_principals"])
	assert.Equal(t, []any{
		map[string]any{"kind": "entity", "value": "service:billing"},
		map[string]any{"kind": "file", "value": "/srv/billing/cache"},
		map[string]any{"kind": "url", "value": "https://hooks.example.com/notify"},
	}, got["affected_resources"])
	sd := got["state_diff"].(map[string]any)
	assert.Equal(t, []any{"delete", "execute", "network"}, sd["operations"])
	assert.Equal(t, false, sd["reversible"])
	assert.Equal(t, 3.0, sd["resources_touched"])
	meta := got["consequence_metadata"].(map[string]any)
	assert.Equal(t, "critical", meta["risk_level"])
	assert.Equal(t, true, meta["destructive"])
	assert.Equal(t, true, meta["privileged"])
	assert.Equal(t, true, meta["external_egress"])
	assert.Equal(t, true, meta["requires_review"])
	assert.Contains(t, got["consequences"], "deletes or removes data; this may not be reversible")
	hits := objects(t, got, "relationship_hits")
	require.Len(t, hits, 1, "only relationship constraints are hits")
	assert.Equal(t, rel, hits[0]["constraint_id"])
	receipt := got["enrichment_receipt"].(map[string]any)
	assert.Regexp(t, `^[0-9a-f]{64}$`, receipt["hash"])
	assert.Equal(t, "blake3", receipt["alg"])
}

func TestEnrichActionDeterministic(t *testing.T) {
	srv, _, _ := newTestServer(t)
	declare(t, srv, alice, "relationship", "alice reviews the payments repo", "medium")
	args := json.RawMessage(`{"tool_name":"Write","tool_parameters":{"file_path":"/repo/payments/main.go","content":"package main","n":12345678901234567890},"action_description":"edit payments"}`)
	var texts []string
	var hashes []any
	for _, c := range []crux.Caller{alice, alice, bob} {
		res, err := srv.CallTool(context.Background(), c, "enrich_action", args)
		require.NoError(t, err)
		texts = append(texts, res.Content[0].Text)
		hashes = append(hashes, structured(t, res)["enrichment_receipt"].(map[string]any)["hash"])
	}
	assert.Equal(t, texts[0], texts[1], "same input, byte-identical output")
	assert.Equal(t, texts[0], texts[2], "the caller's name is not part of it")
	assert.Contains(t, texts[0], "12345678901234567890", "numbers are kept exactly")
	assert.Equal(t, hashes[0], hashes[1])

	// A different input gives a different hash.
	other := call(t, srv, alice, "enrich_action", `{"tool_name":"Write","tool_parameters":{"file_path":"/repo/other.go"}}`)
	assert.NotEqual(t, hashes[0], other["enrichment_receipt"].(map[string]any)["hash"])

	// Defaults: tool_parameters {} and a read-only tool.
	got := call(t, srv, alice, "enrich_action", `{"tool_name":"query_facts"}`)
	assert.Equal(t, map[string]any{}, got["tool_call"].(map[string]any)["tool_parameters"])
	assert.Equal(t, "low", got["consequence_metadata"].(map[string]any)["risk_level"])
	assert.Equal(t, []any{"read"}, got["state_diff"].(map[string]any)["operations"])
	assert.Empty(t, got["relationship_hits"])
}

func TestEnrichActionErrors(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for name, tt := range map[string]struct{ args, param string }{
		"missing tool_name":     {`{}`, "tool_name"},
		"empty tool_name":       {`{"tool_name":""}`, "tool_name"},
		"foreign tenant":        {`{"tool_name":"x","tenant_id":"other"}`, "tenant_id"},
		"parameters not object": {`{"tool_name":"x","tool_parameters":[1]}`, "tool_parameters"},
	} {
		t.Run(name, func(t *testing.T) {
			e := callErr(t, srv, alice, "enrich_action", tt.args)
			assert.Equal(t, crux.CodeInvalidParams, e.Code)
			assert.Equal(t, tt.param, paramOf(t, e).Param, e.Message)
		})
	}
	got := call(t, srv, alice, "enrich_action", `{"tool_name":"x","tenant_id":"default"}`)
	assert.Equal(t, "default", got["tenant_id"])
}

func TestDeclareConstraintLimit(t *testing.T) {
	srv, _, db := newTestServer(t)
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		for i := 0; i < store.MaxConstraints; i++ {
			if err := store.PutConstraint(tx, &store.Constraint{Tenant: tenant, Type: store.ConstraintPolicy, Assertion: "a", Severity: store.SeverityLow}); err != nil {
				return err
			}
		}
		return nil
	}))
	e := callErr(t, srv, alice, "declare_constraint", `{"constraint_type":"policy","assertion":"one too many"}`)
	assert.Equal(t, crux.CodeConflict, e.Code)
	// Nothing of the refused call stays: not even its receipt.
	assert.Zero(t, receiptCount(t, db))
	other := crux.Caller{Agent: "alice", Authenticated: true, Tenant: "other"}
	call(t, srv, other, "declare_constraint", `{"constraint_type":"policy","assertion":"fine elsewhere"}`)
}
