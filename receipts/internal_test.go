package receipts

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"encoding/hex"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSmallOrderList cross-checks the small-order blocklist with X25519,
// which refuses low-order inputs: a point of the Edwards curve with y ≠ 1
// maps to the Montgomery u = (1+y)/(1-y).
func TestSmallOrderList(t *testing.T) {
	p := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))
	priv, err := ecdh.X25519().GenerateKey(nil)
	require.NoError(t, err)
	lowOrder := func(enc []byte) bool {
		var le [32]byte
		copy(le[:], enc)
		le[31] &= 0x7f
		y := new(big.Int).SetBytes(reversed(le[:]))
		y.Mod(y, p)
		if y.Cmp(big.NewInt(1)) == 0 {
			return true // the identity
		}
		den := new(big.Int).Sub(big.NewInt(1), y)
		den.Mod(den, p)
		u := new(big.Int).Add(big.NewInt(1), y)
		u.Mul(u, new(big.Int).ModInverse(den, p)).Mod(u, p)
		ub := make([]byte, 32)
		u.FillBytes(ub)
		pub, err := ecdh.X25519().NewPublicKey(reversed(ub))
		require.NoError(t, err)
		_, err = priv.ECDH(pub)
		return err != nil
	}

	for _, h := range []string{
		"0000000000000000000000000000000000000000000000000000000000000000",
		"0100000000000000000000000000000000000000000000000000000000000000",
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	} {
		enc, _ := hex.DecodeString(h)
		assert.True(t, isSmallOrder(enc), h)
		assert.True(t, lowOrder(enc), "X25519 agrees %s is of small order", h)
		enc[31] |= 0x80 // the sign bit does not matter
		assert.True(t, isSmallOrder(enc), h)
		assert.NotEmpty(t, checkPublicKey(enc), h)
	}
	for range 200 {
		pub, _, err := ed25519.GenerateKey(nil)
		require.NoError(t, err)
		assert.False(t, isSmallOrder(pub))
		assert.False(t, lowOrder(pub))
		assert.Empty(t, checkPublicKey(pub))
	}
}

func TestCheckPublicKey(t *testing.T) {
	y := func(v byte, sign bool) []byte {
		b := make([]byte, 32)
		b[0] = v
		if sign {
			b[31] |= 0x80
		}
		return b
	}
	pMinus := func(sub byte) []byte { // p - sub, p = 2^255 - 19
		b, _ := hex.DecodeString("edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")
		b[0] -= sub
		return b
	}
	nonCanonical3, _ := hex.DecodeString("f0ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f") // p + 3
	tests := []struct {
		name string
		pub  []byte
		ok   bool
	}{
		{"y=3 is a point", y(3, false), true},
		{"y=3 with sign bit", y(3, true), true},
		{"y=2 is not on the curve", y(2, false), false},
		{"y=7 is not on the curve", y(7, false), false},
		{"y=p+3 is not canonical", nonCanonical3, false},
		{"y=p-1 has order 2", pMinus(1), false},
		{"y=1 with sign bit is the identity", y(1, true), false},
		{"short", make([]byte, 31), false},
		{"long", make([]byte, 33), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.ok {
				assert.Empty(t, checkPublicKey(tt.pub))
			} else {
				assert.NotEmpty(t, checkPublicKey(tt.pub))
			}
		})
	}
}
