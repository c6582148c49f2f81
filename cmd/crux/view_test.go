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
)

// viewServer is crux serve --http with alice, bob and a replica in its
// token table, alice's shared and private facts and bob's private fact
// stored through MCP.
type viewServer struct {
	base string // http://HOST:PORT
}

func startViewServer(t *testing.T, ctx context.Context, extra env) *viewServer {
	t.Helper()
	serveCtx, stop := context.WithCancel(ctx)
	var stderr syncBuffer
	e := env{"CRUX_AGENT_TOKENS": "alice=" + aliceViewToken + ",bob=" + bobViewToken + ",replica::r=" + replicaToken}
	for k, v := range extra {
		e[k] = v
	}
	u, codes := serveHTTPInProcess(t, serveCtx, e, &stderr, "--data", t.TempDir())
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

	// The receipt chain of the tenant verifies in the page.
	code, _, body = v.get(t, "/ui/receipts?audit=1&format=json", aliceViewToken, nil)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"error_code": "OK"`)
	assert.Contains(t, body, `"failing": 0`)
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
