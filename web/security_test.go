package web_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/web"
)

// signinCookie signs in to ts with token (anonymously when empty) and
// returns the session cookie the answer sets, or the answer's status
// when it sets none.
func signinCookie(t *testing.T, ts *httptest.Server, token string, hd http.Header) (*http.Cookie, int) {
	t.Helper()
	form := url.Values{"token": {token}}
	if token == "" {
		form = url.Values{"anonymous": {"1"}}
	}
	req, err := http.NewRequest(http.MethodPost, ts.URL+"/ui/signin", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hd {
		req.Header[k] = v
	}
	c := ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if strings.HasPrefix(ck.Name, "crux_ui_") {
			return ck, resp.StatusCode
		}
	}
	return nil, resp.StatusCode
}

// withCookie fetches path of ts with the session cookie ck and returns the
// status.
func withCookie(t *testing.T, ts *httptest.Server, path string, ck *http.Cookie) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.URL+path, nil)
	require.NoError(t, err)
	req.AddCookie(ck)
	req.Header.Set("Accept", "application/json")
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// One caller signing in again and again ends only its own sessions, never
// another caller's, whatever the bounds.
func TestSessionsBoundedPerCaller(t *testing.T) {
	f := newFixture(t, lookup)
	ts := httptest.NewServer(web.New(f.srv, &web.Options{Lookup: lookup}))
	t.Cleanup(ts.Close)
	bobs, code := signinCookie(t, ts, "bob-token", nil)
	require.NotNil(t, bobs, "status %d", code)
	first, _ := signinCookie(t, ts, "alice-token", nil)
	for range 300 {
		ck, code := signinCookie(t, ts, "alice-token", nil)
		require.NotNil(t, ck, "status %d", code)
	}
	require.Equal(t, http.StatusOK, withCookie(t, ts, "/ui/", bobs), "bob's session outlives alice's 300 sign-ins")
	require.Equal(t, http.StatusUnauthorized, withCookie(t, ts, "/ui/", first), "alice's first session made room for her later ones")
}

// Past the bound of all sessions together a sign-in is refused, and no
// one's session ends for it.
func TestSessionsGlobalBoundRefuses(t *testing.T) {
	f := newFixture(t, lookup)
	ts := httptest.NewServer(web.New(f.srv, &web.Options{Lookup: lookup, Anonymous: true, MaxSessions: 2, MaxSessionsPerCaller: 1}))
	t.Cleanup(ts.Close)
	alices, _ := signinCookie(t, ts, "alice-token", nil)
	bobs, _ := signinCookie(t, ts, "bob-token", nil)
	require.NotNil(t, alices)
	require.NotNil(t, bobs)
	anon, code := signinCookie(t, ts, "", nil)
	require.Nil(t, anon)
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, http.StatusOK, withCookie(t, ts, "/ui/", alices))
	require.Equal(t, http.StatusOK, withCookie(t, ts, "/ui/", bobs))
	// A caller at its own bound still signs in: its older session ends.
	again, _ := signinCookie(t, ts, "alice-token", nil)
	require.NotNil(t, again)
	require.Equal(t, http.StatusUnauthorized, withCookie(t, ts, "/ui/", alices))
	require.Equal(t, http.StatusOK, withCookie(t, ts, "/ui/", again))
	require.Equal(t, http.StatusOK, withCookie(t, ts, "/ui/", bobs))
}

// Two views on one host name their cookies apart: signing in to one does
// not replace the other's session.
func TestCookieNamePerHandler(t *testing.T) {
	f := newFixture(t, lookup)
	h1 := web.New(f.srv, &web.Options{Lookup: lookup})
	h2 := web.New(f.srv, &web.Options{Lookup: lookup})
	require.NotEqual(t, h1.CookieName(), h2.CookieName())
	require.True(t, strings.HasPrefix(h1.CookieName(), "crux_ui_"))
	ts1, ts2 := httptest.NewServer(h1), httptest.NewServer(h2)
	t.Cleanup(ts1.Close)
	t.Cleanup(ts2.Close)
	c1, _ := signinCookie(t, ts1, "alice-token", nil)
	c2, _ := signinCookie(t, ts2, "bob-token", nil)
	require.Equal(t, h1.CookieName(), c1.Name)
	require.Equal(t, h2.CookieName(), c2.Name)
	require.NotEqual(t, c1.Name, c2.Name, "a browser keeps both: cookies do not tell ports apart")
}

// The session cookie is Secure over TLS, and behind a TLS-terminating
// proxy when the view trusts its X-Forwarded-Proto; never on the word of
// a header the view does not trust.
func TestCookieSecure(t *testing.T) {
	f := newFixture(t, lookup)
	proto := http.Header{"X-Forwarded-Proto": {"https"}}

	plain := httptest.NewServer(web.New(f.srv, &web.Options{Lookup: lookup}))
	t.Cleanup(plain.Close)
	ck, _ := signinCookie(t, plain, "alice-token", nil)
	require.False(t, ck.Secure)
	ck, _ = signinCookie(t, plain, "alice-token", proto)
	require.False(t, ck.Secure, "X-Forwarded-Proto is not trusted without TrustForwardedProto")

	proxied := httptest.NewServer(web.New(f.srv, &web.Options{Lookup: lookup, TrustForwardedProto: true}))
	t.Cleanup(proxied.Close)
	ck, _ = signinCookie(t, proxied, "alice-token", proto)
	require.True(t, ck.Secure)
	ck, _ = signinCookie(t, proxied, "alice-token", http.Header{"X-Forwarded-Proto": {"http"}})
	require.False(t, ck.Secure)
	ck, _ = signinCookie(t, proxied, "alice-token", nil)
	require.False(t, ck.Secure)

	tlsts := httptest.NewUnstartedServer(web.New(f.srv, &web.Options{Lookup: lookup}))
	tlsts.TLS = &tls.Config{}
	tlsts.StartTLS()
	t.Cleanup(tlsts.Close)
	ck, _ = signinCookie(t, tlsts, "alice-token", nil)
	require.True(t, ck.Secure)
}

// receiptActors is the actors of the rows of a receipts page.
func receiptActors(p web.ChainPage) map[string]int {
	out := map[string]int{}
	for _, r := range p.Rows {
		out[r.Actor]++
	}
	return out
}

// A caller sees the receipts it acted in, not the tenant's; an operator
// sees them all; an anonymous caller none.
func TestReceiptsOwnUnlessOperator(t *testing.T) {
	f := newFixtureWith(t, lookup, func(o *web.Options) { o.Anonymous = true })
	forgetSome(t, f, "chain:a")
	call[map[string]any](t, f.srv, bob, "record_decision", map[string]any{"action": "ship", "rationale": "ready"})
	p := chainPage(t, f, "/ui/receipts", "alice-token")
	require.Equal(t, "alice", p.Actor)
	require.NotEmpty(t, p.Rows)
	require.Equal(t, map[string]int{"alice": len(p.Rows)}, receiptActors(p), "alice's receipts only")
	for _, r := range p.Rows {
		require.True(t, r.OK(), "%+v", r)
	}
	p = chainPage(t, f, "/ui/receipts", "bob-token")
	require.Equal(t, map[string]int{"bob": len(p.Rows)}, receiptActors(p))
	require.NotEmpty(t, p.Rows, "bob's decision")

	all := chainPage(t, f, "/ui/receipts", "root-token")
	require.Empty(t, all.Actor)
	require.True(t, all.Operator)
	got := receiptActors(all)
	require.Positive(t, got["alice"])
	require.Positive(t, got["bob"])
	require.Len(t, all.Rows, len(chainIDs(t, f.db, crux.DefaultTenant)))

	// Anonymous: refused, not shown the tenant's.
	code, _, body := f.get(t, "/ui/receipts", "", "application/json")
	require.Equal(t, http.StatusForbidden, code, body)
	require.NotContains(t, body, `"actor": "alice"`)
	// The HTML page offers the audit to the operator only.
	_, _, html := f.get(t, "/ui/receipts", "alice-token", "")
	require.NotContains(t, html, `id="audit-link"`)
	_, _, html = f.get(t, "/ui/receipts", "root-token", "")
	require.Contains(t, html, `id="audit-link"`)
}

// The audit of the whole chain is an operator's.
func TestAuditOnlyForOperators(t *testing.T) {
	f := newFixture(t, lookup)
	forgetSome(t, f, "chain:a")
	code, _, body := f.get(t, "/ui/receipts?audit=1", "alice-token", "application/json")
	require.Equal(t, http.StatusForbidden, code, body)
	require.Contains(t, body, "operator")
	p := chainPage(t, f, "/ui/receipts?audit=1", "root-token")
	require.NotNil(t, p.Audit)
	require.True(t, p.Audit.OK())
	code, _, _ = f.get(t, "/ui/receipts?audit=yes", "root-token", "application/json")
	require.Equal(t, http.StatusBadRequest, code, "audit takes 1 or nothing")
}

// A page of one caller's receipts reads at most MaxChainScan receipts,
// says when it stopped short, and its next page goes on from there.
func TestReceiptsOwnScanBounded(t *testing.T) {
	f := newFixture(t, lookup)
	forgetSome(t, f, "chain:old") // alice's, deep in the chain
	mine := 0
	for _, r := range chainPage(t, f, "/ui/receipts", "alice-token").Rows {
		if r.Actor == "alice" {
			mine++
		}
	}
	// Bob's receipts bury alice's below MaxChainScan.
	head := len(chainIDs(t, f.db, crux.DefaultTenant))
	for i := 0; head < web.MaxChainScan+10; i++ {
		call[map[string]any](t, f.srv, bob, "record_decision", map[string]any{"action": "a" + strconv.Itoa(i), "rationale": "r"})
		head++
	}
	p := chainPage(t, f, "/ui/receipts", "alice-token")
	require.Empty(t, p.Rows)
	require.True(t, p.Truncated)
	require.Equal(t, uint64(head-web.MaxChainScan+1), p.ScannedFrom)
	require.NotEmpty(t, p.Next)
	p = chainPage(t, f, p.Next, "alice-token")
	require.Len(t, p.Rows, mine, "the next page finds them")
	require.False(t, p.Truncated)
	require.Empty(t, p.Next)
}

// postAs posts form to path of ts with the session cookie ck (and its
// CSRF token), asking for JSON, and returns the status and body.
func postAs(t *testing.T, ts *httptest.Server, path string, ck *http.Cookie, form url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, ts.URL+"/ui/fact?entity=project:crux&key=license", nil)
	require.NoError(t, err)
	req.AddCookie(ck)
	resp, err := ts.Client().Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_, rest, ok := strings.Cut(string(b), `name="csrf" value="`)
	require.True(t, ok, "no CSRF token: %s", b)
	csrf, _, _ := strings.Cut(rest, `"`)
	form.Set("csrf", csrf)
	req, err = http.NewRequest(http.MethodPost, ts.URL+path+"?format=json", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(ck)
	resp, err = ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ = io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A forget is restored by the agent that made it, or an operator: never
// by another anonymous caller, who cannot be told apart from the one
// that forgot.
func TestRestoreOnlyByWhoForgotOrOperator(t *testing.T) {
	f := newFixtureWith(t, lookup, func(o *web.Options) { o.Anonymous = true })
	call[map[string]any](t, f.srv, crux.Caller{}, "store_fact", map[string]any{"entity": "anon:shared", "key": "k", "value": "v"})
	one, _ := signinCookie(t, f.ts, "", nil)
	other, _ := signinCookie(t, f.ts, "", nil)
	require.NotNil(t, one)
	require.NotNil(t, other)
	code, body := postAs(t, f.ts, "/ui/forget", one, url.Values{"scope_type": {"entity_prefix"}, "scope_value": {"anon:shared"}, "reason": {"r"}})
	require.Equal(t, http.StatusOK, code, body)
	var out struct {
		ForgetReceiptID string `json:"forget_receipt_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	require.NotEmpty(t, out.ForgetReceiptID)

	for _, ck := range []*http.Cookie{other, one} {
		code, body = postAs(t, f.ts, "/ui/restore", ck, url.Values{"receipt_id": {out.ForgetReceiptID}})
		require.Equal(t, http.StatusNotFound, code, "an anonymous caller restores no forget: %s", body)
		require.Equal(t, http.StatusNotFound, withCookie(t, f.ts, "/ui/forgets/"+out.ForgetReceiptID, ck))
	}
	list := getJSON[web.ForgetsPage](t, f, "/ui/forgets", "")
	require.Empty(t, list.Forgets, "no forget is an anonymous caller's own")

	// Alice's forget: bob may not restore it, an operator may.
	forgetSome(t, f, "chain:alice")
	mine := getJSON[web.ForgetsPage](t, f, "/ui/forgets", "alice-token")
	require.Len(t, mine.Forgets, 1)
	require.Empty(t, getJSON[web.ForgetsPage](t, f, "/ui/forgets", "bob-token").Forgets)
	all := getJSON[web.ForgetsPage](t, f, "/ui/forgets", "root-token")
	require.True(t, all.AllOfTenant)
	require.Len(t, all.Forgets, 2, "the operator sees the anonymous forget and alice's")
	req := func(token, id string) int {
		r, _ := http.NewRequest(http.MethodPost, f.ts.URL+"/ui/restore?format=json", strings.NewReader(url.Values{"receipt_id": {id}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Authorization", "Bearer "+token)
		resp, err := f.ts.Client().Do(r)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	aliceForget := mine.Forgets[0].ForgetReceiptID
	require.Equal(t, http.StatusNotFound, req("bob-token", aliceForget))
	require.Equal(t, http.StatusOK, req("root-token", aliceForget))
	require.Equal(t, http.StatusOK, req("root-token", out.ForgetReceiptID))
	back := call[map[string]any](t, f.srv, crux.Caller{}, "query_facts", map[string]any{"entity": "anon:shared"})
	require.NotEmpty(t, back["rows"])
}

// scanLedger records the bound the forgets page asks of the Ledger.
type scanLedger struct {
	web.Ledger
	scans []int
}

func (l *scanLedger) Forgets(ctx context.Context, tenant string, limit, scan int) (*web.ForgetList, error) {
	l.scans = append(l.scans, scan)
	return l.Ledger.Forgets(ctx, tenant, limit, scan)
}

// The forgets page reads a bounded part of the chain, and says when the
// bound stopped it.
func TestForgetsScanBounded(t *testing.T) {
	f := newFixture(t, lookup)
	forgetSome(t, f, "chain:old")
	for i := range 5 {
		call[map[string]any](t, f.srv, bob, "record_decision", map[string]any{"action": "a" + strconv.Itoa(i), "rationale": "r"})
	}
	l := web.NewStoreLedger(f.db, f.srv.Keyring(), nil)
	list, err := l.Forgets(context.Background(), crux.DefaultTenant, web.MaxForgets, 3)
	require.NoError(t, err)
	require.Empty(t, list.Forgets)
	require.True(t, list.ScanStopped)
	list, err = l.Forgets(context.Background(), crux.DefaultTenant, web.MaxForgets, 0)
	require.NoError(t, err)
	require.Len(t, list.Forgets, 1, "without a bound the whole chain is read")
	require.False(t, list.ScanStopped)

	sl := &scanLedger{Ledger: l}
	ts := httptest.NewServer(web.New(f.srv, &web.Options{Lookup: lookup, Ledger: sl}))
	t.Cleanup(ts.Close)
	g := &fixture{db: f.db, srv: f.srv, ts: ts}
	p := getJSON[web.ForgetsPage](t, g, "/ui/forgets", "alice-token")
	require.Equal(t, []int{web.MaxForgetScan}, sl.scans)
	require.Len(t, p.Forgets, 1)
	require.False(t, p.Truncated)
}

// Every request of a caller passes Options.Admit, and is ended once
// answered; a refusal is a 429.
func TestAdmitCountsTheViewsRequests(t *testing.T) {
	var mu sync.Mutex
	inFlight, ended := map[string]int{}, 0
	f := newFixtureWith(t, lookup, func(o *web.Options) {
		o.Admit = func(c crux.Caller) (func(), *crux.Error) {
			mu.Lock()
			defer mu.Unlock()
			if c.Agent == "bob" {
				return nil, &crux.Error{Code: -32000, Message: "Too Many Requests", Data: map[string]any{"reason": "requests_per_caller", "limit": 1}}
			}
			inFlight[c.Name()]++
			return func() {
				mu.Lock()
				defer mu.Unlock()
				inFlight[c.Name()]--
				ended++
			}, nil
		}
	})
	code, _, body := f.get(t, "/ui/?q=language", "alice-token", "application/json")
	require.Equal(t, http.StatusOK, code, body)
	code, hd, body := f.get(t, "/ui/", "bob-token", "application/json")
	require.Equal(t, http.StatusTooManyRequests, code, body)
	require.Equal(t, "1", hd.Get("Retry-After"))
	require.Contains(t, body, "requests_per_caller")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, 1, ended)
	require.Equal(t, 0, inFlight["alice"])
}
