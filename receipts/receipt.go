package receipts

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
	"lukechampine.com/blake3"

	"github.com/crux-go/crux/internal/codec"
	"github.com/crux-go/crux/store"
)

// Schemas and the signature algorithm of the wire format.
const (
	BodySchema   = "crux.receipt.body.v1"
	SigSchema    = "crux.receipt.sig.v1"
	VerifySchema = "crux.receipt.verify.v1"
	AlgEd25519   = "ed25519"
)

// HashSize is the size of a BLAKE3 body hash and of prev_hash.
const HashSize = 32

// timeLayout is RFC 3339 with nine fractional digits, used for created_at
// and signed_at (always UTC).
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// Buckets. See the package doc for their keys and values.
const (
	bucketReceipts = "receipts"       // receipt id → CBOR record
	bucketChain    = "receipts.chain" // tenant, NUL, seq (8 bytes BE) → receipt id
	bucketHead     = "receipts.head"  // tenant, NUL → seq (8 bytes BE), BLAKE3 of the body (32 bytes)
)

// Receipt is one signed receipt: its wire bytes and the fields stored next
// to them for indexing. Only Body is signed; [Verify] checks that ID,
// Tenant, Kind and Seq agree with it.
type Receipt struct {
	ID          string // "r_" and 32 lowercase hex digits
	Tenant      string
	Kind        string
	Seq         uint64 // 1-based position in the tenant's chain
	Body        []byte // the CBOR body, exactly as hashed and signed
	PayloadHash []byte // BLAKE3 of Body, as stored when it was minted
	Sig         []byte // the CBOR signature record
}

// Header is the decoded body of a receipt, without its payload.
type Header struct {
	Schema    string
	Kind      string
	ReceiptID string
	TenantID  string
	Seq       uint64
	PrevHash  []byte // HashSize bytes; zero for seq 1
	CreatedAt time.Time
	Actor     string
}

// wireBody is the body as encoded: fields in wire order.
type wireBody struct {
	Schema    string          `cbor:"schema"`
	Kind      string          `cbor:"kind"`
	ReceiptID string          `cbor:"receipt_id"`
	TenantID  string          `cbor:"tenant_id"`
	Seq       uint64          `cbor:"seq"`
	PrevHash  []byte          `cbor:"prev_hash"`
	CreatedAt string          `cbor:"created_at"`
	Actor     string          `cbor:"actor"`
	Payload   cbor.RawMessage `cbor:"payload"`
}

// wireHeader decodes a body without copying its payload.
type wireHeader struct {
	Schema    string `cbor:"schema"`
	Kind      string `cbor:"kind"`
	ReceiptID string `cbor:"receipt_id"`
	TenantID  string `cbor:"tenant_id"`
	Seq       uint64 `cbor:"seq"`
	PrevHash  []byte `cbor:"prev_hash"`
	CreatedAt string `cbor:"created_at"`
	Actor     string `cbor:"actor"`
}

// SigRecord is the decoded signature record (CueCrux's receipt signature
// record, version 1).
// It encodes to and decodes from its CBOR wire form with MarshalCBOR and
// UnmarshalCBOR; decoding checks the schema and the time format only, so
// that [Verify] can name every other defect.
type SigRecord struct {
	Schema            string
	ReceiptID         string
	Alg               string
	KeyID             string
	SignedAt          time.Time
	Signature         []byte // 64 bytes: Ed25519 over the body bytes
	SignedPayloadHash []byte // 32 bytes: BLAKE3 of the body bytes
}

type wireSig struct {
	Schema            string `cbor:"schema"`
	ReceiptID         string `cbor:"receipt_id"`
	Alg               string `cbor:"alg"`
	KeyID             string `cbor:"key_id"`
	SignedAt          string `cbor:"signed_at"`
	Signature         []byte `cbor:"signature"`
	SignedPayloadHash []byte `cbor:"signed_payload_hash"`
}

// record is a receipt as stored in the "receipts" bucket, under its id.
type record struct {
	Tenant      string `cbor:"tenant_id"`
	Kind        string `cbor:"kind"`
	Seq         uint64 `cbor:"seq"`
	Body        []byte `cbor:"body"`
	PayloadHash []byte `cbor:"payload_hash"`
	Sig         []byte `cbor:"sig"`
}

// Encoders and decoder. The body and the signature record keep their
// declared field order (SortNone encodes struct fields in declaration
// order); payloads use core deterministic encoding. Decoding rejects
// duplicate map keys and matches field names case-sensitively, so a body
// cannot say two things about one field.
var (
	wireEnc    = codec.Must(cbor.EncOptions{Time: cbor.TimeRFC3339Nano}.EncMode())
	payloadEnc = codec.Must(func() cbor.EncOptions {
		o := cbor.CoreDetEncOptions()
		o.Time = cbor.TimeRFC3339Nano
		return o
	}().EncMode())
	wireDec = codec.Must(cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		FieldNameMatching: cbor.FieldNameMatchingCaseSensitive,
	}.DecMode())
)

// Header decodes the receipt's body header and checks its shape: schema
// crux.receipt.body.v1, non-empty receipt_id and kind, seq ≥ 1, a 32-byte
// prev_hash and an RFC 3339 created_at. It does not compare it with the
// receipt's fields; [Verify] does.
func (r *Receipt) Header() (Header, error) {
	var w wireHeader
	if err := wireDec.Unmarshal(r.Body, &w); err != nil {
		return Header{}, fmt.Errorf("receipts: body: %w", err)
	}
	h := Header{
		Schema: w.Schema, Kind: w.Kind, ReceiptID: w.ReceiptID, TenantID: w.TenantID,
		Seq: w.Seq, PrevHash: w.PrevHash, Actor: w.Actor,
	}
	switch {
	case w.Schema != BodySchema:
		return Header{}, fmt.Errorf("receipts: body: schema %q, want %q", w.Schema, BodySchema)
	case w.ReceiptID == "":
		return Header{}, errors.New("receipts: body: empty receipt_id")
	case w.Kind == "":
		return Header{}, errors.New("receipts: body: empty kind")
	case w.Seq == 0:
		return Header{}, errors.New("receipts: body: seq is 0 (it counts from 1)")
	case len(w.PrevHash) != HashSize:
		return Header{}, fmt.Errorf("receipts: body: prev_hash is %d bytes, want %d", len(w.PrevHash), HashSize)
	}
	t, err := time.Parse(time.RFC3339Nano, w.CreatedAt)
	if err != nil {
		return Header{}, fmt.Errorf("receipts: body: created_at: %w", err)
	}
	h.CreatedAt = t
	return h, nil
}

// Payload decodes the body's payload into v, as cbor.Unmarshal would.
func (r *Receipt) Payload(v any) error {
	var w struct {
		Payload cbor.RawMessage `cbor:"payload"`
	}
	if err := wireDec.Unmarshal(r.Body, &w); err != nil {
		return fmt.Errorf("receipts: body: %w", err)
	}
	if w.Payload == nil {
		return errors.New("receipts: body has no payload")
	}
	if err := wireDec.Unmarshal(w.Payload, v); err != nil {
		return fmt.Errorf("receipts: payload: %w", err)
	}
	return nil
}

// SigRecord decodes the receipt's signature record.
func (r *Receipt) SigRecord() (SigRecord, error) {
	var s SigRecord
	if len(r.Sig) == 0 {
		return s, errors.New("receipts: no signature record")
	}
	err := s.UnmarshalCBOR(r.Sig)
	return s, err
}

// MarshalCBOR encodes s in its wire form: a CBOR map with the keys schema,
// receipt_id, alg, key_id, signed_at (RFC 3339, UTC), signature and
// signed_payload_hash, in that order.
func (s SigRecord) MarshalCBOR() ([]byte, error) {
	return wireEnc.Marshal(wireSig{
		Schema: s.Schema, ReceiptID: s.ReceiptID, Alg: s.Alg, KeyID: s.KeyID,
		SignedAt: s.SignedAt.UTC().Format(timeLayout), Signature: s.Signature,
		SignedPayloadHash: s.SignedPayloadHash,
	})
}

// UnmarshalCBOR decodes a signature record. The schema must be
// crux.receipt.sig.v1 and signed_at RFC 3339.
func (s *SigRecord) UnmarshalCBOR(b []byte) error {
	var w wireSig
	if err := wireDec.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("receipts: signature record: %w", err)
	}
	if w.Schema != SigSchema {
		return fmt.Errorf("receipts: signature record: schema %q, want %q", w.Schema, SigSchema)
	}
	t, err := time.Parse(time.RFC3339Nano, w.SignedAt)
	if err != nil {
		return fmt.Errorf("receipts: signature record: signed_at: %w", err)
	}
	*s = SigRecord{
		Schema: w.Schema, ReceiptID: w.ReceiptID, Alg: w.Alg, KeyID: w.KeyID, SignedAt: t,
		Signature: w.Signature, SignedPayloadHash: w.SignedPayloadHash,
	}
	return nil
}

// newID returns a fresh receipt id: "r_" and 32 lowercase hex digits.
func newID() string { return store.NewID("r_") }

// checkTenant rejects tenants that would make chain keys ambiguous.
func checkTenant(tenant string) error {
	if strings.IndexByte(tenant, 0) >= 0 {
		return fmt.Errorf("receipts: tenant %q contains a NUL byte", tenant)
	}
	return nil
}

// headKey is tenant, NUL: never empty, even for the empty tenant.
func headKey(tenant string) []byte { return append([]byte(tenant), 0) }

// chainKey is tenant, NUL, seq (8 bytes big-endian).
func chainKey(tenant string, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(headKey(tenant), seq)
}

// head reads the tenant's chain head: the last seq and its body hash, or
// 0 and zero when the tenant has no receipts.
func head(tx store.Tx, tenant string) (seq uint64, hash [HashSize]byte, err error) {
	v, err := tx.Get(bucketHead, headKey(tenant))
	if errors.Is(err, store.ErrNotFound) {
		return 0, hash, nil
	}
	if err != nil {
		return 0, hash, err
	}
	if len(v) != 8+HashSize {
		return 0, hash, fmt.Errorf("receipts: chain head of tenant %q is %d bytes, want %d", tenant, len(v), 8+HashSize)
	}
	copy(hash[:], v[8:])
	return binary.BigEndian.Uint64(v), hash, nil
}

// Append mints the next receipt of tenant's chain in tx and returns it.
//
// It reads the tenant's chain head, encodes the body (kind, actor, payload
// and now as created_at; payload is any value that CBOR-encodes, typically
// a struct or a map), has s sign it, and writes the receipt, its chain
// index entry and the new head, all in tx: the receipt commits or rolls
// back with the change it attests, and Append has no effect outside tx. kind
// must not be empty, and tenant must not contain a NUL byte. tenant, kind,
// actor and every text string of the payload must be valid UTF-8 (else the
// error wraps store.ErrInvalidUTF8 and nothing is written): the body is
// decoded to verify the receipt, and a decoder rejects invalid text, so
// such a receipt could never verify. A Signer other
// than [*Ed25519Signer] has its public key and its signature checked (as
// [Verify] would) before anything is written.
func Append(tx store.Tx, s Signer, tenant, kind, actor string, payload any, now time.Time) (*Receipt, error) {
	pl, err := payloadEnc.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("receipts: append: payload: %w", err)
	}
	return appendEncoded(tx, s, tenant, kind, actor, pl, now)
}

// appendEncoded is [Append] with the payload already encoded.
func appendEncoded(tx store.Tx, s Signer, tenant, kind, actor string, pl cbor.RawMessage, now time.Time) (*Receipt, error) {
	switch {
	case s == nil:
		return nil, errors.New("receipts: append: nil signer")
	case kind == "":
		return nil, errors.New("receipts: append: empty kind")
	case !tx.Writable():
		return nil, fmt.Errorf("receipts: append: %w", store.ErrReadOnly)
	}
	if err := checkTenant(tenant); err != nil {
		return nil, err
	}
	for _, f := range []struct{ name, s string }{{"tenant_id", tenant}, {"kind", kind}, {"actor", actor}} {
		if !utf8.ValidString(f.s) {
			return nil, fmt.Errorf("receipts: append: %w", &store.TextError{Record: "receipt body", Field: f.name})
		}
	}
	keyID := s.KeyID()
	if keyID == "" {
		return nil, errors.New("receipts: append: signer has an empty key id")
	}

	last, prev, err := head(tx, tenant)
	if err != nil {
		return nil, err
	}
	if last == math.MaxUint64 {
		return nil, fmt.Errorf("receipts: append: chain of tenant %q is full", tenant)
	}
	seq := last + 1
	id := newID()
	if _, err := tx.Get(bucketReceipts, []byte(id)); err == nil {
		return nil, fmt.Errorf("receipts: append: receipt id %s already exists", id)
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}

	if err := checkPayloadText(pl); err != nil {
		return nil, fmt.Errorf("receipts: append: %w", err)
	}
	now = now.UTC()
	body, err := wireEnc.Marshal(wireBody{
		Schema: BodySchema, Kind: kind, ReceiptID: id, TenantID: tenant, Seq: seq,
		PrevHash: prev[:], CreatedAt: now.Format(timeLayout), Actor: actor, Payload: pl,
	})
	if err != nil {
		return nil, fmt.Errorf("receipts: append: body: %w", err)
	}
	sum := blake3.Sum256(body)

	sig, err := s.Sign(body)
	if err != nil {
		return nil, fmt.Errorf("receipts: append: sign: %w", err)
	}
	if len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("receipts: append: signer returned %d bytes, want an Ed25519 signature of %d", len(sig), ed25519.SignatureSize)
	}
	if _, builtin := s.(*Ed25519Signer); !builtin {
		pub := s.Public()
		if bad := checkPublicKey(pub); bad != "" {
			return nil, fmt.Errorf("receipts: append: signer %s: %s", keyID, bad)
		}
		if !ed25519.Verify(pub, body, sig) {
			return nil, fmt.Errorf("receipts: append: signer %s returned a signature that does not verify with its public key", keyID)
		}
	}
	sigRec, err := SigRecord{
		Schema: SigSchema, ReceiptID: id, Alg: AlgEd25519, KeyID: keyID, SignedAt: now,
		Signature: sig, SignedPayloadHash: sum[:],
	}.MarshalCBOR()
	if err != nil {
		return nil, fmt.Errorf("receipts: append: signature record: %w", err)
	}

	r := &Receipt{ID: id, Tenant: tenant, Kind: kind, Seq: seq, Body: body, PayloadHash: sum[:], Sig: sigRec}
	rec, err := wireEnc.Marshal(record{Tenant: tenant, Kind: kind, Seq: seq, Body: body, PayloadHash: sum[:], Sig: sigRec})
	if err != nil {
		return nil, fmt.Errorf("receipts: append: record: %w", err)
	}
	if err := countForActor(tx, tenant, kind, actor, now); err != nil { // before the first receipt is in
		return nil, err
	}
	if err := tx.Put(bucketReceipts, []byte(id), rec); err != nil {
		return nil, err
	}
	if err := tx.Put(bucketChain, chainKey(tenant, seq), []byte(id)); err != nil {
		return nil, err
	}
	headVal := binary.BigEndian.AppendUint64(make([]byte, 0, 8+HashSize), seq)
	if err := tx.Put(bucketHead, headKey(tenant), append(headVal, sum[:]...)); err != nil {
		return nil, err
	}
	return r, nil
}

// Get reads the receipt id. It returns an error wrapping store.ErrNotFound
// when there is none, and a *store.CorruptRecordError when its stored
// record does not decode.
func Get(tx store.Tx, id string) (*Receipt, error) {
	if id == "" {
		return nil, fmt.Errorf("receipts: empty receipt id: %w", store.ErrNotFound)
	}
	v, err := tx.Get(bucketReceipts, []byte(id))
	if err != nil {
		return nil, fmt.Errorf("receipts: receipt %s: %w", id, err)
	}
	return decodeRecord(id, v)
}

// decodeRecord decodes the stored record v of receipt id. The receipt
// shares no memory with v.
func decodeRecord(id string, v []byte) (*Receipt, error) {
	var rec record
	if err := wireDec.Unmarshal(v, &rec); err != nil { // copies every byte string out of v
		return nil, &store.CorruptRecordError{Bucket: bucketReceipts, Key: []byte(id), ID: id, Err: err}
	}
	return &Receipt{
		ID: id, Tenant: rec.Tenant, Kind: rec.Kind, Seq: rec.Seq,
		Body: rec.Body, PayloadHash: rec.PayloadHash, Sig: rec.Sig,
	}, nil
}

// Chain calls fn for each receipt of tenant's chain whose seq is at least
// fromSeq (0 and 1 both mean from the start), in seq order, as the chain
// index lists them. fn returning store.ErrStop ends the walk without error;
// any other error ends it and is returned. Chain visits the index keys
// below fromSeq without reading their receipts.
func Chain(tx store.Tx, tenant string, fromSeq uint64, fn func(*Receipt) error) error {
	return walkChain(tx, tenant, fromSeq, false, fn)
}

// ChainNewestFirst calls fn for each receipt of tenant's chain, newest
// (highest seq) first, as the chain index lists them. fn returning
// store.ErrStop ends the walk without error; any other error ends it and
// is returned. A walk stopped after n receipts reads n receipts.
func ChainNewestFirst(tx store.Tx, tenant string, fn func(*Receipt) error) error {
	return walkChain(tx, tenant, 0, true, fn)
}

// walkChain reads and visits the receipts of tenant's chain from fromSeq
// on, in seq order or, with reverse, in reverse.
func walkChain(tx store.Tx, tenant string, fromSeq uint64, reverse bool, fn func(*Receipt) error) error {
	return scanChain(tx, tenant, fromSeq, reverse, func(seq uint64, id string) error {
		r, err := Get(tx, id)
		if err != nil {
			return fmt.Errorf("receipts: chain of tenant %q at seq %d: %w", tenant, seq, err)
		}
		return fn(r)
	})
}

// scanChain calls fn with the seq and receipt id of each entry of
// tenant's chain index from fromSeq on, in seq order or, with reverse, in
// reverse.
func scanChain(tx store.Tx, tenant string, fromSeq uint64, reverse bool, fn func(seq uint64, id string) error) error {
	if err := checkTenant(tenant); err != nil {
		return err
	}
	prefix := headKey(tenant)
	return tx.Scan(bucketChain, prefix, reverse, func(k, v []byte) error {
		if len(k) != len(prefix)+8 {
			return fmt.Errorf("receipts: chain of tenant %q: malformed index key %x", tenant, k)
		}
		seq := binary.BigEndian.Uint64(k[len(prefix):])
		if seq < fromSeq {
			return nil
		}
		return fn(seq, string(v))
	})
}

// checkPayloadText returns a *store.TextError when the encoded payload pl
// holds text that is not valid UTF-8, which [Receipt.Payload] could not
// decode. Decoding it in full also covers a payload given pre-encoded (a
// cbor.RawMessage), whose text no check of Go strings would see.
func checkPayloadText(pl []byte) error {
	var v any
	err := wireDec.Unmarshal(pl, &v)
	var se *cbor.SemanticError
	if errors.As(err, &se) && strings.Contains(se.Error(), "UTF-8") {
		return &store.TextError{Record: "receipt body", Field: "payload"}
	}
	if err != nil {
		return fmt.Errorf("payload does not decode: %w", err)
	}
	return nil
}

// zeroHash reports whether h is HashSize zero bytes.
func zeroHash(h []byte) bool {
	return len(h) == HashSize && bytes.Equal(h, make([]byte, HashSize))
}
