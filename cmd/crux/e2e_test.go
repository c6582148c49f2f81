package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
)

// The crux binary, built once for the tests that run it as a subprocess.
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// cruxBinary builds the command once and returns its path. It skips the
// test when the go command is not available.
func cruxBinary(t *testing.T) string {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not on PATH; cannot build crux")
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "crux-e2e-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "crux")
		out, err := exec.Command(gobin, "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// subprocessEnv is the environment of a crux subprocess: the test's, with
// crux's own variables cleared so that only the flags decide.
func subprocessEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CRUX_") && !strings.HasPrefix(kv, "CORECRUXD_") {
			out = append(out, kv)
		}
	}
	return out
}

// startServe starts crux serve on dir as a subprocess and connects an MCP
// client to it over stdio. stderr collects the server's logs.
func startServe(t *testing.T, ctx context.Context, dir string, stderr *syncBuffer) (*mcp.ClientSession, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(cruxBinary(t), "serve", "--data", dir, "--agent", "tester")
	cmd.Env = subprocessEnv()
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "test"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	require.NoError(t, err, "stderr: %s", stderr)
	return cs, cmd
}

func TestServeSubprocess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stderr syncBuffer
	dir := t.TempDir()
	cs, cmd := startServe(t, ctx, dir, &stderr)

	assert.Equal(t, "crux", cs.InitializeResult().ServerInfo.Name)

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		assert.True(t, strings.HasPrefix(tool.Description, "[local]"), tool.Name)
	}
	require.NotEmpty(t, names)
	assert.Equal(t, "cuecrux_session", names[0])
	assert.Contains(t, names, "query_facts")
	for _, hosted := range []string{"issue_passport", "sync_pull", "sync_push"} {
		assert.NotContains(t, names, hosted, "the free-local token does not list hosted tools")
	}

	stored, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "store_fact",
		Arguments: map[string]any{"entity": "project:crux", "key": "language", "value": "Go"},
	})
	require.NoError(t, err)
	require.False(t, stored.IsError, "%+v", stored.Content)

	found, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "query_facts",
		Arguments: map[string]any{"query": "language"},
	})
	require.NoError(t, err)
	require.False(t, found.IsError)
	sc, ok := found.StructuredContent.(map[string]any)
	require.True(t, ok, "%T", found.StructuredContent)
	rows, ok := sc["rows"].([]any)
	require.True(t, ok, "%v", sc)
	require.Len(t, rows, 1)
	assert.Equal(t, "Go", rows[0].(map[string]any)["value"])

	identity, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_agent_identity"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"agent_name": "tester"}, identity.StructuredContent)

	_, err = cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "query_facts",
		Arguments: map[string]any{"top_k": "ten"},
	})
	var we *jsonrpc.Error
	require.True(t, errors.As(err, &we), "want a JSON-RPC error, got %v", err)
	assert.Equal(t, int64(crux.CodeInvalidParams), we.Code)
	assert.Contains(t, we.Message, "top_k")
	assert.Contains(t, string(we.Data), `"param":"top_k"`)

	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"})
	require.True(t, errors.As(err, &we), "want a JSON-RPC error, got %v", err)
	assert.Equal(t, int64(crux.CodeMethodNotFound), we.Code)

	// A hosted tool is refused with -32030 and a signed refusal receipt.
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "sync_pull"})
	require.True(t, errors.As(err, &we), "want a JSON-RPC error, got %v", err)
	assert.Equal(t, int64(crux.CodeCapabilityDenied), we.Code)
	assert.Equal(t, "RCX capability denied: denied:capability_not_permitted", we.Message)
	var data struct {
		RefusalReceipt struct {
			ReceiptID string `json:"receipt_id"`
		} `json:"refusal_receipt"`
	}
	require.NoError(t, json.Unmarshal(we.Data, &data))
	require.NotEmpty(t, data.RefusalReceipt.ReceiptID)

	// Closing the session closes the server's stdin; it must exit 0 on
	// its own (not on the SIGTERM the transport sends after 10s).
	require.NoError(t, cs.Close(), "stderr: %s", stderr.String())
	assert.Equal(t, 0, cmd.ProcessState.ExitCode())
	assert.Contains(t, stderr.String(), "client closed the connection")
	assert.NotContains(t, stderr.String(), "stopping on signal")

	// The refusal receipt verifies offline, from the store and from an
	// exported file checked with only the exported public keyring.
	verify := exec.CommandContext(ctx, cruxBinary(t), "verify", "receipt", "--data", dir, data.RefusalReceipt.ReceiptID)
	verify.Env = subprocessEnv()
	out, err := verify.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), `"error_code": "OK"`)

	r := runCrux(t, nil, "", "export", "receipt", "--data", dir, data.RefusalReceipt.ReceiptID)
	require.Equal(t, exitOK, r.code, r.stderr)
	exported := filepath.Join(t.TempDir(), "receipt.json")
	require.NoError(t, os.WriteFile(exported, []byte(r.stdout), 0o600))
	k := runCrux(t, nil, "", "keys", "export", "--data", dir)
	require.Equal(t, exitOK, k.code, k.stderr)
	keyring := filepath.Join(t.TempDir(), "keyring.json")
	require.NoError(t, os.WriteFile(keyring, []byte(k.stdout), 0o600))
	v := runCrux(t, nil, "", "verify", "receipt", "--data", t.TempDir(), "--keyring", keyring, "--file", exported)
	assert.Equal(t, exitOK, v.code, v.stderr)

	// One flipped body byte is caught, with its code.
	var e map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &e))
	body := []byte(e["body_cbor_hex"].(string))
	last := len(body) - 1
	if body[last] == '0' { // change the last hex digit: still hex, another byte
		body[last] = '1'
	} else {
		body[last] = '0'
	}
	e["body_cbor_hex"] = string(body)
	tampered, _ := json.Marshal(e)
	require.NoError(t, os.WriteFile(exported, tampered, 0o600))
	v = runCrux(t, nil, "", "verify", "receipt", "--data", t.TempDir(), "--keyring", keyring, "--file", exported)
	assert.Equal(t, exitFailure, v.code)
	assert.Contains(t, v.stderr, "BODY_HASH_MISMATCH")
}

func TestCallWhileServing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var serveErr syncBuffer
	cs, _ := startServe(t, ctx, dir, &serveErr)
	defer func() { assert.NoError(t, cs.Close(), "stderr: %s", serveErr.String()) }()
	// Connect has completed the initialize handshake, so serve holds the store.

	callCtx, callCancel := context.WithTimeout(ctx, 15*time.Second)
	defer callCancel()
	call := exec.CommandContext(callCtx, cruxBinary(t), "call", "--data", dir, "get_agent_identity")
	call.Env = subprocessEnv()
	var stdout, stderr bytes.Buffer
	call.Stdout, call.Stderr = &stdout, &stderr
	err := call.Run()
	require.NoError(t, callCtx.Err(), "crux call did not give up on the lock")

	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "want exit status 1, got %v", err)
	assert.Equal(t, exitFailure, ee.ExitCode())
	assert.Empty(t, stdout.String())
	msg := stderr.String()
	assert.Contains(t, msg, filepath.Join(dir, "crux.db"))
	assert.Contains(t, msg, "locked by another process")
	assert.Contains(t, msg, "stop that process")
	assert.Contains(t, msg, "--data")
}
