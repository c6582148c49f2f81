package mcpserver_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/mcpserver"
)

// connectStdio serves srv to caller through StdioTransport over pipes, as
// crux serve does, and connects the SDK's client asking for version.
func connectStdio(t *testing.T, srv *crux.Server, caller crux.Caller, version string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- mcpserver.Serve(context.Background(), srv, caller, mcpserver.StdioTransport(inR, outW), nil)
		outW.Close()
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "stdio-test", Version: "test"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err)
	t.Cleanup(func() {
		cs.Close()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("Serve did not return after the client closed its input")
		}
	})
	return cs
}

// TestEveryProtocolVersion connects the SDK's client with each protocol
// version the SDK negotiates, over stdio, HTTP with sessions and HTTP
// without, and checks the handshake, tools/list, a call, and the shape of
// a bad argument for the version negotiated.
//
// Every transport speaks every version: over HTTP with sessions, the
// requests of 2026-07-28, which carry their version instead of a session,
// are served without one (the SDK's handler with sessions would refuse
// them, and its client would fall back to 2025-11-25).
func TestEveryProtocolVersion(t *testing.T) {
	srv := newCrux(t)
	versions := mcp.SupportedProtocolVersions()
	require.Equal(t, []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}, versions,
		"the versions this test covers; a new SDK version needs a look at the mapping")
	stateful := startHTTP(t, mcpserver.Local(srv), &mcpserver.HTTPOptions{Tokens: testTokens(t)})
	stateless := startHTTP(t, mcpserver.Local(srv), &mcpserver.HTTPOptions{Tokens: testTokens(t), Stateless: true})
	alice := crux.Caller{Agent: "alice", Authenticated: true}
	ctx := context.Background()

	for _, v := range versions {
		for _, tr := range []struct {
			name    string
			connect func() *mcp.ClientSession
			want    string // the version negotiated
		}{
			{"stdio", func() *mcp.ClientSession { return connectStdio(t, srv, alice, v) }, v},
			{"http", func() *mcp.ClientSession { return connectHTTP(t, stateful.url, aliceToken, v) }, v},
			{"http-stateless", func() *mcp.ClientSession { return connectHTTP(t, stateless.url, aliceToken, v) }, v},
		} {
			t.Run(v+"/"+tr.name, func(t *testing.T) {
				cs := tr.connect()
				init := cs.InitializeResult()
				require.NotNil(t, init)
				assert.Equal(t, tr.want, init.ProtocolVersion)
				assert.Equal(t, "crux", init.ServerInfo.Name)
				require.NotNil(t, init.Capabilities.Tools)

				list, err := cs.ListTools(ctx, nil)
				require.NoError(t, err)
				assert.Equal(t, len(srv.ListTools(ctx, alice)), len(list.Tools))
				assert.Equal(t, "cuecrux_session", list.Tools[0].Name)

				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_agent_identity"})
				require.NoError(t, err)
				assert.Equal(t, map[string]any{"agent_name": "alice"}, res.StructuredContent)

				res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "query_facts", Arguments: map[string]any{"top_k": "ten"}})
				if tr.want < "2025-11-25" {
					we := wireError(t, err)
					assert.Equal(t, int64(crux.CodeInvalidParams), we.Code)
					assert.Contains(t, string(we.Data), `"param":"top_k"`)
				} else {
					require.NoError(t, err)
					obj := badArgumentResult(t, res)
					assert.Equal(t, int64(crux.CodeInvalidParams), obj.Code)
					assert.Equal(t, "top_k", obj.Data.Param)
				}

				_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"})
				assert.Equal(t, int64(crux.CodeMethodNotFound), wireError(t, err).Code)
			})
		}
	}
}
