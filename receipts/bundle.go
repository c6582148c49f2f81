package receipts

import (
	"archive/tar"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
	"lukechampine.com/blake3"

	"github.com/crux-go/crux/internal/codec"
	"github.com/crux-go/crux/store"
)

// Bundle format constants.
const (
	// BundleFormatVersion is the manifest version crux writes and the
	// only one [VerifyBundle] accepts.
	BundleFormatVersion = 3
	// BundleSignDomain starts the bytes the manifest signature covers,
	// followed by a NUL.
	BundleSignDomain = "cuecrux.audit_bundle.v3"
	// BundleSealDomain starts the seal and the bytes its signature
	// covers, followed by a NUL.
	BundleSealDomain = "crux.audit_bundle.seal.v1"
	// BundleVerifySchema is the schema of a [BundleReport].
	BundleVerifySchema = "crux.audit_bundle.verify.v1"

	// The member names.
	BundleManifestMember = "manifest.json"
	BundleEventsMember   = "events.jsonl"
	BundleReceiptsMember = "receipts.cbor"

	// MaxBundleBytes caps the size of a bundle, compressed or not, and
	// of each of its members, that VerifyBundle reads.
	MaxBundleBytes = 1 << 30
)

// Codes of [VerifyBundle], beside [OK], [PubkeyInvalid], [KeyNotFound],
// [SigInvalid] and the chain codes.
const (
	// BundleSealMissing: the file does not end with crux's seal frame.
	BundleSealMissing Code = "BUNDLE_SEAL_MISSING"
	// BundleSealInvalid: the SHA-256 of the bytes before the seal differs
	// from the seal's, or the seal's signature does not verify with the
	// manifest's key: some byte of the file changed after sealing.
	BundleSealInvalid Code = "BUNDLE_SEAL_INVALID"
	// BundleUnreadable: the bytes before the seal are not one zstd stream
	// holding a tar archive, or something in it is larger than
	// MaxBundleBytes.
	BundleUnreadable Code = "BUNDLE_UNREADABLE"
	// BundleMemberMissing: manifest.json, events.jsonl or receipts.cbor
	// is missing, or one of them appears twice.
	BundleMemberMissing Code = "BUNDLE_MEMBER_MISSING"
	// BundleManifestInvalid: manifest.json is not a JSON object of the
	// manifest's fields and types.
	BundleManifestInvalid Code = "BUNDLE_MANIFEST_INVALID"
	// BundleVersionUnsupported: bundle_format_version is not 3.
	BundleVersionUnsupported Code = "BUNDLE_VERSION_UNSUPPORTED"
	// BundleKeyClassMissing: the manifest has no key_class.
	BundleKeyClassMissing Code = "BUNDLE_KEY_CLASS_MISSING"
	// BundleEventsHashMismatch: the SHA-256 of events.jsonl differs from
	// events_jsonl_sha256.
	BundleEventsHashMismatch Code = "BUNDLE_EVENTS_HASH_MISMATCH"
	// BundleReceiptsHashMismatch: the SHA-256 of receipts.cbor differs
	// from receipts_cbor_sha256.
	BundleReceiptsHashMismatch Code = "BUNDLE_RECEIPTS_HASH_MISMATCH"
	// BundleEventsInvalid: a line of events.jsonl is not a fact event.
	BundleEventsInvalid Code = "BUNDLE_EVENTS_INVALID"
	// BundleReceiptsInvalid: receipts.cbor is not an array of receipts.
	BundleReceiptsInvalid Code = "BUNDLE_RECEIPTS_INVALID"
	// BundleCountMismatch: fact_count or receipt_count differs from the
	// members' content.
	BundleCountMismatch Code = "BUNDLE_COUNT_MISMATCH"
	// BundleReceiptInvalid: a receipt of the bundle fails [Verify].
	BundleReceiptInvalid Code = "BUNDLE_RECEIPT_INVALID"
)

// BundleEvent is one line of events.jsonl: a version of a fact.
type BundleEvent struct {
	FactID        string  `json:"fact_id"`
	Entity        string  `json:"entity"`
	Key           string  `json:"key"`
	Value         string  `json:"value"`
	SourceReceipt string  `json:"source_receipt,omitempty"`
	Confidence    float64 `json:"confidence"`
	StoredAt      string  `json:"stored_at"` // RFC 3339, UTC
	Tokens        int     `json:"tokens"`
	Deleted       bool    `json:"deleted"`
	Version       uint32  `json:"version"`
	Supersedes    string  `json:"supersedes,omitempty"`
	SupersededBy  string  `json:"superseded_by,omitempty"`
}

// BundleScope is what a bundle covers besides its time window.
type BundleScope struct {
	TenantID        string `json:"tenant_id"`
	EntityPrefix    string `json:"entity_prefix,omitempty"`
	IncludePrivate  bool   `json:"include_private"`
	IncludeReserved bool   `json:"include_reserved"`
	Caller          string `json:"caller,omitempty"`
}

// BundleChain anchors a bundle's receipts in their tenant's chain: the
// seqs of the first and last receipt included, and the chain head when
// the bundle was made (its seq and the lowercase hex BLAKE3 of its body).
// When the last receipt is the head, its body must hash to HeadHash; a
// store whose chain later ends before HeadSeq has lost receipts.
type BundleChain struct {
	TenantID string `json:"tenant_id"`
	FirstSeq uint64 `json:"first_seq,omitempty"`
	LastSeq  uint64 `json:"last_seq,omitempty"`
	HeadSeq  uint64 `json:"head_seq"`
	HeadHash string `json:"head_hash,omitempty"`
}

// BundleManifest is manifest.json.
type BundleManifest struct {
	BundleFormatVersion int         `json:"bundle_format_version"`
	BundleID            string      `json:"bundle_id"`
	Since               string      `json:"since"`
	Until               string      `json:"until"`
	GeneratedAt         string      `json:"generated_at"`
	Scope               BundleScope `json:"scope"`
	FactCount           int         `json:"fact_count"`
	ReceiptCount        int         `json:"receipt_count"`
	// FactsTruncated and ReceiptsTruncated report that the window held
	// more than the bundle includes (the token budget, or the caps).
	FactsTruncated     bool        `json:"facts_truncated"`
	ReceiptsTruncated  bool        `json:"receipts_truncated"`
	Chain              BundleChain `json:"chain"`
	EventsJSONLSHA256  string      `json:"events_jsonl_sha256"`
	ReceiptsCBORSHA256 string      `json:"receipts_cbor_sha256"`
	SignerPublicKeyB64 string      `json:"signer_public_key_b64"`
	SignerKeyID        string      `json:"signer_key_id"`
	KeyClass           string      `json:"key_class"`
	SignatureB64       string      `json:"signature_b64"`
}

// Bundle is an audit bundle: a self-contained, signed tar.zst that an auditor
// verifies offline with [VerifyBundle] (crux verify bundle FILE).
// [WriteBundle] writes it from the manifest's descriptive fields (the
// hashes, counts, key and signature are filled in), the events and the
// receipts.
//
// # Layout
//
// A bundle is one zstd frame (level 3, with the content checksum) holding
// a tar archive (GNU headers, mode 0644) of three members, in this order:
//
//   - manifest.json: the [BundleManifest], indented JSON.
//   - events.jsonl: one [BundleEvent] per line (compact JSON, "\n" after
//     each), sorted by stored_at then fact id.
//   - receipts.cbor: a CBOR array of the bundle's receipts, each a map
//     {receipt_id, tenant_id, kind, seq, body, payload_hash, sig} whose
//     byte strings are the receipt's wire bytes; a consecutive stretch of
//     the tenant's chain, in seq order.
//
// Then a zstd skippable frame, the seal, which standard zstd decoders skip:
// magic 0x184D2A5E, its length (4 bytes, little-endian) and the seal
// itself: the text "crux.audit_bundle.seal.v1", a NUL, the SHA-256 of every
// byte of the file before the seal, and an Ed25519 signature of the text,
// the NUL and that SHA-256 together, by the manifest's key.
//
// # The manifest signature
//
// The manifest follows version 3 of the CueCrux audit-bundle format:
// events_jsonl_sha256 and receipts_cbor_sha256 are the lowercase hex
// SHA-256 of the members' bytes; signer_public_key_b64 is the 32-byte
// Ed25519 public key in standard base64; key_class is required (see
// [KeyClassOf]); signature_b64 is the Ed25519 signature, standard base64,
// of the bytes "cuecrux.audit_bundle.v3", a NUL, then the manifest as
// JSON with signature_b64 set to "", every object's keys sorted, no
// whitespace, and <, > and & written as they are. The verifier recomputes
// that JSON from the manifest as the file holds it, unknown fields
// included, and never from a re-encoding of typed fields.
//
// The manifest signature alone would let bytes outside what it covers
// change unnoticed: zstd frame header fields a decoder does not read, or
// the tar headers' times and padding. The seal covers every byte, so a
// bundle in which any byte differs from what was signed fails
// verification.
//
// # Codes
//
// [VerifyBundle] reports one [Code]: [OK], or the first failing check of
// this list, in this order: the seal's frame ([BundleSealMissing]); the
// archive ([BundleUnreadable], [BundleMemberMissing]); the manifest
// ([BundleManifestInvalid], [BundleVersionUnsupported],
// [BundleKeyClassMissing]); the key ([PubkeyInvalid], and [KeyNotFound]
// when a keyring is given that lacks the manifest's key id or holds
// another key under it); the seal's hash and signature
// ([BundleSealInvalid]); the manifest signature ([SigInvalid]); the
// members' hashes ([BundleEventsHashMismatch],
// [BundleReceiptsHashMismatch]); their content ([BundleEventsInvalid],
// [BundleReceiptsInvalid], [BundleCountMismatch]); each receipt as
// [Verify] checks it with the manifest's key and the keyring
// ([BundleReceiptInvalid], the receipt's own code in the message); the
// receipts' links and the chain anchor (the chain codes: [ChainGap],
// [ChainSeqOrder], [ChainPrevHashMismatch], [ChainRecordMismatch],
// [ChainHeadMismatch]).
type Bundle struct {
	Manifest BundleManifest
	Events   []BundleEvent
	Receipts []*Receipt
}

// bundleReceipt is an element of receipts.cbor.
type bundleReceipt struct {
	ReceiptID   string `cbor:"receipt_id"`
	TenantID    string `cbor:"tenant_id"`
	Kind        string `cbor:"kind"`
	Seq         uint64 `cbor:"seq"`
	Body        []byte `cbor:"body"`
	PayloadHash []byte `cbor:"payload_hash"`
	Sig         []byte `cbor:"sig"`
}

// sealMagic is the first four bytes of the seal frame: a zstd skippable
// frame magic, little-endian.
var sealMagic = []byte{0x5e, 0x2a, 0x4d, 0x18}

// sealPayloadLen is the size of the seal: the domain, a NUL, the SHA-256
// and the signature.
const sealPayloadLen = len(BundleSealDomain) + 1 + sha256.Size + ed25519.SignatureSize

// sealLen is the size of the seal frame.
const sealLen = 8 + sealPayloadLen

// WriteBundle writes b to w as a sealed tar.zst, signed by s, and returns
// the manifest as written. It fills the manifest's counts, member hashes,
// key fields (key_class from [KeyClassOf]) and signature; the caller sets
// the rest. Each receipt is written with its wire bytes unchanged.
func WriteBundle(w io.Writer, b *Bundle, s Signer) (BundleManifest, error) {
	if s == nil {
		return BundleManifest{}, errors.New("receipts: bundle: nil signer")
	}
	var events bytes.Buffer
	for i := range b.Events {
		line, err := codec.MarshalNoEscape(&b.Events[i])
		if err != nil {
			return BundleManifest{}, fmt.Errorf("receipts: bundle: event %s: %w", b.Events[i].FactID, err)
		}
		events.Write(line)
		events.WriteByte('\n')
	}
	rs := make([]bundleReceipt, len(b.Receipts))
	for i, r := range b.Receipts {
		rs[i] = bundleReceipt{ReceiptID: r.ID, TenantID: r.Tenant, Kind: r.Kind, Seq: r.Seq,
			Body: r.Body, PayloadHash: r.PayloadHash, Sig: r.Sig}
	}
	rcpts, err := wireEnc.Marshal(rs)
	if err != nil {
		return BundleManifest{}, fmt.Errorf("receipts: bundle: receipts: %w", err)
	}

	m := b.Manifest
	m.BundleFormatVersion = BundleFormatVersion
	m.FactCount, m.ReceiptCount = len(b.Events), len(b.Receipts)
	m.EventsJSONLSHA256 = sha256Hex(events.Bytes())
	m.ReceiptsCBORSHA256 = sha256Hex(rcpts)
	pub := s.Public()
	m.SignerPublicKeyB64 = base64.StdEncoding.EncodeToString(pub)
	m.SignerKeyID = s.KeyID()
	m.KeyClass = KeyClassOf(s)
	m.SignatureB64 = ""
	unsigned, err := json.Marshal(&m)
	if err != nil {
		return BundleManifest{}, err
	}
	msg, err := manifestSigningBytes(unsigned)
	if err != nil {
		return BundleManifest{}, err
	}
	sig, err := s.Sign(msg)
	if err != nil {
		return BundleManifest{}, fmt.Errorf("receipts: bundle: sign: %w", err)
	}
	if !ed25519.Verify(pub, msg, sig) {
		return BundleManifest{}, fmt.Errorf("receipts: bundle: signer %s returned a signature that does not verify with its public key", m.SignerKeyID)
	}
	m.SignatureB64 = base64.StdEncoding.EncodeToString(sig)
	manifest, err := json.MarshalIndent(&m, "", "  ")
	if err != nil {
		return BundleManifest{}, err
	}
	manifest = append(manifest, '\n')

	generated, err := time.Parse(time.RFC3339Nano, m.GeneratedAt)
	if err != nil {
		generated = time.Unix(0, 0)
	}
	var file bytes.Buffer
	zw, err := zstd.NewWriter(&file, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(true),
		zstd.WithEncoderConcurrency(1))
	if err != nil {
		return BundleManifest{}, err
	}
	tw := tar.NewWriter(zw)
	for _, member := range []struct {
		name string
		data []byte
	}{{BundleManifestMember, manifest}, {BundleEventsMember, events.Bytes()}, {BundleReceiptsMember, rcpts}} {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: member.name, Mode: 0o644, Size: int64(len(member.data)),
			ModTime: generated.UTC().Truncate(time.Second), Format: tar.FormatGNU}
		if err := tw.WriteHeader(hdr); err != nil {
			return BundleManifest{}, err
		}
		if _, err := tw.Write(member.data); err != nil {
			return BundleManifest{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return BundleManifest{}, err
	}
	if err := zw.Close(); err != nil {
		return BundleManifest{}, err
	}
	seal, err := sealFor(file.Bytes(), s)
	if err != nil {
		return BundleManifest{}, err
	}
	file.Write(seal)
	if _, err := w.Write(file.Bytes()); err != nil {
		return BundleManifest{}, err
	}
	return m, nil
}

// sealFor returns the seal frame over data, signed by s.
func sealFor(data []byte, s Signer) ([]byte, error) {
	sum := sha256.Sum256(data)
	msg := append(append([]byte(BundleSealDomain), 0), sum[:]...)
	sig, err := s.Sign(msg)
	if err != nil {
		return nil, fmt.Errorf("receipts: bundle: seal: %w", err)
	}
	if len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("receipts: bundle: seal: signer returned %d bytes, want %d", len(sig), ed25519.SignatureSize)
	}
	out := append([]byte(nil), sealMagic...)
	out = binary.LittleEndian.AppendUint32(out, uint32(sealPayloadLen))
	out = append(out, msg...)
	return append(out, sig...), nil
}

// manifestSigningBytes returns the bytes the manifest signature covers:
// the domain, a NUL and the canonical form of the manifest JSON raw,
// whose signature_b64 must already be "".
func manifestSigningBytes(raw []byte) ([]byte, error) {
	canon, err := canonicalJSON(raw)
	if err != nil {
		return nil, err
	}
	return append(append([]byte(BundleSignDomain), 0), canon...), nil
}

// canonicalJSON returns the JSON text raw with every object's keys sorted,
// no whitespace, numbers as written, and <, > and & unescaped.
func canonicalJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the JSON value")
	}
	return codec.MarshalNoEscape(v) // encoding/json sorts map keys
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// BundleReport is the outcome of [VerifyBundle].
type BundleReport struct {
	Schema       string `json:"schema"`
	BundleID     string `json:"bundle_id,omitempty"`
	TenantID     string `json:"tenant_id,omitempty"`
	FactCount    int    `json:"fact_count"`
	ReceiptCount int    `json:"receipt_count"`
	SignerKeyID  string `json:"signer_key_id,omitempty"`
	KeyClass     string `json:"key_class,omitempty"`
	// SealValid and SignatureValid report the whole-file seal and the
	// manifest signature; ReceiptsValid that every receipt verified and
	// the receipts link.
	SealValid      bool   `json:"seal_valid"`
	SignatureValid bool   `json:"signature_valid"`
	ReceiptsValid  bool   `json:"receipts_valid"`
	ErrorCode      Code   `json:"error_code"`
	ErrorMessage   string `json:"error_message,omitempty"`
	VerifiedAt     string `json:"verified_at"`
}

// OK reports whether the bundle verified.
func (r BundleReport) OK() bool { return r.ErrorCode == OK }

// VerifyBundle checks the bundle file data offline and reports the
// outcome; now is the report's verified_at. The manifest names its
// signing key; kr, when not nil, must hold that key under the manifest's
// key id (so the bundle is tied to a key the verifier trusts rather than
// to whatever key it carries), and verifies receipts signed by other keys
// too. The checks and their order are listed under Codes in the
// documentation of [Bundle]. VerifyBundle never panics, whatever data holds.
func VerifyBundle(data []byte, kr *Keyring, now time.Time) BundleReport {
	rep := BundleReport{Schema: BundleVerifySchema, VerifiedAt: now.UTC().Format(time.RFC3339Nano)}
	fail := func(code Code, format string, args ...any) BundleReport {
		rep.ErrorCode, rep.ErrorMessage = code, fmt.Sprintf(format, args...)
		return rep
	}

	// The seal frame, by its fixed shape.
	if len(data) < sealLen {
		return fail(BundleSealMissing, "the file is %d bytes, shorter than a seal", len(data))
	}
	body, seal := data[:len(data)-sealLen], data[len(data)-sealLen:]
	if !bytes.Equal(seal[:4], sealMagic) || binary.LittleEndian.Uint32(seal[4:8]) != uint32(sealPayloadLen) ||
		!bytes.Equal(seal[8:8+len(BundleSealDomain)+1], append([]byte(BundleSealDomain), 0)) {
		return fail(BundleSealMissing, "the file does not end with a %s seal", BundleSealDomain)
	}
	sealSum := seal[8+len(BundleSealDomain)+1 : 8+len(BundleSealDomain)+1+sha256.Size]
	sealSig := seal[8+len(BundleSealDomain)+1+sha256.Size:]

	members, code, msg := readBundle(body)
	if code != OK {
		return fail(code, "%s", msg)
	}
	rawManifest := members[BundleManifestMember]
	m, err := decodeManifest(rawManifest)
	if err != nil {
		return fail(BundleManifestInvalid, "manifest.json: %v", err)
	}
	rep.BundleID, rep.TenantID, rep.SignerKeyID, rep.KeyClass = m.BundleID, m.Scope.TenantID, m.SignerKeyID, m.KeyClass
	rep.FactCount, rep.ReceiptCount = m.FactCount, m.ReceiptCount
	if m.BundleFormatVersion != BundleFormatVersion {
		return fail(BundleVersionUnsupported, "bundle_format_version %d; crux verifies version %d", m.BundleFormatVersion, BundleFormatVersion)
	}
	if strings.TrimSpace(m.KeyClass) == "" {
		return fail(BundleKeyClassMissing, "the manifest has no key_class")
	}
	pub, keys, code, msg := bundleKeys(&m, kr)
	if code != OK {
		return fail(code, "%s", msg)
	}

	sum := sha256.Sum256(body)
	if !bytes.Equal(sum[:], sealSum) {
		return fail(BundleSealInvalid, "the SHA-256 of the bundle differs from the seal's: a byte changed after sealing")
	}
	if !verifyEd25519(pub, seal[8:8+len(BundleSealDomain)+1+sha256.Size], sealSig) {
		return fail(BundleSealInvalid, "the seal's signature does not verify with key %s", m.SignerKeyID)
	}
	rep.SealValid = true

	sig, err := base64.StdEncoding.Strict().DecodeString(m.SignatureB64)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return fail(SigInvalid, "signature_b64 is not a base64 Ed25519 signature")
	}
	unsigned, err := blankSignature(rawManifest)
	if err != nil {
		return fail(BundleManifestInvalid, "manifest.json: %v", err)
	}
	signed, err := manifestSigningBytes(unsigned)
	if err != nil {
		return fail(BundleManifestInvalid, "manifest.json: %v", err)
	}
	if !verifyEd25519(pub, signed, sig) {
		return fail(SigInvalid, "the manifest signature does not verify with key %s", m.SignerKeyID)
	}
	rep.SignatureValid = true

	rs, code, msg := checkMembers(&m, members)
	if code != OK {
		return fail(code, "%s", msg)
	}
	if code, msg := verifyBundleChain(m.Chain, rs, keys, now); code != OK {
		return fail(code, "%s", msg)
	}
	rep.ReceiptsValid = true
	rep.ErrorCode = OK
	return rep
}

// decodeManifest decodes manifest.json: one JSON object of the
// manifest's fields, no others, and nothing after it.
func decodeManifest(raw []byte) (BundleManifest, error) {
	var m BundleManifest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, err
	}
	if dec.More() {
		return m, errors.New("trailing data after the manifest")
	}
	return m, nil
}

// checkMembers checks events.jsonl and receipts.cbor against the hashes
// and counts of the manifest m, and returns the receipts decoded.
func checkMembers(m *BundleManifest, members map[string][]byte) ([]bundleReceipt, Code, string) {
	events, rcpts := members[BundleEventsMember], members[BundleReceiptsMember]
	if sha256Hex(events) != m.EventsJSONLSHA256 {
		return nil, BundleEventsHashMismatch, "the SHA-256 of events.jsonl is not events_jsonl_sha256"
	}
	if sha256Hex(rcpts) != m.ReceiptsCBORSHA256 {
		return nil, BundleReceiptsHashMismatch, "the SHA-256 of receipts.cbor is not receipts_cbor_sha256"
	}
	n, err := countEvents(events)
	if err != nil {
		return nil, BundleEventsInvalid, fmt.Sprintf("events.jsonl: %v", err)
	}
	var rs []bundleReceipt
	if err := wireDec.Unmarshal(rcpts, &rs); err != nil {
		return nil, BundleReceiptsInvalid, fmt.Sprintf("receipts.cbor: %v", err)
	}
	if n != m.FactCount || len(rs) != m.ReceiptCount {
		return nil, BundleCountMismatch, fmt.Sprintf("the manifest counts %d facts and %d receipts; the members hold %d and %d",
			m.FactCount, m.ReceiptCount, n, len(rs))
	}
	return rs, OK, ""
}

// bundleKeys reads the manifest's signing key and returns it with the
// keyring the bundle's receipts are verified with: kr when it is given,
// after checking that it holds that key under the manifest's key id, else
// the manifest's key alone. A key that does not read is refused.
func bundleKeys(m *BundleManifest, kr *Keyring) (ed25519.PublicKey, *Keyring, Code, string) {
	pub, err := base64.StdEncoding.Strict().DecodeString(m.SignerPublicKeyB64)
	if err != nil {
		return nil, nil, PubkeyInvalid, fmt.Sprintf("signer_public_key_b64: %v", err)
	}
	if bad := checkPublicKey(pub); bad != "" {
		return nil, nil, PubkeyInvalid, fmt.Sprintf("signer_public_key_b64: %s", bad)
	}
	keys := NewKeyring(pub)
	if m.SignerKeyID != Fingerprint(pub) {
		return nil, nil, PubkeyInvalid, fmt.Sprintf("signer_key_id %q is not the fingerprint %s of signer_public_key_b64", m.SignerKeyID, Fingerprint(pub))
	}
	if kr != nil {
		known, ok := kr.Lookup(m.SignerKeyID)
		if !ok || !bytes.Equal(known, pub) {
			return nil, nil, KeyNotFound, fmt.Sprintf("the keyring holds no key %s equal to the manifest's", m.SignerKeyID)
		}
		keys = kr
	}
	return pub, keys, OK, ""
}

// verifyBundleChain verifies each of a bundle's receipts with keys at now,
// that each is of the tenant of the manifest's chain a, that they link as
// one chain, and that they match a's anchor.
func verifyBundleChain(a BundleChain, rs []bundleReceipt, keys *Keyring, now time.Time) (Code, string) {
	chain := make([]*Receipt, len(rs))
	for i, br := range rs {
		r := &Receipt{ID: br.ReceiptID, Tenant: br.TenantID, Kind: br.Kind, Seq: br.Seq,
			Body: br.Body, PayloadHash: br.PayloadHash, Sig: br.Sig}
		if vr := Verify(r, keys, now); !vr.OK() {
			return BundleReceiptInvalid, fmt.Sprintf("receipt %s (seq %d): %s: %s", r.ID, r.Seq, vr.ErrorCode, vr.ErrorMessage)
		}
		if r.Tenant != a.TenantID {
			return ChainRecordMismatch, fmt.Sprintf("receipt %s belongs to tenant %q, the bundle's chain to %q", r.ID, r.Tenant, a.TenantID)
		}
		chain[i] = r
	}
	if err := VerifyChain(chain); err != nil {
		var ce *ChainError
		if errors.As(err, &ce) {
			return ce.Code, err.Error()
		}
		return ChainRecordMismatch, err.Error()
	}
	return checkAnchor(a, chain)
}

// checkAnchor compares the receipts with the manifest's chain anchor.
func checkAnchor(a BundleChain, chain []*Receipt) (Code, string) {
	if len(chain) == 0 {
		if a.FirstSeq != 0 || a.LastSeq != 0 {
			return ChainGap, fmt.Sprintf("the manifest names seqs %d to %d but the bundle holds no receipts", a.FirstSeq, a.LastSeq)
		}
		return OK, ""
	}
	first, last := chain[0], chain[len(chain)-1]
	switch {
	case first.Seq != a.FirstSeq || last.Seq != a.LastSeq:
		return ChainGap, fmt.Sprintf("the receipts run from seq %d to %d; the manifest says %d to %d", first.Seq, last.Seq, a.FirstSeq, a.LastSeq)
	case a.HeadSeq < last.Seq:
		return ChainHeadMismatch, fmt.Sprintf("head_seq %d is before the last receipt's seq %d", a.HeadSeq, last.Seq)
	case a.HeadSeq == last.Seq:
		sum := blake3.Sum256(last.Body)
		if hex.EncodeToString(sum[:]) != a.HeadHash {
			return ChainHeadMismatch, fmt.Sprintf("the last receipt is the head (seq %d) but its body does not hash to head_hash", last.Seq)
		}
	}
	return OK, ""
}

// blankSignature returns the manifest JSON raw with signature_b64 set to
// "", every other field as it is.
func blankSignature(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	m["signature_b64"] = ""
	return codec.MarshalNoEscape(m)
}

// verifyEd25519 verifies sig over msg with pub, refusing small-order R as
// [Verify] does.
func verifyEd25519(pub, msg, sig []byte) bool {
	return len(sig) == ed25519.SignatureSize && !isSmallOrder(sig[:32]) && ed25519.Verify(pub, msg, sig)
}

// countEvents checks that every line of events is a fact event and
// returns how many there are.
func countEvents(events []byte) (int, error) {
	n := 0
	for len(events) > 0 {
		line, rest, ok := bytes.Cut(events, []byte{'\n'})
		if !ok {
			return n, fmt.Errorf("line %d does not end with a newline", n+1)
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var e BundleEvent
		if err := dec.Decode(&e); err != nil {
			return n, fmt.Errorf("line %d: %v", n+1, err)
		}
		if e.FactID == "" {
			return n, fmt.Errorf("line %d: no fact_id", n+1)
		}
		events = rest
		n++
	}
	return n, nil
}

// readBundle decompresses data and returns the three members.
func readBundle(data []byte) (map[string][]byte, Code, string) {
	zr, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxMemory(MaxBundleBytes), zstd.WithDecoderMaxWindow(64<<20))
	if err != nil {
		return nil, BundleUnreadable, err.Error()
	}
	defer zr.Close()
	raw, err := io.ReadAll(io.LimitReader(zr, MaxBundleBytes+1))
	if err != nil {
		return nil, BundleUnreadable, "zstd: " + err.Error()
	}
	if len(raw) > MaxBundleBytes {
		return nil, BundleUnreadable, fmt.Sprintf("the archive is larger than %d bytes", MaxBundleBytes)
	}
	tr := tar.NewReader(bytes.NewReader(raw))
	members := make(map[string][]byte, 3)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, BundleUnreadable, "tar: " + err.Error()
		}
		switch hdr.Name {
		case BundleManifestMember, BundleEventsMember, BundleReceiptsMember:
		default:
			continue // unknown members are ignored; the seal covers them
		}
		if _, dup := members[hdr.Name]; dup {
			return nil, BundleMemberMissing, hdr.Name + " appears twice"
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil, BundleUnreadable, hdr.Name + " is not a regular file"
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, BundleUnreadable, "tar: " + hdr.Name + ": " + err.Error()
		}
		members[hdr.Name] = b
	}
	for _, name := range []string{BundleManifestMember, BundleEventsMember, BundleReceiptsMember} {
		if _, ok := members[name]; !ok {
			return nil, BundleMemberMissing, "the bundle has no " + name
		}
	}
	return members, OK, ""
}

// Window is a stretch of a tenant's chain selected by [ChainWindow].
type Window struct {
	Receipts []*Receipt
	// Truncated reports that the window holds more receipts than were
	// selected.
	Truncated bool
	// HeadSeq and HeadHash are the tenant's chain head: its last seq and
	// the BLAKE3 of that receipt's body (zero when the chain is empty).
	HeadSeq  uint64
	HeadHash [HashSize]byte
}

// Anchor returns the [BundleChain] of w for tenant.
func (w *Window) Anchor(tenant string) BundleChain {
	a := BundleChain{TenantID: tenant, HeadSeq: w.HeadSeq}
	if w.HeadSeq > 0 {
		a.HeadHash = hex.EncodeToString(w.HeadHash[:])
	}
	if n := len(w.Receipts); n > 0 {
		a.FirstSeq, a.LastSeq = w.Receipts[0].Seq, w.Receipts[n-1].Seq
	}
	return a
}

// ChainWindow returns the receipts of tenant's chain created in [since,
// until), oldest first, at most max of them (max ≥ 1), with the chain head.
// The receipts are consecutive: the stretch starts at the first receipt
// created at or after since, found by binary search on created_at, and
// ends before the first one created at or after until. The search assumes
// what Append produces under a clock that does not step back: created_at
// does not decrease along the chain. A receipt that cannot be read is an
// error.
func ChainWindow(tx store.Tx, tenant string, since, until time.Time, max int) (*Window, error) {
	if max < 1 {
		return nil, errors.New("receipts: chain window: max must be at least 1")
	}
	if err := checkTenant(tenant); err != nil {
		return nil, err
	}
	w := &Window{}
	last, hash, err := head(tx, tenant)
	if err != nil {
		return nil, err
	}
	w.HeadSeq, w.HeadHash = last, hash
	created := func(seq uint64) (time.Time, *Receipt, error) {
		v, err := tx.Get(bucketChain, chainKey(tenant, seq))
		if err != nil {
			return time.Time{}, nil, fmt.Errorf("receipts: chain of tenant %q at seq %d: %w", tenant, seq, err)
		}
		r, err := Get(tx, string(v))
		if err != nil {
			return time.Time{}, nil, err
		}
		h, err := r.Header()
		if err != nil {
			return time.Time{}, nil, fmt.Errorf("receipts: receipt %s: %w", r.ID, err)
		}
		return h.CreatedAt, r, nil
	}
	// The first seq created at or after since: lo..hi brackets it.
	lo, hi := uint64(1), last+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		t, _, err := created(mid)
		if err != nil {
			return nil, err
		}
		if t.Before(since) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	for seq := lo; seq <= last; seq++ {
		t, r, err := created(seq)
		if err != nil {
			return nil, err
		}
		if !t.Before(until) {
			break
		}
		if len(w.Receipts) == max {
			w.Truncated = true
			break
		}
		w.Receipts = append(w.Receipts, r)
	}
	return w, nil
}

// ReadBundle returns the content of the bundle file data without
// verifying it (see [VerifyBundle]): the manifest, the events and the
// receipts.
func ReadBundle(data []byte) (*Bundle, error) {
	if len(data) < sealLen {
		return nil, errors.New("receipts: bundle: shorter than a seal")
	}
	members, code, msg := readBundle(data[:len(data)-sealLen])
	if code != OK {
		return nil, fmt.Errorf("receipts: bundle: %s: %s", code, msg)
	}
	b := new(Bundle)
	if err := json.Unmarshal(members[BundleManifestMember], &b.Manifest); err != nil {
		return nil, fmt.Errorf("receipts: bundle: manifest.json: %w", err)
	}
	for line := range bytes.Lines(members[BundleEventsMember]) {
		var e BundleEvent
		if err := json.Unmarshal(line, &e); err != nil {
			return nil, fmt.Errorf("receipts: bundle: events.jsonl: %w", err)
		}
		b.Events = append(b.Events, e)
	}
	var rs []bundleReceipt
	if err := wireDec.Unmarshal(members[BundleReceiptsMember], &rs); err != nil {
		return nil, fmt.Errorf("receipts: bundle: receipts.cbor: %w", err)
	}
	for _, br := range rs {
		b.Receipts = append(b.Receipts, &Receipt{ID: br.ReceiptID, Tenant: br.TenantID, Kind: br.Kind, Seq: br.Seq,
			Body: br.Body, PayloadHash: br.PayloadHash, Sig: br.Sig})
	}
	return b, nil
}

// ChainHead returns tenant's chain head: its last seq and the BLAKE3 of
// that receipt's body, or 0 and zero when the tenant has no receipts.
func ChainHead(tx store.Tx, tenant string) (uint64, [HashSize]byte, error) {
	if err := checkTenant(tenant); err != nil {
		return 0, [HashSize]byte{}, err
	}
	return head(tx, tenant)
}
