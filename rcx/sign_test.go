package rcx

import (
	"crypto/ed25519"
	"math/big"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSignVerify(t *testing.T) {
	s := newSigner(1)
	tok := signed(t, issuedBy(fixture(), s), s)
	require.NoError(t, tok.Verify(s.Public()))
	assert.Equal(t, SignatureAlg, tok.Signature.Alg)
	assert.Equal(t, s.KeyID(), tok.Signature.KID)

	// The signature is Ed25519 over the 32-byte token hash.
	h, err := tok.Hash()
	require.NoError(t, err)
	assert.True(t, ed25519.Verify(s.Public(), h[:], tok.Signature.Sig[:]))

	// Encoding and decoding keep it verifiable.
	b, err := tok.Encode()
	require.NoError(t, err)
	back, err := Decode(b)
	require.NoError(t, err)
	require.NoError(t, back.Verify(s.Public()))
}

func TestVerifyFailures(t *testing.T) {
	s := newSigner(1)
	good := func() *Token { return signed(t, issuedBy(fixture(), s), s) }
	identity := make(ed25519.PublicKey, 32)
	identity[0] = 1

	tests := []struct {
		name   string
		tok    func() *Token
		pub    ed25519.PublicKey
		want   error
		detail string
	}{
		{"other key", good, newSigner(2).Public(), ErrBadSignature, ""},
		{"tampered capability", func() *Token {
			tok := good()
			tok.Backends[0].PermittedCapabilities[0].Capability = "crux-mcp.sync_pull"
			return tok
		}, s.Public(), ErrBadSignature, ""},
		{"tampered expiry", func() *Token { tok := good(); tok.ExpiresAt++; return tok }, s.Public(), ErrBadSignature, ""},
		{"flipped signature bit", func() *Token { tok := good(); tok.Signature.Sig[40] ^= 1; return tok }, s.Public(), ErrBadSignature, ""},
		{"alg", func() *Token { tok := good(); tok.Signature.Alg = "ES256"; return tok }, s.Public(), ErrUnsupportedAlg, ""},
		{"kid", func() *Token { tok := good(); tok.Signature.KID = "p_x"; return tok }, s.Public(), ErrKIDMismatch, ""},
		{"short key", good, s.Public()[:31], ErrBadPublicKey, "31 bytes"},
		{"nil key", good, nil, ErrBadPublicKey, "0 bytes"},
		{"small-order key", good, identity, ErrBadPublicKey, "small order"},
		{"non-canonical key", good, nonCanonical(2), ErrBadPublicKey, "non-canonical"},
		{"small-order R", func() *Token {
			tok := good()
			copy(tok.Signature.Sig[:32], identity)
			return tok
		}, s.Public(), ErrBadSignature, "small order"},
		{"non-canonical S", func() *Token {
			tok := good()
			// S + L verifies arithmetically; crypto/ed25519 refuses it.
			be := slices.Clone(tok.Signature.Sig[32:])
			slices.Reverse(be)
			sVal := new(big.Int).SetBytes(be)
			sVal.Add(sVal, groupOrder())
			le := make([]byte, 32)
			sVal.FillBytes(le)
			slices.Reverse(le)
			copy(tok.Signature.Sig[32:], le)
			return tok
		}, s.Public(), ErrBadSignature, ""},
		{"unencodable", func() *Token { tok := good(); tok.Tier = "x"; return tok }, s.Public(), ErrInvalidValue, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.tok().Verify(tt.pub)
			require.ErrorIs(t, err, tt.want)
			assert.Contains(t, err.Error(), tt.detail)
		})
	}
	require.ErrorIs(t, (*Token)(nil).Verify(s.Public()), ErrInvalidValue)
}

// TestVerifyRefusesSmallOrderForgery shows why small-order keys are
// refused: with the identity as public key, R = identity and S = 0 verify
// for every message under plain crypto/ed25519.
func TestVerifyRefusesSmallOrderForgery(t *testing.T) {
	identity := make(ed25519.PublicKey, 32)
	identity[0] = 1
	tok := fixture()
	tok.Signature.Sig = Sig{}
	tok.Signature.Sig[0] = 1
	h, err := tok.Hash()
	require.NoError(t, err)
	require.True(t, ed25519.Verify(identity, h[:], tok.Signature.Sig[:]), "the forgery works against plain Verify")
	require.ErrorIs(t, tok.Verify(identity), ErrBadPublicKey)
}

func TestSign(t *testing.T) {
	s := newSigner(3)
	t.Run("signer kid must be the issuer", func(t *testing.T) {
		tok := fixture()
		before := tok.Signature
		require.ErrorIs(t, Sign(tok, s), ErrKIDMismatch)
		assert.Equal(t, before, tok.Signature, "unchanged on error")
	})
	t.Run("sets alg and kid", func(t *testing.T) {
		tok := issuedBy(fixture(), s)
		tok.Signature.Alg = ""
		tok.Signature.KID = ""
		require.NoError(t, Sign(tok, s))
		require.NoError(t, tok.Verify(s.Public()))
	})
	faulty := []struct {
		name string
		s    Signer
		want error
	}{
		{"signer error", brokenSigner{testSigner: s, err: errSignerDown}, errSignerDown},
		{"short signature", brokenSigner{testSigner: s, sig: make([]byte, 63)}, ErrBadSignature},
		{"wrong key's signature", brokenSigner{testSigner: s, sig: make([]byte, 64)}, ErrBadSignature},
		{"bad public key", badKeySigner{s}, ErrBadPublicKey},
	}
	for _, tt := range faulty {
		t.Run(tt.name, func(t *testing.T) {
			tok := issuedBy(fixture(), s)
			before := tok.Signature
			require.ErrorIs(t, Sign(tok, tt.s), tt.want)
			assert.Equal(t, before, tok.Signature, "unchanged on error")
		})
	}
	require.Error(t, Sign(fixture(), nil))
	require.ErrorIs(t, Sign(nil, s), ErrInvalidValue)
	bad := issuedBy(fixture(), s)
	bad.Tier = "x"
	require.ErrorIs(t, Sign(bad, s), ErrInvalidValue)
}

type badKeySigner struct{ *testSigner }

func (badKeySigner) Public() ed25519.PublicKey { return make(ed25519.PublicKey, 32) }

// Field arithmetic for TestSmallOrderBlocklist: affine twisted Edwards
// coordinates over GF(2^255-19), a = -1.

func fieldP() *big.Int {
	p := new(big.Int).Lsh(big.NewInt(1), 255)
	return p.Sub(p, big.NewInt(19))
}

func groupOrder() *big.Int {
	l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	return l
}

func curveD() *big.Int {
	p := fieldP()
	num := new(big.Int).Neg(big.NewInt(121665))
	den := new(big.Int).ModInverse(big.NewInt(121666), p)
	return num.Mul(num, den).Mod(num, p)
}

type point struct{ x, y *big.Int }

func add(a, b point) point {
	p, d := fieldP(), curveD()
	m := func(xs ...*big.Int) *big.Int {
		r := big.NewInt(1)
		for _, x := range xs {
			r.Mul(r, x).Mod(r, p)
		}
		return r
	}
	dxy := m(d, a.x, b.x, a.y, b.y)
	xn := new(big.Int).Add(m(a.x, b.y), m(a.y, b.x))
	xd := new(big.Int).Add(big.NewInt(1), dxy)
	yn := new(big.Int).Add(m(a.y, b.y), m(a.x, b.x)) // y1y2 - a x1x2 with a = -1
	yd := new(big.Int).Sub(big.NewInt(1), dxy)
	x := m(xn, new(big.Int).ModInverse(xd.Mod(xd, p), p))
	y := m(yn, new(big.Int).ModInverse(yd.Mod(yd, p), p))
	return point{x, y}
}

// decode decompresses a 32-byte encoding, reducing y modulo p; ok is false
// when no point has that y.
func decode(enc [32]byte) (point, bool) {
	p, d := fieldP(), curveD()
	le := enc
	sign := le[31] >> 7
	le[31] &= 0x7f
	slices.Reverse(le[:])
	y := new(big.Int).SetBytes(le[:])
	y.Mod(y, p)
	y2 := new(big.Int).Mul(y, y)
	num := new(big.Int).Sub(y2, big.NewInt(1))
	den := new(big.Int).Add(new(big.Int).Mul(d, y2), big.NewInt(1))
	x2 := num.Mul(num, new(big.Int).ModInverse(den.Mod(den, p), p))
	x2.Mod(x2, p)
	x := new(big.Int).ModSqrt(x2, p)
	if x == nil {
		return point{}, false
	}
	if x.Bit(0) != uint(sign) {
		x.Sub(p, x).Mod(x, p)
	}
	return point{x, y}, true
}

func encode(pt point) [32]byte {
	var b [32]byte
	pt.y.FillBytes(b[:])
	slices.Reverse(b[:])
	b[31] |= byte(pt.x.Bit(0)) << 7
	return b
}

// nonCanonical returns the encoding of y = p + k (k < 19).
func nonCanonical(k int64) ed25519.PublicKey {
	y := new(big.Int).Add(fieldP(), big.NewInt(k))
	b := make([]byte, 32)
	y.FillBytes(b)
	slices.Reverse(b)
	return b
}

// TestSmallOrderBlocklist derives the small-order points independently:
// each blocklisted y gives points P with 8P = identity, together they are
// the eight points of the torsion subgroup (which has exactly eight), and
// smallOrder refuses every encoding of each, both signs.
func TestSmallOrderBlocklist(t *testing.T) {
	identity := point{big.NewInt(0), big.NewInt(1)}
	torsion := map[[32]byte]bool{}
	for _, enc := range smallOrderEncodings() {
		for _, sign := range []byte{0, 0x80} {
			e := enc
			e[31] |= sign
			pt, ok := decode(e)
			require.True(t, ok, "%x is on the curve", e)
			q := pt
			for range 3 {
				q = add(q, q)
			}
			assert.Zero(t, q.x.Cmp(identity.x), "8P = O for %x", e)
			assert.Zero(t, q.y.Cmp(identity.y), "8P = O for %x", e)
			torsion[encode(pt)] = true
			assert.True(t, smallOrder(e[:]))
		}
	}
	assert.Len(t, torsion, 8, "the blocklist covers the whole torsion subgroup")

	// Every non-canonical encoding is refused, small order or not.
	for k := int64(0); k < 19; k++ {
		for _, sign := range []byte{0, 0x80} {
			pub := nonCanonical(k)
			pub[31] |= sign
			assert.ErrorIs(t, checkPublicKey(pub), ErrBadPublicKey, "y = p + %d", k)
		}
	}
	// Ordinary keys pass.
	for seed := range byte(50) {
		pub := newSigner(seed).Public()
		assert.NoError(t, checkPublicKey(pub))
		pt, ok := decode([32]byte(pub))
		require.True(t, ok)
		assert.Equal(t, [32]byte(pub), encode(pt))
	}
}
