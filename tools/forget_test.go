package tools_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"lukechampine.com/blake3"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// forgetPut stores a fact and returns its id.
func forgetPut(t *testing.T, srv *crux.Server, c crux.Caller, entity, key, value string, extra ...string) string {
	t.Helper()
	args := map[string]any{"entity": entity, "key": key, "value": value}
	for _, e := range extra {
		if e == "private" {
			args["private"] = true
		}
	}
	b, err := json.Marshal(args)
	require.NoError(t, err)
	return storeID(t, srv, c, string(b))
}

// forgetAffected returns the fact ids of a dry run, in order.
func forgetAffected(t *testing.T, got map[string]any) []string {
	t.Helper()
	var ids []string
	for _, r := range objects(t, got, "facts_that_would_be_affected") {
		ids = append(ids, r["fact_id"].(string))
	}
	return ids
}

// forgetReceiptPayload is the payload of a receipt of kind forget.
type forgetReceiptPayload struct {
	Schema               string            `cbor:"schema"`
	TenantID             string            `cbor:"tenant_id"`
	PassportID           string            `cbor:"passport_id"`
	Reason               string            `cbor:"reason"`
	Scope                store.ForgetScope `cbor:"scope"`
	IncludePinned        bool              `cbor:"include_pinned"`
	TokenBudget          int               `cbor:"token_budget,omitempty"`
	TokenBudgetCapped    bool              `cbor:"token_budget_capped"`
	FactsAffected        []forgottenFact   `cbor:"facts_affected"`
	InitiatedAt          string            `cbor:"initiated_at"`
	RecoveryWindowEndsAt string            `cbor:"recovery_window_ends_at"`
}

// forgottenFact is one fact a forget receipt names.
type forgottenFact struct {
	FactID                string `cbor:"fact_id"`
	PreForgetValueHashHex string `cbor:"pre_forget_value_hash_hex"`
	Entity                string `cbor:"entity"`
	Key                   string `cbor:"key"`
}

// forgetRestoreReceipt is the payload of a receipt of kind forget_restore.
type forgetRestoreReceipt struct {
	SourceForgetReceiptID string               `cbor:"source_forget_receipt_id"`
	RestoredFactIDs       []string             `cbor:"restored_fact_ids"`
	Adjusted              []store.RestoredFact `cbor:"adjusted,omitempty"`
	RestoredAt            string               `cbor:"restored_at"`
}

// permanentPurgeReceipt is the payload of a receipt of kind permanent_purge.
type permanentPurgeReceipt struct {
	SourceForgetReceiptID string   `cbor:"source_forget_receipt_id"`
	PurgedFactIDs         []string `cbor:"purged_fact_ids"`
	PurgedAt              string   `cbor:"purged_at"`
}

// forgetReceipt reads and decodes the forget receipt id.
func forgetReceipt(t *testing.T, db store.Backend, id string) (*receipts.Receipt, forgetReceiptPayload) {
	t.Helper()
	r := getReceipt(t, db, id)
	var p forgetReceiptPayload
	require.NoError(t, r.Payload(&p))
	return r, p
}

// forgetReceiptFactIDs returns the fact ids a forget receipt names, forgetSorted.
func forgetReceiptFactIDs(p forgetReceiptPayload) []string {
	var ids []string
	for _, f := range p.FactsAffected {
		ids = append(ids, f.FactID)
	}
	sort.Strings(ids)
	return ids
}

func forgetSorted(ids ...string) []string {
	out := append([]string(nil), ids...)
	sort.Strings(out)
	return out
}

// makeOperator gives c an operator passport: issued, and of tier trusted
// by a credit of 500 receipts earned over the days before start.
func makeOperator(t *testing.T, srv *crux.Server, db *bolt.DB, c crux.Caller) {
	t.Helper()
	call(t, srv, c, "issue_passport", `{}`)
	earn(t, db, c.TenantID(), c.Agent, 500)
}

func TestForgetEntityPrefix(t *testing.T) {
	srv, clk, db := newTestServer(t)
	makeOperator(t, srv, db, alice) // she forgets bob's fact too
	a1 := forgetPut(t, srv, alice, "project:a", "lang", "Rust")
	clk.Advance(time.Minute)
	a2 := forgetPut(t, srv, alice, "project:a", "lang", "Go")
	b1 := forgetPut(t, srv, bob, "project:b", "owner", "bob")
	forgetPut(t, srv, alice, "other:x", "k", "stays")

	// The dry run previews, in stored order, and changes nothing.
	dry := call(t, srv, alice, "memory_forget_dry_run", `{"scope":{"type":"entity_prefix","value":"project:"}}`)
	assert.Equal(t, true, dry["dry_run"])
	assert.EqualValues(t, 3, dry["count"])
	ids := forgetAffected(t, dry)
	assert.ElementsMatch(t, []string{a1, a2, b1}, ids)
	assert.Equal(t, a1, ids[0], "oldest first")
	assert.Len(t, rows(t, call(t, srv, bob, "query_facts", `{"entity_prefix":"project:"}`)), 2)

	got := call(t, srv, alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"project:"},"reason":"user asked"}`)
	assert.EqualValues(t, 3, got["facts_affected"], "superseded versions are forgotten too")
	assert.Equal(t, map[string]any{"type": "entity_prefix", "value": "project:"}, got["scope"])
	assert.Equal(t, "alice", got["passport_id"])
	assert.Equal(t, false, got["token_budget_capped"])
	assert.EqualValues(t, 7*24*3600, got["recovery_window_seconds"])
	assert.Equal(t, clk.Now().Add(7*24*time.Hour).Format(time.RFC3339Nano), got["recovery_window_ends_at"])
	_, p := forgetReceipt(t, db, got["forget_receipt_id"].(string))
	assert.Equal(t, forgetSorted(a1, a2, b1), forgetReceiptFactIDs(p))

	// Gone for every normal caller, from every read.
	for _, c := range []crux.Caller{alice, bob, anon} {
		assert.Empty(t, rows(t, call(t, srv, c, "query_facts", `{"entity_prefix":"project:","include_superseded":true}`)))
		assert.Empty(t, rows(t, call(t, srv, c, "query_facts", `{"query":"rust go bob"}`)))
		assert.Equal(t, []any{"other:x"}, call(t, srv, c, "list_entities", `{}`)["entities"])
		assert.Empty(t, call(t, srv, c, "fact_history", `{"entity":"project:a","key":"lang"}`)["versions"])
		assert.Empty(t, panelFacts(t, call(t, srv, c, "memory_view", `{"entity":"project:a"}`)))
		assert.Empty(t, call(t, srv, c, "memory_history", `{"entity":"project:a","key":"lang"}`)["versions"])
	}
	assert.Equal(t, []string{"stays"}, values(t, call(t, srv, bob, "query_facts", `{}`)))

	// A forgotten fact cannot be deleted, superseded or forgotten again.
	res, err := srv.CallTool(context.Background(), alice, "delete_fact", json.RawMessage(`{"fact_id":"`+a2+`"}`))
	require.NoError(t, err)
	assert.True(t, res.IsError)
	e := callErr(t, srv, alice, "store_fact", `{"entity":"e","key":"k","value":"v","supersedes":["`+a2+`"]}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	again := call(t, srv, alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"project:"},"reason":"again"}`)
	assert.EqualValues(t, 0, again["facts_affected"])

	// The chain goes on after the forgotten versions.
	v3 := call(t, srv, alice, "store_fact", `{"entity":"project:a","key":"lang","value":"Zig"}`)
	assert.EqualValues(t, 3, v3["version"], "forgotten versions keep their numbers")
	assert.Empty(t, v3["superseded_fact_ids"])
}

func TestForgetKeyGlob(t *testing.T) {
	srv, _, db := newTestServer(t)
	makeOperator(t, srv, db, alice) // she forgets bob's fact too
	e1 := forgetPut(t, srv, alice, "user:1", "email", "a@x")
	e2 := forgetPut(t, srv, bob, "user:2", "email_backup", "b@x")
	phone := forgetPut(t, srv, alice, "user:1", "phone", "123")
	forgetPut(t, srv, alice, "user:1", "email/old", "c@x")

	// A glob matches whole keys, and * does not cross /.
	assert.Empty(t, forgetAffected(t, call(t, srv, alice, "memory_forget_dry_run", `{"scope":{"type":"key_glob","value":"emai"}}`)))
	got := call(t, srv, alice, "memory_forget", `{"scope":{"type":"key_glob","value":"email*"},"reason":"gdpr"}`)
	assert.EqualValues(t, 2, got["facts_affected"], "across entities and writers")
	_, p := forgetReceipt(t, db, got["forget_receipt_id"].(string))
	assert.Equal(t, forgetSorted(e1, e2), forgetReceiptFactIDs(p))
	assert.ElementsMatch(t, []string{"123", "c@x"}, values(t, call(t, srv, alice, "query_facts", `{}`)))

	assert.Equal(t, []string{phone}, forgetAffected(t, call(t, srv, alice, "memory_forget_dry_run", `{"scope":{"type":"key_glob","value":"[ep]*"}}`)))
	assert.Len(t, forgetAffected(t, call(t, srv, alice, "memory_forget_dry_run", `{"scope":{"type":"key_glob","value":"*/*"}}`)), 1)
}

func TestForgetPassportID(t *testing.T) {
	srv, _, db := newTestServer(t)
	forgetPut(t, srv, alice, "team", "lead", "alice")
	bobShared := forgetPut(t, srv, bob, "team", "notes", "bob wrote this")
	anonymous := forgetPut(t, srv, anon, "team", "rumour", "anonymous wrote this")
	bobPrivate := forgetPut(t, srv, bob, "team", "diary", "bob only", "private")

	// Only an operator forgets another agent's facts.
	for _, tool := range []string{"memory_forget", "memory_forget_dry_run"} {
		args := `{"scope":{"type":"passport_id","value":"bob"}`
		if tool == "memory_forget" {
			args += `,"reason":"bob left"`
		}
		e := callErr(t, srv, alice, tool, args+`}`)
		assert.Equal(t, crux.CodeForbidden, e.Code)
		assert.Equal(t, map[string]any{"reason": "operator_required"}, e.Data)
		assert.Equal(t, tool+": scope.value: bob's facts are not yours; forgetting another agent's facts needs an operator passport (tier trusted or above)", e.Message)
	}
	assert.Len(t, rows(t, call(t, srv, bob, "query_facts", `{}`)), 4, "nothing forgotten")

	// An operator forgets bob's shared facts; bob's private fact is not hers to see.
	makeOperator(t, srv, db, alice)
	got := call(t, srv, alice, "memory_forget", `{"scope":{"type":"passport_id","value":"bob"},"reason":"bob left"}`)
	_, p := forgetReceipt(t, db, got["forget_receipt_id"].(string))
	assert.Equal(t, []string{bobShared}, forgetReceiptFactIDs(p))
	assert.ElementsMatch(t, []string{"alice", "anonymous wrote this", "bob only"}, values(t, call(t, srv, bob, "query_facts", `{}`)))

	// "anonymous" names the facts written without an identity.
	got = call(t, srv, alice, "memory_forget", `{"scope":{"type":"passport_id","value":"anonymous"},"reason":"spam"}`)
	_, p = forgetReceipt(t, db, got["forget_receipt_id"].(string))
	assert.Equal(t, []string{anonymous}, forgetReceiptFactIDs(p))

	// bob forgets his own passport's facts: his private one too.
	got = call(t, srv, bob, "memory_forget", `{"scope":{"type":"passport_id","value":"bob"},"reason":"leaving"}`)
	_, p = forgetReceipt(t, db, got["forget_receipt_id"].(string))
	assert.Equal(t, []string{bobPrivate}, forgetReceiptFactIDs(p))
	assert.Equal(t, []string{"alice"}, values(t, call(t, srv, bob, "query_facts", `{}`)))
}

func TestForgetBeforeTimestamp(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	old := forgetPut(t, srv, alice, "log", "day1", "one")
	clk.Advance(time.Hour)
	mid := forgetPut(t, srv, alice, "log", "day2", "two")
	cut := clk.Now().Add(30 * time.Minute)
	clk.Advance(time.Hour)
	forgetPut(t, srv, alice, "log", "day3", "three")

	args := fmt.Sprintf(`{"scope":{"type":"before_timestamp","value":%q}`, cut.Format(time.RFC3339))
	assert.Equal(t, []string{old, mid}, forgetAffected(t, call(t, srv, alice, "memory_forget_dry_run", args+`}`)))
	got := call(t, srv, alice, "memory_forget", args+`,"reason":"retention"}`)
	assert.EqualValues(t, 2, got["facts_affected"])
	assert.Equal(t, []string{"three"}, values(t, call(t, srv, alice, "query_facts", `{}`)))
}

func TestForgetTenantID(t *testing.T) {
	srv, _, _ := newTestServer(t)
	other := crux.Caller{Agent: "carol", Authenticated: true, Tenant: "acme"}
	forgetPut(t, srv, alice, "a", "k", "default tenant")
	forgetPut(t, srv, alice, "b", "k", "alice private", "private")
	forgetPut(t, srv, bob, "c", "k", "bob private", "private")
	forgetPut(t, srv, other, "a", "k", "acme tenant")

	got := call(t, srv, alice, "memory_forget", `{"scope":{"type":"tenant_id","value":"default"},"reason":"wipe"}`)
	assert.EqualValues(t, 2, got["facts_affected"], "everything alice can see, nothing else")
	assert.Equal(t, "default", got["tenant_id"])
	assert.Equal(t, []string{"bob private"}, values(t, call(t, srv, bob, "query_facts", `{}`)))
	assert.Equal(t, []string{"acme tenant"}, values(t, call(t, srv, other, "query_facts", `{}`)))

	// Another tenant is refused, as a scope and as the receipt's tenant.
	for _, tc := range []struct{ tool, args, param string }{
		{"memory_forget", `{"scope":{"type":"tenant_id","value":"acme"},"reason":"r"}`, "scope.value"},
		{"memory_forget_dry_run", `{"scope":{"type":"tenant_id","value":"acme"}}`, "scope.value"},
		{"memory_forget", `{"scope":{"type":"entity_prefix","value":"a"},"reason":"r","tenant_id":"acme"}`, "tenant_id"},
	} {
		e := callErr(t, srv, alice, tc.tool, tc.args)
		assert.Equal(t, crux.CodeForbidden, e.Code, e.Message)
		pe := paramOf(t, e)
		assert.Equal(t, tc.param, pe.Param)
		assert.Contains(t, e.Message, `tenant "acme" is not your tenant "default"`)
	}
	assert.Equal(t, []string{"acme tenant"}, values(t, call(t, srv, other, "query_facts", `{}`)))
	// The caller's own tenant, named explicitly, is fine.
	call(t, srv, other, "memory_forget", `{"scope":{"type":"tenant_id","value":"acme"},"reason":"r","tenant_id":"acme"}`)
	assert.Empty(t, rows(t, call(t, srv, other, "query_facts", `{}`)))
}

func TestForgetInvalidParams(t *testing.T) {
	srv, _, _ := newTestServer(t)
	forgetPut(t, srv, alice, "e", "k", "v")
	scopes := []struct {
		name, scope, param, reason string
	}{
		{"not an object", `"everything"`, "scope", "must be an object"},
		{"no type", `{"value":"x"}`, "scope.type", "is required"},
		{"no value", `{"type":"key_glob"}`, "scope.value", "is required"},
		{"type not a string", `{"type":5,"value":"x"}`, "scope.type", "must be a string"},
		{"unknown type", `{"type":"everything","value":"x"}`, "scope.type", `value must be one of "entity_prefix", "key_glob", "passport_id", "before_timestamp", "tenant_id"`},
		{"value not a string", `{"type":"key_glob","value":3}`, "scope.value", "must be a string"},
		{"empty value", `{"type":"entity_prefix","value":""}`, "scope.value", "must not be empty"},
		{"unknown field", `{"type":"key_glob","value":"a","also":1}`, "scope.also", "unknown argument"},
		{"bad timestamp", `{"type":"before_timestamp","value":"yesterday"}`, "scope.value", "must be a valid date-time"},
		{"bad glob", `{"type":"key_glob","value":"[a-"}`, "scope.value", "must be a valid glob pattern (path.Match syntax: *, ?, [class], \\ escapes)"},
	}
	for _, tc := range scopes {
		for _, tool := range []string{"memory_forget", "memory_forget_dry_run"} {
			t.Run(tool+"/"+tc.name, func(t *testing.T) {
				args := `{"scope":` + tc.scope + `}`
				if tool == "memory_forget" {
					args = `{"scope":` + tc.scope + `,"reason":"r"}`
				}
				e := callErr(t, srv, alice, tool, args)
				assert.Equal(t, crux.CodeInvalidParams, e.Code)
				assert.Equal(t, tool+": "+tc.param+": "+tc.reason, e.Message, "both tools say the same")
				pe := paramOf(t, e)
				assert.Equal(t, tc.param, pe.Param)
			})
		}
	}
	for _, tc := range []struct{ args, param, reason string }{
		{`{"scope":{"type":"entity_prefix","value":"e"}}`, "reason", "is required"},
		{`{"scope":{"type":"entity_prefix","value":"e"},"reason":""}`, "reason", "must not be empty"},
		{`{"scope":{"type":"entity_prefix","value":"e"},"reason":"  "}`, "reason", "must not be blank"},
		{`{"reason":"r"}`, "scope", "is required"},
		{`{"scope":{"type":"entity_prefix","value":"e"},"reason":"r","token_budget":0}`, "token_budget", "must be >= 1"},
		{`{"scope":{"type":"entity_prefix","value":"e"},"reason":"r","scpoe":1}`, "scpoe", "unknown argument"},
	} {
		e := callErr(t, srv, alice, "memory_forget", tc.args)
		assert.Equal(t, crux.CodeInvalidParams, e.Code)
		assert.Equal(t, "memory_forget: "+tc.param+": "+tc.reason, e.Message)
	}
	e := callErr(t, srv, alice, "memory_forget_dry_run", `{"scope":{"type":"entity_prefix","value":"e"},"reason":"r"}`)
	assert.Equal(t, "memory_forget_dry_run: reason: unknown argument", e.Message)
	// Nothing was forgotten by any of them.
	assert.Equal(t, []string{"v"}, values(t, call(t, srv, alice, "query_facts", `{}`)))
}

func TestForgetNeverTouchesReservedFacts(t *testing.T) {
	srv, clk, db := newTestServer(t)
	reserved := reservedFact(t, db, clk.Now())
	forgetPut(t, srv, alice, "ops", "k", "v")
	makeOperator(t, srv, db, alice) // whose forget reaches every writer's facts
	for _, scope := range []string{
		`{"type":"tenant_id","value":"default"}`,
		`{"type":"entity_prefix","value":"__"}`,
		`{"type":"passport_id","value":"anonymous"}`,
		`{"type":"key_glob","value":"*"}`,
		`{"type":"before_timestamp","value":"2100-01-01T00:00:00Z"}`,
	} {
		dry := call(t, srv, alice, "memory_forget_dry_run", `{"scope":`+scope+`,"include_pinned":true}`)
		assert.NotContains(t, forgetAffected(t, dry), reserved, scope)
		for _, id := range forgetAffected(t, dry) {
			assert.NotEqual(t, reserved, id)
		}
		call(t, srv, alice, "memory_forget", `{"scope":`+scope+`,"reason":"r","include_pinned":true}`)
	}
	assert.Equal(t, []string{"ok"}, values(t, call(t, srv, alice, "query_facts", `{"entity":"__ops::health"}`)))
	// The bootstrap knowledge is reserved too.
	assert.NotEmpty(t, call(t, srv, alice, "get_bootstrap", `{}`)["facts"])
}

func TestForgetOtherAgentsPrivateFacts(t *testing.T) {
	srv, _, db := newTestServer(t)
	forgetPut(t, srv, alice, "diary", "monday", "alice secret", "private")
	forgetPut(t, srv, bob, "diary", "monday", "bob secret", "private")
	forgetPut(t, srv, bob, "diary", "shared", "everyone")
	makeOperator(t, srv, db, alice)

	dry := call(t, srv, alice, "memory_forget_dry_run", `{"scope":{"type":"entity_prefix","value":"diary"}}`)
	assert.EqualValues(t, 2, dry["count"])
	assert.EqualValues(t, 0, dry["others_skipped"])
	got := call(t, srv, alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"diary"},"reason":"r"}`)
	assert.EqualValues(t, 2, got["facts_affected"])
	assert.Equal(t, []string{"bob secret"}, values(t, call(t, srv, bob, "query_facts", `{"entity":"diary"}`)))
	assert.Len(t, call(t, srv, bob, "fact_history", `{"entity":"diary","key":"monday"}`)["versions"], 1)
	assert.Empty(t, rows(t, call(t, srv, alice, "query_facts", `{"entity":"diary"}`)))
	// The receipt names only what alice could see.
	for _, f := range dry["facts_that_would_be_affected"].([]any) {
		assert.Equal(t, "diary", f.(map[string]any)["entity"], "logical names only")
	}
}

func TestForgetPinnedSurvive(t *testing.T) {
	srv, _, db := newTestServer(t)
	pinned := forgetPut(t, srv, alice, "prefs", "theme", "dark")
	forgetPut(t, srv, alice, "prefs", "font", "mono")
	call(t, srv, alice, "memory_pin", `{"fact_id":"`+pinned+`"}`)
	makeOperator(t, srv, db, bob) // so that his forget reaches alice's facts

	// Pinned by alice, so bob's forget leaves it too: pins protect across agents.
	got := call(t, srv, bob, "memory_forget", `{"scope":{"type":"entity_prefix","value":"prefs"},"reason":"r"}`)
	assert.EqualValues(t, 1, got["facts_affected"])
	assert.EqualValues(t, 1, got["pinned_skipped"])
	assert.Equal(t, []string{"dark"}, values(t, call(t, srv, bob, "query_facts", `{"entity":"prefs"}`)))

	// include_pinned overrides only the caller's own pins.
	dry := call(t, srv, bob, "memory_forget_dry_run", `{"scope":{"type":"entity_prefix","value":"prefs"},"include_pinned":true}`)
	assert.Empty(t, forgetAffected(t, dry), "alice's pin still protects against bob")
	dry = call(t, srv, alice, "memory_forget_dry_run", `{"scope":{"type":"entity_prefix","value":"prefs"},"include_pinned":true}`)
	assert.Equal(t, []string{pinned}, forgetAffected(t, dry))
	got = call(t, srv, alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"prefs"},"reason":"r","include_pinned":true}`)
	assert.EqualValues(t, 1, got["facts_affected"])
	assert.Empty(t, rows(t, call(t, srv, alice, "query_facts", `{"entity":"prefs"}`)))
	assert.Empty(t, panelFacts(t, call(t, srv, alice, "memory_view", `{}`)))
}

func TestForgetTokenBudget(t *testing.T) {
	srv, clk, db := newTestServer(t)
	var ids []string
	for i := range 5 {
		ids = append(ids, forgetPut(t, srv, alice, "batch", fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)))
		clk.Advance(time.Second)
	}
	dry := call(t, srv, alice, "memory_forget_dry_run", `{"scope":{"type":"entity_prefix","value":"batch"},"token_budget":2}`)
	assert.Equal(t, ids[:2], forgetAffected(t, dry), "the oldest first")
	assert.Equal(t, true, dry["token_budget_capped"])

	got := call(t, srv, alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"batch"},"reason":"r","token_budget":2}`)
	assert.EqualValues(t, 2, got["facts_affected"])
	assert.Equal(t, true, got["token_budget_capped"])
	_, p := forgetReceipt(t, db, got["forget_receipt_id"].(string))
	assert.Equal(t, forgetSorted(ids[:2]...), forgetReceiptFactIDs(p))
	assert.True(t, p.TokenBudgetCapped)
	assert.Equal(t, 2, p.TokenBudget)
	assert.Equal(t, []string{"v2", "v3", "v4"}, forgetSortedValues(t, call(t, srv, alice, "query_facts", `{}`)))

	got = call(t, srv, alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"batch"},"reason":"r","token_budget":3}`)
	assert.EqualValues(t, 3, got["facts_affected"])
	assert.Equal(t, false, got["token_budget_capped"], "the cap did not cut the set")
}

func forgetSortedValues(t *testing.T, got map[string]any) []string {
	v := values(t, got)
	sort.Strings(v)
	return v
}

func TestForgetFlagOff(t *testing.T) {
	for _, v := range []string{"0", "yes", "on", "false"} {
		flags := flagsFrom(func(k string) string {
			if k == "CORECRUXD_FEATURE_SCOPED_FORGET" {
				return v
			}
			return ""
		})
		srv, _, _ := newTestServer(t, withFlags(flags))
		forgetPut(t, srv, alice, "e", "k", "v")
		e := callErr(t, srv, alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"e"},"reason":"r"}`)
		assert.Equal(t, crux.CodeMethodNotFound, e.Code, v)
		assert.Equal(t, "memory_forget is disabled (set CORECRUXD_FEATURE_SCOPED_FORGET=1 to enable)", e.Message)
		assert.Equal(t, map[string]any{"feature_flag": "CORECRUXD_FEATURE_SCOPED_FORGET", "enabled": false}, e.Data)
		// The gate runs before the arguments are checked.
		e = callErr(t, srv, alice, "memory_forget", `{}`)
		assert.Equal(t, crux.CodeMethodNotFound, e.Code)
		// The dry run is always available.
		assert.EqualValues(t, 1, call(t, srv, alice, "memory_forget_dry_run", `{"scope":{"type":"entity_prefix","value":"e"}}`)["count"])
		assert.Equal(t, []string{"v"}, values(t, call(t, srv, alice, "query_facts", `{}`)))
	}
	for _, v := range []string{"", "1", "true", "TRUE"} {
		flags := flagsFrom(func(k string) string {
			if k == "CORECRUXD_FEATURE_SCOPED_FORGET" {
				return v
			}
			return ""
		})
		assert.True(t, flags.ScopedForget, "%q", v)
	}
	srv, _, _ := newTestServer(t)
	for _, tl := range srv.ListTools(context.Background(), alice) {
		if tl.Name == "memory_forget" {
			assert.Contains(t, tl.Description, "Off if CORECRUXD_FEATURE_SCOPED_FORGET is set but not 1 or true")
			assert.True(t, tl.Annotations.DestructiveHint)
		}
		if tl.Name == "memory_forget_dry_run" {
			assert.Contains(t, tl.Description, "Always available")
			assert.True(t, tl.Annotations.ReadOnlyHint)
		}
	}
}

func TestForgetReceiptVerifiesOffline(t *testing.T) {
	srv, clk, db := newTestServer(t)
	id1 := forgetPut(t, srv, alice, "contact", "email", "alice@example.com")
	id2 := forgetPut(t, srv, alice, "contact", "phone", "+1 555 0100")
	got := call(t, srv, alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"contact"},"reason":"user request"}`)

	r, p := forgetReceipt(t, db, got["forget_receipt_id"].(string))
	rep := receipts.Verify(r, srv.Keyring(), clk.Now())
	require.True(t, rep.OK(), "%+v", rep)
	h, err := r.Header()
	require.NoError(t, err)
	assert.Equal(t, "forget", h.Kind)
	assert.Equal(t, "alice", h.Actor)
	assert.Equal(t, "default", h.TenantID)

	assert.Equal(t, "crux.receipt.forget.v1", p.Schema)
	assert.Equal(t, "alice", p.PassportID)
	assert.Equal(t, "user request", p.Reason)
	assert.Equal(t, store.ForgetScope{Type: "entity_prefix", Value: "contact"}, p.Scope)
	assert.Equal(t, clk.Now().Format(time.RFC3339Nano), p.InitiatedAt)
	assert.Equal(t, got["recovery_window_ends_at"], p.RecoveryWindowEndsAt)
	want := map[string]string{id1: "alice@example.com", id2: "+1 555 0100"}
	require.Len(t, p.FactsAffected, 2)
	for _, f := range p.FactsAffected {
		sum := blake3.Sum256([]byte(want[f.FactID]))
		assert.Equal(t, hex.EncodeToString(sum[:]), f.PreForgetValueHashHex, f.FactID)
		assert.Equal(t, "contact", f.Entity)
	}
	assert.NotContains(t, string(r.Body), "alice@example.com", "the receipt names hashes, never values")

	// The result carries the exact signed body and its hash.
	assert.Equal(t, hex.EncodeToString(r.Body), got["receipt_body_cbor_hex"])
	sum := blake3.Sum256(r.Body)
	assert.Equal(t, hex.EncodeToString(sum[:]), got["receipt_body_hash_hex"])

	// A forget that matches nothing is on record all the same.
	empty := call(t, srv, bob, "memory_forget", `{"scope":{"type":"entity_prefix","value":"nothing"},"reason":"check"}`)
	assert.EqualValues(t, 0, empty["facts_affected"])
	r, p = forgetReceipt(t, db, empty["forget_receipt_id"].(string))
	assert.True(t, receipts.Verify(r, srv.Keyring(), clk.Now()).OK())
	assert.Empty(t, p.FactsAffected)
	assert.Equal(t, "bob", p.PassportID)
}

// forgetSnapshot is what the read tools say about the facts of a test, read
// with the clock at t0 so that ages compare.
func forgetSnapshot(t *testing.T, srv *crux.Server, clk *clock, t0 time.Time, c crux.Caller, pairs ...[2]string) string {
	t.Helper()
	now := clk.Set(t0)
	defer clk.Set(now)
	out := map[string]any{
		"query":    call(t, srv, c, "query_facts", `{"include_superseded":true,"top_k":1000}`),
		"entities": call(t, srv, c, "list_entities", `{}`),
		"view":     call(t, srv, c, "memory_view", `{}`),
		"search":   call(t, srv, c, "query_facts", `{"query":"rust go zig secret"}`),
	}
	for _, p := range pairs {
		out["history "+p[0]+" "+p[1]] = call(t, srv, c, "fact_history", fmt.Sprintf(`{"entity":%q,"key":%q}`, p[0], p[1]))
	}
	b, err := json.MarshalIndent(out, "", " ")
	require.NoError(t, err)
	return string(b)
}

func TestForgetRestore(t *testing.T) {
	srv, clk, db := newTestServer(t)
	forgetPut(t, srv, alice, "lang", "main", "Rust")
	clk.Advance(time.Minute)
	forgetPut(t, srv, alice, "lang", "main", "Go")
	del := forgetPut(t, srv, alice, "lang", "old", "Zig")
	call(t, srv, alice, "delete_fact", `{"fact_id":"`+del+`"}`)
	forgetPut(t, srv, alice, "lang", "mine", "secret", "private")
	forgetPut(t, srv, bob, "lang", "bobs", "secret too", "private")
	pairs := [][2]string{{"lang", "main"}, {"lang", "old"}, {"lang", "mine"}}
	t0 := clk.Now()
	beforeAlice, beforeBob := forgetSnapshot(t, srv, clk, t0, alice, pairs...), forgetSnapshot(t, srv, clk, t0, bob, pairs...)

	clk.Advance(time.Hour)
	got := call(t, srv, alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"lang"},"reason":"oops"}`)
	assert.EqualValues(t, 4, got["facts_affected"], "current, superseded, deleted and private versions")
	assert.NotEqual(t, beforeAlice, forgetSnapshot(t, srv, clk, t0, alice, pairs...))
	assert.Equal(t, []string{"secret too"}, values(t, call(t, srv, bob, "query_facts", `{"entity":"lang"}`)), "bob's private fact is not alice's to forget")

	clk.Advance(6 * 24 * time.Hour) // still within the 7-day window
	id := got["forget_receipt_id"].(string)
	rep, err := srv.RestoreForget(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, id, rep.ForgetReceiptID)
	assert.Len(t, rep.RestoredFactIDs, 4)
	assert.Empty(t, rep.Adjusted)
	assert.Equal(t, beforeAlice, forgetSnapshot(t, srv, clk, t0, alice, pairs...), "restored exactly")
	assert.Equal(t, beforeBob, forgetSnapshot(t, srv, clk, t0, bob, pairs...))

	r := getReceipt(t, db, rep.RestoreReceiptID)
	require.True(t, receipts.Verify(r, srv.Keyring(), clk.Now()).OK())
	h, err := r.Header()
	require.NoError(t, err)
	assert.Equal(t, "forget_restore", h.Kind)
	assert.Equal(t, "operator", h.Actor)
	var p forgetRestoreReceipt
	require.NoError(t, r.Payload(&p))
	assert.Equal(t, id, p.SourceForgetReceiptID)
	assert.ElementsMatch(t, rep.RestoredFactIDs, p.RestoredFactIDs)

	st, err := srv.ForgetStatus(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, "restored", st.State)
	assert.Equal(t, rep.RestoreReceiptID, st.RestoreReceiptID)

	// Only once.
	_, err = srv.RestoreForget(context.Background(), id)
	assert.ErrorIs(t, err, crux.ErrForgetRestored)
	assert.Contains(t, err.Error(), "was restored at")
	// A restored forget is never purged.
	clk.Advance(30 * 24 * time.Hour)
	pr, err := srv.Purge(context.Background())
	require.NoError(t, err)
	assert.Empty(t, pr.Purged)
	assert.Equal(t, beforeAlice, forgetSnapshot(t, srv, clk, t0, alice, pairs...))

	_, err = srv.RestoreForget(context.Background(), "r_00000000000000000000000000000000")
	assert.ErrorIs(t, err, store.ErrNotFound)
}

func TestForgetRestoreAfterWindow(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	forgetPut(t, srv, alice, "e", "k", "v")
	got := call(t, srv, alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"e"},"reason":"r"}`)
	clk.Advance(7 * 24 * time.Hour) // the window is half-open: it has ended now
	_, err := srv.RestoreForget(context.Background(), got["forget_receipt_id"].(string))
	assert.ErrorIs(t, err, crux.ErrRecoveryWindowClosed)
	assert.Contains(t, err.Error(), "recovery window ended at 2026-03-08T12:00:00Z")
	assert.Empty(t, rows(t, call(t, srv, alice, "query_facts", `{}`)))
}

func TestForgetRestoreWindowSetting(t *testing.T) {
	flags := flagsFrom(func(k string) string {
		if k == "CORECRUXD_FORGET_RECOVERY_WINDOW_DAYS" {
			return "0" // below the minimum: 1 day
		}
		return ""
	})
	srv, _, _ := newTestServer(t, withFlags(flags))
	forgetPut(t, srv, alice, "e", "k", "v")
	got := call(t, srv, alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"e"},"reason":"r"}`)
	assert.EqualValues(t, 24*3600, got["recovery_window_seconds"])
}

func TestForgetRestoreAfterNewVersion(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	old := forgetPut(t, srv, alice, "city", "home", "Paris")
	got := call(t, srv, alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"city"},"reason":"r"}`)
	clk.Advance(time.Hour)
	newer := call(t, srv, alice, "store_fact", `{"entity":"city","key":"home","value":"Berlin"}`)
	assert.EqualValues(t, 2, newer["version"])

	rep, err := srv.RestoreForget(context.Background(), got["forget_receipt_id"].(string))
	require.NoError(t, err)
	require.Len(t, rep.Adjusted, 1)
	assert.Equal(t, store.RestoredFact{ID: old, SupersededBy: newer["fact_id"].(string)}, rep.Adjusted[0])
	assert.Equal(t, []string{"Berlin"}, values(t, call(t, srv, alice, "query_facts", `{"entity":"city"}`)), "the newer write stays current")
	versions := call(t, srv, alice, "fact_history", `{"entity":"city","key":"home"}`)["versions"].([]any)
	require.Len(t, versions, 2)
	assert.Equal(t, "Paris", versions[1].(map[string]any)["value"], "newest first")
	assert.Equal(t, newer["fact_id"], versions[1].(map[string]any)["superseded_by"])
	assert.Equal(t, []any{"city"}, call(t, srv, alice, "list_entities", `{}`)["entities"])
}

// forgetFileHas reports whether the file at path holds needle.
func forgetFileHas(t *testing.T, path string, needle string) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return bytes.Contains(b, []byte(needle))
}

func TestForgetPurgeRemovesTheBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crux.db")
	srv, clk, db := newTestServer(t, inFile(path, nil)) // fsync on

	const secret = "purge-me-7f3c9e1a-the-launch-code-is-0000"
	id := forgetPut(t, srv, alice, "vault", "code", secret)
	forgetPut(t, srv, alice, "vault", "label", "keep me")
	got := call(t, srv, alice, "memory_forget", `{"scope":{"type":"key_glob","value":"code"},"reason":"rotate"}`)
	fid := got["forget_receipt_id"].(string)

	// Within the window nothing is purged, and the value is still on disk.
	rep, err := srv.Purge(context.Background())
	require.NoError(t, err)
	assert.Empty(t, rep.Purged)
	assert.False(t, rep.Compacted)
	require.True(t, forgetFileHas(t, path, secret), "the value must be in the file before the purge, or this test proves nothing")

	clk.Advance(7*24*time.Hour + time.Second)
	rep, err = srv.Purge(context.Background())
	require.NoError(t, err)
	require.Len(t, rep.Purged, 1)
	assert.True(t, rep.Compacted)
	pf := rep.Purged[0]
	assert.Equal(t, fid, pf.ForgetReceiptID)
	assert.Equal(t, []string{id}, pf.PurgedFactIDs)

	r := getReceipt(t, db, pf.PurgeReceiptID)
	require.True(t, receipts.Verify(r, srv.Keyring(), clk.Now()).OK())
	h, err := r.Header()
	require.NoError(t, err)
	assert.Equal(t, "permanent_purge", h.Kind)
	var p permanentPurgeReceipt
	require.NoError(t, r.Payload(&p))
	assert.Equal(t, permanentPurgeReceipt{SourceForgetReceiptID: fid, PurgedFactIDs: []string{id}, PurgedAt: clk.Now().Format(time.RFC3339Nano)}, p)
	// The forget receipt still verifies and names the value's hash.
	fr, fp := forgetReceipt(t, db, fid)
	assert.True(t, receipts.Verify(fr, srv.Keyring(), clk.Now()).OK())
	assert.Equal(t, store.ValueHash(secret), fp.FactsAffected[0].PreForgetValueHashHex)

	_, err = srv.RestoreForget(context.Background(), fid)
	assert.ErrorIs(t, err, crux.ErrForgetPurged)
	st, err := srv.ForgetStatus(context.Background(), fid)
	require.NoError(t, err)
	assert.Equal(t, "purged", st.State)
	assert.Equal(t, []string{id}, st.FactIDs)
	assert.Equal(t, []string{"keep me"}, values(t, call(t, srv, alice, "query_facts", `{}`)))

	// Purging again does nothing.
	rep, err = srv.Purge(context.Background())
	require.NoError(t, err)
	assert.Empty(t, rep.Purged)
	assert.False(t, rep.Compacted)

	require.NoError(t, srv.Close())
	require.NoError(t, db.Close())
	assert.False(t, forgetFileHas(t, path, secret), "the purged value must be gone from the database file")
	assert.True(t, forgetFileHas(t, path, "keep me"))
}

func TestForgetPurgeOnOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crux.db")
	const secret = "purged-on-open-5d1b2f77"
	srv, clk, db := newTestServer(t, inFile(path, &bolt.Options{NoSync: true}))
	forgetPut(t, srv, alice, "tmp", "k", secret)
	fid := call(t, srv, alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"tmp"},"reason":"r"}`)["forget_receipt_id"].(string)
	require.NoError(t, db.Close())
	require.True(t, forgetFileHas(t, path, secret))

	clk.Advance(8 * 24 * time.Hour)
	srv, _, db = newTestServer(t, inFile(path, &bolt.Options{NoSync: true}), withClock(clk))
	st, err := srv.ForgetStatus(context.Background(), fid)
	require.NoError(t, err)
	assert.Equal(t, "purged", st.State)
	r := getReceipt(t, db, st.PurgeReceiptID)
	assert.Equal(t, "permanent_purge", r.Kind)
	require.NoError(t, db.Close())
	assert.False(t, forgetFileHas(t, path, secret))
}

func TestForgetPurgeUnpins(t *testing.T) {
	srv, clk, db := newTestServer(t)
	id := forgetPut(t, srv, alice, "p", "k", "v")
	call(t, srv, alice, "memory_pin", `{"fact_id":"`+id+`"}`)
	call(t, srv, alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"p"},"reason":"r","include_pinned":true}`)
	clk.Advance(8 * 24 * time.Hour)
	_, err := srv.Purge(context.Background())
	require.NoError(t, err)
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		pinned, err := store.PinnedByAnyone(tx, "default", id)
		assert.False(t, pinned, "a purged fact keeps no pin")
		return err
	}))
}

// TestForgetConcurrent runs overlapping forgets, writes and reads at once:
// every fact is forgotten exactly once (group commit may run a forget's
// transaction twice; nothing of a discarded run may remain), and a purge
// with its compaction in the middle of it all fails no call.
func TestForgetConcurrent(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	const n = 40
	for i := range n {
		forgetPut(t, srv, alice, fmt.Sprintf("c:%02d", i%4), fmt.Sprintf("k%02d", i), fmt.Sprintf("v%02d", i))
	}
	old := call(t, srv, alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"c:03"},"reason":"r"}`)
	clk.Advance(8 * 24 * time.Hour)

	ctx := context.Background()
	results := make(chan float64, 8)
	errs := make(chan error, 64)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scope := []string{`"c:0"`, `"c:00"`, `"c:01"`, `"c:02"`}[i%4]
			res, err := srv.CallTool(ctx, alice, "memory_forget", json.RawMessage(`{"scope":{"type":"entity_prefix","value":`+scope+`},"reason":"r"}`))
			if err != nil {
				errs <- err
				return
			}
			var out struct {
				N float64 `json:"facts_affected"`
			}
			if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil {
				errs <- err
			}
			results <- out.N
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 5 {
				if _, err := srv.CallTool(ctx, bob, "store_fact", json.RawMessage(fmt.Sprintf(`{"entity":"other","key":"k%d-%d","value":"x"}`, i, j))); err != nil {
					errs <- err
				}
				if _, err := srv.CallTool(ctx, bob, "query_facts", json.RawMessage(`{"entity_prefix":"c:"}`)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		rep, err := srv.Purge(ctx)
		if err != nil {
			errs <- err
			return
		}
		if len(rep.Purged) != 1 || rep.Purged[0].ForgetReceiptID != old["forget_receipt_id"] || !rep.Compacted {
			errs <- fmt.Errorf("purge report %+v", rep)
		}
	}()
	wg.Wait()
	close(results)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total := 0.0
	for r := range results {
		total += r
	}
	assert.EqualValues(t, n-n/4, total, "each fact forgotten once")
	assert.Empty(t, rows(t, call(t, srv, alice, "query_facts", `{"entity_prefix":"c:"}`)))
	assert.Len(t, rows(t, call(t, srv, bob, "query_facts", `{"entity":"other","top_k":100}`)), 40)
}
