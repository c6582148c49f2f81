package mcpserver_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/mcpserver"
)

func TestParseTokens(t *testing.T) {
	const secret = "s3cret-token-for-planner"
	d := sha256.Sum256([]byte("digest-only-token-xyz"))
	table := "# agents of this host\n" +
		"planner=" + secret + ",  reviewer@acme=sha256:" + hex.EncodeToString(d[:]) + "\n" +
		"\treviewer@acme=second-token-of-reviewer== # rotation\n"
	table += "replica::planner=replica-token-of-planner replica::b@acme=" + mcpserver.TokenDigest("replica-b-token-xyzw") + "\n"
	tok, err := mcpserver.ParseTokens(table)
	require.NoError(t, err)
	require.Equal(t, 5, tok.Len())

	for _, tc := range []struct {
		token string
		want  crux.Caller
		ok    bool
	}{
		{secret, crux.Caller{Agent: "planner", Authenticated: true}, true},
		{"digest-only-token-xyz", crux.Caller{Agent: "reviewer", Authenticated: true, Tenant: "acme"}, true},
		{"second-token-of-reviewer==", crux.Caller{Agent: "reviewer", Authenticated: true, Tenant: "acme"}, true},
		{"replica-token-of-planner", crux.Caller{Agent: "planner", Authenticated: true, Replica: true}, true},
		{"replica-b-token-xyzw", crux.Caller{Agent: "b", Authenticated: true, Tenant: "acme", Replica: true}, true},
		{"second-token-of-reviewer", crux.Caller{}, false},
		{secret + "x", crux.Caller{}, false},
		{"", crux.Caller{}, false},
		{"sha256:" + hex.EncodeToString(d[:]), crux.Caller{}, false}, // the digest is no token
	} {
		got, ok := tok.Lookup(tc.token)
		assert.Equal(t, tc.ok, ok, "%q", tc.token)
		assert.Equal(t, tc.want, got, "%q", tc.token)
	}
	assert.Equal(t, "sha256:"+hex.EncodeToString(d[:]), mcpserver.TokenDigest("digest-only-token-xyz"))

	empty, err := mcpserver.ParseTokens(" \n# nothing\n,,")
	require.NoError(t, err)
	assert.Equal(t, 0, empty.Len())
	var none *mcpserver.Tokens
	_, ok := none.Lookup(secret)
	assert.False(t, ok)
}

func TestParseTokensRejects(t *testing.T) {
	good := "a-long-enough-token-1"
	for _, tc := range []struct {
		table, want string
	}{
		{"planner", `no "="`},
		{"=" + good, "no agent name"},
		{"planner@=" + good, "empty tenant"},
		{"a@b@c=" + good, `more than one "@"`},
		{"anonymous=" + good, "anonymous"},
		{"bad::name=" + good, `a replica's entry starts with "replica::"`},
		{"replica::=" + good, "no replica name"},
		{"replica::@acme=" + good, "no replica name"},
		{"replica::a::b=" + good, "::"},
		{"replica::anonymous=" + good, "anonymous"},
		{"replica::b@=" + good, "empty tenant"},
		{"replica::b=short", "shorter than 16"},
		{"planner=short", "shorter than 16"},
		{"planner=" + strings.Repeat("x", 4097), "longer than 4096"},
		{"planner=bad\"chars-in-a-token", "outside the bearer-token alphabet"},
		{"planner====", "shorter than 16"},
		{"planner=================", "padding"},
		{"planner=sha256:abcd", "64 hexadecimal digits"},
		{"planner=sha256:" + strings.Repeat("zz", 32), "64 hexadecimal digits"},
		{"planner=" + good + "\nreviewer=" + good, "entry 2 (line 2): the same token"},
		{"planner=" + good + ",reviewer=" + mcpserver.TokenDigest(good), "the same token"},
	} {
		_, err := mcpserver.ParseTokens(tc.table)
		require.Error(t, err, "%q", tc.table)
		assert.Contains(t, err.Error(), tc.want, "%q", tc.table)
		assert.NotContains(t, err.Error(), good, "an error never repeats a token")
	}
}
