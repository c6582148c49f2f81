package web_test

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
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

var _ = json.Marshal
var _ = crux.DefaultTenant
