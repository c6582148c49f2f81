package tools_test

// The harness of the tool tests: one server factory, a settable clock, and
// the helpers that call tools and decode what they return. The tests of this
// package see the tools through crux.Server, as an embedder does, and decode
// results into maps or local types rather than into the tools package's own.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

var (
	alice = crux.Caller{Agent: "alice", Authenticated: true}
	bob   = crux.Caller{Agent: "bob", Authenticated: true}
	anon  = crux.Caller{}
	olga  = crux.Caller{Agent: "olga", Authenticated: true} // the fixture's operator (calls_test.go)
)

// newServer is a server with opts over a fresh store, without
// newTestServer's clock. Both are closed when the test ends.
func newServer(t testing.TB, opts *crux.Options) (*crux.Server, *bolt.DB) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	srv, err := crux.NewServer(db, opts)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return srv, db
}

// tenant is the tenant of a caller that names none.
const tenant = "default"

// start is the time every test clock starts at.
var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set moves the clock to t and returns the time it showed before.
func (c *clock) Set(t time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	was := c.t
	c.t = t
	return was
}

// setup is what a test server is built from; options change it.
type setup struct {
	flags  *crux.Flags
	signer receipts.Signer
	router rcx.Router
	clock  *clock
	path   string        // the store's file; empty: one in a fresh temp dir
	bolt   *bolt.Options // how the store is opened
	logger *slog.Logger  // nil: logs are discarded
}

type option func(*setup)

// withFlags runs the server with f instead of crux.DefaultFlags().
func withFlags(f crux.Flags) option { return func(s *setup) { s.flags = &f } }

// withSigner signs the server's receipts with sg instead of a fresh key.
func withSigner(sg receipts.Signer) option { return func(s *setup) { s.signer = sg } }

// withRouter enforces capability tokens with r (see freeLocal).
func withRouter(r rcx.Router) option { return func(s *setup) { s.router = r } }

// withLogger sends the server's logs to l.
func withLogger(l *slog.Logger) option { return func(s *setup) { s.logger = l } }

// withClock runs the server on c instead of a new clock at start.
func withClock(c *clock) option { return func(s *setup) { s.clock = c } }

// inFile keeps the store in the file at path, opened with opts (nil: bolt's
// defaults, which fsync every commit).
func inFile(path string, opts *bolt.Options) option {
	return func(s *setup) { s.path, s.bolt = path, opts }
}

// newTestServer returns a server, its clock (at start unless withClock says
// otherwise) and its store, a bolt file in a fresh temp dir. Both are closed
// when the test ends.
func newTestServer(t testing.TB, opts ...option) (*crux.Server, *clock, *bolt.DB) {
	t.Helper()
	s := setup{bolt: &bolt.Options{NoSync: true}}
	for _, o := range opts {
		o(&s)
	}
	if s.clock == nil {
		s.clock = &clock{t: start}
	}
	if s.path == "" {
		s.path = filepath.Join(t.TempDir(), "crux.db")
	}
	db, err := bolt.Open(s.path, s.bolt)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	srv, err := crux.NewServer(db, &crux.Options{Flags: s.flags, Now: s.clock.Now, Signer: s.signer, Router: s.router, Logger: s.logger})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return srv, s.clock, db
}

// newSigner is a fresh Ed25519 receipt signer.
func newSigner(t testing.TB) *receipts.Ed25519Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	return receipts.NewEd25519Signer(priv)
}

// freeLocal is what the crux command runs with: a signer, the free-local
// token it minted just now, and the router that enforces the token. Pass
// the signer and the router with withSigner and withRouter.
func freeLocal(t testing.TB) (*receipts.Ed25519Signer, *rcx.Token, rcx.Router) {
	t.Helper()
	signer := newSigner(t)
	tok, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{Tenant: tenant, IssuedAt: time.Now(), Capabilities: crux.FreeLocalCapabilities(crux.DefaultFlags())})
	require.NoError(t, err)
	router, err := rcx.NewRouter(tok, signer.Public(), nil)
	require.NoError(t, err)
	return signer, tok, router
}

// result runs a tool that must not fail at the protocol level.
func result(t testing.TB, srv *crux.Server, c crux.Caller, name, args string) *crux.Result {
	t.Helper()
	res, err := srv.CallTool(context.Background(), c, name, json.RawMessage(args))
	require.NoError(t, err, "%s(%s)", name, args)
	return res
}

// call runs a tool that must succeed and returns its structured content as
// generic JSON.
func call(t testing.TB, srv *crux.Server, c crux.Caller, name, args string) map[string]any {
	t.Helper()
	res := result(t, srv, c, name, args)
	require.False(t, res.IsError, "%s(%s): %v", name, args, res.Content)
	return structured(t, res)
}

// toolError runs a tool that must run and report a failure (isError), and
// returns its text.
func toolError(t testing.TB, srv *crux.Server, c crux.Caller, name, args string) string {
	t.Helper()
	res := result(t, srv, c, name, args)
	require.True(t, res.IsError, "%s(%s) should fail: %+v", name, args, res)
	return res.Content[0].Text
}

// callErr runs a tool that must fail with a protocol error.
func callErr(t testing.TB, srv *crux.Server, c crux.Caller, name, args string) *crux.Error {
	t.Helper()
	res, err := srv.CallTool(context.Background(), c, name, json.RawMessage(args))
	require.Error(t, err, "%s(%s) = %+v, want an error", name, args, res)
	var e *crux.Error
	require.True(t, errors.As(err, &e), "error %T is not a *crux.Error", err)
	return e
}

// decode decodes v's JSON form into out. JSON held raw (a session's state)
// keeps its bytes: nothing is HTML-escaped on the way.
func decode(t testing.TB, v, out any) {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(v))
	require.NoError(t, json.Unmarshal(b.Bytes(), out))
}

// structured is a result's structured content as generic JSON.
func structured(t testing.TB, res *crux.Result) map[string]any {
	t.Helper()
	var m map[string]any
	decode(t, res.StructuredContent, &m)
	return m
}

// objects returns the array of objects under field of a tool's result.
func objects(t testing.TB, got map[string]any, field string) []map[string]any {
	t.Helper()
	raw, ok := got[field].([]any)
	require.True(t, ok, "no %s in %v", field, got)
	out := make([]map[string]any, len(raw))
	for i, r := range raw {
		out[i] = r.(map[string]any)
	}
	return out
}

func rows(t testing.TB, got map[string]any) []map[string]any { return objects(t, got, "rows") }

// values are the values of a result's rows, in order.
func values(t testing.TB, got map[string]any) []string {
	t.Helper()
	var out []string
	for _, r := range rows(t, got) {
		out = append(out, r["value"].(string))
	}
	return out
}

// storeID stores a fact with store_fact and returns its id.
func storeID(t testing.TB, srv *crux.Server, c crux.Caller, args string) string {
	t.Helper()
	return call(t, srv, c, "store_fact", args)["fact_id"].(string)
}

// putFact writes f straight into the store, as crux itself does (store_fact
// refuses reserved entities), and returns its id.
func putFact(t testing.TB, db store.Backend, f store.NewFact) string {
	t.Helper()
	var out *store.Fact
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		var err error
		out, _, err = store.PutFact(tx, f)
		return err
	}))
	return out.ID
}

// reservedFact writes a volatile fact under the reserved entity
// __ops::health of the default tenant and returns its id.
func reservedFact(t testing.TB, db store.Backend, now time.Time) string {
	t.Helper()
	return putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: tenant}, Entity: "__ops::health", Key: "probe",
		Value: "ok", Confidence: 1, HorizonClass: store.HorizonVolatile, Now: now})
}

// getReceipt reads the receipt id from the store.
func getReceipt(t testing.TB, db store.Backend, id string) *receipts.Receipt {
	t.Helper()
	var r *receipts.Receipt
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		var err error
		r, err = receipts.Get(tx, id)
		return err
	}))
	return r
}

// receiptCount is the number of receipts in the default tenant's chain.
func receiptCount(t testing.TB, db store.Backend) int {
	t.Helper()
	n := 0
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		return receipts.Chain(tx, tenant, 0, func(*receipts.Receipt) error { n++; return nil })
	}))
	return n
}

// paramError is the data of an error about one argument.
type paramError struct {
	Param     string `json:"param"`
	Reason    string `json:"reason"`
	ErrorCode string `json:"error_code"`
}

// paramOf returns the data of e, which must name a bad argument.
// assertNeedsIdentity checks that an anonymous call of name answers the one
// refusal of a tool that needs an authenticated agent identity.
func assertNeedsIdentity(t testing.TB, srv *crux.Server, name, args string) {
	t.Helper()
	for _, c := range []crux.Caller{anon, {Agent: "alice"}} { // the second is named but not vouched for
		e := callErr(t, srv, c, name, args)
		assert.Equal(t, crux.CodeForbidden, e.Code, "%s: %s", name, e.Message)
		assert.Equal(t, map[string]any{"reason": "requires_identity", "tool": name}, e.Data, name)
		assert.Contains(t, e.Message, name+": needs an authenticated agent identity", name)
	}
}

func paramOf(t testing.TB, e *crux.Error) paramError {
	t.Helper()
	require.NotNil(t, e.Data, "%s: no data", e.Message)
	b, err := json.Marshal(e.Data)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var pe paramError
	require.NoError(t, dec.Decode(&pe), "data is %T: %s", e.Data, b)
	require.NotEmpty(t, pe.Param, "data is %T: %s", e.Data, b)
	return pe
}

// assertInvalidParam checks a -32602 "<tool>: <param>: <reason>" whose data
// names param.
func assertInvalidParam(t testing.TB, e *crux.Error, tool, param, reason string) {
	t.Helper()
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Equal(t, tool+": "+param+": "+reason, e.Message)
	pe := paramOf(t, e)
	assert.Equal(t, param, pe.Param)
	assert.Equal(t, reason, pe.Reason)
}

// assertReserved checks a -32602 RESERVED_ENTITY_PREFIX naming param.
func assertReserved(t testing.TB, e *crux.Error, param string) {
	t.Helper()
	assert.Equal(t, crux.CodeInvalidParams, e.Code, e.Message)
	pe := paramOf(t, e)
	assert.Equal(t, param, pe.Param)
	assert.Equal(t, "RESERVED_ENTITY_PREFIX", pe.ErrorCode)
}

// flagsFrom reads the flags from getenv through crux.FlagsFromEnv.
func flagsFrom(getenv func(string) string) crux.Flags {
	var environ []string
	for _, name := range feature.Names() {
		if v := getenv(name); v != "" {
			environ = append(environ, name+"="+v)
		}
	}
	f, _ := crux.FlagsFromEnv(environ)
	return f
}
