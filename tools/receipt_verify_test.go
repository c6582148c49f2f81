package tools_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store"
)

func TestReceiptVerifyFlagOff(t *testing.T) {
	srv, _, _ := newTestServer(t)
	id := call(t, srv, alice, "record_decision", `{"action":"a","rationale":"r"}`)["receipt_id"].(string)
	got := call(t, srv, alice, "receipt_verify", `{"receipt_id":"`+id+`"}`)
	assert.Equal(t, false, got["feature_enabled"])
	assert.Equal(t, false, got["verified"])
	assert.Equal(t, []any{"FEATURE_DISABLED"}, got["errors"])
	assert.NotContains(t, got, "report")
	assert.Nil(t, got["signer_passport"])
}

func TestReceiptVerify(t *testing.T) {
	flags := crux.DefaultFlags()
	flags.ReceiptVerify = true
	srv, _, db := newTestServer(t, withFlags(flags))
	first := call(t, srv, alice, "record_decision", `{"action":"a","rationale":"r"}`)["receipt_id"].(string)
	mid := call(t, srv, alice, "record_decision", `{"action":"b","rationale":"r"}`)["receipt_id"].(string)
	call(t, srv, bob, "record_decision", `{"action":"c","rationale":"r"}`)
	otherTenant := crux.Caller{Agent: "alice", Authenticated: true, Tenant: "other"}
	foreign := call(t, srv, otherTenant, "record_decision", `{"action":"d","rationale":"r"}`)["receipt_id"].(string)

	got := call(t, srv, alice, "receipt_verify", `{"receipt_id":"`+mid+`"}`)
	assert.Equal(t, true, got["verified"], "%v", got)
	assert.Equal(t, true, got["feature_enabled"])
	assert.Equal(t, "alice", got["signer_passport"])
	assert.Equal(t, "default", got["tenant_id"])
	assert.EqualValues(t, 200, got["http_status"])
	assert.Equal(t, []any{}, got["errors"])
	assert.Equal(t, "OK", got["report"].(map[string]any)["error_code"])
	chain := got["chain"].(map[string]any)
	assert.Equal(t, true, chain["linked"])
	assert.Len(t, chain["receipts"], 3, "the receipts before and after it")
	got = call(t, srv, alice, "receipt_verify", `{"receipt_id":"`+first+`"}`)
	assert.Equal(t, true, got["verified"])
	assert.EqualValues(t, 1, got["chain"].(map[string]any)["from_seq"])

	// Only the signer or an operator.
	assertNeedsIdentity(t, srv, "receipt_verify", `{"receipt_id":"`+mid+`"}`)
	e := callErr(t, srv, bob, "receipt_verify", `{"receipt_id":"`+mid+`"}`)
	assert.Equal(t, crux.CodeForbidden, e.Code)
	assert.Contains(t, e.Message, "only the receipt's signer passport or an operator (trusted tier or above) may verify it; bob is unverified")
	earn(t, db, tenant, "bob", 500)
	assert.Equal(t, true, call(t, srv, bob, "receipt_verify", `{"receipt_id":"`+mid+`"}`)["verified"])

	// Unknown, or another tenant's: not found; naming another tenant: -32003.
	for _, id := range []string{"r_nosuchreceipt", foreign} {
		got = call(t, srv, alice, "receipt_verify", `{"receipt_id":"`+id+`"}`)
		assert.Equal(t, []any{"RECEIPT_NOT_FOUND"}, got["errors"])
		assert.EqualValues(t, 404, got["http_status"])
		assert.Equal(t, false, got["verified"])
	}
	e = callErr(t, srv, alice, "receipt_verify", `{"receipt_id":"`+foreign+`","tenant_id":"other"}`)
	assert.Equal(t, crux.CodeForbidden, e.Code)
	assert.Equal(t, true, call(t, srv, otherTenant, "receipt_verify", `{"receipt_id":"`+foreign+`","tenant_id":"other"}`)["verified"])
	assert.Contains(t, callErr(t, srv, alice, "receipt_verify", `{}`).Message, "receipt_verify: receipt_id:")
	// tenant_id is a name (docs/limits.md): at most 1024 bytes. At the
	// limit it names another tenant than any caller's (-32003).
	e = callErr(t, srv, alice, "receipt_verify", `{"receipt_id":"r_1","tenant_id":"`+strings.Repeat("t", 1025)+`"}`)
	assert.Equal(t, "receipt_verify: tenant_id: longer than 1024 bytes", e.Message)
	assert.Equal(t, crux.CodeForbidden, callErr(t, srv, alice, "receipt_verify", `{"receipt_id":"r_1","tenant_id":"`+strings.Repeat("t", 1024)+`"}`).Code)

	// A flipped byte in the stored body is found, by the hash and by the
	// next receipt's link.
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		rec, err := tx.Get("receipts", []byte(mid))
		if err != nil {
			return err
		}
		at := bytes.Index(rec, []byte("rationale"))
		require.Positive(t, at)
		bad := bytes.Clone(rec)
		bad[at] ^= 0x01
		return tx.Put("receipts", []byte(mid), bad)
	}))
	got = call(t, srv, alice, "receipt_verify", `{"receipt_id":"`+mid+`"}`)
	assert.Equal(t, false, got["verified"])
	assert.EqualValues(t, 422, got["http_status"])
	assert.Equal(t, []any{"BODY_HASH_MISMATCH", "CHAIN_PREV_HASH_MISMATCH"}, got["errors"])
}
