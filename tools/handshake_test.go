package tools_test

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/tools"
)

// sessionPlan is the part of a cuecrux_session plan the tests read.
type CuecruxSessionOutput struct {
	SessionID       string           `json:"session_id"`
	Passport        string           `json:"passport"`
	Intent          string           `json:"intent"`
	CapabilityGraph []CapabilityNode `json:"capability_graph"`
	Excluded        []CapabilityNode `json:"excluded"`
	Receipt         struct {
		Hash      hexBytes `json:"hash"`
		Signature hexBytes `json:"signature"`
		SignerKID *string  `json:"signer_kid"`
		ReceiptID string   `json:"receipt_id"`
	} `json:"receipt"`
}

type CapabilityNode struct {
	Tool       string `json:"tool"`
	Allowed    bool   `json:"allowed"`
	ReasonCode string `json:"reason_code"`
}

// hexBytes are bytes written as a hex string.
type hexBytes []byte

func (h *hexBytes) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	d, err := hex.DecodeString(s)
	*h = d
	return err
}

// toolNames are the names of list, in order.
func toolNames(list []crux.Tool) []string {
	var out []string
	for _, tl := range list {
		out = append(out, tl.Name)
	}
	return out
}

func TestCuecruxSession(t *testing.T) {
	signer, _, router := freeLocal(t)
	srv, _, db := newTestServer(t, withSigner(signer), withRouter(router))
	res := result(t, srv, alice, "cuecrux_session", `{"intent":"audit_review"}`)
	var plan CuecruxSessionOutput
	decode(t, res.StructuredContent, &plan)
	assert.Equal(t, "alice", plan.Passport)
	assert.Equal(t, "audit_review", plan.Intent)
	assert.Regexp(t, `^[0-9a-f]{32}$`, plan.SessionID)

	// The hash covers the plan and the signature verifies with the key.
	hash, err := tools.ExportPlanHash(res.StructuredContent, "")
	require.NoError(t, err)
	assert.Equal(t, hash[:], []byte(plan.Receipt.Hash))
	assert.True(t, ed25519.Verify(signer.Public(), hash[:], plan.Receipt.Signature))
	assert.Equal(t, signer.KeyID(), *plan.Receipt.SignerKID)
	h2, _ := tools.ExportPlanHash(res.StructuredContent, "something else")
	assert.NotEqual(t, hash, h2)

	// The capability graph is ordered by the intent; hosted tools are excluded.
	require.NotEmpty(t, plan.CapabilityGraph)
	for _, n := range plan.CapabilityGraph {
		assert.True(t, n.Allowed)
	}
	var excluded []string
	for _, n := range plan.Excluded {
		excluded = append(excluded, n.Tool)
		assert.Equal(t, rcx.ReasonCapabilityNotPermitted, n.ReasonCode)
	}
	assert.ElementsMatch(t, []string{"issue_passport", "sync_pull", "sync_push"}, excluded)

	hidden := call(t, srv, alice, "cuecrux_session", `{"hints":{"hide_exclusions":true,"max_capabilities":2,"want_parent_chain":true}}`)
	assert.Empty(t, hidden["excluded"])
	assert.Len(t, hidden["capability_graph"], 2)
	chain := hidden["receipt"].(map[string]any)["parent_chain"].([]any)
	assert.Equal(t, []any{hex.EncodeToString(hash[:])}, chain, "the parent is alice's previous plan")

	// The stored session_plan receipt verifies offline.
	r := getReceipt(t, db, plan.Receipt.ReceiptID)
	assert.Equal(t, receipts.OK, receipts.Verify(r, srv.Keyring(), time.Now()).ErrorCode)

	// resolve_principal finds the session's passport.
	got := call(t, srv, bob, "resolve_principal", fmt.Sprintf(`{"session_id":%q}`, plan.SessionID))
	p := got["principal"].(map[string]any)
	assert.Equal(t, "alice", p["passport_id"])
	assert.Equal(t, "session", p["resolved_via"])
	assert.NotContains(t, p["capabilities"], "crux-mcp.sync_pull")
	assert.Contains(t, p["capabilities"], "crux-mcp.store_fact")
}

func TestAutonomyContract(t *testing.T) {
	signer, _, router := freeLocal(t)
	srv, _, _ := newTestServer(t, withSigner(signer), withRouter(router))
	off := call(t, srv, alice, "autonomy_contract", `{}`)
	assert.Equal(t, false, off["feature_enabled"])
	assert.Empty(t, off["capabilities"])

	flags := crux.DefaultFlags()
	flags.AutonomyContract = true
	signer, tok, router := freeLocal(t)
	srv, _, _ = newTestServer(t, withFlags(flags), withSigner(signer), withRouter(router))
	on := call(t, srv, alice, "autonomy_contract", `{}`)
	assert.Equal(t, true, on["feature_enabled"])
	assert.Equal(t, tok.TokenID, on["token_id"])
	rows := on["capabilities"].([]any)
	all := toolNames(srv.ListTools(context.Background(), anon))
	assert.Greater(t, len(rows), len(all), "the matrix also lists what is denied")
	denied := 0
	for _, r := range rows {
		row := r.(map[string]any)
		if row["allowed"] == false {
			denied++
			assert.Equal(t, rcx.ReasonCapabilityNotPermitted, row["why_denied"])
		}
	}
	assert.Equal(t, 3, denied)
	summary := on["summary"].(map[string]any)
	assert.EqualValues(t, 3, summary["denied"])
	assert.EqualValues(t, len(rows), summary["returned"])

	small := call(t, srv, alice, "autonomy_contract", `{"token_budget":30}`)
	assert.Less(t, len(small["capabilities"].([]any)), len(rows))
	assert.Equal(t, true, small["summary"].(map[string]any)["truncated_by_token_budget"])
}

func TestResolvePrincipal(t *testing.T) {
	srv, _, db := newTestServer(t)
	got := call(t, srv, alice, "resolve_principal", `{}`)
	p := got["principal"].(map[string]any)
	assert.Equal(t, "alice", p["passport_id"])
	assert.Equal(t, false, p["has_passport_record"])
	assert.Equal(t, "caller", got["resolved_param"])
	for _, f := range []string{"tier", "tier_rank", "category", "agent_work_gate"} {
		assert.Nil(t, p[f], "%s: nothing is invented for an id without a record", f)
	}
	assert.Equal(t, "no passport record for alice in tenant default: its tier, category and work gate are unknown (issue_passport issues one)", p["note"])

	// A record answers from itself; its tier follows the receipts earned.
	call(t, srv, alice, "issue_passport", `{}`)
	p = call(t, srv, alice, "resolve_principal", `{}`)["principal"].(map[string]any)
	assert.Equal(t, "unverified", p["tier"])
	assert.Equal(t, "open", p["agent_work_gate"])
	assert.Nil(t, p["category"], "issue_passport records no category")
	assert.NotContains(t, p, "note")
	earn(t, db, tenant, "alice", 100)
	p = call(t, srv, alice, "resolve_principal", `{}`)["principal"].(map[string]any)
	assert.Equal(t, "established", p["tier"])
	assert.EqualValues(t, 2, p["tier_rank"])

	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		return store.PutPassport(tx, &store.Passport{PrincipalID: "carol", Tenant: tenant, Tier: store.TierTrusted, Category: "work"})
	}))
	got = call(t, srv, anon, "resolve_principal", `{"passport_id":"carol"}`)
	p = got["principal"].(map[string]any)
	assert.Equal(t, "trusted", p["tier"])
	assert.EqualValues(t, 3, p["tier_rank"])
	assert.Equal(t, "work", p["category"])
	assert.True(t, slices.Contains(p["capabilities"].([]any), any("crux-mcp.store_fact")))

	e := callErr(t, srv, anon, "resolve_principal", `{}`)
	assert.Equal(t, "resolve_principal: passport_id: is required when the caller has no identity and no session_id is given", e.Message)
	res, err := srv.CallTool(context.Background(), anon, "resolve_principal", json.RawMessage(`{"session_id":"nope"}`))
	require.NoError(t, err)
	assert.True(t, res.IsError)
}

func TestResolvePrincipalBadNames(t *testing.T) {
	srv, _, _ := newTestServer(t)
	e := callErr(t, srv, alice, "resolve_principal", `{"session_id":"\u0000alice"}`)
	assert.Equal(t, "resolve_principal: session_id: must not contain control characters", e.Message)
}

func TestFailedSessionRecordsNoIntent(t *testing.T) {
	flags := crux.DefaultFlags()
	flags.ToolSurface = crux.SurfaceDynamic
	srv, _, _ := newTestServer(t, withFlags(flags))
	before := toolNames(srv.ListTools(context.Background(), alice))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := srv.CallTool(ctx, alice, "cuecrux_session", json.RawMessage(`{"intent":"session_review"}`))
	require.Error(t, err)
	assert.Equal(t, before, toolNames(srv.ListTools(context.Background(), alice)))
}
