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
