package rcx

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGoldenVector(t *testing.T) {
	tok := fixture()

	b, err := tok.Encode()
	require.NoError(t, err)
	assert.Equal(t, goldenCanonicalH, hex.EncodeToString(b), "canonical CBOR")
	assert.True(t, strings.HasPrefix(hex.EncodeToString(b), "af6474696572"), "15-key map, first key tier")

	h, err := tok.HashHex()
	require.NoError(t, err)
	assert.Equal(t, goldenTokenHash, h, "token hash")

	// Decoding the golden bytes gives the fixture back.
	back, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, tok, back)
}

func TestSigningBytesZeroSignature(t *testing.T) {
	tok := fixture()
	canonical, err := tok.Encode()
	require.NoError(t, err)
	signing, err := tok.SigningBytes()
	require.NoError(t, err)

	ones := append([]byte{0x58, 0x40}, bytes.Repeat([]byte{0x11}, 64)...)
	zeros := append([]byte{0x58, 0x40}, make([]byte, 64)...)
	require.Equal(t, 1, bytes.Count(canonical, ones))
	assert.Equal(t, bytes.Replace(canonical, ones, zeros, 1), signing)
	assert.Equal(t, Sig(bytes.Repeat([]byte{0x11}, 64)), tok.Signature.Sig, "SigningBytes must not modify the token")

	// The hash ignores the signature but covers alg and kid.
	other := fixture()
	other.Signature.Sig = Sig{1, 2, 3}
	assertSameHash(t, tok, other)
	other.Signature.KID = "p_other"
	h1, _ := tok.Hash()
	h2, _ := other.Hash()
	assert.NotEqual(t, h1, h2)
}

func assertSameHash(t *testing.T, a, b *Token) {
	t.Helper()
	ha, err := a.Hash()
	require.NoError(t, err)
	hb, err := b.Hash()
	require.NoError(t, err)
	assert.Equal(t, ha, hb)
}

func TestEncodeDeterministic(t *testing.T) {
	s := newSigner(7)
	tok, err := MintFreeLocal(s, FreeLocalOptions{Capabilities: testCaps, IssuedAt: time.Unix(fixtureIssued, 0), DaemonInstanceID: "node-1"})
	require.NoError(t, err)
	team := hostedToken(s, FallbackQueue, FallbackDegradeToLocal, FallbackRefuse, new(uint64(60)), new(uint64(9)))
	team.Tier = TierTeam
	team.TeamScope = &TeamScope{TeamID: "t", SeatRole: new(SeatAdmin), PooledCreditAgentID: "pool", PrincipalPassportFprs: []string{"p_a", "p_b"}}
	team.EnterpriseScope = &EnterpriseScope{CustomerID: "c", BackendID: "customer:x", EndpointURL: "https://x", TrustRootKID: "r", Airgap: true}

	for name, tok := range map[string]*Token{"free-local": tok, "team": team, "fixture": fixture()} {
		t.Run(name, func(t *testing.T) {
			a, err := tok.Encode()
			require.NoError(t, err)
			b, err := tok.Encode()
			require.NoError(t, err)
			assert.Equal(t, a, b)
			assertKeysSorted(t, a)

			back, err := Decode(a)
			require.NoError(t, err)
			assert.Equal(t, tok, back)
			assertSameHash(t, tok, back)
			c, err := back.Encode()
			require.NoError(t, err)
			assert.Equal(t, a, c)
		})
	}
}

// assertKeysSorted walks every map in the CBOR item b and checks that its
// keys are text strings in length-first, then bytewise order (RFC 8949
// §4.2.1 for text keys), with no duplicates.
func assertKeysSorted(t *testing.T, b []byte) {
	t.Helper()
	var walk func(item []byte)
	walk = func(item []byte) {
		major := item[0] >> 5
		if major != 4 && major != 5 {
			return
		}
		n, off := head(t, item)
		dec := cbor.NewDecoder(bytes.NewReader(item[off:]))
		var prev string
		for i := uint64(0); i < n; i++ {
			if major == 5 {
				var k string
				require.NoError(t, dec.Decode(&k))
				if i > 0 {
					require.True(t, len(prev) < len(k) || (len(prev) == len(k) && prev < k),
						"key %q after %q", k, prev)
				}
				prev = k
			}
			var v cbor.RawMessage
			require.NoError(t, dec.Decode(&v))
			walk(v)
		}
	}
	walk(b)
}

// head returns the count in the head of an array or map item and the
// head's length. It fails on indefinite lengths.
func head(t *testing.T, item []byte) (uint64, int) {
	t.Helper()
	ai := item[0] & 0x1f
	switch {
	case ai < 24:
		return uint64(ai), 1
	case ai == 24:
		require.GreaterOrEqual(t, item[1], byte(24), "non-shortest head")
		return uint64(item[1]), 2
	case ai == 25:
		return uint64(binary.BigEndian.Uint16(item[1:])), 3
	}
	require.Failf(t, "unexpected head", "%x", item[0])
	return 0, 0
}

func TestEncodeOptionalFields(t *testing.T) {
	tok := fixture()
	tok.Subject.DaemonInstanceID = nil
	b, err := tok.Encode()
	require.NoError(t, err)
	assert.Contains(t, hex.EncodeToString(b), hex.EncodeToString([]byte("daemon_instance_id"))+"f6", "nil optional is null")
	assert.NotContains(t, string(b), "team_scope", "absent scope is left out")
	assert.NotContains(t, string(b), "enterprise_scope")
	assert.Equal(t, byte(0xaf), b[0], "15 keys")

	tok.TeamScope = &TeamScope{TeamID: "t"}
	b, err = tok.Encode()
	require.NoError(t, err)
	assert.Contains(t, string(b), "team_scope")
	assert.Equal(t, byte(0xb0), b[0], "16 keys")
	assert.Contains(t, hex.EncodeToString(b), hex.EncodeToString([]byte("principal_passport_fprs"))+"80", "nil slice is an empty array")
	assert.Contains(t, hex.EncodeToString(b), hex.EncodeToString([]byte("seat_role"))+"f6")
}

func TestEncodeRejectsInvalidValues(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Token)
	}{
		{"tier", func(t *Token) { t.Tier = "gold" }},
		{"receipt class", func(t *Token) { t.ReceiptClass = "" }},
		{"egress class", func(t *Token) { t.Backends[0].PermittedCapabilities[0].DataEgressClasses = []EgressClass{"everything"} }},
		{"cost unit", func(t *Token) { t.Backends[0].PermittedCapabilities[0].CreditCost = &CreditCost{Unit: "minute"} }},
		{"refill period", func(t *Token) { t.Credits.Refill.Period = "weekly" }},
		{"overdraft", func(t *Token) { t.Credits.Overdraft = "always" }},
		{"fallback", func(t *Token) { t.Fallback.OnExpiry = "pray" }},
		{"seat role", func(t *Token) { t.TeamScope = &TeamScope{SeatRole: new(SeatRole("king"))} }},
		{"utf-8", func(t *Token) { t.TokenID = "\xff" }},
		{"utf-8 optional", func(t *Token) { t.Revocation.CRLURL = new("\xc3") }},
		{"utf-8 capability", func(t *Token) { t.Backends[0].PermittedCapabilities[0].Capability = "\xfe" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := fixture()
			tt.mutate(tok)
			_, err := tok.Encode()
			require.ErrorIs(t, err, ErrInvalidValue)
			_, err = tok.Hash()
			require.ErrorIs(t, err, ErrInvalidValue)
		})
	}
	var nilTok *Token
	_, err := nilTok.Encode()
	require.ErrorIs(t, err, ErrInvalidValue)
}

func TestDecodeStrict(t *testing.T) {
	golden, err := hex.DecodeString(goldenCanonicalH)
	require.NoError(t, err)
	hexReplace := func(old, new string) []byte {
		s := hex.EncodeToString(golden)
		require.Equal(t, 1, strings.Count(s, old), old)
		b, err := hex.DecodeString(strings.Replace(s, old, new, 1))
		require.NoError(t, err)
		return b
	}
	text := func(s string) string { return hex.EncodeToString([]byte(s)) }

	unsorted := func() []byte {
		em, err := cbor.EncOptions{Sort: cbor.SortNone, NilContainers: cbor.NilContainerAsEmpty}.EncMode()
		require.NoError(t, err)
		b, err := em.Marshal(fixture())
		require.NoError(t, err)
		require.NotEqual(t, golden, b)
		return b
	}()
	withKey := func(key string) []byte { // a 16th key, inserted in sorted position is irrelevant: any order fails
		b := append([]byte{0xb0}, golden[1:]...)
		kv, err := cbor.Marshal(map[string]any{key: nil})
		require.NoError(t, err)
		return append(b, kv[1:]...)
	}

	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"not a map", []byte{0x80}, ErrMalformed},
		{"truncated", golden[:len(golden)-1], ErrMalformed},
		{"trailing bytes", append(append([]byte{}, golden...), 0x00), ErrMalformed},
		{"too large", append([]byte{0xa0}, make([]byte, MaxEncodedSize)...), ErrMalformed},
		{"unknown field", withKey("zzz"), ErrMalformed},
		{"duplicate key", withKey("tier"), ErrMalformed},
		{"team_scope null", withKey("team_scope"), ErrNonCanonical},
		{"indefinite map", append(append([]byte{0xbf}, golden[1:]...), 0xff), ErrMalformed},
		{"tag", append([]byte{0xd8, 0x37}, golden...), ErrMalformed},
		{"nested tag", hexReplace("1a69eab5a0", "c11a69eab5a0"), ErrMalformed},
		{"unsorted keys", unsorted, ErrNonCanonical},
		{"non-shortest integer", hexReplace("1a69eab5a0", "1b0000000069eab5a0"), ErrNonCanonical},
		{"integer as float", hexReplace("1a69eab5a0", "fb"+hex.EncodeToString(binary.BigEndian.AppendUint64(nil, math.Float64bits(fixtureIssued)))), ErrMalformed},
		{"short signature", hexReplace("5840"+strings.Repeat("11", 64), "583f"+strings.Repeat("11", 63)), ErrNonCanonical},
		{"unknown tier", hexReplace(text("tier")+"64"+text("free"), text("tier")+"64"+text("gold")), ErrInvalidValue},
		{"misspelled key", hexReplace(text("tier")+"64"+text("free"), text("tiex")+"64"+text("free")), ErrMalformed},
		{"invalid utf-8", hexReplace("64"+text("free"), "64"+"ffffffff"), ErrMalformed},
		{"signature as text", hexReplace("5840"+strings.Repeat("11", 64), "7840"+strings.Repeat("31", 64)), ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := Decode(tt.in)
			require.ErrorIs(t, err, tt.want)
			assert.Nil(t, tok)
		})
	}
}

func TestDecodeMissingFieldIsNonCanonical(t *testing.T) {
	// A map lacking a required key decodes to a zero value that re-encodes
	// with the key present, so it is refused.
	tok := fixture()
	em, err := cbor.CoreDetEncOptions().EncMode()
	require.NoError(t, err)
	m := map[string]any{}
	b, err := tok.Encode()
	require.NoError(t, err)
	require.NoError(t, cbor.Unmarshal(b, &m))
	delete(m, "revocation")
	b, err = em.Marshal(m)
	require.NoError(t, err)
	_, err = Decode(b)
	require.ErrorIs(t, err, ErrNonCanonical)
}

func TestSigJSON(t *testing.T) {
	tok := fixture()
	b, err := json.Marshal(tok)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"sig":"`+strings.Repeat("11", 64)+`"`)
	assert.NotContains(t, string(b), "team_scope")

	var back Token
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, tok, &back)

	var s Sig
	require.Error(t, s.UnmarshalText([]byte("abcd")))
	require.Error(t, s.UnmarshalText([]byte(strings.Repeat("zz", 64))))
}

func TestClone(t *testing.T) {
	s := newSigner(1)
	orig := hostedToken(s, FallbackQueue, FallbackQueue, FallbackQueue, new(uint64(1)), new(uint64(2)))
	orig.TeamScope = &TeamScope{TeamID: "t", SeatID: new("s"), SeatRole: new(SeatOwner), PrincipalPassportFprs: []string{"p"}}
	orig.EnterpriseScope = &EnterpriseScope{ContractID: new("c")}
	orig.Revocation = Revocation{CRLURL: new("u"), PushChannel: new("p")}
	orig.Credits.OverdraftLimit = new(uint64(3))
	orig.Credits.Refill.Amount = new(uint64(4))

	c := orig.Clone()
	require.Equal(t, orig, c)
	before, err := orig.Encode()
	require.NoError(t, err)

	c.Backends[0].PermittedCapabilities[0].RequiredAttestations[0] = "x"
	c.Backends[0].PermittedCapabilities[0].DataEgressClasses[0] = EgressText
	*c.Backends[0].PermittedCapabilities[0].CreditCost = CreditCost{Unit: CostPerByte, Cost: 99}
	*c.Backends[0].EndpointURL = "x"
	*c.Subject.DaemonInstanceID = "x"
	*c.TenantScope.DisplayName = "x"
	*c.TeamScope.SeatID = "x"
	*c.TeamScope.SeatRole = SeatViewer
	c.TeamScope.PrincipalPassportFprs[0] = "x"
	*c.EnterpriseScope.ContractID = "x"
	*c.Credits.Balance = 0
	*c.Credits.OverdraftLimit = 0
	*c.Credits.Refill.Amount = 0
	*c.Fallback.QueueTTLSeconds = 0
	*c.Revocation.CRLURL = "x"
	*c.Revocation.PushChannel = "x"

	after, err := orig.Encode()
	require.NoError(t, err)
	assert.Equal(t, before, after)
	assert.Nil(t, (*Token)(nil).Clone())
}
