package mcpserver_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
)

// newEnforcingCrux returns a crux server that enforces a free-local
// capability token, as the crux command does: hosted tools are refused
// with -32030.
func newEnforcingCrux(t *testing.T) *crux.Server {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	signer := receipts.NewEd25519Signer(priv)
	flags := crux.DefaultFlags()
	tok, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{Capabilities: crux.FreeLocalCapabilities(flags)})
	require.NoError(t, err)
	router, err := rcx.NewRouter(tok, signer.Public(), nil)
	require.NoError(t, err)
	return newCruxWith(t, &crux.Options{Signer: signer, Router: router})
}

// toolErrorObject is structuredContent.error of a bad-argument result.
type toolErrorObject struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
	Data    struct {
		Param  string `json:"param"`
		Reason string `json:"reason"`
	} `json:"data"`
}

// badArgumentResult checks that res is the isError result of a bad
// argument and returns its error object.
func badArgumentResult(t *testing.T, res *mcp.CallToolResult) toolErrorObject {
	t.Helper()
	require.NotNil(t, res)
	require.True(t, res.IsError, "a bad argument is a tool error")
	require.Len(t, res.Content, 1)
	text, ok := res.Content[0].(*mcp.TextContent)
	require.True(t, ok, "%T", res.Content[0])
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var sc struct {
		Error *toolErrorObject `json:"error"`
	}
	require.NoError(t, json.Unmarshal(b, &sc), "%s", b)
	require.NotNil(t, sc.Error, "structuredContent.error: %s", b)
	assert.Equal(t, text.Text, sc.Error.Message, "the text is the message")
	return *sc.Error
}

// TestBadArgumentByProtocolVersion: from protocol 2025-11-25 on a bad
// argument is an isError result carrying crux's error object; before, the
// JSON-RPC error -32602. Either way the code, message and data are the
// ones crux.Server.CallTool returns in-process.
func TestBadArgumentByProtocolVersion(t *testing.T) {
	srv := newCrux(t)
	ctx := context.Background()
	args := json.RawMessage(`{"top_k":"ten"}`)
	_, cerr := srv.CallTool(ctx, tester, "query_facts", args)
	var ce *crux.Error
	require.ErrorAs(t, cerr, &ce, "in-process, a bad argument stays a *crux.Error")
	require.Equal(t, crux.CodeInvalidParams, ce.Code)
	wantData, err := json.Marshal(ce.Data)
	require.NoError(t, err)

	versions := mcp.SupportedProtocolVersions()
	require.Contains(t, versions, "2025-11-25")
	require.Contains(t, versions, "2024-11-05")
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			cs := connectVersion(t, srv, tester, v)
			require.Equal(t, v, cs.InitializeResult().ProtocolVersion)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "query_facts", Arguments: args})
			if v < "2025-11-25" {
				we := wireError(t, err)
				assert.Equal(t, int64(crux.CodeInvalidParams), we.Code)
				assert.Equal(t, ce.Message, we.Message)
				assert.JSONEq(t, string(wantData), string(we.Data))
				return
			}
			require.NoError(t, err, "a bad argument is no protocol error on %s", v)
			obj := badArgumentResult(t, res)
			assert.Equal(t, int64(crux.CodeInvalidParams), obj.Code)
			assert.Equal(t, ce.Message, obj.Message)
			assert.Contains(t, obj.Message, "top_k")
			assert.Equal(t, "top_k", obj.Data.Param)
			assert.NotEmpty(t, obj.Data.Reason)
			b, err := json.Marshal(res.StructuredContent.(map[string]any)["error"].(map[string]any)["data"])
			require.NoError(t, err)
			assert.JSONEq(t, string(wantData), string(b), "data as crux returns it")
		})
	}
}

// TestProtocolErrorsOnEveryVersion: an unknown tool, a refusal and a
// tools/call without a name stay JSON-RPC errors whatever the version.
func TestProtocolErrorsOnEveryVersion(t *testing.T) {
	srv := newEnforcingCrux(t)
	ctx := context.Background()
	for _, v := range mcp.SupportedProtocolVersions() {
		t.Run(v, func(t *testing.T) {
			cs := connectVersion(t, srv, tester, v)

			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"})
			we := wireError(t, err)
			assert.Equal(t, int64(crux.CodeMethodNotFound), we.Code)
			assert.Contains(t, we.Message, "no_such_tool")

			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "sync_pull"})
			we = wireError(t, err)
			assert.Equal(t, int64(crux.CodeCapabilityDenied), we.Code)
			var data struct {
				ReasonCode     string `json:"reason_code"`
				RefusalReceipt struct {
					ReceiptID string `json:"receipt_id"`
				} `json:"refusal_receipt"`
			}
			require.NoError(t, json.Unmarshal(we.Data, &data), "%s", we.Data)
			assert.NotEmpty(t, data.ReasonCode)
			assert.NotEmpty(t, data.RefusalReceipt.ReceiptID, "the refusal travels with its receipt")

			_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: ""})
			we = wireError(t, err)
			assert.NotEqual(t, int64(0), we.Code)
		})
	}
}
