package tools

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

type receiptVerifyArgs struct {
	ReceiptID string `json:"receipt_id" schema:"minLength=1"`
	TenantID  string `json:"tenant_id,omitempty" schema:"minLength=1"`
}

// ChainSegment is what receipt_verify reports of the receipt's place in
// its tenant's chain: the receipts just before and after it, and whether
// they link.
type ChainSegment struct {
	FromSeq      uint64        `json:"from_seq"`
	ToSeq        uint64        `json:"to_seq"`
	Linked       bool          `json:"linked"`
	ErrorCode    receipts.Code `json:"error_code,omitempty"`
	ErrorMessage string        `json:"error_message,omitempty"`
	Receipts     []ChainEntry  `json:"receipts"`
}

// ChainEntry is one receipt of a ChainSegment.
type ChainEntry struct {
	ReceiptID string `json:"receipt_id"`
	Seq       uint64 `json:"seq"`
	Kind      string `json:"kind"`
}

// ReceiptVerifyOutput is the answer of receipt_verify.
type ReceiptVerifyOutput struct {
	ReceiptID      string           `json:"receipt_id"`
	TenantID       string           `json:"tenant_id"`
	FeatureEnabled bool             `json:"feature_enabled"`
	Verified       bool             `json:"verified"`
	SignerPassport *string          `json:"signer_passport"`
	Errors         []string         `json:"errors"`
	HTTPStatus     int              `json:"http_status"`
	Report         *receipts.Report `json:"report,omitempty"`
	Chain          *ChainSegment    `json:"chain,omitempty"`
}

func receiptVerify() *toolkit.Tool {
	const name = "receipt_verify"
	return &toolkit.Tool{
		Name:        name,
		Description: "Verify a stored receipt offline: hash, signature, chain. Its passport or a trusted operator only. Flag RECEIPT_VERIFY.",
		Annotations: toolkit.Annotations{Title: "Verify receipt", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[ReceiptVerifyOutput](),
		Run:         toolkit.Bind(name, runReceiptVerify),
	}
}

// runReceiptVerify runs one receipt_verify call.
func runReceiptVerify(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *receiptVerifyArgs) (*toolkit.Result, error) {
	const name = "receipt_verify"
	if err := checkNames(name, "receipt_id", in.ReceiptID, "tenant_id", in.TenantID); err != nil {
		return nil, err
	}
	out := ReceiptVerifyOutput{ReceiptID: in.ReceiptID, TenantID: in.TenantID, Errors: []string{}}
	if out.TenantID == "" {
		out.TenantID = c.TenantID()
	}
	if !env.Flags.ReceiptVerify {
		out.Errors, out.HTTPStatus = []string{"FEATURE_DISABLED"}, http.StatusForbidden
		return toolkit.JSONResult(out)
	}
	out.FeatureEnabled = true
	if err := needIdentity(name, c); err != nil {
		return nil, err
	}
	id := c.Identity()
	if out.TenantID != c.TenantID() {
		return nil, &toolkit.Error{Code: toolkit.CodeForbidden, Message: fmt.Sprintf(
			"%s: tenant_id: a caller of tenant %s may not verify the receipts of tenant %s", name, c.TenantID(), out.TenantID)}
	}
	var forbidden error
	err := env.Store.View(ctx, func(tx store.Tx) error {
		r, err := receipts.Get(tx, in.ReceiptID)
		if errors.Is(err, store.ErrNotFound) || err == nil && r.Tenant != out.TenantID {
			out.Errors, out.HTTPStatus = []string{"RECEIPT_NOT_FOUND"}, http.StatusNotFound
			return nil
		}
		var cre *store.CorruptRecordError
		if errors.As(err, &cre) {
			out.Errors, out.HTTPStatus = []string{string(receipts.ChainRecordUnreadable)}, http.StatusUnprocessableEntity
			return nil
		}
		if err != nil {
			return err
		}
		h, herr := r.Header()
		if herr == nil {
			actor := h.Actor
			out.SignerPassport = &actor
		}
		if out.SignerPassport == nil || *out.SignerPassport != id {
			tier, _, err := earnedTier(tx, out.TenantID, id)
			if err != nil {
				return err
			}
			if store.TierRank(tier) < store.TierRank(store.TierTrusted) {
				forbidden = &toolkit.Error{Code: toolkit.CodeForbidden, Message: fmt.Sprintf(
					"%s: only the receipt's signer passport or an operator (trusted tier or above) may verify it; %s is %s",
					name, id, tier)}
				return nil
			}
		}
		return verifyInto(tx, env, r, &out)
	})
	if err != nil {
		return nil, err
	}
	if forbidden != nil {
		return nil, forbidden
	}
	return toolkit.JSONResult(out)
}

// verifyInto verifies r under the server's key and checks its links in
// the chain around it, and sets out's report, chain segment, errors,
// verdict and HTTP status from them.
func verifyInto(tx store.Tx, env *toolkit.Env, r *receipts.Receipt, out *ReceiptVerifyOutput) error {
	rep := receipts.Verify(r, receipts.NewKeyring(env.Signer.Public()), env.Time())
	out.Report = &rep
	if !rep.OK() {
		out.Errors = append(out.Errors, string(rep.ErrorCode))
	}
	seg, err := segmentAround(tx, r)
	if err != nil {
		return err
	}
	out.Chain = seg
	if !seg.Linked {
		out.Errors = append(out.Errors, string(seg.ErrorCode))
	}
	out.Verified = len(out.Errors) == 0
	out.HTTPStatus = http.StatusOK
	if !out.Verified {
		out.HTTPStatus = http.StatusUnprocessableEntity
	}
	return nil
}

// segmentAround checks r's links within its tenant's chain: from the
// receipt before it (if any) to the one after it (if any).
func segmentAround(tx store.Tx, r *receipts.Receipt) (*ChainSegment, error) {
	from := r.Seq
	if from > 1 {
		from--
	}
	var rs []*receipts.Receipt
	err := receipts.Chain(tx, r.Tenant, from, func(x *receipts.Receipt) error {
		rs = append(rs, x)
		if len(rs) == 3 || x.Seq > r.Seq {
			return store.ErrStop
		}
		return nil
	})
	seg := &ChainSegment{FromSeq: from, ToSeq: r.Seq, Receipts: []ChainEntry{}}
	var cre *store.CorruptRecordError
	if errors.As(err, &cre) {
		seg.ErrorCode, seg.ErrorMessage = receipts.ChainRecordUnreadable, cre.Error()
		return seg, nil
	}
	if err != nil {
		return nil, err
	}
	for _, x := range rs {
		seg.Receipts = append(seg.Receipts, ChainEntry{ReceiptID: x.ID, Seq: x.Seq, Kind: x.Kind})
		seg.ToSeq = x.Seq
	}
	if !containsReceipt(rs, r.ID) {
		seg.ErrorCode, seg.ErrorMessage = receipts.ChainReceiptMissing, "the chain index does not list the receipt at its seq"
		return seg, nil
	}
	var ce *receipts.ChainError
	if err := receipts.VerifyChain(rs); errors.As(err, &ce) {
		seg.ErrorCode, seg.ErrorMessage = ce.Code, ce.Reason
		return seg, nil
	} else if err != nil {
		return nil, err
	}
	seg.Linked = true
	return seg, nil
}

func containsReceipt(rs []*receipts.Receipt, id string) bool {
	for _, r := range rs {
		if r.ID == id {
			return true
		}
	}
	return false
}
