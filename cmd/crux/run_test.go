package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store/bolt"
)

// env is a fake environment for run.
type env map[string]string

func (e env) getenv(k string) string { return e[k] }

// list returns the environment as NAME=value entries.
func (e env) list() []string {
	var out []string
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader in different
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// result is the outcome of one run.
type result struct {
	code           int
	stdout, stderr string
}

// runCrux runs the command in-process with stdin and the fake environment.
func runCrux(t *testing.T, e env, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, strings.NewReader(stdin), &stdout, &stderr, e.list())
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// callOut is crux call's output: a result object or an error object.
type callOut struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
	IsError           *bool          `json:"isError"`
	Error             *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

// decodeCall decodes the stdout of crux call, rejecting unknown fields.
func decodeCall(t *testing.T, stdout string) callOut {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	var out callOut
	require.NoError(t, dec.Decode(&out), "stdout: %s", stdout)
	return out
}

func TestCallSuccess(t *testing.T) {
	dir := t.TempDir()
	r := runCrux(t, nil, "", "call", "--data", dir, "--agent", "tester", "store_fact",
		`{"entity":"project:crux","key":"language","value":"Go"}`)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)

	out := decodeCall(t, r.stdout)
	assert.Nil(t, out.Error)
	assert.Nil(t, out.IsError, "isError is omitted on success")
	require.Len(t, out.Content, 1)
	assert.Equal(t, "text", out.Content[0].Type)
	var text map[string]any
	require.NoError(t, json.Unmarshal([]byte(out.Content[0].Text), &text))
	require.NotNil(t, out.StructuredContent)
	assert.Equal(t, text["fact_id"], out.StructuredContent["fact_id"])
	assert.Equal(t, "project:crux", out.StructuredContent["entity"])
	assert.FileExists(t, filepath.Join(dir, "crux.db"))
	assert.Contains(t, r.stderr, "no store at "+filepath.Join(dir, "crux.db")+": made a new one")

	// The store is there now: nothing is said.
	r = runCrux(t, nil, "", "call", "--data", dir, "list_entities")
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	assert.NotContains(t, r.stderr, "made a new one")
}

func TestCallToolErrorResultExitsZero(t *testing.T) {
	r := runCrux(t, nil, "", "call", "--data", t.TempDir(), "delete_fact",
		`{"fact_id":"f_00000000000000000000000000000000"}`)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	out := decodeCall(t, r.stdout)
	assert.Nil(t, out.Error)
	require.NotNil(t, out.IsError)
	assert.True(t, *out.IsError)
	require.Len(t, out.Content, 1)
	assert.Contains(t, out.Content[0].Text, "not found")
}

func TestCallInvalidParams(t *testing.T) {
	r := runCrux(t, nil, "", "call", "--data", t.TempDir(), "query_facts", `{"top_k":"ten"}`)
	assert.Equal(t, exitFailure, r.code)
	out := decodeCall(t, r.stdout)
	require.NotNil(t, out.Error, "stdout: %s", r.stdout)
	assert.Nil(t, out.Content)
	assert.Equal(t, crux.CodeInvalidParams, out.Error.Code)
	assert.Contains(t, out.Error.Message, "top_k")
	var data map[string]any
	require.NoError(t, json.Unmarshal(out.Error.Data, &data))
	assert.Equal(t, "top_k", data["param"])
	assert.NotEmpty(t, data["reason"])
}

func TestCallUnknownTool(t *testing.T) {
	r := runCrux(t, nil, "", "call", "--data", t.TempDir(), "no_such_tool")
	assert.Equal(t, exitFailure, r.code)
	out := decodeCall(t, r.stdout)
	require.NotNil(t, out.Error, "stdout: %s", r.stdout)
	assert.Equal(t, crux.CodeMethodNotFound, out.Error.Code)
	assert.Contains(t, out.Error.Message, "no_such_tool")
}

func TestCallArgumentsFromStdin(t *testing.T) {
	dir := t.TempDir()
	r := runCrux(t, nil, `{"entity":"e","key":"k","value":"from stdin"}`, "call", "--data", dir, "store_fact", "-")
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)

	// Flags may also follow the tool name.
	r = runCrux(t, nil, "", "call", "query_facts", `{"entity":"e"}`, "--data", dir)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, "from stdin")
}

func TestCallDefaultArguments(t *testing.T) {
	for _, args := range [][]string{
		{"get_agent_identity"},       // no JSON: {}
		{"get_agent_identity", "-"},  // empty stdin: {}
		{"get_agent_identity", "{}"}, // explicit
	} {
		r := runCrux(t, nil, "", append([]string{"call", "--data", t.TempDir()}, args...)...)
		assert.Equal(t, exitOK, r.code, "%v: %s%s", args, r.stdout, r.stderr)
	}
}

func TestFactsPersistAcrossCalls(t *testing.T) {
	dir := t.TempDir()
	e := env{"CRUX_AGENT": "tester"}
	r := runCrux(t, e, "", "call", "--data", dir, "store_fact",
		`{"entity":"project:crux","key":"language","value":"Go"}`)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	stored := decodeCall(t, r.stdout)

	r = runCrux(t, e, "", "call", "--data", dir, "query_facts", `{"entity":"project:crux"}`)
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	found := decodeCall(t, r.stdout)
	rows, ok := found.StructuredContent["rows"].([]any)
	require.True(t, ok, "rows: %s", r.stdout)
	require.Len(t, rows, 1)
	row := rows[0].(map[string]any)
	assert.Equal(t, "Go", row["value"])
	assert.Equal(t, stored.StructuredContent["fact_id"], row["fact_id"])
}

func TestVerifyReceiptErrors(t *testing.T) {
	dir := t.TempDir()
	r := runCrux(t, nil, "", "verify", "receipt", "--data", dir, "r_missing")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "no store")
	r = runCrux(t, nil, "", "call", "--data", dir, "get_agent_identity")
	require.Equal(t, exitOK, r.code, r.stderr)
	r = runCrux(t, nil, "", "verify", "receipt", "--data", dir, "r_missing")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "no receipt r_missing")
	r = runCrux(t, nil, "", "verify", "receipt", "--data", t.TempDir(), "--file", filepath.Join(dir, "nope.json"))
	assert.Equal(t, exitFailure, r.code)
}

func TestKeysExportIsStable(t *testing.T) {
	dir := t.TempDir()
	a := runCrux(t, nil, "", "keys", "export", "--data", dir)
	b := runCrux(t, nil, "", "keys", "export", "--data", dir)
	require.Equal(t, exitOK, a.code, a.stderr)
	assert.Equal(t, a.stdout, b.stdout, "the key is created once and kept")
	assert.Contains(t, a.stdout, `"pubKeyBase64"`)
	assert.NotContains(t, a.stdout, "seed")
	info, err := os.Stat(filepath.Join(dir, "signing.key"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
}

func TestUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no tool", []string{"call", "--data", dir}, "tool name"},
		{"too many arguments", []string{"call", "--data", dir, "query_facts", "{}", "{}"}, "at most one"},
		{"unknown flag", []string{"call", "--bogus", "query_facts"}, "-bogus"},
		{"missing flag value", []string{"call", "query_facts", "--data"}, "-data"},
		{"empty data", []string{"call", "--data", "", "query_facts"}, "--data"},
		{"unknown command", []string{"frobnicate"}, "frobnicate"},
		{"serve arguments", []string{"serve", "--data", dir, "extra"}, "extra"},
		{"tools arguments", []string{"tools", "--data", dir, "extra"}, "extra"},
		{"help arguments", []string{"help", "me"}, "help"},
		{"keys without export", []string{"keys"}, `"export"`},
		{"keys export arguments", []string{"keys", "export", "--data", dir, "x"}, "x"},
		{"verify without receipt", []string{"verify", "r_1"}, `"receipt"`},
		{"verify no id", []string{"verify", "receipt", "--data", dir}, "one receipt id"},
		{"verify id and file", []string{"verify", "receipt", "--data", dir, "--file", "f", "r_1"}, "one receipt id"},
		{"export no id", []string{"export", "receipt", "--data", dir}, "one receipt id"},
		{"agent not UTF-8", []string{"call", "--data", dir, "--agent", "bad\xff", "query_facts"}, "not valid UTF-8"},
		{"serve agent not UTF-8", []string{"serve", "--data", dir, "--agent", "bad\xff"}, "not valid UTF-8"},
		{"agent with ::", []string{"tools", "--data", dir, "--agent", "a::b"}, `"::"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCrux(t, nil, "", tc.args...)
			assert.Equal(t, exitUsage, r.code)
			assert.Empty(t, r.stdout)
			assert.Contains(t, r.stderr, tc.want)
			assert.Contains(t, r.stderr, "crux help")
		})
	}
}

func TestHelp(t *testing.T) {
	top := runCrux(t, nil, "", "help")
	require.Equal(t, exitOK, top.code, top.stderr)
	for _, args := range [][]string{{"--help"}, {"-h"}} {
		r := runCrux(t, nil, "", args...)
		assert.Equal(t, exitOK, r.code, "%v", args)
		assert.Equal(t, top.stdout, r.stdout, "%v", args)
	}

	r := runCrux(t, nil, "")
	assert.Equal(t, exitUsage, r.code)
	assert.Empty(t, r.stdout)
	for _, want := range []string{
		"crux serve", "crux tools", "crux call", "crux help",
		"CRUX_DATA_DIR", "CRUX_AGENT", "XDG_DATA_HOME",
		"go doc github.com/crux-go/crux Flags",
	} {
		assert.Contains(t, r.stderr, want)
	}
	assert.Equal(t, top.stdout, r.stderr, "crux alone prints the help on standard error")
}

func TestToolsJSON(t *testing.T) {
	r := runCrux(t, nil, "", "tools", "--data", t.TempDir(), "--json")
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	var list []crux.Tool
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
	require.NotEmpty(t, list)
	assert.Equal(t, "cuecrux_session", list[0].Name)
	names := map[string]bool{}
	for _, tool := range list {
		names[tool.Name] = true
		assert.True(t, strings.HasPrefix(tool.Description, "[local]"), tool.Name)
		assert.True(t, json.Valid(tool.InputSchema), tool.Name)
	}
	assert.True(t, names["query_facts"])

	plain := runCrux(t, nil, "", "tools", "--data", t.TempDir())
	require.Equal(t, exitOK, plain.code, "stderr: %s", plain.stderr)
	lines := strings.Split(strings.TrimSuffix(plain.stdout, "\n"), "\n")
	require.Len(t, lines, len(list))
	for i, line := range lines {
		fields := strings.Fields(line)
		require.GreaterOrEqual(t, len(fields), 2, line)
		assert.Equal(t, list[i].Name, fields[0])
		assert.Equal(t, "[local]", fields[1])
	}
}

func TestDataDir(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flag    string
		flagSet bool
		env     env
		want    string
		wantErr string
	}{
		{name: "flag wins", flag: "/f", flagSet: true,
			env: env{"CRUX_DATA_DIR": "/c", "XDG_DATA_HOME": "/x", "HOME": "/h"}, want: "/f"},
		{name: "flag is cleaned", flag: "/f/../g/", flagSet: true, want: "/g"},
		{name: "empty flag", flag: "", flagSet: true, env: env{"CRUX_DATA_DIR": "/c"}, wantErr: "--data"},
		{name: "CRUX_DATA_DIR", env: env{"CRUX_DATA_DIR": "/c", "XDG_DATA_HOME": "/x", "HOME": "/h"}, want: "/c"},
		{name: "XDG_DATA_HOME", env: env{"XDG_DATA_HOME": "/x", "HOME": "/h"}, want: "/x/crux"},
		{name: "relative XDG_DATA_HOME ignored", env: env{"XDG_DATA_HOME": "x", "HOME": "/h"}, want: "/h/.local/share/crux"},
		{name: "HOME", env: env{"HOME": "/h"}, want: "/h/.local/share/crux"},
		{name: "nothing", env: env{}, wantErr: "no data directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dataDir(tc.flag, tc.flagSet, tc.env.getenv)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, filepath.FromSlash(tc.want), got)
		})
	}
}

func TestDataDirCreated(t *testing.T) {
	xdg := t.TempDir()
	r := runCrux(t, env{"XDG_DATA_HOME": xdg, "HOME": t.TempDir()}, "", "call", "get_agent_identity")
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	fi, err := os.Stat(filepath.Join(xdg, "crux"))
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	assert.FileExists(t, filepath.Join(xdg, "crux", "crux.db"))

	// CRUX_DATA_DIR takes precedence over XDG_DATA_HOME.
	custom := filepath.Join(t.TempDir(), "a", "b")
	r = runCrux(t, env{"CRUX_DATA_DIR": custom, "XDG_DATA_HOME": xdg}, "", "call", "get_agent_identity")
	require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
	assert.FileExists(t, filepath.Join(custom, "crux.db"))
}

func TestCaller(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flag    string
		flagSet bool
		env     env
		want    crux.Caller
	}{
		{name: "flag", flag: "alice", flagSet: true, env: env{"CRUX_AGENT": "bob"},
			want: crux.Caller{Agent: "alice", Authenticated: true}},
		{name: "empty flag is anonymous", flag: "", flagSet: true, env: env{"CRUX_AGENT": "bob"}},
		{name: "CRUX_AGENT", env: env{"CRUX_AGENT": "bob"}, want: crux.Caller{Agent: "bob", Authenticated: true}},
		{name: "blank CRUX_AGENT is anonymous", env: env{"CRUX_AGENT": "  "}},
		{name: "none", env: env{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, callerFor(tc.flag, tc.flagSet, tc.env.getenv))
		})
	}

	// Through the command: get_agent_identity names the caller.
	for _, tc := range []struct {
		env  env
		args []string
		want string
	}{
		{env{}, []string{"--agent", "alice"}, "alice"},
		{env{"CRUX_AGENT": "bob"}, nil, "bob"},
		{env{}, nil, "anonymous"},
	} {
		args := append([]string{"call", "--data", t.TempDir()}, tc.args...)
		r := runCrux(t, tc.env, "", append(args, "get_agent_identity")...)
		require.Equal(t, exitOK, r.code, "stderr: %s", r.stderr)
		assert.Equal(t, tc.want, decodeCall(t, r.stdout).StructuredContent["agent_name"])
	}
}

// A process that holds the store without sharing it (here the test
// itself, through bolt.Open) makes a command fail once joinTimeout has
// passed, with an error naming the file and the way out.
func TestLockedInProcess(t *testing.T) {
	defer func(d time.Duration) { joinTimeout = d }(joinTimeout)
	joinTimeout = 300 * time.Millisecond
	dir := t.TempDir()
	path := filepath.Join(dir, "crux.db")
	db, err := bolt.Open(path, nil)
	require.NoError(t, err)
	defer db.Close()

	r := runCrux(t, nil, "", "call", "--data", dir, "get_agent_identity")
	assert.Equal(t, exitFailure, r.code)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, path)
	assert.Contains(t, r.stderr, "locked by another process that does not share it")
	assert.Contains(t, r.stderr, "--data")

	_, err = (&setup{dir: dir}).join(context.Background(), nil)
	assert.ErrorIs(t, err, bolt.ErrLocked)
}

// serveInProcess runs crux serve in a goroutine over pipes and returns a
// connected client session and a channel with run's exit status.
func serveInProcess(t *testing.T, ctx context.Context, stderr io.Writer, args ...string) (*mcp.ClientSession, <-chan int) {
	t.Helper()
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	codes := make(chan int, 1)
	go func() {
		code := run(ctx, append([]string{"serve"}, args...), stdinR, stdoutW, stderr, env{}.list())
		stdoutW.Close()
		codes <- code
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "test"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: stdoutR, Writer: stdinW}, nil)
	require.NoError(t, err)
	return cs, codes
}

func TestServeInProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr syncBuffer
	dir := t.TempDir()
	cs, codes := serveInProcess(t, ctx, &stderr, "--data", dir, "--agent", "tester")

	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	require.NotEmpty(t, tools.Tools)
	assert.Equal(t, "cuecrux_session", tools.Tools[0].Name)

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_agent_identity"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"agent_name": "tester"}, res.StructuredContent)

	// The SDK client's newest protocol version: a bad argument is an
	// isError result (older versions get -32602; see the mcpserver tests).
	bad, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "query_facts", Arguments: map[string]any{"top_k": "ten"}})
	require.NoError(t, err)
	require.True(t, bad.IsError)
	assert.Equal(t, float64(crux.CodeInvalidParams), bad.StructuredContent.(map[string]any)["error"].(map[string]any)["code"])

	require.NoError(t, cs.Close()) // closes the server's stdin
	select {
	case code := <-codes:
		assert.Equal(t, exitOK, code, "stderr: %s", stderr.String())
	case <-ctx.Done():
		t.Fatal("serve did not return after stdin closed")
	}
	// serve logs at level warn by default: neither its own news nor the
	// SDK's session chatter, only what needs attention.
	assert.NotContains(t, stderr.String(), "level=INFO")
	assert.NotContains(t, stderr.String(), "client closed the connection")

	// The store was closed: it opens again.
	db, err := bolt.Open(filepath.Join(dir, "crux.db"), &bolt.Options{LockTimeout: -1})
	require.NoError(t, err)
	require.NoError(t, db.Close())
}

func TestServeStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	serveCtx, stop := context.WithCancel(ctx)
	var stderr syncBuffer
	dir := t.TempDir()
	cs, codes := serveInProcess(t, serveCtx, &stderr, "--data", dir, "--log-level", "info")
	defer cs.Close()

	_, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	stop() // as SIGINT or SIGTERM do
	select {
	case code := <-codes:
		assert.Equal(t, exitOK, code, "stderr: %s", stderr.String())
	case <-ctx.Done():
		t.Fatal("serve did not return after its context ended")
	}
	assert.Contains(t, stderr.String(), "stopping on signal")

	db, err := bolt.Open(filepath.Join(dir, "crux.db"), &bolt.Options{LockTimeout: -1})
	require.NoError(t, err)
	require.NoError(t, db.Close())
}

func TestEnvironmentWarnings(t *testing.T) {
	dir := t.TempDir()
	r := runCrux(t, env{
		"CORECRUXD_TOOL_SURFACE":     "minmal",
		"CORECRUXD_FEATURE_FRESHNES": "0",
		"CRUX_AGENT":                 "planner", // read by the command: no warning
		"CRUX_DATA_DIR":              dir,
	}, "", "tools")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, `CORECRUXD_TOOL_SURFACE=\"minmal\": not full, minimal or dynamic; read as full`)
	assert.Contains(t, r.stderr, "did you mean CORECRUXD_FEATURE_FRESHNESS?")
	assert.NotContains(t, r.stderr, "CRUX_AGENT")
	assert.NotContains(t, r.stderr, "CRUX_DATA_DIR")
	assert.Equal(t, 2, strings.Count(r.stderr, "level=WARN"), r.stderr)
}

func TestErrorPrefixOnce(t *testing.T) {
	var stderr bytes.Buffer
	a := &app{stderr: &stderr}
	code := a.report(nil, fmt.Errorf("opening: %w", crux.ErrServerClosed))
	assert.Equal(t, exitFailure, code)
	assert.Equal(t, "crux: opening: crux: server is closed\n", stderr.String())
	stderr.Reset()
	a.report(nil, crux.ErrServerClosed)
	assert.Equal(t, "crux: server is closed\n", stderr.String())
}

// crux serve started on a terminal (here /dev/null, a character device too)
// says on standard error what it waits for; on a pipe, as an MCP client
// starts it, it says nothing.
func TestServeOnTerminalSaysSo(t *testing.T) {
	devnull, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer devnull.Close()
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"serve", "--data", dir}, devnull, &stdout, &stderr, nil)
	assert.Equal(t, exitOK, code, stderr.String())
	assert.Contains(t, stderr.String(), "speaks MCP")

	r := runCrux(t, nil, "", "serve", "--data", dir)
	assert.Equal(t, exitOK, r.code, r.stderr)
	assert.NotContains(t, r.stderr, "speaks MCP")
}
