package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/mcpserver"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/surface"
)

var tester = crux.Caller{Agent: "tester", Authenticated: true}

// newCrux returns a crux server over a fresh bbolt store.
func newCrux(t *testing.T) *crux.Server { return newCruxWith(t, nil) }

func newCruxWith(t *testing.T, opts *crux.Options) *crux.Server {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	srv, err := crux.NewServer(db, opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Close()) })
	return srv
}

// connect serves srv to caller through the SDK's in-memory transports and
// returns a connected client session, of the SDK client's default (newest)
// protocol version.
func connect(t *testing.T, srv *crux.Server, caller crux.Caller) *mcp.ClientSession {
	t.Helper()
	return connectVersion(t, srv, caller, "")
}

// connectVersion is connect with the client asking for protocol version
// (empty: the SDK client's default).
func connectVersion(t *testing.T, srv *crux.Server, caller crux.Caller, version string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)

	ct, st := mcp.NewInMemoryTransports()
	ss, err := mcpserver.New(srv, caller, &mcpserver.Options{Version: "test"}).Connect(ctx, st, nil)
	require.NoError(t, err)
	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "test"}, nil)
	cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, cs.Close())
		assert.NoError(t, ss.Wait())
	})
	return cs
}

// wireError returns the JSON-RPC error inside err, failing the test if
// there is none.
func wireError(t *testing.T, err error) *jsonrpc.Error {
	t.Helper()
	require.Error(t, err)
	var we *jsonrpc.Error
	require.True(t, errors.As(err, &we), "not a JSON-RPC error: %v", err)
	return we
}

func TestInitializeReportsImplementation(t *testing.T) {
	cs := connect(t, newCrux(t), tester)
	res := cs.InitializeResult()
	require.NotNil(t, res)
	assert.Equal(t, "crux", res.ServerInfo.Name)
	assert.Equal(t, "test", res.ServerInfo.Version)
	require.NotNil(t, res.Capabilities.Tools)
	assert.False(t, res.Capabilities.Tools.ListChanged)
	//lint:ignore SA1019 crux must not offer the deprecated logging capability; this checks it does not
	assert.Nil(t, res.Capabilities.Logging)
}

func TestListTools(t *testing.T) {
	srv := newCrux(t)
	cs := connect(t, srv, tester)
	ctx := context.Background()

	want := srv.ListTools(ctx, tester)
	require.NotEmpty(t, want)
	got, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	require.Len(t, got.Tools, len(want))

	var wantNames, gotNames []string
	for _, w := range want {
		wantNames = append(wantNames, w.Name)
	}
	for _, g := range got.Tools {
		gotNames = append(gotNames, g.Name)
	}
	assert.Equal(t, wantNames, gotNames, "tools/list keeps crux's catalogue order")

	for i, w := range want {
		g := got.Tools[i]
		assert.Equal(t, w.Description, g.Description, w.Name)
		assert.True(t, strings.HasPrefix(g.Description, surface.Resolve(false).Marker(g.Name)+" "), "%s: %q", g.Name, g.Description)

		schema, err := json.Marshal(g.InputSchema)
		require.NoError(t, err)
		var open map[string]any
		require.NoError(t, json.Unmarshal(w.InputSchema, &open))
		assert.Equal(t, false, open["additionalProperties"], "%s: crux refuses unknown arguments", w.Name)
		delete(open, "additionalProperties")
		wantSchema, err := json.Marshal(open)
		require.NoError(t, err)
		assert.JSONEq(t, string(wantSchema), string(schema), "%s: input schema passed through but for additionalProperties, which the instructions state once", w.Name)

		require.NotNil(t, g.Annotations, w.Name)
		assert.NotEmpty(t, w.Annotations.Title, w.Name)
		assert.Empty(t, g.Annotations.Title, "%s: a title is for display; tools/list leaves it out", w.Name)
		assert.Equal(t, w.Annotations.ReadOnlyHint, g.Annotations.ReadOnlyHint, w.Name)
		assert.Equal(t, w.Annotations.IdempotentHint, g.Annotations.IdempotentHint, w.Name)
		if w.Annotations.ReadOnlyHint {
			assert.Nil(t, g.Annotations.DestructiveHint, "%s: MCP defines destructiveHint only for a tool that is not read-only", w.Name)
		} else {
			require.NotNil(t, g.Annotations.DestructiveHint, w.Name)
			assert.Equal(t, w.Annotations.DestructiveHint, *g.Annotations.DestructiveHint, w.Name)
		}
		require.NotNil(t, g.Annotations.OpenWorldHint, w.Name)
		assert.Equal(t, w.Annotations.OpenWorldHint, *g.Annotations.OpenWorldHint, w.Name)

		wantMeta, err := json.Marshal(w.Meta)
		require.NoError(t, err)
		gotMeta, err := json.Marshal(map[string]any(g.Meta))
		require.NoError(t, err)
		assert.JSONEq(t, string(wantMeta), string(gotMeta), "%s: _meta", w.Name)
	}
}

func TestStoreThenQuery(t *testing.T) {
	cs := connect(t, newCrux(t), tester)
	ctx := context.Background()

	stored, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "store_fact",
		Arguments: map[string]any{"entity": "project:crux", "key": "language", "value": "Go"},
	})
	require.NoError(t, err)
	require.False(t, stored.IsError, "store_fact: %+v", stored.Content)
	require.Len(t, stored.Content, 1)
	text, ok := stored.Content[0].(*mcp.TextContent)
	require.True(t, ok, "content is text")
	var out struct {
		FactID string `json:"fact_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(text.Text), &out))
	assert.True(t, strings.HasPrefix(out.FactID, "f_"), out.FactID)
	sc, ok := stored.StructuredContent.(map[string]any)
	require.True(t, ok, "structuredContent is an object: %T", stored.StructuredContent)
	assert.Equal(t, out.FactID, sc["fact_id"])

	found, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "query_facts",
		Arguments: map[string]any{"entity": "project:crux"},
	})
	require.NoError(t, err)
	require.False(t, found.IsError)
	raw, err := json.Marshal(found.StructuredContent)
	require.NoError(t, err)
	var q struct {
		Rows []struct {
			FactID string `json:"fact_id"`
			Key    string `json:"key"`
			Value  string `json:"value"`
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal(raw, &q))
	require.Len(t, q.Rows, 1)
	assert.Equal(t, out.FactID, q.Rows[0].FactID)
	assert.Equal(t, "language", q.Rows[0].Key)
	assert.Equal(t, "Go", q.Rows[0].Value)
}

func TestToolErrorIsResult(t *testing.T) {
	cs := connect(t, newCrux(t), tester)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{
		Name:      "delete_fact",
		Arguments: map[string]any{"fact_id": "f_00000000000000000000000000000000"},
	})
	require.NoError(t, err, "a tool failure is a result, not a protocol error")
	assert.True(t, res.IsError)
	require.Len(t, res.Content, 1)
	text, ok := res.Content[0].(*mcp.TextContent)
	require.True(t, ok)
	assert.Contains(t, text.Text, "not found")
}

// TestInvalidArgumentIsProtocolError: before protocol 2025-11-25 a bad
// argument is the JSON-RPC error -32602 of crux.
func TestInvalidArgumentIsProtocolError(t *testing.T) {
	srv := newCrux(t)
	cs := connectVersion(t, srv, tester, "2025-06-18")
	ctx := context.Background()
	args := json.RawMessage(`{"top_k":"ten"}`)

	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "query_facts", Arguments: args})
	we := wireError(t, err)
	assert.Equal(t, int64(crux.CodeInvalidParams), we.Code)
	assert.Contains(t, we.Message, "top_k")
	var data struct {
		Param  string `json:"param"`
		Reason string `json:"reason"`
	}
	require.NoError(t, json.Unmarshal(we.Data, &data), "data: %s", we.Data)
	assert.Equal(t, "top_k", data.Param)
	assert.NotEmpty(t, data.Reason)

	// The same code, message and data as crux itself returns.
	_, cerr := srv.CallTool(ctx, tester, "query_facts", args)
	var ce *crux.Error
	require.ErrorAs(t, cerr, &ce)
	assert.Equal(t, int64(ce.Code), we.Code)
	assert.Equal(t, ce.Message, we.Message)
	wantData, err := json.Marshal(ce.Data)
	require.NoError(t, err)
	assert.JSONEq(t, string(wantData), string(we.Data))
}

func TestUnknownTool(t *testing.T) {
	srv := newCrux(t)
	cs := connect(t, srv, tester)
	ctx := context.Background()

	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool", Arguments: map[string]any{}})
	we := wireError(t, err)
	assert.Equal(t, int64(crux.CodeMethodNotFound), we.Code)
	assert.Contains(t, we.Message, "no_such_tool")

	// crux's own message, not the SDK's "method not found".
	_, cerr := srv.CallTool(ctx, tester, "no_such_tool", nil)
	var ce *crux.Error
	require.ErrorAs(t, cerr, &ce)
	assert.Equal(t, ce.Message, we.Message)
}

func TestNullArgumentsAreNoArguments(t *testing.T) {
	cs := connect(t, newCrux(t), tester)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{
		Name:      "query_facts",
		Arguments: json.RawMessage(`null`),
	})
	require.NoError(t, err)
	assert.False(t, res.IsError)
}

func TestCallerReachesTools(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		caller crux.Caller
		want   string
	}{
		{tester, "tester"},
		{crux.Caller{Agent: "tester"}, ""}, // not authenticated: anonymous
	} {
		cs := connect(t, newCrux(t), tc.caller)
		// A private fact needs an authenticated caller (-32003 otherwise).
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{
			Name:      "store_fact",
			Arguments: map[string]any{"entity": "user", "key": "k", "value": "v", "private": true},
		})
		if tc.want != "" {
			require.NoError(t, err)
			assert.False(t, res.IsError)
			continue
		}
		// The Go SDK's client takes a -32003 answer for its own "client is
		// closing" code and reports ErrConnectionClosed with the message,
		// without the error's code or data.
		require.Error(t, err)
		assert.Contains(t, err.Error(), "store_fact: needs an authenticated agent identity for a private fact")
	}
}

func TestServeEndsWhenClientCloses(t *testing.T) {
	srv := newCrux(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ct, st := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- mcpserver.Serve(ctx, srv, tester, st, nil) }()

	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	_, err = cs.ListTools(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, cs.Close())
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Serve did not return after the client closed")
	}
}

func TestServeEndsWithContext(t *testing.T) {
	srv := newCrux(t)
	ctx, cancel := context.WithCancel(context.Background())
	ct, st := mcp.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- mcpserver.Serve(ctx, srv, tester, st, nil) }()

	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v"}, nil).Connect(cctx, ct, nil)
	require.NoError(t, err)
	defer cs.Close()
	cancel()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-cctx.Done():
		t.Fatal("Serve did not return after its context ended")
	}
}

// TestListFollowsTheServer: tools/list is crux's list as of each request,
// so the dynamic surface follows the intent declared with cuecrux_session,
// and tools shaped out of the list can still be called.
func TestListFollowsTheServer(t *testing.T) {
	flags := crux.DefaultFlags()
	flags.ToolSurface = crux.SurfaceDynamic
	srv := newCruxWith(t, &crux.Options{Flags: &flags})
	cs := connect(t, srv, tester)
	ctx := context.Background()
	listed := func() []string {
		res, err := cs.ListTools(ctx, nil)
		require.NoError(t, err)
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		return names
	}
	assert.NotContains(t, listed(), "delete_fact")
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_fact", Arguments: map[string]any{"fact_id": "f_0"}})
	require.NoError(t, err)
	assert.True(t, res.IsError, "an unlisted tool runs: its not-found result comes back")
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "cuecrux_session", Arguments: map[string]any{"intent": "session_review"}})
	require.NoError(t, err)
	assert.Contains(t, listed(), "delete_fact")
}

// closeRecorder records that Close was called on the reader or writer it
// wraps.
type closeRecorder struct {
	io.Reader
	io.Writer
	closed atomic.Bool
}

func (c *closeRecorder) Close() error { c.closed.Store(true); return nil }

// TestStdioTransport: the transport of ServeStdio and crux serve carries
// calls over a pair of streams; when the client closes, Serve returns nil,
// having closed the input but not the output.
func TestStdioTransport(t *testing.T) {
	srv := newCrux(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	in, out := &closeRecorder{Reader: inR}, &closeRecorder{Writer: outW}
	done := make(chan error, 1)
	go func() { done <- mcpserver.Serve(ctx, srv, tester, mcpserver.StdioTransport(in, out), nil) }()

	client := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "v"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	require.NoError(t, err)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_agent_identity"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"agent_name": "tester"}, res.StructuredContent)
	require.NoError(t, cs.Close())
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("Serve did not return after the client closed")
	}
	assert.True(t, in.closed.Load(), "the input is closed with the connection")
	assert.False(t, out.closed.Load(), "the output is left open")
}
