package syncremote_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/receipttest"
	"github.com/crux-go/crux/mcpserver"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/syncremote"
)

var (
	start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	alice = crux.Caller{Agent: "alice", Authenticated: true}
	bob   = crux.Caller{Agent: "bob", Authenticated: true}
	anon  = crux.Caller{}
)

// The bearer tokens each replica holds on the other.
const (
	tokenA = "replica-a-token-0123456789" // a's key on b
	tokenB = "replica-b-token-0123456789" // b's key on a
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// replica is a crux server over a store of its own, served over HTTP (MCP
// and sync) by an httptest server, syncing with a remote set later.
type replica struct {
	srv    *crux.Server
	db     *bolt.DB
	clk    *clock
	http   *httptest.Server
	signer *receipts.Ed25519Signer
	log    *syncBuffer
	remote *lateRemote
}

// lateRemote lets two replicas be made before each knows the other's URL.
type lateRemote struct{ crux.Remote }

// URL is the URL of the remote set, for sync_status.
func (l *lateRemote) URL() string {
	if u, ok := l.Remote.(interface{ URL() string }); ok {
		return u.URL()
	}
	return ""
}

func newSigner(t testing.TB) *receipts.Ed25519Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	return receipts.NewEd25519Signer(priv)
}

// newReplica makes a replica whose HTTP endpoint takes tokens (a table).
func newReplica(t *testing.T, tokens string, opts ...func(*crux.Options)) *replica {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	r := &replica{db: db, clk: &clock{t: start}, signer: newSigner(t), log: &syncBuffer{}, remote: &lateRemote{}}
	o := &crux.Options{Now: r.clk.Now, Signer: r.signer, Remote: r.remote}
	for _, f := range opts {
		f(o)
	}
	r.srv, err = crux.NewServer(db, o)
	require.NoError(t, err)
	t.Cleanup(func() { r.srv.Close() })
	tok, err := mcpserver.ParseTokens(tokens)
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(r.log, nil))
	h := mcpserver.NewHTTPHandler(mcpserver.Local(r.srv), &mcpserver.HTTPOptions{Tokens: tok, Options: mcpserver.Options{Logger: logger}})
	r.http = httptest.NewServer(h)
	t.Cleanup(r.http.Close)
	return r
}

// syncWith points r's remote at o's HTTP endpoint with key.
func (r *replica) syncWith(t *testing.T, o *replica, key string) *syncremote.Client {
	t.Helper()
	c, err := syncremote.New(o.http.URL, key, nil)
	require.NoError(t, err)
	r.remote.Remote = c
	return c
}

// withPassport gives c a passport on r earned by n receipts (10 makes
// basic, 100 established).
func (r *replica) withPassport(t *testing.T, c crux.Caller, n int) {
	t.Helper()
	require.NoError(t, r.db.Update(context.Background(), func(tx store.Tx) error {
		if err := store.PutPassport(tx, &store.Passport{PrincipalID: c.Agent, Tenant: crux.DefaultTenant, Tier: store.TierUnverified, IssuedAt: start}); err != nil {
			return err
		}
		return receipttest.Earn(tx, r.signer, crux.DefaultTenant, c.Agent, n, start)
	}))
}

func call(t *testing.T, srv *crux.Server, c crux.Caller, tool, args string) map[string]any {
	t.Helper()
	res, err := srv.CallTool(context.Background(), c, tool, json.RawMessage(args))
	require.NoError(t, err, "%s %s", tool, args)
	require.False(t, res.IsError, "%s %s: %s", tool, args, res.Content[0].Text)
	var out map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.Content[0].Text), &out))
	return out
}

func callErr(t *testing.T, srv *crux.Server, c crux.Caller, tool, args string) *crux.Error {
	t.Helper()
	_, err := srv.CallTool(context.Background(), c, tool, json.RawMessage(args))
	var ce *crux.Error
	require.ErrorAs(t, err, &ce, "%s %s", tool, args)
	return ce
}

// current is the value of the current shared version of (entity, key).
func (r *replica) current(t *testing.T, entity, key string) string {
	t.Helper()
	out := call(t, r.srv, bob, "query_facts", `{"entity":"`+entity+`","key":"`+key+`"}`)
	rows, _ := out["rows"].([]any)
	require.Len(t, rows, 1, "%s/%s: %v", entity, key, rows)
	return rows[0].(map[string]any)["value"].(string)
}

// history is the values of every version of (entity, key).
func (r *replica) history(t *testing.T, entity, key string) []string {
	t.Helper()
	var vs []string
	for _, v := range call(t, r.srv, bob, "fact_history", `{"entity":"`+entity+`","key":"`+key+`"}`)["versions"].([]any) {
		vs = append(vs, v.(map[string]any)["value"].(string))
	}
	return vs
}

// pair makes replicas a and b, each serving HTTP and each the other's
// remote: a is "replica-a" on b, b is "replica-b" on a.
func pair(t *testing.T, opts ...func(*crux.Options)) (a, b *replica) {
	a = newReplica(t, "replica::replica-b="+tokenB, opts...)
	b = newReplica(t, "replica::replica-a="+tokenA)
	a.syncWith(t, b, tokenA)
	b.syncWith(t, a, tokenB)
	return a, b
}

// Two servers over two stores sync both ways over HTTP: pulls and pushes
// each way, private facts never leaving, and a chain both wrote resolved
// alike on both by the version chain, reported as a conflict.
func TestTwoServersSyncBothWaysOverHTTP(t *testing.T) {
	a, b := pair(t)
	a.withPassport(t, alice, 100)
	b.withPassport(t, bob, 100)

	// b holds two facts and a private one; a pulls the shared ones.
	call(t, b.srv, bob, "store_fact", `{"entity":"project:crux","key":"owner","value":"bob"}`)
	call(t, b.srv, bob, "store_fact", `{"entity":"team:ops","key":"pager","value":"on"}`)
	call(t, b.srv, bob, "store_fact", `{"entity":"team:ops","key":"pin","value":"b-secret-4321","private":true}`)
	pulled := call(t, a.srv, alice, "sync_pull", `{}`)
	assert.EqualValues(t, 2, pulled["facts_pulled"])
	assert.Equal(t, "bob", a.current(t, "project:crux", "owner"))
	assert.Empty(t, call(t, a.srv, bob, "query_facts", `{"entity":"team:ops","key":"pin"}`)["rows"], "b's private fact stays on b")
	assert.EqualValues(t, 0, call(t, a.srv, alice, "sync_pull", `{}`)["facts_pulled"], "the cursor resumes")

	// a writes a shared and a private fact and pushes: the shared one only.
	a.clk.Set(start.Add(time.Minute))
	call(t, a.srv, alice, "store_fact", `{"entity":"project:crux","key":"lang","value":"Go"}`)
	call(t, a.srv, alice, "store_fact", `{"entity":"project:crux","key":"secret","value":"a-secret-1234","private":true}`)
	preview := call(t, a.srv, alice, "sync_push", `{}`)
	assert.EqualValues(t, 1, preview["would_promote"])
	assert.Empty(t, call(t, b.srv, bob, "query_facts", `{"entity":"project:crux","key":"lang"}`)["rows"], "a preview sends nothing")
	pushed := call(t, a.srv, alice, "sync_push", `{"confirm":true}`)
	assert.EqualValues(t, 1, pushed["facts_pushed"])
	assert.Equal(t, "Go", b.current(t, "project:crux", "lang"))
	assert.Empty(t, call(t, b.srv, alice, "query_facts", `{"entity":"project:crux","key":"secret"}`)["rows"], "private facts are never pushed")
	page, err := b.srv.SyncChanges(context.Background(), crux.Caller{Agent: "x", Authenticated: true, Replica: true}, crux.ChangesRequest{Limit: 100})
	require.NoError(t, err)
	for _, f := range page.Facts {
		assert.NotContains(t, f.Value, "secret", "no private value in b's change log")
	}

	// The other way: b pulls from a (what it pushed to a comes back as
	// duplicates? it pushed nothing yet) and pushes its own new fact.
	b.clk.Set(start.Add(90 * time.Second))
	call(t, b.srv, bob, "store_fact", `{"entity":"team:ops","key":"oncall","value":"carol"}`)
	bp := call(t, b.srv, bob, "sync_push", `{"confirm":true}`)
	assert.EqualValues(t, 1, bp["facts_pushed"], "b pushes oncall; owner and pager came to a by pull, lang from a")
	assert.Equal(t, "carol", a.current(t, "team:ops", "oncall"))
	bpull := call(t, b.srv, bob, "sync_pull", `{}`)
	assert.EqualValues(t, 0, bpull["facts_pulled"], "b has every version a holds")

	// Both write lang concurrently, b first, then a: a's pull meets the
	// conflict and keeps its later version; b's pull adopts it.
	b.clk.Set(start.Add(2 * time.Minute))
	call(t, b.srv, bob, "store_fact", `{"entity":"project:crux","key":"lang","value":"Rust"}`)
	a.clk.Set(start.Add(3 * time.Minute))
	call(t, a.srv, alice, "store_fact", `{"entity":"project:crux","key":"lang","value":"Zig"}`)
	pulled = call(t, a.srv, alice, "sync_pull", `{}`)
	require.EqualValues(t, 1, pulled["conflict_count"])
	cf := pulled["conflicts"].([]any)[0].(map[string]any)
	assert.Equal(t, "local", cf["kept"])
	assert.Equal(t, "lang", cf["key"])
	assert.Equal(t, "Zig", a.current(t, "project:crux", "lang"))
	bpull = call(t, b.srv, bob, "sync_pull", `{}`)
	require.EqualValues(t, 1, bpull["conflict_count"])
	assert.Equal(t, "remote", bpull["conflicts"].([]any)[0].(map[string]any)["kept"])
	assert.Equal(t, "Zig", b.current(t, "project:crux", "lang"))
	assert.ElementsMatch(t, []string{"Go", "Rust", "Zig"}, a.history(t, "project:crux", "lang"))
	assert.ElementsMatch(t, []string{"Go", "Rust", "Zig"}, b.history(t, "project:crux", "lang"))

	// A conflict reported on push: a writes pager, b writes it later and
	// pushes; a keeps b's later version, and says so.
	a.clk.Set(start.Add(4 * time.Minute))
	call(t, a.srv, alice, "store_fact", `{"entity":"team:ops","key":"pager","value":"off"}`)
	b.clk.Set(start.Add(5 * time.Minute))
	call(t, b.srv, bob, "store_fact", `{"entity":"team:ops","key":"pager","value":"muted"}`)
	bp = call(t, b.srv, bob, "sync_push", `{"confirm":true}`)
	require.EqualValues(t, 1, bp["conflict_count"])
	assert.Equal(t, "local", bp["conflicts"].([]any)[0].(map[string]any)["kept"], "b's later version wins on a")
	assert.Equal(t, "muted", a.current(t, "team:ops", "pager"))
	call(t, b.srv, bob, "sync_pull", `{}`)
	assert.Equal(t, "muted", b.current(t, "team:ops", "pager"))
	assert.ElementsMatch(t, a.history(t, "team:ops", "pager"), b.history(t, "team:ops", "pager"))

	// sync_status is truthful: configured, the URL the client reaches, the
	// remote by name, nothing pending.
	st := call(t, a.srv, alice, "sync_status", `{}`)
	assert.Equal(t, true, st["configured"])
	assert.Equal(t, "manual sync", st["mode"])
	assert.Equal(t, b.http.URL, st["remote_url"])
	remotes := st["remotes"].([]any)
	require.Len(t, remotes, 1)
	r := remotes[0].(map[string]any)
	assert.Equal(t, "crux:"+b.signer.KeyID(), r["remote"])
	assert.EqualValues(t, 2, r["pending_push"], "lang=Zig (b pulled it) and pager=off were written on a and never pushed")
	assert.Equal(t, false, r["failing"])

	// Nothing logged by either server holds a token.
	for _, x := range []*replica{a, b} {
		assert.NotContains(t, x.log.String(), tokenA)
		assert.NotContains(t, x.log.String(), tokenB)
	}
}

// The passport tiers still gate the tools over HTTP: none refused, basic
// pulls, established pushes.
func TestSyncTiersOverHTTP(t *testing.T) {
	a, b := pair(t)
	call(t, b.srv, bob, "store_fact", `{"entity":"e","key":"k","value":"v"}`)
	for _, tool := range []string{"sync_pull", "sync_push"} {
		assert.Equal(t, crux.CodeForbidden, callErr(t, a.srv, anon, tool, `{}`).Code)
		e := callErr(t, a.srv, alice, tool, `{}`)
		assert.Equal(t, crux.CodeForbidden, e.Code)
		assert.Contains(t, e.Message, "no passport")
	}
	a.withPassport(t, alice, 10)
	assert.EqualValues(t, 1, call(t, a.srv, alice, "sync_pull", `{}`)["facts_pulled"])
	e := callErr(t, a.srv, alice, "sync_push", `{"confirm":true}`)
	assert.Equal(t, crux.CodeForbidden, e.Code)
	assert.Equal(t, "established", e.Data.(map[string]any)["required_tier"])
	a.withPassport(t, alice, 90)
	call(t, a.srv, alice, "store_fact", `{"entity":"e","key":"k2","value":"v2"}`)
	assert.EqualValues(t, 1, call(t, a.srv, alice, "sync_push", `{"confirm":true}`)["facts_pushed"])
}

// The hosted tier stays: a free-local token refuses the hosted tools
// before they reach the remote; a token that grants them syncs over HTTP.
func TestSyncHostedTierOverHTTP(t *testing.T) {
	signer := newSigner(t)
	mint := func(extra ...string) rcx.Router {
		caps := append(crux.FreeLocalCapabilities(crux.DefaultFlags()), extra...)
		tok, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{Tenant: crux.DefaultTenant, IssuedAt: time.Now(), Capabilities: caps})
		require.NoError(t, err)
		r, err := rcx.NewRouter(tok, signer.Public(), nil)
		require.NoError(t, err)
		return r
	}
	b := newReplica(t, "replica::replica-a="+tokenA)
	call(t, b.srv, bob, "store_fact", `{"entity":"e","key":"k","value":"v"}`)

	free := newReplica(t, "", func(o *crux.Options) { o.Router = mint() })
	free.syncWith(t, b, tokenA)
	free.withPassport(t, alice, 100)
	for _, tool := range []string{"sync_pull", "sync_push"} {
		assert.Equal(t, crux.CodeCapabilityDenied, callErr(t, free.srv, alice, tool, `{}`).Code, tool)
	}
	assert.Equal(t, true, call(t, free.srv, alice, "sync_status", `{}`)["configured"], "sync_status is local")

	granted := newReplica(t, "", func(o *crux.Options) { o.Router = mint("crux-mcp.sync_pull", "crux-mcp.sync_push") })
	granted.syncWith(t, b, tokenA)
	granted.withPassport(t, alice, 100)
	assert.EqualValues(t, 1, call(t, granted.srv, alice, "sync_pull", `{}`)["facts_pulled"])
	call(t, granted.srv, alice, "store_fact", `{"entity":"e","key":"k2","value":"v2"}`)
	assert.EqualValues(t, 1, call(t, granted.srv, alice, "sync_push", `{"confirm":true}`)["facts_pushed"])
	assert.Equal(t, "v2", b.current(t, "e", "k2"))
}

// A bad API key is refused by the remote, and the refusal is -32003 here,
// without the key in the error, the answer or either log.
func TestBadAPIKeyRefused(t *testing.T) {
	a := newReplica(t, "")
	b := newReplica(t, "replica::replica-a="+tokenA)
	const wrong = "wrong-key-abcdefghijklmnop"
	a.syncWith(t, b, wrong)
	a.withPassport(t, alice, 100)
	for tool, args := range map[string]string{"sync_pull": `{}`, "sync_push": `{"confirm":true}`} {
		e := callErr(t, a.srv, alice, tool, args)
		assert.Equal(t, crux.CodeForbidden, e.Code, tool)
		assert.Contains(t, e.Message, "the remote refused the exchange")
		assert.Contains(t, e.Message, "unknown bearer token")
		data, _ := json.Marshal(e.Data)
		assert.Contains(t, string(data), `"reason":"remote_refused"`)
		assert.NotContains(t, e.Message+string(data), wrong)
	}
	assert.NotContains(t, b.log.String(), wrong)
	assert.Contains(t, b.log.String(), "unknown bearer token")

	// A server without a token table refuses any key.
	anonB := newReplica(t, "")
	c, err := syncremote.New(anonB.http.URL, "any-key-at-all-0123456", nil)
	require.NoError(t, err)
	_, err = c.Identity(context.Background())
	var ce *crux.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, crux.CodeForbidden, ce.Code, "a server without a token table refuses every key")
}

// The serving side's own checks: method, content type, body size, Host
// and Origin, an anonymous replica, an unknown path, a bad cursor.
func TestServingChecks(t *testing.T) {
	b := newReplica(t, "replica::replica-a="+tokenA+" anon-ok="+tokenB)
	post := func(path, ctype, body string, hdr ...string) (int, syncremote.ErrorBody, http.Header) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, b.http.URL+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+tokenA)
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			if hdr[i] == "Host" {
				req.Host = hdr[i+1]
			} else {
				req.Header.Set(hdr[i], hdr[i+1])
			}
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var eb syncremote.ErrorBody
		b, _ := io.ReadAll(resp.Body)
		json.Unmarshal(b, &eb)
		return resp.StatusCode, eb, resp.Header
	}
	code, _, _ := post(syncremote.PathIdentity, "application/json", `{}`)
	assert.Equal(t, http.StatusOK, code)

	code, eb, _ := post(syncremote.PathChanges, "text/plain", `{"limit":1}`)
	assert.Equal(t, http.StatusUnsupportedMediaType, code)
	require.NotNil(t, eb.Error)
	assert.Equal(t, crux.CodeInvalidRequest, eb.Error.Code)

	code, eb, _ = post(syncremote.PathChanges, "application/json", `{"limit":1,"cursor":"nope"}`)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, crux.CodeInvalidParams, eb.Error.Code)

	code, eb, _ = post(syncremote.PathChanges, "application/json", `{"limit":1} {}`)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, crux.CodeParseError, eb.Error.Code)

	big := `{"facts":[{"value":"` + strings.Repeat("x", syncremote.MaxBodyBytes) + `"}]}`
	code, eb, _ = post(syncremote.PathPush, "application/json", big)
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)
	assert.Equal(t, crux.CodeInvalidRequest, eb.Error.Code)

	code, eb, _ = post(syncremote.PathPush, "application/json", `{}`, "Origin", "https://evil.example")
	assert.Equal(t, http.StatusForbidden, code)
	assert.Equal(t, crux.CodeForbidden, eb.Error.Code)
	code, _, _ = post(syncremote.PathPush, "application/json", `{}`, "Host", "rebound.example:80")
	assert.Equal(t, http.StatusForbidden, code, "DNS rebinding: a loopback listener takes loopback Host names only")

	code, eb, _ = post("/v1/sync/nothing", "application/json", `{}`)
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, crux.CodeMethodNotFound, eb.Error.Code)

	req, _ := http.NewRequest(http.MethodGet, b.http.URL+syncremote.PathIdentity, nil)
	req.Header.Set("Authorization", "Bearer "+tokenA)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	req, _ = http.NewRequest(http.MethodPost, b.http.URL+syncremote.PathIdentity, strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no token")
	assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
}

// An anonymous replica, on a server that serves anonymous MCP callers, is
// still refused sync.
func TestAnonymousReplicaRefused(t *testing.T) {
	b := newReplica(t, "")
	req, _ := http.NewRequest(http.MethodPost, b.http.URL+syncremote.PathChanges, strings.NewReader(`{"limit":1}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	var eb syncremote.ErrorBody
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&eb))
	assert.Equal(t, crux.CodeForbidden, eb.Error.Code)
	assert.Contains(t, eb.Error.Message, "authenticated")
}

func TestNewRefusesBadURLsAndKeys(t *testing.T) {
	const key = "secret-key-0123456789"
	for _, tc := range []struct{ url, key, want string }{
		{"ftp://h", key, "http or https"},
		{"https://", key, "no host"},
		{"https://user:pw@h", key, "user information"},
		{"https://h/?k=1", key, "no query"},
		{"http://crux.example.com", key, "plain http"},
		{"https://h", "", "empty"},
		{"https://h", "with space " + key, "position 5"},
		{"https://h", key + "\n", "position"},
	} {
		_, err := syncremote.New(tc.url, tc.key, nil)
		require.Error(t, err, tc.url)
		assert.Contains(t, err.Error(), tc.want, tc.url)
		assert.NotContains(t, err.Error(), key, "the key is never echoed")
	}
	c, err := syncremote.New("http://crux.example.com/base/", key, &syncremote.Options{AllowInsecureHTTP: true})
	require.NoError(t, err)
	assert.Equal(t, "http://crux.example.com/base", c.URL())
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		assert.NotContains(t, fmt.Sprintf(verb, c), key, verb)
		assert.NotContains(t, fmt.Sprintf(verb, *c), key, verb)
	}
	_, err = syncremote.New("http://localhost:1", key, nil)
	assert.NoError(t, err, "loopback may be plain http")
}

// The client's own bounds: no redirect followed, an answer too large
// refused, a deadline kept, an answer without the error body mapped by
// status, and the path prefix of the base URL kept.
func TestClientBounds(t *testing.T) {
	var (
		mu               sync.Mutex
		gotPath, gotAuth string
	)
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotPath, gotAuth = r.URL.Path, r.Header.Get("Authorization")
		mu.Unlock()
		switch r.URL.Path {
		case "/base" + syncremote.PathIdentity:
			w.Write([]byte(`{"name":"crux:x","tenant":"default"}`))
		case "/redirect" + syncremote.PathIdentity:
			http.Redirect(w, r, "https://elsewhere.example/", http.StatusTemporaryRedirect)
		case "/big" + syncremote.PathChanges:
			w.Write([]byte(`{"facts":[],"cursor":"` + strings.Repeat("9", syncremote.MaxBodyBytes) + `"}`))
		case "/slow" + syncremote.PathIdentity:
			select {
			case <-r.Context().Done():
			case <-stall:
			}
		case "/plain401" + syncremote.PathIdentity:
			http.Error(w, "go away", http.StatusUnauthorized)
		case "/teapot" + syncremote.PathIdentity:
			http.Error(w, "\x1b[31mred\x1b[0m", http.StatusTeapot)
		default:
			http.Error(w, "down", http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	defer close(stall) // before Close, which waits for the stalled handler
	const key = "client-key-0123456789"
	client := func(base string, o *syncremote.Options) *syncremote.Client {
		c, err := syncremote.New(srv.URL+base, key, o)
		require.NoError(t, err)
		return c
	}
	ctx := context.Background()
	id, err := client("/base/", nil).Identity(ctx)
	require.NoError(t, err)
	assert.Equal(t, "crux:x", id.Name)
	mu.Lock()
	assert.Equal(t, "/base"+syncremote.PathIdentity, gotPath)
	assert.Equal(t, "Bearer "+key, gotAuth)
	mu.Unlock()

	_, err = client("/redirect", nil).Identity(ctx)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not follow")

	_, err = client("/big", nil).Changes(ctx, crux.ChangesRequest{Limit: 1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "more than")

	_, err = client("/slow", &syncremote.Options{Timeout: 50 * time.Millisecond}).Identity(ctx)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	_, err = client("/plain401", nil).Identity(ctx)
	var ce *crux.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, crux.CodeForbidden, ce.Code)
	assert.Contains(t, ce.Message, "go away")

	_, err = client("/teapot", nil).Identity(ctx)
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, crux.CodeInvalidRequest, ce.Code)
	assert.NotContains(t, ce.Message, "\x1b", "control characters from the remote are removed")

	_, err = client("/down", nil).Push(ctx, crux.PushRequest{})
	require.Error(t, err)
	assert.False(t, errorsAsCrux(err), "a 502 is a failure to reach the remote, not a refusal")
	for _, e := range []error{err} {
		assert.NotContains(t, e.Error(), key)
	}
}

func errorsAsCrux(err error) bool {
	_, ok := err.(*crux.Error)
	return ok
}

// Pages are bounded in bytes both ways: seventeen versions of 1 MB
// each, more than one request body may hold, are pulled and pushed over
// HTTP in pages under the limit; a value over 1 MiB is rejected.
func TestLargeValuesInPages(t *testing.T) {
	a, b := pair(t)
	a.withPassport(t, alice, 100)
	b.withPassport(t, bob, 100)
	value := strings.Repeat("x", 1_000_000)
	for i := range 17 {
		call(t, b.srv, bob, "store_fact", fmt.Sprintf(`{"entity":"big:b","key":"k%d","value":"%s"}`, i, value))
		call(t, a.srv, alice, "store_fact", fmt.Sprintf(`{"entity":"big:a","key":"k%d","value":"%s"}`, i, value))
	}
	total := 0
	for more := true; more; {
		out := call(t, a.srv, alice, "sync_pull", `{}`)
		total += int(out["facts_pulled"].(float64))
		more = out["more"] == true
	}
	assert.Equal(t, 17, total)
	pushed := call(t, a.srv, alice, "sync_push", `{"confirm":true}`)
	assert.EqualValues(t, 17, pushed["facts_pushed"])
	assert.Len(t, b.history(t, "big:a", "k16"), 1)

	over := store.SyncFact{ID: "f_0123456789abcdef0123456789abcdef", Entity: "e", Key: "k", Value: strings.Repeat("y", store.MaxSyncValueBytes+1),
		Confidence: 1, StoredAt: start}
	resp, err := b.srv.SyncPush(context.Background(), crux.Caller{Agent: "x", Authenticated: true, Replica: true}, crux.PushRequest{Facts: []store.SyncFact{over}})
	require.NoError(t, err)
	require.Len(t, resp.Rejected, 1)
	assert.Contains(t, resp.Rejected[0].Reason, "value longer than 1048576 bytes")
}
