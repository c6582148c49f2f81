package receipts

import (
	"encoding/hex"
	"fmt"
)

// Exported is a receipt in JSON, for verification from a file: byte
// strings are lowercase hex. Convert with [Export] and [Exported.Receipt].
type Exported struct {
	ReceiptID      string `json:"receipt_id"`
	TenantID       string `json:"tenant_id"`
	Kind           string `json:"kind"`
	Seq            uint64 `json:"seq"`
	BodyCBORHex    string `json:"body_cbor_hex"`
	PayloadHashHex string `json:"payload_hash_hex"`
	SigCBORHex     string `json:"sig_cbor_hex"`
}

// Export returns r, which must not be nil, in its JSON form.
func Export(r *Receipt) Exported {
	return Exported{
		ReceiptID: r.ID, TenantID: r.Tenant, Kind: r.Kind, Seq: r.Seq,
		BodyCBORHex:    hex.EncodeToString(r.Body),
		PayloadHashHex: hex.EncodeToString(r.PayloadHash),
		SigCBORHex:     hex.EncodeToString(r.Sig),
	}
}

// Receipt decodes e. It fails only on malformed hex; whether the receipt
// is genuine is for [Verify] to say.
func (e Exported) Receipt() (*Receipt, error) {
	r := &Receipt{ID: e.ReceiptID, Tenant: e.TenantID, Kind: e.Kind, Seq: e.Seq}
	var err error
	if r.Body, err = hex.DecodeString(e.BodyCBORHex); err != nil {
		return nil, fmt.Errorf("receipts: exported receipt %s: body_cbor_hex: %w", e.ReceiptID, err)
	}
	if r.PayloadHash, err = hex.DecodeString(e.PayloadHashHex); err != nil {
		return nil, fmt.Errorf("receipts: exported receipt %s: payload_hash_hex: %w", e.ReceiptID, err)
	}
	if r.Sig, err = hex.DecodeString(e.SigCBORHex); err != nil {
		return nil, fmt.Errorf("receipts: exported receipt %s: sig_cbor_hex: %w", e.ReceiptID, err)
	}
	return r, nil
}
