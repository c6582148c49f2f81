package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	"github.com/crux-go/crux/mcpserver"
)

// testerToken is the bearer token of agent tester in the HTTP tests.
const testerToken = "tester-token-0123456789"

// urlPattern finds the endpoint in crux serve --http's log.
var urlPattern = regexp.MustCompile(`msg="crux: serving MCP over HTTP" url=(\S+)`)

// waitURL waits for crux serve --http to log its endpoint.
func waitURL(t testing.TB, stderr *syncBuffer, codes <-chan int) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := urlPattern.FindStringSubmatch(stderr.String()); m != nil {
			return m[1]
		}
		select {
		case code := <-codes:
			t.Fatalf("crux serve --http exited with %d: %s", code, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("crux serve --http logged no endpoint: %s", stderr.String())
	return ""
}

// serveHTTPInProcess runs crux serve --http on 127.0.0.1 in-process until
// ctx ends and returns its endpoint and exit status.
func serveHTTPInProcess(t *testing.T, ctx context.Context, e env, stderr *syncBuffer, args ...string) (string, <-chan int) {
	t.Helper()
	codes := make(chan int, 1)
	go func() {
		codes <- run(ctx, append([]string{"serve", "--log-level", "info", "--http", "127.0.0.1:0"}, args...), strings.NewReader(""), io.Discard, stderr, e.list())
	}()
	return waitURL(t, stderr, codes), codes
}

// bearerTransport adds an Authorization header to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connectHTTP connects the SDK's MCP client to url with token.
func connectHTTP(t *testing.T, ctx context.Context, url, token string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "http-e2e", Version: "test"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: bearerTransport{token}}, MaxRetries: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestServeHTTPUsage(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte("tester="+testerToken+"\n"), 0o600))
	bad := filepath.Join(dir, "bad-tokens")
	require.NoError(t, os.WriteFile(bad, []byte("tester=short\n"), 0o600))
	for _, tc := range []struct {
		name string
		e    env
		args []string
		want string
	}{
		{"tokens without http", nil, []string{"--tokens", tokens}, "--tokens needs --http"},
		{"stateless without http", nil, []string{"--stateless"}, "--stateless needs --http"},
		{"not host:port", nil, []string{"--http", "8080"}, "host:port"},
		{"agent over http", nil, []string{"--http", "127.0.0.1:0", "--agent", "x"}, "--agent does not apply"},
		{"remote without the flag", nil, []string{"--http", "0.0.0.0:0", "--tokens", tokens}, "needs --allow-remote"},
		{"remote without tokens", nil, []string{"--http", ":0", "--allow-remote"}, "needs bearer tokens"},
		{"anonymous without tokens", nil, []string{"--http", "127.0.0.1:0", "--anonymous"}, "--anonymous needs tokens"},
		{"bad token file", nil, []string{"--http", "127.0.0.1:0", "--tokens", bad}, "shorter than 16"},
		{"bad token variable", env{"CRUX_AGENT_TOKENS": "tester"}, []string{"--http", "127.0.0.1:0"}, `CRUX_AGENT_TOKENS: entry 1 (line 1): want AGENT[@TENANT]=CREDENTIAL`},
		{"empty token variable", env{"CRUX_AGENT_TOKENS": " # none"}, []string{"--http", "127.0.0.1:0"}, "holds no token"},
		{"ui operator without http", nil, []string{"--ui-operator", "tester"}, "--ui-operator needs --http"},
		{"ui operator without tokens", nil, []string{"--http", "127.0.0.1:0", "--ui-operator", "tester"}, "there is none"},
		{"ui operator not in the table", nil, []string{"--http", "127.0.0.1:0", "--tokens", tokens, "--ui-operator", "carol"}, `--ui-operator "carol" is not an agent of the token table`},
		{"ui operator of another tenant", nil, []string{"--http", "127.0.0.1:0", "--tokens", tokens, "--ui-operator", "tester@acme"}, `--ui-operator "tester@acme" is not an agent`},
		{"ui operator empty tenant", nil, []string{"--http", "127.0.0.1:0", "--tokens", tokens, "--ui-operator", "tester@"}, `--ui-operator "tester@" is not an agent`},
		{"forwarded proto without http", nil, []string{"--ui-trust-forwarded-proto"}, "--ui-trust-forwarded-proto needs --http"},
	} {
		r := runCrux(t, tc.e, "", append([]string{"serve", "--data", dir}, tc.args...)...)
		assert.Equal(t, exitUsage, r.code, "%s: %s", tc.name, r.stderr)
		assert.Contains(t, r.stderr, tc.want, tc.name)
		assert.NotContains(t, r.stderr, testerToken, tc.name)
	}
	r := runCrux(t, nil, "", "serve", "--data", dir, "--http", "127.0.0.1:0", "--tokens", filepath.Join(dir, "missing"))
	assert.Equal(t, exitFailure, r.code, r.stderr)
	assert.Contains(t, r.stderr, "reading the token table")
}

// TestServeHTTP: crux serve --http serves the token's agent, refuses a
// request without a token, answers with route_access_matrix's HTTP
// routes, and exits 0 when its context ends (as on SIGINT or SIGTERM).
func TestServeHTTP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	serveCtx, stop := context.WithCancel(ctx)
	defer stop()
	var stderr syncBuffer
	dir := t.TempDir()
	url, codes := serveHTTPInProcess(t, serveCtx, env{"CRUX_AGENT_TOKENS": "tester=" + testerToken}, &stderr, "--data", dir)
	assert.True(t, strings.HasSuffix(url, "/mcp"), url)

	cs := connectHTTP(t, ctx, url, testerToken)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_agent_identity"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"agent_name": "tester"}, res.StructuredContent)

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "route_access_matrix"})
	require.NoError(t, err)
	routes := res.StructuredContent.(map[string]any)["routes"].([]any)
	require.Len(t, routes, 5)
	assert.Equal(t, "POST /mcp tools/call", routes[2].(map[string]any)["route"])
	assert.Equal(t, true, routes[2].(map[string]any)["enforced"], "the command enforces its free-local token")

	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "sync_pull"})
	var we *jsonrpc.Error
	require.ErrorAs(t, err, &we)
	assert.Equal(t, int64(crux.CodeCapabilityDenied), we.Code)
	assert.Contains(t, string(we.Data), "refusal_receipt")

	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Equal(t, `Bearer realm="crux"`, resp.Header.Get("WWW-Authenticate"))

	stop()
	select {
	case code := <-codes:
		assert.Equal(t, exitOK, code, "stderr: %s", stderr.String())
	case <-ctx.Done():
		t.Fatal("serve --http did not return after its context ended")
	}
	assert.Contains(t, stderr.String(), "stopping on signal")
	assert.NotContains(t, stderr.String(), testerToken, "the log never shows a token")
}

// TestServeHTTPSharesDataDir: crux serve --http on a directory that a
// stdio crux serve owns forwards to it, as a second stdio process would;
// each sees the other's writes, and route_access_matrix, which the owner
// runs, reports the routes of the transport that received the call.
func TestServeHTTPSharesDataDir(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var ownerErr syncBuffer
	stdio, _ := startServeAs(t, ctx, dir, "tester", &ownerErr)
	defer stdio.Close()
	// The stdio process owns the directory once its first call is served.
	_, err := stdio.CallTool(ctx, &mcp.CallToolParams{Name: "get_agent_identity"})
	require.NoError(t, err)

	serveCtx, stop := context.WithCancel(ctx)
	defer stop()
	var stderr syncBuffer
	url, codes := serveHTTPInProcess(t, serveCtx, env{"CRUX_AGENT_TOKENS": "tester=" + testerToken}, &stderr, "--data", dir)
	assert.Contains(t, stderr.String(), "owner=false", "the HTTP server forwards to the stdio process")
	cs := connectHTTP(t, ctx, url, testerToken)

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "store_fact",
		Arguments: map[string]any{"entity": "shared:http", "key": "k", "value": "from http"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	got, err := stdio.CallTool(ctx, &mcp.CallToolParams{Name: "query_facts", Arguments: map[string]any{"entity": "shared:http"}})
	require.NoError(t, err)
	assert.Contains(t, fmt.Sprint(got.StructuredContent), "from http", "stdio reads what HTTP wrote")

	for _, c := range []struct {
		cs   *mcp.ClientSession
		kind string
	}{{cs, "http"}, {stdio, "stdio"}} {
		res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "route_access_matrix"})
		require.NoError(t, err)
		first := res.StructuredContent.(map[string]any)["routes"].([]any)[0].(map[string]any)
		assert.Equal(t, c.kind, first["transport"])
	}
	stop()
	assert.Equal(t, exitOK, <-codes, "stderr: %s", stderr.String())
}

// postCall posts one JSON-RPC request to url (with the session id, if
// any) and returns the JSON-RPC response, whether it came as JSON or as
// server-sent events.
func postCall(client *http.Client, url, session, body string) (*http.Response, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+testerToken)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, nil, err
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, bytes.TrimSpace(b), nil
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(data, `"id"`) {
			return resp, []byte(data), nil
		}
	}
	return resp, nil, fmt.Errorf("no response in the event stream: %q", b)
}

// TestServeHTTPSIGTERMAnswersCalls: with calls streaming in from several
// clients, SIGTERM makes crux serve --http stop accepting, answer every
// call it has received and exit 0: every stored call was answered, with
// sessions and without.
func TestServeHTTPSIGTERMAnswersCalls(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGTERM on Windows")
	}
	for _, stateless := range []bool{false, true} {
		t.Run(fmt.Sprintf("stateless=%v", stateless), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			dir := t.TempDir()
			args := []string{"serve", "--log-level", "info", "--data", dir, "--http", "127.0.0.1:0"}
			if stateless {
				args = append(args, "--stateless")
			}
			cmd := exec.CommandContext(ctx, cruxBinary(t), args...)
			cmd.Env = append(subprocessEnv(), "CRUX_AGENT_TOKENS=tester="+testerToken)
			var stderr syncBuffer
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			url := waitURL(t, &stderr, nil)

			client := &http.Client{}
			session := ""
			if !stateless {
				resp, body, err := postCall(client, url, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"test"}}}`)
				require.NoError(t, err)
				require.Contains(t, string(body), `"result"`)
				session = resp.Header.Get("Mcp-Session-Id")
				require.NotEmpty(t, session)
				_, _, err = postCall(client, url, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
				require.NoError(t, err)
			}

			const writers = 4
			var mu sync.Mutex
			answered, failed := 0, 0
			var wg sync.WaitGroup
			termed := make(chan struct{})
			var once sync.Once
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 5000; i++ {
						id := w*100000 + i + 1
						_, body, err := postCall(client, url, session, storeCall(id))
						mu.Lock()
						if err != nil {
							failed++
							mu.Unlock()
							return
						}
						var r wireReply
						if json.Unmarshal(body, &r) != nil || r.Error != nil || r.Result == nil {
							mu.Unlock()
							t.Errorf("call %d: not a result: %s", id, body)
							return
						}
						answered++
						if answered == 100 {
							once.Do(func() { close(termed) })
						}
						mu.Unlock()
					}
				}()
			}
			select {
			case <-termed:
			case <-ctx.Done():
				t.Fatal("100 calls were not answered")
			}
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			wg.Wait()
			require.NoError(t, <-exited, "stderr: %.3000s", stderr.String())
			assert.Contains(t, stderr.String(), "stopping on signal")

			stored := storedCalls(t, dir)
			t.Logf("SIGTERM: %d answered, %d refused, %d stored", answered, failed, stored)
			assert.Equal(t, stored, answered, "every stored call was answered")
		})
	}
}

// TestTokenNew: crux token new prints a token and an entry that holds only
// its digest, and the entry authenticates the token.
func TestTokenNew(t *testing.T) {
	r := runCrux(t, nil, "", "token", "new", "--tenant", "acme", "planner")
	require.Equal(t, exitOK, r.code, r.stderr)
	var token, entry string
	_, err := fmt.Sscanf(r.stdout, "token: %s\nentry: %s\n", &token, &entry)
	require.NoError(t, err, r.stdout)
	assert.GreaterOrEqual(t, len(token), 43)
	assert.True(t, strings.HasPrefix(entry, "planner@acme=sha256:"), entry)
	assert.NotContains(t, entry, token)
	tok, err := mcpserver.ParseTokens(entry)
	require.NoError(t, err)
	c, ok := tok.Lookup(token)
	require.True(t, ok)
	assert.Equal(t, crux.Caller{Agent: "planner", Authenticated: true, Tenant: "acme"}, c)

	again := runCrux(t, nil, "", "token", "new", "planner")
	require.Equal(t, exitOK, again.code)
	assert.NotContains(t, again.stdout, token, "a fresh token each time")

	// --replica makes a sync replica's token: replica::NAME.
	rep := runCrux(t, nil, "", "token", "new", "--replica", "--tenant", "acme", "replica-b")
	require.Equal(t, exitOK, rep.code, rep.stderr)
	_, err = fmt.Sscanf(rep.stdout, "token: %s\nentry: %s\n", &token, &entry)
	require.NoError(t, err, rep.stdout)
	assert.True(t, strings.HasPrefix(entry, "replica::replica-b@acme=sha256:"), entry)
	tok, err = mcpserver.ParseTokens(entry)
	require.NoError(t, err)
	c, ok = tok.Lookup(token)
	require.True(t, ok)
	assert.Equal(t, crux.Caller{Agent: "replica-b", Authenticated: true, Tenant: "acme", Replica: true}, c)

	for _, args := range [][]string{{"token"}, {"token", "new"}, {"token", "new", "bad::name"}, {"token", "new", "a", "b"},
		{"token", "new", "replica::b"}, {"token", "new", "--replica", "replica::b"}, {"token", "new", "--replica", "bad::name"}} {
		r := runCrux(t, nil, "", args...)
		assert.Equal(t, exitUsage, r.code, "%v: %s", args, r.stderr)
	}
}
