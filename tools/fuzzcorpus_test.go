package tools_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpus of FuzzTools in testdata/fuzz/FuzzTools")

// fuzzSeed is one input of FuzzTools.
type fuzzSeed struct {
	name          string // the corpus file's name
	tool, args    string
	agent, tenant string
	authenticated bool
}

// deep is a JSON array nested n levels deep.
func deep(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// fuzzSeeds are the seed corpus of FuzzTools: the valid call of every tool,
// then edge cases of callers and arguments.
func fuzzSeeds() []fuzzSeed {
	var seeds []fuzzSeed
	for _, vc := range validCalls {
		seeds = append(seeds, fuzzSeed{"valid_" + vc.tool, vc.tool, vc.args, vc.caller.Agent, vc.caller.Tenant, vc.caller.Authenticated})
	}
	fact := `{"entity":"e","key":"k","value":"v"}`
	return append(seeds, []fuzzSeed{
		// Callers.
		{"caller_double_colon", "store_fact", fact, "a::b", "", true},
		{"caller_trailing_colon", "save_session", `{"session_id":"s","state":{}}`, "x:", "", false},
		{"caller_anonymous_authenticated", "store_fact", fact, "anonymous", "", true},
		{"caller_empty_authenticated", "store_fact", `{"entity":"e","key":"k","value":"v","private":true}`, "", "", true},
		{"caller_unauthenticated_name", "store_fact", `{"entity":"e","key":"k","value":"v","private":true}`, "alice", "", false},
		{"caller_unicode", "memory_view", `{}`, "agënt-ü", "tenänt", true},
		{"caller_control_tenant", "query_facts", `{}`, "bob", "t\x01", true},
		{"caller_other_tenant", "accept_handoff", `{"package":$PACKAGE}`, "bob", "other", true},
		{"caller_nul_agent", "cuecrux_session", `{}`, "a\x00b", "", true},
		{"caller_invalid_utf8", "store_fact", fact, "anony\xffous", "", true},
		{"caller_invalid_utf8_tenant", "record_decision", `{"action":"a","rationale":"r"}`, "bob", "t\xfe", true},
		// Arguments of any tool.
		{"args_null", "list_entities", `null`, "alice", "", true},
		{"args_array", "query_facts", `[]`, "alice", "", true},
		{"args_string", "store_fact", `"x"`, "alice", "", true},
		{"args_huge_number", "query_facts", `{"top_k":1e400}`, "alice", "", true},
		{"args_int_overflow", "memory_view", `{"top_k":9223372036854775808}`, "alice", "", true},
		{"args_exponent_beyond_reason", "memory_view", `{"top_k":1E1000001,"token_budget":-1E-1000001}`, "alice", "", true},
		{"args_long_number", "save_session", `{"session_id":"n","state":{"pi":3.14159265358979323846264338327950288419716939937510582097494459230781640628620899862803482534211706798214808651}}`, "alice", "", true},
		{"args_lone_surrogate", "store_fact", `{"entity":"e","key":"k","value":"a\ud800b"}`, "alice", "", true},
		{"args_deep_state", "save_session", `{"session_id":"deep","state":{"a":` + deep(200) + `}}`, "alice", "", true},
		{"args_deep_parameters", "check_constraints", `{"tool_name":"Bash","tool_parameters":{"a":` + deep(200) + `}}`, "alice", "", true},
		{"args_deep_checkpoint", "session_checkpoint", `{"session_id":"cp","token_budget":50,"decisions":[` + deep(100) + `],"test_status":` + deep(100) + `}`, "alice", "", true},
		{"args_unknown", "get_gaps", `{"verbose":true,"turn_id":"t","contract":"c"}`, "alice", "", true},
		{"args_unknown_tool", "no_such_tool", `{}`, "alice", "", true},
		// Names, ids and scopes.
		{"reserved_entity", "store_fact", `{"entity":"__ops::x","key":"k","value":"v"}`, "alice", "", true},
		{"supersedes_empty", "store_fact", `{"entity":"e","key":"k","value":"v","supersedes":["","$FACT","$FACT"]}`, "alice", "", true},
		{"supersedes_others_private", "store_fact", `{"entity":"e","key":"k","value":"v","supersedes":["$PRIVATE"]}`, "bob", "", true},
		{"private_retires_shared", "store_fact", `{"entity":"e","key":"k","value":"v","private":true,"supersedes":["$BOBFACT"]}`, "alice", "", true},
		{"delete_others_private", "delete_fact", `{"fact_id":"$PRIVATE"}`, "bob", "", true},
		{"edit_others_private", "memory_edit", `{"fact_id":"$PRIVATE","new_value":"x"}`, "bob", "", true},
		{"consolidate_private", "memory_consolidate", `{"entity":"project:crux","key":"editor","canonical_value":"x","target_fact_ids":["$PRIVATE","$PRIVATE"]}`, "alice", "", true},
		{"artefact_of_another", "artefact_get", `{"artefact_id":"$ARTEFACT","token_budget":1}`, "bob", "", true},
		{"artefact_bad_base64", "artefact_put", `{"content_bytes_base64":"a===","mime_type":"__x"}`, "alice", "", true},
		{"handoff_to_self", "accept_handoff", `{"package":$PACKAGE}`, "alice", "", true},
		{"handoff_garbage", "accept_handoff", `{"package":"{\"schema\":\"crux.handoff.v1\",\"session\":{}}"}`, "bob", "", true},
		{"plan_as_anonymous", "resolve_principal", `{"session_id":"$PLAN"}`, "", "", false},
		{"forget_bad_glob", "memory_forget", `{"scope":{"type":"key_glob","value":"["},"reason":"r"}`, "alice", "", true},
		{"forget_other_tenant", "memory_forget", `{"scope":{"type":"tenant_id","value":"other"},"reason":"r","tenant_id":"other"}`, "alice", "", true},
		{"forget_dry_run_odd_scope", "memory_forget_dry_run", `{"scope":{"type":"before_timestamp","value":"0000-01-01T00:00:00Z","x":[1]}}`, "alice", "", true},
		{"query_as_of_year_zero", "query_facts", `{"query":"go","as_of":"0000-01-01T00:00:00Z","include_superseded":true}`, "alice", "", true},
		{"constraint_bad_regexp", "declare_constraint", `{"constraint_type":"shell_pattern","assertion":"("}`, "alice", "", true},
		{"checkpoint_tiny_budget", "session_checkpoint", `{"session_id":"s1","token_budget":1,"objective":"x"}`, "alice", "", true},
		{"egress_file_url", "egress_policy_check", `{"target":"file:///etc/passwd","allow_plain_http":true}`, "alice", "", true},
		{"session_reserved_id", "save_session", `{"session_id":"__agent::x","state":{}}`, "alice", "", true},
	}...)
}

// corpusFile is seed in the format of go test's fuzz corpus files.
func corpusFile(seed fuzzSeed) []byte {
	var b bytes.Buffer
	b.WriteString("go test fuzz v1\n")
	for _, s := range []string{seed.tool, seed.args, seed.agent, seed.tenant} {
		fmt.Fprintf(&b, "string(%q)\n", s)
	}
	fmt.Fprintf(&b, "bool(%v)\n", seed.authenticated)
	return b.Bytes()
}

// TestFuzzToolsCorpus: the committed seed corpus of FuzzTools holds every
// seed of fuzzSeeds (rewrite it with -update-corpus). Files the fuzzer
// added, such as crashers, are left alone.
func TestFuzzToolsCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzTools")
	if *updateCorpus {
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	seen := map[string]bool{}
	for _, seed := range fuzzSeeds() {
		require.False(t, seen[seed.name], "two seeds named %s", seed.name)
		seen[seed.name] = true
		path := filepath.Join(dir, seed.name)
		want := corpusFile(seed)
		if *updateCorpus {
			require.NoError(t, os.WriteFile(path, want, 0o644))
			continue
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err, "run go test -run TestFuzzToolsCorpus -update-corpus .")
		require.Equal(t, string(want), string(got), "%s is stale: run go test -run TestFuzzToolsCorpus -update-corpus .", path)
	}
}
