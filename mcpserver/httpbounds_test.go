package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/mcpserver"
)

// serveHandler serves h on a loopback port until the test ends and
// returns the endpoint's URL.
func serveHandler(t *testing.T, h *mcpserver.HTTPHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() {
		h.CloseStreams()
		srv.Close()
	})
	return "http://" + ln.Addr().String() + mcpserver.DefaultHTTPPath
}

// overloaded is the JSON-RPC error of a refusal for a bound.
type overloaded struct {
	Error struct {
		Code int `json:"code"`
		Data struct {
			Reason string `json:"reason"`
			Limit  int    `json:"limit"`
		} `json:"data"`
	} `json:"error"`
}

// requireRefusal checks a refusal: its status, Retry-After and JSON-RPC
// error.
func requireRefusal(t *testing.T, resp *http.Response, status int, reason string, limit int) {
	t.Helper()
	defer resp.Body.Close()
	require.Equal(t, status, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	var e overloaded
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
	assert.Equal(t, mcpserver.CodeOverloaded, e.Error.Code)
	assert.Equal(t, reason, e.Error.Data.Reason)
	assert.Equal(t, limit, e.Error.Data.Limit)
}

// initialize posts an initialize for token and returns the answer.
func initialize(t *testing.T, url, token string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(initializeLine(1, "2025-11-25")))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := httpClient(token).Do(req)
	require.NoError(t, err)
	return resp
}

// openSession initializes a session for token and returns its id.
func openSession(t *testing.T, url, token string) string {
	t.Helper()
	resp := initialize(t, url, token)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	id := resp.Header.Get("Mcp-Session-Id")
	require.NotEmpty(t, id)
	return id
}

// sessionRequest sends method with session id and token, and returns the
// status.
func sessionRequest(t *testing.T, url, token, method, id, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
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

// heapInUse is the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestHTTPSessionBounds opens sessions past the bounds: past a caller's,
// its sessions with nothing open are closed oldest first (their ids then
// get 404) while connected clients keep working; once all of a caller's
// have something open, 429; past the bound of all callers, 503. The
// sessions held never pass the bounds, nor does the heap grow with the
// sessions opened.
func TestHTTPSessionBounds(t *testing.T) {
	const perCaller, all = 10, 15
	h := mcpserver.NewHTTPHandler(mcpserver.Local(newCrux(t)), &mcpserver.HTTPOptions{Tokens: testTokens(t),
		MaxSessionsPerCaller: perCaller, MaxSessions: all})
	url := serveHandler(t, h)

	// Connected SDK clients, each with its GET stream open.
	alice := connectHTTP(t, url, aliceToken, "2025-11-25")
	bob := connectHTTP(t, url, bobToken, "2025-11-25")
	require.Eventually(t, func() bool { _, open, _ := mcpserver.HeldSessions(h); return open == 2 },
		10*time.Second, 5*time.Millisecond, "the clients' GET streams")

	first := openSession(t, url, aliceToken)
	before := heapInUse()
	flood := 2000
	if testing.Short() {
		flood = 200
	}
	for range flood {
		openSession(t, url, aliceToken)
	}
	grown := int64(heapInUse()) - int64(before)
	held, open, sdk := mcpserver.HeldSessions(h)
	assert.Equal(t, perCaller+1, held, "alice's bound and bob's session")
	assert.Equal(t, held, sdk, "the SDK holds the sessions counted, no more")
	assert.Equal(t, 2, open)
	// Without the bound, each session holds about 25 KB: 2,000 of them
	// about 50 MB. The bound keeps it to a few.
	assert.Less(t, grown, int64(8<<20), "the heap grew by %d bytes over %d sessions opened", grown, flood)
	t.Logf("heap in use grew by %d bytes over %d sessions opened, %d held", grown, flood, held)

	assert.Equal(t, "alice", identity(t, alice), "a connected client keeps its session")
	assert.Equal(t, "bob", identity(t, bob))
	assert.Equal(t, http.StatusNotFound, sessionRequest(t, url, aliceToken, http.MethodPost, first,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`), "the oldest session with nothing open was closed")

	// alice's sessions all get a GET stream: none can be closed for a new one.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var streams sync.WaitGroup
	defer streams.Wait()
	defer cancel()
	for range perCaller - 1 {
		id := openSession(t, url, aliceToken)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		require.NoError(t, err)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		streams.Go(func() {
			if resp, err := httpClient(aliceToken).Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	require.Eventually(t, func() bool { _, open, _ := mcpserver.HeldSessions(h); return open == perCaller+1 },
		10*time.Second, 5*time.Millisecond, "the GET streams")
	requireRefusal(t, initialize(t, url, aliceToken), http.StatusTooManyRequests, "sessions_per_caller", perCaller)
	assert.Equal(t, "alice", identity(t, alice))

	// bob opens sessions up to the bound of all callers.
	for range all - perCaller - 1 {
		openSession(t, url, bobToken)
	}
	requireRefusal(t, initialize(t, url, bobToken), http.StatusServiceUnavailable, "sessions", all)
	held, _, sdk = mcpserver.HeldSessions(h)
	assert.Equal(t, all, held)
	assert.Equal(t, all, sdk)
	assert.Equal(t, "bob", identity(t, bob), "bob's session works at the bound")

	// A session ended makes room.
	require.NoError(t, bob.Close())
	require.Eventually(t, func() bool { held, _, _ := mcpserver.HeldSessions(h); return held == all-1 },
		10*time.Second, 5*time.Millisecond)
	openSession(t, url, bobToken)
}

// blocker is a Backend whose tools/call of "slow" reports on started and
// waits for release to be closed.
type blocker struct {
	mcpserver.Backend
	started chan struct{}
	release chan struct{}
}

func (b *blocker) CallTool(ctx context.Context, c crux.Caller, name string, args json.RawMessage) (*crux.Result, error) {
	if name == "slow" {
		b.started <- struct{}{}
		<-b.release
		return &crux.Result{Content: []crux.Content{{Type: "text", Text: "done"}}}, nil
	}
	return b.Backend.CallTool(ctx, c, name, args)
}

// TestHTTPRequestBound: a caller has at most MaxRequestsPerCaller
// requests in flight, with sessions or without (the stateless mode's
// bound); one more gets 429, and another caller is not held by it.
func TestHTTPRequestBound(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		t.Run(map[bool]string{false: "sessions", true: "stateless"}[stateless], func(t *testing.T) {
			// A bound of 2: the answer to a request can reach the client a
			// moment before the request ends on the server, so that two
			// requests sent one after the other may overlap there.
			const bound = 2
			g := &blocker{Backend: mcpserver.Local(newCrux(t)), started: make(chan struct{}), release: make(chan struct{})}
			h := mcpserver.NewHTTPHandler(g, &mcpserver.HTTPOptions{Tokens: testTokens(t), Stateless: stateless,
				MaxRequestsPerCaller: bound})
			url := serveHandler(t, h)
			alice := connectHTTP(t, url, aliceToken, "2025-11-25")
			done := make(chan error, bound)
			slow := func() {
				_, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow"})
				done <- err
			}
			for started := 0; started < bound; {
				go slow()
				select {
				case <-g.started:
					started++
				case err := <-done: // refused while the request before was ending
					require.ErrorContains(t, err, "Too Many Requests")
				}
			}
			id := alice.ID()
			if stateless {
				id = ""
			}
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", id)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			resp, err := httpClient(aliceToken).Do(req)
			require.NoError(t, err)
			requireRefusal(t, resp, http.StatusTooManyRequests, "requests_per_caller", bound)
			assert.Equal(t, "bob", identity(t, connectHTTP(t, url, bobToken, "2025-11-25")), "another caller")
			close(g.release)
			for range bound {
				require.NoError(t, <-done)
			}
			assert.Eventually(t, func() bool {
				_, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_agent_identity"})
				return err == nil
			}, 10*time.Second, 5*time.Millisecond, "room again once the call is answered")
		})
	}
}

// TestAdmitRequestSharesTheBound: the requests AdmitRequest counts (the
// web view's) and a caller's MCP requests share MaxRequestsPerCaller.
func TestAdmitRequestSharesTheBound(t *testing.T) {
	const bound = 2
	tok := testTokens(t)
	h := mcpserver.NewHTTPHandler(mcpserver.Local(newCrux(t)), &mcpserver.HTTPOptions{Tokens: tok, Stateless: true, MaxRequestsPerCaller: bound})
	url := serveHandler(t, h)
	var admitted []func() // ended before CloseStreams, which waits for them, even when the test fails
	t.Cleanup(func() {
		for _, d := range admitted {
			d()
		}
	})
	admit := func(c crux.Caller) (func(), *crux.Error) {
		done, refused := h.AdmitRequest(c)
		if done != nil {
			admitted = append(admitted, done)
		}
		return done, refused
	}
	alice, ok := tok.Lookup(aliceToken)
	require.True(t, ok)
	bob, ok := tok.Lookup(bobToken)
	require.True(t, ok)
	var dones []func()
	for range bound {
		done, refused := admit(alice)
		require.Nil(t, refused)
		dones = append(dones, done)
	}
	_, refused := admit(alice)
	require.NotNil(t, refused)
	assert.Equal(t, mcpserver.CodeOverloaded, refused.Code)
	assert.Equal(t, map[string]any{"reason": "requests_per_caller", "limit": bound}, refused.Data)
	list := func() *http.Response {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := httpClient(aliceToken).Do(req)
		require.NoError(t, err)
		return resp
	}
	requireRefusal(t, list(), http.StatusTooManyRequests, "requests_per_caller", bound)
	done, refused := admit(bob)
	require.Nil(t, refused, "another caller")
	done()
	dones[0]()
	dones[0]() // a second call ends nothing more
	resp := list()
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "room again once one has ended")
	// The answer can reach the client a moment before its request ends on
	// the server.
	require.Eventually(t, func() bool { _, refused = admit(alice); return refused == nil }, 10*time.Second, time.Millisecond,
		"one in flight (dones[1]) and this one")
	_, refused = admit(alice)
	assert.NotNil(t, refused, "the double end freed one place, not two")
}
