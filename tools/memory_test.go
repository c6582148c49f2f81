package tools_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store"
)

// memoryViewTopK is memory_view's default top_k.
const memoryViewTopK = 20

func panelFacts(t *testing.T, got map[string]any) []map[string]any { return objects(t, got, "facts") }

func panelValues(t *testing.T, got map[string]any) []string {
	t.Helper()
	var out []string
	for _, f := range panelFacts(t, got) {
		out = append(out, f["value"].(string))
	}
	return out
}

func TestMemoryView(t *testing.T) {
	srv, clk, db := newTestServer(t)
	reservedFact(t, db, clk.Now())
	lang := call(t, srv, alice, "store_fact", `{"entity":"project:crux","key":"language","value":"Go","confidence":0.9,"source_receipt":"r_src"}`)
	call(t, srv, alice, "store_fact", `{"entity":"project:crux","key":"owner","value":"team-a","confidence":0.5}`)
	call(t, srv, bob, "store_fact", `{"entity":"user","key":"name","value":"Ada","confidence":0.7}`)

	res := result(t, srv, alice, "memory_view", `{}`)
	got := structured(t, res)
	assert.Equal(t, []string{"Go", "Ada", "team-a"}, panelValues(t, got), "ranked by confidence; the reserved fact is hidden")
	assert.EqualValues(t, 3, got["returned"])
	assert.Greater(t, got["total_tokens"], 0.0)
	assert.Equal(t, false, got["truncated_by_token_budget"])
	f := panelFacts(t, got)[0]
	assert.Equal(t, lang["fact_id"], f["id"])
	assert.Equal(t, "project:crux", f["entity"])
	assert.Equal(t, "language", f["key"])
	assert.EqualValues(t, 1, f["version"])
	assert.Equal(t, "2026-03-01T12:00:00Z", f["stored_at"])
	assert.InDelta(t, 0.9, f["confidence"], 1e-9)
	assert.Equal(t, false, f["pinned"])
	assert.Equal(t, "r_src", f["source_receipt"])

	// The text is a narrative, one line per fact.
	text := res.Content[0].Text
	assert.True(t, strings.HasPrefix(text, "3 memories:"), text)
	assert.Contains(t, text, "- project:crux / language: Go (version 1, confidence 0.9, stored 2026-03-01T12:00:00Z) ["+lang["fact_id"].(string)+"]")
	assert.NotContains(t, text, "__")

	// Filters.
	got = call(t, srv, alice, "memory_view", `{"entity":"project:crux"}`)
	assert.Equal(t, []string{"Go", "team-a"}, panelValues(t, got))
	got = call(t, srv, alice, "memory_view", `{"key":"name"}`)
	assert.Equal(t, []string{"Ada"}, panelValues(t, got))
	got = call(t, srv, alice, "memory_view", `{"entity":"project:crux","key":"owner"}`)
	assert.Equal(t, []string{"team-a"}, panelValues(t, got))
	got = call(t, srv, alice, "memory_view", `{"top_k":1}`)
	assert.Equal(t, []string{"Go"}, panelValues(t, got))
	res = result(t, srv, alice, "memory_view", `{"entity":"nothing"}`)
	assert.Empty(t, panelFacts(t, structured(t, res)))
	assert.Equal(t, "No memories to show.", res.Content[0].Text)

	// An unauthenticated caller sees the shared pool.
	got = call(t, srv, anon, "memory_view", `{}`)
	assert.Len(t, panelFacts(t, got), 3)
}

func TestMemoryViewHidesReservedEntities(t *testing.T) {
	srv, clk, db := newTestServer(t)
	reservedFact(t, db, clk.Now())
	got := call(t, srv, alice, "memory_view", `{"key":"probe"}`)
	assert.Empty(t, panelFacts(t, got), "a reserved entity is hidden even when its key is named")
	e := callErr(t, srv, alice, "memory_view", `{"entity":"__ops::health"}`)
	assertReserved(t, e, "entity")
	e = callErr(t, srv, alice, "memory_view", `{"entity":"__agent::bob::notes"}`)
	assertReserved(t, e, "entity")
}

func TestMemoryViewTokenBudget(t *testing.T) {
	srv, _, _ := newTestServer(t)
	long := strings.Repeat("x", 400) // a row of about 150 tokens
	for i := range 20 {
		call(t, srv, alice, "store_fact", fmt.Sprintf(`{"entity":"e","key":"k%02d","value":"%s"}`, i, long))
	}
	// The default budget of 2000 tokens applies when token_budget is omitted.
	got := call(t, srv, alice, "memory_view", `{}`)
	n := len(panelFacts(t, got))
	assert.Less(t, n, 20)
	assert.Greater(t, n, 5)
	assert.LessOrEqual(t, got["total_tokens"], 2000.0)
	assert.EqualValues(t, n, got["returned"])
	assert.Equal(t, true, got["truncated_by_token_budget"])

	got = call(t, srv, alice, "memory_view", `{"token_budget":100000}`)
	assert.Len(t, panelFacts(t, got), 20)
	assert.Equal(t, false, got["truncated_by_token_budget"])

	// The first fact is kept whatever the budget.
	res := result(t, srv, alice, "memory_view", `{"token_budget":1}`)
	got = structured(t, res)
	assert.Len(t, panelFacts(t, got), 1)
	assert.Equal(t, true, got["truncated_by_token_budget"])
	assert.Contains(t, res.Content[0].Text, "the token budget stopped the list")
}

func TestMemoryViewDefaultTopK(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for i := range 25 {
		call(t, srv, alice, "store_fact", fmt.Sprintf(`{"entity":"e","key":"k%02d","value":"v"}`, i))
	}
	got := call(t, srv, alice, "memory_view", `{}`)
	assert.Len(t, panelFacts(t, got), memoryViewTopK)
	got = call(t, srv, alice, "memory_view", `{"top_k":500}`)
	assert.Len(t, panelFacts(t, got), 25)
	e := callErr(t, srv, alice, "memory_view", `{"top_k":501}`)
	assert.Equal(t, "memory_view: top_k: must be <= 500", e.Message)
	e = callErr(t, srv, alice, "memory_view", `{"token_budget":0}`)
	assert.Equal(t, "memory_view: token_budget: must be >= 1", e.Message)
	e = callErr(t, srv, alice, "memory_view", `{"limit":5}`)
	assert.Equal(t, "memory_view: limit: unknown argument", e.Message)
}

func TestMemoryEdit(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	old := call(t, srv, alice, "store_fact", `{"entity":"project:crux","key":"language","value":"Rust","confidence":0.8,"horizon_class":"stable"}`)
	oldID := old["fact_id"].(string)
	clk.Advance(time.Minute)

	got := call(t, srv, bob, "memory_edit", fmt.Sprintf(`{"fact_id":%q,"new_value":"Go","reason":"rewritten in Go"}`, oldID))
	assert.Equal(t, oldID, got["old_fact_id"])
	assert.Equal(t, "rewritten in Go", got["reason"])
	nf := got["new_fact"].(map[string]any)
	assert.Regexp(t, `^f_[0-9a-f]{32}$`, nf["id"])
	assert.Equal(t, "Go", nf["value"])
	assert.EqualValues(t, 2, nf["version"])
	assert.InDelta(t, 0.8, nf["confidence"], 1e-9, "the confidence is kept")
	assert.Equal(t, "memory_edit:rewritten in Go", nf["source_receipt"])
	assert.Equal(t, "2026-03-01T12:01:00Z", nf["stored_at"])

	// The new version supersedes the old one, which stays in the history.
	q := call(t, srv, alice, "query_facts", `{"entity":"project:crux"}`)
	assert.Equal(t, []string{"Go"}, values(t, q))
	assert.Equal(t, "stable", rows(t, q)[0]["horizon_class"], "the horizon class is kept")
	h := call(t, srv, alice, "memory_history", `{"entity":"project:crux","key":"language"}`)
	vs := h["versions"].([]any)
	require.Len(t, vs, 2)
	assert.Equal(t, nf["id"], vs[1].(map[string]any)["superseded_by"], "newest first")
	assert.Equal(t, oldID, vs[0].(map[string]any)["supersedes"])

	// Without a reason the source_receipt is memory_edit.
	got = call(t, srv, alice, "memory_edit", fmt.Sprintf(`{"fact_id":%q,"new_value":"Go 1.26"}`, nf["id"]))
	assert.Equal(t, "memory_edit", got["new_fact"].(map[string]any)["source_receipt"])
	assert.Equal(t, "", got["reason"])
}

func TestMemoryEditErrors(t *testing.T) {
	srv, clk, db := newTestServer(t)
	v1 := call(t, srv, alice, "store_fact", `{"entity":"e","key":"k","value":"one"}`)["fact_id"].(string)
	v2 := call(t, srv, alice, "store_fact", `{"entity":"e","key":"k","value":"two"}`)["fact_id"].(string)

	// anonymous callers cannot edit.
	assertNeedsIdentity(t, srv, "memory_edit", fmt.Sprintf(`{"fact_id":%q,"new_value":"x"}`, v2))

	// A superseded version is a conflict naming the current one.
	e := callErr(t, srv, alice, "memory_edit", fmt.Sprintf(`{"fact_id":%q,"new_value":"x"}`, v1))
	assert.Equal(t, crux.CodeConflict, e.Code)
	assert.Equal(t, fmt.Sprintf("memory_edit: fact %s is not the current version; the current version is %s", v1, v2), e.Message)
	assert.Equal(t, v2, e.Data.(map[string]any)["current_fact_id"])
	// Pinning it is refused the same way; unpinning it is harmless.
	e = callErr(t, srv, alice, "memory_pin", fmt.Sprintf(`{"fact_id":%q}`, v1))
	assert.Equal(t, crux.CodeConflict, e.Code)
	assert.Equal(t, fmt.Sprintf("memory_pin: fact %s is not the current version; the current version is %s", v1, v2), e.Message)
	assert.Equal(t, false, call(t, srv, alice, "memory_pin", fmt.Sprintf(`{"fact_id":%q,"pinned":false}`, v1))["pinned"])

	// Unknown, malformed and reserved ids.
	text := toolError(t, srv, alice, "memory_edit", `{"fact_id":"f_00000000000000000000000000000000","new_value":"x"}`)
	assert.Equal(t, "fact not found: f_00000000000000000000000000000000", text)
	e = callErr(t, srv, alice, "memory_edit", `{"fact_id":"nope","new_value":"x"}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Equal(t, "fact_id", paramOf(t, e).Param)
	e = callErr(t, srv, alice, "memory_edit", `{"fact_id":"`+v2+`"}`)
	assert.Equal(t, "memory_edit: new_value: is required", e.Message)
	e = callErr(t, srv, alice, "memory_edit", fmt.Sprintf(`{"fact_id":%q,"new_value":"x"}`, reservedFact(t, db, clk.Now())))
	assertReserved(t, e, "fact_id")

	// A deleted fact cannot be edited; its superseded predecessor names it.
	call(t, srv, alice, "delete_fact", fmt.Sprintf(`{"fact_id":%q}`, v2))
	text = toolError(t, srv, alice, "memory_edit", fmt.Sprintf(`{"fact_id":%q,"new_value":"x"}`, v2))
	assert.Equal(t, fmt.Sprintf("memory_edit: fact %s is deleted", v2), text)
	e = callErr(t, srv, alice, "memory_edit", fmt.Sprintf(`{"fact_id":%q,"new_value":"x"}`, v1))
	assert.Equal(t, fmt.Sprintf("memory_edit: fact %s is not the current version; its latest version %s is deleted", v1, v2), e.Message)

	// None of the refused edits wrote anything.
	h := call(t, srv, alice, "memory_history", `{"entity":"e","key":"k"}`)
	assert.Len(t, h["versions"], 2)
}

// Agent A's private facts, their edits and A's pins are invisible to agent B.
func TestMemoryPanelAcrossAgents(t *testing.T) {
	srv, _, _ := newTestServer(t)
	shared := call(t, srv, bob, "store_fact", `{"entity":"plan","key":"goal","value":"ship"}`)["fact_id"].(string)
	mine := call(t, srv, alice, "store_fact", `{"entity":"plan","key":"secret","value":"alice only","private":true}`)["fact_id"].(string)

	edit := call(t, srv, alice, "memory_edit", fmt.Sprintf(`{"fact_id":%q,"new_value":"still alice only","reason":"typo"}`, mine))
	nf := edit["new_fact"].(map[string]any)
	assert.Equal(t, true, nf["private"], "an edit of a private fact stays private")
	call(t, srv, alice, "memory_pin", fmt.Sprintf(`{"fact_id":%q}`, shared))

	// Alice sees her private edit and her pin.
	got := call(t, srv, alice, "memory_view", `{"entity":"plan"}`)
	byValue := map[string]map[string]any{}
	for _, f := range panelFacts(t, got) {
		byValue[f["value"].(string)] = f
	}
	require.Contains(t, byValue, "still alice only")
	assert.Equal(t, true, byValue["ship"]["pinned"])
	assert.Equal(t, true, byValue["still alice only"]["private"])

	// Bob sees neither the private fact nor its edit nor alice's pin.
	got = call(t, srv, bob, "memory_view", `{"entity":"plan"}`)
	assert.Equal(t, []string{"ship"}, panelValues(t, got))
	assert.Equal(t, false, panelFacts(t, got)[0]["pinned"])
	q := call(t, srv, bob, "query_facts", `{"query":"alice"}`)
	assert.Empty(t, rows(t, q))
	h := call(t, srv, bob, "memory_history", `{"entity":"plan","key":"secret"}`)
	assert.Empty(t, h["versions"])
	for _, id := range []string{mine, nf["id"].(string)} {
		assert.Equal(t, "fact not found: "+id, toolError(t, srv, bob, "memory_history", fmt.Sprintf(`{"fact_id":%q}`, id)))
		assert.Equal(t, "fact not found: "+id, toolError(t, srv, bob, "memory_edit", fmt.Sprintf(`{"fact_id":%q,"new_value":"x"}`, id)))
		assert.Equal(t, "fact not found: "+id, toolError(t, srv, bob, "memory_pin", fmt.Sprintf(`{"fact_id":%q}`, id)))
	}

	// Alice's own history of the private chain.
	h = call(t, srv, alice, "memory_history", fmt.Sprintf(`{"fact_id":%q}`, mine))
	vs := h["versions"].([]any)
	require.Len(t, vs, 2)
	assert.Equal(t, "memory_edit:typo", vs[0].(map[string]any)["source_receipt"], "newest first")
	assert.Equal(t, true, vs[0].(map[string]any)["private"])
}

func TestMemoryPin(t *testing.T) {
	srv, clk, db := newTestServer(t)
	id := call(t, srv, alice, "store_fact", `{"entity":"e","key":"k","value":"v"}`)["fact_id"].(string)
	pinned := func(c crux.Caller) any {
		return panelFacts(t, call(t, srv, c, "memory_view", `{"entity":"e"}`))[0]["pinned"]
	}

	got := call(t, srv, alice, "memory_pin", fmt.Sprintf(`{"fact_id":%q}`, id))
	assert.Equal(t, map[string]any{"fact_id": id, "pinned": true}, got, "pinned defaults to true")
	assert.Equal(t, true, pinned(alice))
	assert.Equal(t, false, pinned(bob), "pins are per agent")
	call(t, srv, alice, "memory_pin", fmt.Sprintf(`{"fact_id":%q}`, id)) // twice is harmless
	assert.Equal(t, true, pinned(alice))

	// The pin follows an edit to the new version.
	nf := call(t, srv, alice, "memory_edit", fmt.Sprintf(`{"fact_id":%q,"new_value":"v2"}`, id))["new_fact"].(map[string]any)
	assert.Equal(t, true, nf["pinned"])
	assert.Equal(t, true, pinned(alice))
	newID := nf["id"].(string)
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		onOld, err := store.IsPinned(tx, store.Scope{Tenant: tenant, Agent: "alice"}, id)
		assert.False(t, onOld, "the pin moved off the old version")
		return err
	}))

	got = call(t, srv, alice, "memory_pin", fmt.Sprintf(`{"fact_id":%q,"pinned":false}`, newID))
	assert.Equal(t, map[string]any{"fact_id": newID, "pinned": false}, got)
	assert.Equal(t, false, pinned(alice))

	// Errors: anonymous, unknown, reserved, deleted.
	assertNeedsIdentity(t, srv, "memory_pin", fmt.Sprintf(`{"fact_id":%q}`, newID))
	toolError(t, srv, alice, "memory_pin", `{"fact_id":"f_00000000000000000000000000000000"}`)
	assertReserved(t, callErr(t, srv, alice, "memory_pin", fmt.Sprintf(`{"fact_id":%q}`, reservedFact(t, db, clk.Now()))), "fact_id")
	e := callErr(t, srv, alice, "memory_pin", fmt.Sprintf(`{"fact_id":%q,"pinned":"yes"}`, newID))
	assert.Equal(t, "memory_pin: pinned: must be a boolean", e.Message)
	call(t, srv, alice, "delete_fact", fmt.Sprintf(`{"fact_id":%q}`, newID))
	text := toolError(t, srv, alice, "memory_pin", fmt.Sprintf(`{"fact_id":%q}`, newID))
	assert.Equal(t, fmt.Sprintf("memory_pin: fact %s is deleted", newID), text)
	call(t, srv, alice, "memory_pin", fmt.Sprintf(`{"fact_id":%q,"pinned":false}`, newID)) // unpinning still works
}

func TestMemoryHistory(t *testing.T) {
	srv, clk, db := newTestServer(t)
	v1 := call(t, srv, alice, "store_fact", `{"entity":"office","key":"city","value":"Leeds","source_receipt":"r_1"}`)["fact_id"].(string)
	clk.Advance(time.Hour)
	v2 := call(t, srv, alice, "store_fact", `{"entity":"office","key":"city","value":"York"}`)["fact_id"].(string)
	clk.Advance(time.Hour)
	call(t, srv, alice, "delete_fact", fmt.Sprintf(`{"fact_id":%q}`, v2))
	p1 := call(t, srv, alice, "store_fact", `{"entity":"office","key":"city","value":"Hull","private":true}`)["fact_id"].(string)

	got := call(t, srv, alice, "memory_history", `{"entity":"office","key":"city"}`)
	var ids []any
	for _, v := range got["versions"].([]any) {
		ids = append(ids, v.(map[string]any)["id"])
	}
	assert.Equal(t, []any{p1, v2, v1}, ids, "the shared and the caller's private chain, newest first")
	first := got["versions"].([]any)[2].(map[string]any)
	assert.Equal(t, map[string]any{"id": v1, "value": "Leeds", "version": 1.0, "stored_at": "2026-03-01T12:00:00Z",
		"supersedes": nil, "superseded_by": v2, "deleted": false, "source_receipt": "r_1"}, first)
	assert.Equal(t, true, got["versions"].([]any)[1].(map[string]any)["deleted"])

	// By fact_id: that fact's own chain.
	got = call(t, srv, alice, "memory_history", fmt.Sprintf(`{"fact_id":%q}`, v1))
	assert.Len(t, got["versions"], 2)
	got = call(t, srv, alice, "memory_history", fmt.Sprintf(`{"fact_id":%q}`, p1))
	assert.Len(t, got["versions"], 1)
	got = call(t, srv, bob, "memory_history", fmt.Sprintf(`{"fact_id":%q}`, v2))
	assert.Len(t, got["versions"], 2, "deleted versions are part of the history")

	// Argument shapes.
	for args, want := range map[string]string{
		`{}`:                  "memory_history: fact_id: give either fact_id or entity and key",
		`{"entity":"office"}`: "memory_history: key: is required with entity",
		`{"key":"city"}`:      "memory_history: entity: is required with key",
		`{"entity":"office","key":"city","fact_id":"` + v1 + `"}`: "memory_history: fact_id: give either fact_id or entity and key, not both",
		`{"fact_id":"f_1"}`: "memory_history: fact_id: does not match pattern '^f_[0-9a-f]{32}$'",
	} {
		e := callErr(t, srv, alice, "memory_history", args)
		assert.Equal(t, crux.CodeInvalidParams, e.Code, args)
		assert.Equal(t, want, e.Message, args)
	}
	assertReserved(t, callErr(t, srv, alice, "memory_history", `{"entity":"__ops::health","key":"probe"}`), "entity")
	assertReserved(t, callErr(t, srv, alice, "memory_history", fmt.Sprintf(`{"fact_id":%q}`, reservedFact(t, db, clk.Now()))), "fact_id")
	toolError(t, srv, alice, "memory_history", `{"fact_id":"f_00000000000000000000000000000000"}`)
}

func TestMemoryPanelFlagOff(t *testing.T) {
	flags := crux.DefaultFlags()
	flags.MemoryPanel = false
	srv, _, _ := newTestServer(t, withFlags(flags))
	for _, name := range []string{"memory_view", "memory_edit", "memory_pin", "memory_history"} {
		e := callErr(t, srv, alice, name, `{"not":"checked"}`)
		assert.Equal(t, crux.CodeMethodNotFound, e.Code, name)
		assert.Equal(t, name+" is disabled (CORECRUXD_FEATURE_MEMORY_PANEL=0)", e.Message)
		assert.Equal(t, map[string]any{"feature_flag": "CORECRUXD_FEATURE_MEMORY_PANEL", "enabled": false}, e.Data)
	}
	// The environment dialect: =0 turns it off, the default is on.
	off := flagsFrom(func(k string) string {
		if k == "CORECRUXD_FEATURE_MEMORY_PANEL" {
			return "0"
		}
		return ""
	})
	assert.False(t, off.MemoryPanel)
	assert.True(t, crux.DefaultFlags().MemoryPanel)
}
