package tools_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store"
)

// A burst of receipts an agent mints for itself earns no more than the
// UTC days it spans: 20 s of record_decision and memory_acknowledge_use
// calls across midnight leave it below trusted, with identity operations
// and revoking others refused; the same calls spread over ten days make
// it trusted.
func TestTiersCannotBeFarmed(t *testing.T) {
	flags := crux.DefaultFlags()
	flags.IdentityContinuity, flags.PassportRevocation = true, true
	clk := &clock{t: time.Date(2026, 3, 1, 23, 59, 50, 0, time.UTC)}
	srv, _, _ := newTestServer(t, withFlags(flags), withClock(clk))
	m := crux.Caller{Agent: "mallory", Authenticated: true}
	call(t, srv, m, "issue_passport", `{}`)
	call(t, srv, alice, "issue_passport", `{}`)
	const calls = 2100
	for i := range calls {
		clk.Advance(20 * time.Second / calls)
		if i%2 == 0 {
			call(t, srv, m, "record_decision", fmt.Sprintf(`{"action":"a%d","rationale":"r"}`, i))
		} else {
			call(t, srv, m, "memory_acknowledge_use", fmt.Sprintf(`{"turn_id":"t%d"}`, i))
		}
	}
	p := call(t, srv, m, "get_passport", `{}`)
	assert.GreaterOrEqual(t, p["receipt_count"], float64(calls/2), "a receipt per decision at least")
	assert.EqualValues(t, 2*50, p["tier_credit"], "two UTC days credit 50 each")
	assert.Less(t, store.TierRank(p["reputation_tier"].(string)), store.TierRank(store.TierTrusted))
	e := callErr(t, srv, m, "passport_split", `{"target_passport":"mallory","new_passport_name":"m2","token_budget":500}`)
	assert.Equal(t, crux.CodeForbidden, e.Code)
	assert.Equal(t, "operator_required", e.Data.(map[string]any)["reason"])
	assert.Contains(t, toolError(t, srv, m, "revoke_passport", `{"target_passport":"alice"}`), "mallory may not revoke passport alice")
	assert.Equal(t, false, call(t, srv, alice, "get_passport", `{}`)["revoked"])

	// Real use over days grows the tier.
	for range 10 {
		clk.Advance(24 * time.Hour)
		for i := range 50 {
			call(t, srv, alice, "record_decision", fmt.Sprintf(`{"action":"d%d","rationale":"r"}`, i))
		}
	}
	assert.Equal(t, store.TierTrusted, call(t, srv, alice, "get_passport", `{}`)["reputation_tier"])
}

// An operator that owns only the target cannot merge another agent's
// passport into its own: the merge is refused and changes nothing.
func TestMergeOfAnotherAgentsPassportRefused(t *testing.T) {
	srv, _, _ := identityServer(t) // alice trusted, bob basic
	call(t, srv, bob, "store_fact", `{"entity":"acct","key":"pin","value":"bob-secret","private":true}`)
	for _, args := range []string{
		`{"source_passport":"bob","target_passport":"alice","conflict_policy":"prefer_target","token_budget":500}`,
		`{"source_passport":"alice","target_passport":"bob","conflict_policy":"prefer_source","token_budget":500}`,
	} {
		e := callErr(t, srv, alice, "passport_merge", args)
		require.Equal(t, crux.CodeForbidden, e.Code, args)
		assert.Equal(t, "not_own_passport", e.Data.(map[string]any)["reason"])
	}
	assert.Equal(t, []string{"bob-secret"}, privateValues(t, srv, bob))
	assert.NotContains(t, privateValues(t, srv, alice), "bob-secret")
	assert.Nil(t, call(t, srv, bob, "get_passport", `{}`)["retired_into"])
	assert.Nil(t, call(t, srv, alice, "get_passport", `{}`)["retired_into"])
}

// An agent that is not an operator forgets only what it wrote: a tenant_id
// or far before_timestamp scope leaves every other agent's facts, counted
// as others_skipped (their private ones are not even counted), and a
// passport_id scope naming another agent is refused. An operator's forget
// reaches every writer's shared facts.
func TestForgetCannotWipeOthersFacts(t *testing.T) {
	srv, _, db := newTestServer(t)
	forgetPut(t, srv, alice, "team", "plan", "alice's plan")
	forgetPut(t, srv, alice, "team", "secret", "alice's secret", "private")
	forgetPut(t, srv, anon, "team", "rumour", "written anonymously")
	forgetPut(t, srv, bob, "team", "notes", "bob's notes")
	forgetPut(t, srv, bob, "team", "diary", "bob's diary", "private")
	all := func(c crux.Caller) []string {
		return values(t, call(t, srv, c, "query_facts", `{"include_superseded":true}`))
	}

	for _, scope := range []string{
		`{"type":"tenant_id","value":"default"}`,
		`{"type":"before_timestamp","value":"2100-01-01T00:00:00Z"}`,
		`{"type":"key_glob","value":"*"}`,
		`{"type":"entity_prefix","value":"team"}`,
	} {
		dry := call(t, srv, bob, "memory_forget_dry_run", `{"scope":`+scope+`}`)
		assert.EqualValues(t, 2, dry["count"], scope)
		assert.EqualValues(t, 2, dry["others_skipped"], "%s: alice's shared fact and the anonymous one", scope)
	}
	got := call(t, srv, bob, "memory_forget", `{"scope":{"type":"tenant_id","value":"default"},"reason":"wipe"}`)
	assert.EqualValues(t, 2, got["facts_affected"])
	assert.EqualValues(t, 2, got["others_skipped"])
	assert.ElementsMatch(t, []string{"alice's plan", "alice's secret", "written anonymously"}, all(alice))

	e := callErr(t, srv, bob, "memory_forget", `{"scope":{"type":"passport_id","value":"alice"},"reason":"r"}`)
	assert.Equal(t, crux.CodeForbidden, e.Code)
	assert.Equal(t, map[string]any{"reason": "operator_required"}, e.Data)

	// An anonymous caller forgets what was written anonymously, nothing else.
	got = call(t, srv, anon, "memory_forget", `{"scope":{"type":"tenant_id","value":"default"},"reason":"r"}`)
	assert.EqualValues(t, 1, got["facts_affected"])
	assert.EqualValues(t, 1, got["others_skipped"])
	assert.ElementsMatch(t, []string{"alice's plan", "alice's secret"}, all(alice))

	// An operator reaches alice's shared fact, never her private one.
	makeOperator(t, srv, db, bob)
	got = call(t, srv, bob, "memory_forget", `{"scope":{"type":"passport_id","value":"alice"},"reason":"alice left"}`)
	assert.EqualValues(t, 1, got["facts_affected"])
	assert.Equal(t, []string{"alice's secret"}, all(alice))
}

// A pin is its agent's own: another agent's pin shows as unpinned to you,
// leaves your sweep candidates alone, and changes your forget only as the
// forget rules say (any agent's pin protects a shared fact, counted as
// pinned_skipped); a pin on a private fact is never seen or counted by
// anyone else.
func TestPinsArePerAgent(t *testing.T) {
	srv, clk, db := newTestServer(t)
	makeOperator(t, srv, db, bob) // so that his forget reaches alice's facts
	shared := forgetPut(t, srv, alice, "ops", "build", "green")
	mine := forgetPut(t, srv, alice, "ops", "secret", "hush", "private")
	call(t, srv, alice, "memory_pin", `{"fact_id":"`+shared+`"}`)
	call(t, srv, alice, "memory_pin", `{"fact_id":"`+mine+`"}`)

	pinnedIn := func(c crux.Caller) map[string]bool {
		out := map[string]bool{}
		for _, f := range panelFacts(t, call(t, srv, c, "memory_view", `{}`)) {
			out[f["id"].(string)] = f["pinned"].(bool)
		}
		return out
	}
	assert.True(t, pinnedIn(alice)[shared])
	assert.True(t, pinnedIn(alice)[mine])
	bobSees := pinnedIn(bob)
	assert.Contains(t, bobSees, shared)
	assert.False(t, bobSees[shared], "alice's pin does not show as bob's")
	assert.NotContains(t, bobSees, mine)

	call(t, srv, alice, "store_fact", `{"entity":"ops","key":"build","value":"red"}`) // shared is now superseded: a sweep candidate
	clk.Advance(time.Hour)

	sweep := func(c crux.Caller) []string {
		var ids []string
		for _, r := range rows(t, call(t, srv, c, "memory_sweep_candidates", `{}`)) {
			ids = append(ids, r["fact_id"].(string))
		}
		return ids
	}
	assert.NotContains(t, sweep(alice), shared, "her own pin keeps it off her sweep")
	assert.Contains(t, sweep(bob), shared, "alice's pin does not change bob's sweep")

	dry := call(t, srv, bob, "memory_forget_dry_run", `{"scope":{"type":"entity_prefix","value":"ops"},"include_pinned":true}`)
	assert.EqualValues(t, 1, dry["pinned_skipped"], "the shared pinned version only; her private pin is not counted")
	assert.NotContains(t, forgetAffected(t, dry), shared)
	assert.NotContains(t, forgetAffected(t, dry), mine)
}
