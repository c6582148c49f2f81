package rcx

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// FuzzDecodeToken checks that Decode never panics, and that whatever it
// accepts re-encodes to exactly the input and can be hashed, validated and
// verified.
func FuzzDecodeToken(f *testing.F) {
	golden, err := hex.DecodeString(goldenCanonicalH)
	require.NoError(f, err)
	f.Add(golden)

	s := newSigner(1)
	free, err := MintFreeLocal(s, FreeLocalOptions{Capabilities: testCaps, IssuedAt: time.Unix(fixtureIssued, 0), DaemonInstanceID: "n"})
	require.NoError(f, err)
	b, err := free.Encode()
	require.NoError(f, err)
	f.Add(b)

	team := hostedToken(s, FallbackQueue, FallbackDegradeToLocal, FallbackRefuse, new(uint64(5)), new(uint64(7)))
	team.Tier = TierTeam
	team.TeamScope = &TeamScope{TeamID: "t", SeatRole: new(SeatMember), PooledCreditAgentID: "p", PrincipalPassportFprs: []string{"p_a"}}
	team.EnterpriseScope = &EnterpriseScope{CustomerID: "c", BackendID: "customer:c", Airgap: true}
	b, err = signed(f, team, s).Encode()
	require.NoError(f, err)
	f.Add(b)
	f.Add([]byte{})
	f.Add([]byte{0xa0})
	f.Add([]byte{0xbf, 0xff})

	f.Fuzz(func(t *testing.T, in []byte) {
		tok, err := Decode(in)
		if err != nil {
			require.Nil(t, tok)
			return
		}
		out, err := tok.Encode()
		require.NoError(t, err)
		require.Equal(t, in, out)
		_, err = tok.Hash()
		require.NoError(t, err)
		_ = tok.ValidateBasic(time.Unix(fixtureIssued, 0))
		_ = tok.Verify(s.Public())
		r, err := NewRouter(tok, s.Public(), &RouterOptions{Now: at(fixtureIssued + 1)})
		require.NoError(t, err)
		_ = r.Decide(t.Context(), Call{Capability: "corecrux.query.local"})
	})
}
