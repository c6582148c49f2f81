package tools_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
)

func TestStoreFactVersionChain(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	first := call(t, srv, alice, "store_fact", `{"entity":"project:crux","key":"language","value":"Rust"}`)
	assert.EqualValues(t, 1, first["version"])
	assert.Empty(t, first["superseded_fact_ids"])
	assert.Regexp(t, `^f_[0-9a-f]{32}$`, first["fact_id"])

	clk.Advance(time.Minute)
	second := call(t, srv, alice, "store_fact", `{"entity":"project:crux","key":"language","value":"Go"}`)
	assert.EqualValues(t, 2, second["version"])
	assert.Equal(t, []any{first["fact_id"]}, second["superseded_fact_ids"])

	// Only the current version is returned by default.
	got := call(t, srv, bob, "query_facts", `{"entity":"project:crux"}`)
	assert.Equal(t, []string{"Go"}, values(t, got))

	// include_superseded exposes the retired one with superseded_by.
	got = call(t, srv, bob, "query_facts", `{"entity":"project:crux","include_superseded":true}`)
	rs := rows(t, got)
	require.Len(t, rs, 2)
	assert.Equal(t, "Go", rs[0]["value"])
	assert.Equal(t, "Rust", rs[1]["value"])
	assert.Equal(t, second["fact_id"], rs[1]["superseded_by"])
	assert.NotContains(t, rs[0], "superseded_by")

	hist := call(t, srv, bob, "fact_history", `{"entity":"project:crux","key":"language"}`)
	vs := hist["versions"].([]any)
	require.Len(t, vs, 2)
	v1, v2 := vs[1].(map[string]any), vs[0].(map[string]any) // newest first
	assert.Equal(t, "Rust", v1["value"])
	assert.Equal(t, second["fact_id"], v1["superseded_by"])
	assert.Equal(t, first["fact_id"], v2["supersedes"])
	assert.EqualValues(t, 2, v2["version"])
	assert.Equal(t, "alice", v1["written_by"], "who wrote each version")
	assert.Equal(t, "alice", v2["written_by"])
	call(t, srv, bob, "store_fact", `{"entity":"project:crux","key":"language","value":"Zig"}`)
	vs = call(t, srv, alice, "fact_history", `{"entity":"project:crux","key":"language"}`)["versions"].([]any)
	assert.Equal(t, "bob", vs[0].(map[string]any)["written_by"])
	assert.Equal(t, "alice", vs[1].(map[string]any)["written_by"])
	rows := call(t, srv, alice, "query_facts", `{"entity":"project:crux","key":"language"}`)["rows"].([]any)
	require.Len(t, rows, 1)
	assert.Equal(t, "bob", rows[0].(map[string]any)["written_by"], "query_facts says who wrote each row")
	assert.NotContains(t, vs[0], "source_receipt", "store_fact mints no receipt")

	// A version written under a receipt names it.
	d := call(t, srv, alice, "record_decision", `{"session_id":"s1","action":"a","rationale":"r"}`)
	vs = call(t, srv, bob, "fact_history", fmt.Sprintf(`{"entity":%q,"key":%q}`, d["entity"], d["decision_id"]))["versions"].([]any)
	require.Len(t, vs, 1)
	assert.Equal(t, d["receipt_id"], vs[0].(map[string]any)["source_receipt"])
}

func TestSupersedesAcrossEntities(t *testing.T) {
	srv, _, _ := newTestServer(t)
	old := call(t, srv, alice, "store_fact", `{"entity":"service:api","key":"host","value":"old.example"}`)
	other := call(t, srv, alice, "store_fact", `{"entity":"service:web","key":"host","value":"web.example"}`)
	res := call(t, srv, alice, "store_fact", fmt.Sprintf(`{"entity":"service:gateway","key":"host","value":"gw.example","supersedes":[%q]}`, old["fact_id"]))
	assert.Equal(t, []any{old["fact_id"]}, res["superseded_fact_ids"])
	got := call(t, srv, alice, "query_facts", `{"query":"example"}`)
	assert.ElementsMatch(t, []string{"gw.example", "web.example"}, values(t, got))

	// One bad id rejects the whole write: nothing stored, nothing retired.
	e := callErr(t, srv, alice, "store_fact", fmt.Sprintf(`{"entity":"service:new","key":"host","value":"new.example","supersedes":[%q,"f_ffffffffffffffffffffffffffffffff"]}`, other["fact_id"]))
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, "store_fact: supersedes: fact f_ffffffffffffffffffffffffffffffff")
	got = call(t, srv, alice, "query_facts", `{"query":"example"}`)
	assert.ElementsMatch(t, []string{"gw.example", "web.example"}, values(t, got))
	assert.NotContains(t, call(t, srv, alice, "list_entities", `{}`)["entities"], "service:new")

	// A retired fact cannot be retired again: its history stays as it was.
	e = callErr(t, srv, alice, "store_fact", fmt.Sprintf(`{"entity":"service:x","key":"host","value":"x","supersedes":[%q]}`, old["fact_id"]))
	assert.Equal(t, fmt.Sprintf("store_fact: supersedes: fact %s is already superseded", old["fact_id"]), e.Message)

	// A private write cannot retire a shared fact.
	e = callErr(t, srv, alice, "store_fact", fmt.Sprintf(`{"entity":"mine","key":"k","value":"x","private":true,"supersedes":[%q]}`, other["fact_id"]))
	assert.Equal(t, fmt.Sprintf("store_fact: supersedes: fact %s is shared; a private fact cannot retire it", other["fact_id"]), e.Message)
	got = call(t, srv, bob, "query_facts", `{"query":"example"}`)
	assert.ElementsMatch(t, []string{"gw.example", "web.example"}, values(t, got))
}

func TestPrivateFacts(t *testing.T) {
	srv, _, _ := newTestServer(t)
	mine := call(t, srv, alice, "store_fact", `{"entity":"notes","key":"mood","value":"alice secret","private":true}`)
	assert.Equal(t, true, mine["private"])
	assert.Equal(t, "notes", mine["entity"])
	call(t, srv, bob, "store_fact", `{"entity":"notes","key":"mood","value":"bob public"}`)

	// Alice sees both, hers under the logical name.
	got := call(t, srv, alice, "query_facts", `{"entity":"notes"}`)
	assert.ElementsMatch(t, []string{"alice secret", "bob public"}, values(t, got))
	// Bob, anonymous callers and an unauthenticated "alice" never see it.
	for _, c := range []crux.Caller{bob, anon, {Agent: "alice"}} {
		for _, args := range []string{`{"entity":"notes"}`, `{"query":"secret"}`, `{}`, `{"entity_prefix":"no"}`, `{"key":"mood"}`, `{"entity_prefix":"__"}`} {
			got := call(t, srv, c, "query_facts", args)
			assert.NotContains(t, values(t, got), "alice secret", "caller %+v args %s", c, args)
		}
		hist := call(t, srv, c, "fact_history", `{"entity":"notes","key":"mood"}`)
		assert.Len(t, hist["versions"], 1)
		res := call(t, srv, c, "store_fact", fmt.Sprintf(`{"entity":"x","key":"y","value":"z","private":%v}`, c.Authenticated))
		_ = res
		e := callErr(t, srv, c, "store_fact", fmt.Sprintf(`{"entity":"x","key":"y","value":"z","supersedes":[%q]}`, mine["fact_id"]))
		assert.Equal(t, crux.CodeInvalidParams, e.Code)
		del, err := srv.CallTool(t.Context(), c, "delete_fact", []byte(fmt.Sprintf(`{"fact_id":%q}`, mine["fact_id"])))
		require.NoError(t, err)
		assert.True(t, del.IsError)
	}
	// Alice's private fact is still there.
	got = call(t, srv, alice, "query_facts", `{"query":"secret"}`)
	assert.Equal(t, []string{"alice secret"}, values(t, got))
	// A private entity shows in the owner's list only.
	call(t, srv, alice, "store_fact", `{"entity":"diary","key":"day1","value":"x","private":true}`)
	assert.Contains(t, call(t, srv, alice, "list_entities", `{}`)["entities"], "diary")
	assert.NotContains(t, call(t, srv, bob, "list_entities", `{}`)["entities"], "diary")
}

// A confidence of -0 must rank as 0, not ahead of everything (the rank
// index orders by the float's bits).
func TestNegativeZeroConfidence(t *testing.T) {
	srv, _, _ := newTestServer(t)
	call(t, srv, alice, "store_fact", `{"entity":"a","key":"k","value":"strong deploy","confidence":0.9}`)
	call(t, srv, alice, "store_fact", `{"entity":"b","key":"k","value":"noise deploy","confidence":-0}`)
	call(t, srv, alice, "store_fact", `{"entity":"c","key":"k","value":"noise deploy","confidence":-0}`)
	assert.Equal(t, []string{"strong deploy"}, values(t, call(t, srv, alice, "query_facts", `{"min_effective_confidence":0.5}`)))
	assert.Equal(t, []string{"strong deploy"}, values(t, call(t, srv, alice, "query_facts", `{"query":"deploy","min_effective_confidence":0.5}`)))
	assert.Equal(t, []string{"strong deploy"}, values(t, call(t, srv, alice, "query_facts", `{"top_k":1}`)))
}

func TestTenantsAreSeparate(t *testing.T) {
	srv, _, _ := newTestServer(t)
	acme := crux.Caller{Agent: "alice", Authenticated: true, Tenant: "acme"}
	call(t, srv, acme, "store_fact", `{"entity":"plan","key":"q1","value":"acme plan"}`)
	got := call(t, srv, alice, "query_facts", `{"query":"plan"}`)
	assert.Empty(t, rows(t, got))
	got = call(t, srv, acme, "query_facts", `{"query":"plan"}`)
	assert.Equal(t, []string{"acme plan"}, values(t, got))
}

func TestFreshnessRanking(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	call(t, srv, alice, "store_fact", `{"entity":"ops","key":"build","value":"green","confidence":0.9,"horizon_class":"volatile"}`)
	call(t, srv, alice, "store_fact", `{"entity":"ops","key":"owner","value":"team-a","confidence":0.6,"horizon_class":"stable"}`)
	call(t, srv, alice, "store_fact", `{"entity":"ops","key":"note","value":"hours","confidence":0.8,"freshness_horizon":"valid for a few hours"}`)
	got := call(t, srv, alice, "query_facts", `{"entity":"ops"}`)
	assert.Equal(t, []string{"green", "hours", "team-a"}, values(t, got))
	rs := rows(t, got)
	assert.Equal(t, "volatile", rs[1]["horizon_class"], "freshness_horizon maps to a class")
	assert.Equal(t, "fresh", rs[0]["freshness"])

	// 24 hours exactly is still fresh; past it the volatile facts are stale
	// and rank at half their stored confidence, which itself is unchanged.
	clk.Advance(24 * time.Hour)
	got = call(t, srv, alice, "query_facts", `{"entity":"ops"}`)
	assert.Equal(t, "fresh", rows(t, got)[0]["freshness"])
	clk.Advance(time.Second)
	got = call(t, srv, alice, "query_facts", `{"entity":"ops"}`)
	assert.Equal(t, []string{"team-a", "green", "hours"}, values(t, got))
	rs = rows(t, got)
	assert.Equal(t, "stale", rs[1]["freshness"])
	assert.InDelta(t, 0.9, rs[1]["confidence"], 1e-9)
	assert.InDelta(t, 0.45, rs[1]["effective_confidence"], 1e-9)
	assert.InDelta(t, 24.0, rs[1]["age_hours"], 0.01)

	// The floor drops them and says how many it dropped.
	got = call(t, srv, alice, "query_facts", `{"entity":"ops","min_effective_confidence":0.5}`)
	assert.Equal(t, []string{"team-a"}, values(t, got))
	assert.EqualValues(t, 2, got["filtered_below_threshold"])
	got = call(t, srv, alice, "query_facts", `{"entity":"nothing-here","min_effective_confidence":0.5}`)
	assert.EqualValues(t, 0, got["filtered_below_threshold"])
	// The unfiltered path reports a floor hit too.
	got = call(t, srv, alice, "query_facts", `{"min_effective_confidence":0.7}`)
	assert.Empty(t, rows(t, got))
	assert.GreaterOrEqual(t, got["filtered_below_threshold"], 1.0)
}

func TestDefaultHorizonByPrefix(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for entity, want := range map[string]string{"execplan:x": "medium", "incident:2026-01-01": "medium", "bench:y": "stable", "user": "none"} {
		got := call(t, srv, alice, "store_fact", fmt.Sprintf(`{"entity":%q,"key":"k","value":"v"}`, entity))
		assert.Equal(t, want, got["horizon_class"], entity)
	}
}

func TestAsOf(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	t0 := clk.Now()
	call(t, srv, alice, "store_fact", `{"entity":"office","key":"city","value":"Leeds"}`)
	clk.Advance(48 * time.Hour)
	call(t, srv, alice, "store_fact", `{"entity":"office","key":"city","value":"York"}`)
	at := func(d time.Duration) []string {
		return values(t, call(t, srv, alice, "query_facts", fmt.Sprintf(`{"entity":"office","as_of":%q}`, t0.Add(d).Format(time.RFC3339))))
	}
	assert.Empty(t, at(-time.Hour))
	assert.Equal(t, []string{"Leeds"}, at(time.Hour))
	assert.Equal(t, []string{"York"}, at(48*time.Hour), "half-open: the old one ends where the new one starts")
	assert.Equal(t, []string{"York"}, at(72*time.Hour))
}

func TestFiltersHonoured(t *testing.T) {
	srv, _, _ := newTestServer(t)
	call(t, srv, alice, "store_fact", `{"entity":"project:a","key":"lang","value":"go"}`)
	call(t, srv, alice, "store_fact", `{"entity":"project:a","key":"db","value":"bbolt"}`)
	call(t, srv, alice, "store_fact", `{"entity":"project:b","key":"lang","value":"rust"}`)
	call(t, srv, alice, "store_fact", `{"entity":"person:ann","key":"lang","value":"english"}`)
	call(t, srv, alice, "store_fact", `{"entity":"project:ab","key":"lang","value":"zig"}`)
	tests := []struct{ args, want string }{
		{`{"entity":"project:a"}`, "bbolt go"},
		{`{"entity_prefix":"project:"}`, "bbolt go rust zig"},
		{`{"key":"lang"}`, "english go rust zig"},
		{`{"entity_prefix":"project:","key":"lang"}`, "go rust zig"},
		{`{"entity":"project:a","key":"lang"}`, "go"},
		{`{"entity_prefix":"proj","query":"ru"}`, "rust"},
		{`{"query":"bbolt rust"}`, "bbolt rust"},
		{`{"query":"ANN"}`, "english"},
		{`{"query":"ust"}`, ""},
		{`{"top_k":2}`, "2"},
	}
	for _, tt := range tests {
		got := values(t, call(t, srv, alice, "query_facts", tt.args))
		if tt.want == "2" {
			assert.Len(t, got, 2, tt.args)
			continue
		}
		assert.ElementsMatch(t, strings.Fields(tt.want), got, tt.args)
	}
}

func TestTokenBudget(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for i := range 5 {
		call(t, srv, alice, "store_fact", fmt.Sprintf(`{"entity":"doc","key":"k%d","value":%q}`, i, strings.Repeat("w", 400)))
	}
	all := call(t, srv, alice, "query_facts", `{"entity":"doc"}`)
	require.Len(t, rows(t, all), 5)
	assert.Equal(t, false, all["truncated_by_token_budget"])
	perRow := all["total_tokens"].(float64) / 5

	got := call(t, srv, alice, "query_facts", fmt.Sprintf(`{"entity":"doc","token_budget":%d}`, int(perRow*2.5)))
	assert.Len(t, rows(t, got), 2)
	assert.Equal(t, true, got["truncated_by_token_budget"])
	assert.LessOrEqual(t, got["total_tokens"].(float64), perRow*2.5)
	// The first row is always returned.
	got = call(t, srv, alice, "query_facts", `{"entity":"doc","token_budget":1}`)
	assert.Len(t, rows(t, got), 1)
}

func TestDeleteFact(t *testing.T) {
	srv, _, _ := newTestServer(t)
	f := call(t, srv, alice, "store_fact", `{"entity":"tmp","key":"k","value":"gone soon"}`)
	del := call(t, srv, alice, "delete_fact", fmt.Sprintf(`{"fact_id":%q}`, f["fact_id"]))
	assert.Equal(t, true, del["deleted"])
	assert.Empty(t, rows(t, call(t, srv, alice, "query_facts", `{"query":"gone"}`)))
	assert.Empty(t, rows(t, call(t, srv, alice, "query_facts", `{"entity":"tmp","include_superseded":true}`)))
	assert.NotContains(t, call(t, srv, alice, "list_entities", `{}`)["entities"], "tmp")
	hist := call(t, srv, alice, "fact_history", `{"entity":"tmp","key":"k"}`)["versions"].([]any)
	require.Len(t, hist, 1)
	assert.Equal(t, true, hist[0].(map[string]any)["deleted"])

	again := call(t, srv, alice, "delete_fact", fmt.Sprintf(`{"fact_id":%q}`, f["fact_id"]))
	assert.Equal(t, false, again["deleted"])

	res, err := srv.CallTool(t.Context(), alice, "delete_fact", []byte(`{"fact_id":"f_nope"}`))
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Equal(t, "fact not found: f_nope", res.Content[0].Text)

	// A new write after a delete starts a fresh current version.
	n := call(t, srv, alice, "store_fact", `{"entity":"tmp","key":"k","value":"back"}`)
	assert.EqualValues(t, 2, n["version"])
	assert.Empty(t, n["superseded_fact_ids"])

	// Only the current version is deleted, as every tool changing a fact by
	// fact_id: an older one is -32004 naming the current one.
	v3 := call(t, srv, alice, "store_fact", `{"entity":"tmp","key":"k","value":"newer"}`)["fact_id"].(string)
	e := callErr(t, srv, alice, "delete_fact", fmt.Sprintf(`{"fact_id":%q}`, n["fact_id"]))
	assert.Equal(t, crux.CodeConflict, e.Code)
	assert.Equal(t, fmt.Sprintf("delete_fact: fact %s is not the current version; the current version is %s", n["fact_id"], v3), e.Message)
	assert.Equal(t, []string{"newer"}, values(t, call(t, srv, alice, "query_facts", `{"entity":"tmp"}`)))
}

func TestListEntities(t *testing.T) {
	srv, _, _ := newTestServer(t)
	assert.Equal(t, []any{}, call(t, srv, alice, "list_entities", `{}`)["entities"])
	call(t, srv, alice, "store_fact", `{"entity":"zeta","key":"k","value":"1"}`)
	call(t, srv, alice, "store_fact", `{"entity":"alpha","key":"k","value":"1"}`)
	call(t, srv, alice, "store_fact", `{"entity":"alpha","key":"k","value":"2"}`)
	call(t, srv, alice, "store_fact", `{"entity":"alpha","key":"j","value":"1"}`)
	assert.Equal(t, []any{"alpha", "zeta"}, call(t, srv, alice, "list_entities", `{}`)["entities"])
}

// A private chain belongs to one owner and the shared chain to everyone:
// writes in one never supersede facts of another.
func TestChainsKeepTheirScope(t *testing.T) {
	srv, _, _ := newTestServer(t)
	call(t, srv, bob, "store_fact", `{"entity":"plan","key":"k","value":"shared"}`)
	mine := call(t, srv, alice, "store_fact", `{"entity":"plan","key":"k","value":"alice only","private":true}`)
	assert.EqualValues(t, 1, mine["version"])
	assert.Empty(t, mine["superseded_fact_ids"])
	got := call(t, srv, bob, "query_facts", `{"entity":"plan"}`)
	assert.Equal(t, []string{"shared"}, values(t, got))
}

func TestAuditEnvelope(t *testing.T) {
	srv, _, _ := newTestServer(t)
	call(t, srv, alice, "store_fact", `{"entity":"proj","key":"k","value":"v","source_receipt":"r_src"}`)
	got := call(t, srv, alice, "query_facts", `{"entity":"proj"}`)
	assert.NotContains(t, got, "envelope", "off by default")

	flags := crux.DefaultFlags()
	flags.AuditEnvelope = true
	srv, clk, _ := newTestServer(t, withFlags(flags))
	f := call(t, srv, alice, "store_fact", `{"entity":"proj","key":"k","value":"v","source_receipt":"r_src"}`)
	clk.Advance(48 * time.Hour)
	res, err := srv.CallTool(t.Context(), alice, "query_facts", []byte(`{"entity":"proj"}`))
	require.NoError(t, err)
	env := structured(t, res)["envelope"].(map[string]any)
	assert.Equal(t, []any{"r_src"}, env["receipts_used"])
	used := env["memories_used"].([]any)
	require.Len(t, used, 1)
	assert.Equal(t, f["fact_id"], used[0].(map[string]any)["fact_id"])
	assert.EqualValues(t, 2, used[0].(map[string]any)["age_days"])
	assert.Equal(t, "crux-mcp.query_facts", env["autonomy_consumed"].(map[string]any)["capability"])
	assert.NotNil(t, res.Meta["envelope"], "mirrored at _meta")
}

// Pinned facts survive decay: for the agent who pinned it, a stale fact
// ranks at its stored confidence; for everyone else it is demoted.
func TestPinnedFactsSurviveDecay(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	f := call(t, srv, alice, "store_fact", `{"entity":"ops","key":"a","value":"pinned","confidence":0.8,"horizon_class":"volatile"}`)
	call(t, srv, alice, "store_fact", `{"entity":"ops","key":"b","value":"steady","confidence":0.6}`)
	call(t, srv, alice, "memory_pin", fmt.Sprintf(`{"fact_id":%q}`, f["fact_id"]))
	clk.Advance(48 * time.Hour)
	assert.Equal(t, []string{"pinned", "steady"}, values(t, call(t, srv, alice, "query_facts", `{"entity":"ops"}`)))
	assert.Equal(t, []string{"steady", "pinned"}, values(t, call(t, srv, bob, "query_facts", `{"entity":"ops"}`)))
	r := rows(t, call(t, srv, alice, "query_facts", `{"entity":"ops"}`))[0]
	assert.Equal(t, "stale", r["freshness"], "the fact is still reported stale")
	assert.InDelta(t, 0.8, r["effective_confidence"], 1e-9)
}
