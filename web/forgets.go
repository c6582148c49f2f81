package web

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/tools"
)

// MaxForgets is the most forgets of a tenant the forgets page reads,
// newest first.
const MaxForgets = 1000

// MaxForgetScan is the most receipts of a tenant's chain the forgets page
// reads, newest first, looking for forget receipts: a forget older than
// them is not listed (the page says the list is truncated), though its
// own page (forgets/ID) still shows it.
const MaxForgetScan = 5000

// pinsRead is how many of the caller's current facts memory_view reads
// for the pins of the forgets page (its top_k maximum).
const pinsRead = 500

// ForgetRow is one forget of a tenant, as its record says.
type ForgetRow struct {
	ForgetReceiptID      string            `json:"forget_receipt_id"`
	TenantID             string            `json:"tenant_id"`
	PassportID           string            `json:"passport_id"` // who forgot
	InitiatedAt          string            `json:"initiated_at"`
	Scope                store.ForgetScope `json:"scope"`
	Reason               string            `json:"reason,omitempty"`
	FactCount            int               `json:"fact_count"`
	State                string            `json:"state"` // forgotten, restored or purged
	RecoveryWindowEndsAt string            `json:"recovery_window_ends_at"`
	RestoredAt           string            `json:"restored_at,omitempty"`
	RestoreReceiptID     string            `json:"restore_receipt_id,omitempty"`
	PurgedAt             string            `json:"purged_at,omitempty"`
	PurgeReceiptID       string            `json:"purge_receipt_id,omitempty"`
}

// ForgetList is a tenant's forgets, newest first.
type ForgetList struct {
	Forgets []ForgetRow `json:"forgets"`
	// Truncated says that the tenant has more forgets than were read.
	Truncated bool `json:"truncated,omitempty"`
	// ScanStopped says that the list stopped after reading as many
	// receipts of the chain as it was allowed to (see [Ledger.Forgets]):
	// older forgets, if any, are not in it.
	ScanStopped bool `json:"scan_stopped,omitempty"`
}

// Forgets lists up to limit (at most MaxForgets) forgets of tenant,
// newest first: the forget receipts of its chain, each with the record
// of its forget, among the newest scan receipts of the chain (0: the
// whole chain).
func (l storeLedger) Forgets(ctx context.Context, tenant string, limit, scan int) (*ForgetList, error) {
	limit = min(max(limit, 1), MaxForgets)
	out := &ForgetList{Forgets: []ForgetRow{}}
	err := l.db.View(ctx, func(tx store.Tx) error {
		out.Forgets, out.Truncated, out.ScanStopped = out.Forgets[:0], false, false
		read := 0
		return receipts.ChainNewestFirst(tx, tenant, func(r *receipts.Receipt) error {
			if scan > 0 && read == scan {
				out.ScanStopped = true
				return store.ErrStop
			}
			read++
			if r.Kind != "forget" {
				return nil
			}
			if len(out.Forgets) == limit {
				out.Truncated = true
				return store.ErrStop
			}
			rec, err := store.GetForget(tx, r.ID)
			if err != nil {
				return fmt.Errorf("forget %s: %w", r.ID, err)
			}
			f := ForgetRow{
				ForgetReceiptID: rec.ID, TenantID: rec.Tenant, PassportID: rec.Passport, Scope: rec.Scope, Reason: rec.Reason,
				FactCount: rec.FactCount, State: rec.State,
				InitiatedAt:          rec.InitiatedAt.UTC().Format(time.RFC3339Nano),
				RecoveryWindowEndsAt: rec.WindowEndsAt.UTC().Format(time.RFC3339Nano),
				RestoreReceiptID:     rec.RestoreReceipt, PurgeReceiptID: rec.PurgeReceipt,
			}
			if rec.RestoredAt != nil {
				f.RestoredAt = rec.RestoredAt.UTC().Format(time.RFC3339Nano)
			}
			if rec.PurgedAt != nil {
				f.PurgedAt = rec.PurgedAt.UTC().Format(time.RFC3339Nano)
			}
			out.Forgets = append(out.Forgets, f)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ForgetsPage is the forgets page and its JSON twin: the caller's own
// forgets with their recovery windows and purge status, and the facts it
// pinned, which a forget leaves alone.
type ForgetsPage struct {
	Forgets []ForgetStatusRow `json:"forgets"`
	// AllOfTenant says that the list holds every forget of the tenant,
	// whoever made it, as an operator of the view sees them; otherwise it
	// holds the caller's own (none for an anonymous caller).
	AllOfTenant bool `json:"all_of_tenant,omitempty"`
	// Truncated says that only the tenant's newest MaxForgets forgets,
	// among the newest MaxForgetScan receipts of its chain, were read:
	// older ones are not listed.
	Truncated bool `json:"truncated,omitempty"`
	// Pins are the caller's pinned facts among the current facts
	// memory_view ranks first (at most 500).
	Pins []tools.PanelFact `json:"pins"`
	// PinsTruncated says that memory_view had more current facts than it
	// read, so pins further down are not listed.
	PinsTruncated bool `json:"pins_truncated,omitempty"`
}

// ForgetStatusRow is a forget and its purge status.
type ForgetStatusRow struct {
	ForgetRow
	// Status says what becomes of the forgotten values: restorable until
	// the window ends, purge due once it has, restored, or purged.
	Status string `json:"status"`
	// Restorable says whether the view can restore it now.
	Restorable bool `json:"restorable"`
}

// status is the purge status of f at now.
func status(f ForgetRow, now time.Time) (string, bool) {
	switch f.State {
	case store.ForgetForgotten:
		end, err := time.Parse(time.RFC3339Nano, f.RecoveryWindowEndsAt)
		if err == nil && !now.Before(end) {
			return "purge due since " + f.RecoveryWindowEndsAt, false
		}
		return "restorable until " + f.RecoveryWindowEndsAt + "; purged after", true
	case store.ForgetRestored:
		return "restored at " + f.RestoredAt, false
	case store.ForgetPurged:
		return "purged at " + f.PurgedAt + ", receipt " + f.PurgeReceiptID, false
	}
	return f.State, false
}

// forgets is the forgets page: the caller's forgets in its tenant (the
// Ledger's list of the newest MaxForgetScan receipts, kept to those the
// caller made; an operator's, all of them) and its pins (memory_view).
func (h *Handler) forgets(w http.ResponseWriter, r *http.Request) {
	l := h.opts.Ledger
	if l == nil {
		h.fail(w, r, http.StatusNotFound, noLedger)
		return
	}
	c := callerOf(r.Context())
	op := isOperator(r.Context())
	list, err := l.Forgets(r.Context(), c.TenantID(), MaxForgets, MaxForgetScan)
	if err != nil {
		h.internal(w, r, "reading the forgets", err)
		return
	}
	p := ForgetsPage{Forgets: []ForgetStatusRow{}, AllOfTenant: op, Truncated: list.Truncated || list.ScanStopped, Pins: []tools.PanelFact{}}
	now := h.opts.Now()
	for _, f := range list.Forgets {
		if !mayRestore(c, op, f.TenantID, f.PassportID) {
			continue
		}
		st, ok := status(f, now)
		p.Forgets = append(p.Forgets, ForgetStatusRow{ForgetRow: f, Status: st, Restorable: ok && h.opts.Operator != nil})
	}
	var view tools.MemoryViewOutput
	if !h.call(w, r, "memory_view", map[string]any{"top_k": pinsRead, "token_budget": 1 << 30}, &view) {
		return
	}
	for _, f := range view.Facts {
		if f.Pinned {
			p.Pins = append(p.Pins, f)
		}
	}
	p.PinsTruncated = view.Returned >= pinsRead || view.TruncatedByTokenBudget
	h.render(w, r, http.StatusOK, "forgets", "Forgets", p)
}
