package rcx

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
	"lukechampine.com/blake3"
)

// MaxEncodedSize is the largest encoded token [Decode] accepts: 1 MiB. A
// free-local token with every built-in capability is about 6 KiB.
const MaxEncodedSize = 1 << 20

// Sentinel errors of encoding and decoding. Errors returned by [Decode]
// and [Token.Encode] wrap one of them.
var (
	// ErrMalformed reports bytes that are not a well-formed token: not
	// CBOR, the wrong shape, an unknown or duplicate map key, an
	// indefinite length, a tag, trailing bytes, or too large.
	ErrMalformed = errors.New("rcx: malformed token")

	// ErrNonCanonical reports a well-formed token whose bytes are not the
	// deterministic encoding of its value: unsorted keys, a non-shortest
	// head, a null where the format has an absent key (or the reverse), a
	// missing field, a signature that is not 64 bytes.
	ErrNonCanonical = errors.New("rcx: token is not deterministically encoded")

	// ErrInvalidValue reports a token holding a value the format cannot
	// represent: an unknown enumeration value (tier, receipt class, egress
	// class, cost unit, refill period, overdraft policy, fallback action,
	// seat role) or a string that is not valid UTF-8.
	ErrInvalidValue = errors.New("rcx: invalid token value")
)

var errNilToken = fmt.Errorf("%w: nil token", ErrInvalidValue)

// encMode is RFC 8949 §4.2.1 core deterministic encoding (keys sorted
// bytewise by their encoding, hence length first; shortest heads; no
// indefinite lengths), with nil slices written as empty arrays rather than
// null. Immutable once built.
var encMode = func() cbor.EncMode {
	opts := cbor.CoreDetEncOptions()
	opts.NilContainers = cbor.NilContainerAsEmpty
	em, err := opts.EncMode()
	if err != nil {
		panic(err) // static options; cannot fail
	}
	return em
}()

// decMode decodes strictly: duplicate map keys, indefinite lengths, tags,
// unknown fields and invalid UTF-8 are errors. Immutable once built.
var decMode = func() cbor.DecMode {
	dm, err := cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		MaxNestedLevels:   16,
		MaxArrayElements:  65536,
		MaxMapPairs:       64,
		UTF8:              cbor.UTF8RejectInvalid,
	}.DecMode()
	if err != nil {
		panic(err) // static options; cannot fail
	}
	return dm
}()

// Encode returns the token's deterministic CBOR encoding, signature
// included. It fails, wrapping [ErrInvalidValue], when the token holds a
// value the format cannot represent.
func (t *Token) Encode() ([]byte, error) {
	if t == nil {
		return nil, errNilToken
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	b, err := encMode.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidValue, err)
	}
	return b, nil
}

// SigningBytes returns the bytes the token hash is computed over: the
// deterministic CBOR encoding of the token with signature.sig replaced by
// 64 zero bytes. Alg and kid stay as they are, so they are covered by the
// signature.
func (t *Token) SigningBytes() ([]byte, error) {
	if t == nil {
		return nil, errNilToken
	}
	c := *t // shallow copy: only the inline signature array changes
	c.Signature.Sig = Sig{}
	return c.Encode()
}

// Hash returns the token hash: BLAKE3-256 of [Token.SigningBytes]. It is
// the message the issuer signs.
func (t *Token) Hash() ([HashSize]byte, error) {
	b, err := t.SigningBytes()
	if err != nil {
		return [HashSize]byte{}, err
	}
	return blake3.Sum256(b), nil
}

// HashHex returns [Token.Hash] as lowercase hex, the token_hash of
// decisions, stamps and refusal receipts.
func (t *Token) HashHex() (string, error) {
	h, err := t.Hash()
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h[:]), nil
}

// Decode parses a token from its deterministic CBOR encoding.
//
// Decoding is strict, so that a token has exactly one encoding and what was
// signed is what was read. Decode rejects, wrapping [ErrMalformed], input
// larger than [MaxEncodedSize], anything that is not a single CBOR map of
// the token's shape, unknown fields, duplicate map keys, indefinite
// lengths, tags and invalid UTF-8; wrapping [ErrInvalidValue], unknown
// enumeration values; and, wrapping [ErrNonCanonical], any input that is
// not byte for byte the deterministic encoding of the decoded value (this
// catches unsorted keys, non-shortest integers, missing fields, a null
// where a key must be absent and a signature of the wrong length).
//
// Decode checks the format only. Use [Token.ValidateBasic] for the
// structural rules and [Token.Verify] for the signature. It never panics.
func Decode(b []byte) (*Token, error) {
	if len(b) > MaxEncodedSize {
		return nil, fmt.Errorf("%w: %d bytes is more than %d", ErrMalformed, len(b), MaxEncodedSize)
	}
	if len(b) == 0 || b[0]>>5 != 5 { // major type 5: map
		return nil, fmt.Errorf("%w: not a CBOR map", ErrMalformed)
	}
	t := new(Token)
	if err := decMode.Unmarshal(b, t); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	again, err := t.Encode()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(again, b) {
		return nil, ErrNonCanonical
	}
	return t, nil
}

// check reports the first value the format cannot represent.
func (t *Token) check() error {
	var err error
	str := func(field string, v *string) {
		if err == nil && v != nil && !utf8.ValidString(*v) {
			err = fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidValue, field)
		}
	}
	enum := func(field string, v string, ok bool) {
		if err == nil && !ok {
			err = fmt.Errorf("%w: %s %q", ErrInvalidValue, field, v)
		}
	}

	str("spec_version", &t.SpecVersion)
	str("token_id", &t.TokenID)
	str("issuer.passport_kid", &t.Issuer.PassportKID)
	str("issuer.issuer_org", &t.Issuer.IssuerOrg)
	str("subject.passport_fpr", &t.Subject.PassportFpr)
	str("subject.daemon_instance_id", t.Subject.DaemonInstanceID)
	str("tenant_scope.tenant_id", &t.TenantScope.TenantID)
	str("tenant_scope.display_name", t.TenantScope.DisplayName)
	if ts := t.TeamScope; ts != nil {
		str("team_scope.team_id", &ts.TeamID)
		str("team_scope.seat_id", ts.SeatID)
		if ts.SeatRole != nil {
			enum("team_scope.seat_role", string(*ts.SeatRole), ts.SeatRole.valid())
		}
		str("team_scope.pooled_credit_agent_id", &ts.PooledCreditAgentID)
		for i := range ts.PrincipalPassportFprs {
			str("team_scope.principal_passport_fprs", &ts.PrincipalPassportFprs[i])
		}
	}
	if es := t.EnterpriseScope; es != nil {
		str("enterprise_scope.customer_id", &es.CustomerID)
		str("enterprise_scope.contract_id", es.ContractID)
		str("enterprise_scope.backend_id", &es.BackendID)
		str("enterprise_scope.endpoint_url", &es.EndpointURL)
		str("enterprise_scope.trust_root_kid", &es.TrustRootKID)
	}
	enum("tier", string(t.Tier), t.Tier.valid())
	enum("receipt_class", string(t.ReceiptClass), t.ReceiptClass.valid())
	for i := range t.Backends {
		b := &t.Backends[i]
		str("backends.backend_id", &b.BackendID)
		str("backends.trust_root_kid", &b.TrustRootKID)
		str("backends.endpoint_url", b.EndpointURL)
		for j := range b.PermittedCapabilities {
			p := &b.PermittedCapabilities[j]
			str("permitted_capabilities.capability", &p.Capability)
			for _, e := range p.DataEgressClasses {
				enum("permitted_capabilities.data_egress_classes", string(e), e.valid())
			}
			for k := range p.RequiredAttestations {
				str("permitted_capabilities.required_attestations", &p.RequiredAttestations[k])
			}
			if p.CreditCost != nil {
				enum("permitted_capabilities.credit_cost.unit", string(p.CreditCost.Unit), p.CreditCost.Unit.valid())
			}
		}
	}
	enum("credits.refill.period", string(t.Credits.Refill.Period), t.Credits.Refill.Period.valid())
	enum("credits.overdraft", string(t.Credits.Overdraft), t.Credits.Overdraft.valid())
	enum("fallback.on_backend_unreachable", string(t.Fallback.OnBackendUnreachable), t.Fallback.OnBackendUnreachable.valid())
	enum("fallback.on_credits_exhausted", string(t.Fallback.OnCreditsExhausted), t.Fallback.OnCreditsExhausted.valid())
	enum("fallback.on_expiry", string(t.Fallback.OnExpiry), t.Fallback.OnExpiry.valid())
	str("revocation.crl_url", t.Revocation.CRLURL)
	str("revocation.push_channel", t.Revocation.PushChannel)
	str("signature.alg", &t.Signature.Alg)
	str("signature.kid", &t.Signature.KID)
	return err
}

// Sig is an Ed25519 signature. It is a CBOR byte string on the wire and
// lowercase hex in JSON, as in the rcx-ct/1.0 JSON form.
type Sig [SignatureSize]byte

// MarshalText returns the signature as lowercase hex.
func (s Sig) MarshalText() ([]byte, error) {
	out := make([]byte, hex.EncodedLen(len(s)))
	hex.Encode(out, s[:])
	return out, nil
}

// UnmarshalText parses 128 hex digits.
func (s *Sig) UnmarshalText(b []byte) error {
	if hex.DecodedLen(len(b)) != SignatureSize {
		return fmt.Errorf("rcx: signature: want %d hex digits, got %d", 2*SignatureSize, len(b))
	}
	_, err := hex.Decode(s[:], b)
	return err
}
