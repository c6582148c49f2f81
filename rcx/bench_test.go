package rcx

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkDecide measures one decision under the free-local token with
// every built-in local capability: an authorised local tool, a refused
// hosted tool (which builds a refusal receipt), and an authorised hosted
// call that exercises egress, attestation and credit checks.
func BenchmarkDecide(b *testing.B) {
	s := newSigner(1)
	tok, err := MintFreeLocal(s, FreeLocalOptions{Capabilities: testCaps, IssuedAt: time.Unix(fixtureIssued, 0)})
	require.NoError(b, err)
	r, err := NewRouter(tok, s.Public(), nil)
	require.NoError(b, err)
	ctx := context.Background()

	hosted := signed(b, hostedToken(s, FallbackRefuse, FallbackRefuse, FallbackRefuse, nil, new(uint64(10))), s)
	hr, err := NewRouter(hosted, s.Public(), &RouterOptions{Now: at(fixtureIssued + 1)})
	require.NoError(b, err)

	run := func(name string, r Router, c Call, want bool) {
		b.Run(name, func(b *testing.B) {
			require.Equal(b, want, r.Decide(ctx, c).Authorised)
			b.ReportAllocs()
			for b.Loop() {
				r.Decide(ctx, c)
			}
		})
	}
	run("allowed", r, call("store_fact"), true)
	run("allowed-no-egress", r, Call{Capability: "crux-mcp.memory_view"}, true)
	run("denied", r, call("sync_pull"), false)
	run("allowed-hosted", hr, retrieveCall(1), true)
}

// BenchmarkVerifyToken measures Token.Verify of a free-local token: encode
// with the signature zeroed, BLAKE3, Ed25519 verification.
func BenchmarkVerifyToken(b *testing.B) {
	s := newSigner(1)
	tok, err := MintFreeLocal(s, FreeLocalOptions{Capabilities: testCaps})
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if err := tok.Verify(s.Public()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMintFreeLocal measures minting and signing a free-local token
// (which includes checking the signature against the signer's key).
func BenchmarkMintFreeLocal(b *testing.B) {
	s := newSigner(1)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := MintFreeLocal(s, FreeLocalOptions{Capabilities: testCaps}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNewRouter measures router construction for a free-local token.
func BenchmarkNewRouter(b *testing.B) {
	s := newSigner(1)
	tok, err := MintFreeLocal(s, FreeLocalOptions{Capabilities: testCaps})
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewRouter(tok, s.Public(), nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode measures strict decoding of a free-local token.
func BenchmarkDecode(b *testing.B) {
	s := newSigner(1)
	tok, err := MintFreeLocal(s, FreeLocalOptions{Capabilities: testCaps})
	require.NoError(b, err)
	enc, err := tok.Encode()
	require.NoError(b, err)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(enc); err != nil {
			b.Fatal(err)
		}
	}
}
