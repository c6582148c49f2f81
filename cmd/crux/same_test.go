package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/owner"
	"github.com/crux-go/crux/mcpserver"
)

// ownedHost makes this test process the owner of a fresh data directory
// through h, and returns h and a second session that forwards to it over
// the socket, with the flag variables env.
func ownedHost(t testing.TB, env []string) (*host, *session) {
	t.Helper()
	dir := t.TempDir()
	h, err := openHost(context.Background(), &setup{dir: dir}, nil)
	require.NoError(t, err)
	own, err := owner.Join(context.Background(), dir, owner.Options{Open: func() (owner.Host, error) { return h, nil }})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, own.Close()) })
	require.True(t, own.Owner())
	fwd, err := (&setup{dir: dir, env: env}).join(context.Background(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, fwd.close()) })
	require.False(t, fwd.conn.Owner(), "the second session forwards")
	return h, fwd
}

// outcome is a call's result or error as JSON, for comparing bytes.
func outcome(t testing.TB, res *crux.Result, err error) string {
	t.Helper()
	var v any = res
	if err != nil {
		var ce *crux.Error
		require.True(t, errors.As(err, &ce), "%v", err)
		v = map[string]any{"error": ce}
	}
	b, merr := json.Marshal(v)
	require.NoError(t, merr)
	return string(b)
}

// A call forwarded to the owner returns byte for byte what the owner's
// crux.Server returns in-process: results, -32602 and -32601 errors with
// their data, refusals with their receipts; and tools/list is the
// forwarding process's own view, under its own flags.
func TestForwardedAnswersAreTheOwners(t *testing.T) {
	ctx := context.Background()
	env := []string{"CORECRUXD_FEATURE_ARTEFACTS=1", "CORECRUXD_TOOL_SURFACE=minimal"}
	h, fwd := ownedHost(t, env)
	srv, err := h.server(env)
	require.NoError(t, err)
	alice := crux.Caller{Agent: "alice", Authenticated: true}

	for _, args := range []string{
		`{"entity":"project:crux","key":"language","value":"Go"}`,
		`{"entity":"project:crux","key":"db","value":"bbolt <fsync> & friends","private":true}`,
	} {
		_, err := fwd.CallTool(ctx, alice, "store_fact", json.RawMessage(args))
		require.NoError(t, err)
	}
	for _, c := range []struct {
		caller crux.Caller
		name   string
		args   string
	}{
		{alice, "query_facts", `{"query":"crux"}`},
		{alice, "fact_history", `{"entity":"project:crux","key":"language"}`},
		{alice, "list_entities", `{}`},
		{alice, "get_agent_identity", `{}`},
		{crux.Caller{}, "query_facts", `{"query":"crux"}`}, // anonymous: no private fact
		{alice, "query_facts", `{"top_k":"ten"}`},          // -32602 with data
		{alice, "query_facts", `{"nonsense":1}`},           // an unknown argument
		{alice, "no_such_tool", `{}`},                      // -32601
		{alice, "artefact_list", `{}`},                     // on under the forwarding flags
		{alice, "memory_view", `{}`},
	} {
		res, err := srv.CallTool(ctx, c.caller, c.name, json.RawMessage(c.args))
		want := outcome(t, res, err)
		res, err = fwd.CallTool(ctx, c.caller, c.name, json.RawMessage(c.args))
		assert.Equal(t, want, outcome(t, res, err), "%s %s", c.name, c.args)
	}

	// A refusal: the same code, message and receipt (identical refusals
	// within a minute share one), the count one higher.
	_, inErr := srv.CallTool(ctx, alice, "sync_pull", nil)
	_, fwdErr := fwd.CallTool(ctx, alice, "sync_pull", nil)
	var a, b *crux.Error
	require.ErrorAs(t, inErr, &a)
	require.ErrorAs(t, fwdErr, &b)
	assert.Equal(t, crux.CodeCapabilityDenied, b.Code)
	assert.Equal(t, a.Message, b.Message)
	var ad, bd map[string]any
	ab, _ := json.Marshal(a.Data)
	require.NoError(t, json.Unmarshal(ab, &ad))
	require.NoError(t, json.Unmarshal(b.Data.(json.RawMessage), &bd))
	assert.Equal(t, ad["refusal_receipt"].(map[string]any)["receipt_id"], bd["refusal_receipt"].(map[string]any)["receipt_id"])
	assert.Equal(t, ad["token_hash"], bd["token_hash"])

	for _, c := range []crux.Caller{alice, {}} {
		inList, err := json.Marshal(srv.ListTools(ctx, c))
		require.NoError(t, err)
		list, err := fwd.ListTools(ctx, c)
		require.NoError(t, err)
		fwdList, err := json.Marshal(list)
		require.NoError(t, err)
		assert.Equal(t, string(inList), string(fwdList))
		assert.Less(t, len(list), 20, "the forwarding process's minimal surface applies")
	}

	// The owner's own flags (none set) give the full surface.
	own, err := h.server(nil)
	require.NoError(t, err)
	assert.Greater(t, len(own.ListTools(ctx, alice)), 40)
}

// toolsListLine is the response line of a tools/list that caller sends to
// an MCP server over b, after the handshake.
func toolsListLine(t *testing.T, b mcpserver.Backend, caller crux.Caller) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- mcpserver.ServeBackend(ctx, b, caller, mcpserver.StdioTransport(inR, outW), nil) }()
	defer func() {
		inW.Close()
		cancel()
		go io.Copy(io.Discard, outR)
		<-done
	}()
	out := bufio.NewReader(outR)
	send := func(line string, reply bool) string {
		_, err := io.WriteString(inW, line+"\n")
		require.NoError(t, err)
		if !reply {
			return ""
		}
		got, err := out.ReadString('\n')
		require.NoError(t, err)
		return got
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`, true)
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, false)
	return send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, true)
}

// A second process on a data directory sends the tools/list the owner's
// own server sends, byte for byte: the token keys every tool shares are
// sent once, not with every tool.
func TestForwardedToolsListIsTheOwners(t *testing.T) {
	h, fwd := ownedHost(t, nil)
	srv, err := h.server(nil)
	require.NoError(t, err)
	alice := crux.Caller{Agent: "alice", Authenticated: true}
	want := toolsListLine(t, mcpserver.Local(srv), alice)
	require.Contains(t, want, `"tools":[`)
	got := toolsListLine(t, fwd, alice)
	assert.Equal(t, len(want), len(got), "bytes of the forwarded tools/list")
	assert.True(t, got == want, "the forwarded tools/list differs from the owner's")
}
