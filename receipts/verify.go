package receipts

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"time"

	"lukechampine.com/blake3"
)

// Code names the outcome of [Verify]. The values are the codes of CueCrux
// receipt verification (version 1), plus crux's BODY_HEADER_MISMATCH; the
// chain codes (ChainGap, ...) name the defects of a broken chain, in a
// [ChainError] or a [ChainAudit].
type Code string

// Verification codes, in the order Verify checks them (see the package
// doc for which wins).
const (
	// OK: the receipt is intact, signed by the keyring's key, and its
	// fields agree with its signed body.
	OK Code = "OK"
	// BodyHashMismatch: BLAKE3 of the body differs from the stored
	// payload hash: the body or the hash changed after minting.
	BodyHashMismatch Code = "BODY_HASH_MISMATCH"
	// BodyCBORParseError: the body is not one well-formed CBOR item.
	BodyCBORParseError Code = "BODY_CBOR_PARSE_ERROR"
	// SigMissing: the receipt has no signature record.
	SigMissing Code = "SIG_MISSING"
	// SigParseError: the signature record does not decode as a
	// crux.receipt.sig.v1 record.
	SigParseError Code = "SIG_PARSE_ERROR"
	// SigAlgUnsupported: the signature algorithm is not ed25519.
	SigAlgUnsupported Code = "SIG_ALG_UNSUPPORTED"
	// SigReceiptIDMismatch: the signature record names another receipt.
	SigReceiptIDMismatch Code = "SIG_RECEIPT_ID_MISMATCH"
	// SigPayloadHashMismatch: signed_payload_hash is not 32 bytes or
	// differs from the stored payload hash.
	SigPayloadHashMismatch Code = "SIG_PAYLOAD_HASH_MISMATCH"
	// KeyringMissing: no keyring was given.
	KeyringMissing Code = "KEYRING_MISSING"
	// KeyNotFound: the keyring has no key with the record's key_id.
	KeyNotFound Code = "KEY_NOT_FOUND"
	// PubkeyInvalid: the keyring's key is not a usable Ed25519 public key
	// (wrong length, not a canonical curve point, or of small order).
	PubkeyInvalid Code = "PUBKEY_INVALID"
	// SigInvalid: the signature is not 64 bytes, or does not verify
	// strictly over the body bytes with the key.
	SigInvalid Code = "SIG_INVALID"
	// BodyHeaderMismatch (crux's addition): everything above passed, but
	// the body is not a crux.receipt.body.v1 header or its receipt_id,
	// tenant_id, kind or seq differ from the receipt's.
	BodyHeaderMismatch Code = "BODY_HEADER_MISMATCH"
)

// Report is the result of [Verify], in the crux.receipt.verify.v1 shape of
// the CueCrux receipt format (without its retrieval-trace fields).
type Report struct {
	Schema      string `json:"schema"`
	ReceiptID   string `json:"receipt_id"`
	TenantID    string `json:"tenant_id"`
	Kind        string `json:"kind"`
	PayloadHash string `json:"payload_hash"` // hex of the stored payload hash
	// Signature is what the signature record claims, when it decodes.
	Signature SignatureInfo `json:"signature"`
	Integrity Integrity     `json:"integrity"`
	// SignatureValid reports whether the signature verified over the body
	// bytes with the keyring's key; it is computed even when the body hash
	// does not match.
	SignatureValid bool `json:"signature_valid"`
	// PubkeyFingerprint is the [Fingerprint] of the keyring's key for the
	// record's key_id, when the keyring has one: this fingerprint rather
	// than the full BLAKE3 hex of the key, so it compares directly with key
	// ids and passport fingerprints.
	PubkeyFingerprint string `json:"pubkey_fingerprint,omitempty"`
	ErrorCode         Code   `json:"error_code"`
	ErrorMessage      string `json:"error_message,omitempty"`
	VerifiedAt        string `json:"verified_at"` // RFC 3339, UTC
}

// SignatureInfo is the algorithm and key id a signature record claims.
type SignatureInfo struct {
	Alg   string `json:"alg"`
	KeyID string `json:"key_id,omitempty"`
}

// Integrity holds the body checks of a [Report].
type Integrity struct {
	// PayloadHashMatches: BLAKE3 of the body equals the stored payload hash.
	PayloadHashMatches bool `json:"payload_hash_matches"`
	// CanonicalBytesParseOK: the body is one well-formed CBOR item.
	CanonicalBytesParseOK bool `json:"canonical_bytes_parse_ok"`
}

// OK reports whether the receipt verified: ErrorCode is [OK].
func (r Report) OK() bool { return r.ErrorCode == OK }

// Verify checks r against the public keys of kr, offline, and reports the
// outcome; now is the report's verified_at. The checks, their order and
// which code wins are described in the package doc. A nil kr gives
// [KeyringMissing]; a nil r is treated as an empty receipt. Verify never
// panics, whatever the bytes of r.
func Verify(r *Receipt, kr *Keyring, now time.Time) Report {
	if r == nil {
		r = &Receipt{}
	}
	rep := Report{
		Schema: VerifySchema, ReceiptID: r.ID, TenantID: r.Tenant, Kind: r.Kind,
		PayloadHash: hex.EncodeToString(r.PayloadHash),
		VerifiedAt:  now.UTC().Format(time.RFC3339Nano),
	}
	sum := blake3.Sum256(r.Body)
	rep.Integrity.PayloadHashMatches = len(r.PayloadHash) == HashSize && bytes.Equal(sum[:], r.PayloadHash)
	rep.Integrity.CanonicalBytesParseOK = len(r.Body) > 0 && wireDec.Wellformed(r.Body) == nil

	sigCode, sigMsg := checkSignature(r, kr, &rep)

	switch {
	case !rep.Integrity.PayloadHashMatches:
		rep.ErrorCode = BodyHashMismatch
		if rep.SignatureValid {
			rep.ErrorMessage = "BLAKE3 of the body does not match the stored payload hash; the signature over the body is valid, so the stored hash is what changed"
		} else {
			rep.ErrorMessage = fmt.Sprintf("BLAKE3 of the body does not match the stored payload hash (signature check: %s: %s)", sigCode, sigMsg)
		}
	case !rep.Integrity.CanonicalBytesParseOK:
		rep.ErrorCode = BodyCBORParseError
		if err := wireDec.Wellformed(r.Body); err != nil {
			rep.ErrorMessage = "body is not well-formed CBOR: " + err.Error()
		} else {
			rep.ErrorMessage = "body is empty"
		}
	case sigCode != OK:
		rep.ErrorCode, rep.ErrorMessage = sigCode, sigMsg
	default:
		rep.ErrorCode, rep.ErrorMessage = checkHeader(r)
	}
	return rep
}

// checkSignature runs the signature checks of the package doc, in order,
// filling rep's signature fields, and returns the first failure (or OK).
func checkSignature(r *Receipt, kr *Keyring, rep *Report) (Code, string) {
	if len(r.Sig) == 0 {
		return SigMissing, "receipt has no signature record"
	}
	sig, err := r.SigRecord()
	if err != nil {
		return SigParseError, err.Error()
	}
	rep.Signature = SignatureInfo{Alg: sig.Alg, KeyID: sig.KeyID}
	if sig.Alg != AlgEd25519 {
		return SigAlgUnsupported, fmt.Sprintf("signature algorithm %q is not supported (only %q)", sig.Alg, AlgEd25519)
	}
	if sig.ReceiptID != r.ID {
		return SigReceiptIDMismatch, fmt.Sprintf("signature record is for receipt %q, not %q", sig.ReceiptID, r.ID)
	}
	if len(sig.SignedPayloadHash) != HashSize {
		return SigPayloadHashMismatch, fmt.Sprintf("signed_payload_hash is %d bytes, want %d", len(sig.SignedPayloadHash), HashSize)
	}
	if !bytes.Equal(sig.SignedPayloadHash, r.PayloadHash) {
		return SigPayloadHashMismatch, "signed_payload_hash differs from the stored payload hash"
	}
	if kr == nil {
		return KeyringMissing, "no keyring to verify the signature with"
	}
	key, ok := kr.entry(sig.KeyID)
	if !ok {
		return KeyNotFound, fmt.Sprintf("key %q is not in the keyring", sig.KeyID)
	}
	rep.PubkeyFingerprint = Fingerprint(key.pub)
	if key.bad != "" {
		return PubkeyInvalid, fmt.Sprintf("key %q: %s", sig.KeyID, key.bad)
	}
	if len(sig.Signature) != ed25519.SignatureSize {
		return SigInvalid, fmt.Sprintf("signature is %d bytes, want %d", len(sig.Signature), ed25519.SignatureSize)
	}
	if isSmallOrder(sig.Signature[:32]) {
		return SigInvalid, "signature's R is a point of small order"
	}
	// Go's Verify rejects non-canonical S and R encodings; the checks
	// above reject small-order keys and R (see the package doc).
	if !ed25519.Verify(key.pub, r.Body, sig.Signature) {
		return SigInvalid, fmt.Sprintf("signature does not verify with key %q", sig.KeyID)
	}
	rep.SignatureValid = true
	return OK, ""
}

// checkHeader compares the signed body's header with the receipt's
// unsigned fields.
func checkHeader(r *Receipt) (Code, string) {
	h, err := r.Header()
	if err != nil {
		return BodyHeaderMismatch, err.Error()
	}
	mismatch := func(field string, body, stored any) (Code, string) {
		return BodyHeaderMismatch, fmt.Sprintf("body says %s %v, the receipt says %v", field, body, stored)
	}
	switch {
	case h.ReceiptID != r.ID:
		return mismatch("receipt_id", fmt.Sprintf("%q", h.ReceiptID), fmt.Sprintf("%q", r.ID))
	case h.TenantID != r.Tenant:
		return mismatch("tenant_id", fmt.Sprintf("%q", h.TenantID), fmt.Sprintf("%q", r.Tenant))
	case h.Kind != r.Kind:
		return mismatch("kind", fmt.Sprintf("%q", h.Kind), fmt.Sprintf("%q", r.Kind))
	case h.Seq != r.Seq:
		return mismatch("seq", h.Seq, r.Seq)
	}
	return OK, ""
}
