package rcx

import (
	"crypto/ed25519"
	"crypto/subtle"
	"errors"
	"fmt"
)

// Signer signs with an Ed25519 key. It has the method set of package
// receipts' Signer, so one key object signs both receipts and tokens.
type Signer interface {
	// KeyID returns the key's id, "p_" followed by 32 hex digits for
	// crux's keys. It becomes the token's issuer.passport_kid and
	// signature.kid, and the free-local token's passport fingerprint.
	KeyID() string
	// Public returns the key's public half.
	Public() ed25519.PublicKey
	// Sign returns the 64-byte Ed25519 signature of msg.
	Sign(msg []byte) ([]byte, error)
}

// Sentinel errors of signing and verification. Errors returned by [Sign]
// and [Token.Verify] wrap one of them, or one of the encoding errors.
var (
	// ErrUnsupportedAlg: signature.alg is not [SignatureAlg].
	ErrUnsupportedAlg = errors.New("rcx: unsupported signature algorithm")

	// ErrKIDMismatch: signature.kid (or the signer's key id) is not
	// issuer.passport_kid.
	ErrKIDMismatch = errors.New("rcx: signature key id does not match the issuer")

	// ErrBadPublicKey: the public key is not 32 bytes, is not a canonical
	// point encoding, or is a point of small order (which would verify
	// forged signatures).
	ErrBadPublicKey = errors.New("rcx: unusable Ed25519 public key")

	// ErrBadSignature: the signature does not verify against the key and
	// the token hash, or its R is a point of small order, or its S is not
	// canonical.
	ErrBadSignature = errors.New("rcx: signature does not verify")
)

// Sign signs t with s: it sets signature.alg to [SignatureAlg] and
// signature.kid to s.KeyID(), computes the token hash with the signature
// zeroed and stores s's Ed25519 signature of the hash in signature.sig.
//
// The signer's key id must equal t.Issuer.PassportKID ([ErrKIDMismatch]),
// and the signature s returns is checked against s.Public() before it is
// stored, so a faulty signer (a remote KMS answering for the wrong key, a
// truncated signature) is an error rather than a token that never
// verifies. On error t is left unchanged.
func Sign(t *Token, s Signer) error {
	if t == nil {
		return errNilToken
	}
	if s == nil {
		return errors.New("rcx: nil signer")
	}
	kid := s.KeyID()
	if kid != t.Issuer.PassportKID {
		return fmt.Errorf("%w: signer %q, issuer %q", ErrKIDMismatch, kid, t.Issuer.PassportKID)
	}
	pub := s.Public()
	if err := checkPublicKey(pub); err != nil {
		return err
	}
	c := *t
	c.Signature.Alg = SignatureAlg
	c.Signature.KID = kid
	h, err := c.Hash()
	if err != nil {
		return err
	}
	sig, err := s.Sign(h[:])
	if err != nil {
		return fmt.Errorf("rcx: sign token: %w", err)
	}
	if len(sig) != SignatureSize || !ed25519.Verify(pub, h[:], sig) {
		return fmt.Errorf("%w: the signer's signature does not verify against its public key", ErrBadSignature)
	}
	t.Signature.Alg = SignatureAlg
	t.Signature.KID = kid
	copy(t.Signature.Sig[:], sig)
	return nil
}

// Verify checks the token's signature strictly against the trusted issuer
// key pub: signature.alg must be [SignatureAlg], signature.kid must equal
// issuer.passport_kid, pub must be a canonical encoding of a point that is
// not of small order, the signature's R must not be of small order, its S
// must be canonical (crypto/ed25519 rejects S >= L), and the signature must
// verify over the 32-byte token hash. This matches ed25519-dalek's
// verify_strict.
//
// Verify does not look at the time or the token's structure; see
// [Token.ValidateBasic]. Whether pub belongs to the issuer the token names
// is the caller's decision: Verify checks the signature against pub.
func (t *Token) Verify(pub ed25519.PublicKey) error {
	if t == nil {
		return errNilToken
	}
	if t.Signature.Alg != SignatureAlg {
		return fmt.Errorf("%w: %q", ErrUnsupportedAlg, t.Signature.Alg)
	}
	if t.Signature.KID != t.Issuer.PassportKID {
		return fmt.Errorf("%w: kid %q, issuer %q", ErrKIDMismatch, t.Signature.KID, t.Issuer.PassportKID)
	}
	if err := checkPublicKey(pub); err != nil {
		return err
	}
	if smallOrder(t.Signature.Sig[:32]) {
		return fmt.Errorf("%w: R is a point of small order", ErrBadSignature)
	}
	h, err := t.Hash()
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, h[:], t.Signature.Sig[:]) {
		return ErrBadSignature
	}
	return nil
}

// checkPublicKey reports why pub cannot serve as a trusted key, or nil.
func checkPublicKey(pub ed25519.PublicKey) error {
	switch {
	case len(pub) != ed25519.PublicKeySize:
		return fmt.Errorf("%w: %d bytes, want %d", ErrBadPublicKey, len(pub), ed25519.PublicKeySize)
	case !canonicalY(pub):
		return fmt.Errorf("%w: non-canonical encoding", ErrBadPublicKey)
	case smallOrder(pub):
		return fmt.Errorf("%w: point of small order", ErrBadPublicKey)
	}
	return nil
}

// canonicalY reports whether the 32-byte point encoding p has its
// y-coordinate (the low 255 bits, little-endian) below the field prime
// 2^255 - 19.
func canonicalY(p []byte) bool {
	if p[31]&0x7f != 0x7f {
		return true
	}
	for i := 30; i > 0; i-- {
		if p[i] != 0xff {
			return true
		}
	}
	return p[0] < 0xed
}

// smallOrderEncodings are the encodings, sign bit cleared, of the eight
// Edwards25519 points of order dividing 8, including the two non-canonical
// encodings y = p and y = p + 1 that decode to small-order points: the
// blocklist libsodium uses. TestSmallOrderBlocklist derives it
// independently. A function rather than a variable, so nothing can
// modify the table.
func smallOrderEncodings() [7][32]byte {
	return [7][32]byte{
		// y = 0: (±sqrt(-1), 0), order 4.
		{},
		// y = 1: the identity, order 1.
		{0x01},
		// The two y values of the four points of order 8.
		{0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98, 0xf0,
			0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53, 0xfc, 0x05},
		{0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67, 0x0f,
			0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac, 0x03, 0x7a},
		// y = p - 1: (0, -1), order 2.
		{0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
			0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		// y = p, non-canonical 0.
		{0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
			0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		// y = p + 1, non-canonical 1.
		{0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
			0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
	}
}

// smallOrder reports whether the 32-byte point encoding p, whatever its
// sign bit, is one of smallOrderEncodings.
func smallOrder(p []byte) bool {
	var q [32]byte
	copy(q[:], p)
	q[31] &= 0x7f
	blocked := smallOrderEncodings()
	for i := range blocked {
		if subtle.ConstantTimeCompare(q[:], blocked[i][:]) == 1 {
			return true
		}
	}
	return false
}
