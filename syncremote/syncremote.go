// Package syncremote is crux sync over HTTP: a [crux.Remote] that reaches
// another crux server at a base URL, and the wire format both sides of
// the exchange share.
//
//	remote, err := syncremote.New("https://crux.example.com", apiKey, nil)
//	...
//	srv, err := crux.NewServer(db, &crux.Options{Remote: remote})
//
// The crux command makes one from CORECRUXD_SYNC_REMOTE_URL and
// CORECRUXD_SYNC_API_KEY, and crux serve --http serves the other side
// (see mcpserver.HTTPHandler).
//
// # The wire
//
// Each method of [crux.Remote] is one POST of a JSON body to a path under
// the base URL, with the API key as a bearer token (Authorization: Bearer
// KEY) and Content-Type application/json:
//
//	Identity  POST BASE/v1/sync/identity  {}                                  → crux.RemoteIdentity
//	Changes   POST BASE/v1/sync/changes   {cursor, entity_prefix?, limit}     → {facts, cursor, more}
//	Push      POST BASE/v1/sync/push      {facts}                             → {applied, duplicates, conflicts, rejected}
//
// The server maps the bearer token to a caller through its token table,
// and serves only a replica: the token must be a replica's entry,
// replica::NAME[@TENANT] (crux token new --replica NAME makes one); an
// agent's token is refused on every path with -32003 (403), data.reason
// "replica_required". The exchange is with the replica's tenant. The
// versions a replica pushes are held to what it may assert (see
// store.ApplySyncFacts): they are owned there by the replica, and one
// stored more than 5 minutes past the server's clock or superseding a
// version the replica could not have been sent is listed in rejected. A success is HTTP 200
// with the JSON answer. A failure is an HTTP error status with the body
// [ErrorBody], {"error": {"code", "message", "data"?}}, whose code is one
// of crux's JSON-RPC codes; [HTTPStatus] gives the status of each.
//
// # Decisions
//
//   - Bodies are bounded both ways: a request or answer of more than
//     [MaxBodyBytes] (16 MiB) is refused. The sync tools send and serve
//     pages of at most 250 versions and 8 MiB (tools.MaxSyncPageBytes),
//     so a page fits whatever its values.
//   - Every request has a deadline: the context's, or [Options.Timeout]
//     (default 30 s) when that comes sooner.
//   - An error answer of the remote is a *crux.Error with the remote's
//     code, message and data, so a refusal there (-32003, -32030) is a
//     refusal here. An answer without the error body maps by status: 401
//     and 403 to -32003, 413 and other 4xx to -32600; 5xx and anything
//     else, and a failure to reach the remote, are plain errors.
//   - Redirects are not followed, so the API key goes to the URL
//     configured and nowhere else: a 3xx is an error naming where it
//     points.
//   - Plain http is refused for a host that is not loopback, since the key
//     would cross the network in clear, unless [Options.AllowInsecureHTTP].
//     A URL holding user information, a query or a fragment is refused:
//     the key belongs in the apiKey argument.
//   - The API key is never logged, never part of an error, and printing a
//     Client shows only its URL.
package syncremote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/internal/loopback"
)

// The paths of the three requests, under the base URL.
const (
	PathIdentity = "/v1/sync/identity"
	PathChanges  = "/v1/sync/changes"
	PathPush     = "/v1/sync/push"
)

// PathPrefix starts every sync path.
const PathPrefix = "/v1/sync/"

// MaxBodyBytes bounds the body of a sync request and of its answer:
// 16 MiB, twice a page of versions (tools.MaxSyncPageBytes), so that a
// page with one version of the largest value still fits.
const MaxBodyBytes = 16 << 20

// DefaultTimeout is [Options.Timeout] when it is zero.
const DefaultTimeout = 30 * time.Second

// Bounds of what a client keeps of an error answer.
const (
	maxErrorBody    = 64 << 10 // bytes of an error answer read
	maxErrorMessage = 1024     // bytes of its message kept
)

// Options configures [New]. A nil *Options means all defaults.
type Options struct {
	// HTTPClient sends the requests. Nil means a client of the package's
	// own (http.DefaultTransport's settings). Its CheckRedirect is
	// replaced, on a copy, by one that follows no redirect.
	HTTPClient *http.Client
	// Timeout bounds each request when the context has no earlier
	// deadline. Zero means DefaultTimeout; a negative value leaves only
	// the context's.
	Timeout time.Duration
	// AllowInsecureHTTP lets the base URL be plain http on a host that is
	// not loopback. The API key then crosses the network in clear.
	AllowInsecureHTTP bool
}

// Client is a [crux.Remote] over HTTP (see the package documentation). It
// is safe for concurrent use.
type Client struct {
	base    string          // scheme://host[:port][/path], no trailing slash
	key     *feature.Secret // behind a pointer, so printing a Client value shows no key
	hc      *http.Client
	timeout time.Duration
}

var _ crux.Remote = (*Client)(nil)

// New returns the client of the crux server at baseURL (http or https,
// with an optional path prefix: the requests go to baseURL/v1/sync/...),
// authenticating with apiKey, a replica's bearer token of that server's
// token table (an entry replica::NAME).
// An error says what is wrong with the URL or the key, without repeating
// the key.
func New(baseURL, apiKey string, opts *Options) (*Client, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	u, err := url.Parse(strings.TrimSpace(baseURL))
	switch {
	case err != nil:
		return nil, fmt.Errorf("syncremote: the remote URL is not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("syncremote: the remote URL must be http or https, not %q", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return nil, errors.New("syncremote: the remote URL names no host")
	case u.User != nil:
		return nil, errors.New("syncremote: the remote URL holds user information; the API key is given apart from it")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, errors.New("syncremote: the remote URL must have no query or fragment")
	case u.Scheme == "http" && !loopback.Host(u.Hostname()) && !o.AllowInsecureHTTP:
		return nil, fmt.Errorf("syncremote: the remote URL is plain http to %s, which is not loopback: the API key would cross the network in clear; use https", u.Hostname())
	}
	if err := checkKey(apiKey); err != nil {
		return nil, err
	}
	hc := &http.Client{}
	if o.HTTPClient != nil {
		c := *o.HTTPClient
		hc = &c
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	switch {
	case o.Timeout == 0:
		o.Timeout = DefaultTimeout
	case o.Timeout < 0:
		o.Timeout = 0
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	secret := feature.Secret(apiKey)
	return &Client{base: u.String(), key: &secret, hc: hc, timeout: o.Timeout}, nil
}

// checkKey checks that key can be sent as a bearer token: not empty, at
// most 4096 bytes, printable ASCII without spaces. The error never holds
// the key.
func checkKey(key string) error {
	if key == "" {
		return errors.New("syncremote: the API key is empty")
	}
	if len(key) > 4096 {
		return errors.New("syncremote: the API key is longer than 4096 bytes")
	}
	for i := 0; i < len(key); i++ {
		if key[i] <= ' ' || key[i] >= 0x7f {
			return fmt.Errorf("syncremote: the API key holds a space, a control or a non-ASCII byte at position %d", i+1)
		}
	}
	return nil
}

// URL returns the base URL the client sends to.
func (c *Client) URL() string { return c.base }

// String names the client by its URL; it never shows the key.
func (c *Client) String() string { return "syncremote.Client(" + c.base + ")" }

// Identity asks the remote for its name (POST /v1/sync/identity).
func (c *Client) Identity(ctx context.Context) (crux.RemoteIdentity, error) {
	var out crux.RemoteIdentity
	err := c.post(ctx, PathIdentity, struct{}{}, &out)
	return out, err
}

// Changes asks the remote for a page of its change log (POST
// /v1/sync/changes).
func (c *Client) Changes(ctx context.Context, req crux.ChangesRequest) (*crux.ChangesResponse, error) {
	out := &crux.ChangesResponse{}
	if err := c.post(ctx, PathChanges, req, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Push sends a batch of versions for the remote to apply (POST
// /v1/sync/push).
func (c *Client) Push(ctx context.Context, req crux.PushRequest) (*crux.PushResponse, error) {
	out := &crux.PushResponse{}
	if err := c.post(ctx, PathPush, req, out); err != nil {
		return nil, err
	}
	return out, nil
}

// post sends in as the JSON body of a POST to path and decodes the answer
// into out.
func (c *Client) post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("syncremote: encoding the request: %w", err)
	}
	if len(body) > MaxBodyBytes {
		return &crux.Error{Code: crux.CodeInvalidRequest,
			Message: fmt.Sprintf("syncremote: a request of %d bytes, more than the %d a remote takes", len(body), MaxBodyBytes)}
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	target := c.base + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("syncremote: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.key.Reveal())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("syncremote: %w", err) // a *url.Error: method, URL and cause, no header
	}
	defer func() {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody)) // let the connection be reused
		resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return responseError(target, resp)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return fmt.Errorf("syncremote: POST %s: reading the answer: %w", target, err)
	}
	if len(b) > MaxBodyBytes {
		return fmt.Errorf("syncremote: POST %s: an answer of more than %d bytes", target, MaxBodyBytes)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("syncremote: POST %s: the answer is not the JSON of a sync answer: %w", target, err)
	}
	return nil
}

// responseError is the error of an answer other than 200.
func responseError(target string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var eb ErrorBody
	if json.Unmarshal(b, &eb) == nil && eb.Error != nil && eb.Error.Code != 0 {
		e := &crux.Error{Code: eb.Error.Code, Message: cleanMessage(eb.Error.Message)}
		if len(eb.Error.Data) > 0 && string(eb.Error.Data) != "null" {
			e.Data = eb.Error.Data
		}
		return e
	}
	status := resp.StatusCode
	what := fmt.Sprintf("POST %s: HTTP %d", target, status)
	if text := cleanMessage(firstLine(b)); text != "" {
		what += ": " + text
	}
	data := map[string]any{"status": status}
	switch {
	case status >= 300 && status < 400:
		return fmt.Errorf("syncremote: %s, a redirect to %q, which sync does not follow: give the URL it points to", what, cleanMessage(resp.Header.Get("Location")))
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		data["reason"] = "unauthorized"
		return &crux.Error{Code: crux.CodeForbidden, Message: "syncremote: the remote refused the request: " + what, Data: data}
	case status == http.StatusNotFound:
		return fmt.Errorf("syncremote: %s: the remote serves no crux sync there", what)
	case status >= 400 && status < 500:
		return &crux.Error{Code: crux.CodeInvalidRequest, Message: "syncremote: the remote refused the request: " + what, Data: data}
	}
	return fmt.Errorf("syncremote: %s", what)
}

// firstLine is the first line of b.
func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

// cleanMessage bounds a message from the remote and removes what could
// disturb a log or a terminal: control characters and invalid UTF-8.
func cleanMessage(s string) string {
	if len(s) > maxErrorMessage {
		s = s[:maxErrorMessage] + "..."
	}
	s = strings.ToValidUTF8(s, "?")
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s))
}

// ErrorBody is the body of a sync answer that is not a success:
// {"error": {"code", "message", "data"?}}.
type ErrorBody struct {
	Error *WireError `json:"error"`
}

// WireError is the error of an [ErrorBody]: a crux JSON-RPC code, its
// message and data.
type WireError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// HTTPStatus is the HTTP status of an answer failing with the crux error
// code, as the sync API and the web view (package web) answer it: 400 for -32700, -32600 and -32602, 403 for -32003 and
// -32030, 409 for -32004, 404 for -32601, 500 for the rest.
func HTTPStatus(code int) int {
	switch code {
	case crux.CodeParseError, crux.CodeInvalidRequest, crux.CodeInvalidParams:
		return http.StatusBadRequest
	case crux.CodeForbidden, crux.CodeCapabilityDenied:
		return http.StatusForbidden
	case crux.CodeConflict:
		return http.StatusConflict
	case crux.CodeMethodNotFound:
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// WriteError answers a sync request with e: its HTTP status (see
// [HTTPStatus]) unless status is not zero, and the [ErrorBody].
func WriteError(w http.ResponseWriter, status int, e *crux.Error) {
	if status == 0 {
		status = HTTPStatus(e.Code)
	}
	we := &WireError{Code: e.Code, Message: e.Message}
	if e.Data != nil {
		if d, err := json.Marshal(e.Data); err == nil {
			we.Data = d
		}
	}
	b, _ := json.Marshal(ErrorBody{Error: we})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// WriteJSON answers a sync request with 200 and v as JSON.
func WriteJSON(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(append(b, '\n'))
	return err
}

// ReadRequest decodes the JSON body of a sync request into v. It refuses,
// with the *crux.Error and the HTTP status to answer, a method other than
// POST (405), a Content-Type other than application/json (415: a browser
// cannot send that cross-origin without a preflight), a body of more than
// MaxBodyBytes (413) and a body that is not one JSON value of v's shape
// (400).
func ReadRequest(w http.ResponseWriter, r *http.Request, v any) (int, *crux.Error) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return http.StatusMethodNotAllowed, &crux.Error{Code: crux.CodeInvalidRequest, Message: "sync: " + r.Method + " is not allowed; sync requests are POST"}
	}
	if mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); !strings.EqualFold(strings.TrimSpace(mt), "application/json") {
		return http.StatusUnsupportedMediaType, &crux.Error{Code: crux.CodeInvalidRequest, Message: "sync: the body must be application/json"}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return http.StatusRequestEntityTooLarge, &crux.Error{Code: crux.CodeInvalidRequest,
				Message: fmt.Sprintf("sync: the body is larger than %d bytes", MaxBodyBytes)}
		}
		return http.StatusBadRequest, &crux.Error{Code: crux.CodeParseError, Message: "sync: the body is not a JSON request: " + cleanMessage(err.Error())}
	}
	if _, err := dec.Token(); err != io.EOF {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return http.StatusRequestEntityTooLarge, &crux.Error{Code: crux.CodeInvalidRequest,
				Message: fmt.Sprintf("sync: the body is larger than %d bytes", MaxBodyBytes)}
		}
		return http.StatusBadRequest, &crux.Error{Code: crux.CodeParseError, Message: "sync: the body holds more than one JSON value"}
	}
	return 0, nil
}
