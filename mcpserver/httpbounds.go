package mcpserver

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crux-go/crux"
)

// Defaults of the bounds of [HTTPOptions].
const (
	// DefaultMaxSessions is [HTTPOptions.MaxSessions] when it is zero.
	DefaultMaxSessions = 1000
	// DefaultMaxSessionsPerCaller is [HTTPOptions.MaxSessionsPerCaller]
	// when it is zero.
	DefaultMaxSessionsPerCaller = 100
	// DefaultMaxRequestsPerCaller is [HTTPOptions.MaxRequestsPerCaller]
	// when it is zero.
	DefaultMaxRequestsPerCaller = 64
)

// CodeOverloaded is the JSON-RPC error code of a request the HTTP handler
// refuses because a bound of [HTTPOptions] is reached: -32000, in the
// range JSON-RPC leaves to servers, and none the SDK gives a meaning of
// its own (its client reads -32003 and -32004 as the end of the
// connection). Its data is {"reason": ..., "limit": n}, the reason one
// of "sessions", "sessions_per_caller" or "requests_per_caller".
const CodeOverloaded = -32000

// sessionlessVersion is the first protocol version whose requests carry
// their version and need no session (SEP-2575). The SDK's handler serves
// it only without sessions.
const sessionlessVersion = "2026-07-28"

// callerState is what an HTTPHandler keeps for one caller: its MCP
// server, the SDK handlers that serve it and the sessions it holds.
type callerState struct {
	// fixed at creation
	srv *mcp.Server
	// sessions serves requests of the handshake versions (2024-11-05 to
	// 2025-11-25) with sessions; nil in stateless mode.
	sessions *mcp.StreamableHTTPHandler
	// sessionless serves every request in stateless mode, and the
	// requests of 2026-07-28 or later otherwise.
	sessionless *mcp.StreamableHTTPHandler

	// guarded by HTTPHandler.mu
	held     map[string]*heldSession // by session id
	opening  int                     // session-opening requests in flight
	requests int                     // requests in flight, GET streams aside
}

// heldSession is a session of the SDK's handler, as the HTTPHandler
// counts it.
type heldSession struct {
	ss   *mcp.ServerSession
	open int    // its requests in flight, GET streams included
	used uint64 // HTTPHandler.clock when its latest request ended
}

// refusal is the answer to a request refused for a bound.
type refusal struct {
	status int
	reason string
	limit  int
	msg    string
}

// write answers r's request with the refusal: the status, with
// Retry-After, and a JSON-RPC error response of code CodeOverloaded (id
// null: the request is not read).
func (f *refusal) write(w http.ResponseWriter) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{
		"code": CodeOverloaded, "message": f.msg, "data": map[string]any{"reason": f.reason, "limit": f.limit}}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(f.status)
	w.Write(body)
}

// serveMCP serves a request for the MCP endpoint as caller c, within the
// bounds of the handler (see "Sessions and bounds" in [HTTPHandler]).
func (h *HTTPHandler) serveMCP(w http.ResponseWriter, r *http.Request, c *callerState) {
	if r.Method == http.MethodPost && answerBatch(w, r) {
		return
	}
	sdk := c.sessions
	if sdk == nil || r.Header.Get("Mcp-Protocol-Version") >= sessionlessVersion {
		sdk = c.sessionless
	}
	id := r.Header.Get("Mcp-Session-Id")
	if sdk != c.sessions {
		id = ""
	}
	if r.Method == http.MethodGet {
		h.use(c, id, 1)
		defer h.use(c, id, -1)
		h.serveStream(w, r, sdk)
		return
	}
	if f := h.begin(c); f != nil {
		h.logger.Warn("crux: HTTP request refused", "status", f.status, "reason", f.msg, "remote", r.RemoteAddr)
		f.write(w)
		return
	}
	defer h.end(c)
	if sdk == c.sessions && r.Method == http.MethodPost && id == "" {
		h.openSession(w, r, c)
		return
	}
	h.use(c, id, 1)
	defer h.use(c, id, -1)
	sdk.ServeHTTP(w, r)
}

// begin counts a request of c other than a GET as in flight, or returns
// its refusal when c has MaxRequestsPerCaller in flight already.
func (h *HTTPHandler) begin(c *callerState) *refusal {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := h.opts.MaxRequestsPerCaller; n > 0 && c.requests >= n {
		return &refusal{status: http.StatusTooManyRequests, reason: "requests_per_caller", limit: n,
			msg: "Too Many Requests: this caller has " + strconv.Itoa(n) + " requests in flight, the most it may; retry when one has been answered"}
	}
	c.requests++
	h.active++
	return nil
}

// AdmitRequest counts a request of caller c that the handler does not
// serve itself (one of [HTTPOptions.Other]'s, such as the crux command's
// web view) as in flight, under MaxRequestsPerCaller together with the
// caller's MCP requests, and returns the function that ends it (call it
// once, when the request has been answered). When c has
// MaxRequestsPerCaller requests in flight already it returns the refusal
// instead: code [CodeOverloaded], data {"reason": "requests_per_caller",
// "limit": n}, for the caller to answer with 429 and Retry-After. c is
// the caller as the Other handler authenticated it, from the same token
// table; it counts as the caller of an MCP request does (every anonymous
// caller together is one).
func (h *HTTPHandler) AdmitRequest(c crux.Caller) (done func(), refused *crux.Error) {
	c.Transport = h.transport
	cs := h.callerFor(c)
	if f := h.begin(cs); f != nil {
		return nil, &crux.Error{Code: CodeOverloaded, Message: f.msg, Data: map[string]any{"reason": f.reason, "limit": f.limit}}
	}
	var once sync.Once
	return func() { once.Do(func() { h.end(cs) }) }, nil
}

// end is the end of a request begin counted.
func (h *HTTPHandler) end(c *callerState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.requests--
	h.active--
	if h.active == 0 {
		h.idle.Broadcast()
	}
}

// use adds d to the requests in flight of c's session id, if it holds
// one, and marks it used when one ends.
func (h *HTTPHandler) use(c *callerState, id string, d int) {
	if id == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := c.held[id]; s != nil {
		s.open += d
		if d < 0 {
			h.clock++
			s.used = h.clock
		}
	}
}

// openSession serves a POST without a session id, which makes the SDK's
// handler open a session (it keeps one only for an initialize that
// succeeds), once the bounds allow one more: if c holds
// MaxSessionsPerCaller sessions, the one unused the longest of those with
// no request open (no GET stream either) is closed to make room, and if
// all have one the request is refused with 429; otherwise, if all
// callers hold MaxSessions together, it is refused with 503.
func (h *HTTPHandler) openSession(w http.ResponseWriter, r *http.Request, c *callerState) {
	victim, f := h.reserve(c)
	if f != nil {
		h.logger.Warn("crux: HTTP request refused", "status", f.status, "reason", f.msg, "remote", r.RemoteAddr)
		f.write(w)
		return
	}
	if victim != nil {
		h.logger.Info("crux: HTTP session closed to make room for a new one of its caller", "session", victim.ID())
		victim.Close()
	}
	hw := &headerWatch{ResponseWriter: w, h: h, c: c}
	c.sessions.ServeHTTP(hw, r)
	if !hw.seen {
		hw.register()
	}
}

// headerWatch is the ResponseWriter of a session-opening request: when
// the SDK writes the header, which names the session it opened, the
// session is counted as held, before the client can read the header and
// send the session's next request (its GET stream, say).
type headerWatch struct {
	http.ResponseWriter
	h    *HTTPHandler
	c    *callerState
	seen bool
}

func (hw *headerWatch) WriteHeader(status int) {
	if !hw.seen {
		hw.register()
	}
	hw.ResponseWriter.WriteHeader(status)
}

func (hw *headerWatch) Write(b []byte) (int, error) {
	if !hw.seen {
		hw.WriteHeader(http.StatusOK)
	}
	return hw.ResponseWriter.Write(b)
}

// Unwrap is for http.ResponseController, through which the SDK flushes.
func (hw *headerWatch) Unwrap() http.ResponseWriter { return hw.ResponseWriter }

// register ends the reservation of the session-opening request and
// counts the session its header names, if the SDK's server holds it,
// until it ends.
func (hw *headerWatch) register() {
	hw.seen = true
	h, c := hw.h, hw.c
	var ss *mcp.ServerSession
	if id := hw.Header().Get("Mcp-Session-Id"); id != "" {
		for s := range c.srv.Sessions() {
			if s.ID() == id {
				ss = s
				break
			}
		}
	}
	h.mu.Lock()
	c.opening--
	h.opening--
	if ss != nil {
		h.clock++
		c.held[ss.ID()] = &heldSession{ss: ss, used: h.clock}
		h.held++
	}
	h.mu.Unlock()
	if ss != nil {
		go func() {
			ss.Wait()
			h.release(c, ss)
		}()
	}
}

// reserve counts a session c is opening, after choosing the session to
// close to make room for it (see openSession), or returns the refusal.
func (h *HTTPHandler) reserve(c *callerState) (*mcp.ServerSession, *refusal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var victim *mcp.ServerSession
	if n := h.opts.MaxSessionsPerCaller; n > 0 && len(c.held)+c.opening >= n {
		var oldest string
		for id, s := range c.held {
			if s.open == 0 && (oldest == "" || s.used < c.held[oldest].used) {
				oldest = id
			}
		}
		if oldest == "" {
			return nil, &refusal{status: http.StatusTooManyRequests, reason: "sessions_per_caller", limit: n,
				msg: "Too Many Requests: this caller holds " + strconv.Itoa(n) + " sessions, the most it may, and each has a request or stream open; end one (DELETE) or retry later"}
		}
		victim = c.held[oldest].ss
		delete(c.held, oldest)
		h.held--
	} else if n := h.opts.MaxSessions; n > 0 && h.held+h.opening >= n {
		return nil, &refusal{status: http.StatusServiceUnavailable, reason: "sessions", limit: n,
			msg: "Service Unavailable: the server holds " + strconv.Itoa(n) + " sessions, the most it may; retry later"}
	}
	c.opening++
	h.opening++
	return victim, nil
}

// release forgets ss, which has ended, unless it was forgotten already.
func (h *HTTPHandler) release(c *callerState, ss *mcp.ServerSession) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := c.held[ss.ID()]; s != nil && s.ss == ss {
		delete(c.held, ss.ID())
		h.held--
	}
}

// answerBatch answers a POST whose body is a JSON array, a JSON-RPC
// batch, as StdioTransport answers one on a line, and reports whether it
// did: status 400, with the JSON-RPC answer as an application/json body
// (one -32600 per call, or a single one; -32700 when the body is not
// JSON). Nothing in the batch runs, whatever the protocol version, as
// over stdio. Any other body is left to the SDK, unread.
func answerBatch(w http.ResponseWriter, r *http.Request) bool {
	if r.Body == nil {
		return false
	}
	br := bufio.NewReader(r.Body)
	r.Body = struct {
		io.Reader
		io.Closer
	}{br, r.Body}
	for n := 1; ; n++ {
		b, err := br.Peek(n)
		if err != nil {
			return false // empty, or more leading space than the buffer holds: the SDK's to answer
		}
		if c := b[n-1]; c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			continue
		}
		if b[n-1] != '[' {
			return false
		}
		break
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxHTTPBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, "request body exceeds "+strconv.FormatInt(mbe.Limit, 10)+" bytes", http.StatusRequestEntityTooLarge)
			return true
		}
		http.Error(w, "failed to read body", http.StatusBadRequest)
		return true
	}
	v := check(trimSpace(body))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	w.Write(v.reply)
	return true
}
