package tools_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/surface"
)

// newEnforcingServer serves under a free-local token minted by the server's
// own key, as the crux command does, optionally altering the token first
// (after signing, so a change is tampering).
func newEnforcingServer(t *testing.T, flags *crux.Flags, issuedAt time.Time, alter func(*rcx.Token)) (*crux.Server, *receipts.Ed25519Signer, *rcx.Token, store.Backend) {
	t.Helper()
	signer := newSigner(t)
	tok, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{Tenant: crux.DefaultTenant, IssuedAt: issuedAt, Capabilities: crux.FreeLocalCapabilities(crux.DefaultFlags())})
	require.NoError(t, err)
	if alter != nil {
		alter(tok)
	}
	router, err := rcx.NewRouter(tok, signer.Public(), nil)
	require.NoError(t, err)
	srv, db := newServer(t, &crux.Options{Signer: signer, Router: router, Flags: flags})
	return srv, signer, tok, db
}

func TestFreeLocalTokenFiltersHostedTools(t *testing.T) {
	srv, signer, tok, db := newEnforcingServer(t, nil, time.Now(), nil)
	require.True(t, srv.Enforcing())
	list := srv.ListTools(context.Background(), alice)
	got := names(list)
	for _, hosted := range []string{"issue_passport", "sync_pull", "sync_push"} {
		assert.NotContains(t, got, hosted)
	}
	assert.Contains(t, got, "store_fact")
	hash, err := tok.HashHex()
	require.NoError(t, err)
	for _, tl := range list {
		meta := tl.Meta["crux"].(map[string]any)
		assert.Equal(t, "rcx-capability-token", meta["filtered_by"], tl.Name)
		assert.Equal(t, map[string]string{"token_id": tok.TokenID, "token_hash": hash}, meta["token_ref"], tl.Name)
		assert.Equal(t, "free", meta["tier"])
		assert.Equal(t, "verified", meta["receipt_class"])
		var schema map[string]any
		require.NoError(t, json.Unmarshal(tl.InputSchema, &schema))
		assert.Equal(t, map[string]any{"token_id": tok.TokenID, "token_hash": hash}, schema["x-crux-token-ref"], tl.Name)
		assert.Equal(t, "free", schema["x-crux-tier"])
	}

	// Calling a hosted tool anyway is refused before it runs, with a signed,
	// stored refusal receipt that verifies offline with the public keyring.
	e := callErr(t, srv, alice, "sync_pull", `{}`)
	assert.Equal(t, crux.CodeCapabilityDenied, e.Code)
	assert.Equal(t, "RCX capability denied: denied:capability_not_permitted", e.Message)
	data := e.Data.(map[string]any)
	assert.Equal(t, "denied:capability_not_permitted", data["reason_code"])
	assert.EqualValues(t, "refused", data["mode"])
	assert.Equal(t, tok.TokenID, data["token_id"])
	assert.Nil(t, data["upgrade_hint"])
	refusal := data["refusal_receipt"].(map[string]any)
	assert.Equal(t, "rcx.capability_token.call_refused.v1", refusal["event_type"])
	assert.Equal(t, "crux-mcp.sync_pull", refusal["capability"])
	assert.Equal(t, "local", refusal["backend_id"], "crux runs no hosted platform: a refusal names none")
	whole, err := json.Marshal(e.Data)
	require.NoError(t, err)
	assert.NotContains(t, string(whole), "vaultcrux")
	assert.Equal(t, signer.KeyID(), refusal["key_id"])
	r := getReceipt(t, db, refusal["receipt_id"].(string))
	sig, err := r.SigRecord()
	require.NoError(t, err)
	assert.Equal(t, hex.EncodeToString(sig.Signature), refusal["signature"])
	report := receipts.Verify(r, srv.Keyring(), time.Now())
	assert.Equal(t, receipts.OK, report.ErrorCode, report.ErrorMessage)
	assert.Equal(t, "refusal", report.Kind)

	// Local tools run.
	call(t, srv, alice, "store_fact", `{"entity":"e","key":"k","value":"v"}`)
}

func TestRefusedTokens(t *testing.T) {
	other := newSigner(t)
	tests := []struct {
		name   string
		at     time.Time
		alter  func(*rcx.Token)
		reason string
	}{
		{"expired", time.Now().Add(-400 * 24 * time.Hour), nil, rcx.ReasonTokenExpired},
		{"signed by another key", time.Now(), func(tk *rcx.Token) {
			tk.Issuer.PassportKID, tk.Signature.KID = other.KeyID(), other.KeyID()
			require.NoError(t, rcx.Sign(tk, other))
		}, rcx.ReasonTokenInvalid},
		{"tampered", time.Now(), func(tk *rcx.Token) {
			tk.Backends[0].PermittedCapabilities = append(tk.Backends[0].PermittedCapabilities,
				rcx.PermittedCapability{Capability: "crux-mcp.sync_pull", DataEgressClasses: []rcx.EgressClass{rcx.EgressNone}, RequiredAttestations: []string{}})
		}, rcx.ReasonTokenInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _, _, _ := newEnforcingServer(t, nil, tt.at, tt.alter)
			for _, tool := range []string{"store_fact", "sync_pull"} {
				e := callErr(t, srv, alice, tool, `{"entity":"e","key":"k","value":"v"}`)
				assert.Equal(t, crux.CodeCapabilityDenied, e.Code)
				assert.Equal(t, "RCX capability denied: "+tt.reason, e.Message)
			}
			assert.Empty(t, srv.ListTools(context.Background(), alice), "a refused token lists nothing")
		})
	}
}

func TestDynamicSurface(t *testing.T) {
	flags := crux.DefaultFlags()
	flags.ToolSurface = crux.SurfaceDynamic
	srv, _ := newServer(t, &crux.Options{Flags: &flags})
	floor := names(srv.ListTools(context.Background(), alice))
	for _, n := range floor {
		assert.True(t, surface.InCoreFloor(n), n)
	}
	assert.NotContains(t, floor, "delete_fact")
	call(t, srv, alice, "cuecrux_session", `{"intent":"session_review"}`)
	shaped := names(srv.ListTools(context.Background(), alice))
	assert.Subset(t, shaped, floor)
	assert.Contains(t, shaped, "delete_fact", "memory tools join under session_review")
	assert.NotContains(t, names(srv.ListTools(context.Background(), bob)), "delete_fact", "intents are per caller")
	// Shaped-out tools remain callable.
	res, err := srv.CallTool(context.Background(), bob, "delete_fact", json.RawMessage(`{"fact_id":"f_0"}`))
	require.NoError(t, err)
	assert.Equal(t, "fact not found: f_0", res.Content[0].Text)

	flags.ToolSurface = crux.SurfaceMinimal
	srv2, _ := newServer(t, &crux.Options{Flags: &flags})
	minimal := names(srv2.ListTools(context.Background(), alice))
	for _, n := range minimal {
		assert.True(t, surface.InCoreFloor(n), n)
	}
	assert.Subset(t, minimal, []string{"cuecrux_session", "store_fact", "query_facts", "get_bootstrap", "get_agent_identity"})
	call(t, srv2, alice, "cuecrux_session", `{"intent":"session_review"}`)
	assert.Equal(t, minimal, names(srv2.ListTools(context.Background(), alice)), "minimal ignores intents")
}

func TestListToolsResultIsTheCallersOwn(t *testing.T) {
	srv, _, tok, _ := newEnforcingServer(t, nil, time.Now(), nil)
	list := srv.ListTools(context.Background(), alice)
	list[0].Meta["crux"].(map[string]any)["token_ref"].(map[string]string)["token_id"] = "changed"
	again := srv.ListTools(context.Background(), alice)
	assert.Equal(t, tok.TokenID, again[0].Meta["crux"].(map[string]any)["token_ref"].(map[string]string)["token_id"])
}
