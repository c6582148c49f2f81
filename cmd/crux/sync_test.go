package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/receipttest"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/syncremote"
)

// replicaToken is the bearer token a library replica syncs with.
const replicaToken = "replica-token-0123456789"

// syncingServer is a library server over a store of its own whose agent
// alice holds an established passport, syncing with the crux server at
// base through key.
func syncingServer(t *testing.T, base, key string) *crux.Server {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	signer, err := receipts.GenerateEphemeralKey()
	require.NoError(t, err)
	now := time.Now()
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		if err := store.PutPassport(tx, &store.Passport{PrincipalID: "alice", Tenant: crux.DefaultTenant, Tier: store.TierUnverified, IssuedAt: now}); err != nil {
			return err
		}
		return receipttest.Earn(tx, signer, crux.DefaultTenant, "alice", 100, now)
	}))
	remote, err := syncremote.New(base, key, nil)
	require.NoError(t, err)
	srv, err := crux.NewServer(db, &crux.Options{Signer: signer, Remote: remote})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return srv
}

// libCall runs a tool on srv as alice and decodes its answer.
func libCall(t *testing.T, srv *crux.Server, tool, args string) map[string]any {
	t.Helper()
	res, err := srv.CallTool(context.Background(), crux.Caller{Agent: "alice", Authenticated: true}, tool, json.RawMessage(args))
	require.NoError(t, err, tool)
	require.False(t, res.IsError, "%s: %s", tool, res.Content[0].Text)
	var out map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.Content[0].Text), &out))
	return out
}

// crux serve --http serves sync beside /mcp, and when another process
// owns the data directory it forwards every sync request to it: a library
// server pulls what the owner's client wrote (never the private fact) and
// pushes what the owner's client then reads.
func TestServeHTTPSyncForwardedToTheOwner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var ownerErr syncBuffer
	stdio, _ := startServeAs(t, ctx, dir, "tester", &ownerErr)
	defer stdio.Close()
	callStdio := func(tool string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := stdio.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		require.NoError(t, err)
		require.False(t, res.IsError, "%+v", res.Content)
		return res
	}
	callStdio("store_fact", map[string]any{"entity": "project:sync", "key": "owner", "value": "tester"})
	callStdio("store_fact", map[string]any{"entity": "project:sync", "key": "pin", "value": "private-4321", "private": true})

	serveCtx, stop := context.WithCancel(ctx)
	defer stop()
	var stderr syncBuffer
	url, codes := serveHTTPInProcess(t, serveCtx, env{"CRUX_AGENT_TOKENS": "replica::replica=" + replicaToken}, &stderr, "--data", dir)
	require.Contains(t, stderr.String(), "owner=false", "the HTTP server forwards to the stdio process")
	base := strings.TrimSuffix(url, "/mcp")

	lib := syncingServer(t, base, replicaToken)
	pulled := libCall(t, lib, "sync_pull", `{}`)
	assert.EqualValues(t, 1, pulled["facts_pulled"], "the shared fact, not the private one")
	assert.Contains(t, pulled["remote"], "crux:p_")
	rows := libCall(t, lib, "query_facts", `{"entity":"project:sync"}`)["rows"].([]any)
	require.Len(t, rows, 1)
	assert.Equal(t, "tester", rows[0].(map[string]any)["value"])

	libCall(t, lib, "store_fact", `{"entity":"project:sync","key":"lang","value":"Go"}`)
	pushed := libCall(t, lib, "sync_push", `{"confirm":true}`)
	assert.EqualValues(t, 1, pushed["facts_pushed"])
	got := callStdio("query_facts", map[string]any{"entity": "project:sync", "key": "lang"})
	assert.Contains(t, fmt.Sprint(got.StructuredContent), "Go", "the owner stored what the HTTP server received")

	// A bad key is refused by the HTTP server, -32003 on the replica.
	bad := syncingServer(t, base, "not-the-replica-token-000")
	_, err := bad.CallTool(ctx, crux.Caller{Agent: "alice", Authenticated: true}, "sync_pull", nil)
	var ce *crux.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, crux.CodeForbidden, ce.Code)
	assert.NotContains(t, stderr.String(), replicaToken)
	stop()
	assert.Equal(t, exitOK, <-codes, "stderr: %s", stderr.String())
}

// The same when the HTTP server owns the directory itself.
func TestServeHTTPSyncAsOwner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	r := runCrux(t, nil, "", "call", "--data", dir, "--agent", "tester", "store_fact", `{"entity":"e","key":"k","value":"v"}`)
	require.Equal(t, exitOK, r.code, r.stderr)
	var stderr syncBuffer
	url, codes := serveHTTPInProcess(t, ctx, env{"CRUX_AGENT_TOKENS": "replica::replica=" + replicaToken + ",tester=" + testerToken}, &stderr, "--data", dir)
	require.Contains(t, stderr.String(), "owner=true")
	lib := syncingServer(t, strings.TrimSuffix(url, "/mcp"), replicaToken)
	assert.EqualValues(t, 1, libCall(t, lib, "sync_pull", `{}`)["facts_pulled"])

	// An agent's token of the same table is no replica's.
	agent := syncingServer(t, strings.TrimSuffix(url, "/mcp"), testerToken)
	_, err := agent.CallTool(ctx, crux.Caller{Agent: "alice", Authenticated: true}, "sync_pull", nil)
	var ce *crux.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, crux.CodeForbidden, ce.Code)
	assert.Contains(t, ce.Message, "tester is an agent, not a replica")
	assert.Contains(t, ce.Message, "crux token new --replica")
	cancel()
	assert.Equal(t, exitOK, <-codes, "stderr: %s", stderr.String())
}

// The command builds the remote from CORECRUXD_SYNC_REMOTE_URL and
// CORECRUXD_SYNC_API_KEY: sync_status says so truthfully, the free-local
// token still refuses the hosted tools, and a URL the client refuses
// leaves sync unconfigured with a warning that holds no key.
func TestCommandSyncConfiguration(t *testing.T) {
	dir := t.TempDir()
	const key = "command-sync-key-0123456789"
	status := func(e env) (map[string]any, string) {
		t.Helper()
		r := runCrux(t, e, "", "call", "--data", dir, "--agent", "tester", "sync_status")
		require.Equal(t, exitOK, r.code, r.stderr)
		assert.NotContains(t, r.stdout+r.stderr, key)
		return decodeCall(t, r.stdout).StructuredContent, r.stderr
	}
	st, _ := status(env{"CORECRUXD_SYNC_REMOTE_URL": "https://crux.example.com", "CORECRUXD_SYNC_API_KEY": key})
	assert.Equal(t, true, st["configured"])
	assert.Equal(t, "https://crux.example.com", st["remote_url"])
	assert.Equal(t, true, st["api_key_configured"])

	st, _ = status(env{"CORECRUXD_SYNC_REMOTE_URL": "https://crux.example.com"})
	assert.Equal(t, false, st["configured"])
	assert.Contains(t, fmt.Sprint(st["notes"]), "CORECRUXD_SYNC_API_KEY is not")

	st, logged := status(env{"CORECRUXD_SYNC_REMOTE_URL": "http://crux.example.com", "CORECRUXD_SYNC_API_KEY": key})
	assert.Equal(t, false, st["configured"])
	assert.Contains(t, logged, "plain http")

	st, _ = status(env{"CORECRUXD_SYNC_REMOTE_URL": "https://user:pw@crux.example.com/x?token=1", "CORECRUXD_SYNC_API_KEY": key})
	assert.NotContains(t, fmt.Sprint(st), "pw")
	assert.NotContains(t, fmt.Sprint(st), "token=1")

	r := runCrux(t, env{"CORECRUXD_SYNC_REMOTE_URL": "https://crux.example.com", "CORECRUXD_SYNC_API_KEY": key}, "",
		"call", "--data", dir, "--agent", "tester", "sync_pull")
	assert.Equal(t, exitFailure, r.code)
	out := decodeCall(t, r.stdout)
	require.NotNil(t, out.Error)
	assert.Equal(t, crux.CodeCapabilityDenied, out.Error.Code, "the free-local token refuses the hosted tools")
}
