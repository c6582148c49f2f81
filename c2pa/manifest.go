package c2pa

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"runtime/debug"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"

	"github.com/crux-go/crux/internal/codec"
	"github.com/crux-go/crux/receipts"
)

// Labels of the assertions and boxes crux writes.
const (
	LabelStore      = "c2pa"
	LabelAssertions = "c2pa.assertions"
	LabelClaim      = "c2pa.claim.v2"
	LabelSignature  = "c2pa.signature"
	LabelActions    = "c2pa.actions.v2"
	LabelDataHash   = "c2pa.hash.data"
	// LabelReceipt is crux's own assertion: the signed crux receipt the
	// asset is bound to (see [ReceiptBinding]).
	LabelReceipt = "io.github.crux-go.receipt"
)

// Values of the c2pa.created action crux records.
const (
	ActionCreated = "c2pa.created"
	// SourceTrainedAlgorithmic is the IPTC digital source type of content
	// made by a trained model.
	SourceTrainedAlgorithmic = "http://cv.iptc.org/newscodes/digitalsourcetype/trainedAlgorithmicMedia"
)

// SpecVersion is the version of the C2PA specification whose structures
// crux writes: a v2 claim, actions.v2 and a data hash.
const SpecVersion = "2.2"

// modulePath is the module crux is built from.
const modulePath = "github.com/crux-go/crux"

// Generator names the software that made a manifest, as
// claim_generator_info and the action's softwareAgent record it.
type Generator struct {
	Name    string `cbor:"name" json:"name"`
	Version string `cbor:"version,omitempty" json:"version,omitempty"`
}

// DefaultGenerator is crux and the version of the crux module in the
// running binary's build information ("(devel)" when unknown).
func DefaultGenerator() Generator {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Path == modulePath && bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, m := range bi.Deps {
			if m.Path == modulePath && m.Version != "" {
				v = m.Version
			}
		}
	}
	return Generator{Name: "crux", Version: v}
}

// ReceiptBinding is the content of crux's receipt assertion
// ([LabelReceipt]): the crux receipt an asset is bound to, identified by
// id and by the BLAKE3 of its signed body, and the key that signed both
// the receipt and the manifest. Being an assertion, it is covered by the
// claim signature.
type ReceiptBinding struct {
	ReceiptID string `cbor:"receipt_id" json:"receipt_id"`
	// ReceiptBodyBLAKE3 is the BLAKE3 of the receipt's body bytes, the
	// receipt's payload hash (32 bytes).
	ReceiptBodyBLAKE3 []byte `cbor:"receipt_body_blake3" json:"receipt_body_blake3"`
	// KeyID is the receipt key's id (receipts.Fingerprint), which the
	// signing certificate certifies.
	KeyID string `cbor:"key_id" json:"key_id"`
	// SignerPassport is the passport that asked for the manifest.
	SignerPassport string `cbor:"signer_passport,omitempty" json:"signer_passport,omitempty"`
	// ContentBLAKE3 is the BLAKE3 of the asset (32 bytes); the hard
	// binding itself is the SHA-256 of c2pa.hash.data.
	ContentBLAKE3 []byte `cbor:"content_blake3" json:"content_blake3"`
	ContentType   string `cbor:"content_type,omitempty" json:"content_type,omitempty"`
	CreatedAt     string `cbor:"created_at" json:"created_at"` // RFC 3339, UTC
}

// Request is what [Sign] puts in a manifest.
type Request struct {
	// AssetSHA256 is the SHA-256 of the asset's bytes exactly as stored:
	// the hard binding (32 bytes).
	AssetSHA256 []byte
	// Generator is claim_generator_info and the action's softwareAgent;
	// an empty Name means DefaultGenerator().
	Generator Generator
	// Title, when set, is the claim's dc:title.
	Title string
	// Receipt, when set, is written as crux's receipt assertion.
	Receipt *ReceiptBinding
}

// Manifest is a signed manifest store.
type Manifest struct {
	// Label is the manifest's label, urn:c2pa:<UUID v4>.
	Label string
	// InstanceID is the claim's instanceID, xmp:iid:<UUID v4>.
	InstanceID string
	// Store is the manifest store: the JUMBF bytes of a .c2pa sidecar.
	Store []byte
	// ClaimSHA256 is the SHA-256 of the claim's CBOR, the bytes the
	// signature covers.
	ClaimSHA256 []byte
}

// Wire structures.
type hashedURI struct {
	URL  string `cbor:"url"`
	Hash []byte `cbor:"hash"`
	Alg  string `cbor:"alg,omitempty"`
}

type claimV2 struct {
	InstanceID         string      `cbor:"instanceID"`
	ClaimGeneratorInfo Generator   `cbor:"claim_generator_info"`
	Signature          string      `cbor:"signature"`
	CreatedAssertions  []hashedURI `cbor:"created_assertions"`
	GatheredAssertions []hashedURI `cbor:"gathered_assertions,omitempty"`
	Alg                string      `cbor:"alg,omitempty"`
	Title              string      `cbor:"dc:title,omitempty"`
	RedactedAssertions []string    `cbor:"redacted_assertions,omitempty"`
}

type action struct {
	Action            string     `cbor:"action"`
	DigitalSourceType string     `cbor:"digitalSourceType,omitempty"`
	SoftwareAgent     *Generator `cbor:"softwareAgent,omitempty"`
}

type actionsV2 struct {
	Actions []action `cbor:"actions"`
}

type exclusion struct {
	Start  uint64 `cbor:"start"`
	Length uint64 `cbor:"length"`
}

type dataHash struct {
	Exclusions []exclusion `cbor:"exclusions"`
	Alg        string      `cbor:"alg,omitempty"`
	Hash       []byte      `cbor:"hash"`
	Pad        []byte      `cbor:"pad"`
	Name       string      `cbor:"name,omitempty"`
}

// Encoding: RFC 8949 core deterministic; decoding rejects duplicate map
// keys and bounds nesting and lengths.
var (
	detEnc = codec.Must(cbor.CoreDetEncOptions().EncMode())
	dec    = codec.Must(cbor.DecOptions{
		DupMapKey:        cbor.DupMapKeyEnforcedAPF,
		MaxNestedLevels:  16,
		MaxArrayElements: 4096,
		MaxMapPairs:      4096,
	}.DecMode())
)

// Sign builds and signs a manifest store over an asset with s, the
// server's Ed25519 key, whose certificate chain (leaf first, DER each, as
// [CA.Chain] returns it) goes in the signature's protected x5chain header.
// The store holds one manifest: the assertions c2pa.actions.v2 (one
// c2pa.created action, digital source type trainedAlgorithmicMedia),
// c2pa.hash.data (SHA-256 of the whole asset, no exclusions, an empty
// pad) and, with r.Receipt, crux's receipt assertion; a c2pa.claim.v2
// whose created_assertions hash each assertion box; and a COSE_Sign1
// (tag 18, EdDSA, detached payload) over the claim.
func Sign(s receipts.Signer, chain [][]byte, r Request) (*Manifest, error) {
	if len(r.AssetSHA256) != sha256.Size {
		return nil, fmt.Errorf("c2pa: asset hash of %d bytes, want %d", len(r.AssetSHA256), sha256.Size)
	}
	if len(chain) == 0 {
		return nil, errors.New("c2pa: no signing certificate")
	}
	leaf, err := x509.ParseCertificate(chain[0])
	if err != nil {
		return nil, fmt.Errorf("c2pa: signing certificate: %w", err)
	}
	if pub, ok := leaf.PublicKey.(ed25519.PublicKey); !ok || !pub.Equal(s.Public()) {
		return nil, errors.New("c2pa: the signing certificate does not certify the signer's key")
	}
	gen := r.Generator
	if gen.Name == "" {
		gen = DefaultGenerator()
	}
	for _, t := range []string{gen.Name, gen.Version, r.Title} {
		if !utf8.ValidString(t) {
			return nil, errors.New("c2pa: generator and title must be valid UTF-8")
		}
	}
	label, err := uuidURN("urn:c2pa:")
	if err != nil {
		return nil, err
	}
	iid, err := uuidURN("xmp:iid:")
	if err != nil {
		return nil, err
	}

	type assertion struct {
		label string
		data  any
	}
	as := []assertion{
		{LabelActions, actionsV2{Actions: []action{{
			Action: ActionCreated, DigitalSourceType: SourceTrainedAlgorithmic, SoftwareAgent: &gen,
		}}}},
		{LabelDataHash, dataHash{Exclusions: []exclusion{}, Alg: "sha256", Hash: r.AssetSHA256, Pad: []byte{}}},
	}
	if r.Receipt != nil {
		as = append(as, assertion{LabelReceipt, r.Receipt})
	}
	claim := claimV2{
		InstanceID: iid, ClaimGeneratorInfo: gen, Alg: "sha256", Title: r.Title,
		Signature: "self#jumbf=/" + LabelStore + "/" + label + "/" + LabelSignature,
	}
	var boxes [][]byte
	for _, a := range as {
		b, err := detEnc.Marshal(a.data)
		if err != nil {
			return nil, fmt.Errorf("c2pa: assertion %s: %w", a.label, err)
		}
		sb := superBox(typeCBOR, a.label, cborBox(b))
		sum := sha256.Sum256(sb[boxHeader:])
		claim.CreatedAssertions = append(claim.CreatedAssertions,
			hashedURI{URL: "self#jumbf=" + LabelAssertions + "/" + a.label, Hash: sum[:]})
		boxes = append(boxes, sb)
	}
	claimBytes, err := detEnc.Marshal(claim)
	if err != nil {
		return nil, fmt.Errorf("c2pa: claim: %w", err)
	}
	sig, err := signCOSE(s, chain, claimBytes)
	if err != nil {
		return nil, err
	}
	store := superBox(typeStore, LabelStore,
		superBox(typeManifest, label,
			superBox(typeAssertion, LabelAssertions, boxes...),
			superBox(typeClaim, LabelClaim, cborBox(claimBytes)),
			superBox(typeSignature, LabelSignature, cborBox(sig)),
		))
	sum := sha256.Sum256(claimBytes)
	return &Manifest{Label: label, InstanceID: iid, Store: store, ClaimSHA256: sum[:]}, nil
}

// uuidURN returns prefix and a random (version 4) UUID.
func uuidURN(prefix string) (string, error) {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("c2pa: UUID: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%s%x-%x-%x-%x-%x", prefix, u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}
