package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
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
func cruxBinary(t testing.TB) string {
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
		// Stamped as scripts/release.sh stamps a release (see TestVersionStamped).
		out, err := exec.Command(gobin, "build", "-o", binPath,
			"-ldflags", "-X main.version="+stampedVersion+" -X main.revision="+stampedRevision, ".").CombinedOutput()
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
	cmd := exec.Command(cruxBinary(t), "serve", "--log-level", "info", "--data", dir, "--agent", "tester")
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

	// The SDK client speaks its newest protocol version, where a bad
	// argument is an isError result the model can read.
	bad, err := cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      "query_facts",
		Arguments: map[string]any{"top_k": "ten"},
	})
	require.NoError(t, err, "a bad argument is a tool error on %s", cs.InitializeResult().ProtocolVersion)
	require.True(t, bad.IsError)
	errObj := bad.StructuredContent.(map[string]any)["error"].(map[string]any)
	assert.Equal(t, float64(crux.CodeInvalidParams), errObj["code"])
	assert.Contains(t, errObj["message"], "top_k")
	assert.Equal(t, "top_k", errObj["data"].(map[string]any)["param"])

	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "no_such_tool"})
	var we *jsonrpc.Error
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

// crux call runs while a crux serve owns the data directory: it forwards
// the call to the serve process, which answers as the call's own agent.
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
	call := exec.CommandContext(callCtx, cruxBinary(t), "call", "--data", dir, "--agent", "shell", "get_agent_identity")
	call.Env = subprocessEnv()
	var stdout, stderr bytes.Buffer
	call.Stdout, call.Stderr = &stdout, &stderr
	require.NoError(t, call.Run(), "stderr: %s", stderr.String())
	var out struct {
		StructuredContent map[string]any `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String())
	assert.Equal(t, map[string]any{"agent_name": "shell"}, out.StructuredContent)

	// The serve's own client sees the same store.
	stored, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_agent_identity"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"agent_name": "tester"}, stored.StructuredContent)
}

// storeCall is a tools/call of store_fact with the given id. Every call
// writes a new version of the same fact, so the version of the fact
// counts the calls that were stored.
func storeCall(id int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"store_fact","arguments":{"entity":"probe","key":"n","value":"%d"}}}`, id, id)
}

// storedCalls is the number of store_fact calls stored in dir: the version
// of the probe fact, 0 when there is none.
func storedCalls(t *testing.T, dir string) int {
	t.Helper()
	q := runCrux(t, nil, "", "call", "--data", dir, "--agent", "tester", "query_facts", `{"entity":"probe","key":"n"}`)
	require.Equal(t, exitOK, q.code, q.stderr)
	var out struct {
		StructuredContent struct {
			Rows []struct {
				Version int `json:"version"`
			} `json:"rows"`
		} `json:"structuredContent"`
	}
	require.NoError(t, json.Unmarshal([]byte(q.stdout), &out), q.stdout)
	if len(out.StructuredContent.Rows) == 0 {
		return 0
	}
	return out.StructuredContent.Rows[0].Version
}

// answeredCalls reads the replies in out and returns the ids of the
// tools/call replies with a result (id 0 is initialize), failing on an
// error reply or an id answered twice.
func answeredCalls(t *testing.T, out string) map[int]bool {
	t.Helper()
	ids := map[int]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r wireReply
		require.NoError(t, json.Unmarshal([]byte(line), &r), "%.200s", line)
		require.Nil(t, r.Error, "%.200s", line)
		var id int
		require.NoError(t, json.Unmarshal(r.ID, &id), "%.200s", line)
		if id == 0 {
			continue
		}
		require.False(t, ids[id], "id %d answered twice", id)
		ids[id] = true
	}
	return ids
}

// TestServeBurstThenEOF: calls written all at once, followed at once by
// the end of the input, as from printf '...' | crux serve, are all
// answered before crux serve exits 0, and all stored.
func TestServeBurstThenEOF(t *testing.T) {
	const n = 300
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var in strings.Builder
	in.WriteString(initializeLine + "\n" + initializedLine + "\n")
	for i := 1; i <= n; i++ {
		in.WriteString(storeCall(i) + "\n")
	}
	cmd := exec.CommandContext(ctx, cruxBinary(t), "serve", "--log-level", "info", "--data", dir, "--agent", "tester")
	cmd.Env = subprocessEnv()
	cmd.Stdin = strings.NewReader(in.String())
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr: %.2000s", stderr.String())

	answered := answeredCalls(t, stdout.String())
	stored := storedCalls(t, dir)
	t.Logf("burst then EOF: %d sent, %d answered, %d stored", n, len(answered), stored)
	assert.Len(t, answered, n, "every call is answered")
	assert.Equal(t, n, stored)
	assert.Contains(t, stderr.String(), "client closed the connection")
}

// TestServeSIGTERMAnswersReadCalls: with calls streaming in, SIGTERM makes
// crux serve stop reading, finish every call it has read and write its
// reply, then exit 0: every stored call is answered, and every answer is a
// result.
func TestServeSIGTERMAnswersReadCalls(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGTERM on Windows")
	}
	const max = 20000 // calls the client is ready to send
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cmd := exec.CommandContext(ctx, cruxBinary(t), "serve", "--log-level", "info", "--data", dir, "--agent", "tester")
	cmd.Env = subprocessEnv()
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	_, err = io.WriteString(stdin, initializeLine+"\n"+initializedLine+"\n")
	require.NoError(t, err)
	sent := make(chan int, 1)
	go func() { // writes calls until crux serve no longer reads them
		i := 0
		for i < max {
			if _, err := io.WriteString(stdin, storeCall(i+1)+"\n"); err != nil {
				break
			}
			i++
		}
		sent <- i
	}()

	var out strings.Builder
	sc := bufio.NewScanner(stdout)
	lines := 0
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		lines++
		if lines == 101 { // initialize and 100 calls answered, more in flight
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		}
	}
	require.NoError(t, cmd.Wait(), "stderr: %.2000s", stderr.String())
	n := <-sent

	answered := answeredCalls(t, out.String())
	stored := storedCalls(t, dir)
	t.Logf("SIGTERM: %d sent, %d answered, %d stored", n, len(answered), stored)
	require.Greater(t, lines, 101, "SIGTERM was sent")
	assert.Equal(t, stored, len(answered), "every stored call is answered")
	for id := 1; id <= len(answered); id++ {
		assert.True(t, answered[id], "call %d is answered: calls are read in order", id)
	}
	assert.Contains(t, stderr.String(), "stopping on signal")
}
