package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/tools"
	"github.com/crux-go/crux/web"
)

var (
	alice = crux.Caller{Agent: "alice", Authenticated: true}
	bob   = crux.Caller{Agent: "bob", Authenticated: true}
	// root is the tests' operator of the view (see isOperator).
	root = crux.Caller{Agent: "root", Authenticated: true}
)

// tokens is the token table of the tests.
var tokens = map[string]crux.Caller{"alice-token": alice, "bob-token": bob, "root-token": root}

// isOperator is the tests' Options.IsOperator: root is the operator.
func isOperator(c crux.Caller) bool { return c.Authenticated && c.Agent == "root" }

func lookup(t string) (crux.Caller, bool) { c, ok := tokens[t]; return c, ok }

// fixture is a server filled through the tools and the view over it.
type fixture struct {
	db  *bolt.DB
	srv *crux.Server
	ts  *httptest.Server
}

// call runs a tool for c and decodes its output.
func call[T any](t *testing.T, srv *crux.Server, c crux.Caller, name string, args any) T {
	t.Helper()
	b, err := json.Marshal(args)
	require.NoError(t, err)
	res, err := srv.CallTool(context.Background(), c, name, b)
	require.NoError(t, err)
	out, err := crux.Decode[T](res)
	require.NoError(t, err, "%s: %+v", name, res)
	return out
}

// newFixture fills a store: alice's shared fact about the project's
// language in three versions, a licence fact, and bob's private secret.
func newFixture(t *testing.T, lookup func(string) (crux.Caller, bool)) *fixture {
	t.Helper()
	return newFixtureWith(t, lookup, nil)
}

// newFixtureWith is newFixture with the view's options changed by edit.
func newFixtureWith(t *testing.T, lookup func(string) (crux.Caller, bool), edit func(*web.Options)) *fixture {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "crux.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	srv, err := crux.NewServer(db, nil)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	for _, v := range []string{"C", "Rust", "Go"} {
		call[tools.StoreFactOutput](t, srv, alice, "store_fact", map[string]any{"entity": "project:crux", "key": "language", "value": v})
	}
	call[tools.StoreFactOutput](t, srv, alice, "store_fact", map[string]any{"entity": "project:crux", "key": "license", "value": "Apache-2.0"})
	call[tools.StoreFactOutput](t, srv, bob, "store_fact", map[string]any{"entity": "project:crux", "key": "secret", "value": "bobs-hidden-passphrase", "private": true})
	opts := &web.Options{Lookup: lookup, TokenInURL: true, IsOperator: isOperator, Operator: srv, Ledger: web.NewStoreLedger(db, srv.Keyring(), nil)}
	if edit != nil {
		edit(opts)
	}
	h := web.New(srv, opts)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return &fixture{db: db, srv: srv, ts: ts}
}

// get fetches path with the bearer token (none when empty) and the
// Accept header.
func (f *fixture) get(t *testing.T, path, token, accept string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.ts.URL+path, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := f.ts.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, string(b)
}

func TestFactsJSONTwinIsQueryFacts(t *testing.T) {
	f := newFixture(t, lookup)
	code, hd, body := f.get(t, "/ui/?q=language&format=json", "alice-token", "")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "application/json", hd.Get("Content-Type"))
	var p web.FactsPage
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	want := call[tools.QueryFactsOutput](t, f.srv, alice, "query_facts", map[string]any{"query": "language", "top_k": 21})
	require.Equal(t, want.Rows, p.Rows, "the page's rows are query_facts's, in its order")
	require.NotEmpty(t, p.Rows)
	require.Equal(t, "Go", p.Rows[0].Value)

	// Accept: application/json asks for the same twin.
	code, _, body2 := f.get(t, "/ui/?q=language", "alice-token", "application/json")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, body, body2)
}

func TestFactsPaged(t *testing.T) {
	f := newFixture(t, lookup)
	for i := range 5 {
		call[tools.StoreFactOutput](t, f.srv, alice, "store_fact", map[string]any{"entity": "page:test", "key": "k" + string(rune('a'+i)), "value": "v"})
	}
	seen := map[string]bool{}
	path := "/ui/?entity=page:test&per_page=2&format=json"
	for pages := 0; path != ""; pages++ {
		require.Less(t, pages, 3, "five facts at two a page are three pages")
		code, _, body := f.get(t, path, "alice-token", "")
		require.Equal(t, http.StatusOK, code, body)
		var p web.FactsPage
		require.NoError(t, json.Unmarshal([]byte(body), &p))
		require.LessOrEqual(t, len(p.Rows), 2)
		for _, r := range p.Rows {
			require.False(t, seen[r.FactID], "a fact on two pages")
			seen[r.FactID] = true
		}
		path = ""
		if p.Next != "" {
			path = p.Next + "&format=json"
		}
	}
	require.Len(t, seen, 5)

	for _, bad := range []string{"per_page=0", "per_page=101", "page=-1", "page=1000", "per_page=x"} {
		code, _, body := f.get(t, "/ui/?format=json&"+bad, "alice-token", "")
		require.Equal(t, http.StatusBadRequest, code, bad)
		require.Contains(t, body, `"code": -32602`, bad)
	}
}

func TestFactPageJSONTwinIsFactHistory(t *testing.T) {
	f := newFixture(t, lookup)
	code, _, body := f.get(t, "/ui/fact?entity=project:crux&key=language&format=json", "alice-token", "")
	require.Equal(t, http.StatusOK, code, body)
	var p web.FactPage
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	want := call[tools.FactHistoryOutput](t, f.srv, alice, "fact_history", map[string]any{"entity": "project:crux", "key": "language", "limit": 20})
	require.Equal(t, want.Versions, p.Versions)
	require.Len(t, p.Versions, 3)
	require.NotNil(t, p.Current)
	require.Equal(t, "Go", p.Current.Value)
	for _, v := range p.Versions {
		require.Equal(t, "alice", v.WrittenBy, "who wrote each version")
	}

	// bob corrects it: his version names him, in the page too.
	call[tools.StoreFactOutput](t, f.srv, bob, "store_fact", map[string]any{"entity": "project:crux", "key": "language", "value": "Zig"})
	_, _, body = f.get(t, "/ui/fact?entity=project:crux&key=language", "alice-token", "")
	require.Contains(t, body, `<td class="value">Zig</td>
<td class="writer">bob</td>`)
	require.Contains(t, body, `<td class="value">Go</td>
<td class="writer">alice</td>`)
}

func TestAuthRefusals(t *testing.T) {
	f := newFixture(t, lookup)
	for _, path := range []string{"/ui/", "/ui/fact?entity=project:crux&key=language", "/ui/forgets/r_x"} {
		code, hd, body := f.get(t, path+"", "", "application/json")
		require.Equal(t, http.StatusUnauthorized, code, path)
		require.Equal(t, `Bearer realm="crux"`, hd.Get("WWW-Authenticate"))
		require.Contains(t, body, "unauthenticated")
		require.NotContains(t, body, "Go")

		code, hd, _ = f.get(t, path, "wrong-token", "")
		require.Equal(t, http.StatusUnauthorized, code, path)
		require.Contains(t, hd.Get("WWW-Authenticate"), `error="invalid_token"`)
	}
	// The sign-in page itself needs no token.
	code, _, body := f.get(t, "/ui/signin", "", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `name="token"`)
}

func TestAnotherAgentsPrivateFactIsOnNoPage(t *testing.T) {
	f := newFixture(t, lookup)
	for _, path := range []string{"/ui/", "/ui/?q=secret+passphrase", "/ui/?entity=project:crux", "/ui/?superseded=1",
		"/ui/fact?entity=project:crux&key=secret"} {
		for _, format := range []string{"", "&format=json"} {
			p := path + format
			if !strings.Contains(path, "?") && format != "" {
				p = path + "?format=json"
			}
			_, _, body := f.get(t, p, "alice-token", "")
			require.NotContains(t, body, "bobs-hidden-passphrase", p)
		}
	}
	code, _, _ := f.get(t, "/ui/fact?entity=project:crux&key=secret", "alice-token", "")
	require.Equal(t, http.StatusNotFound, code)
	// bob sees his own.
	_, _, body := f.get(t, "/ui/fact?entity=project:crux&key=secret", "bob-token", "")
	require.Contains(t, body, "bobs-hidden-passphrase")
}

// browser is a client with a cookie jar, signed in with token.
func (f *fixture) browser(t *testing.T, token string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(f.ts.URL + "/ui/signin?token=" + url.QueryEscape(token))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "/ui/", resp.Request.URL.Path, "the sign-in goes on to the facts")
	return c
}

// csrfOf is the CSRF token in a page.
func csrfOf(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	_, rest, ok := strings.Cut(string(b), `name="csrf" value="`)
	require.True(t, ok, "no CSRF token in %s", u)
	tok, _, _ := strings.Cut(rest, `"`)
	return tok
}

func TestOneTimeTokenAndCSRF(t *testing.T) {
	token, once := web.OneTimeToken(alice)
	f := newFixture(t, once)
	c := f.browser(t, token)

	// The token is spent.
	code, _, _ := f.get(t, "/ui/signin?token="+token, "", "")
	require.Equal(t, http.StatusUnauthorized, code)

	// The cookie serves the pages.
	resp, err := c.Get(f.ts.URL + "/ui/?q=license&format=json")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(b), "Apache-2.0")

	factURL := f.ts.URL + "/ui/fact?entity=project:crux&key=license"
	form := url.Values{"entity": {"project:crux"}, "key": {"license"}, "value": {"MIT"}}
	// Without the CSRF token a change is refused, and nothing is written.
	resp, err = c.PostForm(f.ts.URL+"/ui/edit", form)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	// From another origin too, even with it.
	form.Set("csrf", csrfOf(t, c, factURL))
	req, _ := http.NewRequest(http.MethodPost, f.ts.URL+"/ui/edit", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	resp, err = c.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	got := call[tools.QueryFactsOutput](t, f.srv, alice, "query_facts", map[string]any{"entity": "project:crux", "key": "license"})
	require.Equal(t, "Apache-2.0", got.Rows[0].Value)

	// With it the edit is store_fact's new version.
	resp, err = c.PostForm(f.ts.URL+"/ui/edit", form)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got = call[tools.QueryFactsOutput](t, f.srv, alice, "query_facts", map[string]any{"entity": "project:crux", "key": "license"})
	require.Equal(t, "MIT", got.Rows[0].Value)
	require.Equal(t, uint32(2), got.Rows[0].Version)
}

func TestForgetAndRestoreJSON(t *testing.T) {
	f := newFixture(t, lookup)
	post := func(path, token string, form url.Values) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, f.ts.URL+path+"?format=json", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := f.ts.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post("/ui/forget", "alice-token", url.Values{"scope_type": {"entity_prefix"}, "scope_value": {"project:crux"}, "reason": {"test"}})
	require.Equal(t, http.StatusOK, code, body)
	var out tools.MemoryForgetOutput
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	require.Equal(t, 4, out.FactsAffected, "alice's four versions; bob's private fact is not hers")
	gone := call[tools.QueryFactsOutput](t, f.srv, alice, "query_facts", map[string]any{"entity": "project:crux"})
	require.Empty(t, gone.Rows)

	// Bob may neither see nor restore alice's forget.
	code, _, _ = f.get(t, "/ui/forgets/"+out.ForgetReceiptID, "bob-token", "application/json")
	require.Equal(t, http.StatusNotFound, code)
	code, _ = post("/ui/restore", "bob-token", url.Values{"receipt_id": {out.ForgetReceiptID}})
	require.Equal(t, http.StatusNotFound, code)

	code, _, body = f.get(t, "/ui/forgets/"+out.ForgetReceiptID, "alice-token", "application/json")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `"restorable": true`)
	code, body = post("/ui/restore", "alice-token", url.Values{"receipt_id": {out.ForgetReceiptID}})
	require.Equal(t, http.StatusOK, code, body)
	back := call[tools.QueryFactsOutput](t, f.srv, alice, "query_facts", map[string]any{"entity": "project:crux", "key": "language"})
	require.Equal(t, "Go", back.Rows[0].Value)
	// Once only.
	code, body = post("/ui/restore", "alice-token", url.Values{"receipt_id": {out.ForgetReceiptID}})
	require.Equal(t, http.StatusConflict, code, body)
}

func TestRefusalIsTheTools(t *testing.T) {
	f := newFixture(t, lookup)
	req, _ := http.NewRequest(http.MethodPost, f.ts.URL+"/ui/delete?format=json", strings.NewReader("fact_id=f_nope"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := f.ts.Client().Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	res, err := f.srv.CallTool(context.Background(), alice, "delete_fact", json.RawMessage(`{"fact_id":"f_nope"}`))
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, string(b), res.Content[0].Text)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestHostAndFraming(t *testing.T) {
	f := newFixture(t, lookup)
	req, _ := http.NewRequest(http.MethodGet, f.ts.URL+"/ui/", nil)
	req.Host = "evil.example:80"
	req.Header.Set("Authorization", "Bearer alice-token")
	resp, err := f.ts.Client().Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "a rebound DNS name on loopback")
	_, hd, _ := f.get(t, "/ui/", "alice-token", "")
	require.Equal(t, "DENY", hd.Get("X-Frame-Options"))
	require.Equal(t, "same-origin", hd.Get("Referrer-Policy"))
	require.Contains(t, hd.Get("Content-Security-Policy"), "frame-ancestors 'none'")
}

func TestFactsFilters(t *testing.T) {
	f := newFixture(t, lookup)
	call[tools.StoreFactOutput](t, f.srv, alice, "store_fact", map[string]any{"entity": "project:crux", "key": "mine", "value": "alice-only", "private": true})
	values := func(path string) []string {
		p := getJSON[web.FactsPage](t, f, path, "alice-token")
		var out []string
		for _, r := range p.Rows {
			out = append(out, r.Value)
		}
		return out
	}
	require.ElementsMatch(t, []string{"Go", "Apache-2.0", "alice-only"}, values("/ui/?entity=project:crux"))
	require.Equal(t, []string{"alice-only"}, values("/ui/?entity=project:crux&visibility=private"))
	require.ElementsMatch(t, []string{"Go", "Apache-2.0"}, values("/ui/?entity=project:crux&visibility=shared"))
	require.Empty(t, values("/ui/?entity=project:crux&stale=1"), "nothing is stale a moment after it was stored")
	call[tools.StoreFactOutput](t, f.srv, bob, "store_fact", map[string]any{"entity": "project:crux", "key": "owner", "value": "bob-shared"})
	require.Equal(t, []string{"bob-shared"}, values("/ui/?entity=project:crux&agent=bob"), "bob's shared fact, never his private one")
	require.ElementsMatch(t, []string{"Go", "Apache-2.0", "alice-only"}, values("/ui/?entity=project:crux&agent=alice"))
	require.Empty(t, values("/ui/?entity=project:crux&agent=carol"))
	code, _, _ := f.get(t, "/ui/?visibility=everyone", "alice-token", "application/json")
	require.Equal(t, http.StatusBadRequest, code)
}

func TestFactsStaleFilter(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "crux.db"), nil)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	srv, err := crux.NewServer(db, &crux.Options{Now: clock})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	old := call[tools.StoreFactOutput](t, srv, alice, "store_fact", map[string]any{"entity": "weather:today", "key": "sky", "value": "cloudy"})
	call[map[string]any](t, srv, alice, "memory_set_horizon", map[string]any{"fact_id": old.FactID, "horizon_class": "volatile"})
	mu.Lock()
	now = now.Add(48 * time.Hour)
	mu.Unlock()
	call[tools.StoreFactOutput](t, srv, alice, "store_fact", map[string]any{"entity": "weather:today", "key": "city", "value": "Leeds"})
	ts := httptest.NewServer(web.New(srv, &web.Options{Lookup: lookup}))
	t.Cleanup(ts.Close)
	f := &fixture{db: db, srv: srv, ts: ts}
	p := getJSON[web.FactsPage](t, f, "/ui/?entity=weather:today&stale=1", "alice-token")
	require.Len(t, p.Rows, 1)
	require.Equal(t, "cloudy", p.Rows[0].Value)
	require.True(t, p.Filtered)
	p = getJSON[web.FactsPage](t, f, "/ui/?entity=weather:today", "alice-token")
	require.Len(t, p.Rows, 2)
}

func TestAnonymousMode(t *testing.T) {
	f := newFixture(t, lookup)
	ts := httptest.NewServer(web.New(f.srv, &web.Options{Lookup: lookup, Anonymous: true}))
	t.Cleanup(ts.Close)
	g := &fixture{db: f.db, srv: f.srv, ts: ts}
	// A reader without a token is the anonymous caller: shared facts only.
	p := getJSON[web.FactsPage](t, g, "/ui/?entity=project:crux", "")
	require.NotEmpty(t, p.Rows)
	for _, r := range p.Rows {
		require.False(t, r.Private)
	}
	// A wrong token is still refused.
	code, _, _ := g.get(t, "/ui/", "wrong-token", "")
	require.Equal(t, http.StatusUnauthorized, code)
	// A change needs a session: without one it is refused, with an
	// anonymous one (and its CSRF token) it is the anonymous caller's.
	form := url.Values{"entity": {"anon:note"}, "key": {"k"}, "value": {"from nobody"}}
	resp, err := http.PostForm(ts.URL+"/ui/edit", form)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar}
	resp, err = c.PostForm(ts.URL+"/ui/signin", url.Values{"anonymous": {"1"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	form.Set("csrf", csrfOf(t, c, ts.URL+"/ui/fact?entity=project:crux&key=license"))
	resp, err = c.PostForm(ts.URL+"/ui/edit", form)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	h := call[tools.FactHistoryOutput](t, f.srv, alice, "fact_history", map[string]any{"entity": "anon:note", "key": "k"})
	require.Len(t, h.Versions, 1)
	require.Empty(t, h.Versions[0].WrittenBy, "written by the anonymous caller")

	// Without the option, no session can be had without a token.
	resp, err = http.PostForm(f.ts.URL+"/ui/signin", url.Values{"anonymous": {"1"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the sign-in form again")
	require.Empty(t, resp.Cookies())
}

// A long-lived token signs in from a POSTed form only; from the URL, where
// it would stay in the browser's history, only with TokenInURL.
func TestTokenInURLOnlyWhenAllowed(t *testing.T) {
	f := newFixture(t, lookup)
	ts := httptest.NewServer(web.New(f.srv, &web.Options{Lookup: lookup}))
	t.Cleanup(ts.Close)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	resp, err := noRedirect.Get(ts.URL + "/ui/signin?token=alice-token")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the sign-in form")
	require.Empty(t, resp.Cookies(), "no session from a token in the URL")

	resp, err = noRedirect.PostForm(ts.URL+"/ui/signin", url.Values{"token": {"alice-token"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.NotEmpty(t, resp.Cookies(), "a session from the form")

	resp, err = noRedirect.Get(f.ts.URL + "/ui/signin?token=alice-token")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "TokenInURL takes it")
}
