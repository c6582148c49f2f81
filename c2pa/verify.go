package c2pa

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/crux-go/crux/receipts"
)

// Code names the outcome of [Verify]: OK, or the defect found.
type Code string

// Verification codes. Each failure also carries the C2PA validation
// status code that names the same defect.
const (
	OK                    Code = "OK"
	ManifestMalformed     Code = "MANIFEST_MALFORMED"      // not a JUMBF manifest store
	ManifestMissing       Code = "MANIFEST_MISSING"        // a store without a manifest
	ClaimMissing          Code = "CLAIM_MISSING"           // the active manifest has no claim
	ClaimMalformed        Code = "CLAIM_MALFORMED"         // the claim does not decode, or lacks a required field
	ClaimUnsupported      Code = "CLAIM_UNSUPPORTED"       // a v1 claim or an update manifest
	SignatureMissing      Code = "SIGNATURE_MISSING"       // no claim signature box
	SignatureMalformed    Code = "SIGNATURE_MALFORMED"     // not a tagged COSE_Sign1 with a detached payload
	AlgUnsupported        Code = "ALG_UNSUPPORTED"         // a signature or hash algorithm crux does not check
	CertMissing           Code = "CERT_MISSING"            // no x5chain
	CertInvalid           Code = "CERT_INVALID"            // the signing certificate breaks the C2PA profile
	SigInvalid            Code = "SIG_INVALID"             // the signature does not verify over the claim
	AssertionMissing      Code = "ASSERTION_MISSING"       // the claim names an assertion the store lacks
	AssertionHashMismatch Code = "ASSERTION_HASH_MISMATCH" // an assertion's bytes differ from their hash in the claim
	AssertionMalformed    Code = "ASSERTION_MALFORMED"     // an assertion does not decode
	ActionsInvalid        Code = "ACTIONS_INVALID"         // no actions, or a first action other than created/opened
	HardBindingMissing    Code = "HARD_BINDING_MISSING"    // no c2pa.hash.data
	DataHashUnsupported   Code = "DATA_HASH_UNSUPPORTED"   // a data hash with exclusions (not a sidecar)
	DataHashMismatch      Code = "DATA_HASH_MISMATCH"      // the asset is not the one the manifest was made for
	ReceiptKeyMismatch    Code = "RECEIPT_KEY_MISMATCH"    // the receipt assertion names another key than the certificate's
	CertExpired           Code = "CERT_EXPIRED"            // the chain is not valid at the verification time
	CertUntrusted         Code = "CERT_UNTRUSTED"          // the chain does not lead to a trust anchor given
)

// Status is one check's outcome.
type Status struct {
	Code Code `json:"code"`
	// C2PA is the C2PA validation status code of the same outcome.
	C2PA    string `json:"c2pa_code"`
	Message string `json:"message"`
}

// SignerInfo describes the signing certificate.
type SignerInfo struct {
	Subject   string    `json:"subject"`
	Issuer    string    `json:"issuer"`
	NotBefore time.Time `json:"not_before"`
	NotAfter  time.Time `json:"not_after"`
	// KeyID is receipts.Fingerprint of an Ed25519 public key: the crux
	// receipt key id it certifies. Empty for other keys.
	KeyID string `json:"key_id,omitempty"`
	// SHA256 is the SHA-256 of the leaf certificate's DER, hex.
	SHA256 string `json:"sha256"`
	// Chain is the number of certificates in x5chain.
	Chain int `json:"chain"`
}

// Report is the outcome of [Verify].
type Report struct {
	// OK reports that every check passed, the trust chain included.
	OK bool `json:"ok"`
	// Code is OK or the first failure's code, in the order the checks
	// run: structure, certificate profile, signature, assertion hashes,
	// actions, data hash (the asset), receipt assertion, then trust.
	Code    Code   `json:"code"`
	Message string `json:"message,omitempty"`
	// Failures lists every failed check; Passed the C2PA success codes of
	// the checks that passed.
	Failures []Status `json:"failures"`
	Passed   []string `json:"passed"`

	ManifestLabel     string         `json:"manifest_label,omitempty"`
	InstanceID        string         `json:"instance_id,omitempty"`
	ClaimGenerator    *Generator     `json:"claim_generator,omitempty"`
	Title             string         `json:"title,omitempty"`
	Alg               string         `json:"alg,omitempty"` // the signature algorithm
	Signer            *SignerInfo    `json:"signer,omitempty"`
	DigitalSourceType string         `json:"digital_source_type,omitempty"`
	Receipt           *ReceiptReport `json:"receipt,omitempty"`
	// AssetHash is the asset's digest with the data hash's algorithm,
	// hex; AssetBytes its length.
	AssetHash  string `json:"asset_hash,omitempty"`
	AssetBytes int64  `json:"asset_bytes"`
}

// ReceiptReport is crux's receipt assertion as a report shows it.
type ReceiptReport struct {
	ReceiptID         string `json:"receipt_id"`
	ReceiptBodyBLAKE3 string `json:"receipt_body_blake3"` // hex
	KeyID             string `json:"key_id"`
	SignerPassport    string `json:"signer_passport,omitempty"`
	ContentBLAKE3     string `json:"content_blake3"` // hex
	ContentType       string `json:"content_type,omitempty"`
	CreatedAt         string `json:"created_at"`
}

// VerifyOptions are the inputs of [Verify] besides the manifest and the
// asset.
type VerifyOptions struct {
	// Roots are the trust anchors; nil trusts none, so the chain check
	// fails with CERT_UNTRUSTED.
	Roots *x509.CertPool
	// Now is the time the certificates must be valid at; zero means
	// time.Now(). (Manifests carry no trusted timestamp.)
	Now time.Time
}

func (r *Report) fail(code Code, c2pa, format string, args ...any) {
	r.Failures = append(r.Failures, Status{Code: code, C2PA: c2pa, Message: fmt.Sprintf(format, args...)})
}

func (r *Report) pass(c2pa string) {
	if !slices.Contains(r.Passed, c2pa) {
		r.Passed = append(r.Passed, c2pa)
	}
}

func (r *Report) finish() Report {
	if len(r.Failures) == 0 {
		r.OK, r.Code, r.Message = true, OK, ""
	} else {
		r.OK, r.Code, r.Message = false, r.Failures[0].Code, r.Failures[0].Message
	}
	return *r
}

// Verify checks a sidecar manifest store against the asset it was made
// for, offline: the JUMBF structure; the active (last) manifest's v2
// claim; the COSE_Sign1 signature over the claim (EdDSA, or ECDSA
// ES256/ES384/ES512 with a P1363 signature) with the leaf of its x5chain;
// the leaf's C2PA profile (not self-signed, CA:FALSE, critical
// digitalSignature, emailProtection or documentSigning, no
// anyExtendedKeyUsage, an authority key identifier); every assertion the
// claim lists against its hash; the actions (first c2pa.created with a
// digitalSourceType, or c2pa.opened); c2pa.hash.data (no exclusions)
// against the asset's bytes; crux's receipt assertion, when present,
// against the certificate's key; and the chain to opts.Roots at opts.Now.
//
// The report lists every failure. The error is only for a failure to read
// the asset; the asset is read only when the manifest is well formed.
func Verify(manifest []byte, asset io.Reader, opts VerifyOptions) (Report, error) {
	r := &Report{Failures: []Status{}, Passed: []string{}}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	m := readManifest(r, manifest)
	if m == nil {
		return r.finish(), nil
	}
	certs, err := checkSignature(r, m)
	if certs == nil {
		return r.finish(), err
	}
	listed, ok := checkAssertions(r, m)
	if !ok {
		return r.finish(), nil
	}
	checkActions(r, listed)
	if err := checkDataHash(r, listed, m.claim.Alg, asset); err != nil {
		return r.finish(), err
	}
	checkReceipt(r, listed)
	// Trust, last: everything above holds whoever signed.
	checkTrust(r, certs, opts.Roots, now)
	return r.finish(), nil
}

// activeManifest is the active manifest of a store, as readManifest
// found it.
type activeManifest struct {
	count                            int // boxes parsed so far, against the limit
	active                           *superbox
	assertionStore, claimBox, sigBox *superbox
	claim                            claimV2
	claimBytes                       []byte
}

// readManifest parses the JUMBF structure of a manifest store down to the
// active manifest's v2 claim, failing r and returning nil where it stops.
func readManifest(r *Report, b []byte) *activeManifest {
	m := new(activeManifest)
	top, err := parseBoxes(b, &m.count)
	if err != nil {
		r.fail(ManifestMalformed, "manifest.malformed", "%v", err)
		return nil
	}
	if len(top) != 1 {
		r.fail(ManifestMalformed, "manifest.malformed", "%d top-level boxes, want one manifest store", len(top))
		return nil
	}
	store, err := parseSuperBox(top[0], 0, &m.count)
	if err != nil || store.ctype != typeStore || store.label != LabelStore {
		if err == nil {
			err = fmt.Errorf("the top box has content type %q and label %q, not %q and %q", store.ctype, store.label, typeStore, LabelStore)
		}
		r.fail(ManifestMalformed, "manifest.malformed", "%v", err)
		return nil
	}
	kids, err := store.children(&m.count)
	if err != nil {
		r.fail(ManifestMalformed, "manifest.malformed", "%v", err)
		return nil
	}
	for _, k := range kids {
		if k.ctype == typeManifest || k.ctype == typeUpdate {
			m.active = k
		}
	}
	if m.active == nil {
		r.fail(ManifestMissing, "claim.missing", "the manifest store holds no manifest")
		return nil
	}
	r.ManifestLabel = m.active.label
	if m.active.ctype == typeUpdate {
		r.fail(ClaimUnsupported, "manifest.update.invalid", "the active manifest is an update manifest, which crux does not verify")
		return nil
	}
	parts, err := m.active.children(&m.count)
	if err != nil {
		r.fail(ManifestMalformed, "manifest.malformed", "%v", err)
		return nil
	}
	for _, p := range parts {
		switch p.ctype {
		case typeAssertion:
			m.assertionStore = p
		case typeClaim:
			m.claimBox = p
		case typeSignature:
			m.sigBox = p
		}
	}
	if !readClaim(r, m) {
		return nil
	}
	return m
}

// readClaim finds and decodes the v2 claim of m's parts, failing r and
// returning false where it stops.
func readClaim(r *Report, m *activeManifest) bool {
	if m.claimBox == nil {
		r.fail(ClaimMissing, "claim.missing", "the active manifest %s has no claim box", m.active.label)
		return false
	}
	if m.claimBox.label != LabelClaim {
		r.fail(ClaimUnsupported, "claim.malformed", "claim labelled %q: crux verifies %s claims only", m.claimBox.label, LabelClaim)
		return false
	}
	var ok bool
	m.claimBytes, ok = m.claimBox.firstContent("cbor")
	if !ok {
		r.fail(ClaimMalformed, "claim.malformed", "the claim box holds no CBOR")
		return false
	}
	if err := dec.Unmarshal(m.claimBytes, &m.claim); err != nil {
		r.fail(ClaimMalformed, "claim.malformed", "the claim does not decode: %v", err)
		return false
	}
	switch {
	case m.claim.InstanceID == "":
		r.fail(ClaimMalformed, "claim.malformed", "the claim has no instanceID")
	case m.claim.ClaimGeneratorInfo.Name == "":
		r.fail(ClaimMalformed, "claim.malformed", "the claim has no claim_generator_info name")
	case m.claim.Signature == "":
		r.fail(ClaimMalformed, "claim.malformed", "the claim does not name its signature")
	case len(m.claim.CreatedAssertions) == 0:
		r.fail(ClaimMalformed, "claim.malformed", "the claim lists no created_assertions")
	}
	if len(r.Failures) > 0 {
		return false
	}
	r.InstanceID, r.Title = m.claim.InstanceID, m.claim.Title
	gen := m.claim.ClaimGeneratorInfo
	r.ClaimGenerator = &gen

	return true
}

// checkSignature checks the claim's COSE_Sign1 signature with the leaf of
// its x5chain, and the leaf's profile. It returns the chain, or nil where
// it stops (with an error only when the structure to sign cannot be made).
func checkSignature(r *Report, m *activeManifest) ([]*x509.Certificate, error) {
	if m.sigBox == nil {
		r.fail(SignatureMissing, "claimSignature.missing", "the active manifest has no signature box")
		return nil, nil
	}
	if m.sigBox.label != LabelSignature {
		r.fail(SignatureMissing, "claimSignature.missing", "the signature box is labelled %q, not %s", m.sigBox.label, LabelSignature)
		return nil, nil
	}
	if abs := "self#jumbf=/" + LabelStore + "/" + m.active.label + "/" + LabelSignature; m.claim.Signature != abs &&
		m.claim.Signature != "self#jumbf="+LabelSignature {
		r.fail(SignatureMissing, "claimSignature.missing", "the claim names signature %q, not this manifest's %s", m.claim.Signature, abs)
		return nil, nil
	}
	sigBytes, ok := m.sigBox.firstContent("cbor")
	if !ok {
		r.fail(SignatureMalformed, "claimSignature.mismatch", "the signature box holds no CBOR")
		return nil, nil
	}
	sign1, protected, err := parseSign1(sigBytes)
	if err != nil {
		r.fail(SignatureMalformed, "claimSignature.mismatch", "%v", err)
		return nil, nil
	}
	if !bytes.Equal(sign1.Payload, []byte{0xf6}) { // CBOR null: detached
		var p []byte
		if err := dec.Unmarshal(sign1.Payload, &p); err != nil || p == nil || !bytes.Equal(p, m.claimBytes) {
			r.fail(SignatureMalformed, "claimSignature.mismatch", "the COSE_Sign1 payload is neither detached (null) nor the claim")
			return nil, nil
		}
	}
	alg, chain, code, err := headers(protected, sign1.Unprotected)
	if err != nil {
		switch code {
		case CertMissing:
			r.fail(CertMissing, "signingCredential.invalid", "%v", err)
		case AlgUnsupported:
			r.fail(AlgUnsupported, "algorithm.unsupported", "%v", err)
		default:
			r.fail(SignatureMalformed, "claimSignature.mismatch", "%v", err)
		}
		return nil, nil
	}
	certs := make([]*x509.Certificate, 0, len(chain))
	for i, der := range chain {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			r.fail(CertInvalid, "signingCredential.invalid", "x5chain certificate %d does not parse: %v", i+1, err)
			return nil, nil
		}
		certs = append(certs, c)
	}
	leaf := certs[0]
	sum := sha256.Sum256(leaf.Raw)
	r.Signer = &SignerInfo{Subject: leaf.Subject.String(), Issuer: leaf.Issuer.String(), NotBefore: leaf.NotBefore,
		NotAfter: leaf.NotAfter, SHA256: hex.EncodeToString(sum[:]), Chain: len(certs)}
	if pub, ok := leaf.PublicKey.(ed25519.PublicKey); ok {
		r.Signer.KeyID = receipts.Fingerprint(pub)
	}
	profileOK := checkProfile(r, leaf)
	tbs, err := sigStructure(protected, m.claimBytes)
	if err != nil {
		return nil, err
	}
	name, ok := verifySig(alg, leaf.PublicKey, tbs, sign1.Signature)
	r.Alg = name
	switch {
	case name == "":
		r.fail(AlgUnsupported, "algorithm.unsupported", "COSE algorithm %d is not one crux verifies (EdDSA, ES256, ES384, ES512)", alg)
		return nil, nil
	case !ok:
		r.fail(SigInvalid, "claimSignature.mismatch", "the %s signature does not verify over the claim with the x5chain leaf's key", name)
	default:
		r.pass("claimSignature.validated")
	}
	if profileOK {
		r.pass("signingCredential.profile.ok")
	}

	return certs, nil
}

// checkAssertions checks every assertion the claim lists against its
// hash, and returns those that match, by label; false when the assertion
// store is malformed.
func checkAssertions(r *Report, m *activeManifest) (map[string]*superbox, bool) {
	byLabel := map[string]*superbox{}
	if m.assertionStore != nil && m.assertionStore.label != LabelAssertions {
		r.fail(ManifestMalformed, "manifest.malformed", "the assertion store is labelled %q, not %s", m.assertionStore.label, LabelAssertions)
		return nil, false
	}
	if m.assertionStore != nil {
		as, err := m.assertionStore.children(&m.count)
		if err != nil {
			r.fail(ManifestMalformed, "manifest.malformed", "%v", err)
			return nil, false
		}
		for _, a := range as {
			if _, dup := byLabel[a.label]; !dup {
				byLabel[a.label] = a
			}
		}
	}
	listed := map[string]*superbox{}
	for _, h := range slices.Concat(m.claim.CreatedAssertions, m.claim.GatheredAssertions) {
		label, ok := assertionLabel(h.URL, m.active.label)
		a := byLabel[label]
		if !ok || a == nil {
			r.fail(AssertionMissing, "assertion.missing", "the claim lists %q, which is not in the manifest's assertion store", h.URL)
			continue
		}
		alg := h.Alg
		if alg == "" {
			alg = m.claim.Alg
		}
		hf := hashFor(alg)
		if hf == nil {
			r.fail(AlgUnsupported, "algorithm.unsupported", "assertion %s: hash algorithm %q", label, alg)
			continue
		}
		hf.Write(a.body)
		if !bytes.Equal(hf.Sum(nil), h.Hash) {
			r.fail(AssertionHashMismatch, "assertion.hashedURI.mismatch", "assertion %s: its bytes do not match the hash the claim gives", label)
			continue
		}
		r.pass("assertion.hashedURI.match")
		listed[label] = a
	}

	return listed, true
}

// checkActions checks the actions assertion: first c2pa.created with a
// digitalSourceType, or c2pa.opened.
func checkActions(r *Report, listed map[string]*superbox) {
	if a := firstListed(listed, LabelActions, "c2pa.actions"); a == nil {
		r.fail(ActionsInvalid, "assertion.action.malformed", "a v2 claim needs a %s assertion", LabelActions)
	} else {
		var acts actionsV2
		if err := decodeAssertion(a, &acts); err != nil {
			r.fail(AssertionMalformed, "assertion.cbor.invalid", "%s: %v", a.label, err)
		} else if len(acts.Actions) == 0 || acts.Actions[0].Action != ActionCreated && acts.Actions[0].Action != "c2pa.opened" {
			r.fail(ActionsInvalid, "assertion.action.malformed", "the first action must be c2pa.created or c2pa.opened")
		} else if acts.Actions[0].Action == ActionCreated && acts.Actions[0].DigitalSourceType == "" {
			r.fail(ActionsInvalid, "assertion.action.malformed", "the c2pa.created action has no digitalSourceType")
		} else {
			r.DigitalSourceType = acts.Actions[0].DigitalSourceType
		}
	}
}

// checkDataHash checks the hard binding, c2pa.hash.data without
// exclusions, against the asset's bytes (claimAlg is the claim's default
// algorithm); the error is only for a failure to read the asset.
func checkDataHash(r *Report, listed map[string]*superbox, claimAlg string, asset io.Reader) error {
	if a := listed[LabelDataHash]; a == nil {
		r.fail(HardBindingMissing, "claim.hardBindings.missing", "the claim lists no %s assertion", LabelDataHash)
	} else {
		var dh dataHash
		alg := ""
		if err := decodeAssertion(a, &dh); err != nil {
			r.fail(AssertionMalformed, "assertion.cbor.invalid", "%s: %v", LabelDataHash, err)
		} else if alg = cmpOr(dh.Alg, claimAlg, "sha256"); len(dh.Exclusions) > 0 {
			r.fail(DataHashUnsupported, "assertion.dataHash.malformed", "%s has %d exclusions: a sidecar binds the whole asset", LabelDataHash, len(dh.Exclusions))
		} else if hf := hashFor(alg); hf == nil {
			r.fail(AlgUnsupported, "algorithm.unsupported", "%s: hash algorithm %q", LabelDataHash, alg)
		} else {
			n, err := io.Copy(hf, asset)
			if err != nil {
				return fmt.Errorf("c2pa: reading the asset: %w", err)
			}
			digest := hf.Sum(nil)
			r.AssetHash, r.AssetBytes = hex.EncodeToString(digest), n
			if !bytes.Equal(digest, dh.Hash) {
				r.fail(DataHashMismatch, "assertion.dataHash.mismatch", "the asset's %s is %x; the manifest was made for %x", alg, digest, dh.Hash)
			} else {
				r.pass("assertion.dataHash.match")
			}
		}
	}
	return nil
}

// checkReceipt checks crux's receipt assertion, when present, against the
// signing certificate's key.
func checkReceipt(r *Report, listed map[string]*superbox) {
	if a := listed[LabelReceipt]; a != nil {
		var rb ReceiptBinding
		switch err := decodeAssertion(a, &rb); {
		case err != nil:
			r.fail(AssertionMalformed, "assertion.cbor.invalid", "%s: %v", LabelReceipt, err)
		case rb.ReceiptID == "" || len(rb.ReceiptBodyBLAKE3) != receipts.HashSize || len(rb.ContentBLAKE3) != 32:
			r.fail(AssertionMalformed, "assertion.cbor.invalid", "%s: needs receipt_id and 32-byte receipt_body_blake3 and content_blake3", LabelReceipt)
		default:
			r.Receipt = &ReceiptReport{ReceiptID: rb.ReceiptID, ReceiptBodyBLAKE3: hex.EncodeToString(rb.ReceiptBodyBLAKE3),
				KeyID: rb.KeyID, SignerPassport: rb.SignerPassport, ContentBLAKE3: hex.EncodeToString(rb.ContentBLAKE3),
				ContentType: rb.ContentType, CreatedAt: rb.CreatedAt}
			if rb.KeyID != r.Signer.KeyID {
				r.fail(ReceiptKeyMismatch, "assertion.cbor.invalid", "the receipt assertion names key %s; the signing certificate certifies %q", rb.KeyID, r.Signer.KeyID)
			}
		}
	}
}

func cmpOr(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// rawSign1 is a COSE_Sign1 as decoded, the headers left raw.
type rawSign1 struct {
	_           struct{} `cbor:",toarray"`
	Protected   []byte
	Unprotected cbor.RawMessage
	Payload     cbor.RawMessage
	Signature   []byte
}

// parseSign1 decodes a tagged COSE_Sign1 and returns it with its protected
// header bytes.
func parseSign1(b []byte) (*rawSign1, []byte, error) {
	var tag cbor.RawTag
	if err := dec.Unmarshal(b, &tag); err != nil {
		return nil, nil, fmt.Errorf("the signature is not a tagged CBOR item: %w", err)
	}
	if tag.Number != coseTagSign1 {
		return nil, nil, fmt.Errorf("the signature has CBOR tag %d, not %d (COSE_Sign1)", tag.Number, coseTagSign1)
	}
	var s rawSign1
	if err := dec.Unmarshal(tag.Content, &s); err != nil {
		return nil, nil, fmt.Errorf("the COSE_Sign1 does not decode: %w", err)
	}
	if len(s.Protected) == 0 {
		return nil, nil, errors.New("the COSE_Sign1 has an empty protected header")
	}
	return &s, s.Protected, nil
}

// headers returns the algorithm and the x5chain (protected, else
// unprotected). On failure the code is CertMissing, AlgUnsupported, or ""
// for a malformed header.
func headers(protected []byte, unprotected cbor.RawMessage) (int64, [][]byte, Code, error) {
	var ph map[int64]cbor.RawMessage
	if err := dec.Unmarshal(protected, &ph); err != nil {
		return 0, nil, "", fmt.Errorf("the protected header is not a map with integer labels: %w", err)
	}
	var alg int64
	raw, ok := ph[headerAlg]
	if !ok {
		return 0, nil, AlgUnsupported, errors.New("the protected header names no algorithm")
	}
	if err := dec.Unmarshal(raw, &alg); err != nil {
		return 0, nil, AlgUnsupported, fmt.Errorf("the algorithm is not an integer: %w", err)
	}
	var uh map[any]cbor.RawMessage
	if err := dec.Unmarshal(unprotected, &uh); err != nil || uh == nil {
		return 0, nil, "", fmt.Errorf("the unprotected header is not a map (%v)", err)
	}
	x5, ok := ph[headerX5Chain]
	if !ok {
		x5, ok = uh[uint64(headerX5Chain)]
	}
	if !ok {
		return 0, nil, CertMissing, errors.New("the signature has no x5chain")
	}
	var one []byte
	if err := dec.Unmarshal(x5, &one); err == nil {
		return alg, [][]byte{one}, "", nil
	}
	var many [][]byte
	if err := dec.Unmarshal(x5, &many); err != nil || len(many) == 0 {
		return 0, nil, CertMissing, errors.New("x5chain is neither a certificate nor an array of certificates")
	}
	return alg, many, "", nil
}

// verifySig checks sig over msg with the COSE algorithm alg and pub. The
// name is empty for an algorithm it does not know.
func verifySig(alg int64, pub any, msg, sig []byte) (name string, ok bool) {
	switch alg {
	case algEdDSA:
		k, isEd := pub.(ed25519.PublicKey)
		return "EdDSA", isEd && len(sig) == ed25519.SignatureSize && ed25519.Verify(k, msg, sig)
	case algES256, algES384, algES512:
		h := map[int64]crypto.Hash{algES256: crypto.SHA256, algES384: crypto.SHA384, algES512: crypto.SHA512}[alg]
		name = map[int64]string{algES256: "ES256", algES384: "ES384", algES512: "ES512"}[alg]
		k, isEC := pub.(*ecdsa.PublicKey)
		if !isEC {
			return name, false
		}
		size := (k.Curve.Params().BitSize + 7) / 8
		if len(sig) != 2*size {
			return name, false // C2PA wants r||s (IEEE P1363), not DER
		}
		d := h.New()
		d.Write(msg)
		rr, ss := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		return name, ecdsa.Verify(k, d.Sum(nil), rr, ss)
	}
	return "", false
}

// checkProfile checks the C2PA signing-credential profile of leaf and
// reports whether it holds.
func checkProfile(r *Report, leaf *x509.Certificate) bool {
	n := len(r.Failures)
	bad := func(format string, args ...any) {
		r.fail(CertInvalid, "signingCredential.invalid", "the signing certificate "+format, args...)
	}
	if leaf.Version != 3 {
		bad("is X.509 version %d, not 3", leaf.Version)
	}
	if bytes.Equal(leaf.RawIssuer, leaf.RawSubject) && leaf.CheckSignature(leaf.SignatureAlgorithm, leaf.RawTBSCertificate, leaf.Signature) == nil {
		bad("is self-signed")
	}
	if !leaf.BasicConstraintsValid || leaf.IsCA {
		bad("is not marked CA:FALSE")
	}
	if leaf.KeyUsage&x509.KeyUsageDigitalSignature == 0 {
		bad("lacks the digitalSignature key usage")
	}
	critical := false
	for _, e := range leaf.Extensions {
		if e.Id.Equal(oidKeyUsage) {
			critical = e.Critical
		}
	}
	if !critical {
		bad("has no critical key usage extension")
	}
	eku := slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageEmailProtection)
	for _, o := range leaf.UnknownExtKeyUsage {
		eku = eku || o.Equal(oidDocumentSigning)
	}
	if slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageAny) {
		bad("allows anyExtendedKeyUsage")
	} else if !eku {
		bad("has neither the emailProtection nor the documentSigning extended key usage")
	}
	if len(leaf.AuthorityKeyId) == 0 {
		bad("has no authority key identifier")
	}
	switch leaf.SignatureAlgorithm {
	case x509.SHA1WithRSA, x509.ECDSAWithSHA1, x509.MD5WithRSA, x509.DSAWithSHA1, x509.DSAWithSHA256, x509.UnknownSignatureAlgorithm:
		bad("is signed with %s, weaker than SHA-256", leaf.SignatureAlgorithm)
	}
	return len(r.Failures) == n
}

// checkTrust checks the chain from the leaf to roots at now.
func checkTrust(r *Report, certs []*x509.Certificate, roots *x509.CertPool, now time.Time) {
	if roots == nil {
		r.fail(CertUntrusted, "signingCredential.untrusted", "no trust anchors were given")
		return
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	var ie x509.CertificateInvalidError
	switch {
	case err == nil:
		r.pass("signingCredential.trusted")
	case errors.As(err, &ie) && ie.Reason == x509.Expired:
		r.fail(CertExpired, "signingCredential.expired", "the certificate chain is not valid at %s: %v", now.UTC().Format(time.RFC3339), err)
	default:
		r.fail(CertUntrusted, "signingCredential.untrusted", "the certificate chain does not lead to a trust anchor given: %v", err)
	}
}

// assertionLabel returns the label of an assertion of the manifest
// labelled manifest that url names: self#jumbf=c2pa.assertions/LABEL, or
// the absolute self#jumbf=/c2pa/MANIFEST/c2pa.assertions/LABEL.
func assertionLabel(url, manifest string) (string, bool) {
	rest, ok := strings.CutPrefix(url, "self#jumbf=")
	if !ok {
		return "", false
	}
	if abs, ok := strings.CutPrefix(rest, "/"+LabelStore+"/"+manifest+"/"); ok {
		rest = abs
	}
	label, ok := strings.CutPrefix(rest, LabelAssertions+"/")
	return label, ok && label != "" && !strings.Contains(label, "/")
}

// firstListed returns the first of labels among the listed assertions.
func firstListed(listed map[string]*superbox, labels ...string) *superbox {
	for _, l := range labels {
		if a := listed[l]; a != nil {
			return a
		}
	}
	return nil
}

// decodeAssertion decodes a CBOR assertion's content into v.
func decodeAssertion(a *superbox, v any) error {
	b, ok := a.firstContent("cbor")
	if !ok {
		return errors.New("no CBOR content box")
	}
	return dec.Unmarshal(b, v)
}

// hashFor returns a new hash for a C2PA hash algorithm name, or nil.
func hashFor(alg string) hash.Hash {
	switch alg {
	case "", "sha256":
		return sha256.New()
	case "sha384":
		return sha512.New384()
	case "sha512":
		return sha512.New()
	}
	return nil
}
