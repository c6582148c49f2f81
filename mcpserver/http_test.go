package mcpserver_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/mcpserver"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
)

// Tokens of the HTTP tests.
const (
	aliceToken = "alice-token-0123456789"
	bobToken   = "bob-token-0123456789ab"
)

// testTokens maps aliceToken to alice of the default tenant and bobToken
// to bob of tenant acme.
func testTokens(t *testing.T) *mcpserver.Tokens {
	t.Helper()
	tok, err := mcpserver.ParseTokens("alice=" + aliceToken + "\nbob@acme=" + mcpserver.TokenDigest(bobToken))
	require.NoError(t, err)
	return tok
}

// httpServer is ServeHTTP running on a loopback port.
type httpServer struct {
	url    string // the endpoint
	addr   string // host:port
	cancel context.CancelFunc
	done   chan error
}

// startHTTP serves b with opts on 127.0.0.1 until the test ends.
func startHTTP(t *testing.T, b mcpserver.Backend, opts *mcpserver.HTTPOptions) *httpServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	s := &httpServer{addr: ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	path := mcpserver.DefaultHTTPPath
	if opts != nil && opts.Path != "" {
		path = opts.Path
	}
	s.url = "http://" + s.addr + path
	go func() { s.done <- mcpserver.ServeHTTP(ctx, b, ln, opts) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop shuts the server down and checks that it returned as documented.
func (s *httpServer) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case err, ok := <-s.done:
		if ok {
			assert.ErrorIs(t, err, context.Canceled)
			close(s.done)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ServeHTTP did not return within 30s of its context ending")
	}
}

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// httpClient is an HTTP client presenting token ("" for none).
func httpClient(token string) *http.Client {
	if token == "" {
		return &http.Client{}
	}
	return &http.Client{Transport: bearer{token}}
}

// connectHTTP connects the SDK's client to url over Streamable HTTP with
// token, asking for protocol version ("" for the client's default).
func connectHTTP(t *testing.T, url, token, version string) *mcp.ClientSession {
	t.Helper()
	cs, err := dialHTTP(url, token, version)
	require.NoError(t, err)
	t.Cleanup(func() { cs.Close() })
	return cs
}

func dialHTTP(url, token, version string) (*mcp.ClientSession, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "test"}, nil)
	return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: httpClient(token), MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
}

// identity is get_agent_identity's agent_name through cs.
func identity(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_agent_identity"})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	return res.StructuredContent.(map[string]any)["agent_name"].(string)
}

// rawPost posts an initialize request to url with the given headers and
// returns the response status and headers.
func rawPost(t *testing.T, url string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"test"}}}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, resp.Header, string(b)
}

// TestHTTPBearerTokens: a token's agent and tenant are the caller; a
// request without a token or with a wrong one is refused with 401 and a
// WWW-Authenticate challenge.
func TestHTTPBearerTokens(t *testing.T) {
	srv := newCrux(t)
	s := startHTTP(t, mcpserver.Local(srv), &mcpserver.HTTPOptions{Tokens: testTokens(t)})

	assert.Equal(t, "alice", identity(t, connectHTTP(t, s.url, aliceToken, "")))
	bob := connectHTTP(t, s.url, bobToken, "")
	assert.Equal(t, "bob", identity(t, bob))

	// bob writes in tenant acme: alice (default tenant) does not see it.
	ctx := context.Background()
	res, err := bob.CallTool(ctx, &mcp.CallToolParams{Name: "store_fact",
		Arguments: map[string]any{"entity": "project:x", "key": "owner", "value": "bob"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	count := func(cs *mcp.ClientSession) float64 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "query_facts", Arguments: map[string]any{"entity": "project:x"}})
		require.NoError(t, err)
		return res.StructuredContent.(map[string]any)["count"].(float64)
	}
	assert.Equal(t, float64(1), count(bob))
	assert.Equal(t, float64(0), count(connectHTTP(t, s.url, aliceToken, "")), "another tenant")
	for _, tc := range []struct {
		name, auth, challenge string
	}{
		{"no token", "", `Bearer realm="crux"`},
		{"wrong token", "Bearer not-a-known-token-123", `Bearer realm="crux", error="invalid_token"`},
		{"the digest is no token", "Bearer " + mcpserver.TokenDigest(bobToken), `Bearer realm="crux", error="invalid_token"`},
		{"basic", "Basic YWxpY2U6cHc=", `Bearer realm="crux", error="invalid_token"`},
	} {
		h := map[string]string{}
		if tc.auth != "" {
			h["Authorization"] = tc.auth
		}
		code, header, _ := rawPost(t, s.url, h)
		assert.Equal(t, http.StatusUnauthorized, code, tc.name)
		assert.Equal(t, tc.challenge, header.Get("WWW-Authenticate"), tc.name)
	}
	_, err = dialHTTP(s.url, "", "")
	require.Error(t, err, "the SDK client without a token cannot connect")
	_, err = dialHTTP(s.url, "wrong-token-0123456789", "")
	require.Error(t, err)
}

// TestHTTPAnonymous: with Anonymous, a request without a token is an
// anonymous caller, and a wrong token is still refused; without tokens at
// all every request is anonymous and a token cannot be checked.
func TestHTTPAnonymous(t *testing.T) {
	srv := newCrux(t)
	s := startHTTP(t, mcpserver.Local(srv), &mcpserver.HTTPOptions{Tokens: testTokens(t), Anonymous: true})
	assert.Equal(t, "anonymous", identity(t, connectHTTP(t, s.url, "", "")))
	assert.Equal(t, "alice", identity(t, connectHTTP(t, s.url, aliceToken, "")))
	code, _, _ := rawPost(t, s.url, map[string]string{"Authorization": "Bearer not-a-known-token-123"})
	assert.Equal(t, http.StatusUnauthorized, code)

	open := startHTTP(t, mcpserver.Local(srv), nil)
	assert.Equal(t, "anonymous", identity(t, connectHTTP(t, open.url, "", "")))
	code, header, _ := rawPost(t, open.url, map[string]string{"Authorization": "Bearer " + aliceToken})
	assert.Equal(t, http.StatusUnauthorized, code, "no table: a token cannot be checked")
	assert.Contains(t, header.Get("WWW-Authenticate"), "invalid_token")
}

// TestHTTPRebindingProtection: on loopback, Host must be a loopback name
// and Origin, when present, a loopback origin.
func TestHTTPRebindingProtection(t *testing.T) {
	s := startHTTP(t, mcpserver.Local(newCrux(t)), nil)
	_, port, err := net.SplitHostPort(s.addr)
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"loopback address", map[string]string{}, http.StatusOK},
		{"localhost", map[string]string{"Host": "localhost:" + port}, http.StatusOK},
		{"localhost origin", map[string]string{"Host": "localhost:" + port, "Origin": "http://localhost:5173"}, http.StatusOK},
		{"ipv6 loopback origin", map[string]string{"Origin": "https://[::1]:8080"}, http.StatusOK},
		{"rebound name", map[string]string{"Host": "evil.example:" + port}, http.StatusForbidden},
		{"rebound name and origin", map[string]string{"Host": "evil.example", "Origin": "http://evil.example"}, http.StatusForbidden},
		{"foreign origin", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"null origin", map[string]string{"Origin": "null"}, http.StatusForbidden},
		{"file origin", map[string]string{"Origin": "file://localhost"}, http.StatusForbidden},
	} {
		code, _, body := rawPost(t, s.url, tc.header)
		assert.Equal(t, tc.want, code, "%s: %s", tc.name, body)
	}
	code, _, _ := rawPost(t, "http://"+s.addr+"/other", nil)
	assert.Equal(t, http.StatusNotFound, code)
}

// TestHTTPSessionBelongsToItsCaller: another caller presenting a
// session's id does not reach it.
func TestHTTPSessionBelongsToItsCaller(t *testing.T) {
	s := startHTTP(t, mcpserver.Local(newCrux(t)), &mcpserver.HTTPOptions{Tokens: testTokens(t), Anonymous: true})
	alice := connectHTTP(t, s.url, aliceToken, "2025-11-25")
	id := alice.ID()
	require.NotEmpty(t, id)

	call := func(token string) int {
		req, err := http.NewRequest(http.MethodPost, s.url, strings.NewReader(
			`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_agent_identity"}}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := httpClient(token).Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, call(aliceToken))
	assert.Equal(t, http.StatusNotFound, call(bobToken), "bob does not reach alice's session")
	assert.Equal(t, http.StatusNotFound, call(""), "nor does an anonymous caller")
}

// TestHTTPListIsTheCallers: under the dynamic surface, tools/list follows
// the intent each caller declared, so two agents see different lists.
func TestHTTPListIsTheCallers(t *testing.T) {
	flags := crux.DefaultFlags()
	flags.ToolSurface = feature.SurfaceDynamic
	srv := newCruxWith(t, &crux.Options{Flags: &flags})
	s := startHTTP(t, mcpserver.Local(srv), &mcpserver.HTTPOptions{Tokens: testTokens(t)})
	ctx := context.Background()
	alice := connectHTTP(t, s.url, aliceToken, "")
	bob := connectHTTP(t, s.url, bobToken, "")

	names := func(cs *mcp.ClientSession) []string {
		res, err := cs.ListTools(ctx, nil)
		require.NoError(t, err)
		var out []string
		for _, tl := range res.Tools {
			out = append(out, tl.Name)
		}
		return out
	}
	before := names(bob)
	require.Equal(t, before, names(alice))
	res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "cuecrux_session", Arguments: map[string]any{"intent": "document_ingest"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	assert.NotEqual(t, before, names(alice), "alice's intent shapes her list")
	assert.Equal(t, before, names(bob), "and not bob's")
	assert.Equal(t, srv.ListTools(ctx, crux.Caller{Agent: "alice", Authenticated: true}), toolsOf(srv, ctx, names(alice)))
}

// toolsOf returns the crux tools named, in order, as srv lists them for
// alice.
func toolsOf(srv *crux.Server, ctx context.Context, names []string) []crux.Tool {
	all := srv.ListTools(ctx, crux.Caller{Agent: "alice", Authenticated: true})
	var out []crux.Tool
	for _, n := range names {
		for _, tl := range all {
			if tl.Name == n {
				out = append(out, tl)
			}
		}
	}
	return out
}

// TestHTTPErrors: a refusal is a JSON-RPC -32030 with its data over HTTP,
// and a bad argument maps by protocol version as over any transport.
func TestHTTPErrors(t *testing.T) {
	s := startHTTP(t, mcpserver.Local(newEnforcingCrux(t)), &mcpserver.HTTPOptions{Tokens: testTokens(t)})
	ctx := context.Background()
	for _, v := range []string{"2024-11-05", "2025-11-25", ""} {
		cs := connectHTTP(t, s.url, aliceToken, v)
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "sync_pull"})
		we := wireError(t, err)
		assert.Equal(t, int64(crux.CodeCapabilityDenied), we.Code, v)
		assert.Contains(t, string(we.Data), "refusal_receipt", v)

		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "query_facts", Arguments: map[string]any{"top_k": "ten"}})
		if v == "2024-11-05" {
			assert.Equal(t, int64(crux.CodeInvalidParams), wireError(t, err).Code)
			continue
		}
		require.NoError(t, err, v)
		assert.Equal(t, "top_k", badArgumentResult(t, res).Data.Param)
	}
}

// TestHTTPRouteAccessMatrix: route_access_matrix reports the HTTP routes
// to a caller over HTTP.
func TestHTTPRouteAccessMatrix(t *testing.T) {
	s := startHTTP(t, mcpserver.Local(newCrux(t)), &mcpserver.HTTPOptions{Tokens: testTokens(t), Path: "/crux"})
	res, err := connectHTTP(t, s.url, aliceToken, "").CallTool(context.Background(), &mcp.CallToolParams{Name: "route_access_matrix"})
	require.NoError(t, err)
	var routes []string
	for _, r := range res.StructuredContent.(map[string]any)["routes"].([]any) {
		m := r.(map[string]any)
		assert.Equal(t, "http", m["transport"])
		assert.Contains(t, m["passport_binding"], "bearer token")
		routes = append(routes, m["route"].(string))
	}
	assert.Equal(t, []string{"POST /crux initialize", "POST /crux tools/list", "POST /crux tools/call", "GET /crux", "DELETE /crux"}, routes)
}

// TestHTTPStateless: no session id, GET and DELETE refused with 405, and
// every protocol version, 2026-07-28 included, initializes, lists and
// calls.
func TestHTTPStateless(t *testing.T) {
	s := startHTTP(t, mcpserver.Local(newCrux(t)), &mcpserver.HTTPOptions{Tokens: testTokens(t), Stateless: true})
	ctx := context.Background()
	for _, v := range mcp.SupportedProtocolVersions() {
		cs := connectHTTP(t, s.url, aliceToken, v)
		assert.Equal(t, v, cs.InitializeResult().ProtocolVersion)
		assert.Empty(t, cs.ID(), "stateless: no session")
		list, err := cs.ListTools(ctx, nil)
		require.NoError(t, err)
		assert.NotEmpty(t, list.Tools)
		assert.Equal(t, "alice", identity(t, cs))
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		req, err := http.NewRequest(method, s.url, nil)
		require.NoError(t, err)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := httpClient(aliceToken).Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, method)
	}
}

// gate is a Backend that holds tools/call of "slow" until released.
type gate struct {
	mcpserver.Backend
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *gate) CallTool(ctx context.Context, c crux.Caller, name string, args json.RawMessage) (*crux.Result, error) {
	if name == "slow" {
		g.once.Do(func() { close(g.started) })
		<-g.release
		return &crux.Result{Content: []crux.Content{{Type: "text", Text: "done"}}}, nil
	}
	return g.Backend.CallTool(ctx, c, name, args)
}

// TestHTTPGracefulShutdown: when ServeHTTP's context ends, a call in
// flight is answered, the session's GET stream does not hold the
// shutdown, and new connections are refused.
func TestHTTPGracefulShutdown(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		g := &gate{Backend: mcpserver.Local(newCrux(t)), started: make(chan struct{}), release: make(chan struct{})}
		s := startHTTP(t, g, &mcpserver.HTTPOptions{Tokens: testTokens(t), Stateless: stateless})
		// The session's GET stream is opened here, so that it is surely open
		// before the shutdown (the SDK client opens its own at some point
		// after the handshake).
		client := mcp.NewClient(&mcp.Implementation{Name: "http-test", Version: "test"}, nil)
		cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: s.url,
			HTTPClient: httpClient(aliceToken), MaxRetries: -1, DisableStandaloneSSE: true},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		require.NoError(t, err)
		streamEnded := make(chan struct{})
		if !stateless {
			req, err := http.NewRequest(http.MethodGet, s.url, nil)
			require.NoError(t, err)
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Mcp-Session-Id", cs.ID())
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			resp, err := httpClient(aliceToken).Do(req)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			go func() {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				close(streamEnded)
			}()
		} else {
			close(streamEnded)
		}

		type answer struct {
			res *mcp.CallToolResult
			err error
		}
		answered := make(chan answer, 1)
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow"})
			answered <- answer{res, err}
		}()
		<-g.started
		s.cancel()
		select {
		case err := <-s.done:
			t.Fatalf("ServeHTTP returned (%v) with a call in flight", err)
		case <-time.After(300 * time.Millisecond):
		}
		_, err = dialHTTP(s.url, aliceToken, "")
		assert.Error(t, err, "stateless=%v: no new connection once shutting down", stateless)
		select {
		case <-streamEnded:
			if !stateless {
				t.Fatal("the GET stream ended before the call in flight was answered")
			}
		default:
		}

		close(g.release)
		a := <-answered
		require.NoError(t, a.err, "stateless=%v: the call in flight is answered", stateless)
		require.Len(t, a.res.Content, 1)
		assert.Equal(t, "done", a.res.Content[0].(*mcp.TextContent).Text)
		select {
		case err := <-s.done:
			assert.True(t, errors.Is(err, context.Canceled), "%v", err)
			close(s.done)
		case <-time.After(30 * time.Second):
			t.Fatalf("stateless=%v: ServeHTTP did not return after the call was answered", stateless)
		}
		<-streamEnded
		cs.Close()
	}
}

// TestHTTPSessionTimeout: a session idle for SessionTimeout is closed, and
// its id then gets 404, which tells a client to start a new session.
func TestHTTPSessionTimeout(t *testing.T) {
	s := startHTTP(t, mcpserver.Local(newCrux(t)), &mcpserver.HTTPOptions{SessionTimeout: 300 * time.Millisecond})
	post := func(session, body string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, s.url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
	}
	code, id := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"test"}}}`)
	require.Equal(t, http.StatusOK, code)
	require.NotEmpty(t, id)
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	code, _ = post(id, ping)
	assert.Equal(t, http.StatusOK, code, "a live session")
	time.Sleep(time.Second)
	code, _ = post(id, ping)
	assert.Equal(t, http.StatusNotFound, code, "closed once idle for the timeout")
}

// TestHTTPOther: a path that is neither the endpoint's nor the sync API's
// goes to HTTPOptions.Other, and without it gets 404; the endpoint stays
// the MCP server's.
func TestHTTPOther(t *testing.T) {
	other := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte("other " + r.URL.Path))
	})
	for _, tc := range []struct {
		other http.Handler
		code  int
	}{{nil, http.StatusNotFound}, {other, http.StatusTeapot}} {
		s := startHTTP(t, mcpserver.Local(newCrux(t)), &mcpserver.HTTPOptions{Tokens: testTokens(t), Other: tc.other})
		resp, err := http.Get("http://" + s.addr + "/ui/")
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, tc.code, resp.StatusCode)
		if tc.other != nil {
			require.Equal(t, "other /ui/", string(b))
		}
		code, _, _ := rawPost(t, s.url, nil)
		require.Equal(t, http.StatusUnauthorized, code, "the endpoint still asks for a token")
	}
}

// TestHTTPListCachePerCaller: two callers of one handler, over one crux
// server with a token and the dynamic surface, list in turn before and
// after one of them declares an intent; each is answered with its own
// list every time, as crux lists it for that caller, never with the list
// the handler last answered the other.
func TestHTTPListCachePerCaller(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	signer := receipts.NewEd25519Signer(priv)
	flags := crux.DefaultFlags()
	flags.ToolSurface = feature.SurfaceDynamic
	tok, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{Capabilities: crux.FreeLocalCapabilities(flags)})
	require.NoError(t, err)
	router, err := rcx.NewRouter(tok, signer.Public(), nil)
	require.NoError(t, err)
	srv := newCruxWith(t, &crux.Options{Flags: &flags, Signer: signer, Router: router})
	s := startHTTP(t, mcpserver.Local(srv), &mcpserver.HTTPOptions{Tokens: testTokens(t)})
	ctx := context.Background()
	alice := connectHTTP(t, s.url, aliceToken, "")
	bob := connectHTTP(t, s.url, bobToken, "")
	aliceC := crux.Caller{Agent: "alice", Authenticated: true}
	bobC := crux.Caller{Agent: "bob", Tenant: "acme", Authenticated: true}

	listed := func(cs *mcp.ClientSession) ([]string, any) {
		res, err := cs.ListTools(ctx, nil)
		require.NoError(t, err)
		var out []string
		for _, tl := range res.Tools {
			out = append(out, tl.Name)
		}
		return out, res.Meta["crux"]
	}
	names := func(c crux.Caller) []string {
		var out []string
		for _, tl := range srv.ListTools(ctx, c) {
			out = append(out, tl.Name)
		}
		return out
	}
	check := func(when string) {
		for range 2 {
			for _, p := range []struct {
				cs *mcp.ClientSession
				c  crux.Caller
			}{{alice, aliceC}, {bob, bobC}, {alice, aliceC}} {
				got, meta := listed(p.cs)
				assert.Equal(t, names(p.c), got, "%s: %s", when, p.c.Agent)
				assert.NotNil(t, meta, "%s: %s: the token in _meta.crux", when, p.c.Agent)
			}
		}
	}
	check("before an intent")
	res, err := alice.CallTool(ctx, &mcp.CallToolParams{Name: "cuecrux_session", Arguments: map[string]any{"intent": "document_ingest"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%+v", res.Content)
	require.NotEqual(t, names(aliceC), names(bobC), "alice's intent shapes her list")
	check("after alice's intent")
}
