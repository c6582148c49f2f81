package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"lukechampine.com/blake3"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
)

// ChainPerPage is how many receipts a page of the receipt chain shows.
const ChainPerPage = 50

// MaxChainScan is the most receipts a page of one actor's receipts reads
// (see [Ledger.ChainPage]): past it the page stops, says so (Truncated),
// and its Next link goes on from where it stopped.
const MaxChainScan = 2000

// A Ledger reads a tenant's receipt chain for the view, which no tool
// lists: a page of it, each receipt verified, the audit of the whole
// chain, the forgets it records, and handoffs. [NewStoreLedger] makes one over a store.
type Ledger interface {
	// ChainPage returns up to limit receipts of tenant's chain whose seq
	// is below before (0: from the head down), newest first, each
	// verified on its own and against the receipt before it. A non-empty
	// actor keeps only the receipts whose header names that actor, among
	// at most MaxChainScan receipts read below before.
	ChainPage(ctx context.Context, tenant, actor string, before uint64, limit int) (*ChainPage, error)
	// AuditChain verifies tenant's whole chain, as `crux verify chain`
	// does: every receipt, every link and the head, stopping at the
	// first defect.
	AuditChain(ctx context.Context, tenant string) (receipts.ChainAudit, error)
	// Forgets lists up to limit (1 to MaxForgets) forgets of tenant,
	// newest first: the forget receipts of its chain, each with the
	// record of its forget, among the newest scan receipts of the chain
	// (0: all of them; the view passes MaxForgetScan).
	Forgets(ctx context.Context, tenant string, limit, scan int) (*ForgetList, error)
	// Handoffs lists up to limit (1 to MaxHandoffs) handoffs of tenant
	// that agent created, that are addressed to it, or that are addressed
	// to no one, in id order.
	Handoffs(ctx context.Context, tenant, agent string, limit int) (*HandoffList, error)
}

// noLedger is the refusal of a page that needs a Ledger.
var noLedger = &crux.Error{Code: crux.CodeMethodNotFound, Message: "this view cannot read the receipt chain or the forgets (no ledger)"}

// ChainPage is a page of a tenant's receipt chain and the JSON twin of
// the receipts page.
type ChainPage struct {
	TenantID string `json:"tenant_id"`
	// Actor, when set, is the only actor whose receipts the page shows:
	// the signed-in caller's, unless it is an operator, who sees every
	// receipt of its tenant.
	Actor string `json:"actor,omitempty"`
	// Truncated says that a page of one actor's receipts stopped after
	// reading MaxChainScan receipts, down to seq ScannedFrom, with fewer
	// rows than a page holds: older receipts of the actor may be on the
	// Next page.
	Truncated bool `json:"truncated,omitempty"`
	// ScannedFrom is the lowest seq a page of one actor's receipts read.
	ScannedFrom uint64 `json:"scanned_from,omitempty"`
	// Operator says that the signed-in caller is an operator of the
	// view, who sees the whole chain and may audit it.
	Operator bool `json:"operator,omitempty"`
	// HeadSeq is the seq the chain head names (0: no receipts).
	HeadSeq uint64       `json:"head_seq"`
	Rows    []ReceiptRow `json:"rows"`
	// Failing counts the rows of this page that do not verify.
	Failing int `json:"failing"`
	// Older is the seq to pass as before for the next, older page; 0
	// when this page reaches seq 1.
	Older uint64 `json:"older,omitempty"`
	// Audit is the audit of the whole chain, when the page asked for it
	// (audit=1).
	Audit *receipts.ChainAudit `json:"audit,omitempty"`
	// AuditAt is the URL of the page holding the receipt where the audit
	// found the first defect.
	AuditAt string `json:"audit_at,omitempty"`
	// Next and Prev are the URLs of the older and newer pages (for a
	// page of one actor's receipts, Prev is its newest page).
	Next string `json:"next,omitempty"`
	Prev string `json:"prev,omitempty"`
}

// ReceiptRow is one receipt of a [ChainPage]: what its header says and
// how it verified. The payload is not shown: a receipt of the tenant may
// describe another agent's private memory.
type ReceiptRow struct {
	Seq       uint64 `json:"seq"`
	ReceiptID string `json:"receipt_id"`
	Kind      string `json:"kind"`
	Actor     string `json:"actor,omitempty"`
	CreatedAt string `json:"created_at,omitempty"`
	// Code is receipts.OK when the receipt verifies on its own (body hash,
	// signature, key, header) and links to the receipt before it;
	// otherwise the code of what failed: a receipt code such as
	// BODY_HASH_MISMATCH, or a chain code such as
	// CHAIN_PREV_HASH_MISMATCH.
	Code receipts.Code `json:"code"`
	// Message says what failed.
	Message string `json:"message,omitempty"`
}

// OK reports whether the row verified.
func (r ReceiptRow) OK() bool { return r.Code == receipts.OK }

// NewStoreLedger returns the Ledger of the receipts in db, verified with
// kr at the time now gives (nil: time.Now).
func NewStoreLedger(db store.Backend, kr *receipts.Keyring, now func() time.Time) Ledger {
	if now == nil {
		now = time.Now
	}
	return storeLedger{db: db, kr: kr, now: now}
}

type storeLedger struct {
	db  store.Backend
	kr  *receipts.Keyring
	now func() time.Time
}

func (l storeLedger) AuditChain(ctx context.Context, tenant string) (receipts.ChainAudit, error) {
	var a receipts.ChainAudit
	err := l.db.View(ctx, func(tx store.Tx) error {
		var err error
		a, err = receipts.AuditChain(tx, tenant, l.kr, l.now())
		return err
	})
	return a, err
}

func (l storeLedger) ChainPage(ctx context.Context, tenant, actor string, before uint64, limit int) (*ChainPage, error) {
	limit = min(max(limit, 1), ChainPerPage)
	p := &ChainPage{TenantID: tenant, Actor: actor, Rows: []ReceiptRow{}}
	now := l.now()
	err := l.db.View(ctx, func(tx store.Tx) error {
		head, _, err := receipts.ChainHead(tx, tenant)
		if err != nil {
			return err
		}
		p.HeadSeq = head
		top := head
		if before != 0 && before-1 < top {
			top = before - 1
		}
		if top == 0 {
			return nil
		}
		span := uint64(limit)
		if actor != "" {
			span = MaxChainScan
		}
		from := uint64(1)
		if top > span {
			from = top - span + 1
		}
		// The receipt before the page too, to check the first one's link.
		var prev *receipts.Receipt
		var kept []pair // of actor's, the newest limit of them
		err = receipts.Chain(tx, tenant, max(from-1, 1), func(r *receipts.Receipt) error {
			if r.Seq > top {
				return store.ErrStop
			}
			if r.Seq >= from && (actor == "" || actorOf(r) == actor) {
				kept = append(kept, pair{r, prev})
				if len(kept) > 2*limit {
					kept = append(kept[:0], kept[len(kept)-limit:]...)
				}
			}
			prev = r
			return nil
		})
		more := len(kept) > limit // of actor's, below the page
		kept = kept[max(len(kept)-limit, 0):]
		var rows []ReceiptRow
		for _, k := range kept {
			rows = append(rows, l.row(k.r, k.prev, now))
		}
		if err != nil {
			// An unreadable record ends the walk: say where.
			rows = append(rows, ReceiptRow{Seq: lastSeq(rows, from) + 1, Code: receipts.ChainRecordUnreadable, Message: err.Error()})
		}
		for i := len(rows) - 1; i >= 0; i-- {
			p.Rows = append(p.Rows, rows[i])
			if !rows[i].OK() {
				p.Failing++
			}
		}
		switch {
		case more:
			p.Older = kept[0].r.Seq
		case from > 1:
			p.Older = from
		}
		if actor != "" {
			p.ScannedFrom = from
			p.Truncated = !more && from > 1
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// pair is a receipt and the one read before it.
type pair struct{ r, prev *receipts.Receipt }

// actorOf is the actor r's header names, or "" when it cannot be read.
func actorOf(r *receipts.Receipt) string {
	h, err := r.Header()
	if err != nil {
		return ""
	}
	return h.Actor
}

// lastSeq is the seq of the last row, or from-1 when there is none.
func lastSeq(rows []ReceiptRow, from uint64) uint64 {
	if len(rows) == 0 {
		return from - 1
	}
	return rows[len(rows)-1].Seq
}

// row verifies r on its own with the ledger's keyring, then its link to
// prev, the receipt read before it (nil when r is the first read).
func (l storeLedger) row(r, prev *receipts.Receipt, now time.Time) ReceiptRow {
	row := ReceiptRow{Seq: r.Seq, ReceiptID: r.ID, Kind: r.Kind, Code: receipts.OK}
	h, herr := r.Header()
	if herr == nil {
		row.Actor, row.CreatedAt = h.Actor, h.CreatedAt.UTC().Format(time.RFC3339)
	}
	if rep := receipts.Verify(r, l.kr, now); !rep.OK() {
		row.Code, row.Message = rep.ErrorCode, rep.ErrorMessage
		return row
	}
	if herr != nil {
		row.Code, row.Message = receipts.ChainRecordMismatch, herr.Error()
		return row
	}
	switch {
	case r.Seq == 1:
		if !bytes.Equal(h.PrevHash, make([]byte, receipts.HashSize)) {
			row.Code, row.Message = receipts.ChainPrevHashMismatch, "the first receipt's prev_hash is not zero"
		}
	case prev == nil || prev.Seq != r.Seq-1:
		row.Code, row.Message = receipts.ChainGap, fmt.Sprintf("gap: no receipt at seq %d before it", r.Seq-1)
	default:
		if sum := blake3.Sum256(prev.Body); !bytes.Equal(h.PrevHash, sum[:]) {
			row.Code, row.Message = receipts.ChainPrevHashMismatch, fmt.Sprintf("prev_hash is not the BLAKE3 of the body of seq %d", prev.Seq)
		}
	}
	return row
}

// chainURL is the URL of the receipts page before seq (0: the newest).
func (h *Handler) chainURL(before uint64, audit bool) string {
	u := h.opts.Prefix + "receipts"
	sep := "?"
	if before != 0 {
		u += sep + "before=" + strconv.FormatUint(before, 10)
		sep = "&"
	}
	if audit {
		u += sep + "audit=1"
	}
	return u
}

// receipts is the receipt chain of the caller's tenant: a page of it,
// newest first, each receipt verified. An operator sees every receipt of
// the tenant, and with audit=1 the whole chain verified too, and where it
// first fails; any other caller sees only the receipts it acted in (whose
// actor is its identity: an anonymous caller has none) and may not audit
// the whole chain.
func (h *Handler) receipts(w http.ResponseWriter, r *http.Request) {
	l := h.opts.Ledger
	if l == nil {
		h.fail(w, r, http.StatusNotFound, noLedger)
		return
	}
	q := r.URL.Query()
	var before uint64
	if s := q.Get("before"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n < 2 {
			h.fail(w, r, http.StatusBadRequest, badParam("before", "must be a seq of 2 or more"))
			return
		}
		before = n
	}
	audit := false
	switch a := q.Get("audit"); a {
	case "":
	case "1":
		audit = true
	default:
		h.fail(w, r, http.StatusBadRequest, badParam("audit", `must be "1" or absent`))
		return
	}
	c := callerOf(r.Context())
	op := isOperator(r.Context())
	actor := ""
	if !op {
		if audit {
			h.fail(w, r, http.StatusForbidden, &crux.Error{Code: crux.CodeForbidden,
				Message: "auditing the whole receipt chain (audit=1) is for an operator of the view: it reads every receipt of the tenant",
				Data:    map[string]any{"param": "audit", "reason": "operator_required"}})
			return
		}
		if actor = c.Identity(); actor == "" {
			h.fail(w, r, http.StatusForbidden, &crux.Error{Code: crux.CodeForbidden,
				Message: "the receipts page shows a caller the receipts it acted in, and an anonymous caller has no identity to tie a receipt to: sign in with a token",
				Data:    map[string]any{"reason": "unauthenticated"}})
			return
		}
	}
	tenant := c.TenantID()
	p, err := l.ChainPage(r.Context(), tenant, actor, before, ChainPerPage)
	if err == nil && audit {
		var a receipts.ChainAudit
		a, err = l.AuditChain(r.Context(), tenant)
		p.Audit = &a
	}
	var ce *crux.Error
	switch {
	case errors.As(err, &ce):
		h.fail(w, r, http.StatusBadRequest, ce)
		return
	case err != nil:
		h.internal(w, r, "reading the receipt chain", err)
		return
	}
	p.Operator = op
	if p.Older != 0 {
		p.Next = h.chainURL(p.Older, audit)
	}
	switch {
	case before != 0 && actor != "":
		p.Prev = h.chainURL(0, false) // a page of one actor's receipts goes back to the newest
	case before != 0 && before <= p.HeadSeq:
		p.Prev = h.chainURL(min(before+ChainPerPage, p.HeadSeq+1), audit)
		if before+ChainPerPage > p.HeadSeq {
			p.Prev = h.chainURL(0, audit)
		}
	}
	if p.Audit != nil && !p.Audit.OK() && p.Audit.ErrorSeq != 0 {
		p.AuditAt = h.chainURL(0, true)
		if p.Audit.ErrorSeq < p.HeadSeq {
			p.AuditAt = h.chainURL(p.Audit.ErrorSeq+1, true)
		}
		p.AuditAt += "#seq-" + strconv.FormatUint(p.Audit.ErrorSeq, 10)
	}
	h.render(w, r, http.StatusOK, "receipts", "Receipts of "+tenant, p)
}
