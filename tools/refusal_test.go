package tools_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// refusal is what a -32030 answer says about its receipt and its window.
type refusal struct {
	receiptID, keyID, signature string
	count                       float64
	startedAt, endsAt           string
}

// refused calls name as c, which the router must refuse, and returns what
// the answer says of the refusal.
func refused(t testing.TB, srv *crux.Server, c crux.Caller, name string) refusal {
	t.Helper()
	e := callErr(t, srv, c, name, `{}`)
	require.Equal(t, crux.CodeCapabilityDenied, e.Code, e.Message)
	var data struct {
		ReceiptError   *string `json:"receipt_error"`
		RefusalReceipt struct {
			ReceiptID string `json:"receipt_id"`
			KeyID     string `json:"key_id"`
			Signature string `json:"signature"`
		} `json:"refusal_receipt"`
		RefusalWindow struct {
			Count     float64 `json:"count"`
			StartedAt string  `json:"started_at"`
			EndsAt    string  `json:"ends_at"`
		} `json:"refusal_window"`
	}
	decode(t, e.Data, &data)
	require.Nil(t, data.ReceiptError)
	rr, w := data.RefusalReceipt, data.RefusalWindow
	return refusal{
		receiptID: rr.ReceiptID, keyID: rr.KeyID, signature: rr.Signature,
		count: w.Count, startedAt: w.StartedAt, endsAt: w.EndsAt,
	}
}

// auditDefault audits the default tenant's chain with srv's keyring.
func auditDefault(t testing.TB, srv *crux.Server, db store.Backend) receipts.ChainAudit {
	t.Helper()
	var a receipts.ChainAudit
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		var err error
		a, err = receipts.AuditChain(tx, tenant, srv.Keyring(), time.Now())
		return err
	}))
	return a
}

func TestIdenticalRefusalsShareOneReceipt(t *testing.T) {
	signer, _, router := freeLocal(t)
	srv, clk, db := newTestServer(t, withSigner(signer), withRouter(router))

	first := refused(t, srv, alice, "sync_pull")
	assert.Equal(t, refusal{
		receiptID: first.receiptID, keyID: signer.KeyID(), signature: first.signature, count: 1,
		startedAt: "2026-03-01T12:00:00Z", endsAt: "2026-03-01T12:01:00Z",
	}, first)

	// 10,000 identical refusals within the window: one stored receipt,
	// each answer naming it with the count so far.
	const n = 10_000
	last := first
	for i := 2; i <= n; i++ {
		clk.Advance(5 * time.Millisecond) // 50 s in all: within the minute
		last = refused(t, srv, alice, "sync_pull")
		if last.receiptID != first.receiptID || last.count != float64(i) {
			require.Failf(t, "refusal not coalesced", "call %d: %+v, first %+v", i, last, first)
		}
	}
	assert.Equal(t, first.signature, last.signature)
	assert.Equal(t, first.startedAt, last.startedAt)
	assert.Equal(t, 1, receiptCount(t, db), "%d identical refusals store one receipt", n)
	r := getReceipt(t, db, first.receiptID)
	assert.Equal(t, "refusal", r.Kind)
	assert.True(t, receipts.Verify(r, srv.Keyring(), time.Now()).OK())

	// Other callers, tools and tenants are not merged with alice's.
	other := map[string]refusal{
		"bob":           refused(t, srv, bob, "sync_pull"),
		"anonymous":     refused(t, srv, anon, "sync_pull"),
		"another tool":  refused(t, srv, alice, "sync_push"),
		"another scope": refused(t, srv, crux.Caller{Agent: "alice", Authenticated: true, Tenant: "globex"}, "sync_pull"),
	}
	seen := map[string]bool{first.receiptID: true}
	for name, o := range other {
		assert.Equal(t, float64(1), o.count, name)
		assert.False(t, seen[o.receiptID], "%s shares a receipt", name)
		seen[o.receiptID] = true
	}
	assert.Equal(t, 4, receiptCount(t, db), "alice, bob, anonymous and alice's sync_push in the default tenant")

	// After the window, the next refusal retires it (a summary signs its
	// count) and mints a new receipt.
	clk.Advance(toolkit.RefusalWindow)
	next := refused(t, srv, alice, "sync_pull")
	assert.NotEqual(t, first.receiptID, next.receiptID)
	assert.Equal(t, float64(1), next.count)
	var summary *receipts.Receipt
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		return receipts.Chain(tx, tenant, 0, func(r *receipts.Receipt) error {
			if r.Kind == "refusal_summary" {
				var s receipts.Summary
				require.NoError(t, r.Payload(&s))
				if s.ReceiptID == first.receiptID {
					summary = r
					assert.Equal(t, uint64(n), s.Count)
					assert.Equal(t, "refusal", s.Kind)
				}
			}
			return nil
		})
	}))
	require.NotNil(t, summary, "a summary signs the count of alice's window")
	h, err := summary.Header()
	require.NoError(t, err)
	assert.Equal(t, "alice", h.Actor)
	// The window records of bob, anonymous and sync_push were retired too;
	// windows of one have no summary.
	assert.Equal(t, 6, receiptCount(t, db), "4 windows' receipts, alice's summary, alice's new receipt")

	a := auditDefault(t, srv, db)
	assert.True(t, a.OK(), "%s at seq %d: %s", a.ErrorCode, a.ErrorSeq, a.ErrorMessage)
	assert.Equal(t, uint64(6), a.Receipts)
}
