package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crux-go/crux/internal/pgtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// postgresStore is the URL, for --store, of a fresh schema of the test
// database (see pgtest.Schema).
func postgresStore(t *testing.T) string {
	t.Helper()
	_, url := pgtest.Schema(t, "crux_cmd")
	return url
}

// Four crux serve processes on one PostgreSQL store (stand-ins for four
// machines, sharing one signing key), each taking 500 concurrent
// store_fact calls from several agents onto the same 10 version chains,
// with record_decision calls minting receipts among them: nothing is
// lost, every chain is linear, and the tenant's receipt chain verifies.
func TestPostgresFourServers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four crux serve processes on PostgreSQL")
	}
	storeURL := postgresStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir() // the shared key
	var stderr syncBuffer
	var sessions []*mcp.ClientSession
	for i := range 4 {
		cmd := exec.Command(cruxBinary(t), "serve", "--data", dir, "--store", storeURL, "--agent", fmt.Sprintf("server%d", i))
		cmd.Env = subprocessEnv()
		cmd.Stderr = &stderr
		client := mcp.NewClient(&mcp.Implementation{Name: "pg", Version: "test"}, nil)
		cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
		require.NoError(t, err, "stderr: %s", stderr.String())
		defer cs.Close()
		sessions = append(sessions, cs)
	}
	const perServer, workers, chains = 500, 8, 10
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	decisions := 0
	for s, cs := range sessions {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < perServer; i += workers {
					value := fmt.Sprintf("s%d-%d", s, i)
					name, args := "store_fact", map[string]any{"entity": fmt.Sprintf("shared:%d", i%chains), "key": "k", "value": value}
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
					if err == nil && res.IsError {
						err = fmt.Errorf("%v", res.Content)
					}
					if err == nil && i%25 == 0 {
						_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "record_decision",
							Arguments: map[string]any{"action": value, "rationale": "r"}})
						mu.Lock()
						decisions++
						mu.Unlock()
					}
					if err != nil {
						mu.Lock()
						failures = append(failures, fmt.Sprintf("%s: %v", value, err))
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	require.Empty(t, failures, "stderr: %s", stderr.String())

	seen := map[string]bool{}
	for e := range chains {
		for _, v := range chainValues(t, ctx, sessions[0], fmt.Sprintf("shared:%d", e)) {
			assert.False(t, seen[v], "%s stored twice", v)
			seen[v] = true
		}
	}
	assert.Len(t, seen, 4*perServer, "every write stored once")

	r := runCrux(t, nil, "", "verify", "chain", "--data", dir, "--store", storeURL)
	require.Equal(t, exitOK, r.code, "stdout: %s stderr: %s", r.stdout, r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout, "OK: chain of tenant \"default\": "), r.stdout)
	assert.Contains(t, r.stdout, fmt.Sprintf("%d receipts verified", decisions))
}

// Every command takes --store (or $CRUX_STORE): a call, the catalogue,
// receipts and their verification, on the database.
func TestPostgresCommands(t *testing.T) {
	storeURL := postgresStore(t)
	dir := t.TempDir()
	r := runCrux(t, env{"CRUX_STORE": storeURL}, "", "call", "--data", dir, "--agent", "alice", "record_decision", `{"action":"a","rationale":"r"}`)
	require.Equal(t, exitOK, r.code, r.stderr)
	id := decodeCall(t, r.stdout).StructuredContent["receipt_id"].(string)
	r = runCrux(t, nil, "", "verify", "receipt", "--data", dir, "--store", storeURL, id)
	require.Equal(t, exitOK, r.code, r.stderr)
	r = runCrux(t, nil, "", "receipts", "list", "--data", dir, "--store", storeURL)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, id)
	r = runCrux(t, nil, "", "tools", "--data", dir, "--store", storeURL)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "store_fact")
	r = runCrux(t, nil, "", "doctor", "--data", dir, "--store", storeURL)
	assert.Equal(t, exitOK, r.code, r.stdout+r.stderr)
	r = runCrux(t, nil, "", "purge", "--data", dir, "--store", storeURL)
	assert.Equal(t, exitOK, r.code, r.stdout+r.stderr)

	// A key of its own, given with --key, signs instead of the directory's.
	r = runCrux(t, nil, "", "call", "--store", storeURL, "--data", t.TempDir(), "--key", dir+"/signing.key", "--agent", "bob",
		"record_decision", `{"action":"b","rationale":"r"}`)
	require.Equal(t, exitOK, r.code, r.stderr)
	r = runCrux(t, nil, "", "verify", "chain", "--data", dir, "--store", storeURL)
	assert.Equal(t, exitOK, r.code, r.stdout+r.stderr)

	r = runCrux(t, nil, "", "call", "--data", dir, "--store", "mysql://x", "get_agent_identity")
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--store must be a postgres:// URL")
}
