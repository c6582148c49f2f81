package rcx

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"lukechampine.com/blake3"
)

// The free-local test fixture of CueCrux's rcx-ct/1.0 token format and its
// golden vector (token hash and canonical CBOR), which any compatible
// encoder must reproduce.
const (
	fixtureFpr       = "p_0123456789abcdef0123456789abcdef"
	fixtureDaemon    = "daemon_01HV0000000000000000000000"
	fixtureIssued    = 1_776_989_600
	fixtureExpires   = 1_780_143_200
	fixtureRefresh   = 1_780_139_600
	goldenTokenHash  = "fec9ac825cd4f1f2ccbb3c4cf95495d61416e867818413153e86cc4539b3cee9"
	goldenCanonicalH = "af6474696572646672656566697373756572a26a6973737565725f6f7267656c6f63616c6c70617373706f72745f6b69647822705f30313233343536373839616263646566303132333435363738396162636465666763726564697473a466726566696c6ca266616d6f756e74f666706572696f64646e6f6e656762616c616e6365f6696f766572647261667466666f726269646f6f76657264726166745f6c696d6974f6677375626a656374a26c70617373706f72745f6670727822705f3031323334353637383961626364656630313233343536373839616263646566726461656d6f6e5f696e7374616e63655f696478216461656d6f6e5f3031485630303030303030303030303030303030303030303030686261636b656e647381a46a6261636b656e645f6964656c6f63616c6c656e64706f696e745f75726cf66e74727573745f726f6f745f6b69647822705f3031323334353637383961626364656630313233343536373839616263646566767065726d69747465645f6361706162696c697469657381a46a6361706162696c69747974636f7265637275782e71756572792e6c6f63616c6b6372656469745f636f7374f673646174615f6567726573735f636c617373657381646e6f6e657572657175697265645f6174746573746174696f6e73806866616c6c6261636ba4696f6e5f657870697279667265667573657171756575655f74746c5f7365636f6e6473f6746f6e5f637265646974735f65786861757374656466726566757365766f6e5f6261636b656e645f756e726561636861626c656672656675736568746f6b656e5f6964782372637863745f667265655f303132333435363738396162636465665f64656661756c74696973737565645f61741a69eab5a0697369676e6174757265a363616c676765643235353139636b69647822705f3031323334353637383961626364656630313233343536373839616263646566637369675840111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111116a657870697265735f61741a6a1ad4606a7265766f636174696f6ea26763726c5f75726cf66c707573685f6368616e6e656cf66c737065635f76657273696f6e6a7263782d63742f312e306c74656e616e745f73636f7065a26974656e616e745f69646764656661756c746c646973706c61795f6e616d65654c6f63616c6d726563656970745f636c6173736876657269666965646f726566726573685f68696e745f61741a6a1ac650"
)

// fixture returns the free-local test fixture of the rcx-ct/1.0 format.
func fixture() *Token {
	return &Token{
		SpecVersion:   SpecVersion,
		TokenID:       "rcxct_free_0123456789abcdef_default",
		IssuedAt:      fixtureIssued,
		ExpiresAt:     fixtureExpires,
		RefreshHintAt: fixtureRefresh,
		Issuer:        Issuer{PassportKID: fixtureFpr, IssuerOrg: "local"},
		Subject:       Subject{PassportFpr: fixtureFpr, DaemonInstanceID: new(fixtureDaemon)},
		TenantScope:   TenantScope{TenantID: "default", DisplayName: new("Local")},
		Tier:          TierFree,
		ReceiptClass:  ReceiptVerified,
		Backends: []Backend{{
			BackendID:    LocalBackendID,
			TrustRootKID: fixtureFpr,
			PermittedCapabilities: []PermittedCapability{{
				Capability:           "corecrux.query.local",
				DataEgressClasses:    []EgressClass{EgressNone},
				RequiredAttestations: []string{},
			}},
		}},
		Credits:  Credits{Refill: Refill{Period: RefillNone}, Overdraft: OverdraftForbid},
		Fallback: Fallback{OnBackendUnreachable: FallbackRefuse, OnCreditsExhausted: FallbackRefuse, OnExpiry: FallbackRefuse},
		Signature: Signature{
			Alg: SignatureAlg,
			KID: fixtureFpr,
			Sig: Sig(bytes.Repeat([]byte{0x11}, SignatureSize)),
		},
	}
}

// testSigner is an in-memory Ed25519 Signer.
type testSigner struct {
	priv ed25519.PrivateKey
	kid  string
}

// newSigner returns a signer whose key is derived from seed and whose key
// id is "p_" + the first 32 hex digits of BLAKE3(public key).
func newSigner(seed byte) *testSigner {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	sum := blake3.Sum256(priv.Public().(ed25519.PublicKey))
	return &testSigner{priv: priv, kid: "p_" + hex.EncodeToString(sum[:16])}
}

func (s *testSigner) KeyID() string             { return s.kid }
func (s *testSigner) Public() ed25519.PublicKey { return s.priv.Public().(ed25519.PublicKey) }
func (s *testSigner) Sign(msg []byte) ([]byte, error) {
	return ed25519.Sign(s.priv, msg), nil
}

// brokenSigner returns a fixed signature or error.
type brokenSigner struct {
	*testSigner
	sig []byte
	err error
}

func (s brokenSigner) Sign([]byte) ([]byte, error) { return s.sig, s.err }

var errSignerDown = errors.New("signer down")

// issuedBy rewrites t's issuer, subject and backends' trust roots to s's
// key id, as a token minted with s would have them.
func issuedBy(t *Token, s Signer) *Token {
	kid := s.KeyID()
	t.Issuer.PassportKID = kid
	t.Subject.PassportFpr = kid
	t.Signature.KID = kid
	for i := range t.Backends {
		t.Backends[i].TrustRootKID = kid
	}
	return t
}

// signed signs t with s and returns it.
func signed(tb testing.TB, t *Token, s Signer) *Token {
	tb.Helper()
	require.NoError(tb, Sign(t, s))
	return t
}

// at returns a clock fixed at Unix second sec.
func at(sec int64) func() time.Time {
	return func() time.Time { return time.Unix(sec, 0) }
}

// hostedToken is a pro token with one hosted backend permitting
// vaultcrux.retrieve (egress vectors and receipt_hashes, attestation
// passport_bound, cost 1 per call) and a local backend permitting
// corecrux.query.local, with the given fallbacks and balance; unsigned.
func hostedToken(s Signer, onUnreachable, onCredits, onExpiry FallbackAction, queueTTL, balance *uint64) *Token {
	t := issuedBy(fixture(), s)
	t.Tier = TierPro
	t.Backends = []Backend{
		{
			BackendID:    HostedBackendID,
			TrustRootKID: s.KeyID(),
			EndpointURL:  new("https://" + HostedBackendID),
			PermittedCapabilities: []PermittedCapability{{
				Capability:           HostedRetrieveCapability,
				DataEgressClasses:    []EgressClass{EgressVectors, EgressReceiptHashes},
				RequiredAttestations: []string{"passport_bound"},
				CreditCost:           &CreditCost{Unit: CostPerCall, Cost: 1},
			}},
		},
		t.Backends[0],
	}
	t.Credits.Balance = balance
	t.Fallback = Fallback{OnBackendUnreachable: onUnreachable, OnCreditsExhausted: onCredits, OnExpiry: onExpiry, QueueTTLSeconds: queueTTL}
	return t
}

// retrieveCall is a well-formed call of the hosted capability.
func retrieveCall(cost uint64) Call {
	return Call{
		Capability:       HostedRetrieveCapability,
		PreferredBackend: HostedBackendID,
		EgressClasses:    []string{string(EgressVectors), string(EgressReceiptHashes)},
		Attestations:     []string{"passport_bound"},
		EstimatedCost:    cost,
	}
}

// testCaps is a free-local capability list of the shape crux mints: local
// tools' capabilities, the one shared by the retrieval tools, and
// federation read. The hosted-gated tools are absent.
var testCaps = []string{
	"crux-mcp.cuecrux_session", "corecrux.query.local", "crux-mcp.store_fact", "crux-mcp.query_facts",
	"crux-mcp.memory_view", "crux-mcp.sync_status", FederationReadCapability,
}

// call returns the Call crux makes for the named tool: capability
// crux-mcp.<name>, the hosted backend preferred for the hosted-gated
// sync_pull, sync_push and issue_passport.
func call(name string) Call {
	hosted := name == "sync_pull" || name == "sync_push" || name == "issue_passport"
	return ToolCall("crux-mcp."+name, hosted)
}
