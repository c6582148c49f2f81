package rcx

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// capabilitiesOf returns the capability strings of the token's backends.
func capabilitiesOf(tok *Token) []string {
	var caps []string
	for _, b := range tok.Backends {
		for _, p := range b.PermittedCapabilities {
			caps = append(caps, p.Capability)
		}
	}
	return caps
}

func TestMintFreeLocal(t *testing.T) {
	s := newSigner(9)
	issued := time.Unix(1_800_000_000, 500)
	tok, err := MintFreeLocal(s, FreeLocalOptions{Capabilities: testCaps, DaemonInstanceID: "node-7", IssuedAt: issued})
	require.NoError(t, err)

	fpr := s.KeyID()
	assert.Equal(t, SpecVersion, tok.SpecVersion)
	assert.Equal(t, "rcxct_free_"+fpr[2:18]+"_local", tok.TokenID)
	assert.Equal(t, uint64(1_800_000_000), tok.IssuedAt)
	assert.Equal(t, tok.IssuedAt+366*24*3600, tok.ExpiresAt)
	assert.Equal(t, tok.ExpiresAt-3600, tok.RefreshHintAt)
	assert.Equal(t, Issuer{PassportKID: fpr, IssuerOrg: "local"}, tok.Issuer)
	assert.Equal(t, Subject{PassportFpr: fpr, DaemonInstanceID: new("node-7")}, tok.Subject)
	assert.Equal(t, TenantScope{TenantID: "local", DisplayName: new("Local")}, tok.TenantScope)
	assert.Nil(t, tok.TeamScope)
	assert.Nil(t, tok.EnterpriseScope)
	assert.Equal(t, TierFree, tok.Tier)
	assert.Equal(t, ReceiptVerified, tok.ReceiptClass)
	require.Len(t, tok.Backends, 1)
	b := tok.Backends[0]
	assert.Equal(t, LocalBackendID, b.BackendID)
	assert.Equal(t, fpr, b.TrustRootKID)
	assert.Nil(t, b.EndpointURL)
	for _, p := range b.PermittedCapabilities {
		assert.Equal(t, []EgressClass{EgressNone}, p.DataEgressClasses, p.Capability)
		assert.Equal(t, []string{}, p.RequiredAttestations)
		assert.Nil(t, p.CreditCost)
	}
	assert.Equal(t, testCaps, capabilitiesOf(tok))
	assert.Equal(t, Credits{Refill: Refill{Period: RefillNone}, Overdraft: OverdraftForbid}, tok.Credits)
	assert.Equal(t, Fallback{OnBackendUnreachable: FallbackRefuse, OnCreditsExhausted: FallbackRefuse, OnExpiry: FallbackRefuse}, tok.Fallback)
	assert.Equal(t, Revocation{}, tok.Revocation)
	assert.Equal(t, Signature{Alg: SignatureAlg, KID: fpr, Sig: tok.Signature.Sig}, tok.Signature)

	require.NoError(t, tok.Verify(s.Public()))
	assert.Empty(t, tok.ValidateBasic(issued))
	assert.Empty(t, tok.ValidateBasic(issued.Add(365*24*time.Hour)))

	caps := capabilitiesOf(tok)
	for _, hosted := range []string{"crux-mcp.issue_passport", "crux-mcp.sync_pull", "crux-mcp.sync_push"} {
		assert.NotContains(t, caps, hosted)
	}
}

func TestMintFreeLocalOptions(t *testing.T) {
	s := newSigner(9)
	t.Run("explicit capabilities, tenant, ttl", func(t *testing.T) {
		tok, err := MintFreeLocal(s, FreeLocalOptions{
			Tenant:       "acme",
			Capabilities: []string{"a", "b", "a"},
			TTL:          90 * time.Minute,
			IssuedAt:     time.Unix(1000, 0),
		})
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "b"}, capabilitiesOf(tok))
		assert.True(t, slices.Equal([]string{"a", "b"}, capabilitiesOf(tok)))
		assert.Equal(t, "acme", tok.TenantScope.TenantID)
		assert.Equal(t, "rcxct_free_"+s.KeyID()[2:18]+"_acme", tok.TokenID)
		assert.Equal(t, uint64(1000+5400), tok.ExpiresAt)
		assert.Equal(t, uint64(1000+1800), tok.RefreshHintAt)
		assert.Nil(t, tok.Subject.DaemonInstanceID)
	})
	t.Run("short ttl", func(t *testing.T) {
		tok, err := MintFreeLocal(s, FreeLocalOptions{Capabilities: testCaps, TTL: time.Second, IssuedAt: time.Unix(10, 0)})
		require.NoError(t, err)
		assert.Equal(t, uint64(0), tok.RefreshHintAt, "saturating")
		assert.Empty(t, tok.ValidateBasic(time.Unix(10, 0)))
	})
	t.Run("no capabilities grants nothing", func(t *testing.T) {
		tok, err := MintFreeLocal(s, FreeLocalOptions{})
		require.NoError(t, err)
		assert.Empty(t, capabilitiesOf(tok))
	})
	t.Run("now by default", func(t *testing.T) {
		before := time.Now().Unix()
		tok, err := MintFreeLocal(s, FreeLocalOptions{Capabilities: testCaps})
		require.NoError(t, err)
		assert.GreaterOrEqual(t, int64(tok.IssuedAt), before)
		assert.LessOrEqual(t, int64(tok.IssuedAt), time.Now().Unix())
	})
	errs := []struct {
		name string
		s    Signer
		opts FreeLocalOptions
	}{
		{"nil signer", nil, FreeLocalOptions{Capabilities: testCaps}},
		{"empty key id", &testSigner{priv: s.priv}, FreeLocalOptions{Capabilities: testCaps}},
		{"negative ttl", s, FreeLocalOptions{Capabilities: testCaps, TTL: -time.Hour}},
		{"sub-second ttl", s, FreeLocalOptions{Capabilities: testCaps, TTL: time.Millisecond}},
		{"before 1970", s, FreeLocalOptions{Capabilities: testCaps, IssuedAt: time.Unix(-1, 0)}},
		{"signer failure", brokenSigner{testSigner: s, err: errSignerDown}, FreeLocalOptions{Capabilities: testCaps}},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := MintFreeLocal(tt.s, tt.opts)
			require.Error(t, err)
			assert.Nil(t, tok)
		})
	}
}

// TestMintFreeLocalMatchesFixture mints the rcx-ct/1.0 free-local fixture
// through MintFreeLocal: apart from the signature, the token (and so its
// hash) is the golden one.
func TestMintFreeLocalMatchesFixture(t *testing.T) {
	s := newSigner(5)
	s.kid = fixtureFpr
	tok, err := MintFreeLocal(s, FreeLocalOptions{
		Tenant:           "default",
		DaemonInstanceID: fixtureDaemon,
		IssuedAt:         time.Unix(fixtureIssued, 0),
		TTL:              (fixtureExpires - fixtureIssued) * time.Second,
		Capabilities:     []string{"corecrux.query.local"},
	})
	require.NoError(t, err)
	h, err := tok.HashHex()
	require.NoError(t, err)
	assert.Equal(t, goldenTokenHash, h)

	want := fixture()
	want.Signature.Sig = tok.Signature.Sig
	assert.Equal(t, want, tok)
}

func TestShortFingerprint(t *testing.T) {
	tests := []struct{ in, want string }{
		{"p_0123456789abcdef0123456789abcdef", "0123456789abcdef"},
		{"p_p_0123456789abcdefXYZ", "0123456789abcdef"},
		{"abc", "abc"},
		{"p_", ""},
		{"p_ééééééééééééééééééé", "éééééééééééééééé"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, shortFingerprint(tt.in), tt.in)
	}
}
