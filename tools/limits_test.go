package tools_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/toolkit"
	"github.com/crux-go/crux/tools"
)

// limitCase hits one limit of docs/limits.md through one argument of one
// tool: with the value at the limit the call is not refused by it, one
// past the limit it is, with -32602 "<tool>: <param>: <reason>".
type limitCase struct {
	row    string // the limit's row in docs/limits.md
	tool   string
	args   string // @@ marks where the value goes; the fixture's placeholders may follow
	param  string // the argument the refusal names
	limit  int
	reason string
	value  func(n int) string // the value of size n; nil: n ASCII letters
	// otherRefusal: at the limit the call is refused for another reason
	// (an id the fixture lacks, a duplicate), which proves that this
	// limit let it through.
	otherRefusal bool
	// check replaces the standard check, for limits that need a few calls.
	check func(t *testing.T, srv *crux.Server)
}

func letters(n int) string { return strings.Repeat("a", n) }

// multibyte is n bytes of mostly two-byte characters: (n+1)/2 characters.
func multibyte(n int) string { return strings.Repeat("é", n/2) + strings.Repeat("a", n%2) }

func number(n int) string { return strconv.Itoa(n) }

// distinctWords is n distinct words, none a common one.
func distinctWords(n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = "w" + strconv.Itoa(i) + "x"
	}
	return strings.Join(ws, " ")
}

// items is n copies of the JSON value elem, comma separated.
func items(elem string) func(int) string {
	return func(n int) string { return strings.TrimSuffix(strings.Repeat(elem+",", n), ",") }
}

// nested is n levels of nested arrays, less the levels of the arguments
// that hold them.
func nested(outer int) func(int) string {
	return func(n int) string { return strings.Repeat("[", n-outer) + strings.Repeat("]", n-outer) }
}

// nameArguments are the arguments the name row covers: tool, argument and
// arguments (@@ where the name goes).
var nameArguments = []struct{ tool, param, args string }{
	{"store_fact", "entity", `{"entity":"@@","key":"k","value":"v"}`},
	{"store_fact", "key", `{"entity":"e","key":"@@","value":"v"}`},
	{"query_facts", "entity", `{"entity":"@@"}`},
	{"query_facts", "entity_prefix", `{"entity_prefix":"@@"}`},
	{"query_facts", "key", `{"key":"@@"}`},
	{"fact_history", "entity", `{"entity":"@@","key":"k"}`},
	{"fact_history", "key", `{"entity":"e","key":"@@"}`},
	{"memory_view", "entity", `{"entity":"@@"}`},
	{"memory_view", "key", `{"key":"@@"}`},
	{"memory_history", "entity", `{"entity":"@@","key":"k"}`},
	{"memory_history", "key", `{"entity":"e","key":"@@"}`},
	{"memory_freshness", "entity", `{"entity":"@@"}`},
	{"memory_freshness", "key", `{"key":"@@"}`},
	{"memory_contradictions", "entity", `{"entity":"@@"}`},
	{"memory_contradictions", "entity_prefix", `{"entity_prefix":"@@"}`},
	{"memory_contradictions", "key", `{"key":"@@"}`},
	{"memory_consolidate", "entity", `{"entity":"@@","key":"cache","canonical_value":"x","target_fact_ids":["$BOBFACT"]}`},
	{"memory_consolidate", "key", `{"entity":"service:api","key":"@@","canonical_value":"x","target_fact_ids":["$BOBFACT"]}`},
	{"memory_forget", "scope.value", `{"scope":{"type":"entity_prefix","value":"@@"},"reason":"r"}`},
	{"memory_forget_dry_run", "scope.value", `{"scope":{"type":"key_glob","value":"@@"}}`},
	{"get_session", "session_id", `{"session_id":"@@"}`},
	{"save_session", "session_id", `{"session_id":"@@","state":{}}`},
	{"session_checkpoint", "session_id", `{"session_id":"@@","token_budget":100}`},
	{"delete_session", "session_id", `{"session_id":"@@"}`},
	{"archive_session", "session_id", `{"session_id":"@@"}`},
	{"unarchive_session", "session_id", `{"session_id":"@@"}`},
	{"create_handoff", "session_id", `{"session_id":"@@"}`},
	{"resolve_principal", "session_id", `{"session_id":"@@"}`},
	{"resolve_principal", "passport_id", `{"passport_id":"@@"}`},
	{"list_sessions", "prefix", `{"prefix":"@@"}`},
	{"create_handoff", "target_agent", `{"session_id":"s1","target_agent":"@@"}`},
	{"create_handoff", "task_record.requester", `{"session_id":"s1","task_record":{"requester":"@@"}}`},
	{"list_observations", "session_id", `{"session_id":"@@"}`},
	{"list_observations", "provider", `{"session_id":"s1","provider":"@@"}`},
	{"get_observation", "session_id", `{"session_id":"@@","observation_id":"obs_1"}`},
	{"get_observation", "observation_id", `{"session_id":"s1","observation_id":"@@"}`},
	{"verify_observation", "session_id", `{"session_id":"@@","observation_id":"obs_1"}`},
	{"verify_observation", "observation_id", `{"session_id":"s1","observation_id":"@@"}`},
	{"receipt_verify", "receipt_id", `{"receipt_id":"@@"}`},
	{"output_attest", "receipt_id", `{"receipt_id":"@@","content_bytes_base64":"aGk="}`},
	{"output_attest", "content_path", `{"receipt_id":"$RECEIPT","content_path":"@@"}`},
	{"revoke_passport", "target_passport", `{"target_passport":"@@"}`},
	{"query", "tenant_id", `{"tenant_id":"@@","query":"storage"}`},
	{"query_scan", "tenant_id", `{"tenant_id":"@@","query":"storage"}`},
	{"query_expand", "tenant_id", `{"tenant_id":"@@","result_ids":["0:guide/storage.md"]}`},
	{"reuse_check", "tenant_id", `{"tenant_id":"@@","description":"storage"}`},
	{"engram_resolve", "tenant_id", `{"tenant_id":"@@"}`},
	{"audit_export_bundle", "scope.entity_prefix", `{"token_budget":50,"scope":{"entity_prefix":"@@"}}`},
	{"sync_pull", "entity_prefix", `{"entity_prefix":"@@"}`},
}

const sha = `"sha256":"` + configSHA + `"`

// limitCases are the cases of every row of docs/limits.md.
func limitCases() []limitCase {
	cases := []limitCase{
		{row: "arguments", tool: "list_entities", args: "@@", param: "arguments", limit: toolkit.MaxArgumentBytes,
			reason: "larger than 4194304 bytes", value: func(n int) string { return "{" + strings.Repeat(" ", n-2) + "}" }},
		{row: "depth", tool: "check_constraints", args: `{"action_description":"[[[{{{\"[","tool_parameters":{"a":@@}}`,
			param: "arguments", limit: toolkit.MaxDepth, reason: "nested deeper than 64 levels", value: nested(2)},
		{row: "string", tool: "store_fact", args: `{"entity":"e","key":"k","value":"@@"}`, param: "value",
			limit: toolkit.MaxValueBytes, reason: "longer than 1048576 bytes"},
		{row: "string", tool: "store_fact", args: `{"entity":"e","key":"k","value":"@@"}`, param: "value",
			limit: toolkit.MaxValueBytes, reason: "longer than 1048576 bytes", value: multibyte},
		{row: "string", tool: "check_constraints", args: `{"tool_name":"Bash","tool_parameters":{"command":"@@"}}`,
			param: "tool_parameters.command", limit: toolkit.MaxValueBytes, reason: "longer than 1048576 bytes"},

		{row: "number", tool: "save_session", args: `{"session_id":"n","state":{"x":@@}}`, param: "state.x",
			limit: toolkit.MaxNumberChars, reason: "a number longer than 64 characters",
			value: func(n int) string { return "0." + strings.Repeat("1", n-2) }},
		{row: "number", tool: "save_session", param: "state.x", limit: toolkit.MaxNumberChars,
			reason: "a number out of range", check: numberRange},

		{row: "record_decision.session_id", tool: "record_decision", args: `{"action":"a","rationale":"r","session_id":"@@"}`,
			param: "session_id", limit: 1009, reason: "longer than 1009 bytes"},
		{row: "execplan_gate.slug", tool: "execplan_gate", args: `{"slug":"@@","milestone":"M1","status":"passed","commit_sha":"3277c67","token_budget":5}`,
			param: "slug", limit: 1015, reason: "longer than 1015 bytes"},
		{row: "request_passport_mint.reason", tool: "request_passport_mint", args: `{"reason":"@@"}`,
			param: "reason", limit: 2048, reason: "longer than 2048 bytes"},
		{row: "revoke_passport.reason", tool: "revoke_passport", args: `{"target_passport":"nobody","reason":"@@"}`,
			param: "reason", limit: 2048, reason: "longer than 2048 bytes"},
		{row: "execplan_gate.milestone", tool: "execplan_gate", args: `{"slug":"s","milestone":"gate:@@","status":"passed","commit_sha":"3277c67","token_budget":5}`,
			param: "milestone", limit: 1019, reason: "longer than 1019 bytes"},
	}
	for _, n := range nameArguments {
		cases = append(cases, limitCase{row: "name", tool: n.tool, args: n.args, param: n.param, limit: tools.MaxNameBytes,
			reason: "longer than 1024 bytes", otherRefusal: n.tool == "memory_consolidate" || n.tool == "query_expand" || n.tool == "output_attest"})
	}
	// Characters in the schema, bytes in the tool: both messages.
	for _, tc := range []limitCase{
		{tool: "memory_acknowledge_use", args: `{"turn_id":"@@"}`, param: "turn_id", limit: 1024},
		{tool: "audit_config", args: `{"path":"@@",` + sha + `,"auditor":"a"}`, param: "path", limit: 1024},
		{tool: "audit_config", args: `{"path":"p",` + sha + `,"auditor":"@@"}`, param: "auditor", limit: 1024},
		{tool: "check_config_audit", args: `{"paths":[{"path":"@@",` + sha + `}]}`, param: "paths.0.path", limit: 1024, row: "check_config_audit.paths.path"},
		{tool: "artefact_put", args: `{"content_bytes_base64":"aGk=","mime_type":"@@"}`, param: "mime_type", limit: 255},
		{tool: "artefact_put", args: `{"content_bytes_base64":"aGk=","mime_type":"text/plain","tool_origin":"@@"}`, param: "tool_origin", limit: 255},
		{tool: "artefact_list", args: `{"scope":"@@"}`, param: "scope", limit: 255},
		{tool: "output_attest", args: `{"receipt_id":"$RECEIPT","content_bytes_base64":"aGk=","content_type":"@@"}`, param: "content_type", limit: 255},
		{tool: "output_attest", args: `{"receipt_id":"$RECEIPT","content_bytes_base64":"aGk=","claim_generator":"@@"}`, param: "claim_generator", limit: 255},
	} {
		if tc.row == "" {
			tc.row = tc.tool + "." + tc.param
		}
		chars, bytes := tc, tc
		chars.reason = fmt.Sprintf("longer than %d characters", tc.limit)
		bytes.reason, bytes.value = fmt.Sprintf("longer than %d bytes", tc.limit), multibyte
		cases = append(cases, chars, bytes)
	}
	// Characters (the schema's maxLength).
	for _, tc := range []limitCase{
		{tool: "audit_config", args: `{"path":"p",` + sha + `,"auditor":"a","note":"@@"}`, param: "note", limit: 8192},
		{tool: "artefact_get", args: `{"artefact_id":"@@"}`, param: "artefact_id", limit: 256},
		{tool: "archive_session", args: `{"session_id":"s1","reason":"@@"}`, param: "reason", limit: 1024},
		{tool: "declare_constraint", args: `{"constraint_type":"policy","assertion":"@@"}`, param: "assertion", limit: 4096},
		{tool: "check_constraints", args: `{"tool_name":"@@"}`, param: "tool_name", limit: 256},
		{tool: "enrich_action", args: `{"tool_name":"@@"}`, param: "tool_name", limit: 256},
		{tool: "memory_acknowledge_use", args: `{"turn_id":"t","fact_ids":["@@"]}`, param: "fact_ids.0", limit: 1024, row: "memory_acknowledge_use.fact_ids.id"},
		{tool: "memory_acknowledge_use", args: `{"turn_id":"t","intent":"@@"}`, param: "intent", limit: 128},
		{tool: "memory_acknowledge_use", args: `{"turn_id":"t","note":"@@"}`, param: "note", limit: 4096},
		{tool: "memory_consolidate", args: `{"entity":"service:api","key":"cache","canonical_value":"x","target_fact_ids":["$BOBFACT"],"consolidation_id":"@@"}`, param: "consolidation_id", limit: 256},
		{tool: "memory_edit", args: `{"fact_id":"$FACT","new_value":"x","reason":"@@"}`, param: "reason", limit: 1024},
	} {
		if tc.row == "" {
			tc.row = tc.tool + "." + tc.param
		}
		tc.reason = fmt.Sprintf("longer than %d characters", tc.limit)
		cases = append(cases, tc)
	}
	// Items (the schema's maxItems).
	for _, tc := range []limitCase{
		{tool: "check_config_audit", args: `{"paths":[@@]}`, param: "paths", limit: 256, value: items(`{"path":"p",` + sha + `}`)},
		{tool: "create_handoff", args: `{"session_id":"s1","task_record":{"sources":[@@]}}`, param: "task_record.sources", limit: 100},
		{tool: "create_handoff", args: `{"session_id":"s1","task_record":{"acceptance_criteria":[@@]}}`, param: "task_record.acceptance_criteria", limit: 100},
		{tool: "create_handoff", args: `{"session_id":"s1","task_record":{"boundaries":[@@]}}`, param: "task_record.boundaries", limit: 100},
		{tool: "execplan_gate", args: `{"slug":"s","milestone":"M1","status":"passed","commit_sha":"3277c67","token_budget":5,"artifacts":[@@]}`, param: "artifacts", limit: 256},
		{tool: "memory_acknowledge_use", args: `{"turn_id":"t","fact_ids":[@@]}`, param: "fact_ids", limit: 512, value: items(`"$FACT"`)},
		{tool: "memory_acknowledge_use", args: `{"turn_id":"t","retrieved_chunk_ids":[@@]}`, param: "retrieved_chunk_ids", limit: 512},
		{tool: "memory_consolidate", args: `{"entity":"service:api","key":"cache","canonical_value":"x","target_fact_ids":[@@]}`, param: "target_fact_ids", limit: 256,
			value: items(`"$BOBFACT"`), otherRefusal: true},
		{tool: "memory_consolidate", args: `{"entity":"service:api","key":"cache","canonical_value":"x","target_fact_ids":["$BOBFACT"],"protected_fact_ids":[@@]}`, param: "protected_fact_ids", limit: 1024,
			value: items(`"$FACT"`)},
		{tool: "record_decision", args: `{"action":"a","rationale":"r","alternatives":[@@]}`, param: "alternatives", limit: 256},
		{tool: "record_decision", args: `{"action":"a","rationale":"r","context_refs":[@@]}`, param: "context_refs", limit: 256},
		{tool: "store_fact", args: `{"entity":"e","key":"k","value":"v","supersedes":[@@]}`, param: "supersedes", limit: 256, value: items(`"$FACT"`)},
		{tool: "query_expand", args: `{"tenant_id":"default","result_ids":[@@]}`, param: "result_ids", limit: 50, value: items(`"0:guide/storage.md"`)},
		{tool: "engram_resolve", args: `{"names":[@@]}`, param: "names", limit: 20, value: items(`"careful-edit@1"`)},
		{tool: "sync_push", args: `{"allowlist":[@@]}`, param: "allowlist", limit: 64, value: items(`"*"`)},
	} {
		tc.row = tc.tool + "." + tc.param
		tc.reason = fmt.Sprintf("more than %d items", tc.limit)
		if tc.value == nil {
			tc.value = items(`"x"`)
		}
		cases = append(cases, tc)
	}
	// Numbers (the schema's maximum).
	for _, tc := range []limitCase{
		{tool: "artefact_put", args: `{"content_bytes_base64":"aGk=","mime_type":"text/plain","ttl_seconds":@@}`, param: "ttl_seconds", limit: 7776000},
		{tool: "artefact_list", args: `{"top_k":@@}`, param: "top_k", limit: 100},
		{tool: "get_gaps", args: `{"limit":@@}`, param: "limit", limit: 200},
		{tool: "fact_history", args: `{"entity":"e","key":"k","limit":@@}`, param: "limit", limit: 1000},
		{tool: "memory_history", args: `{"entity":"e","key":"k","limit":@@}`, param: "limit", limit: 1000},
		{tool: "list_entities", args: `{"limit":@@}`, param: "limit", limit: 1000},
		{tool: "memory_contradictions", args: `{"limit":@@}`, param: "limit", limit: 500},
		{tool: "memory_freshness", args: `{"top_k":@@}`, param: "top_k", limit: 500},
		{tool: "memory_sweep_candidates", args: `{"top_k":@@}`, param: "top_k", limit: 500},
		{tool: "memory_view", args: `{"top_k":@@}`, param: "top_k", limit: 500},
		{tool: "query_facts", args: `{"top_k":@@}`, param: "top_k", limit: 1000},
		{tool: "query", args: `{"tenant_id":"default","query":"storage","limit":@@}`, param: "limit", limit: 100},
		{tool: "query_scan", args: `{"tenant_id":"default","query":"storage","limit":@@}`, param: "limit", limit: 200},
		{tool: "reuse_check", args: `{"tenant_id":"default","description":"storage","limit":@@}`, param: "limit", limit: 20},
		{tool: "audit_export_bundle", args: `{"token_budget":@@}`, param: "token_budget", limit: 4194304},
	} {
		tc.row, tc.value = tc.tool+"."+tc.param, number
		tc.reason = fmt.Sprintf("must be <= %d", tc.limit)
		cases = append(cases, tc)
	}
	for _, tc := range []limitCase{
		{tool: "save_session", args: `{"session_id":"s9","state":{},"ttl_seconds":@@}`},
		{tool: "session_checkpoint", args: `{"session_id":"s9","token_budget":100,"ttl_seconds":@@}`},
	} {
		tc.row, tc.param, tc.value = tc.tool+".ttl_seconds", "ttl_seconds", number
		tc.limit, tc.reason = 31536000, "must be <= 31536000 (365 days)"
		cases = append(cases, tc)
	}
	return append(cases,
		limitCase{row: "artefact_put.content_bytes_base64", tool: "artefact_put", args: `{"content_bytes_base64":"@@","mime_type":"text/plain"}`,
			param: "content_bytes_base64", limit: 1048576, reason: "longer than 1048576 bytes",
			value: func(n int) string { return strings.Repeat("A", n) }},
		limitCase{row: "output_attest.content_bytes_base64", tool: "output_attest", args: `{"receipt_id":"$RECEIPT","content_bytes_base64":"@@"}`,
			param: "content_bytes_base64", limit: 1048576, reason: "longer than 1048576 bytes",
			value: func(n int) string { return strings.Repeat("A", n) }},
		limitCase{row: "output_attest.content_path file", tool: "output_attest", param: "content_path", limit: 64 << 20,
			reason: "the file is 67108865 bytes; the limit is 67108864", check: attestFileLimit},
		limitCase{row: "query.query", tool: "query", args: `{"tenant_id":"default","query":"@@"}`, param: "query",
			limit: 64, reason: "has more than 64 distinct words", value: distinctWords},
		limitCase{row: "query_facts.query", tool: "query_facts", args: `{"query":"@@"}`, param: "query",
			limit: 64, reason: "has more than 64 distinct words", value: distinctWords},
		limitCase{row: "query_facts.query", tool: "get_bootstrap", args: `{"query":"@@"}`, param: "query",
			limit: 64, reason: "has more than 64 distinct words", value: distinctWords},
		limitCase{row: "shell_pattern", tool: "declare_constraint", args: `{"constraint_type":"shell_pattern","assertion":"@@"}`,
			param: "assertion", limit: 1024, reason: "a shell_pattern is at most 1024 bytes"},
		limitCase{row: "session state", tool: "save_session", args: `{"session_id":"s9","state":@@}`, param: "state",
			limit: 1 << 20, reason: "larger than 1048576 bytes as compact JSON",
			value: func(n int) string { return `{"a":"` + strings.Repeat("x", n-8) + `"}` }},
		limitCase{row: "session state", tool: "session_checkpoint", param: "token_budget", limit: 1 << 20,
			reason: "lets the checkpoint exceed 1048576 bytes; lower it", check: checkpointLimit},
		limitCase{row: "handoff package", tool: "create_handoff", limit: 1 << 20,
			reason: "more than the 1048576 accept_handoff takes", check: handoffLimit},
		limitCase{row: "handoff package", tool: "accept_handoff", param: "package", limit: 1 << 20,
			reason: "longer than 1048576 bytes", check: handoffLimit},
		limitCase{row: "constraints", tool: "declare_constraint", limit: 1000,
			reason: "your tenant already holds 1000 active constraints", check: constraintsLimit},
		limitCase{row: "passport name", tool: "passport_split", limit: toolkit.MaxCallerNameBytes,
			reason: "longer than 256 bytes", check: passportNameLimit},
		limitCase{row: "passport_split.reason", tool: "passport_split", param: "reason", limit: 2048,
			reason: "longer than 2048 bytes", check: operatorLimit("passport_split",
				`{"target_passport":"olga","new_passport_name":"olga-2","token_budget":9,"reason":"@@"}`, "reason", "longer than 2048 bytes", 2048, letters)},
		limitCase{row: "passport_merge.reason", tool: "passport_merge", param: "reason", limit: 2048,
			reason: "longer than 2048 bytes", check: operatorLimit("passport_merge",
				`{"source_passport":"olga-old","target_passport":"olga","conflict_policy":"prefer_target","token_budget":9,"reason":"@@"}`, "reason", "longer than 2048 bytes", 2048, letters)},
		limitCase{row: "passport_link_device.capabilities_subset", tool: "passport_link_device", param: "capabilities_subset", limit: 6,
			reason: "more than 6 items", check: operatorLimit("passport_link_device",
				`{"device_fingerprint":"`+strings.Repeat("5e", 32)+`","token_budget":9,"capabilities_subset":[@@]}`, "capabilities_subset", "more than 6 items", 6, capabilities)},
		limitCase{row: "linked devices", tool: "passport_link_device", limit: 64,
			reason: "already has 64 linked devices, the most it may have", check: devicesLimit},
	)
}

// capabilities is n device capabilities, each of the six once and then
// repeats, as a JSON list's items.
func capabilities(n int) string {
	all := []string{"facts:read", "facts:write", "sessions:read", "sessions:write", "artefacts:read", "artefacts:write"}
	items := make([]string, n)
	for i := range items {
		items[i] = `"` + all[i%len(all)] + `"`
	}
	return strings.Join(items, ",")
}

// operatorLimit is the check of a limit of an identity-continuity tool,
// which only an operator may call: as the fixture's operator, olga, the
// call with the value at the limit succeeds and one past it is refused.
func operatorLimit(tool, args, param, reason string, limit int, value func(int) string) func(t *testing.T, srv *crux.Server) {
	return func(t *testing.T, srv *crux.Server) {
		e := callErr(t, srv, olga, tool, strings.Replace(args, "@@", value(limit+1), 1))
		assertInvalidParam(t, e, tool, param, reason)
		call(t, srv, olga, tool, strings.Replace(args, "@@", value(limit), 1))
	}
}

// passportNameLimit: every passport argument of the identity tools is at
// most 256 bytes once a leading <tenant>:: is removed.
func passportNameLimit(t *testing.T, srv *crux.Server) {
	for _, tc := range []struct{ tool, param, args string }{
		{"passport_split", "target_passport", `{"target_passport":"@@","new_passport_name":"olga-2","token_budget":9}`},
		{"passport_split", "new_passport_name", `{"target_passport":"olga","new_passport_name":"@@","token_budget":9}`},
		{"passport_split", "new_passport_name", `{"target_passport":"olga","new_passport_name":"default::@@","token_budget":9}`},
		{"passport_merge", "source_passport", `{"source_passport":"@@","target_passport":"olga","conflict_policy":"prefer_target","token_budget":9}`},
		{"passport_merge", "target_passport", `{"source_passport":"olga","target_passport":"@@","conflict_policy":"prefer_target","token_budget":9}`},
	} {
		run := func(n int) (*crux.Result, error) {
			return srv.CallTool(context.Background(), olga, tc.tool, json.RawMessage(strings.Replace(tc.args, "@@", letters(n), 1)))
		}
		want := tc.tool + ": " + tc.param + ": longer than 256 bytes"
		if _, err := run(256); err != nil {
			assert.NotEqual(t, want, err.(*crux.Error).Message, "refused at the limit")
		}
		_, err := run(257)
		var e *crux.Error
		require.True(t, errors.As(err, &e), "one past the limit: %v", err)
		assertInvalidParam(t, e, tc.tool, tc.param, "longer than 256 bytes")
	}
}

// devicesLimit: a passport links at most 64 devices.
func devicesLimit(t *testing.T, srv *crux.Server) {
	for i := 1; i < 64; i++ { // the fixture linked one
		call(t, srv, olga, "passport_link_device", fmt.Sprintf(`{"device_fingerprint":"%064x","token_budget":9}`, i))
	}
	e := callErr(t, srv, olga, "passport_link_device", fmt.Sprintf(`{"device_fingerprint":"%064x","token_budget":9}`, 64))
	assert.Equal(t, crux.CodeConflict, e.Code)
	assert.Equal(t, "passport_link_device: passport olga already has 64 linked devices, the most it may have", e.Message)
}

// TestLimits hits every limit of docs/limits.md at the limit (accepted)
// and one past it (refused with the message the table gives).
func TestLimits(t *testing.T) {
	srv, swap, fs := fixtureRig(t)
	ctx := context.Background()
	for _, tc := range limitCases() {
		t.Run(tc.row+"/"+tc.tool+"."+tc.param, func(t *testing.T) {
			swap.set(fs.restore(t))
			if tc.check != nil {
				tc.check(t, srv)
				return
			}
			value := tc.value
			if value == nil {
				value = letters
			}
			run := func(n int) error {
				args := fs.fx.expand(strings.Replace(tc.args, "@@", value(n), 1))
				_, err := srv.CallTool(ctx, alice, tc.tool, json.RawMessage(args))
				return err
			}
			want := tc.tool + ": " + tc.param + ": " + tc.reason
			err := run(tc.limit)
			var e *crux.Error
			if tc.otherRefusal {
				require.True(t, errors.As(err, &e), "at the limit: %v", err)
				require.Equal(t, crux.CodeInvalidParams, e.Code, e.Message)
				require.NotEqual(t, want, e.Message, "refused at the limit")
			} else {
				require.NoError(t, err, "at the limit")
			}
			err = run(tc.limit + 1)
			require.True(t, errors.As(err, &e), "one past the limit: %v", err)
			assertInvalidParam(t, e, tc.tool, tc.param, tc.reason)
		})
	}
}

// numberRange: numbers within the range of a float64 are accepted, others
// refused.
func numberRange(t *testing.T, srv *crux.Server) {
	for _, n := range []string{"1e308", "-1.7976931348623157e308", "4.9e-324", "-0", "0e-999999999", "0.000e999999999"} {
		call(t, srv, alice, "save_session", `{"session_id":"n","state":{"x":`+n+`}}`)
	}
	for _, n := range []string{"1e309", "-1e309", "1e-400", "-2E-1000001", "1E1000001", "0.0001e-321"} {
		e := callErr(t, srv, alice, "save_session", `{"session_id":"n","state":{"x":`+n+`}}`)
		assertInvalidParam(t, e, "save_session", "state.x", "a number out of range")
	}
}

// storedState is the state get_session returns for alice's session id.
func storedState(t *testing.T, srv *crux.Server, id string) json.RawMessage {
	t.Helper()
	var out struct {
		State json.RawMessage `json:"state"`
	}
	b, err := json.Marshal(call(t, srv, alice, "get_session", `{"session_id":"`+id+`"}`))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &out))
	return out.State
}

// checkpointLimit: a checkpoint of exactly 1 MiB is stored, one byte more
// is refused. A first checkpoint measures what the objective adds to.
func checkpointLimit(t *testing.T, srv *crux.Server) {
	args := func(objective int) string {
		return `{"session_id":"cp","token_budget":1048576,"objective":"` + letters(objective) + `"}`
	}
	call(t, srv, alice, "session_checkpoint", args(10))
	overhead := len(storedState(t, srv, "cp")) - 10
	n := 1<<20 - overhead
	call(t, srv, alice, "session_checkpoint", args(n))
	require.Len(t, storedState(t, srv, "cp"), 1<<20)
	e := callErr(t, srv, alice, "session_checkpoint", args(n+1))
	assertInvalidParam(t, e, "session_checkpoint", "token_budget", "lets the checkpoint exceed 1048576 bytes; lower it")
}

// handoffLimit: create_handoff makes a package of exactly 1 MiB, which bob
// accepts; one byte more is an error result. accept_handoff refuses a
// longer package string. A first package measures what the state adds to.
func handoffLimit(t *testing.T, srv *crux.Server) {
	handoff := func(state int) *crux.Result {
		call(t, srv, alice, "save_session", `{"session_id":"hs","state":{"a":"`+letters(state)+`"}}`)
		res, err := srv.CallTool(context.Background(), alice, "create_handoff", json.RawMessage(`{"session_id":"hs","target_agent":"bob"}`))
		require.NoError(t, err)
		return res
	}
	pkg := func(res *crux.Result) string {
		require.False(t, res.IsError, "%v", res.Content)
		var out struct {
			Package string `json:"package_json"`
		}
		require.NoError(t, json.Unmarshal([]byte(res.Content[0].Text), &out))
		return out.Package
	}
	overhead := len(pkg(handoff(10))) - 10
	n := 1<<20 - overhead
	p := pkg(handoff(n))
	require.Len(t, p, 1<<20)
	accept := func(p string) string {
		b, err := json.Marshal(map[string]string{"package": p})
		require.NoError(t, err)
		return string(b)
	}
	call(t, srv, bob, "accept_handoff", accept(p))

	res := handoff(n + 1)
	require.True(t, res.IsError)
	assert.True(t, strings.HasPrefix(res.Content[0].Text, "the package would be 1048577 bytes, more than the 1048576 accept_handoff takes; nothing was recorded"), res.Content[0].Text)
	e := callErr(t, srv, bob, "accept_handoff", accept(p+" "))
	assertInvalidParam(t, e, "accept_handoff", "package", "longer than 1048576 bytes")
}

// constraintsLimit: a tenant's 1000th active constraint is accepted, its
// 1001st refused with -32004.
func constraintsLimit(t *testing.T, srv *crux.Server) {
	held := len(call(t, srv, alice, "get_constraints", `{}`)["constraints"].([]any))
	for i := held; i < 1000; i++ {
		call(t, srv, alice, "declare_constraint", fmt.Sprintf(`{"constraint_type":"policy","assertion":"rule %d"}`, i))
	}
	e := callErr(t, srv, alice, "declare_constraint", `{"constraint_type":"policy","assertion":"one too many"}`)
	assert.Equal(t, crux.CodeConflict, e.Code)
	assert.Equal(t, "declare_constraint: your tenant already holds 1000 active constraints", e.Message)
}

// TestLimitsDocumented: docs/limits.md lists exactly the limits TestLimits
// hits, each with its limit and the refusal's reason.
func TestLimitsDocumented(t *testing.T) {
	f, err := os.Open("../docs/limits.md")
	require.NoError(t, err)
	defer f.Close()
	type row struct {
		limit   int
		refusal string
	}
	rows := map[string]row{}
	cell := regexp.MustCompile(`^\| ` + "`([^`]+)`" + ` \|[^|]*\| (\d+)[^|]*\| (.*) \|$`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), "| `") {
			continue
		}
		m := cell.FindStringSubmatch(sc.Text())
		require.NotNil(t, m, "a row of docs/limits.md that does not parse: %s", sc.Text())
		n, err := strconv.Atoi(m[2])
		require.NoError(t, err)
		require.NotContains(t, rows, m[1], "row %s twice", m[1])
		rows[m[1]] = row{n, m[3]}
	}
	require.NoError(t, sc.Err())
	hit := map[string]bool{}
	for _, tc := range limitCases() {
		r, ok := rows[tc.row]
		if !assert.True(t, ok, "docs/limits.md has no row %s", tc.row) {
			continue
		}
		hit[tc.row] = true
		assert.Equal(t, r.limit, tc.limit, "limit of row %s", tc.row)
		assert.Contains(t, r.refusal, tc.reason, "refusal of row %s", tc.row)
	}
	for name := range rows {
		assert.True(t, hit[name], "TestLimits does not hit row %s of docs/limits.md", name)
	}
}

// attestFileLimit: output_attest hashes a file of 64 MiB under its
// content root and refuses one byte more. The files are sparse.
func attestFileLimit(t *testing.T, _ *crux.Server) {
	root := t.TempDir()
	for name, n := range map[string]int64{"at": 64 << 20, "over": 64<<20 + 1} {
		f, err := os.Create(filepath.Join(root, name))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(n))
		require.NoError(t, f.Close())
	}
	flags := fixtureFlags()
	srv, _ := newServer(t, &crux.Options{Flags: &flags, AttestRoot: root})
	receipt := call(t, srv, alice, "record_decision", `{"action":"a","rationale":"r"}`)["receipt_id"].(string)
	out := call(t, srv, alice, "output_attest", `{"receipt_id":"`+receipt+`","content_path":"at"}`)
	require.EqualValues(t, 64<<20, out["manifest"].(map[string]any)["content_bytes"])
	e := callErr(t, srv, alice, "output_attest", `{"receipt_id":"`+receipt+`","content_path":"over"}`)
	assertInvalidParam(t, e, "output_attest", "content_path", "the file is 67108865 bytes; the limit is 67108864")
}
