package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/loopback"
)

// signinPage is the sign-in page: why the request was refused, if it
// was, and whether it may go on without a token.
type signinPage struct {
	Error     *crux.Error `json:"error,omitempty"`
	Anonymous bool        `json:"anonymous,omitempty"`
}

// cookiePrefix begins the session cookie's name; a random part of each
// Handler's own follows it (see [Handler.CookieName]).
const cookiePrefix = "crux_ui_"

// Bounds of the sessions of a Handler (see [Options.MaxSessions] and
// [Options.MaxSessionsPerCaller]).
const (
	// DefaultMaxSessions is how many sessions a Handler keeps at once,
	// all callers together, when Options.MaxSessions is zero.
	DefaultMaxSessions = 4096
	// DefaultMaxSessionsPerCaller is how many sessions one caller keeps
	// at once when Options.MaxSessionsPerCaller is zero.
	DefaultMaxSessionsPerCaller = 16
)

// A session is one signed-in browser.
type session struct {
	caller   crux.Caller
	key      string // sessionKey(caller)
	operator bool   // signed in with a token of an operator
	csrf     string
	expires  time.Time
}

// sessionKey is the caller a session counts against: an agent of a
// tenant, or the anonymous callers of a tenant together.
func sessionKey(c crux.Caller) string {
	return c.Identity() + "\x00" + c.TenantID()
}

// ctxKey keys a request's session (or bearer caller) in its context.
type ctxKey struct{}

// authed is the request's caller and, for a cookie, its session.
type authed struct {
	caller   crux.Caller
	sess     *session // nil for a bearer token
	operator bool     // the caller is an operator (see Options.IsOperator)
}

// isOperator reports whether ctx's caller is an operator.
func isOperator(ctx context.Context) bool {
	a, _ := ctx.Value(ctxKey{}).(*authed)
	return a != nil && a.operator
}

func sessionOf(ctx context.Context) *session {
	a, _ := ctx.Value(ctxKey{}).(*authed)
	if a == nil {
		return nil
	}
	return a.sess
}

func callerOf(ctx context.Context) crux.Caller {
	a, _ := ctx.Value(ctxKey{}).(*authed)
	if a == nil {
		return crux.Caller{}
	}
	return a.caller
}

// callerName is how the header names c.
func callerName(c crux.Caller) string {
	if c.Agent == "" {
		return "anonymous"
	}
	if c.Tenant != "" {
		return c.Agent + "@" + c.Tenant
	}
	return c.Agent
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// OneTimeToken returns a fresh token and a Lookup (for [Options.Lookup])
// that authenticates it as c once: the first sign-in with it gets a
// session, and the token is then spent. `crux ui` prints it in the URL it
// opens.
func OneTimeToken(c crux.Caller) (token string, lookup func(string) (crux.Caller, bool)) {
	token = randomToken()
	var mu sync.Mutex
	spent := false
	return token, func(t string) (crux.Caller, bool) {
		mu.Lock()
		defer mu.Unlock()
		if spent || subtle.ConstantTimeCompare([]byte(t), []byte(token)) != 1 {
			return crux.Caller{}, false
		}
		spent = true
		return c, true
	}
}

// lookup authenticates a token through the options.
func (h *Handler) lookup(token string) (crux.Caller, bool) {
	if h.opts.Lookup == nil || token == "" {
		return crux.Caller{}, false
	}
	return h.opts.Lookup(token)
}

// operator reports whether c, authenticated by a token, is an operator.
func (h *Handler) operator(c crux.Caller) bool {
	return h.opts.IsOperator != nil && h.opts.IsOperator(c)
}

// CookieName is the name of the session cookie of h: "crux_ui_" and a
// random part chosen by [New], so that two views on one host (two ports,
// or two handlers of one server) each keep their own cookie and never
// overwrite the other's.
func (h *Handler) CookieName() string { return h.cookie }

const (
	realm   = `Bearer realm="crux"`
	invalid = realm + `, error="invalid_token"`
)

// unauthorized answers 401 with challenge: the sign-in page, or its JSON
// twin.
func (h *Handler) unauthorized(w http.ResponseWriter, r *http.Request, challenge, msg string) {
	w.Header().Set("WWW-Authenticate", challenge)
	e := &crux.Error{Code: crux.CodeForbidden, Message: msg, Data: map[string]any{"reason": "unauthenticated"}}
	if wantsJSON(r) {
		writeJSON(w, http.StatusUnauthorized, errorBody{Error: e})
		return
	}
	h.render(w, r, http.StatusUnauthorized, "signin", "Sign in", signinPage{Error: e, Anonymous: h.opts.Anonymous})
}

// authed wraps next so that it runs only for an authenticated request: a
// bearer token, or a session cookie (and then, for a POST, the session's
// CSRF token in the form).
func (h *Handler) authed(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var a *authed
		if header := r.Header.Get("Authorization"); header != "" {
			scheme, token, ok := strings.Cut(header, " ")
			token = strings.TrimSpace(token)
			if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
				h.unauthorized(w, r, invalid, "the Authorization header is not a bearer token")
				return
			}
			c, ok := h.lookup(token)
			if !ok {
				h.unauthorized(w, r, invalid, "unknown bearer token")
				return
			}
			a = &authed{caller: c, operator: h.operator(c)}
		} else if ck, err := r.Cookie(h.cookie); err == nil {
			s := h.session(ck.Value)
			if s == nil {
				h.unauthorized(w, r, realm, "the session has ended: sign in again")
				return
			}
			a = &authed{caller: s.caller, sess: s, operator: s.operator}
		} else if h.opts.Anonymous {
			if r.Method == http.MethodPost {
				h.fail(w, r, http.StatusForbidden, &crux.Error{Code: crux.CodeForbidden,
					Message: "a change needs a session (sign in, with or without a token) or a bearer token"})
				return
			}
			a = &authed{}
		} else {
			h.unauthorized(w, r, realm, "a bearer token is required: sign in")
			return
		}
		if a.caller.Replica {
			h.fail(w, r, http.StatusForbidden, &crux.Error{Code: crux.CodeForbidden,
				Message: "the token is a sync replica's credential, which serves only the sync API; the view takes an agent's token",
				Data:    map[string]any{"reason": "replica"}})
			return
		}
		if h.opts.Admit != nil {
			done, refused := h.opts.Admit(a.caller)
			if refused != nil {
				w.Header().Set("Retry-After", "1")
				h.fail(w, r, http.StatusTooManyRequests, refused)
				return
			}
			defer done()
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if err := r.ParseForm(); err != nil {
				h.fail(w, r, http.StatusBadRequest, &crux.Error{Code: crux.CodeInvalidParams, Message: "the form cannot be read: " + err.Error()})
				return
			}
			if a.sess != nil && subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(a.sess.csrf)) != 1 {
				h.fail(w, r, http.StatusForbidden, &crux.Error{Code: crux.CodeForbidden, Message: "the form's CSRF token is missing or wrong: reload the page"})
				return
			}
		}
		next(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, a)))
	}
}

// session returns the live session of a cookie value, or nil.
func (h *Handler) session(id string) *session {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.sessions[id]
	if s == nil {
		return nil
	}
	if !h.opts.Now().Before(s.expires) {
		h.drop(id)
		return nil
	}
	return s
}

// codeOverloaded is the code of a refusal for a bound, as the MCP
// endpoint's (mcpserver.CodeOverloaded): -32000, with data {"reason",
// "limit"}.
const codeOverloaded = -32000

// errTooManySessions is the refusal of a sign-in past Options.MaxSessions.
func errTooManySessions(n int) *crux.Error {
	return &crux.Error{Code: codeOverloaded, Message: "the view holds " + strconv.Itoa(n) +
		" sessions, the most it may; no one's session is ended for a new one: retry once some have expired or signed out",
		Data: map[string]any{"reason": "sessions", "limit": n}}
}

// newSession starts a session for c and returns its cookie value. A
// caller past Options.MaxSessionsPerCaller loses its own session that
// expires first; past Options.MaxSessions, all callers together, the
// sign-in is refused (nil, and the refusal) rather than ending another
// caller's session.
func (h *Handler) newSession(c crux.Caller, operator bool) (string, *crux.Error) {
	now := h.opts.Now()
	id := randomToken()
	key := sessionKey(c)
	h.mu.Lock()
	defer h.mu.Unlock()
	perCaller, all := h.opts.MaxSessionsPerCaller, h.opts.MaxSessions
	if (perCaller > 0 && h.perCaller[key] >= perCaller) || (all > 0 && len(h.sessions) >= all) {
		h.dropExpired(now)
	}
	if perCaller > 0 && h.perCaller[key] >= perCaller {
		oldest := ""
		for k, s := range h.sessions {
			if s.key == key && (oldest == "" || s.expires.Before(h.sessions[oldest].expires)) {
				oldest = k
			}
		}
		h.drop(oldest)
	}
	if all > 0 && len(h.sessions) >= all {
		return "", errTooManySessions(all)
	}
	h.sessions[id] = &session{caller: c, key: key, operator: operator, csrf: randomToken(), expires: now.Add(h.opts.SessionTTL)}
	h.perCaller[key]++
	return id, nil
}

// dropExpired ends every session expired at now. h.mu is held.
func (h *Handler) dropExpired(now time.Time) {
	for k, s := range h.sessions {
		if !now.Before(s.expires) {
			h.drop(k)
		}
	}
}

// drop ends the session id, if there is one. h.mu is held.
func (h *Handler) drop(id string) {
	s := h.sessions[id]
	if s == nil {
		return
	}
	delete(h.sessions, id)
	if h.perCaller[s.key]--; h.perCaller[s.key] <= 0 {
		delete(h.perCaller, s.key)
	}
}

// signin exchanges a token (the form's, or the URL's with
// Options.TokenInURL) for a
// session cookie and goes to the facts list; without a token it shows the
// sign-in form.
func (h *Handler) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	token := r.PostFormValue("token")
	if token == "" && h.opts.TokenInURL {
		token = r.URL.Query().Get("token")
	}
	var c crux.Caller
	operator := false
	switch {
	case token == "" && r.Method == http.MethodPost && h.opts.Anonymous && r.PostFormValue("anonymous") == "1":
		// An anonymous session: the anonymous caller, with a CSRF token.
	case token == "":
		h.render(w, r, http.StatusOK, "signin", "Sign in", signinPage{Anonymous: h.opts.Anonymous})
		return
	default:
		var ok bool
		if c, ok = h.lookup(token); !ok {
			h.unauthorized(w, r, invalid, "unknown or spent token")
			return
		}
		if c.Replica {
			h.fail(w, r, http.StatusForbidden, &crux.Error{Code: crux.CodeForbidden,
				Message: "the token is a sync replica's credential, which serves only the sync API; the view takes an agent's token",
				Data:    map[string]any{"reason": "replica"}})
			return
		}
		operator = h.operator(c)
	}
	id, refused := h.newSession(c, operator)
	if refused != nil {
		w.Header().Set("Retry-After", "60")
		h.fail(w, r, http.StatusServiceUnavailable, refused)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: h.cookie, Value: id, Path: h.opts.Prefix,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: h.secure(r),
		MaxAge: int(h.opts.SessionTTL / time.Second),
	})
	if wantsJSON(r) {
		writeJSON(w, http.StatusOK, map[string]string{"signed_in": callerName(c)})
		return
	}
	http.Redirect(w, r, h.opts.Prefix, http.StatusSeeOther)
}

// signout ends the session.
func (h *Handler) signout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(h.cookie); err == nil {
		h.mu.Lock()
		h.drop(ck.Value)
		h.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: h.cookie, Path: h.opts.Prefix, MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: h.secure(r)})
	http.Redirect(w, r, h.opts.Prefix+"signin", http.StatusSeeOther)
}

// secure reports whether r reached the view over TLS: on a TLS
// connection of its own, or, with Options.TrustForwardedProto, through a
// proxy whose X-Forwarded-Proto (its first value) says https. The session
// cookie of such a request is Secure, so that a browser never sends it
// over plain HTTP.
func (h *Handler) secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !h.opts.TrustForwardedProto {
		return false
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}

// crossSite returns why r must be refused as cross-site, or "".
func crossSite(r *http.Request) string {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return "a request from another site is refused"
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local != nil && loopback.Host(hostOf(local.String())) && !loopback.Host(hostOf(r.Host)) {
		return "the Host header is not a loopback host"
	}
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !strings.EqualFold(u.Host, r.Host) {
			return "the Origin is not this view's origin"
		}
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
