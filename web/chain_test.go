package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/tools"
	"github.com/crux-go/crux/web"
)

// chainIDs returns the ids of tenant's receipts, oldest first.
func chainIDs(t *testing.T, db store.Backend, tenant string) []string {
	t.Helper()
	var ids []string
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		return receipts.Chain(tx, tenant, 1, func(r *receipts.Receipt) error {
			ids = append(ids, r.ID)
			return nil
		})
	}))
	return ids
}

// tamper changes one byte of the body of receipt id, as stored, leaving
// its record readable: the body no longer has the hash it was signed
// with.
func tamper(t *testing.T, db store.Backend, id string) {
	t.Helper()
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		r, err := receipts.Get(tx, id)
		if err != nil {
			return err
		}
		raw, err := tx.Get("receipts", []byte(id))
		if err != nil {
			return err
		}
		raw = bytes.Clone(raw)
		at := bytes.Index(raw, r.Body)
		require.GreaterOrEqual(t, at, 0, "the body is in the record")
		raw[at+len(r.Body)-1] ^= 0x01 // the last byte of the payload
		return tx.Put("receipts", []byte(id), raw)
	}))
}

// forgetSome mints receipts in alice's tenant: a forget of an entity.
func forgetSome(t *testing.T, f *fixture, entity string) {
	t.Helper()
	call[tools.StoreFactOutput](t, f.srv, alice, "store_fact", map[string]any{"entity": entity, "key": "k", "value": "v"})
	call[tools.MemoryForgetOutput](t, f.srv, alice, "memory_forget", map[string]any{
		"scope": map[string]any{"type": "entity_prefix", "value": entity}, "reason": "receipts for the chain"})
}

func chainPage(t *testing.T, f *fixture, path, token string) web.ChainPage {
	t.Helper()
	code, _, body := f.get(t, path, token, "application/json")
	require.Equal(t, http.StatusOK, code, body)
	var p web.ChainPage
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	return p
}

func TestReceiptsPageVerifies(t *testing.T) {
	f := newFixture(t, lookup)
	for _, e := range []string{"chain:a", "chain:b", "chain:c"} {
		forgetSome(t, f, e)
	}
	ids := chainIDs(t, f.db, crux.DefaultTenant)
	require.NotEmpty(t, ids)

	p := chainPage(t, f, "/ui/receipts?audit=1", "root-token")
	require.Equal(t, uint64(len(ids)), p.HeadSeq)
	require.Len(t, p.Rows, min(len(ids), web.ChainPerPage))
	require.Equal(t, ids[len(ids)-1], p.Rows[0].ReceiptID, "newest first")
	require.Zero(t, p.Failing)
	for _, r := range p.Rows {
		require.True(t, r.OK(), "%+v", r)
	}
	require.NotNil(t, p.Audit)
	require.True(t, p.Audit.OK(), "%+v", p.Audit)

	// Tamper with the second receipt: it fails on its own, the third's
	// link to it fails, and the audit names its seq.
	tamper(t, f.db, ids[1])
	p = chainPage(t, f, "/ui/receipts?audit=1", "root-token")
	byseq := map[uint64]web.ReceiptRow{}
	for _, r := range p.Rows {
		byseq[r.Seq] = r
	}
	require.Equal(t, receipts.BodyHashMismatch, byseq[2].Code, "%+v", byseq[2])
	require.Equal(t, receipts.ChainPrevHashMismatch, byseq[3].Code, "%+v", byseq[3])
	require.True(t, byseq[1].OK())
	require.Equal(t, 2, p.Failing)
	require.False(t, p.Audit.OK())
	require.Equal(t, uint64(2), p.Audit.ErrorSeq)
	require.Equal(t, receipts.BodyHashMismatch, p.Audit.ErrorCode)
	require.Contains(t, p.AuditAt, "#seq-2")

	// The HTML page says so too.
	code, _, body := f.get(t, "/ui/receipts?audit=1", "root-token", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `id="seq-2" class="receipt failing" data-code="BODY_HASH_MISMATCH"`)
	require.Contains(t, body, "The whole chain fails at seq")
}

func TestReceiptsPaged(t *testing.T) {
	f := newFixture(t, lookup)
	for i := 0; len(chainIDs(t, f.db, crux.DefaultTenant)) <= web.ChainPerPage; i++ {
		forgetSome(t, f, "page:"+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	ids := chainIDs(t, f.db, crux.DefaultTenant)
	seen := map[string]bool{}
	path := "/ui/receipts"
	for pages := 0; path != ""; pages++ {
		require.Less(t, pages, 3)
		p := chainPage(t, f, path, "root-token")
		require.LessOrEqual(t, len(p.Rows), web.ChainPerPage)
		for _, r := range p.Rows {
			require.False(t, seen[r.ReceiptID])
			seen[r.ReceiptID] = true
			require.True(t, r.OK(), "%+v", r)
		}
		path = p.Next
	}
	require.Len(t, seen, len(ids))

	for _, bad := range []string{"before=x", "before=1", "before=-3"} {
		code, _, _ := f.get(t, "/ui/receipts?"+bad, "alice-token", "application/json")
		require.Equal(t, http.StatusBadRequest, code, bad)
	}
}

func TestReceiptsOfTheCallersTenant(t *testing.T) {
	f := newFixture(t, lookup)
	forgetSome(t, f, "chain:a")
	carol := crux.Caller{Agent: "carol", Authenticated: true, Tenant: "acme"}
	tokens["carol-token"] = carol
	t.Cleanup(func() { delete(tokens, "carol-token") })
	code, _, body := f.get(t, "/ui/receipts", "carol-token", "application/json")
	require.Equal(t, http.StatusOK, code, body)
	var p web.ChainPage
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	require.Equal(t, "acme", p.TenantID)
	require.Empty(t, p.Rows, "another tenant's chain is not carol's")
	code, _, _ = f.get(t, "/ui/receipts", "", "application/json")
	require.Equal(t, http.StatusUnauthorized, code)
}
