package receipts

import (
	"bytes"
	"errors"
	"fmt"

	"lukechampine.com/blake3"

	"github.com/crux-go/crux/store"
)

// ChainError reports a broken receipt chain: Seq is where it breaks and
// Reason says how (a gap, a duplicate or out-of-order seq, a prev_hash that
// does not link, a head that does not match, ...).
type ChainError struct {
	Tenant string
	Seq    uint64
	Reason string
}

// Error describes where and how the chain is broken.
func (e *ChainError) Error() string {
	return fmt.Sprintf("receipts: chain of tenant %q broken at seq %d: %s", e.Tenant, e.Seq, e.Reason)
}

// chainCheck checks receipts one at a time, so stored chains stream.
type chainCheck struct {
	tenant    string
	fromStart bool // the first receipt must be seq 1
	started   bool
	lastSeq   uint64
	lastHash  [HashSize]byte
}

func (c *chainCheck) fail(seq uint64, format string, args ...any) error {
	return &ChainError{Tenant: c.tenant, Seq: seq, Reason: fmt.Sprintf(format, args...)}
}

func (c *chainCheck) add(r *Receipt) error {
	if r == nil {
		return c.fail(c.lastSeq+1, "nil receipt after seq %d", c.lastSeq)
	}
	h, err := r.Header()
	if err != nil {
		return &ChainError{Tenant: r.Tenant, Seq: r.Seq, Reason: err.Error()}
	}
	if !c.started && !c.fromStart {
		c.tenant = h.TenantID
	}
	switch {
	case h.TenantID != c.tenant:
		return c.fail(h.Seq, "receipt %s belongs to tenant %q", h.ReceiptID, h.TenantID)
	case h.TenantID != r.Tenant || h.Seq != r.Seq || h.ReceiptID != r.ID:
		return c.fail(h.Seq, "receipt %s is stored as (%q, seq %d, %s) but its body says (%q, seq %d, %s)",
			r.ID, r.Tenant, r.Seq, r.ID, h.TenantID, h.Seq, h.ReceiptID)
	}
	if !c.started {
		if c.fromStart && h.Seq != 1 {
			return c.fail(1, "gap: the chain starts at seq %d", h.Seq)
		}
		if h.Seq == 1 && !zeroHash(h.PrevHash) {
			return c.fail(1, "the first receipt's prev_hash is not zero")
		}
	} else {
		switch {
		case h.Seq == c.lastSeq:
			return c.fail(h.Seq, "duplicate seq")
		case h.Seq < c.lastSeq:
			return c.fail(h.Seq, "out of order: seq %d follows seq %d", h.Seq, c.lastSeq)
		case h.Seq > c.lastSeq+1:
			return c.fail(c.lastSeq+1, "gap: seq %d follows seq %d", h.Seq, c.lastSeq)
		case !bytes.Equal(h.PrevHash, c.lastHash[:]):
			return c.fail(h.Seq, "prev_hash is not the BLAKE3 of the body of seq %d", c.lastSeq)
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
	err := scanChain(tx, tenant, 1, func(seq uint64, id string) error {
		r, err := Get(tx, id)
		if errors.Is(err, store.ErrNotFound) {
			return c.fail(seq, "the chain index names receipt %s, which does not exist", id)
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
		return c.fail(seq, "the chain head says seq %d but the chain ends at seq %d", seq, c.lastSeq)
	case seq != 0 && hash != c.lastHash:
		return c.fail(seq, "the chain head's hash is not the BLAKE3 of the body of seq %d", seq)
	}
	return nil
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
