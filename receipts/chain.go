package receipts

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"lukechampine.com/blake3"

	"github.com/crux-go/crux/store"
)

// Codes of a broken chain: the Code of a [ChainError], and of a
// [ChainAudit] whose receipts verify one by one but do not link.
const (
	// ChainGap: a seq is missing, or the chain does not start at seq 1.
	ChainGap Code = "CHAIN_GAP"
	// ChainSeqOrder: a seq repeats, or comes after a greater one.
	ChainSeqOrder Code = "CHAIN_SEQ_ORDER"
	// ChainPrevHashMismatch: a prev_hash is not the BLAKE3 of the previous
	// receipt's body, or seq 1 has a prev_hash that is not zero.
	ChainPrevHashMismatch Code = "CHAIN_PREV_HASH_MISMATCH"
	// ChainHeadMismatch: the stored chain head names another last seq, or
	// another body hash, than the chain's last receipt.
	ChainHeadMismatch Code = "CHAIN_HEAD_MISMATCH"
	// ChainReceiptMissing: the chain index names a receipt that is not
	// stored.
	ChainReceiptMissing Code = "CHAIN_RECEIPT_MISSING"
	// ChainRecordMismatch: a receipt belongs to another tenant, its stored
	// tenant, seq or id disagree with its body, or its body's header does
	// not decode (or the receipt is nil).
	ChainRecordMismatch Code = "CHAIN_RECORD_MISMATCH"
	// ChainRecordUnreadable: a stored receipt record does not decode
	// (reported by [AuditChain]; [VerifyStoredChain] returns the decoding
	// error as it is).
	ChainRecordUnreadable Code = "CHAIN_RECORD_UNREADABLE"
)

// ChainError reports a broken receipt chain: Seq is where it breaks, Code
// names the defect and Reason says how (a gap, a duplicate or out-of-order
// seq, a prev_hash that does not link, a head that does not match, ...).
type ChainError struct {
	Tenant string
	Seq    uint64
	Code   Code
	Reason string
}

// Error describes where and how the chain is broken.
func (e *ChainError) Error() string {
	return fmt.Sprintf("receipts: chain of tenant %q broken at seq %d: %s: %s", e.Tenant, e.Seq, e.Code, e.Reason)
}

// chainCheck checks receipts one at a time, so stored chains stream.
type chainCheck struct {
	tenant    string
	fromStart bool // the first receipt must be seq 1
	started   bool
	lastSeq   uint64
	lastHash  [HashSize]byte
}

func (c *chainCheck) fail(seq uint64, code Code, format string, args ...any) error {
	return &ChainError{Tenant: c.tenant, Seq: seq, Code: code, Reason: fmt.Sprintf(format, args...)}
}

func (c *chainCheck) add(r *Receipt) error {
	if r == nil {
		return c.fail(c.lastSeq+1, ChainRecordMismatch, "nil receipt after seq %d", c.lastSeq)
	}
	h, err := r.Header()
	if err != nil {
		return &ChainError{Tenant: r.Tenant, Seq: r.Seq, Code: ChainRecordMismatch, Reason: err.Error()}
	}
	if !c.started && !c.fromStart {
		c.tenant = h.TenantID
	}
	switch {
	case h.TenantID != c.tenant:
		return c.fail(h.Seq, ChainRecordMismatch, "receipt %s belongs to tenant %q", h.ReceiptID, h.TenantID)
	case h.TenantID != r.Tenant || h.Seq != r.Seq || h.ReceiptID != r.ID:
		return c.fail(h.Seq, ChainRecordMismatch, "receipt %s is stored as (%q, seq %d, %s) but its body says (%q, seq %d, %s)",
			r.ID, r.Tenant, r.Seq, r.ID, h.TenantID, h.Seq, h.ReceiptID)
	}
	if !c.started {
		if c.fromStart && h.Seq != 1 {
			return c.fail(1, ChainGap, "gap: the chain starts at seq %d", h.Seq)
		}
		if h.Seq == 1 && !zeroHash(h.PrevHash) {
			return c.fail(1, ChainPrevHashMismatch, "the first receipt's prev_hash is not zero")
		}
	} else {
		switch {
		case h.Seq == c.lastSeq:
			return c.fail(h.Seq, ChainSeqOrder, "duplicate seq")
		case h.Seq < c.lastSeq:
			return c.fail(h.Seq, ChainSeqOrder, "out of order: seq %d follows seq %d", h.Seq, c.lastSeq)
		case h.Seq > c.lastSeq+1:
			return c.fail(c.lastSeq+1, ChainGap, "gap: seq %d follows seq %d", h.Seq, c.lastSeq)
		case !bytes.Equal(h.PrevHash, c.lastHash[:]):
			return c.fail(h.Seq, ChainPrevHashMismatch, "prev_hash is not the BLAKE3 of the body of seq %d", c.lastSeq)
		}
	}
	c.started = true
	c.lastSeq, c.lastHash = h.Seq, blake3.Sum256(r.Body)
	return nil
}

// VerifyChain checks that rs, receipts of one tenant in the order given,
// form an unbroken stretch of its chain: their seqs are consecutive and
// increasing, each prev_hash is the BLAKE3 of the previous receipt's body,
// and a receipt with seq 1 has a zero prev_hash. rs may start after seq 1;
// the first receipt's prev_hash is then not checked. Each receipt's stored
// tenant, seq and id must agree with its body. It returns a *ChainError
// when the chain is broken, nil otherwise (also for no receipts).
//
// VerifyChain checks links only; [Verify] checks each receipt's signature.
func VerifyChain(rs []*Receipt) error {
	var c chainCheck
	for _, r := range rs {
		if err := c.add(r); err != nil {
			return err
		}
	}
	return nil
}

// VerifyStoredChain checks tenant's whole stored chain as [VerifyChain]
// does, requiring it to start at seq 1, and checks that the chain head
// names its last receipt and that receipt's body hash, so a dropped,
// reordered or altered receipt, a chain index entry naming a missing
// receipt, or a truncated tail with an intact head, is detected. A broken
// chain gives a *ChainError; a store failure is returned as it is.
func VerifyStoredChain(tx store.Tx, tenant string) error {
	c := chainCheck{tenant: tenant, fromStart: true}
	err := scanChain(tx, tenant, 1, false, func(seq uint64, id string) error {
		r, err := Get(tx, id)
		if errors.Is(err, store.ErrNotFound) {
			return c.fail(seq, ChainReceiptMissing, "the chain index names receipt %s, which does not exist", id)
		}
		if err != nil {
			return err
		}
		return c.add(r)
	})
	if err != nil {
		return err
	}
	seq, hash, err := head(tx, tenant)
	if err != nil {
		return err
	}
	switch {
	case seq != c.lastSeq:
		return c.fail(seq, ChainHeadMismatch, "the chain head says seq %d but the chain ends at seq %d", seq, c.lastSeq)
	case seq != 0 && hash != c.lastHash:
		return c.fail(seq, ChainHeadMismatch, "the chain head's hash is not the BLAKE3 of the body of seq %d", seq)
	}
	return nil
}

// ChainAudit is the outcome of [AuditChain]: how far a tenant's stored
// chain checked out and, when it does not verify, its first defect.
type ChainAudit struct {
	TenantID string `json:"tenant_id"`
	// Receipts is the number of receipts that passed every check before
	// the first defect: the whole chain when it verifies.
	Receipts uint64 `json:"receipts"`
	// HeadSeq is the last seq the stored chain head names (0 for no
	// receipts); HeadHash is the lowercase hex of the body hash it holds
	// ("" for no receipts).
	HeadSeq  uint64 `json:"head_seq"`
	HeadHash string `json:"head_hash"`
	// ErrorCode is [OK] when the chain verifies; otherwise the code of the
	// first defect: a [Verify] code for a receipt that does not verify on
	// its own, or a chain code (ChainGap, ...) for one that does not link.
	ErrorCode Code `json:"error_code"`
	// ErrorSeq is the seq of the first defect (0 when OK, or when the head
	// names seq 0 but receipts are stored).
	ErrorSeq     uint64 `json:"error_seq"`
	ErrorMessage string `json:"error_message,omitempty"`
}

// OK reports whether the chain verified: ErrorCode is [OK].
func (a ChainAudit) OK() bool { return a.ErrorCode == OK }

// AuditChain checks tenant's whole stored chain, in seq order, stopping at
// the first defect: each receipt as [Verify] does with kr (body hash,
// signature, key, header), then its link to the previous one and, at the
// end, the chain head, as [VerifyStoredChain] does. A stored record that
// does not decode is reported as [ChainRecordUnreadable]. A failing store
// is returned as an error; a defect is reported in the ChainAudit. It
// reads every receipt of the chain once, in one read transaction.
func AuditChain(tx store.Tx, tenant string, kr *Keyring, now time.Time) (ChainAudit, error) {
	a := ChainAudit{TenantID: tenant, ErrorCode: OK}
	if err := checkTenant(tenant); err != nil {
		return a, err
	}
	headSeq, headHash, err := head(tx, tenant)
	if err != nil {
		return a, err
	}
	a.HeadSeq = headSeq
	if headSeq != 0 {
		a.HeadHash = hex.EncodeToString(headHash[:])
	}
	fail := func(seq uint64, code Code, msg string) error {
		a.ErrorSeq, a.ErrorCode, a.ErrorMessage = seq, code, msg
		return store.ErrStop
	}
	c := chainCheck{tenant: tenant, fromStart: true}
	err = scanChain(tx, tenant, 1, false, func(seq uint64, id string) error {
		v, err := tx.Get(bucketReceipts, []byte(id))
		if errors.Is(err, store.ErrNotFound) {
			return fail(seq, ChainReceiptMissing, fmt.Sprintf("the chain index names receipt %s, which does not exist", id))
		}
		if err != nil {
			return err
		}
		r, err := decodeRecord(id, v)
		if err != nil {
			return fail(seq, ChainRecordUnreadable, err.Error())
		}
		if rep := Verify(r, kr, now); !rep.OK() {
			return fail(seq, rep.ErrorCode, fmt.Sprintf("receipt %s: %s", id, rep.ErrorMessage))
		}
		if err := c.add(r); err != nil {
			var ce *ChainError
			if errors.As(err, &ce) {
				return fail(ce.Seq, ce.Code, ce.Reason)
			}
			return err
		}
		a.Receipts++
		return nil
	})
	if err != nil || !a.OK() {
		return a, err
	}
	switch {
	case headSeq != c.lastSeq:
		_ = fail(headSeq, ChainHeadMismatch, fmt.Sprintf("the chain head says seq %d but the chain ends at seq %d", headSeq, c.lastSeq))
	case headSeq != 0 && headHash != c.lastHash:
		_ = fail(headSeq, ChainHeadMismatch, fmt.Sprintf("the chain head's hash is not the BLAKE3 of the body of seq %d", headSeq))
	}
	return a, nil
}

// Tenants returns the tenants that have a receipt chain, in byte order.
func Tenants(tx store.Tx) ([]string, error) {
	var out []string
	err := tx.Scan(bucketHead, nil, false, func(k, _ []byte) error {
		if len(k) == 0 || k[len(k)-1] != 0 {
			return fmt.Errorf("receipts: malformed chain head key %q", k)
		}
		out = append(out, string(k[:len(k)-1]))
		return nil
	})
	return out, err
}
