package tools_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/toolkit"
)

func TestGetAgentIdentity(t *testing.T) {
	srv, _, _ := newTestServer(t)
	assert.Equal(t, "alice", call(t, srv, alice, "get_agent_identity", `{}`)["agent_name"])
	assert.Equal(t, "anonymous", call(t, srv, anon, "get_agent_identity", `{}`)["agent_name"])
	assert.Equal(t, "anonymous", call(t, srv, crux.Caller{Agent: "claims-to-be-alice"}, "get_agent_identity", `{}`)["agent_name"])
}

// identityServer is a server with identity continuity on, where alice
// holds an operator passport (trusted: 500 receipts) and bob a basic one.
func identityServer(t *testing.T) (*crux.Server, *clock, *bolt.DB) {
	t.Helper()
	flags := crux.DefaultFlags()
	flags.IdentityContinuity, flags.PassportRevocation, flags.Artefacts = true, true, true
	srv, clk, db := newTestServer(t, withFlags(flags))
	call(t, srv, alice, "issue_passport", `{}`)
	call(t, srv, bob, "issue_passport", `{}`)
	earn(t, db, tenant, "alice", 500)
	earn(t, db, tenant, "bob", 10)
	return srv, clk, db
}

// identityCalls are a valid call of each identity-continuity tool.
var identityCalls = []struct{ tool, args string }{
	{"passport_split", `{"target_passport":"alice","new_passport_name":"alice-2","token_budget":500}`},
	{"passport_merge", `{"source_passport":"bob","target_passport":"alice","conflict_policy":"prefer_target","token_budget":500}`},
	{"passport_link_device", `{"device_fingerprint":"` + strings.Repeat("0f", 32) + `","token_budget":500}`},
}

func TestIdentityContinuityOff(t *testing.T) {
	srv, _, _ := newTestServer(t)
	listed := map[string]bool{}
	for _, tl := range srv.ListTools(context.Background(), alice) {
		listed[tl.Name] = true
	}
	for _, ic := range identityCalls {
		assert.True(t, listed[ic.tool], "%s is listed while its flag is off", ic.tool)
		e := callErr(t, srv, alice, ic.tool, ic.args)
		assert.Equal(t, crux.CodeMethodNotFound, e.Code)
		assert.Equal(t, ic.tool+" is disabled (set CORECRUXD_FEATURE_IDENTITY_CONTINUITY=1 to enable)", e.Message)
		assert.Equal(t, map[string]any{"feature_flag": "CORECRUXD_FEATURE_IDENTITY_CONTINUITY", "enabled": false}, e.Data)
	}
}

func TestIdentityContinuityTokenBudget(t *testing.T) {
	srv, _, _ := identityServer(t)
	for _, ic := range identityCalls {
		args := strings.Replace(ic.args, `,"token_budget":500`, "", 1)
		e := callErr(t, srv, alice, ic.tool, args)
		assert.Equal(t, crux.CodeInvalidParams, e.Code)
		assert.Equal(t, ic.tool+": token_budget: is required", e.Message)
		assert.Equal(t, "token_budget", e.Data.(*toolkit.ParamError).Param)
		e = callErr(t, srv, alice, ic.tool, strings.Replace(ic.args, `"token_budget":500`, `"token_budget":0`, 1))
		assert.Equal(t, ic.tool+": token_budget: must be >= 1", e.Message)
	}
}

func TestIdentityContinuityNeedsOperator(t *testing.T) {
	srv, _, db := identityServer(t)
	carol := crux.Caller{Agent: "carol", Authenticated: true}
	for _, ic := range identityCalls {
		for _, tc := range []struct {
			caller crux.Caller
			msg    string
		}{
			{anon, "needs an authenticated agent identity; anonymous callers are refused"},
			{carol, "carol has no passport in tenant default"},
			{bob, "your passport bob is of tier basic (10 receipts, 10 credited; a UTC day credits at most 50); identity operations need an operator passport (tier trusted or above)"},
		} {
			args := ic.args
			if tc.caller.Identity() != "" {
				args = strings.ReplaceAll(args, `"alice"`, `"`+tc.caller.Name()+`"`)
			}
			if ic.tool == "passport_merge" && tc.caller.Identity() != "" {
				args = strings.Replace(args, `"target_passport":"alice"`, `"target_passport":"`+tc.caller.Name()+`"`, 1)
				if tc.caller.Name() == "bob" {
					args = `{"source_passport":"bob","target_passport":"alice","conflict_policy":"prefer_target","token_budget":500}`
				}
			}
			e := callErr(t, srv, tc.caller, ic.tool, args)
			assert.Equal(t, crux.CodeForbidden, e.Code, "%s as %s: %s", ic.tool, tc.caller.Name(), e.Message)
			assert.Contains(t, e.Message, tc.msg)
		}
	}
	// 499 receipts are not enough; the 500th is.
	call(t, srv, carol, "issue_passport", `{}`)
	earn(t, db, tenant, "carol", 499)
	e := callErr(t, srv, carol, "passport_link_device", identityCalls[2].args)
	assert.Equal(t, crux.CodeForbidden, e.Code)
	assert.Equal(t, map[string]any{"reason": "operator_required", "tier": "established", "required_tier": "trusted"}, e.Data)
	earn(t, db, tenant, "carol", 1)
	call(t, srv, carol, "passport_link_device", identityCalls[2].args)

	// A revoked operator is no operator.
	call(t, srv, carol, "revoke_passport", `{}`)
	res := result(t, srv, carol, "passport_split", `{"target_passport":"carol","new_passport_name":"c2","token_budget":9}`)
	assert.True(t, res.IsError, "with enforcement on, a revoked passport is refused before the tool runs")

	// Without enforcement the tool itself refuses it.
	flags := crux.DefaultFlags()
	flags.IdentityContinuity = true
	lax, _, laxDB := newTestServer(t, withFlags(flags))
	call(t, lax, carol, "issue_passport", `{}`)
	earn(t, laxDB, tenant, "carol", 500)
	call(t, lax, carol, "revoke_passport", `{}`)
	e = callErr(t, lax, carol, "passport_split", `{"target_passport":"carol","new_passport_name":"c2","token_budget":9}`)
	assert.Equal(t, crux.CodeForbidden, e.Code)
	assert.Equal(t, "passport_split: your passport carol was revoked; identity operations need an operator passport (tier trusted or above)", e.Message)
}

func TestIdentityContinuityTenants(t *testing.T) {
	srv, _, _ := identityServer(t)
	for _, tc := range []struct{ tool, args, param string }{
		{"passport_split", `{"target_passport":"other::alice","new_passport_name":"a2","token_budget":9}`, "target_passport"},
		{"passport_split", `{"target_passport":"alice","new_passport_name":"other::a2","token_budget":9}`, "new_passport_name"},
		{"passport_merge", `{"source_passport":"other::bob","target_passport":"alice","conflict_policy":"prefer_target","token_budget":9}`, "source_passport"},
		{"passport_merge", `{"source_passport":"alice","target_passport":"x::y::bob","conflict_policy":"prefer_target","token_budget":9}`, "target_passport"},
	} {
		e := callErr(t, srv, alice, tc.tool, tc.args)
		assert.Equal(t, crux.CodeForbidden, e.Code, e.Message)
		assert.Contains(t, e.Message, tc.tool+": "+tc.param+": passport ")
		assert.Contains(t, e.Message, "identity operations never cross tenants")
		assert.Equal(t, "cross_tenant", e.Data.(map[string]any)["reason"])
	}
	// Naming one's own tenant is allowed.
	out := call(t, srv, alice, "passport_split", `{"target_passport":"default::alice","new_passport_name":"default::alice-2","token_budget":9}`)
	assert.Equal(t, "alice-2", out["new_passport_id"])
	// Another tenant's alice has no passport there: the names do not reach across.
	other := crux.Caller{Agent: "alice", Authenticated: true, Tenant: "other"}
	e := callErr(t, srv, other, "passport_split", `{"target_passport":"alice","new_passport_name":"alice-3","token_budget":9}`)
	assert.Equal(t, crux.CodeForbidden, e.Code)
	assert.Contains(t, e.Message, "alice has no passport in tenant other")
}

func TestPassportSplit(t *testing.T) {
	srv, _, db := identityServer(t)
	call(t, srv, alice, "store_fact", `{"entity":"project","key":"editor","value":"vim","private":true}`)
	edit := call(t, srv, alice, "store_fact", `{"entity":"project","key":"editor","value":"helix","private":true}`)
	call(t, srv, alice, "store_fact", `{"entity":"project","key":"lang","value":"Go","private":true}`)
	call(t, srv, alice, "store_fact", `{"entity":"team","key":"size","value":"4"}`)

	for _, tc := range []struct{ args, param, reason string }{
		{`{"target_passport":"alice","new_passport_name":"a:","token_budget":9}`, "new_passport_name", `must not end with ":"`},
		{`{"target_passport":"alice","new_passport_name":"anonymous","token_budget":9}`, "new_passport_name", `must not be "anonymous"`},
		{`{"target_passport":"alice","new_passport_name":"` + strings.Repeat("n", 257) + `","token_budget":9}`, "new_passport_name", "longer than 256 bytes"},
		{`{"target_passport":"alice","new_passport_name":"default::","token_budget":9}`, "new_passport_name", "names no passport"},
		{`{"target_passport":"alice","new_passport_name":"a2","token_budget":9,"reason":"` + strings.Repeat("r", 2049) + `"}`, "reason", "longer than 2048 bytes"},
	} {
		e := callErr(t, srv, alice, "passport_split", tc.args)
		assert.Equal(t, "passport_split: "+tc.param+": "+tc.reason, e.Message)
	}
	e := callErr(t, srv, alice, "passport_split", `{"target_passport":"bob","new_passport_name":"b2","token_budget":9}`)
	assert.Equal(t, crux.CodeForbidden, e.Code)
	assert.Equal(t, "passport_split: you may split only your own passport (alice), not bob", e.Message)
	e = callErr(t, srv, alice, "passport_split", `{"target_passport":"alice","new_passport_name":"bob","token_budget":9}`)
	assert.Equal(t, crux.CodeConflict, e.Code)
	assert.Equal(t, "passport_split: passport bob already exists in tenant default", e.Message)

	out := call(t, srv, alice, "passport_split", `{"target_passport":"alice","new_passport_name":"alice-work","token_budget":2000,"reason":"work identity"}`)
	assert.Equal(t, "alice-work", out["new_passport_id"])
	assert.Equal(t, "alice", out["source_passport_id"])
	assert.Equal(t, "default", out["tenant_id"])
	assert.EqualValues(t, 2, out["facts_inherited"])
	assert.Equal(t, false, out["truncated"])
	assert.Equal(t, false, out["receipt_body_omitted"])
	inherited := objects(t, out, "inherited")
	require.Len(t, inherited, 2)
	assert.Equal(t, edit["fact_id"], inherited[0]["from_fact_id"])
	id := out["split_receipt_id"].(string)
	verifiesWith(t, srv, db, id)
	r := getReceipt(t, db, id)
	assert.Equal(t, out["receipt_body_cbor_hex"], hex.EncodeToString(r.Body))
	var p map[string]any
	require.NoError(t, r.Payload(&p))
	assert.Equal(t, "crux.receipt.passport_split.v1", p["schema"])
	assert.Equal(t, "alice", p["initiated_by_passport_id"])
	assert.Equal(t, "alice-work", p["new_passport_id"])
	assert.Equal(t, "work identity", p["reason"])
	assert.Len(t, p["facts_inherited"], 2)
	chainVerifies(t, db, tenant)

	// The new passport sees the inherited facts as its own; the source keeps its own.
	work := crux.Caller{Agent: "alice-work", Authenticated: true}
	got := call(t, srv, work, "get_passport", `{}`)
	assert.Equal(t, "alice", got["forked_from"])
	assert.Equal(t, "alice", got["sponsor_id"])
	assert.Equal(t, "unverified", got["reputation_tier"])
	assert.ElementsMatch(t, []string{"helix", "Go", "4"}, values(t, call(t, srv, work, "query_facts", `{}`)))
	h := objects(t, call(t, srv, work, "fact_history", `{"entity":"project","key":"editor"}`), "versions")
	require.Len(t, h, 1)
	origins := h[0]["origins"].([]any)
	assert.Equal(t, map[string]any{"op": "split", "receipt_id": id, "passport": "alice", "fact_id": edit["fact_id"], "version": float64(2)}, origins[0])
	call(t, srv, work, "store_fact", `{"entity":"project","key":"editor","value":"zed","private":true}`)
	assert.Contains(t, values(t, call(t, srv, alice, "query_facts", `{"entity":"project","key":"editor"}`)), "helix")
	assert.NotContains(t, values(t, call(t, srv, alice, "query_facts", `{"entity":"project","key":"editor"}`)), "zed")

	// A small budget cuts the list and the body, never the split.
	out = call(t, srv, alice, "passport_split", `{"target_passport":"alice","new_passport_name":"alice-3","token_budget":1}`)
	assert.EqualValues(t, 2, out["facts_inherited"])
	assert.Empty(t, out["inherited"])
	assert.Equal(t, true, out["truncated"])
	assert.Equal(t, true, out["receipt_body_omitted"])
	assert.Nil(t, out["receipt_body_cbor_hex"])
	assert.Len(t, out["receipt_body_hash_hex"], 64)
	assert.Len(t, values(t, call(t, srv, crux.Caller{Agent: "alice-3", Authenticated: true}, "query_facts", `{}`)), 3)
}

// chainVerifies checks the tenant's receipt chain.
func chainVerifies(t *testing.T, db *bolt.DB, tenant string) {
	t.Helper()
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error { return receipts.VerifyStoredChain(tx, tenant) }))
}

// mergeServer is identityServer with a second passport of alice's,
// alice-old, holding private facts (one in conflict with alice's), a
// session, a pin and an artefact.
func mergeServer(t *testing.T) (*crux.Server, *bolt.DB, map[string]any) {
	t.Helper()
	srv, _, db := identityServer(t)
	old := crux.Caller{Agent: "alice-old", Authenticated: true}
	// alice-old is alice's: split from her passport, then used on its own.
	call(t, srv, alice, "passport_split", `{"target_passport":"alice","new_passport_name":"alice-old","token_budget":500}`)
	call(t, srv, alice, "store_fact", `{"entity":"prefs","key":"shell","value":"zsh","private":true}`)
	call(t, srv, old, "store_fact", `{"entity":"prefs","key":"shell","value":"bash","private":true}`)
	moved := call(t, srv, old, "store_fact", `{"entity":"prefs","key":"editor","value":"vim","private":true}`)
	call(t, srv, old, "store_fact", `{"entity":"team","key":"lead","value":"dana"}`)
	call(t, srv, old, "save_session", `{"session_id":"notes","state":{"todo":["a"]}}`)
	call(t, srv, alice, "save_session", `{"session_id":"notes","state":{"mine":true}}`)
	call(t, srv, old, "memory_pin", `{"fact_id":"`+moved["fact_id"].(string)+`"}`)
	call(t, srv, old, "artefact_put", `{"content_bytes_base64":"aGk=","mime_type":"text/plain"}`)
	return srv, db, moved
}

func TestPassportMerge(t *testing.T) {
	srv, db, moved := mergeServer(t)
	old := crux.Caller{Agent: "alice-old", Authenticated: true}
	const args = `{"source_passport":"alice-old","target_passport":"alice","conflict_policy":"%s","token_budget":%d}`

	e := callErr(t, srv, alice, "passport_merge", `{"source_passport":"alice","target_passport":"alice","conflict_policy":"prefer_target","token_budget":9}`)
	assert.Equal(t, "passport_merge: target_passport: must differ from source_passport", e.Message)
	e = callErr(t, srv, alice, "passport_merge", `{"source_passport":"alice-old","target_passport":"alice","conflict_policy":"prefer_nobody","token_budget":9}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, "passport_merge: conflict_policy:")
	e = callErr(t, srv, alice, "passport_merge", `{"source_passport":"alice-old","target_passport":"bob","conflict_policy":"prefer_target","token_budget":9}`)
	assert.Equal(t, crux.CodeForbidden, e.Code)
	assert.Equal(t, "passport_merge: target_passport bob is not yours: you (alice) may merge only passports you own, your own and those split from it", e.Message)
	assert.Contains(t, toolError(t, srv, alice, "passport_merge", `{"source_passport":"zed","target_passport":"alice","conflict_policy":"prefer_target","token_budget":9}`),
		"no passport zed in tenant default")

	// error_on_conflict names the conflict and changes nothing.
	e = callErr(t, srv, alice, "passport_merge", fmt.Sprintf(args, "error_on_conflict", 500))
	assert.Equal(t, crux.CodeConflict, e.Code)
	assert.Equal(t, `passport_merge: conflict on (entity "prefs", key "shell"): both passports hold a current value; nothing was merged`, e.Message)
	data := e.Data.(map[string]any)
	assert.Equal(t, 1, data["conflict_count"])
	conflicts := data["conflicts"].([]store.MergeConflict)
	assert.Equal(t, "prefs", conflicts[0].Entity)
	assert.Equal(t, "shell", conflicts[0].Key)
	assert.ElementsMatch(t, []string{"bash", "vim"}, privateValues(t, srv, old))
	assert.Equal(t, false, call(t, srv, old, "get_passport", `{}`)["revoked"])
	assert.Nil(t, call(t, srv, old, "get_passport", `{}`)["retired_into"])

	out := call(t, srv, alice, "passport_merge", fmt.Sprintf(args, "prefer_source", 2000))
	assert.Equal(t, "alice", out["merged_passport_id"])
	assert.Equal(t, "alice-old", out["retired_passport_id"])
	assert.Equal(t, "prefer_source", out["conflict_policy"])
	assert.EqualValues(t, 1, out["conflicts_resolved"])
	assert.Equal(t, map[string]any{"chains": float64(2), "facts": float64(2), "sessions": float64(1), "pins": float64(1), "artefacts": float64(1)}, out["moved"])
	assert.Equal(t, []any{map[string]any{"from": "notes", "to": "notes@alice-old"}}, out["sessions_renamed"])
	assert.Equal(t, false, out["truncated"])
	id := out["merge_receipt_id"].(string)
	verifiesWith(t, srv, db, id)
	chainVerifies(t, db, tenant)
	var p map[string]any
	require.NoError(t, getReceipt(t, db, id).Payload(&p))
	assert.Equal(t, "crux.receipt.passport_merge.v1", p["schema"])
	assert.Equal(t, "prefer_source", p["conflict_policy"])
	assert.Len(t, p["facts_moved"], 2)
	assert.Len(t, p["conflicts"], 1)

	// alice holds what alice-old held; prefer_source kept bash.
	assert.ElementsMatch(t, []string{"bash", "vim"}, privateValues(t, srv, alice))
	assert.Empty(t, privateValues(t, srv, old))
	assert.Contains(t, values(t, call(t, srv, bob, "query_facts", `{"entity":"team"}`)), "dana", "shared facts stay")
	h := objects(t, call(t, srv, alice, "fact_history", `{"entity":"prefs","key":"editor"}`), "versions")
	require.Len(t, h, 1)
	assert.Equal(t, moved["fact_id"], h[0]["fact_id"], "a moved fact keeps its id")
	assert.Equal(t, []any{map[string]any{"op": "merge", "receipt_id": id, "passport": "alice-old", "version": float64(1)}}, h[0]["origins"])
	assert.Len(t, objects(t, call(t, srv, alice, "fact_history", `{"entity":"prefs","key":"shell"}`), "versions"), 2)

	// The session is a read-only reference; alice's own is hers.
	ref := call(t, srv, alice, "get_session", `{"session_id":"notes@alice-old"}`)
	assert.Equal(t, true, ref["read_only"])
	assert.Equal(t, []any{map[string]any{"passport": "alice-old", "session_id": "notes", "receipt_id": id}}, ref["merged_from"])
	assert.Contains(t, toolError(t, srv, alice, "save_session", `{"session_id":"notes@alice-old","state":{}}`), "read-only reference")
	assert.Contains(t, toolError(t, srv, alice, "session_checkpoint", `{"session_id":"notes@alice-old","token_budget":100}`), "read-only reference")
	assert.Contains(t, toolError(t, srv, alice, "delete_session", `{"session_id":"notes@alice-old"}`), "read-only reference")
	call(t, srv, alice, "archive_session", `{"session_id":"notes@alice-old"}`)
	call(t, srv, bob, "save_session", `{"session_id":"notes@alice-old","state":{"bob":1}}`)
	pkg := call(t, srv, bob, "create_handoff", `{"session_id":"notes@alice-old","target_agent":"alice"}`)["package_json"].(string)
	pkgArg, _ := json.Marshal(pkg)
	e = callErr(t, srv, alice, "accept_handoff", `{"package":`+string(pkgArg)+`}`)
	assert.Equal(t, crux.CodeConflict, e.Code)
	assert.Contains(t, e.Message, "read-only reference")
	assert.Equal(t, true, call(t, srv, alice, "get_session", `{"session_id":"notes@alice-old"}`)["read_only"])
	assert.Nil(t, call(t, srv, alice, "get_session", `{"session_id":"notes"}`)["read_only"])
	assert.Contains(t, toolError(t, srv, old, "get_session", `{"session_id":"notes"}`), "session not found")

	// The source is retired, for good.
	got := call(t, srv, old, "get_passport", `{}`)
	assert.Equal(t, "alice", got["retired_into"])
	e = callErr(t, srv, alice, "passport_merge", fmt.Sprintf(args, "prefer_target", 9))
	assert.Equal(t, crux.CodeConflict, e.Code)
	assert.Contains(t, e.Message, "passport alice-old was retired into alice at")
}

// privateValues are the values of the private facts c sees.
func privateValues(t *testing.T, srv *crux.Server, c crux.Caller) []string {
	t.Helper()
	var out []string
	for _, r := range rows(t, call(t, srv, c, "query_facts", `{"top_k":1000}`)) {
		if r["private"] == true {
			out = append(out, r["value"].(string))
		}
	}
	return out
}

func TestPassportMergeBudget(t *testing.T) {
	srv, _, _ := identityServer(t)
	old := crux.Caller{Agent: "old", Authenticated: true}
	call(t, srv, alice, "passport_split", `{"target_passport":"alice","new_passport_name":"old","token_budget":500}`)
	for i := range 30 {
		k := fmt.Sprintf(`{"entity":"e","key":"k%02d","value":"%s %d","private":true}`, i, "%s", i)
		call(t, srv, alice, "store_fact", fmt.Sprintf(k, "mine"))
		call(t, srv, old, "store_fact", fmt.Sprintf(k, "theirs"))
	}
	out := call(t, srv, alice, "passport_merge", `{"source_passport":"old","target_passport":"alice","conflict_policy":"prefer_target","token_budget":200}`)
	assert.EqualValues(t, 30, out["conflicts_resolved"])
	listed := objects(t, out, "conflicts")
	assert.NotEmpty(t, listed)
	assert.Less(t, len(listed), 30)
	assert.Equal(t, true, out["truncated"])
	assert.Equal(t, true, out["receipt_body_omitted"])
	b, err := json.Marshal(out)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(b), 200*4+800, "the lists stay within the budget; the fixed fields come on top")
	assert.Len(t, privateValues(t, srv, alice), 30)
}

func TestPassportLinkDevice(t *testing.T) {
	srv, _, db := identityServer(t)
	fpr := strings.Repeat("ab", 32)
	out := call(t, srv, alice, "passport_link_device", `{"device_fingerprint":"`+fpr+`","token_budget":2000}`)
	assert.Equal(t, "alice", out["passport_id"])
	assert.Equal(t, fpr, out["device_fingerprint"])
	assert.Equal(t, []any{"facts:read"}, out["capabilities_subset"])
	assert.Equal(t, false, out["relinked"])
	assert.Equal(t, false, out["receipt_body_omitted"])
	verifiesWith(t, srv, db, out["link_receipt_id"].(string))
	var p map[string]any
	require.NoError(t, getReceipt(t, db, out["link_receipt_id"].(string)).Payload(&p))
	assert.Equal(t, "crux.receipt.passport_link_device.v1", p["schema"])
	assert.Equal(t, fpr, p["device_fingerprint"])

	out = call(t, srv, alice, "passport_link_device", `{"device_fingerprint":"`+fpr+`","token_budget":1,"capabilities_subset":["facts:read","sessions:write"]}`)
	assert.Equal(t, true, out["relinked"])
	assert.Equal(t, []any{"facts:read"}, out["previous_capabilities"])
	assert.Equal(t, []any{"facts:read", "sessions:write"}, out["capabilities_subset"])
	assert.Equal(t, true, out["receipt_body_omitted"], "a budget of one token leaves the body out")
	chainVerifies(t, db, tenant)

	for _, tc := range []struct{ args, param, reason string }{
		{`{"device_fingerprint":"` + strings.Repeat("AB", 32) + `","token_budget":9}`, "device_fingerprint", "does not match pattern"},
		{`{"device_fingerprint":"abc","token_budget":9}`, "device_fingerprint", "does not match pattern"},
		{`{"device_fingerprint":"` + fpr + `","token_budget":9,"capabilities_subset":["root"]}`, "capabilities_subset/0", "value must be one of"},
		{`{"device_fingerprint":"` + fpr + `","token_budget":9,"capabilities_subset":[]}`, "capabilities_subset", "minimum 1 items"},
	} {
		e := callErr(t, srv, alice, "passport_link_device", tc.args)
		assert.Equal(t, crux.CodeInvalidParams, e.Code)
		assert.Contains(t, e.Message, "passport_link_device: ", tc.args)
		assert.Contains(t, e.Message, tc.reason, tc.args)
	}
	e := callErr(t, srv, alice, "passport_link_device", `{"device_fingerprint":"`+fpr+`","token_budget":9,"capabilities_subset":["facts:read","facts:read"]}`)
	assert.Equal(t, "passport_link_device: capabilities_subset.1: lists facts:read twice", e.Message)

	// A device belongs to one passport.
	carol := crux.Caller{Agent: "carol", Authenticated: true}
	call(t, srv, carol, "issue_passport", `{}`)
	earn(t, db, tenant, "carol", 500)
	e = callErr(t, srv, carol, "passport_link_device", `{"device_fingerprint":"`+fpr+`","token_budget":9}`)
	assert.Equal(t, crux.CodeConflict, e.Code)
	assert.Equal(t, "passport_link_device: device "+fpr+" is linked to passport alice; a device belongs to one passport", e.Message)
}
