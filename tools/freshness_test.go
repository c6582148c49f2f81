package tools_test

import (
	"context"
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

// The limits of memory_freshness and memory_sweep_candidates.
const (
	freshnessMaxExamined = 5000 // facts a scan reads at most
	freshnessTopK        = 20   // memory_freshness's default top_k
	freshnessTokenBudget = 500  // and token_budget
	sweepTopK            = 50   // memory_sweep_candidates's default top_k
	sweepTokenBudget     = 500  // and token_budget
)

// reverifyPayload is the payload of a receipt of kind reverify.
type reverifyPayload struct {
	FactID       string `cbor:"fact_id"`
	Entity       string `cbor:"entity"`
	Key          string `cbor:"key"`
	ValueHash    string `cbor:"value_hash"`
	Redacted     bool   `cbor:"redacted"`
	ReverifiedBy string `cbor:"reverified_by"`
	ReverifiedAt string `cbor:"reverified_at"`
}

// freshnessRows maps fact_id to row for the rows of a freshness result.
func freshnessRows(t *testing.T, got map[string]any) (ids []string, byID map[string]map[string]any) {
	t.Helper()
	byID = map[string]map[string]any{}
	for _, r := range rows(t, got) {
		ids = append(ids, r["fact_id"].(string))
		byID[r["fact_id"].(string)] = r
	}
	return ids, byID
}

func TestMemoryFreshness(t *testing.T) {
	srv, clk, db := newTestServer(t)
	reservedFact(t, db, clk.Now()) // volatile and stale later, but never reported
	build := storeID(t, srv, alice, `{"entity":"ops","key":"build","value":"green","horizon_class":"volatile"}`)
	plan := storeID(t, srv, alice, `{"entity":"execplan:x","key":"step","value":"two"}`) // medium by prefix
	bench := storeID(t, srv, alice, `{"entity":"bench:y","key":"p99","value":"3ms"}`)    // stable by prefix
	user := storeID(t, srv, alice, `{"entity":"user","key":"name","value":"Ada"}`)       // none
	clk.Advance(36 * 24 * time.Hour)

	got := call(t, srv, alice, "memory_freshness", `{}`)
	ids, byID := freshnessRows(t, got)
	assert.Equal(t, []string{build, plan, bench, user}, ids, "stalest first: the furthest past its horizon first, class none last")
	assert.Equal(t, map[string]any{"fact_id": build, "entity": "ops", "key": "build", "horizon_class": "volatile",
		"freshness": "stale", "age_hours": 864.0, "stored_at": "2026-03-01T12:00:00Z"}, byID[build])
	assert.Equal(t, "stale", byID[plan]["freshness"])
	assert.Equal(t, "medium", byID[plan]["horizon_class"])
	assert.Equal(t, "fresh", byID[bench]["freshness"])
	assert.Equal(t, "stable", byID[bench]["horizon_class"])
	assert.Equal(t, "fresh", byID[user]["freshness"])
	assert.Equal(t, "none", byID[user]["horizon_class"])
	assert.Equal(t, map[string]any{"volatile_stale_hours": 24.0, "medium_stale_days": 35.0, "stable_stale_days": 365.0}, got["policy"])
	assert.Equal(t, "2026-04-06T12:00:00Z", got["now"])
	assert.EqualValues(t, 5, got["examined"])
	assert.Equal(t, true, got["complete"])
	assert.NotContains(t, got, "envelope", "the audit envelope is off by default")

	// Filters.
	got = call(t, srv, alice, "memory_freshness", `{"entity":"ops"}`)
	ids, _ = freshnessRows(t, got)
	assert.Equal(t, []string{build}, ids)
	got = call(t, srv, alice, "memory_freshness", `{"key":"p99"}`)
	ids, _ = freshnessRows(t, got)
	assert.Equal(t, []string{bench}, ids)
	got = call(t, srv, alice, "memory_freshness", `{"top_k":2}`)
	ids, _ = freshnessRows(t, got)
	assert.Equal(t, []string{build, plan}, ids)

	// Read-only: nothing changed.
	q := call(t, srv, alice, "query_facts", `{"entity":"ops"}`)
	assert.Equal(t, "stale", rows(t, q)[0]["freshness"])

	// Reserved entities are refused by name and never reported.
	assertReserved(t, callErr(t, srv, alice, "memory_freshness", `{"entity":"__ops::health"}`), "entity")
	got = call(t, srv, alice, "memory_freshness", `{"key":"probe"}`)
	assert.Empty(t, rows(t, got))
	e := callErr(t, srv, alice, "memory_freshness", `{"top_k":501}`)
	assert.Equal(t, "memory_freshness: top_k: must be <= 500", e.Message)
}

func TestMemoryFreshnessUnknownAndReverified(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	clk.Advance(time.Hour)
	id := storeID(t, srv, alice, `{"entity":"ops","key":"build","value":"green","horizon_class":"volatile"}`)
	clk.Advance(-2 * time.Hour) // the clock went back: the fact lies in the future
	got := call(t, srv, alice, "memory_freshness", `{}`)
	assert.Equal(t, "unknown", rows(t, got)[0]["freshness"])
	assert.EqualValues(t, 0, rows(t, got)[0]["age_hours"])

	clk.Advance(3 * time.Hour)
	call(t, srv, alice, "memory_reverify", fmt.Sprintf(`{"fact_id":%q}`, id))
	clk.Advance(90 * time.Minute)
	got = call(t, srv, alice, "memory_freshness", `{}`)
	r := rows(t, got)[0]
	assert.Equal(t, "2026-03-01T14:00:00Z", r["reverified_at"])
	assert.InDelta(t, 1.5, r["age_hours"], 1e-9, "age counts from the reverification")
}

func TestMemoryFreshnessPolicyFromFlags(t *testing.T) {
	flags := flagsFrom(func(k string) string {
		return map[string]string{"CORECRUXD_DECAY_VOLATILE_HOURS": "2", "CORECRUXD_DECAY_MEDIUM_DAYS": "7", "CORECRUXD_DECAY_STABLE_DAYS": "30"}[k]
	})
	srv, clk, _ := newTestServer(t, withFlags(flags))
	call(t, srv, alice, "store_fact", `{"entity":"ops","key":"build","value":"green","horizon_class":"volatile"}`)
	clk.Advance(2*time.Hour + time.Second)
	got := call(t, srv, alice, "memory_freshness", `{}`)
	assert.Equal(t, map[string]any{"volatile_stale_hours": 2.0, "medium_stale_days": 7.0, "stable_stale_days": 30.0}, got["policy"])
	assert.Equal(t, "stale", rows(t, got)[0]["freshness"])
}

func TestMemoryFreshnessTokenBudget(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for i := range 30 {
		call(t, srv, alice, "store_fact", fmt.Sprintf(`{"entity":"e","key":"k%02d","value":"v","horizon_class":"volatile"}`, i))
	}
	// The default budget (500) trims before the default top_k (20).
	got := call(t, srv, alice, "memory_freshness", `{}`)
	n := len(rows(t, got))
	assert.Less(t, n, freshnessTopK)
	assert.Greater(t, n, 3)
	assert.LessOrEqual(t, got["total_tokens"], float64(freshnessTokenBudget))
	assert.Equal(t, true, got["truncated_by_token_budget"])

	got = call(t, srv, alice, "memory_freshness", `{"token_budget":100000}`)
	assert.Len(t, rows(t, got), freshnessTopK, "the default top_k")
	assert.Equal(t, false, got["truncated_by_token_budget"])

	got = call(t, srv, alice, "memory_freshness", `{"token_budget":1}`)
	assert.Len(t, rows(t, got), 1, "the first row is always kept")
}

func TestMemoryFreshnessBoundedScan(t *testing.T) {
	srv, _, db := newTestServer(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		for i := range freshnessMaxExamined + 10 {
			if _, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: tenant}, Entity: "bulk", Key: fmt.Sprint("k", i),
				Value: "v", Confidence: 1, Now: now}); err != nil {
				return err
			}
		}
		return nil
	}))
	call(t, srv, alice, "store_fact", `{"entity":"small","key":"k","value":"v"}`)

	got := call(t, srv, alice, "memory_freshness", `{}`)
	assert.EqualValues(t, freshnessMaxExamined, got["examined"])
	assert.Equal(t, false, got["complete"], "the scan stopped at its cap and says so")
	got = call(t, srv, alice, "memory_sweep_candidates", `{}`)
	assert.EqualValues(t, freshnessMaxExamined, got["examined"])
	assert.Equal(t, false, got["complete"])

	got = call(t, srv, alice, "memory_freshness", `{"entity":"small"}`)
	assert.EqualValues(t, 1, got["examined"], "a filter reads only its index")
	assert.Equal(t, true, got["complete"])
}

func TestMemoryFreshnessAuditEnvelope(t *testing.T) {
	flags := crux.DefaultFlags()
	flags.AuditEnvelope = true
	srv, clk, db := newTestServer(t, withFlags(flags))
	reservedFact(t, db, clk.Now())
	id := storeID(t, srv, alice, `{"entity":"ops","key":"build","value":"green","horizon_class":"volatile","source_receipt":"r_src"}`)
	clk.Advance(48 * time.Hour)

	res := result(t, srv, alice, "memory_freshness", `{}`)
	got := structured(t, res)
	env := got["envelope"].(map[string]any)
	assert.Equal(t, []any{"r_src"}, env["receipts_used"])
	used := env["memories_used"].([]any)
	require.Len(t, used, 1, "reserved entities are never listed")
	assert.Equal(t, map[string]any{"fact_id": id, "topic": "ops", "age_days": 2.0, "age_hours": 48.0, "freshness": "stale"}, used[0])
	assert.Equal(t, []any{map[string]any{"kind": "fact_read", "entity": "ops", "key": "build"}}, env["predicted_effects"])
	assert.Equal(t, "crux-mcp.memory_freshness", env["autonomy_consumed"].(map[string]any)["capability"])
	assert.NotNil(t, res.Meta["envelope"], "mirrored at _meta")
}

// Agent A's private facts and pins stay A's in the freshness tools.
func TestFreshnessAcrossAgents(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	shared := storeID(t, srv, bob, `{"entity":"ops","key":"build","value":"green","horizon_class":"volatile"}`)
	mine := storeID(t, srv, alice, `{"entity":"ops","key":"deploy","value":"friday","horizon_class":"volatile","private":true}`)
	call(t, srv, alice, "memory_pin", fmt.Sprintf(`{"fact_id":%q}`, shared))
	clk.Advance(25 * time.Hour)

	_, byID := freshnessRows(t, call(t, srv, alice, "memory_freshness", `{"entity":"ops"}`))
	assert.Contains(t, byID, mine)
	assert.Equal(t, true, byID[mine]["private"])
	assert.Equal(t, true, byID[shared]["pinned"])
	ids, byID := freshnessRows(t, call(t, srv, bob, "memory_freshness", `{"entity":"ops"}`))
	assert.Equal(t, []string{shared}, ids)
	assert.NotContains(t, byID[shared], "pinned", "alice's pin does not show to bob")

	ids, _ = freshnessRows(t, call(t, srv, alice, "memory_sweep_candidates", `{}`))
	assert.Equal(t, []string{mine}, ids, "alice's pin keeps the shared fact off her sweep")
	ids, _ = freshnessRows(t, call(t, srv, bob, "memory_sweep_candidates", `{}`))
	assert.Equal(t, []string{shared}, ids, "bob sees neither alice's private fact nor her pin")

	for _, tool := range []string{"memory_set_horizon", "memory_reverify"} {
		args := fmt.Sprintf(`{"fact_id":%q,"horizon_class":"none"}`, mine)
		if tool == "memory_reverify" {
			args = fmt.Sprintf(`{"fact_id":%q}`, mine)
		}
		assert.Equal(t, "fact not found: "+mine, toolError(t, srv, bob, tool, args))
	}
}

func TestMemorySweepCandidates(t *testing.T) {
	srv, clk, db := newTestServer(t)
	build1 := storeID(t, srv, alice, `{"entity":"ops","key":"build","value":"red","horizon_class":"volatile"}`)
	doc1 := storeID(t, srv, alice, `{"entity":"doc","key":"title","value":"draft"}`)
	clk.Advance(time.Minute)
	build2 := storeID(t, srv, alice, `{"entity":"ops","key":"build","value":"green","horizon_class":"volatile"}`)
	doc2 := storeID(t, srv, alice, `{"entity":"doc","key":"title","value":"final"}`)
	storeID(t, srv, alice, `{"entity":"team","key":"lead","value":"Ada"}`) // fresh and current: no candidate
	clk.Advance(25 * time.Hour)
	reservedFact(t, db, clk.Now().Add(-48*time.Hour)) // stale, but reserved

	got := call(t, srv, alice, "memory_sweep_candidates", `{}`)
	ids, byID := freshnessRows(t, got)
	assert.Equal(t, []string{build1, doc1, build2}, ids, "stale+superseded, then superseded, then stale")
	assert.Equal(t, map[string]any{"fact_id": build1, "entity": "ops", "key": "build", "reason": "stale+superseded",
		"freshness": "stale", "horizon_class": "volatile", "age_hours": 25.02, "superseded_by": build2,
		"stored_at": "2026-03-01T12:00:00Z"}, byID[build1])
	assert.Equal(t, "superseded", byID[doc1]["reason"])
	assert.Equal(t, doc2, byID[doc1]["superseded_by"])
	assert.Equal(t, "fresh", byID[doc1]["freshness"])
	assert.Equal(t, "stale", byID[build2]["reason"])
	assert.NotContains(t, byID[build2], "superseded_by")
	assert.Equal(t, true, got["dry_run"])
	assert.Equal(t, "2026-03-02T13:01:00Z", got["now"])
	assert.Equal(t, true, got["complete"])

	// Non-mutating: the stale fact is still there.
	q := call(t, srv, alice, "query_facts", `{"entity":"ops"}`)
	assert.Equal(t, []string{"green"}, values(t, q))

	// Pinned facts survive the sweep (for the agent that pinned them).
	call(t, srv, alice, "memory_pin", fmt.Sprintf(`{"fact_id":%q}`, build2))
	ids, _ = freshnessRows(t, call(t, srv, alice, "memory_sweep_candidates", `{}`))
	assert.Equal(t, []string{build1, doc1}, ids)

	ids, _ = freshnessRows(t, call(t, srv, alice, "memory_sweep_candidates", `{"top_k":1}`))
	assert.Equal(t, []string{build1}, ids)
	e := callErr(t, srv, alice, "memory_sweep_candidates", `{"entity":"ops"}`)
	assert.Equal(t, "memory_sweep_candidates: entity: unknown argument", e.Message)
}

func TestMemorySweepTokenBudget(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	for i := range 60 {
		call(t, srv, alice, "store_fact", fmt.Sprintf(`{"entity":"e","key":"k%02d","value":"v","horizon_class":"volatile"}`, i))
	}
	clk.Advance(48 * time.Hour)
	got := call(t, srv, alice, "memory_sweep_candidates", `{}`)
	n := len(rows(t, got))
	assert.Less(t, n, sweepTopK, "the default budget (500) trims")
	assert.LessOrEqual(t, got["total_tokens"], float64(sweepTokenBudget))
	assert.Equal(t, true, got["truncated_by_token_budget"])
	got = call(t, srv, alice, "memory_sweep_candidates", `{"token_budget":100000}`)
	assert.Len(t, rows(t, got), sweepTopK, "the default top_k")
	got = call(t, srv, alice, "memory_sweep_candidates", `{"token_budget":1}`)
	assert.Len(t, rows(t, got), 1)
}

func TestMemorySetHorizon(t *testing.T) {
	srv, clk, db := newTestServer(t)
	id := storeID(t, srv, alice, `{"entity":"ops","key":"build","value":"green","confidence":0.8,"horizon_class":"volatile"}`)
	clk.Advance(25 * time.Hour)
	assert.Equal(t, "stale", rows(t, call(t, srv, alice, "memory_freshness", `{}`))[0]["freshness"])

	got := call(t, srv, bob, "memory_set_horizon", fmt.Sprintf(`{"fact_id":%q,"horizon_class":"stable"}`, id))
	assert.Equal(t, map[string]any{"fact_id": id, "horizon_class": "stable", "previous_horizon_class": "volatile", "ok": true}, got)
	r := rows(t, call(t, srv, alice, "memory_freshness", `{}`))[0]
	assert.Equal(t, "stable", r["horizon_class"])
	assert.Equal(t, "fresh", r["freshness"])
	q := rows(t, call(t, srv, alice, "query_facts", `{"entity":"ops"}`))[0]
	assert.InDelta(t, 0.8, q["effective_confidence"], 1e-9)
	assert.EqualValues(t, 1, q["version"], "changed in place: no new version")

	// Errors.
	args := fmt.Sprintf(`{"fact_id":%q,"horizon_class":"none"}`, id)
	assertNeedsIdentity(t, srv, "memory_set_horizon", args)
	e := callErr(t, srv, alice, "memory_set_horizon", fmt.Sprintf(`{"fact_id":%q,"horizon_class":"weekly"}`, id))
	assert.Equal(t, `memory_set_horizon: horizon_class: value must be one of "volatile", "medium", "stable", "none"`, e.Message)
	e = callErr(t, srv, alice, "memory_set_horizon", fmt.Sprintf(`{"fact_id":%q}`, id))
	assert.Equal(t, "memory_set_horizon: horizon_class: is required", e.Message)
	e = callErr(t, srv, alice, "memory_set_horizon", `{"fact_id":"42","horizon_class":"none"}`)
	assert.Equal(t, "fact_id", paramOf(t, e).Param)
	assertReserved(t, callErr(t, srv, alice, "memory_set_horizon",
		fmt.Sprintf(`{"fact_id":%q,"horizon_class":"none"}`, reservedFact(t, db, clk.Now()))), "fact_id")
	newer := storeID(t, srv, alice, `{"entity":"ops","key":"build","value":"amber"}`)
	e = callErr(t, srv, alice, "memory_set_horizon", args)
	assert.Equal(t, crux.CodeConflict, e.Code)
	assert.Contains(t, e.Message, "the current version is "+newer)
	toolError(t, srv, alice, "memory_set_horizon", `{"fact_id":"f_00000000000000000000000000000000","horizon_class":"none"}`)
}

// A reverified stale fact becomes fresh and ranks at its full confidence
// again; the signed receipt verifies offline.
func TestMemoryReverify(t *testing.T) {
	srv, clk, db := newTestServer(t)
	id := storeID(t, srv, alice, `{"entity":"ops","key":"build","value":"green","confidence":0.9,"horizon_class":"volatile"}`)
	storeID(t, srv, alice, `{"entity":"ops","key":"owner","value":"team-a","confidence":0.6}`)
	clk.Advance(25 * time.Hour)
	q := call(t, srv, alice, "query_facts", `{"entity":"ops"}`)
	assert.Equal(t, []string{"team-a", "green"}, values(t, q))
	assert.InDelta(t, 0.45, rows(t, q)[1]["effective_confidence"], 1e-9)

	got := call(t, srv, alice, "memory_reverify", fmt.Sprintf(`{"fact_id":%q}`, id))
	assert.Equal(t, id, got["fact_id"])
	assert.Equal(t, "Reverify", got["receipt_class"])
	assert.Equal(t, "2026-03-02T13:00:00Z", got["reverified_at"])
	assert.Regexp(t, `^r_[0-9a-f]{32}$`, got["receipt_id"])

	q = call(t, srv, alice, "query_facts", `{"entity":"ops"}`)
	assert.Equal(t, []string{"green", "team-a"}, values(t, q))
	r := rows(t, q)[0]
	assert.Equal(t, "fresh", r["freshness"])
	assert.InDelta(t, 0.9, r["effective_confidence"], 1e-9)
	assert.EqualValues(t, 1, r["version"], "the value is not rewritten")
	assert.Equal(t, "2026-03-01T12:00:00Z", r["stored_at"])

	// The receipt: kind reverify, signed by the server's key, chained.
	rec := getReceipt(t, db, got["receipt_id"].(string))
	assert.Equal(t, "reverify", rec.Kind)
	rep := receipts.Verify(rec, srv.Keyring(), clk.Now())
	assert.True(t, rep.OK(), "%+v", rep)
	var p reverifyPayload
	require.NoError(t, rec.Payload(&p))
	sum := blake3.Sum256([]byte("green"))
	assert.Equal(t, reverifyPayload{FactID: id, Entity: "ops", Key: "build", ValueHash: hex.EncodeToString(sum[:]),
		ReverifiedBy: "alice", ReverifiedAt: "2026-03-02T13:00:00Z"}, p)
	h, err := rec.Header()
	require.NoError(t, err)
	assert.Equal(t, "alice", h.Actor)
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		return receipts.VerifyStoredChain(tx, tenant)
	}))

	// The decay clock runs again from the reverification.
	clk.Advance(25 * time.Hour)
	assert.Equal(t, "stale", rows(t, call(t, srv, alice, "memory_freshness", `{"entity":"ops","key":"build"}`))[0]["freshness"])

	// A private fact's receipt names only the fact id: receipts are
	// readable across the tenant.
	secret := call(t, srv, alice, "store_fact", `{"entity":"me","key":"diagnosis","value":"true","private":true}`)["fact_id"].(string)
	got = call(t, srv, alice, "memory_reverify", fmt.Sprintf(`{"fact_id":%q}`, secret))
	var redacted reverifyPayload
	require.NoError(t, getReceipt(t, db, got["receipt_id"].(string)).Payload(&redacted))
	assert.Equal(t, reverifyPayload{FactID: secret, Redacted: true, ReverifiedBy: "alice", ReverifiedAt: redacted.ReverifiedAt}, redacted)
}

func TestMemoryReverifyErrors(t *testing.T) {
	srv, clk, db := newTestServer(t)
	id := storeID(t, srv, alice, `{"entity":"ops","key":"build","value":"green"}`)
	assertNeedsIdentity(t, srv, "memory_reverify", fmt.Sprintf(`{"fact_id":%q}`, id))
	assertReserved(t, callErr(t, srv, alice, "memory_reverify", fmt.Sprintf(`{"fact_id":%q}`, reservedFact(t, db, clk.Now()))), "fact_id")
	assert.Equal(t, "fact not found: f_00000000000000000000000000000000",
		toolError(t, srv, alice, "memory_reverify", `{"fact_id":"f_00000000000000000000000000000000"}`))
	e := callErr(t, srv, alice, "memory_reverify", `{}`)
	assert.Equal(t, "memory_reverify: fact_id: is required", e.Message)
	newer := storeID(t, srv, alice, `{"entity":"ops","key":"build","value":"red"}`)
	e = callErr(t, srv, alice, "memory_reverify", fmt.Sprintf(`{"fact_id":%q}`, id))
	assert.Equal(t, crux.CodeConflict, e.Code)
	assert.Equal(t, newer, e.Data.(map[string]any)["current_fact_id"])
	call(t, srv, alice, "delete_fact", fmt.Sprintf(`{"fact_id":%q}`, newer))
	assert.Equal(t, "memory_reverify: fact "+newer+" is deleted",
		toolError(t, srv, alice, "memory_reverify", fmt.Sprintf(`{"fact_id":%q}`, newer)))

	// No refused call minted a receipt.
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		return receipts.Chain(tx, tenant, 0, func(r *receipts.Receipt) error {
			t.Errorf("unexpected receipt %s of kind %s", r.ID, r.Kind)
			return nil
		})
	}))
}

func TestFreshnessFlagOff(t *testing.T) {
	flags := crux.DefaultFlags()
	flags.Freshness = false
	srv, _, _ := newTestServer(t, withFlags(flags))
	for _, name := range []string{"memory_freshness", "memory_sweep_candidates", "memory_set_horizon", "memory_reverify"} {
		e := callErr(t, srv, alice, name, `{"not":"checked"}`)
		assert.Equal(t, crux.CodeCapabilityDenied, e.Code, name)
		assert.Equal(t, name+" is disabled (CORECRUXD_FEATURE_FRESHNESS=0)", e.Message)
		assert.Equal(t, map[string]any{"feature_flag": "CORECRUXD_FEATURE_FRESHNESS", "enabled": false, "reason_code": "feature_disabled"}, e.Data)
	}
	off := flagsFrom(func(k string) string {
		if k == "CORECRUXD_FEATURE_FRESHNESS" {
			return "off"
		}
		return ""
	})
	assert.False(t, off.Freshness)
	assert.True(t, crux.DefaultFlags().Freshness)
}

// Other agents' private facts are neither read nor counted: the examined
// figure tells alice nothing about what bob keeps.
func TestScansDoNotCountOthersPrivateFacts(t *testing.T) {
	srv, _, _ := newTestServer(t)
	call(t, srv, alice, "store_fact", `{"entity":"me","key":"note","value":"shared"}`)
	before := map[string]any{}
	for _, args := range []string{`{"key":"diagnosis"}`, `{}`} {
		before[args] = call(t, srv, alice, "memory_freshness", args)["examined"]
		require.NotNil(t, before[args])
	}
	for i := range 3 {
		call(t, srv, bob, "store_fact", fmt.Sprintf(`{"entity":"b%d","key":"diagnosis","value":"secret","private":true}`, i))
	}
	for _, args := range []string{`{"key":"diagnosis"}`, `{}`} {
		assert.Equal(t, before[args], call(t, srv, alice, "memory_freshness", args)["examined"], args)
	}
	assert.Equal(t, before[`{}`], call(t, srv, alice, "memory_sweep_candidates", `{}`)["examined"])
}
