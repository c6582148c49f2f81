package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/receipttest"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// earn appends n receipts naming actor in tenant, as if its calls over
// the days up to start had minted them: they earn it a credit of n.
func earn(t *testing.T, db *bolt.DB, tenant, actor string, n int) {
	t.Helper()
	signer := newSigner(t)
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		return receipttest.Earn(tx, signer, tenant, actor, n, start)
	}))
}

// verifiesWith checks that the receipt id is stored and verifies with the
// server's keyring, as crux verify receipt does.
func verifiesWith(t *testing.T, srv *crux.Server, db *bolt.DB, id string) {
	t.Helper()
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		r, err := receipts.Get(tx, id)
		if err != nil {
			return err
		}
		rep := receipts.Verify(r, srv.Keyring(), start)
		assert.True(t, rep.OK(), "%s: %s", rep.ErrorCode, rep.ErrorMessage)
		return nil
	}))
}

func TestGetPassport(t *testing.T) {
	srv, _, db := newTestServer(t)
	assertNeedsIdentity(t, srv, "get_passport", `{}`)
	assert.Equal(t, "no passport for alice in tenant default; call issue_passport to get one", toolError(t, srv, alice, "get_passport", `{}`))

	call(t, srv, alice, "issue_passport", `{"sponsor_id":"root"}`)
	p := call(t, srv, alice, "get_passport", `{}`)
	assert.Equal(t, "unverified", p["reputation_tier"])
	assert.EqualValues(t, 0, p["receipt_count"])
	assert.Equal(t, "root", p["sponsor_id"])
	assert.Equal(t, false, p["revoked"])
	assert.Len(t, p["passport_hash"], 64)

	// Ten receipts of alice's own make her basic; bob's and another
	// tenant's count for them, not for her; refusals count for no one.
	for i := range 9 {
		call(t, srv, alice, "record_decision", `{"action":"a`+strings.Repeat("x", i)+`","rationale":"r"}`)
	}
	earn(t, db, tenant, "bob", 50)
	earn(t, db, "other", "alice", 50)
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		_, err := receipts.Append(tx, newSigner(t), tenant, receipts.KindRefusal, "alice", map[string]int{"n": 1}, start)
		return err
	}))
	p = call(t, srv, alice, "get_passport", `{}`)
	assert.EqualValues(t, 9, p["receipt_count"])
	assert.Equal(t, "unverified", p["reputation_tier"])
	call(t, srv, alice, "record_decision", `{"action":"tenth","rationale":"r"}`)
	p = call(t, srv, alice, "get_passport", `{}`)
	assert.EqualValues(t, 10, p["receipt_count"])
	assert.Equal(t, "basic", p["reputation_tier"])
	hash := p["passport_hash"]

	// The upgrade is stored: resolve_principal and issue_passport see it.
	got := call(t, srv, alice, "resolve_principal", `{}`)
	assert.Equal(t, "basic", got["principal"].(map[string]any)["tier"])

	for _, step := range []struct {
		n    int
		tier string
	}{{90, "established"}, {400, "trusted"}, {1500, "elite"}} {
		earn(t, db, tenant, "alice", step.n)
		p = call(t, srv, alice, "get_passport", `{}`)
		assert.Equal(t, step.tier, p["reputation_tier"])
	}
	assert.EqualValues(t, 2000, p["receipt_count"])
	assert.Equal(t, hash, p["passport_hash"], "the identity hash does not move with the tier")

	// Another tenant's alice has no passport.
	other := crux.Caller{Agent: "alice", Authenticated: true, Tenant: "other"}
	assert.Contains(t, toolError(t, srv, other, "get_passport", `{}`), "no passport for alice in tenant other")
	assert.Contains(t, callErr(t, srv, alice, "get_passport", `{"x":1}`).Message, "get_passport: x:")
}

func TestRevokePassport(t *testing.T) {
	flags := crux.DefaultFlags()
	flags.PassportRevocation = true
	srv, _, db := newTestServer(t, withFlags(flags))
	carol := crux.Caller{Agent: "carol", Authenticated: true}
	dave := crux.Caller{Agent: "dave", Authenticated: true}
	call(t, srv, alice, "issue_passport", `{}`)
	call(t, srv, bob, "issue_passport", `{"sponsor_id":"alice"}`)
	call(t, srv, carol, "issue_passport", `{}`)
	call(t, srv, dave, "issue_passport", `{}`)

	assertNeedsIdentity(t, srv, "revoke_passport", `{}`)
	assert.Contains(t, toolError(t, srv, alice, "revoke_passport", `{"target_passport":"zed"}`), "no passport zed in tenant default")
	assert.Contains(t, toolError(t, srv, carol, "revoke_passport", `{"target_passport":"bob"}`),
		"carol may not revoke passport bob: only the passport itself, its sponsor or an elite-tier operator may")
	e := callErr(t, srv, alice, "revoke_passport", `{"reason":"`+strings.Repeat("r", 2049)+`"}`)
	assert.Equal(t, "revoke_passport: reason: longer than 2048 bytes", e.Message)

	// The sponsor may revoke.
	r := call(t, srv, alice, "revoke_passport", `{"target_passport":"bob","reason":"left"}`)
	assert.Equal(t, "bob", r["revoked"])
	assert.Equal(t, "alice", r["revoker_passport"])
	verifiesWith(t, srv, db, r["receipt_id"].(string))
	assert.Contains(t, toolError(t, srv, alice, "revoke_passport", `{"target_passport":"bob"}`),
		"passport bob was already revoked at 2026-03-01T12:00:00Z by alice; revocation is terminal")
	p := call(t, srv, bob, "get_passport", `{}`)
	assert.Equal(t, true, p["revoked"])
	assert.Equal(t, "alice", p["revoked_by"])
	rp := call(t, srv, alice, "resolve_principal", `{"passport_id":"bob"}`)["principal"].(map[string]any)
	assert.Equal(t, true, rp["revoked"])
	assert.Equal(t, "closed", rp["agent_work_gate"])

	// A revoked passport may call only get_passport and get_agent_identity.
	assert.Contains(t, toolError(t, srv, bob, "store_fact", `{"entity":"e","key":"k","value":"v"}`), "passport bob was revoked at")
	assert.Contains(t, toolError(t, srv, bob, "revoke_passport", `{}`), "passport bob was revoked at")
	assert.Equal(t, "bob", call(t, srv, bob, "get_agent_identity", `{}`)["agent_name"])

	// Self-revocation.
	r = call(t, srv, carol, "revoke_passport", `{}`)
	assert.Equal(t, "carol", r["revoked"])

	// An elite-tier operator may revoke anyone; a lower tier may not.
	earn(t, db, tenant, "dave", 1999)
	assert.Contains(t, toolError(t, srv, dave, "revoke_passport", `{"target_passport":"alice"}`), "dave may not revoke passport alice")
	earn(t, db, tenant, "dave", 1)
	r = call(t, srv, dave, "revoke_passport", `{"target_passport":"alice","reason":"audit"}`)
	assert.Equal(t, "alice", r["revoked"])
	assert.Equal(t, "dave", r["revoker_passport"])
}

func TestRequestPassportMint(t *testing.T) {
	off, _, _ := newTestServer(t)
	e := callErr(t, off, alice, "request_passport_mint", `{}`)
	assert.Equal(t, crux.CodeMethodNotFound, e.Code)
	assert.Equal(t, "unknown tool: request_passport_mint", e.Message)
	for _, tl := range off.ListTools(context.Background(), alice) {
		assert.NotEqual(t, "request_passport_mint", tl.Name, "absent while its flag is off")
	}

	flags := crux.DefaultFlags()
	flags.PassportMintRequests = true
	srv, _, db := newTestServer(t, withFlags(flags))
	var listed bool
	for _, tl := range srv.ListTools(context.Background(), alice) {
		listed = listed || tl.Name == "request_passport_mint"
	}
	assert.True(t, listed)
	assertNeedsIdentity(t, srv, "request_passport_mint", `{}`)
	e = callErr(t, srv, alice, "request_passport_mint", `{"requested_category":"vip"}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, "request_passport_mint: requested_category:")
	e = callErr(t, srv, alice, "request_passport_mint", `{"reason":"`+strings.Repeat("é", 1025)+`"}`)
	assert.Equal(t, "request_passport_mint: reason: longer than 2048 bytes", e.Message)

	first := call(t, srv, alice, "request_passport_mint", `{"reason":"for work"}`)
	assert.Equal(t, "personal", first["requested_category"], "no passport: personal")
	assert.Equal(t, "pending", first["status"])
	assert.Equal(t, "alice", first["requester_id"])
	assert.Equal(t, false, first["already_pending"])
	assert.Regexp(t, `^pmr_[0-9a-f]{32}$`, first["request_id"])
	verifiesWith(t, srv, db, first["receipt_id"].(string))

	again := call(t, srv, alice, "request_passport_mint", `{"requested_category":"public"}`)
	assert.Equal(t, true, again["already_pending"])
	assert.Equal(t, first["request_id"], again["request_id"], "one pending request per passport")

	// Another tenant's alice files her own.
	other := call(t, srv, crux.Caller{Agent: "alice", Authenticated: true, Tenant: "other"}, "request_passport_mint", `{"requested_category":"work"}`)
	assert.NotEqual(t, first["request_id"], other["request_id"])
	assert.Equal(t, "work", other["requested_category"])
	b, _ := json.Marshal(other)
	assert.NotContains(t, string(b), "for work")
}

// TestGetPassportSaysHowToGetOne: without a passport, get_passport points
// to issue_passport only where the caller may call it, and otherwise says
// what the operator would change.
func TestGetPassportSaysHowToGetOne(t *testing.T) {
	for _, tc := range []struct {
		passports bool
		want      string
	}{
		{false, "no passport for alice in tenant default; issue_passport is not granted here (denied:capability_not_permitted): " +
			"it is hosted-tier unless the operator turns on agent passports (CORECRUXD_AGENT_PASSPORTS=1)"},
		{true, "no passport for alice in tenant default; call issue_passport to get one"},
	} {
		flags := crux.DefaultFlags()
		flags.AgentPassports = tc.passports
		signer := newSigner(t)
		tok, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{Tenant: tenant, IssuedAt: time.Now(), Capabilities: crux.FreeLocalCapabilities(flags)})
		require.NoError(t, err)
		router, err := rcx.NewRouter(tok, signer.Public(), nil)
		require.NoError(t, err)
		srv, _, _ := newTestServer(t, withFlags(flags), withSigner(signer), withRouter(router))
		assert.Equal(t, tc.want, toolError(t, srv, alice, "get_passport", `{}`), "passports %v", tc.passports)
		if tc.passports {
			call(t, srv, alice, "issue_passport", `{}`) // the hint holds
		} else {
			assert.Equal(t, crux.CodeCapabilityDenied, callErr(t, srv, alice, "issue_passport", `{}`).Code)
		}
	}
}
