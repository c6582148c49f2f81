package receipts_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
)

// refusalPayload stands for a refusal's payload.
type refusalPayload struct {
	Capability string `cbor:"capability"`
	ReasonCode string `cbor:"reason_code"`
}

// coalesce runs one AppendCoalesced with a window of a minute.
func coalesce(tb testing.TB, db store.Backend, s receipts.Signer, tenant, kind, actor string, payload any, now time.Time) receipts.Coalesced {
	tb.Helper()
	var c receipts.Coalesced
	require.NoError(tb, db.Update(context.Background(), func(tx store.Tx) error {
		var err error
		c, err = receipts.AppendCoalesced(tx, s, tenant, kind, actor, payload, now, time.Minute)
		return err
	}))
	return c
}

// kinds returns the kinds of tenant's chain, in seq order.
func kinds(tb testing.TB, db store.Backend, tenant string) []string {
	tb.Helper()
	var out []string
	for _, r := range chainOf(tb, db, tenant, 0) {
		out = append(out, r.Kind)
	}
	return out
}

func summaryOf(tb testing.TB, r *receipts.Receipt) receipts.Summary {
	tb.Helper()
	var sum receipts.Summary
	require.NoError(tb, r.Payload(&sum))
	return sum
}

func TestAppendCoalescedWithinWindow(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	p := refusalPayload{Capability: "crux-mcp.sync_pull", ReasonCode: "denied:capability_not_permitted"}

	first := coalesce(t, db, s, "acme", "refusal", "alice", p, testNow)
	assert.Equal(t, uint64(1), first.Count)
	assert.Equal(t, testNow, first.WindowStart)
	assert.Equal(t, testNow.Add(time.Minute), first.WindowEnd)
	h, err := first.Receipt.Header()
	require.NoError(t, err)
	assert.Equal(t, testNow, h.CreatedAt, "the window starts when its receipt was created")

	const n = 1000
	var last receipts.Coalesced
	for i := 1; i < n; i++ {
		last = coalesce(t, db, s, "acme", "refusal", "alice", p, testNow.Add(time.Duration(i)*50*time.Millisecond))
		require.Equal(t, first.Receipt, last.Receipt, "call %d", i)
	}
	assert.Equal(t, uint64(n), last.Count)
	assert.Equal(t, first.WindowStart, last.WindowStart)
	assert.Equal(t, first.WindowEnd, last.WindowEnd)
	assert.Equal(t, []string{"refusal"}, kinds(t, db, "acme"), "one stored receipt for %d identical appends", n)

	kr := receipts.NewKeyring(s.Public())
	assert.True(t, receipts.Verify(last.Receipt, kr, testNow).OK())
	a := audit(t, db, "acme", kr)
	assert.True(t, a.OK(), a.ErrorMessage)
}

func TestAppendCoalescedKeepsDifferentAppendsApart(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	p := refusalPayload{Capability: "crux-mcp.sync_pull", ReasonCode: "denied:capability_not_permitted"}
	base := coalesce(t, db, s, "acme", "refusal", "alice", p, testNow)

	for name, c := range map[string]func(now time.Time) receipts.Coalesced{
		"another actor": func(now time.Time) receipts.Coalesced {
			return coalesce(t, db, s, "acme", "refusal", "bob", p, now)
		},
		"another capability": func(now time.Time) receipts.Coalesced {
			return coalesce(t, db, s, "acme", "refusal", "alice", refusalPayload{Capability: "crux-mcp.sync_push", ReasonCode: p.ReasonCode}, now)
		},
		"another reason": func(now time.Time) receipts.Coalesced {
			return coalesce(t, db, s, "acme", "refusal", "alice", refusalPayload{Capability: p.Capability, ReasonCode: "denied:token_expired"}, now)
		},
		"another kind": func(now time.Time) receipts.Coalesced {
			return coalesce(t, db, s, "acme", "refusal2", "alice", p, now)
		},
		"another tenant": func(now time.Time) receipts.Coalesced {
			return coalesce(t, db, s, "globex", "refusal", "alice", p, now)
		},
	} {
		got := c(testNow.Add(time.Second))
		assert.Equal(t, uint64(1), got.Count, name)
		assert.NotEqual(t, base.Receipt.ID, got.Receipt.ID, name)
		again := c(testNow.Add(2 * time.Second))
		assert.Equal(t, got.Receipt.ID, again.Receipt.ID, name)
		assert.Equal(t, uint64(2), again.Count, name)
	}
	assert.Len(t, chainOf(t, db, "acme", 0), 5)
	assert.Len(t, chainOf(t, db, "globex", 0), 1)
	assert.Equal(t, uint64(2), coalesce(t, db, s, "acme", "refusal", "alice", p, testNow.Add(3*time.Second)).Count,
		"the other appends did not count in alice's window")
}

func TestAppendCoalescedAfterWindow(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	kr := receipts.NewKeyring(s.Public())
	p := refusalPayload{Capability: "crux-mcp.sync_pull", ReasonCode: "denied:capability_not_permitted"}

	first := coalesce(t, db, s, "acme", "refusal", "alice", p, testNow)
	coalesce(t, db, s, "acme", "refusal", "alice", p, testNow.Add(10*time.Second))
	lastIn := testNow.Add(time.Minute - time.Nanosecond)
	assert.Equal(t, uint64(3), coalesce(t, db, s, "acme", "refusal", "alice", p, lastIn).Count, "the window's last instant")

	// The window ends: the next identical append retires it, with a
	// summary signing its count, and opens a new one.
	after := testNow.Add(time.Minute)
	next := coalesce(t, db, s, "acme", "refusal", "alice", p, after)
	assert.Equal(t, uint64(1), next.Count)
	assert.NotEqual(t, first.Receipt.ID, next.Receipt.ID)
	assert.Equal(t, after, next.WindowStart)
	rs := chainOf(t, db, "acme", 0)
	require.Equal(t, []string{"refusal", "refusal_summary", "refusal"}, kinds(t, db, "acme"))
	assert.Equal(t, next.Receipt.ID, rs[2].ID)
	sum := summaryOf(t, rs[1])
	assert.Equal(t, receipts.Summary{
		ReceiptID: first.Receipt.ID, Kind: "refusal", Count: 3,
		WindowStart: "2026-03-14T15:09:26.535897932Z", WindowEnd: "2026-03-14T15:10:26.535897932Z",
		LastAt: "2026-03-14T15:10:26.535897931Z",
	}, sum)
	h, err := rs[1].Header()
	require.NoError(t, err)
	assert.Equal(t, "alice", h.Actor)
	assert.Equal(t, after, h.CreatedAt)

	// A window of one has no summary.
	coalesce(t, db, s, "acme", "refusal", "alice", p, after.Add(time.Hour))
	assert.Equal(t, []string{"refusal", "refusal_summary", "refusal", "refusal"}, kinds(t, db, "acme"))

	// A clock gone back does not count in a window that has not started.
	back := coalesce(t, db, s, "acme", "refusal", "alice", p, testNow)
	assert.Equal(t, uint64(1), back.Count)
	assert.Len(t, chainOf(t, db, "acme", 0), 5)

	for _, r := range chainOf(t, db, "acme", 0) {
		assert.True(t, receipts.Verify(r, kr, testNow).OK(), r.Kind)
	}
	a := audit(t, db, "acme", kr)
	assert.True(t, a.OK(), a.ErrorMessage)
	assert.Equal(t, uint64(5), a.Receipts)
}

func TestAppendCoalescedSweepsEndedWindows(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	// Ten callers each refused twice; then they stop.
	actors := []string{"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9"}
	for _, a := range actors {
		coalesce(t, db, s, "acme", "refusal", a, nil, testNow)
		coalesce(t, db, s, "acme", "refusal", a, nil, testNow.Add(time.Second))
	}
	coalesce(t, db, s, "globex", "refusal", "g", nil, testNow)
	coalesce(t, db, s, "globex", "refusal", "g", nil, testNow)
	require.Len(t, chainOf(t, db, "acme", 0), 10)

	// Another caller's refusal after the windows ended retires eight of
	// them, each with its summary, before its own receipt; the next
	// retires the rest. Other tenants' windows are left alone.
	later := testNow.Add(2 * time.Minute)
	coalesce(t, db, s, "acme", "refusal", "z", nil, later)
	ks := kinds(t, db, "acme")
	require.Len(t, ks, 10+8+1)
	for _, k := range ks[10:18] {
		assert.Equal(t, "refusal_summary", k)
	}
	assert.Equal(t, "refusal", ks[18])
	coalesce(t, db, s, "acme", "refusal", "y", nil, later)
	rs := chainOf(t, db, "acme", 0)
	require.Len(t, rs, 10+8+1+2+1)
	summarised := map[string]uint64{}
	for _, r := range rs {
		if r.Kind == "refusal_summary" {
			sum := summaryOf(t, r)
			summarised[sum.ReceiptID] = sum.Count
		}
	}
	require.Len(t, summarised, 10, "every ended window summarised once")
	for _, r := range rs[:10] {
		assert.Equal(t, uint64(2), summarised[r.ID])
	}
	assert.Len(t, chainOf(t, db, "globex", 0), 1)
	a := audit(t, db, "acme", receipts.NewKeyring(s.Public()))
	assert.True(t, a.OK(), a.ErrorMessage)
}

func TestAppendCoalescedErrors(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	for name, tc := range map[string]struct {
		s      receipts.Signer
		tenant string
		kind   string
		window time.Duration
		want   string
	}{
		"zero window": {s, "acme", "refusal", 0, "window"},
		"nil signer":  {nil, "acme", "refusal", time.Minute, "nil signer"},
		"empty kind":  {s, "acme", "", time.Minute, "empty kind"},
		"NUL tenant":  {s, "a\x00", "refusal", time.Minute, "NUL"},
	} {
		err := db.Update(context.Background(), func(tx store.Tx) error {
			_, err := receipts.AppendCoalesced(tx, tc.s, tc.tenant, tc.kind, "alice", nil, testNow, tc.window)
			return err
		})
		assert.ErrorContains(t, err, tc.want, name)
	}
	assert.Empty(t, chainOf(t, db, "acme", 0))
}
