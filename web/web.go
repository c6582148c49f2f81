// Package web serves crux's memory to a person in a browser: the facts a
// caller sees, searched and paged; a fact's page with every version and
// who wrote it; corrections (edit, delete, forget, restore) made from the
// page; the documents query finds, with the lanes that found them; the
// caller's forgets, pins, sessions and handoffs, the tenant's decisions
// and the caller's passport, read-only; and the receipts of the caller's
// tenant that it acted in (for an operator of the view, the whole chain),
// verified in the page.
//
// The view holds no memory logic of its own. Every page is the answer of
// the tools an agent calls, through [Backend.CallTool] with the signed-in
// caller: the facts list is query_facts (the same ranking, the same
// isolation), a fact's page is fact_history, an edit is store_fact, a
// delete is delete_fact, a forget is memory_forget, the query page is
// query, the sessions are list_sessions and get_session, the decisions
// query_facts over their entities, the pins memory_view, the passport
// get_passport. So a page shows what
// the caller could read with the tools and nothing else, a change mints
// the receipts the tool mints, and a refusal is the tool's refusal, with
// its code and message. Restoring a forget is an operator function of
// crux, not a tool: the view offers it only when [Options.Operator] is set,
// and only for a forget of the signed-in caller's tenant that the caller
// made (an anonymous caller has made none: anonymous callers cannot be
// told apart), or any forget of its tenant for an operator of the view
// (see [Options.IsOperator]). No tool lists the receipt chain, the
// forgets or the handoffs either: an [Options.Ledger] reads them, and the
// view shows of them only the caller's tenant (the receipts without their
// payloads, and only those the caller acted in unless it is an operator),
// its own forgets (an operator's: all of its tenant's) and the handoffs
// it made or may accept. Auditing the whole chain is for an operator.
//
// Pages are server-rendered (html/template, embedded stylesheet, no
// script). Every page has a JSON twin: the same URL with ?format=json, or
// an Accept header asking for application/json, answers the tool's output
// as JSON. Lists are bounded and paged.
//
// # Signing in
//
// A request is served as the caller its token authenticates through
// [Options.Lookup] (or, with [Options.Anonymous], as the anonymous caller
// when it carries no token): either an "Authorization: Bearer TOKEN" header on the
// request itself, or a sign-in (GET or POST prefix+"signin" with token=)
// that exchanges the token for a session cookie (HttpOnly,
// SameSite=Strict, scoped to the prefix, named per Handler: see
// [Handler.CookieName]; Secure when the request came over TLS, or through
// a trusted TLS-terminating proxy: see [Options.TrustForwardedProto]).
// Sessions are bounded per caller and all together, and one caller's
// sign-ins never end another caller's session (see
// [Options.MaxSessionsPerCaller]). [OneTimeToken] makes a Lookup
// that accepts one token once, for `crux ui`. A request with no token gets
// 401 with `WWW-Authenticate: Bearer realm="crux"`, a wrong token 401 with
// error="invalid_token", as the MCP endpoint answers.
//
// # Cross-site requests
//
// Every change is a POST, which needs, with a session cookie, the
// session's CSRF token in the form (a bearer token is not sent by a
// browser on its own, and needs none). Every request is refused with 403
// when its Sec-Fetch-Site says cross-site, when its Origin is not the
// origin its Host names, or when it arrived on a loopback address and its
// Host is not a loopback host (DNS rebinding). Answers forbid framing and
// caching, and send a Referer only to the view itself.
package web

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/syncremote"
)

// DefaultPrefix is the URL path of the view when [Options.Prefix] is
// empty.
const DefaultPrefix = "/ui/"

// Bounds of the pages.
const (
	// DefaultPerPage is how many facts a page of the facts list shows
	// without per_page.
	DefaultPerPage = 20
	// MaxPerPage is the most facts a page of the facts list shows.
	MaxPerPage = 100
	// maxRanked is the most rows query_facts ranks (its top_k maximum):
	// the facts list pages within them.
	maxRanked = 1000
	// historyPerPage is how many versions a fact's page shows.
	historyPerPage = 20
	// maxFormBytes bounds a POST's form.
	maxFormBytes = 2 << 20
)

// A Backend runs tool calls for a caller, as [crux.Server.CallTool] does
// (a *crux.Server is a Backend, and so is the crux command's session on a
// shared data directory).
type Backend interface {
	CallTool(ctx context.Context, c crux.Caller, name string, args json.RawMessage) (*crux.Result, error)
}

// An Operator runs crux's operator functions for the view: reading a
// forget and restoring it. A *crux.Server is an Operator.
type Operator interface {
	// ForgetStatus reports the forget whose receipt is receiptID; an
	// unknown id is an error wrapping store.ErrNotFound.
	ForgetStatus(ctx context.Context, receiptID string) (*crux.ForgetInfo, error)
	// RestoreForget puts back what the forget forgot.
	RestoreForget(ctx context.Context, receiptID string) (*crux.RestoreReport, error)
}

// Options configures [New]. A nil *Options means all defaults: the view
// at /ui/, no token accepted (every page refuses with 401), no restore.
type Options struct {
	// Prefix is the URL path the view is served under, starting and
	// ending with "/". Empty means DefaultPrefix.
	Prefix string
	// Lookup returns the caller a token authenticates, and whether it
	// does. Nil accepts no token. A token of a sync replica
	// (crux.Caller.Replica) is refused with 403, as the MCP endpoint
	// refuses it: it serves only the sync API.
	Lookup func(token string) (crux.Caller, bool)
	// TokenInURL lets the sign-in take its token from the URL's query
	// (signin?token=…), as a link printed for a person to open does. Set
	// it only for tokens that work once (see [OneTimeToken]): a URL ends
	// up in the browser's history. False takes the token from a POSTed
	// form only.
	TokenInURL bool
	// Anonymous serves a request that has neither a bearer token nor a
	// session cookie as the anonymous caller (crux.Caller{}), as the MCP
	// endpoint serves one when it takes anonymous callers, and lets the
	// sign-in page start an anonymous session. A change (a POST) still
	// needs a session, for its CSRF token, or a bearer token. False
	// refuses such a request with 401.
	Anonymous bool
	// IsOperator reports whether a caller is an operator of the view: a
	// person who runs the memory, who may see every receipt of its
	// tenant's chain and audit the whole chain (audit=1), see every
	// forget of its tenant and restore any of them. Other callers see
	// only the receipts they acted in and the forgets they made, and
	// restore only those. It is asked only of a caller authenticated by
	// a token (a bearer token, or the token of the sign-in that started
	// the session): a caller served as anonymous because it brought no
	// token (Anonymous) is never an operator. Nil means no caller is.
	// The crux command makes the person who ran `crux ui` an operator
	// (the one-time token is theirs, and they own the data directory),
	// and under `crux serve --http` the token table entries its
	// --ui-operator flags name.
	IsOperator func(c crux.Caller) bool
	// Operator, if not nil, lets a caller see and restore the forgets it
	// made (an operator, those of its tenant). Nil means forgets cannot
	// be restored from the view.
	Operator Operator
	// Ledger, if not nil, serves the receipts page: the receipt chain of
	// the caller's tenant, verified. Nil means the view has no receipts
	// page.
	Ledger Ledger
	// Admit, if not nil, is asked before a request of a signed-in (or
	// anonymous) caller is served: it returns the function that ends the
	// request, which the view calls once it has answered, or a refusal,
	// which the view answers with 429 and Retry-After: 1. Under `crux
	// serve --http` it is the MCP endpoint's bound on a caller's requests
	// in flight (--max-caller-requests), so that the view's requests and
	// the caller's MCP requests count together. The sign-in and the
	// stylesheet are not counted. Nil admits every request.
	Admit func(c crux.Caller) (done func(), refused *crux.Error)
	// SessionTTL is how long a session cookie lasts. Zero means 12 hours.
	SessionTTL time.Duration
	// MaxSessionsPerCaller bounds the sessions one caller holds at once
	// (an agent of a tenant; the anonymous callers of a tenant together
	// are one): a sign-in past it ends that caller's own session that
	// expires first, never another caller's. Zero means
	// DefaultMaxSessionsPerCaller; a negative value means no bound.
	MaxSessionsPerCaller int
	// MaxSessions bounds the sessions held at once, all callers
	// together: a sign-in past it (once expired sessions are dropped) is
	// refused with 503, reason "sessions", and no session is ended for
	// it, so that no caller can sign the others out. Zero means
	// DefaultMaxSessions; a negative value means no bound.
	MaxSessions int
	// TrustForwardedProto makes the view believe the X-Forwarded-Proto
	// header of a request, as set by a TLS-terminating proxy in front of
	// the server: when it says https, the session cookie is Secure (a
	// browser then sends it only over HTTPS), as it is for a request that
	// arrived over TLS itself. Set it only when every request comes
	// through such a proxy, which sets or replaces the header. False
	// ignores the header.
	TrustForwardedProto bool
	// Logger receives a line for each failure of a page that is not the
	// tools' answer. Nil discards them.
	Logger *slog.Logger
	// Now is the clock of the sessions. Nil means time.Now.
	Now func() time.Time
}

// A Handler serves the view; make one with [New].
type Handler struct {
	// fixed at creation
	b      Backend
	opts   Options
	mux    *http.ServeMux
	pages  map[string]*template.Template
	logger *slog.Logger

	cookie string // the session cookie's name

	mu        sync.Mutex
	sessions  map[string]*session // by cookie value
	perCaller map[string]int      // sessions by sessionKey
}

//go:embed templates/*.html static/*
var assets embed.FS

// New returns the view of b's memory.
func New(b Backend, opts *Options) *Handler {
	if b == nil {
		panic("web.New: nil Backend")
	}
	h := &Handler{b: b, sessions: map[string]*session{}, perCaller: map[string]int{}}
	h.cookie = cookiePrefix + randomToken()[:16]
	if opts != nil {
		h.opts = *opts
	}
	if h.opts.Prefix == "" {
		h.opts.Prefix = DefaultPrefix
	}
	if !strings.HasPrefix(h.opts.Prefix, "/") || !strings.HasSuffix(h.opts.Prefix, "/") {
		panic(fmt.Sprintf("web.New: Prefix %q must start and end with /", h.opts.Prefix))
	}
	if h.opts.SessionTTL == 0 {
		h.opts.SessionTTL = 12 * time.Hour
	}
	if h.opts.Now == nil {
		h.opts.Now = time.Now
	}
	h.opts.MaxSessions = bound(h.opts.MaxSessions, DefaultMaxSessions)
	h.opts.MaxSessionsPerCaller = bound(h.opts.MaxSessionsPerCaller, DefaultMaxSessionsPerCaller)
	h.logger = h.opts.Logger
	if h.logger == nil {
		h.logger = slog.New(slog.DiscardHandler)
	}
	h.pages = parsePages()
	p := h.opts.Prefix
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "static")
	mux.Handle("GET "+p+"static/", http.StripPrefix(p+"static/", http.FileServerFS(static)))
	mux.HandleFunc("GET "+p+"signin", h.signin)
	mux.HandleFunc("POST "+p+"signin", h.signin)
	mux.HandleFunc("POST "+p+"signout", h.authed(h.signout))
	mux.HandleFunc("GET "+p+"{$}", h.authed(h.facts))
	mux.HandleFunc("GET "+p+"fact", h.authed(h.fact))
	mux.HandleFunc("POST "+p+"edit", h.authed(h.edit))
	mux.HandleFunc("POST "+p+"delete", h.authed(h.delete))
	mux.HandleFunc("POST "+p+"forget", h.authed(h.forget))
	mux.HandleFunc("GET "+p+"forgets/{id}", h.authed(h.forgetPage))
	mux.HandleFunc("POST "+p+"restore", h.authed(h.restore))
	mux.HandleFunc("GET "+p+"receipts", h.authed(h.receipts))
	mux.HandleFunc("GET "+p+"forgets", h.authed(h.forgets))
	mux.HandleFunc("GET "+p+"query", h.authed(h.query))
	mux.HandleFunc("GET "+p+"sessions", h.authed(h.sessionsPage))
	mux.HandleFunc("GET "+p+"session", h.authed(h.sessionPage))
	mux.HandleFunc("GET "+p+"decisions", h.authed(h.decisions))
	mux.HandleFunc("GET "+p+"passport", h.authed(h.passport))
	mux.HandleFunc("GET "+p+"handoffs", h.authed(h.handoffs))
	h.mux = mux
	return h
}

// bound is a bound of Options as the Handler uses it: def for zero, 0
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

// Prefix is the URL path the view is served under.
func (h *Handler) Prefix() string { return h.opts.Prefix }

// ServeHTTP serves one request of the view (see the package
// documentation for the checks every request passes first).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin") // no-referrer would make a browser send Origin: null with a form
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	if why := crossSite(r); why != "" {
		h.fail(w, r, http.StatusForbidden, &crux.Error{Code: crux.CodeForbidden, Message: why})
		return
	}
	h.mux.ServeHTTP(w, r)
}

// wantsJSON reports whether r asks for the JSON twin of a page.
func wantsJSON(r *http.Request) bool {
	if f := r.URL.Query().Get("format"); f != "" {
		return f == "json"
	}
	accept := r.Header.Get("Accept")
	return strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html")
}

// page is what every template receives.
type page struct {
	Title  string
	Prefix string
	Caller string // who is signed in, for the header
	CSRF   string // the session's CSRF token; empty for a bearer request
	Data   any
}

// render answers r with the page name over data, or with data as JSON.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	if wantsJSON(r) {
		writeJSON(w, status, data)
		return
	}
	p := page{Title: title, Prefix: h.opts.Prefix, Data: data}
	if s := sessionOf(r.Context()); s != nil {
		p.Caller, p.CSRF = callerName(s.caller), s.csrf
	}
	var b strings.Builder
	if err := h.pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		h.logger.Error("crux: web: rendering a page", "page", name, "err", err)
		http.Error(w, "crux: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, "crux: the answer could not be encoded", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// errorBody is the JSON twin of an error page.
type errorBody struct {
	Error *crux.Error `json:"error"`
}

// fail answers r with the error e: a page saying it, or its JSON twin
// {"error": {code, message, data?}}.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, e *crux.Error) {
	h.render(w, r, status, "error", "Refused", errorBody{Error: e})
}

// internal answers r with a failure of the view's own (not a tool's
// answer) while doing what, and logs it.
func (h *Handler) internal(w http.ResponseWriter, r *http.Request, what string, err error) {
	h.logger.Error("crux: web: "+what, "path", r.URL.Path, "err", err)
	h.fail(w, r, http.StatusInternalServerError, &crux.Error{Code: crux.CodeInternalError, Message: what + ": " + err.Error()})
}

// call runs the tool name for r's caller with args and decodes its
// output into out. A refusal or a tool error is answered on w, and call
// returns false.
func (h *Handler) call(w http.ResponseWriter, r *http.Request, name string, args any, out any) bool {
	raw, err := json.Marshal(args)
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, &crux.Error{Code: crux.CodeInternalError, Message: err.Error()})
		return false
	}
	res, err := h.b.CallTool(r.Context(), callerOf(r.Context()), name, raw)
	var ce *crux.Error
	switch {
	case errors.As(err, &ce):
		h.fail(w, r, syncremote.HTTPStatus(ce.Code), ce)
		return false
	case err != nil:
		h.logger.Error("crux: web: a tool call failed", "tool", name, "err", err)
		h.fail(w, r, http.StatusInternalServerError, &crux.Error{Code: crux.CodeInternalError, Message: name + ": " + err.Error()})
		return false
	case res.IsError:
		msg := name + " failed"
		if len(res.Content) > 0 {
			msg = res.Content[0].Text
		}
		status := http.StatusUnprocessableEntity
		if strings.Contains(msg, "not found") {
			status = http.StatusNotFound
		}
		// A tool error is the tool's answer, not a protocol error: code 0,
		// data.is_error, as the result's isError says.
		h.fail(w, r, status, &crux.Error{Message: msg, Data: map[string]any{"tool": name, "is_error": true}})
		return false
	}
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, &crux.Error{Code: crux.CodeInternalError, Message: name + ": decoding its output: " + err.Error()})
		return false
	}
	return true
}
