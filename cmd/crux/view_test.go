package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tokens of the web view's tests over crux serve --http.
const (
	aliceViewToken = "alice-view-token-0123456789"
	bobViewToken   = "bob-view-token-0123456789"
	rootViewToken  = "root-view-token-0123456789" // of root, the view's operator (--ui-operator root)
)

// viewServer is crux serve --http with alice, bob and a replica in its
// token table, alice's shared and private facts and bob's private fact
// stored through MCP.
type viewServer struct {
	base string // http://HOST:PORT
}

func startViewServer(t *testing.T, ctx context.Context, extra env, args ...string) *viewServer {
	t.Helper()
	serveCtx, stop := context.WithCancel(ctx)
	var stderr syncBuffer
	e := env{"CRUX_AGENT_TOKENS": "alice=" + aliceViewToken + ",bob=" + bobViewToken + ",root=" + rootViewToken + ",replica::r=" + replicaToken}
	for k, v := range extra {
		e[k] = v
	}
	u, codes := serveHTTPInProcess(t, serveCtx, e, &stderr, append([]string{"--data", t.TempDir(), "--ui-operator", "root"}, args...)...)
	t.Cleanup(func() {
		stop()
		select {
		case <-codes:
		case <-time.After(30 * time.Second):
			t.Error("serve --http did not stop")
		}
	})
	require.Contains(t, stderr.String(), "ui=http://", "the log names the view")
	for _, c := range []struct {
		token string
		args  map[string]any
	}{
		{aliceViewToken, map[string]any{"entity": "project:view", "key": "language", "value": "Go"}},
		{aliceViewToken, map[string]any{"entity": "project:view", "key": "diary", "value": "alices-private-diary", "private": true}},
		{bobViewToken, map[string]any{"entity": "project:view", "key": "secret", "value": "bobs-private-secret", "private": true}},
	} {
		res, err := connectHTTP(t, ctx, u, c.token).CallTool(ctx, &mcp.CallToolParams{Name: "store_fact", Arguments: c.args})
		require.NoError(t, err)
		require.False(t, res.IsError, "%+v", res)
	}
	return &viewServer{base: strings.TrimSuffix(u, "/mcp")}
}

// get fetches path with token (none when empty) and extra headers.
func (v *viewServer) get(t *testing.T, path, token string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, v.base+path, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, val := range header {
		req.Header.Set(k, val)
	}
	if host := header["Host"]; host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// post sends form to path with token, asking for the JSON twin.
func (v *viewServer) post(t *testing.T, c *http.Client, path, token string, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, v.base+path+"?format=json", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestServeHTTPView: crux serve --http serves the web view under /ui/
// with the token table of the MCP endpoint: no token and a wrong token get
// 401 as MCP does, a replica's token 403; a token's agent sees its own
// memory and never another agent's private fact; another origin reaches
// no page; a change from a session needs its CSRF token.
func TestServeHTTPView(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	v := startViewServer(t, ctx, nil)
	pages := []string{"/ui/", "/ui/?q=private", "/ui/?entity=project:view", "/ui/?superseded=1",
		"/ui/fact?entity=project:view&key=diary", "/ui/fact?entity=project:view&key=secret", "/ui/receipts", "/ui/receipts?audit=1",
		"/ui/query?q=private", "/ui/forgets", "/ui/sessions", "/ui/decisions", "/ui/passport", "/ui/handoffs"}

	for _, p := range pages {
		code, hd, _ := v.get(t, p, "", nil)
		assert.Equal(t, http.StatusUnauthorized, code, p)
		assert.Equal(t, `Bearer realm="crux"`, hd.Get("WWW-Authenticate"), p)
		code, hd, _ = v.get(t, p, "not-a-token-of-this-server", nil)
		assert.Equal(t, http.StatusUnauthorized, code, p)
		assert.Contains(t, hd.Get("WWW-Authenticate"), `error="invalid_token"`, p)
		code, _, _ = v.get(t, p, replicaToken, nil)
		assert.Equal(t, http.StatusForbidden, code, "%s: a replica's token serves only the sync API", p)
	}

	// Each agent sees its own private fact, never the other's, on any
	// page, as HTML or JSON.
	for _, c := range []struct{ token, own, other string }{
		{aliceViewToken, "alices-private-diary", "bobs-private-secret"},
		{bobViewToken, "bobs-private-secret", "alices-private-diary"},
	} {
		for _, p := range pages {
			for _, accept := range []string{"text/html", "application/json"} {
				code, _, body := v.get(t, p, c.token, map[string]string{"Accept": accept})
				assert.NotContains(t, body, c.other, "%s %s", p, accept)
				assert.Less(t, code, 500, "%s: %s", p, body)
			}
		}
		_, _, body := v.get(t, "/ui/?entity=project:view&format=json", c.token, nil)
		assert.Contains(t, body, c.own)
		assert.Contains(t, body, `"Go"`)
	}
	code, _, body := v.get(t, "/ui/fact?entity=project:view&key=secret&format=json", aliceViewToken, nil)
	assert.Equal(t, http.StatusNotFound, code, "fact_history refuses bob's private fact to alice: %s", body)

	// Another origin reaches no page, whatever the token.
	for _, h := range []map[string]string{
		{"Origin": "http://evil.example"},
		{"Sec-Fetch-Site": "cross-site"},
		{"Host": "evil.example"},
	} {
		code, _, body := v.get(t, "/ui/", aliceViewToken, h)
		assert.Equal(t, http.StatusForbidden, code, "%v", h)
		assert.NotContains(t, body, "Go", "%v", h)
	}

	// A session's change needs its CSRF token; a bearer request needs none.
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	code, _ = v.post(t, browser, "/ui/signin", "", url.Values{"token": {bobViewToken}})
	require.Equal(t, http.StatusOK, code)
	edit := url.Values{"entity": {"project:view"}, "key": {"language"}, "value": {"Rust"}}
	code, _ = v.post(t, browser, "/ui/edit", "", edit)
	assert.Equal(t, http.StatusForbidden, code, "no CSRF token")
	resp, err := browser.Get(v.base + "/ui/fact?entity=project:view&key=language")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_, rest, ok := strings.Cut(string(b), `name="csrf" value="`)
	require.True(t, ok, "the fact page has a CSRF token: %s", b)
	csrf, _, _ := strings.Cut(rest, `"`)
	edit.Set("csrf", csrf)
	code, body = v.post(t, browser, "/ui/edit", "", edit)
	require.Equal(t, http.StatusOK, code, body)
	_, _, body = v.get(t, "/ui/?entity=project:view&key=language&format=json", aliceViewToken, nil)
	assert.Contains(t, body, `"Rust"`, "bob's correction is a new version for alice too")

	// alice forgets from the view; bob neither sees nor restores it.
	code, body = v.post(t, http.DefaultClient, "/ui/forget", aliceViewToken,
		url.Values{"scope_type": {"entity_prefix"}, "scope_value": {"project:view"}, "reason": {"view test"}})
	require.Equal(t, http.StatusOK, code, body)
	var forgot struct {
		ID string `json:"forget_receipt_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &forgot))
	code, _, _ = v.get(t, "/ui/forgets/"+forgot.ID, bobViewToken, map[string]string{"Accept": "application/json"})
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = v.post(t, http.DefaultClient, "/ui/restore", bobViewToken, url.Values{"receipt_id": {forgot.ID}})
	assert.Equal(t, http.StatusNotFound, code)
	code, _, body = v.get(t, "/ui/forgets/"+forgot.ID, aliceViewToken, map[string]string{"Accept": "application/json"})
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"restorable": true`)
	code, body = v.post(t, http.DefaultClient, "/ui/restore", aliceViewToken, url.Values{"receipt_id": {forgot.ID}})
	require.Equal(t, http.StatusOK, code, body)

	// alice sees the receipts she acted in; the whole chain, and its
	// audit, are the operator's (--ui-operator root).
	code, _, body = v.get(t, "/ui/receipts?audit=1&format=json", aliceViewToken, nil)
	require.Equal(t, http.StatusForbidden, code, body)
	code, _, body = v.get(t, "/ui/receipts?format=json", aliceViewToken, nil)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"actor": "alice"`)
	assert.NotContains(t, body, `"actor": "bob"`)
	code, _, body = v.get(t, "/ui/receipts?audit=1&format=json", rootViewToken, nil)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"error_code": "OK"`)
	assert.Contains(t, body, `"failing": 0`)
	assert.Contains(t, body, `"operator": true`)

	// The operator restores alice's second forget; bob may not.
	code, body = v.post(t, http.DefaultClient, "/ui/forget", aliceViewToken,
		url.Values{"scope_type": {"entity_prefix"}, "scope_value": {"project:view"}, "reason": {"again"}})
	require.Equal(t, http.StatusOK, code, body)
	require.NoError(t, json.Unmarshal([]byte(body), &forgot))
	code, _ = v.post(t, http.DefaultClient, "/ui/restore", bobViewToken, url.Values{"receipt_id": {forgot.ID}})
	assert.Equal(t, http.StatusNotFound, code)
	code, body = v.post(t, http.DefaultClient, "/ui/restore", rootViewToken, url.Values{"receipt_id": {forgot.ID}})
	assert.Equal(t, http.StatusOK, code, body)
}

// slowPost starts a POST to u with token whose body, past its first
// bytes (prefix), stays open until the returned function is called, which
// then waits for the answer and returns its status: the request is in
// flight on the server meanwhile. A request answered at once (refused
// because one that ended a moment ago was still counted) is sent again.
func slowPost(t *testing.T, u, token, contentType, prefix string) func() int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		pr, pw := io.Pipe()
		req, err := http.NewRequest(http.MethodPost, u, pr)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Accept", "application/json, text/event-stream")
		status := make(chan int, 1)
		// A connection of its own: the server may close it after answering
		// without the whole body, and no other request must find it pooled.
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		go pw.Write([]byte(prefix))
		go func() {
			resp, err := client.Do(req)
			if err != nil {
				status <- -1
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status <- resp.StatusCode
		}()
		select {
		case code := <-status:
			pw.Close()
			require.True(t, time.Now().Before(deadline), "the slow request is answered at once: %d", code)
			continue
		case <-time.After(100 * time.Millisecond):
		}
		return func() int {
			pw.Close()
			return <-status
		}
	}
}

// TestServeHTTPViewRequestBound: the view's requests and the MCP
// endpoint's count together under --max-caller-requests.
func TestServeHTTPViewRequestBound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A bound of 2: the SDK client that stores the facts may have two
	// requests in flight at once.
	v := startViewServer(t, ctx, nil, "--max-caller-requests", "2")
	mcpURL := v.base + "/mcp"
	tooMany := func(get func() int) {
		t.Helper()
		assert.Eventually(t, func() bool { return get() == http.StatusTooManyRequests }, 10*time.Second, 5*time.Millisecond)
	}
	mcp := func() int {
		req, err := http.NewRequest(http.MethodPost, mcpURL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+aliceViewToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	view := func() int { code, _, _ := v.get(t, "/ui/?format=json", aliceViewToken, nil); return code }

	ok := func(get func() int) {
		t.Helper()
		assert.Eventually(t, func() bool { return get() == http.StatusOK }, 10*time.Second, 5*time.Millisecond)
	}
	slowView := func() func() int {
		return slowPost(t, v.base+"/ui/edit?format=json", aliceViewToken, "application/x-www-form-urlencoded", "value=")
	}
	// The endpoint reads a body's first byte (a batch is refused) before
	// it counts the request.
	slowMCP := func() func() int { return slowPost(t, mcpURL, aliceViewToken, "application/json", "{") }

	// Two view requests in flight (their forms still arriving): alice's
	// MCP request is refused, bob's view is served.
	end1, end2 := slowView(), slowView()
	tooMany(mcp)
	code, _, body := v.get(t, "/ui/?format=json", bobViewToken, nil)
	assert.Equal(t, http.StatusOK, code, body)
	end1()
	end2()
	ok(mcp)

	// Two MCP requests in flight: alice's view is refused.
	end1, end2 = slowMCP(), slowMCP()
	tooMany(view)
	_, hd, body := v.get(t, "/ui/?format=json", aliceViewToken, nil)
	assert.Contains(t, body, "requests_per_caller")
	assert.Equal(t, "1", hd.Get("Retry-After"))
	end1()
	end2()
	ok(view)

	// One of each: a third of either is refused.
	end1, end2 = slowView(), slowMCP()
	tooMany(view)
	tooMany(mcp)
	end1()
	end2()
	ok(view)
}

// TestServeHTTPViewForwardedProto: with --ui-trust-forwarded-proto the
// session cookie is Secure behind a proxy that says https; without it the
// header is not believed.
func TestServeHTTPViewForwardedProto(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, trust := range []bool{false, true} {
		var args []string
		if trust {
			args = []string{"--ui-trust-forwarded-proto"}
		}
		v := startViewServer(t, ctx, nil, args...)
		req, err := http.NewRequest(http.MethodPost, v.base+"/ui/signin", strings.NewReader(url.Values{"token": {aliceViewToken}}.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("X-Forwarded-Proto", "https")
		resp, err := http.DefaultTransport.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Len(t, resp.Cookies(), 1)
		assert.Equal(t, trust, resp.Cookies()[0].Secure, "trusted: %v", trust)
	}
}

// TestServeHTTPViewAnonymous: without a token table, every caller of crux
// serve --http is anonymous, and so is every reader of the view; a bearer
// token is refused, as MCP refuses it, and a change needs a session.
func TestServeHTTPViewAnonymous(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	serveCtx, stop := context.WithCancel(ctx)
	defer stop()
	var stderr syncBuffer
	u, codes := serveHTTPInProcess(t, serveCtx, nil, &stderr, "--data", t.TempDir())
	defer func() { stop(); <-codes }()
	v := &viewServer{base: strings.TrimSuffix(u, "/mcp")}
	code, _, body := v.get(t, "/ui/?format=json", "", nil)
	assert.Equal(t, http.StatusOK, code, body)
	code, _, _ = v.get(t, "/ui/", "some-token-0123456789", nil)
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = v.post(t, http.DefaultClient, "/ui/edit", "", url.Values{"entity": {"e"}, "key": {"k"}, "value": {"v"}})
	assert.Equal(t, http.StatusForbidden, code)
}

// TestUI: crux ui prints a URL whose one-time token signs a browser in
// as the agent named; the token then is spent, and the pages, the
// receipts page included, are that agent's.
func TestUI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	uiCtx, stop := context.WithCancel(ctx)
	var stdout, stderr syncBuffer
	codes := make(chan int, 1)
	go func() {
		codes <- run(uiCtx, []string{"ui", "--data", t.TempDir(), "--agent", "alice"}, strings.NewReader(""), &stdout, &stderr, nil)
	}()
	defer func() {
		stop()
		assert.Equal(t, exitOK, <-codes, stderr.String())
	}()
	var signin string
	for deadline := time.Now().Add(30 * time.Second); signin == "" && time.Now().Before(deadline); {
		if _, u, ok := strings.Cut(stdout.String(), "open: "); ok {
			signin = strings.TrimSpace(u)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NotEmpty(t, signin, "crux ui printed no URL: %s", stderr.String())
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	resp, err := browser.Get(signin)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	base, _, _ := strings.Cut(signin, "/ui/")
	for _, p := range []string{"/ui/?format=json", "/ui/receipts?audit=1&format=json", "/ui/forgets?format=json", "/ui/handoffs?format=json"} {
		resp, err = browser.Get(base + p)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", p, b)
	}
	resp, err = http.Get(signin)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the token is spent")
}
