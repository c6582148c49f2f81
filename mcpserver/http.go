package mcpserver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/loopback"
	"github.com/crux-go/crux/syncremote"
)

// DefaultHTTPPath is the URL path of the MCP endpoint when
// [HTTPOptions.Path] is empty.
const DefaultHTTPPath = "/mcp"

// DefaultSessionTimeout is [HTTPOptions.SessionTimeout] when it is zero.
const DefaultSessionTimeout = 30 * time.Minute

// maxHTTPBody bounds the body of an HTTP request: 16 MiB, as a line of
// the stdio transport, well above crux's cap on the arguments of a call
// (toolkit.MaxArgumentBytes), so that crux rather than the transport refuses
// arguments that are too large, with a -32602 naming them.
const maxHTTPBody = maxLineLength

// HTTPOptions configures [NewHTTPHandler]. A nil *HTTPOptions means all
// defaults: the endpoint at /mcp, no authentication (every request is
// anonymous), sessions closed after 30 minutes without a request, at
// most 1000 sessions (100 per caller) and 64 requests of a caller in
// flight, answers as server-sent events.
type HTTPOptions struct {
	// Options configures the MCP server of each caller: the
	// implementation's name and version, instructions, and the logger,
	// which also receives a line for each request refused by the checks
	// of the handler (never the token).
	Options
	// Path is the URL path of the MCP endpoint; a request for any other
	// path gets 404. Empty means DefaultHTTPPath.
	Path string
	// Tokens are the bearer tokens and the callers they authenticate.
	// Nil (or empty) means no authentication: every request is served as
	// an anonymous caller, and one that carries an Authorization header
	// is refused with 401, since no token can be checked.
	Tokens *Tokens
	// Anonymous, with Tokens, serves a request without an Authorization
	// header as an anonymous caller rather than refusing it with 401. A
	// request with a wrong token is refused either way.
	Anonymous bool
	// Stateless serves every POST on its own, with no session: the SDK's
	// stateless mode. GET and DELETE are refused with 405, and the server
	// cannot send the client requests of its own (crux sends none).
	Stateless bool
	// JSONResponse answers a POST holding one request with an
	// application/json body instead of a stream of server-sent events.
	JSONResponse bool
	// SessionTimeout closes a session that has had no request for this
	// long (a client that comes back gets 404 and starts a new one, as MCP
	// asks), so that sessions clients never end do not pile up. Zero means
	// DefaultSessionTimeout; a negative value keeps sessions until the
	// client ends them (DELETE) or the server stops.
	SessionTimeout time.Duration
	// MaxSessions bounds the sessions held at once, all callers together
	// (see "Sessions and bounds" in [HTTPHandler]): a request that would
	// open one more gets 503. Zero means DefaultMaxSessions; a negative
	// value means no bound.
	MaxSessions int
	// MaxSessionsPerCaller bounds the sessions one caller holds at once
	// (a token table entry; every anonymous caller together is one): a
	// new one closes the caller's session unused the longest among those
	// with nothing open, or gets 429 if each has a request or stream
	// open. Zero means DefaultMaxSessionsPerCaller; a negative value
	// means no bound.
	MaxSessionsPerCaller int
	// MaxRequestsPerCaller bounds the requests of one caller in flight at
	// once, with or without sessions, GET streams aside (a session has at
	// most one): one more gets 429. Zero means
	// DefaultMaxRequestsPerCaller; a negative value means no bound.
	MaxRequestsPerCaller int
	// Other, if not nil, serves every request whose path is neither the
	// endpoint's nor the sync API's, instead of the 404 such a request
	// gets otherwise; none of the handler's checks apply to it, so it
	// makes its own (the crux command mounts the web view, package web,
	// here), and it counts its requests under MaxRequestsPerCaller only
	// through [HTTPHandler.AdmitRequest].
	Other http.Handler
}

// An HTTPHandler serves a [Backend] to MCP clients over Streamable HTTP
// through the SDK's handler (mcp.NewStreamableHTTPHandler), after checks
// of its own on every request, in this order:
//
//  1. The path: anything but the endpoint's gets 404, or goes to
//     [HTTPOptions.Other].
//  2. DNS rebinding: a request that arrived on a loopback address must
//     name a loopback host in its Host header (localhost, a name under
//     .localhost, 127.0.0.0/8 or ::1, any port), and an Origin header, if
//     it has one, must be http or https on a loopback host; a request on
//     any other address that has an Origin header must come from the
//     origin it names in Host (scheme aside). Otherwise 403. A page that a
//     browser loaded from elsewhere therefore cannot reach the endpoint,
//     even through a DNS name rebound to 127.0.0.1. The SDK's own check
//     (Host on loopback) stays on as well.
//  3. Authentication (see [HTTPOptions.Tokens]): "Authorization: Bearer
//     TOKEN" is looked up in the token table. A missing header, unless
//     [HTTPOptions.Anonymous], gets 401 with `WWW-Authenticate: Bearer
//     realm="crux"`; a wrong token, another scheme, or any token when no
//     table is configured gets 401 with `error="invalid_token"` added.
//
// A token of a sync replica (see [ParseTokens]) then gets 403: it serves
// the sync API only.
//
// The request is then served as its caller: the table's agent and tenant,
// authenticated, or an anonymous caller. Each caller has an MCP server of
// its own (see [NewBackend]), so its tools/list is its own (the capability
// token, the tool surface and the intent it declared apply to it), and a
// handler of its own, so that a session belongs to the caller that opened
// it: another caller presenting its Mcp-Session-Id gets 404, as for a
// session that does not exist. There is at most one server and one
// handler per token table entry, and one for anonymous callers.
//
// Every caller's Transport says "http", with the endpoint's path and
// whether it takes tokens, serves anonymous callers, or keeps no sessions,
// which is what route_access_matrix reports.
//
// A request body is at most 16 MiB, well above crux's cap on a call's
// arguments; a larger one gets 413.
//
// When the Backend is a [SyncBackend] (as [Local] is), the handler also
// serves crux sync to other replicas, the other side of package
// syncremote's client: POST /v1/sync/identity, /v1/sync/changes and
// /v1/sync/push, whatever [HTTPOptions.Path] is. They take the same checks
// in the same order (Host and Origin, then the bearer token, which must be
// a replica's, replica::NAME[@TENANT] in the table: the exchange is with
// that tenant), then: POST only (405), Content-Type application/json (415,
// so that a browser page cannot send one without a CORS preflight, which
// crux never grants), a body of at most 16 MiB (syncremote.MaxBodyBytes;
// 413). Every failure, these and the refusals of the Server (an
// anonymous caller or an agent's token is -32003, 403, data.reason
// "unauthenticated" or "replica_required"), is answered with a JSON
// syncremote.ErrorBody and the status syncremote.HTTPStatus gives its
// code; a 401 keeps its WWW-Authenticate challenge. What a replica may
// push, and what is rejected, is store.ApplySyncFacts's to say.
//
// # Sessions and bounds
//
// The SDK's handler keeps a session from each initialize until the client
// ends it (DELETE), SessionTimeout passes without a request, or the
// server stops; it sets no bound of its own. The handler bounds them,
// each bound answered before the SDK sees the request:
//
//   - A caller holds at most MaxSessionsPerCaller sessions (default 100).
//     An initialize past it closes the caller's session that has gone
//     unused the longest among those with no request in flight and no
//     GET stream open (a client that went away holds neither; a
//     connected SDK client keeps its GET stream), and is served; the
//     closed session's next request gets 404, upon which MCP has a client
//     initialize again. If every session of the caller has something
//     open, the initialize gets 429, reason "sessions_per_caller". A
//     caller competes only with itself here, and the usual way to reach
//     the bound, a client that opens sessions and never ends them, would
//     otherwise lock its caller out until SessionTimeout.
//   - All callers together hold at most MaxSessions (default 1000). An
//     initialize past it, of a caller below its own bound, gets 503,
//     reason "sessions": no session is closed for it, so that one
//     caller cannot end another's.
//   - A caller has at most MaxRequestsPerCaller requests in flight
//     (default 64), GET streams aside, with sessions or without: one more
//     gets 429, reason "requests_per_caller". This bounds what a session
//     holds (its requests in flight and one GET stream) and what the
//     stateless mode holds, whose sessions last one request.
//
// A refusal carries Retry-After: 1 and a JSON-RPC error response, id
// null, of code [CodeOverloaded] (-32000) with data {"reason", "limit"}.
// The SDK's client reads neither status as the end of its session.
//
// A JSON-RPC batch (a body that is a JSON array) is answered as
// [StdioTransport] answers one, whatever the protocol version: status 400
// with the JSON-RPC answer as an application/json body, one -32600 per
// call in it (-32700 if the body is not JSON). Nothing in it runs.
//
// The handler speaks the same protocol versions as stdio: requests of
// 2026-07-28 or later (those with an MCP-Protocol-Version header of that
// version or later), which carry their version and need no session, are
// served by an SDK handler without sessions whether or not Stateless is
// set, since the SDK's handler with sessions refuses them; the others by
// the one with sessions, unless Stateless.
//
// Bad arguments, refusals and other errors are mapped as over any
// transport (see the package documentation): a -32030 refusal is a
// JSON-RPC error with its data, carried in the HTTP 200 answer of the
// POST.
//
// An HTTPHandler is safe for concurrent use.
type HTTPHandler struct {
	b         Backend
	opts      HTTPOptions
	transport crux.Transport
	logger    *slog.Logger

	// streams is cancelled by CloseStreams: it ends every GET stream.
	streams      context.Context
	closeStreams context.CancelFunc

	mu      sync.Mutex
	callers map[string]*callerState // by callerKey
	active  int                     // requests other than GET in flight
	idle    *sync.Cond              // signalled when active drops to 0
	held    int                     // sessions held, all callers together
	opening int                     // session-opening requests in flight, all callers together
	clock   uint64                  // counts the ends of requests, for heldSession.used
}

// NewHTTPHandler returns the HTTP handler that serves b (see
// [HTTPHandler]). A nil opts means all defaults.
func NewHTTPHandler(b Backend, opts *HTTPOptions) *HTTPHandler {
	if b == nil {
		panic("mcpserver: NewHTTPHandler needs a backend")
	}
	var o HTTPOptions
	if opts != nil {
		o = *opts
	}
	if o.Path == "" {
		o.Path = DefaultHTTPPath
	}
	switch {
	case o.SessionTimeout == 0:
		o.SessionTimeout = DefaultSessionTimeout
	case o.SessionTimeout < 0:
		o.SessionTimeout = 0 // the SDK's "never"
	}
	o.MaxSessions = bound(o.MaxSessions, DefaultMaxSessions)
	o.MaxSessionsPerCaller = bound(o.MaxSessionsPerCaller, DefaultMaxSessionsPerCaller)
	o.MaxRequestsPerCaller = bound(o.MaxRequestsPerCaller, DefaultMaxRequestsPerCaller)
	if o.Tokens.Len() == 0 {
		o.Tokens = nil
		o.Anonymous = true
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	streams, closeStreams := context.WithCancel(context.Background())
	h := &HTTPHandler{
		streams: streams, closeStreams: closeStreams,
		b:      b,
		opts:   o,
		logger: logger,
		transport: crux.Transport{Kind: crux.TransportHTTP, Path: o.Path, Tokens: o.Tokens != nil,
			Anonymous: o.Anonymous, Stateless: o.Stateless},
		callers: map[string]*callerState{},
	}
	h.idle = sync.NewCond(&h.mu)
	return h
}

// ServeHTTP checks the request and serves it as its caller (see
// [HTTPHandler]).
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sb, isSync := h.b.(SyncBackend)
	isSync = isSync && r.URL.Path != h.opts.Path && strings.HasPrefix(r.URL.Path, syncremote.PathPrefix)
	if r.URL.Path != h.opts.Path && !isSync {
		if h.opts.Other != nil {
			h.opts.Other.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
		return
	}
	if msg := checkHostOrigin(r); msg != "" {
		h.logger.Warn("crux: HTTP request refused", "status", http.StatusForbidden, "reason", msg, "remote", r.RemoteAddr)
		if isSync {
			syncremote.WriteError(w, http.StatusForbidden, &crux.Error{Code: crux.CodeForbidden, Message: "Forbidden: " + msg,
				Data: map[string]any{"reason": "origin"}})
			return
		}
		http.Error(w, "Forbidden: "+msg, http.StatusForbidden)
		return
	}
	caller, challenge, msg := h.authenticate(r)
	if challenge != "" {
		h.logger.Warn("crux: HTTP request refused", "status", http.StatusUnauthorized, "reason", msg, "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", challenge)
		if isSync {
			syncremote.WriteError(w, http.StatusUnauthorized, &crux.Error{Code: crux.CodeForbidden, Message: "Unauthorized: " + msg,
				Data: map[string]any{"reason": "unauthorized"}})
			return
		}
		http.Error(w, "Unauthorized: "+msg, http.StatusUnauthorized)
		return
	}
	if isSync {
		h.serveSync(w, r, sb, caller)
		return
	}
	if caller.Replica {
		msg := "the bearer token is a sync replica's credential, which serves only the sync API under " + syncremote.PathPrefix + "; MCP takes an agent's token"
		h.logger.Warn("crux: HTTP request refused", "status", http.StatusForbidden, "reason", msg, "replica", caller.Agent, "remote", r.RemoteAddr)
		http.Error(w, "Forbidden: "+msg, http.StatusForbidden)
		return
	}
	h.serveMCP(w, r, h.callerFor(caller))
}

// serveStream serves a GET, the stream of server messages of a session,
// through sdk, until the session ends or CloseStreams is called.
func (h *HTTPHandler) serveStream(w http.ResponseWriter, r *http.Request, sdk *mcp.StreamableHTTPHandler) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(h.streams, cancel)
	defer stop()
	sdk.ServeHTTP(w, r.WithContext(ctx))
}

// CloseStreams waits until no other request (a POST, a DELETE) is in
// flight, then ends every GET stream, the stream of server messages a
// session keeps open, and every GET stream opened later, so that an
// http.Server's Shutdown, which waits for every request to end, can
// finish. The GET streams end last because a client may take the end of
// its session's stream for the end of the session and give up on the
// calls it is waiting for. [ServeHTTP] calls it when it shuts down
// (through http.Server.RegisterOnShutdown, once the server has stopped
// accepting connections).
func (h *HTTPHandler) CloseStreams() {
	h.mu.Lock()
	for h.active > 0 {
		h.idle.Wait()
	}
	h.mu.Unlock()
	h.closeStreams()
}

// authenticate returns the caller of r, or the WWW-Authenticate challenge
// of a 401 and why.
func (h *HTTPHandler) authenticate(r *http.Request) (c crux.Caller, challenge, msg string) {
	const realm = `Bearer realm="crux"`
	const invalid = realm + `, error="invalid_token"`
	header := r.Header.Get("Authorization")
	if header == "" {
		if h.opts.Anonymous {
			return crux.Caller{Transport: h.transport}, "", ""
		}
		return c, realm, "a bearer token is required"
	}
	scheme, token, ok := strings.Cut(header, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return c, invalid, "the Authorization header is not a bearer token"
	}
	if h.opts.Tokens == nil {
		return c, invalid, "no bearer tokens are configured"
	}
	c, ok = h.opts.Tokens.Lookup(token)
	if !ok {
		return c, invalid, "unknown bearer token"
	}
	c.Transport = h.transport
	return c, "", ""
}

// callerKey identifies a caller for the handler cache.
func callerKey(c crux.Caller) string {
	if c.Identity() == "" {
		return "\x00anonymous"
	}
	return c.Identity() + "\x00" + c.TenantID()
}

// callerFor returns the state of caller c, made on first use: its MCP
// server and the SDK handlers serving it, one with sessions (unless
// Stateless) and one without, which share the server.
func (h *HTTPHandler) callerFor(c crux.Caller) *callerState {
	key := callerKey(c)
	h.mu.Lock()
	defer h.mu.Unlock()
	if cs, ok := h.callers[key]; ok {
		return cs
	}
	srv := NewBackend(h.b, c, &h.opts.Options)
	sdk := func(stateless bool) *mcp.StreamableHTTPHandler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
			Stateless:           stateless,
			JSONResponse:        h.opts.JSONResponse,
			SessionTimeout:      h.opts.SessionTimeout,
			Logger:              h.opts.Logger,
			MaxRequestBodyBytes: maxHTTPBody,
		})
	}
	cs := &callerState{srv: srv, sessionless: sdk(true), held: map[string]*heldSession{}}
	if !h.opts.Stateless {
		cs.sessions = sdk(false)
	}
	h.callers[key] = cs
	return cs
}

// bound is a bound of HTTPOptions as the handler uses it: def for zero, 0
// (none) for a negative value.
func bound(n, def int) int {
	switch {
	case n == 0:
		return def
	case n < 0:
		return 0
	}
	return n
}

// checkHostOrigin applies the DNS rebinding checks (see [HTTPHandler]) and
// returns why r fails them, or "".
func checkHostOrigin(r *http.Request) string {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	onLoopback := local != nil && loopback.Host(hostOf(local.String()))
	origin := r.Header.Get("Origin")
	if onLoopback {
		if !loopback.Host(hostOf(r.Host)) {
			return "the Host header " + quote(r.Host) + " is not a loopback host"
		}
		if origin == "" {
			return ""
		}
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !loopback.Host(u.Hostname()) {
			return "the Origin " + quote(origin) + " is not a loopback origin"
		}
		return ""
	}
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !strings.EqualFold(u.Host, r.Host) {
		return "the Origin " + quote(origin) + " is not the origin of the Host " + quote(r.Host)
	}
	return ""
}

// hostOf returns the host of a host[:port], without brackets.
func hostOf(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
}

// quote bounds and quotes a header value for a message.
func quote(s string) string {
	const max = 200
	if len(s) > max {
		s = s[:max] + "..."
	}
	return `"` + strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '"' {
			return '?'
		}
		return r
	}, s) + `"`
}

// LoopbackAddr reports whether addr, a host:port to listen on, binds only
// the loopback interface: its host is localhost or a loopback address. An
// empty host, 0.0.0.0 or :: bind every interface and are not loopback.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return host != "" && loopback.Host(host) && !strings.HasSuffix(strings.ToLower(host), ".localhost")
}

// ServeHTTP serves b over Streamable HTTP on ln (see [HTTPHandler]) until
// ctx is done, then shuts down gracefully: it stops accepting
// connections, waits for every request in flight to be answered (a call
// that never ends holds it, as over stdio), ends the GET streams (see
// [HTTPHandler.CloseStreams]), and returns ctx.Err(). A failure of the listener is returned at once. ln is
// closed when ServeHTTP returns.
func ServeHTTP(ctx context.Context, b Backend, ln net.Listener, opts *HTTPOptions) error {
	return ServeHandler(ctx, NewHTTPHandler(b, opts), ln)
}

// ServeHandler is [ServeHTTP] with a handler made by [NewHTTPHandler]
// beforehand, for a caller that needs it first (the crux command's web
// view counts its requests with [HTTPHandler.AdmitRequest]).
func ServeHandler(ctx context.Context, h *HTTPHandler, ln net.Listener) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute, // a kept-alive connection with no request
		ErrorLog:          slog.NewLogLogger(h.logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	srv.RegisterOnShutdown(h.CloseStreams)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		return err
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return ctx.Err()
}
