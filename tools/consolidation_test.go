package tools_test

import (
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"lukechampine.com/blake3"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
)

// consolidationReceipt is the payload of a receipt of kind consolidation.
type ConsolidationReceipt struct {
	ConsolidationID   string   `cbor:"consolidation_id"`
	Entity            string   `cbor:"entity"`
	Key               string   `cbor:"key"`
	CanonicalFactID   string   `cbor:"canonical_fact_id"`
	CanonicalHash     string   `cbor:"canonical_hash"`
	SupersededFactIDs []string `cbor:"superseded_fact_ids"`
	SourceFactIDs     []string `cbor:"source_fact_ids"`
}

// consCandidates returns the candidates of a memory_contradictions result.
func consCandidates(t *testing.T, got map[string]any) []map[string]any {
	return objects(t, got, "candidates")
}

func TestMemoryContradictionsPrivateAgainstShared(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	shared := storeID(t, srv, bob, `{"entity":"service:api","key":"cache","value":"enabled","confidence":0.5}`)
	clk.Advance(time.Second)
	mine := storeID(t, srv, alice, `{"entity":"service:api","key":"cache","value":"Disabled.","private":true}`)
	storeID(t, srv, bob, `{"entity":"service:api","key":"mode","value":"fast"}`)
	storeID(t, srv, alice, `{"entity":"service:api","key":"mode","value":"slow","private":true}`)

	got := call(t, srv, alice, "memory_contradictions", `{}`)
	assert.Equal(t, true, got["dry_run"])
	assert.Equal(t, "own_private_entities", got["mode"])
	assert.EqualValues(t, 50, got["limit"])
	assert.EqualValues(t, 1, got["count"])
	cands := consCandidates(t, got)
	require.Len(t, cands, 1)
	c := cands[0]
	assert.Equal(t, "service:api", c["entity"])
	assert.Equal(t, "cache", c["key"])
	assert.Equal(t, "opposite_polarity_same_entity_key", c["reason"])
	assert.Equal(t, "positive", c["polarity_a"])
	assert.Equal(t, "negative", c["polarity_b"])
	assert.Equal(t, []any{shared, mine}, c["fact_ids"])
	assert.Equal(t, []any{"enabled", "Disabled."}, c["values"])
	assert.Equal(t, []any{"shared", "private"}, c["scopes"])

	// The same pair through each filter.
	for _, args := range []string{`{"entity":"service:api"}`, `{"entity_prefix":"service:"}`, `{"key":"cache"}`, `{"entity":"service:api","key":"cache"}`} {
		got := call(t, srv, alice, "memory_contradictions", args)
		assert.Len(t, consCandidates(t, got), 1, args)
	}

	// Detection only: nothing changed.
	hist := call(t, srv, alice, "fact_history", `{"entity":"service:api","key":"cache"}`)
	for _, v := range hist["versions"].([]any) {
		assert.NotContains(t, v, "superseded_by")
	}
}

func TestMemoryContradictionsVisibility(t *testing.T) {
	srv, _, _ := newTestServer(t)
	storeID(t, srv, bob, `{"entity":"flag","key":"beta","value":"on"}`)
	storeID(t, srv, alice, `{"entity":"flag","key":"beta","value":"off","private":true}`)

	// Bob and anonymous callers never see alice's private fact, through any filter.
	for _, c := range []crux.Caller{bob, anon, {Agent: "alice"}} {
		for _, args := range []string{`{}`, `{"entity":"flag"}`, `{"entity_prefix":"f"}`, `{"key":"beta"}`, `{"entity_prefix":"_"}`} {
			got := call(t, srv, c, "memory_contradictions", args)
			assert.Empty(t, consCandidates(t, got), "%+v %s", c, args)
			assert.NotContains(t, fmt.Sprint(got), "off", "%+v %s", c, args)
		}
	}
	got := call(t, srv, anon, "memory_contradictions", `{}`)
	assert.Zero(t, got["entities_examined"])
	assert.Contains(t, got["notes"].([]any)[0], "anonymous callers have no private facts")

	// Another tenant's caller sees nothing of this one.
	other := crux.Caller{Agent: "alice", Authenticated: true, Tenant: "other"}
	assert.Empty(t, consCandidates(t, call(t, srv, other, "memory_contradictions", `{"entity":"flag"}`)))
}

func TestMemoryContradictionsLimitAndBudget(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for i := range 4 {
		storeID(t, srv, bob, fmt.Sprintf(`{"entity":"svc%d","key":"up","value":"yes"}`, i))
		storeID(t, srv, alice, fmt.Sprintf(`{"entity":"svc%d","key":"up","value":"no","private":true}`, i))
	}
	got := call(t, srv, alice, "memory_contradictions", `{}`)
	assert.EqualValues(t, 4, got["count"])
	assert.Equal(t, false, got["limit_reached"])
	assert.EqualValues(t, 4, got["entities_examined"])
	assert.EqualValues(t, 8, got["facts_read"])

	got = call(t, srv, alice, "memory_contradictions", `{"limit":2}`)
	assert.EqualValues(t, 2, got["count"])
	assert.EqualValues(t, 2, got["limit"])
	assert.Equal(t, true, got["limit_reached"])
	assert.Equal(t, "svc0", consCandidates(t, got)[0]["entity"])

	// A tiny budget still returns the first candidate.
	got = call(t, srv, alice, "memory_contradictions", `{"token_budget":1}`)
	assert.EqualValues(t, 1, got["count"])
	assert.Equal(t, true, got["truncated_by_token_budget"])
	// The default budget of 500 tokens holds the four.
	got = call(t, srv, alice, "memory_contradictions", `{"token_budget":500}`)
	assert.Equal(t, false, got["truncated_by_token_budget"])
	assert.LessOrEqual(t, got["total_tokens"].(float64), 500.0)
}

func TestMemoryContradictionsArguments(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for args, param := range map[string]string{
		`{"entity":"a","entity_prefix":"a"}`: "entity_prefix",
		`{"entity":"__ops::x"}`:              "entity",
		`{"entity_prefix":"__agent::"}`:      "entity_prefix",
		`{"limit":0}`:                        "limit",
		`{"limit":501}`:                      "limit",
		`{"token_budget":0}`:                 "token_budget",
		`{"entity":""}`:                      "entity",
		`{"bogus":1}`:                        "bogus",
	} {
		e := callErr(t, srv, alice, "memory_contradictions", args)
		assert.Equal(t, crux.CodeInvalidParams, e.Code, args)
		assert.Equal(t, param, paramOf(t, e).Param, args)
	}
	e := callErr(t, srv, alice, "memory_contradictions", `{"entity":"__ops::x"}`)
	assert.Equal(t, "RESERVED_ENTITY_PREFIX", paramOf(t, e).ErrorCode)
}

func TestConsolidationFlagOff(t *testing.T) {
	flags := crux.DefaultFlags()
	require.True(t, flags.Consolidation, "on by default")
	flags.Consolidation = false
	srv, _, db := newTestServer(t, withFlags(flags))
	id := storeID(t, srv, alice, `{"entity":"e","key":"k","value":"v","confidence":0.5}`)
	before := receiptCount(t, db)
	for _, tc := range []struct{ tool, args string }{
		{"memory_contradictions", `{}`},
		{"memory_contradictions", `{"limit":"bad"}`}, // the gate answers before arguments are checked
		{"memory_consolidate", fmt.Sprintf(`{"entity":"e","key":"k","canonical_value":"w","target_fact_ids":[%q]}`, id)},
	} {
		e := callErr(t, srv, alice, tc.tool, tc.args)
		assert.Equal(t, crux.CodeCapabilityDenied, e.Code, tc.tool)
		assert.Contains(t, e.Message, "CORECRUXD_FEATURE_CONSOLIDATION", tc.tool)
		assert.Equal(t, map[string]any{"feature_flag": "CORECRUXD_FEATURE_CONSOLIDATION", "enabled": false}, e.Data)
	}
	assert.Equal(t, before, receiptCount(t, db))
	got := call(t, srv, alice, "query_facts", `{"entity":"e"}`)
	assert.Equal(t, []string{"v"}, values(t, got))

	// =0 disables; unset leaves it on.
	getenv := func(v string) func(string) string {
		return func(k string) string {
			if k == "CORECRUXD_FEATURE_CONSOLIDATION" {
				return v
			}
			return ""
		}
	}
	assert.False(t, flagsFrom(getenv("0")).Consolidation)
	assert.True(t, flagsFrom(getenv("")).Consolidation)
}

func TestMemoryConsolidate(t *testing.T) {
	srv, clk, db := newTestServer(t)
	old := storeID(t, srv, bob, `{"entity":"proj","key":"status","value":"blocked","confidence":0.4}`)
	clk.Advance(time.Hour)
	cur := storeID(t, srv, bob, `{"entity":"proj","key":"status","value":"active","confidence":0.5}`)
	clk.Advance(time.Hour)

	res, err := srv.CallTool(t.Context(), alice, "memory_consolidate", []byte(fmt.Sprintf(
		`{"entity":"proj","key":"status","canonical_value":"active (consolidated)","target_fact_ids":[%q],"confidence":0.8,"consolidation_id":"c-1","horizon_class":"medium"}`, cur)))
	require.NoError(t, err)
	got := structured(t, res)
	assert.Equal(t, "consolidated", got["status"])
	rc := got["receipt"].(map[string]any)
	canonical := rc["canonical_fact_id"].(string)
	assert.Equal(t, "c-1", rc["consolidation_id"])
	assert.Equal(t, []any{cur}, rc["superseded_fact_ids"])
	assert.Equal(t, []any{cur}, rc["source_fact_ids"])
	sum := blake3.Sum256([]byte("active (consolidated)"))
	assert.Equal(t, "blake3:"+hex.EncodeToString(sum[:]), rc["canonical_hash"])

	// History preserved: the target is superseded by the canonical fact, the older version stays.
	hist := call(t, srv, alice, "fact_history", `{"entity":"proj","key":"status"}`)
	vs := hist["versions"].([]any)
	require.Len(t, vs, 3, "newest first")
	assert.Equal(t, old, vs[2].(map[string]any)["fact_id"])
	assert.Equal(t, cur, vs[1].(map[string]any)["fact_id"])
	assert.Equal(t, canonical, vs[1].(map[string]any)["superseded_by"])
	last := vs[0].(map[string]any)
	assert.Equal(t, canonical, last["fact_id"])
	assert.Equal(t, cur, last["supersedes"])
	assert.EqualValues(t, 3, last["version"])
	assert.EqualValues(t, 0.8, last["confidence"])
	got = call(t, srv, bob, "query_facts", `{"entity":"proj"}`)
	assert.Equal(t, []string{"active (consolidated)"}, values(t, got))
	assert.Equal(t, "medium", rows(t, got)[0]["horizon_class"])

	// The canonical fact names its consolidation; the receipt is signed and verifies offline.
	var f *store.Fact
	require.NoError(t, db.View(t.Context(), func(tx store.Tx) error {
		var err error
		f, err = store.GetFact(tx, canonical)
		return err
	}))
	assert.Equal(t, "consolidation:c-1", f.SourceReceipt)
	assert.Equal(t, "alice", f.Owner)
	r := getReceipt(t, db, rc["receipt_id"].(string))
	assert.Equal(t, "consolidation", r.Kind)
	assert.True(t, receipts.Verify(r, srv.Keyring(), clk.Now()).OK())
	var p ConsolidationReceipt
	require.NoError(t, r.Payload(&p))
	assert.Equal(t, ConsolidationReceipt{
		ConsolidationID: "c-1", Entity: "proj", Key: "status", CanonicalFactID: canonical,
		CanonicalHash: rc["canonical_hash"].(string), SupersededFactIDs: []string{cur}, SourceFactIDs: []string{cur},
	}, p)
	h, err := r.Header()
	require.NoError(t, err)
	assert.Equal(t, "alice", h.Actor)

	// A consolidation id is used once per tenant.
	e := callErr(t, srv, alice, "memory_consolidate", fmt.Sprintf(
		`{"entity":"proj","key":"status","canonical_value":"x","target_fact_ids":[%q],"consolidation_id":"c-1","confidence":0.5}`, canonical))
	assert.Equal(t, crux.CodeConflict, e.Code)
	assert.Equal(t, map[string]any{"consolidation_id": "c-1", "canonical_fact_id": canonical}, e.Data)

	// The default id is mcp-<uuid>.
	next := storeID(t, srv, bob, `{"entity":"other","key":"k","value":"v","confidence":0.1}`)
	got = call(t, srv, alice, "memory_consolidate", fmt.Sprintf(`{"entity":"other","key":"k","canonical_value":"w","target_fact_ids":[%q]}`, next))
	assert.Regexp(t, `^mcp-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`, got["receipt"].(map[string]any)["consolidation_id"])
}

func TestMemoryConsolidateGuards(t *testing.T) {
	srv, clk, db := newTestServer(t)
	low := storeID(t, srv, bob, `{"entity":"g","key":"k","value":"v","confidence":0.5}`)
	pinned := storeID(t, srv, bob, `{"entity":"g","key":"pinned","value":"v","confidence":0.5}`)
	linked := storeID(t, srv, bob, `{"entity":"g","key":"linked","value":"v","confidence":0.5,"source_receipt":"r_src"}`)
	mine := storeID(t, srv, alice, `{"entity":"g","key":"mine","value":"v","confidence":0.5,"private":true}`)
	high := storeID(t, srv, bob, `{"entity":"g","key":"high","value":"v","confidence":0.99}`)
	full := storeID(t, srv, bob, `{"entity":"g","key":"full","value":"v"}`) // default confidence 1.0
	require.NoError(t, db.Update(t.Context(), func(tx store.Tx) error {
		return store.SetPin(tx, store.Scope{Tenant: tenant, Agent: "alice"}, pinned, true)
	}))
	before := receiptCount(t, db)

	for _, tc := range []struct {
		name, key, id, reason, extra string
	}{
		{"protected", "k", low, "protected", fmt.Sprintf(`,"protected_fact_ids":[%q]`, low)},
		{"pinned by the caller", "pinned", pinned, "pinned", ""},
		{"receipt-linked", "linked", linked, "receipt_linked", ""},
		{"private", "mine", mine, "private", ""},
		{"at the floor", "high", high, "high_confidence", ""},
		{"default confidence 1.0", "full", full, "high_confidence", ""},
		{"lowered floor", "k", low, "high_confidence", `,"protected_confidence_floor":0.5`},
	} {
		e := callErr(t, srv, alice, "memory_consolidate", fmt.Sprintf(
			`{"entity":"g","key":%q,"canonical_value":"x","target_fact_ids":[%q]%s}`, tc.key, tc.id, tc.extra))
		assert.Equal(t, crux.CodeCapabilityDenied, e.Code, tc.name)
		data := e.Data.(map[string]any)
		assert.Equal(t, tc.reason, data["reason"], tc.name)
		assert.Equal(t, tc.id, data["fact_id"], tc.name)
		assert.Contains(t, e.Message, tc.id, tc.name)
	}
	e := callErr(t, srv, alice, "memory_consolidate", fmt.Sprintf(`{"entity":"g","key":"high","canonical_value":"x","target_fact_ids":[%q]}`, high))
	assert.EqualValues(t, 0.99, e.Data.(map[string]any)["floor"])
	assert.EqualValues(t, 0.99, e.Data.(map[string]any)["confidence"])

	// Nothing was written by any refusal.
	assert.Equal(t, before, receiptCount(t, db))
	for _, key := range []string{"k", "pinned", "linked", "high", "full"} {
		got := call(t, srv, bob, "query_facts", fmt.Sprintf(`{"entity":"g","key":%q}`, key))
		assert.Equal(t, []string{"v"}, values(t, got), key)
	}

	// Another agent's pin protects the fact too (as it does from forget),
	// without saying whose it is.
	require.NoError(t, db.Update(t.Context(), func(tx store.Tx) error {
		return store.SetPin(tx, store.Scope{Tenant: tenant, Agent: "bob"}, low, true)
	}))
	clk.Advance(time.Minute)
	e = callErr(t, srv, alice, "memory_consolidate", fmt.Sprintf(`{"entity":"g","key":"k","canonical_value":"x","target_fact_ids":[%q]}`, low))
	assert.Equal(t, "pinned", e.Data.(map[string]any)["reason"])
	assert.NotContains(t, e.Message, "bob")
}

func TestMemoryConsolidateTargets(t *testing.T) {
	srv, _, _ := newTestServer(t)
	live := storeID(t, srv, bob, `{"entity":"t","key":"k","value":"v","confidence":0.5}`)
	other := storeID(t, srv, bob, `{"entity":"t","key":"other","value":"v","confidence":0.5}`)
	bobs := storeID(t, srv, bob, `{"entity":"t","key":"k","value":"bob secret","confidence":0.5,"private":true}`)
	gone := storeID(t, srv, bob, `{"entity":"t","key":"gone","value":"v","confidence":0.5}`)
	call(t, srv, bob, "delete_fact", fmt.Sprintf(`{"fact_id":%q}`, gone))
	old := storeID(t, srv, bob, `{"entity":"t","key":"old","value":"v1","confidence":0.5}`)
	storeID(t, srv, bob, `{"entity":"t","key":"old","value":"v2","confidence":0.5}`)
	foreign := storeID(t, srv, crux.Caller{Agent: "bob", Authenticated: true, Tenant: "other"}, `{"entity":"t","key":"k","value":"v","confidence":0.5}`)

	notFound := func(id string) string {
		return fmt.Sprintf("memory_consolidate: target_fact_ids: fact %s does not exist or is not visible to the caller", id)
	}
	for _, tc := range []struct {
		name, key, ids, message, code string
	}{
		{"unknown", "k", `["f_ffffffffffffffffffffffffffffffff"]`, notFound("f_ffffffffffffffffffffffffffffffff"), "TARGET_NOT_FOUND"},
		{"another agent's private fact", "k", fmt.Sprintf("[%q]", bobs), notFound(bobs), "TARGET_NOT_FOUND"},
		{"another tenant's fact", "k", fmt.Sprintf("[%q]", foreign), notFound(foreign), "TARGET_NOT_FOUND"},
		{"deleted", "gone", fmt.Sprintf("[%q]", gone), "", "TARGET_DELETED"},
		{"superseded", "old", fmt.Sprintf("[%q]", old), "", "TARGET_SUPERSEDED"},
		{"outside (entity, key)", "k", fmt.Sprintf("[%q]", other), "", "TARGET_OUTSIDE"},
		{"listed twice", "k", fmt.Sprintf("[%q,%q]", live, live), "", "TARGET_DUPLICATE"},
	} {
		e := callErr(t, srv, alice, "memory_consolidate", fmt.Sprintf(`{"entity":"t","key":%q,"canonical_value":"x","target_fact_ids":%s}`, tc.key, tc.ids))
		assert.Equal(t, crux.CodeInvalidParams, e.Code, tc.name)
		pe := paramOf(t, e)
		assert.Equal(t, "target_fact_ids", pe.Param, tc.name)
		assert.Equal(t, tc.code, pe.ErrorCode, tc.name)
		if tc.message != "" {
			assert.Equal(t, tc.message, e.Message, tc.name)
		}
		assert.NotContains(t, e.Message, "secret", tc.name)
	}
	got := call(t, srv, bob, "query_facts", `{"entity":"t","key":"k"}`)
	assert.ElementsMatch(t, []string{"v", "bob secret"}, values(t, got))
	_ = live
}

func TestMemoryConsolidateArguments(t *testing.T) {
	srv, _, _ := newTestServer(t)
	id := storeID(t, srv, bob, `{"entity":"a","key":"k","value":"v","confidence":0.5}`)
	for _, tc := range []struct{ args, param string }{
		{`{"entity":"a","key":"k","canonical_value":"x","target_fact_ids":[]}`, "target_fact_ids"},
		{`{"entity":"a","key":"k","canonical_value":"x"}`, "target_fact_ids"},
		{fmt.Sprintf(`{"entity":"a","key":"k","target_fact_ids":[%q]}`, id), "canonical_value"},
		{fmt.Sprintf(`{"entity":"__ops::a","key":"k","canonical_value":"x","target_fact_ids":[%q]}`, id), "entity"},
		{fmt.Sprintf(`{"entity":"a","key":"k","canonical_value":"x","target_fact_ids":[%q],"consolidation_id":"  "}`, id), "consolidation_id"},
		{fmt.Sprintf(`{"entity":"a","key":"k","canonical_value":"x","target_fact_ids":[%q],"consolidation_id":"a\u0000b"}`, id), "consolidation_id"},
		{fmt.Sprintf(`{"entity":"a","key":"k","canonical_value":"x","target_fact_ids":[%q],"confidence":1.5}`, id), "confidence"},
		{fmt.Sprintf(`{"entity":"a","key":"k","canonical_value":"x","target_fact_ids":[%q],"protected_confidence_floor":-0.1}`, id), "protected_confidence_floor"},
		{fmt.Sprintf(`{"entity":"a","key":"k","canonical_value":"x","target_fact_ids":[%q],"horizon_class":"weekly"}`, id), "horizon_class"},
		{fmt.Sprintf(`{"entity":"a","key":"k","canonical_value":"x","target_fact_ids":[%q],"dry_run":true}`, id), "dry_run"},
	} {
		e := callErr(t, srv, alice, "memory_consolidate", tc.args)
		assert.Equal(t, crux.CodeInvalidParams, e.Code, tc.args)
		assert.Equal(t, tc.param, paramOf(t, e).Param, tc.args)
	}
	got := call(t, srv, bob, "query_facts", `{"entity":"a"}`)
	assert.Equal(t, []string{"v"}, values(t, got))
}

func TestMemoryConsolidateNeedsPassport(t *testing.T) {
	srv, _, db := newTestServer(t)
	id := storeID(t, srv, bob, `{"entity":"a","key":"k","value":"v","confidence":0.5}`)
	before := receiptCount(t, db)
	assertNeedsIdentity(t, srv, "memory_consolidate", fmt.Sprintf(`{"entity":"a","key":"k","canonical_value":"x","target_fact_ids":[%q]}`, id))
	assert.Equal(t, before, receiptCount(t, db))
	// Reading contradictions needs no passport.
	call(t, srv, anon, "memory_contradictions", `{"entity":"a"}`)
}

// The contradiction a consolidation leaves behind: consolidating the shared
// side does not touch the caller's private fact, which still disagrees.
func TestContradictionAfterConsolidation(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	shared := storeID(t, srv, bob, `{"entity":"feature","key":"dark_mode","value":"enabled","confidence":0.6}`)
	storeID(t, srv, alice, `{"entity":"feature","key":"dark_mode","value":"disabled","confidence":0.6,"private":true}`)
	cands := consCandidates(t, call(t, srv, alice, "memory_contradictions", `{}`))
	require.Len(t, cands, 1)
	ids := cands[0]["fact_ids"].([]any)

	// The private side cannot be a target.
	e := callErr(t, srv, alice, "memory_consolidate", fmt.Sprintf(`{"entity":"feature","key":"dark_mode","canonical_value":"disabled","target_fact_ids":[%q,%q]}`, ids[0], ids[1]))
	assert.Equal(t, "private", e.Data.(map[string]any)["reason"])

	clk.Advance(time.Minute)
	call(t, srv, alice, "memory_consolidate", fmt.Sprintf(`{"entity":"feature","key":"dark_mode","canonical_value":"disabled","target_fact_ids":[%q]}`, shared))
	assert.Empty(t, consCandidates(t, call(t, srv, alice, "memory_contradictions", `{}`)))
	got := call(t, srv, bob, "query_facts", `{"entity":"feature"}`)
	assert.Equal(t, []string{"disabled"}, values(t, got))
}

// A fact crux itself marked (a canonical fact, an edit) is not
// receipt-linked: it can be consolidated again.
func TestConsolidateAgain(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	first := storeID(t, srv, bob, `{"entity":"svc","key":"mode","value":"a","confidence":0.5}`)
	got := call(t, srv, alice, "memory_consolidate", fmt.Sprintf(`{"entity":"svc","key":"mode","canonical_value":"b","confidence":0.5,"target_fact_ids":[%q]}`, first))
	canonical := got["receipt"].(map[string]any)["canonical_fact_id"].(string)
	clk.Advance(time.Minute)
	got = call(t, srv, alice, "memory_consolidate", fmt.Sprintf(`{"entity":"svc","key":"mode","canonical_value":"c","confidence":0.5,"target_fact_ids":[%q]}`, canonical))
	assert.Equal(t, "consolidated", got["status"])
	assert.Equal(t, []string{"c"}, values(t, call(t, srv, bob, "query_facts", `{"entity":"svc"}`)))
}
