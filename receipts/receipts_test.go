package receipts_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"lukechampine.com/blake3"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
)

func TestRoundTrip(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	kr := receipts.NewKeyring(s.Public())
	payload := forgetPayload{Reason: "duplicate", Facts: []string{"f_1", "f_2"}}

	minted := appendOne(t, db, s, "acme", "forget", payload)
	assert.Regexp(t, regexp.MustCompile(`^r_[0-9a-f]{32}$`), minted.ID)
	assert.Equal(t, "acme", minted.Tenant)
	assert.Equal(t, "forget", minted.Kind)
	assert.Equal(t, uint64(1), minted.Seq)
	sum := blake3.Sum256(minted.Body)
	assert.Equal(t, sum[:], minted.PayloadHash)

	got := getOne(t, db, minted.ID)
	assert.Equal(t, minted, got)

	h, err := got.Header()
	require.NoError(t, err)
	assert.Equal(t, receipts.Header{
		Schema: receipts.BodySchema, Kind: "forget", ReceiptID: minted.ID, TenantID: "acme", Seq: 1,
		PrevHash: make([]byte, 32), CreatedAt: testNow, Actor: "agent-7",
	}, h)

	var p forgetPayload
	require.NoError(t, got.Payload(&p))
	assert.Equal(t, payload, p)

	sig, err := got.SigRecord()
	require.NoError(t, err)
	assert.Equal(t, receipts.SigSchema, sig.Schema)
	assert.Equal(t, minted.ID, sig.ReceiptID)
	assert.Equal(t, receipts.AlgEd25519, sig.Alg)
	assert.Equal(t, s.KeyID(), sig.KeyID)
	assert.True(t, testNow.Equal(sig.SignedAt))
	assert.Equal(t, sum[:], sig.SignedPayloadHash)
	assert.True(t, ed25519.Verify(s.Public(), got.Body, sig.Signature))

	rep := receipts.Verify(got, kr, testNow.Add(time.Hour))
	assert.Equal(t, receipts.Report{
		Schema: receipts.VerifySchema, ReceiptID: minted.ID, TenantID: "acme", Kind: "forget",
		PayloadHash:    hex.EncodeToString(sum[:]),
		Signature:      receipts.SignatureInfo{Alg: "ed25519", KeyID: s.KeyID()},
		Integrity:      receipts.Integrity{PayloadHashMatches: true, CanonicalBytesParseOK: true},
		SignatureValid: true, PubkeyFingerprint: s.KeyID(), ErrorCode: receipts.OK,
		VerifiedAt: "2026-03-14T16:09:26.535897932Z",
	}, rep)
	assert.True(t, rep.OK())

	// The report's JSON shape.
	b, err := json.Marshal(rep)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"schema", "receipt_id", "tenant_id", "kind", "payload_hash", "signature", "integrity", "signature_valid", "pubkey_fingerprint", "error_code", "verified_at"} {
		assert.Contains(t, m, k)
	}
	assert.NotContains(t, m, "error_message")
	assert.Equal(t, map[string]any{"payload_hash_matches": true, "canonical_bytes_parse_ok": true}, m["integrity"])
}

func TestBodyLayout(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	r := appendOne(t, db, s, "acme", "decision", map[string]any{"zeta": 1, "alpha": "x", "mid": true})

	require.Equal(t, byte(0xa9), r.Body[0], "a definite map of 9 pairs")
	dec := cbor.NewDecoder(bytes.NewReader(r.Body[1:]))
	var keys []string
	values := map[string]cbor.RawMessage{}
	for range 9 {
		var k string
		var v cbor.RawMessage
		require.NoError(t, dec.Decode(&k))
		require.NoError(t, dec.Decode(&v))
		keys = append(keys, k)
		values[k] = v
	}
	assert.Equal(t, []string{"schema", "kind", "receipt_id", "tenant_id", "seq", "prev_hash", "created_at", "actor", "payload"}, keys)
	var created string
	require.NoError(t, cbor.Unmarshal(values["created_at"], &created))
	assert.Equal(t, "2026-03-14T15:09:26.535897932Z", created)

	// The payload map is encoded deterministically (core deterministic order).
	em, err := cbor.CoreDetEncOptions().EncMode()
	require.NoError(t, err)
	pl, err := em.Marshal(map[string]any{"alpha": "x", "mid": true, "zeta": 1})
	require.NoError(t, err)
	assert.Equal(t, pl, []byte(values["payload"]))

	// Signature record key order.
	require.Equal(t, byte(0xa7), r.Sig[0])
	dec = cbor.NewDecoder(bytes.NewReader(r.Sig[1:]))
	keys = nil
	for range 7 {
		var k string
		var v cbor.RawMessage
		require.NoError(t, dec.Decode(&k))
		require.NoError(t, dec.Decode(&v))
		keys = append(keys, k)
	}
	assert.Equal(t, []string{"schema", "receipt_id", "alg", "key_id", "signed_at", "signature", "signed_payload_hash"}, keys)
}

// TestVerifyBodyTamper flips one byte in each part of a body: the body hash
// no longer matches, which wins, and the signature over the altered body
// is invalid.
func TestVerifyBodyTamper(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	kr := receipts.NewKeyring(s.Public())
	good := appendOne(t, db, s, "acme-tenant", "forget", forgetPayload{Reason: "duplicate-entry", Facts: []string{"f_1"}})

	tests := []struct {
		name string
		pos  func(b []byte) int
	}{
		{"map head", func([]byte) int { return 0 }},
		{"field name", func(b []byte) int { return indexAfter(t, b, "tenant_") }},
		{"schema value", func(b []byte) int { return indexAfter(t, b, "crux.receipt.") }},
		{"kind value", func(b []byte) int { return indexAfter(t, b, "forg") }},
		{"receipt id", func(b []byte) int { return indexAfter(t, b, good.ID[:10]) }},
		{"tenant value", func(b []byte) int { return indexAfter(t, b, "acme-") }},
		{"seq value", func(b []byte) int { return indexAfter(t, b, "seq") }},
		{"prev_hash head", func(b []byte) int { return indexAfter(t, b, "prev_hash") }},
		{"prev_hash byte", func(b []byte) int { return indexAfter(t, b, "prev_hash") + 2 + 17 }},
		{"created_at", func(b []byte) int { return indexAfter(t, b, "2026-03-14T15:09:") }},
		{"actor", func(b []byte) int { return indexAfter(t, b, "agent-") }},
		{"payload", func(b []byte) int { return indexAfter(t, b, "duplicate-") }},
		{"last byte", func(b []byte) int { return len(b) - 1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := clone(good)
			r.Body[tt.pos(r.Body)] ^= 0x01
			rep := receipts.Verify(r, kr, testNow)
			assert.Equal(t, receipts.BodyHashMismatch, rep.ErrorCode, rep.ErrorMessage)
			assert.False(t, rep.SignatureValid)
			assert.False(t, rep.Integrity.PayloadHashMatches)
			assert.Contains(t, rep.ErrorMessage, "SIG_INVALID")
		})
	}

	t.Run("stored hash altered, body intact", func(t *testing.T) {
		// The signature checks stop at signed_payload_hash, which no
		// longer equals the stored hash, so the signature is not reached.
		r := clone(good)
		r.PayloadHash[0] ^= 0x01
		rep := receipts.Verify(r, kr, testNow)
		assert.Equal(t, receipts.BodyHashMismatch, rep.ErrorCode)
		assert.False(t, rep.SignatureValid)
		assert.Contains(t, rep.ErrorMessage, "SIG_PAYLOAD_HASH_MISMATCH")
	})
	t.Run("stored hash and signed_payload_hash altered, body intact", func(t *testing.T) {
		// Now the signature is checked and is valid over the intact body:
		// the report tells storage corruption from forgery.
		r := clone(good)
		r.PayloadHash[0] ^= 0x01
		editSig(t, r, func(s *receipts.SigRecord) { s.SignedPayloadHash = bytes.Clone(r.PayloadHash) })
		rep := receipts.Verify(r, kr, testNow)
		assert.Equal(t, receipts.BodyHashMismatch, rep.ErrorCode)
		assert.True(t, rep.SignatureValid)
		assert.Contains(t, rep.ErrorMessage, "stored hash is what changed")
	})
}

// TestVerifyTamperRehashed alters the body and recomputes the stored hash,
// as an attacker with write access to the store would.
func TestVerifyTamperRehashed(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	kr := receipts.NewKeyring(s.Public())
	good := appendOne(t, db, s, "acme-tenant", "forget", forgetPayload{Reason: "x"})

	tests := []struct {
		name   string
		tamper func(t *testing.T, r *receipts.Receipt)
		code   receipts.Code
	}{
		{
			// The body still parses, and its hash now matches the stored
			// one; but the signature record's signed_payload_hash is the
			// original hash, and that check comes before the signature.
			name: "tenant byte, hash recomputed",
			tamper: func(t *testing.T, r *receipts.Receipt) {
				r.Body[indexAfter(t, r.Body, "acme-")] ^= 0x01
				rehash(r)
			},
			code: receipts.SigPayloadHashMismatch,
		},
		{
			// With signed_payload_hash rewritten too, only the signature
			// itself is left to catch it.
			name: "tenant byte, hash and signed_payload_hash recomputed",
			tamper: func(t *testing.T, r *receipts.Receipt) {
				r.Body[indexAfter(t, r.Body, "acme-")] ^= 0x01
				rehash(r)
				editSig(t, r, func(s *receipts.SigRecord) { s.SignedPayloadHash = bytes.Clone(r.PayloadHash) })
			},
			code: receipts.SigInvalid,
		},
		{
			// A tamper that breaks the CBOR: the parse error precedes the
			// signature checks.
			name: "map head, hash recomputed",
			tamper: func(t *testing.T, r *receipts.Receipt) {
				r.Body[0] = 0xaa // a map of 10 pairs: one is missing
				rehash(r)
			},
			code: receipts.BodyCBORParseError,
		},
		{
			name: "trailing byte, hash recomputed",
			tamper: func(t *testing.T, r *receipts.Receipt) {
				r.Body = append(r.Body, 0x00)
				rehash(r)
			},
			code: receipts.BodyCBORParseError,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := clone(good)
			tt.tamper(t, r)
			rep := receipts.Verify(r, kr, testNow)
			assert.Equal(t, tt.code, rep.ErrorCode, rep.ErrorMessage)
			assert.True(t, rep.Integrity.PayloadHashMatches)
			assert.False(t, rep.SignatureValid)
		})
	}
}

// addScalarL returns S + ℓ (both little-endian), the malleated twin of a
// valid Ed25519 S.
func addScalarL(s []byte) []byte {
	l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	be := make([]byte, 32)
	for i := range s {
		be[31-i] = s[i]
	}
	v := new(big.Int).Add(new(big.Int).SetBytes(be), l)
	out := make([]byte, 32)
	v.FillBytes(be)
	for i := range be {
		out[31-i] = be[i]
	}
	return out
}

func TestVerifyCodes(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	other := signerFromByte(2)
	good := appendOne(t, db, s, "acme", "refusal", map[string]string{"reason_code": "DENIED"})
	identity := make([]byte, 32)
	identity[0] = 1
	notOnCurve := make([]byte, 32)
	notOnCurve[0] = 2

	keyringWith := func(id string, pub []byte) *receipts.Keyring {
		kr := &receipts.Keyring{}
		require.NoError(t, kr.Add(id, pub))
		return kr
	}

	tests := []struct {
		name    string
		mutate  func(t *testing.T, r *receipts.Receipt)
		keyring func() *receipts.Keyring
		code    receipts.Code
		sigOK   bool
	}{
		{name: "genuine", code: receipts.OK, sigOK: true},
		{
			name: "signature byte flipped",
			mutate: func(t *testing.T, r *receipts.Receipt) {
				editSig(t, r, func(s *receipts.SigRecord) { s.Signature[10] ^= 0x01 })
			},
			code: receipts.SigInvalid,
		},
		{
			name: "malleated S+ℓ",
			mutate: func(t *testing.T, r *receipts.Receipt) {
				editSig(t, r, func(s *receipts.SigRecord) { copy(s.Signature[32:], addScalarL(s.Signature[32:])) })
			},
			code: receipts.SigInvalid,
		},
		{
			name: "small-order R",
			mutate: func(t *testing.T, r *receipts.Receipt) {
				editSig(t, r, func(s *receipts.SigRecord) { copy(s.Signature[:32], identity) })
			},
			code: receipts.SigInvalid,
		},
		{
			name: "signature 63 bytes",
			mutate: func(t *testing.T, r *receipts.Receipt) {
				editSig(t, r, func(s *receipts.SigRecord) { s.Signature = s.Signature[:63] })
			},
			code: receipts.SigInvalid,
		},
		{
			name:   "garbage signature record",
			mutate: func(_ *testing.T, r *receipts.Receipt) { r.Sig = []byte("\xff\x00garbage") },
			code:   receipts.SigParseError,
		},
		{
			name:   "signature record not a map",
			mutate: func(_ *testing.T, r *receipts.Receipt) { r.Sig = []byte{0x18, 0x2a} },
			code:   receipts.SigParseError,
		},
		{
			name: "signature record schema",
			mutate: func(t *testing.T, r *receipts.Receipt) {
				editSig(t, r, func(s *receipts.SigRecord) { s.Schema = "cuecrux.receipt.sig.v1" })
			},
			code: receipts.SigParseError,
		},
		{
			name: "signature record signed_at not RFC 3339",
			mutate: func(t *testing.T, r *receipts.Receipt) {
				sig, err := r.SigRecord()
				require.NoError(t, err)
				r.Sig, err = cbor.Marshal(map[string]any{
					"schema": sig.Schema, "receipt_id": sig.ReceiptID, "alg": sig.Alg, "key_id": sig.KeyID,
					"signed_at": "yesterday", "signature": sig.Signature, "signed_payload_hash": sig.SignedPayloadHash,
				})
				require.NoError(t, err)
			},
			code: receipts.SigParseError,
		},
		{
			name:   "missing signature",
			mutate: func(_ *testing.T, r *receipts.Receipt) { r.Sig = nil },
			code:   receipts.SigMissing,
		},
		{
			name: "wrong alg",
			mutate: func(t *testing.T, r *receipts.Receipt) {
				editSig(t, r, func(s *receipts.SigRecord) { s.Alg = "rsa-pss" })
			},
			code: receipts.SigAlgUnsupported,
		},
		{
			name: "receipt id mismatch",
			mutate: func(t *testing.T, r *receipts.Receipt) {
				editSig(t, r, func(s *receipts.SigRecord) { s.ReceiptID = "r_other" })
			},
			code: receipts.SigReceiptIDMismatch,
		},
		{
			name: "signed_payload_hash short",
			mutate: func(t *testing.T, r *receipts.Receipt) {
				editSig(t, r, func(s *receipts.SigRecord) { s.SignedPayloadHash = s.SignedPayloadHash[:31] })
			},
			code: receipts.SigPayloadHashMismatch,
		},
		{
			name:    "nil keyring",
			keyring: func() *receipts.Keyring { return nil },
			code:    receipts.KeyringMissing,
		},
		{
			name:    "keyring lacks the key",
			keyring: func() *receipts.Keyring { return receipts.NewKeyring(other.Public()) },
			code:    receipts.KeyNotFound,
		},
		{
			name: "key id swapped to another key in the keyring",
			mutate: func(t *testing.T, r *receipts.Receipt) {
				editSig(t, r, func(s *receipts.SigRecord) { s.KeyID = other.KeyID() })
			},
			keyring: func() *receipts.Keyring { return receipts.NewKeyring(s.Public(), other.Public()) },
			code:    receipts.SigInvalid,
		},
		{
			name:    "different key under the same id",
			keyring: func() *receipts.Keyring { return keyringWith(s.KeyID(), other.Public()) },
			code:    receipts.SigInvalid,
		},
		{
			name:    "public key of 31 bytes",
			keyring: func() *receipts.Keyring { return keyringWith(s.KeyID(), s.Public()[:31]) },
			code:    receipts.PubkeyInvalid,
		},
		{
			name:    "public key not on the curve",
			keyring: func() *receipts.Keyring { return keyringWith(s.KeyID(), notOnCurve) },
			code:    receipts.PubkeyInvalid,
		},
		{
			name:    "small-order public key",
			keyring: func() *receipts.Keyring { return keyringWith(s.KeyID(), identity) },
			code:    receipts.PubkeyInvalid,
		},
		{
			name: "non-CBOR body",
			mutate: func(t *testing.T, r *receipts.Receipt) {
				r.Body = []byte("\xffnot cbor")
				rehash(r)
				editSig(t, r, func(s *receipts.SigRecord) { s.SignedPayloadHash = bytes.Clone(r.PayloadHash) })
			},
			code: receipts.BodyCBORParseError,
		},
		{
			name:   "empty body",
			mutate: func(_ *testing.T, r *receipts.Receipt) { r.Body = nil; rehash(r) },
			code:   receipts.BodyCBORParseError,
		},
		{
			name:   "stored tenant relabelled",
			mutate: func(_ *testing.T, r *receipts.Receipt) { r.Tenant = "globex" },
			code:   receipts.BodyHeaderMismatch, sigOK: true,
		},
		{
			name:   "stored kind relabelled",
			mutate: func(_ *testing.T, r *receipts.Receipt) { r.Kind = "forget" },
			code:   receipts.BodyHeaderMismatch, sigOK: true,
		},
		{
			name:   "stored seq relabelled",
			mutate: func(_ *testing.T, r *receipts.Receipt) { r.Seq = 7 },
			code:   receipts.BodyHeaderMismatch, sigOK: true,
		},
		{
			name: "stored id relabelled with the signature record",
			mutate: func(t *testing.T, r *receipts.Receipt) {
				r.ID = "r_00000000000000000000000000000000"
				editSig(t, r, func(s *receipts.SigRecord) { s.ReceiptID = r.ID })
			},
			code: receipts.BodyHeaderMismatch, sigOK: true,
		},
		{
			name: "validly signed body that is not a receipt",
			mutate: func(t *testing.T, r *receipts.Receipt) {
				r.Body = []byte{0x82, 0x01, 0x02} // [1, 2]
				rehash(r)
				sig, err := s.Sign(r.Body)
				require.NoError(t, err)
				editSig(t, r, func(rec *receipts.SigRecord) {
					rec.Signature, rec.SignedPayloadHash = sig, bytes.Clone(r.PayloadHash)
				})
			},
			code: receipts.BodyHeaderMismatch, sigOK: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := clone(good)
			if tt.mutate != nil {
				tt.mutate(t, r)
			}
			kr := receipts.NewKeyring(s.Public())
			if tt.keyring != nil {
				kr = tt.keyring()
			}
			rep := receipts.Verify(r, kr, testNow)
			assert.Equal(t, tt.code, rep.ErrorCode, rep.ErrorMessage)
			assert.Equal(t, tt.sigOK, rep.SignatureValid)
			if tt.code == receipts.OK {
				assert.Empty(t, rep.ErrorMessage)
			} else {
				assert.NotEmpty(t, rep.ErrorMessage)
			}
		})
	}
}

// TestVerifyIdentityKeyForgery shows why Verify checks small-order keys:
// Go's ed25519.Verify accepts R = identity, S = 0 for any message under the
// identity public key.
func TestVerifyIdentityKeyForgery(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	r := appendOne(t, db, s, "acme", "forget", nil)
	identity := make([]byte, 32)
	identity[0] = 1
	forged := make([]byte, 64)
	forged[0] = 1
	require.True(t, ed25519.Verify(identity, r.Body, forged), "Go's Verify accepts the forgery")

	editSig(t, r, func(rec *receipts.SigRecord) { rec.Signature = forged; rec.KeyID = "p_evil" })
	kr := &receipts.Keyring{}
	require.NoError(t, kr.Add("p_evil", identity))
	rep := receipts.Verify(r, kr, testNow)
	assert.Equal(t, receipts.PubkeyInvalid, rep.ErrorCode)
	assert.False(t, rep.SignatureValid)
}

func TestVerifyNil(t *testing.T) {
	rep := receipts.Verify(nil, nil, testNow)
	assert.Equal(t, receipts.BodyHashMismatch, rep.ErrorCode)
	assert.False(t, rep.OK())
}

func TestExport(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	kr := receipts.NewKeyring(s.Public())
	r := appendOne(t, db, s, "acme", "memory_use", map[string]any{"entries": []string{"f_1"}})

	b, err := json.Marshal(receipts.Export(r))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	assert.ElementsMatch(t, []string{"receipt_id", "tenant_id", "kind", "seq", "body_cbor_hex", "payload_hash_hex", "sig_cbor_hex"}, keysOf(m))

	var e receipts.Exported
	require.NoError(t, json.Unmarshal(b, &e))
	back, err := e.Receipt()
	require.NoError(t, err)
	assert.Equal(t, r, back)
	assert.Equal(t, receipts.OK, receipts.Verify(back, kr, testNow).ErrorCode)

	// Relabelling the exported tenant is caught.
	e.TenantID = "globex"
	relabelled, err := e.Receipt()
	require.NoError(t, err)
	assert.Equal(t, receipts.BodyHeaderMismatch, receipts.Verify(relabelled, kr, testNow).ErrorCode)

	for _, field := range []string{"body", "hash", "sig"} {
		bad := receipts.Export(r)
		switch field {
		case "body":
			bad.BodyCBORHex = "zz"
		case "hash":
			bad.PayloadHashHex = "0"
		case "sig":
			bad.SigCBORHex = "xyz"
		}
		_, err := bad.Receipt()
		assert.Error(t, err, field)
	}
}

func keysOf(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestAppendErrors(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	tests := []struct {
		name    string
		signer  receipts.Signer
		tenant  string
		kind    string
		payload any
		want    string
	}{
		{"nil signer", nil, "t", "forget", nil, "nil signer"},
		{"empty kind", s, "t", "", nil, "empty kind"},
		{"NUL in tenant", s, "a\x00b", "forget", nil, "NUL"},
		{"payload that does not encode", s, "t", "forget", make(chan int), "payload"},
		{"signer with empty key id", badSigner{s, "", nil, nil}, "t", "forget", nil, "empty key id"},
		{"signer returning a short signature", badSigner{s, "k", []byte{1, 2, 3}, nil}, "t", "forget", nil, "want an Ed25519 signature"},
		{"signer returning a wrong signature", badSigner{s, "k", make([]byte, 64), nil}, "t", "forget", nil, "does not verify"},
		{"signer failing", badSigner{s, "k", nil, errors.New("kms down")}, "t", "forget", nil, "kms down"},
		{"signer with a small-order key", weakSigner{}, "t", "forget", nil, "small order"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := db.Update(context.Background(), func(tx store.Tx) error {
				_, err := receipts.Append(tx, tt.signer, tt.tenant, tt.kind, "", tt.payload, testNow)
				return err
			})
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	// Nothing was written.
	assert.Empty(t, chainOf(t, db, "t", 0))

	t.Run("read-only transaction", func(t *testing.T) {
		err := db.View(context.Background(), func(tx store.Tx) error {
			_, err := receipts.Append(tx, s, "t", "forget", "", nil, testNow)
			return err
		})
		assert.ErrorIs(t, err, store.ErrReadOnly)
	})
}

// badSigner is a Signer over s with key id id whose Sign returns sig, or
// fails with err.
type badSigner struct {
	s   *receipts.Ed25519Signer
	id  string
	sig []byte
	err error
}

func (b badSigner) KeyID() string               { return b.id }
func (b badSigner) Public() ed25519.PublicKey   { return b.s.Public() }
func (b badSigner) Sign([]byte) ([]byte, error) { return b.sig, b.err }

// weakSigner has the identity point as public key and "signs" with
// R = identity, S = 0, which Go's ed25519.Verify accepts for any message.
type weakSigner struct{}

func (weakSigner) KeyID() string { return "weak" }
func (weakSigner) Public() ed25519.PublicKey {
	pub := make([]byte, 32)
	pub[0] = 1
	return pub
}
func (weakSigner) Sign([]byte) ([]byte, error) {
	sig := make([]byte, 64)
	sig[0] = 1
	return sig, nil
}

// kmsSigner is a well-behaved Signer that is not an *Ed25519Signer.
type kmsSigner struct{ s *receipts.Ed25519Signer }

func (k kmsSigner) KeyID() string                   { return "kms-key-1" }
func (k kmsSigner) Public() ed25519.PublicKey       { return k.s.Public() }
func (k kmsSigner) Sign(msg []byte) ([]byte, error) { return k.s.Sign(msg) }

func TestCustomSigner(t *testing.T) {
	db := openDB(t)
	k := kmsSigner{signerFromByte(3)}
	r := appendOne(t, db, k, "acme", "decision", nil)
	kr := &receipts.Keyring{}
	require.NoError(t, kr.Add("kms-key-1", k.Public()))
	rep := receipts.Verify(r, kr, testNow)
	assert.Equal(t, receipts.OK, rep.ErrorCode, rep.ErrorMessage)
	assert.Equal(t, receipts.Fingerprint(k.Public()), rep.PubkeyFingerprint)
	assert.Equal(t, "kms-key-1", rep.Signature.KeyID)
}

func TestGetNotFound(t *testing.T) {
	db := openDB(t)
	for _, id := range []string{"r_00000000000000000000000000000000", ""} {
		err := db.View(context.Background(), func(tx store.Tx) error {
			_, err := receipts.Get(tx, id)
			return err
		})
		assert.ErrorIs(t, err, store.ErrNotFound, id)
	}
}

// TestAppendRollback: a receipt appended in an Update that then fails
// leaves no receipt and does not advance the chain.
func TestAppendRollback(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	first := appendOne(t, db, s, "acme", "forget", nil)

	boom := errors.New("boom")
	var lost *receipts.Receipt
	err := db.Update(context.Background(), func(tx store.Tx) error {
		var err error
		lost, err = receipts.Append(tx, s, "acme", "forget", "", nil, testNow)
		require.NoError(t, err)
		require.Equal(t, uint64(2), lost.Seq)
		return boom
	})
	require.ErrorIs(t, err, boom)

	err = db.View(context.Background(), func(tx store.Tx) error {
		_, err := receipts.Get(tx, lost.ID)
		return err
	})
	assert.ErrorIs(t, err, store.ErrNotFound)
	assert.Equal(t, []*receipts.Receipt{first}, chainOf(t, db, "acme", 0))

	next := appendOne(t, db, s, "acme", "forget", nil)
	assert.Equal(t, uint64(2), next.Seq)
	assert.NoError(t, verifyStored(t, db, "acme"))
}

// TestConcurrentAppend: many goroutines appending to one tenant produce a
// gap-free chain.
func TestConcurrentAppend(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	const goroutines, each = 32, 8
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*each)
	for range goroutines {
		wg.Go(func() {
			for range each {
				errs <- db.Update(context.Background(), func(tx store.Tx) error {
					_, err := receipts.Append(tx, s, "acme", "memory_use", "", map[string]int{"n": 1}, time.Now())
					return err
				})
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	rs := chainOf(t, db, "acme", 0)
	require.Len(t, rs, goroutines*each)
	ids := map[string]bool{}
	for i, r := range rs {
		assert.Equal(t, uint64(i+1), r.Seq)
		ids[r.ID] = true
	}
	assert.Len(t, ids, goroutines*each)
	assert.NoError(t, receipts.VerifyChain(rs))
	assert.NoError(t, verifyStored(t, db, "acme"))
}

func TestHeaderErrors(t *testing.T) {
	valid := func() map[string]any {
		return map[string]any{
			"schema": receipts.BodySchema, "kind": "forget", "receipt_id": "r_1", "tenant_id": "acme", "seq": 1,
			"prev_hash": make([]byte, 32), "created_at": "2026-03-14T15:09:26Z", "actor": "", "payload": nil,
		}
	}
	tests := []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"valid", func(map[string]any) {}, ""},
		{"schema", func(m map[string]any) { m["schema"] = "cuecrux.receipt.body.v1" }, "schema"},
		{"no receipt_id", func(m map[string]any) { delete(m, "receipt_id") }, "empty receipt_id"},
		{"no kind", func(m map[string]any) { m["kind"] = "" }, "empty kind"},
		{"seq 0", func(m map[string]any) { m["seq"] = 0 }, "seq is 0"},
		{"seq negative", func(m map[string]any) { m["seq"] = -1 }, "body"},
		{"seq a string", func(m map[string]any) { m["seq"] = "1" }, "body"},
		{"prev_hash short", func(m map[string]any) { m["prev_hash"] = make([]byte, 31) }, "prev_hash is 31 bytes"},
		{"created_at", func(m map[string]any) { m["created_at"] = "14/03/2026" }, "created_at"},
		{"tenant in another case", func(m map[string]any) { m["Tenant_ID"] = "globex"; delete(m, "tenant_id") }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := valid()
			tt.edit(m)
			body, err := cbor.Marshal(m)
			require.NoError(t, err)
			h, err := (&receipts.Receipt{Body: body}).Header()
			if tt.want != "" {
				assert.ErrorContains(t, err, tt.want)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "r_1", h.ReceiptID)
			assert.Equal(t, m["tenant_id"], nilIfEmpty(h.TenantID), "field names match case-sensitively")
		})
	}

	t.Run("duplicate key", func(t *testing.T) {
		// {"schema": ..., "tenant_id": "a", "tenant_id": "b"}: two readers
		// could disagree, so it does not decode.
		body := []byte{0xa2, 0x69}
		body = append(body, "tenant_id"...)
		body = append(body, 0x61, 'a', 0x69)
		body = append(body, "tenant_id"...)
		body = append(body, 0x61, 'b')
		_, err := (&receipts.Receipt{Body: body}).Header()
		assert.ErrorContains(t, err, "duplicate")
	})
	t.Run("no payload", func(t *testing.T) {
		m := valid()
		delete(m, "payload")
		body, err := cbor.Marshal(m)
		require.NoError(t, err)
		var v any
		assert.ErrorContains(t, (&receipts.Receipt{Body: body}).Payload(&v), "no payload")
		assert.Error(t, (&receipts.Receipt{Body: []byte{0xff}}).Payload(&v))
	})
	t.Run("no signature record", func(t *testing.T) {
		_, err := (&receipts.Receipt{}).SigRecord()
		assert.Error(t, err)
	})
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func TestMalformedHead(t *testing.T) {
	db := openDB(t)
	s := signerFromByte(1)
	appendOne(t, db, s, "acme", "forget", nil)
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		return tx.Put("receipts.head", []byte("acme\x00"), []byte{1, 2, 3})
	}))
	err := db.Update(context.Background(), func(tx store.Tx) error {
		_, err := receipts.Append(tx, s, "acme", "forget", "", nil, testNow)
		return err
	})
	assert.ErrorContains(t, err, "chain head")
	assert.ErrorContains(t, verifyStored(t, db, "acme"), "chain head")
}
