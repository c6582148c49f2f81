package crux_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"crypto/ed25519"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/store/mem"
	"github.com/crux-go/crux/surface"
	"github.com/crux-go/crux/toolkit"
	"github.com/crux-go/crux/tools"
)

var (
	alice = crux.Caller{Agent: "alice", Authenticated: true}
	bob   = crux.Caller{Agent: "bob", Authenticated: true}
	anon  = crux.Caller{}
)

// newServer is a server over a fresh store, with extra tools besides
// crux's own. Both are closed when the test ends. (The tools' own tests have
// theirs in tools/harness_test.go.)
func newServer(t testing.TB, opts *crux.Options, extra ...*toolkit.Tool) (*crux.Server, *bolt.DB) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	srv, err := crux.NewServerWithTools(db, opts, extra...)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return srv, db
}

// call runs a tool that must succeed and returns its structured content as
// generic JSON.
func call(t testing.TB, srv *crux.Server, c crux.Caller, name, args string) map[string]any {
	t.Helper()
	res, err := srv.CallTool(context.Background(), c, name, json.RawMessage(args))
	require.NoError(t, err, "%s(%s)", name, args)
	require.False(t, res.IsError, "%s(%s): %v", name, args, res.Content)
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
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

func TestUnknownTool(t *testing.T) {
	srv, _ := newServer(t, nil)
	e := callErr(t, srv, anon, "no_such_tool", `{}`)
	assert.Equal(t, crux.CodeMethodNotFound, e.Code)
	assert.Equal(t, "unknown tool: no_such_tool", e.Message)
}

func TestInvalidParams(t *testing.T) {
	srv, _ := newServer(t, nil)
	big := strings.Repeat("x", toolkit.MaxValueBytes+1)
	tests := []struct {
		name, tool, args string
		param, reason    string
	}{
		{"wrong type", "query_facts", `{"top_k":"ten"}`, "top_k", "must be an integer"},
		{"fraction for integer", "query_facts", `{"top_k":1.5}`, "top_k", "must be an integer"},
		{"below minimum", "query_facts", `{"top_k":0}`, "top_k", "must be >= 1"},
		{"above maximum", "query_facts", `{"min_effective_confidence":2}`, "min_effective_confidence", "must be <= 1"},
		{"missing required", "store_fact", `{"entity":"e","key":"k"}`, "value", "is required"},
		{"unknown argument", "query_facts", `{"entity_prefx":"a"}`, "entity_prefx", "unknown argument"},
		{"unknown on empty schema", "list_entities", `{"verbose":true}`, "verbose", "unknown argument"},
		{"enum", "store_fact", `{"entity":"e","key":"k","value":"v","horizon_class":"weekly"}`, "horizon_class", `value must be one of "volatile", "medium", "stable", "none"`},
		{"empty string", "store_fact", `{"entity":"","key":"k","value":"v"}`, "entity", "must not be empty"},
		{"array item type", "store_fact", `{"entity":"e","key":"k","value":"v","supersedes":[1]}`, "supersedes.0", "must be a string"},
		{"bad as_of", "query_facts", `{"as_of":"yesterday"}`, "as_of", "must be an RFC 3339 timestamp such as 2026-01-02T15:04:05Z"},
		{"not an object", "query_facts", `[1,2]`, "arguments", "must be a JSON object"},
		{"not JSON", "query_facts", `{"top_k":`, "arguments", "must be a JSON object"},
		{"too deep", "list_entities", `{"x":` + strings.Repeat("[", 64) + strings.Repeat("]", 64) + `}`, "arguments", "nested deeper than 64 levels"},
		{"too long", "archive_session", `{"session_id":"s","reason":"` + strings.Repeat("r", 1025) + `"}`, "reason", "longer than 1024 characters"},
		{"too many items", "store_fact", `{"entity":"e","key":"k","value":"v","supersedes":[` + strings.Repeat(`"f",`, 256) + `"f"]}`, "supersedes", "more than 256 items"},
		{"number too long", "save_session", `{"session_id":"s","state":{"x":[0.` + strings.Repeat("1", 63) + `]}}`, "state.x.0", "a number longer than 64 characters"},
		{"number too large", "query_facts", `{"top_k":1e309}`, "top_k", "a number out of range"},
		{"number exponent beyond reason", "query_facts", `{"top_k":1E1000001}`, "top_k", "a number out of range"},
		{"number too small", "query_facts", `{"min_effective_confidence":-1E-1000001}`, "min_effective_confidence", "a number out of range"},
		{"number rounds to zero", "save_session", `{"session_id":"s","state":{"x":1e-400}}`, "state.x", "a number out of range"},
		{"oversized value", "store_fact", `{"entity":"e","key":"k","value":"` + big + `"}`, "value", "longer than 1048576 bytes"},
		{"lone surrogate", "store_fact", `{"entity":"e","key":"k","value":"a\ud800b"}`, "value", "is not valid UTF-8"},
		{"control character", "store_fact", `{"entity":"e\u0000x","key":"k","value":"v"}`, "entity", "must not contain control characters"},
		{"reserved entity", "store_fact", `{"entity":"__bootstrap__::doc:x","key":"k","value":"v"}`, "entity", "entities starting with __ are reserved for crux"},
		{"query without words", "query_facts", `{"query":"!?"}`, "query", "needs a word of at least two letters or digits"},
		{"empty supersedes id", "store_fact", `{"entity":"e","key":"k","value":"v","supersedes":[""]}`, "supersedes", "fact  does not exist or is not visible to the caller"},
		{"unknown supersedes", "store_fact", `{"entity":"e","key":"k","value":"v","supersedes":["f_00000000000000000000000000000000"]}`, "supersedes", "fact f_00000000000000000000000000000000 does not exist or is not visible to the caller"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := callErr(t, srv, anon, tt.tool, tt.args)
			assert.Equal(t, crux.CodeInvalidParams, e.Code)
			assert.Equal(t, tt.tool+": "+tt.param+": "+tt.reason, e.Message)
			pe, ok := e.Data.(*toolkit.ParamError)
			require.True(t, ok, "data is %T", e.Data)
			assert.Equal(t, tt.param, pe.Param)
			assert.Equal(t, tt.reason, pe.Reason)
		})
	}
	// Nothing of any rejected call was stored.
	got := call(t, srv, anon, "list_entities", `{}`)
	assert.Empty(t, got["entities"])
}

func TestInvalidUTF8Bytes(t *testing.T) {
	srv, _ := newServer(t, nil)
	args := []byte(`{"entity":"e","key":"k","value":"` + "\xff\xfe" + `"}`)
	_, err := srv.CallTool(context.Background(), anon, "store_fact", args)
	var e *crux.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "store_fact: value: is not valid UTF-8", e.Message)
}

func TestCommonArgumentsAccepted(t *testing.T) {
	srv, _ := newServer(t, nil)
	got := call(t, srv, alice, "get_agent_identity", `{"turn_id":"t-1","contract":"legacy"}`)
	assert.Equal(t, "alice", got["agent_name"])
	e := callErr(t, srv, alice, "get_agent_identity", `{"turn_id":7}`)
	assert.Equal(t, "get_agent_identity: turn_id: must be a string", e.Message)
}

func TestNullAndEmptyArguments(t *testing.T) {
	srv, _ := newServer(t, nil)
	for _, args := range []string{"", "null", "{}", "  "} {
		res, err := srv.CallTool(context.Background(), anon, "list_entities", json.RawMessage(args))
		require.NoError(t, err, "args %q", args)
		assert.False(t, res.IsError)
	}
}

func TestPanicRecovered(t *testing.T) {
	boom := toolkit.New("boom", "writes a fact, then panics", json.RawMessage(`{"type":"object","properties":{}}`), toolkit.Annotations{},
		func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, _ json.RawMessage) (*toolkit.Result, error) {
			err := env.Store.Update(ctx, func(tx store.Tx) error {
				if _, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: c.TenantID()}, Entity: "half", Key: "written", Value: "should not survive", Confidence: 1, Now: env.Now()}); err != nil {
					return err
				}
				panic("handler bug")
			})
			return nil, err
		})
	srv, _ := newServer(t, nil, boom)

	e := callErr(t, srv, anon, "boom", `{}`)
	assert.Equal(t, crux.CodeInternalError, e.Code)
	assert.Contains(t, e.Message, "nothing was stored")

	// The server keeps working and holds nothing from the failed call.
	got := call(t, srv, anon, "query_facts", `{"query":"survive"}`)
	assert.Empty(t, got["rows"])
	got = call(t, srv, anon, "list_entities", `{}`)
	assert.Empty(t, got["entities"])
	call(t, srv, anon, "store_fact", `{"entity":"after","key":"k","value":"fine"}`)
}

func TestClosedServer(t *testing.T) {
	srv, _ := newServer(t, nil)
	require.NoError(t, srv.Close())
	require.NoError(t, srv.Close())
	_, err := srv.CallTool(context.Background(), anon, "list_entities", nil)
	assert.ErrorIs(t, err, crux.ErrServerClosed)
	assert.EqualError(t, err, "crux: server is closed (-32603)", "said once")
	_, err = srv.SyncIdentity(context.Background(), anon)
	assert.ErrorIs(t, err, crux.ErrServerClosed)
	assert.EqualError(t, err, "crux: server is closed (-32603)", "said once")
	_, err = srv.SyncChanges(context.Background(), anon, crux.ChangesRequest{})
	assert.EqualError(t, err, "crux: server is closed (-32603)", "said once")
	_, err = srv.SyncPush(context.Background(), anon, crux.PushRequest{})
	assert.EqualError(t, err, "crux: server is closed (-32603)", "said once")
}

func TestForgetClosedServer(t *testing.T) {
	srv, _ := newServer(t, nil)
	require.NoError(t, srv.Close())
	_, err := srv.Purge(context.Background())
	assert.ErrorIs(t, err, crux.ErrServerClosed)
	_, err = srv.RestoreForget(context.Background(), "r_x")
	assert.ErrorIs(t, err, crux.ErrServerClosed)
	_, err = srv.ForgetStatus(context.Background(), "r_x")
	assert.ErrorIs(t, err, crux.ErrServerClosed)
}

func TestCancelledContext(t *testing.T) {
	srv, _ := newServer(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := srv.CallTool(ctx, anon, "store_fact", json.RawMessage(`{"entity":"e","key":"k","value":"v"}`))
	var e *crux.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, crux.CodeInternalError, e.Code)
	assert.ErrorIs(t, err, context.Canceled)
	got := call(t, srv, anon, "list_entities", `{}`)
	assert.Empty(t, got["entities"])
}

func TestListTools(t *testing.T) {
	srv, _ := newServer(t, nil)
	list := srv.ListTools(context.Background(), anon)
	var names []string
	for _, tl := range list {
		names = append(names, tl.Name)
		assert.True(t, strings.HasPrefix(tl.Description, surface.Resolve(false).Marker(tl.Name)+" "), "%s: %q", tl.Name, tl.Description)
		_, hosted := surface.Resolve(false).Upgrade(tl.Name)
		assert.Equal(t, hosted, tl.Meta["crux"] != nil, "%s: _meta.crux.upgrade on hosted tools only", tl.Name)
		assert.NotContains(t, tl.Description, surface.SessionTool+" first", "%s: shared guidance is in crux.Instructions, not in each description", tl.Name)
		assert.NotEmpty(t, tl.OutputSchema, "%s declares no output schema", tl.Name)
		var schema map[string]any
		require.NoError(t, json.Unmarshal(tl.InputSchema, &schema), tl.Name)
		assert.Equal(t, "object", schema["type"], tl.Name)
		assert.Equal(t, false, schema["additionalProperties"], tl.Name)
	}
	var all []string
	for _, tl := range tools.All(nil) {
		if tl.Name != "request_passport_mint" { // present only with its flag
			all = append(all, tl.Name)
		}
	}
	assert.Equal(t, all, names, "every tool, in catalogue order")
	assert.Equal(t, "cuecrux_session", names[0])
	for _, n := range []string{"issue_passport", "sync_pull", "sync_push"} {
		assert.Contains(t, names, n, "without a router the hosted tools are listed")
	}

	// The caller's copy is its own.
	list[0].InputSchema[0] = 'X'
	list[0].Description = "changed"
	again := srv.ListTools(context.Background(), anon)
	assert.Equal(t, byte('{'), again[0].InputSchema[0])
	assert.NotEqual(t, "changed", again[0].Description)
	assert.False(t, srv.Enforcing())
}

func TestEveryToolHasATier(t *testing.T) {
	var names []string
	for _, tl := range tools.All(nil) {
		names = append(names, tl.Name)
	}
	assert.Empty(t, surface.Missing(names), "tools without an entry in the surface table")
}

func TestConcurrentCalls(t *testing.T) {
	srv, _ := newServer(t, nil)
	const workers, each = 16, 20
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := crux.Caller{Agent: "agent" + string(rune('a'+w)), Authenticated: true}
			for i := range each {
				args, _ := json.Marshal(map[string]any{"entity": "shared", "key": "counter", "value": "v", "private": i%2 == 0})
				if _, err := srv.CallTool(context.Background(), c, "store_fact", args); err != nil {
					t.Error(err)
				}
				if _, err := srv.CallTool(context.Background(), c, "query_facts", json.RawMessage(`{"entity":"shared"}`)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	// The shared chain has one version per public write, numbered without gaps.
	var versions []any // every page, newest first
	for args := `{"entity":"shared","key":"counter"}`; args != ""; {
		got := call(t, srv, anon, "fact_history", args)
		versions = append(versions, got["versions"].([]any)...)
		args = ""
		if cursor, ok := got["next_cursor"].(string); ok {
			args = fmt.Sprintf(`{"entity":"shared","key":"counter","cursor":%q}`, cursor)
		}
	}
	require.Len(t, versions, workers*each/2)
	for i, v := range versions { // newest first
		assert.EqualValues(t, len(versions)-i, v.(map[string]any)["version"])
	}
}

func TestRevokedPassport(t *testing.T) {
	on := crux.DefaultFlags()
	on.PassportRevocation = true
	srv, db := newServer(t, &crux.Options{Flags: &on})
	revokedAt := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		return store.PutPassport(tx, &store.Passport{PrincipalID: "alice", Tenant: toolkit.DefaultTenant, Tier: store.TierBasic, RevokedAt: &revokedAt, RevokeReason: "key leaked"})
	}))

	res, err := srv.CallTool(context.Background(), alice, "store_fact", json.RawMessage(`{"entity":"e","key":"k","value":"v"}`))
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Equal(t, "passport alice was revoked at 2026-02-01T00:00:00Z (key leaked); a revoked passport may call only get_agent_identity and get_passport", res.Content[0].Text)
	assert.Equal(t, "alice", call(t, srv, alice, "get_agent_identity", `{}`)["agent_name"], "the allowlist still runs")
	assert.Empty(t, call(t, srv, bob, "list_entities", `{}`)["entities"], "the refused write left nothing")
	call(t, srv, bob, "store_fact", `{"entity":"e","key":"k","value":"v"}`) // other callers are unaffected

	// With enforcement off (the default), the same passport is not refused.
	srv2, err := crux.NewServer(db, nil)
	require.NoError(t, err)
	call(t, srv2, alice, "store_fact", `{"entity":"e2","key":"k","value":"v"}`)
}

func TestInvalidCaller(t *testing.T) {
	srv, _ := newServer(t, nil)
	for _, c := range []crux.Caller{{Agent: "a::b", Authenticated: true}, {Agent: "bob:", Authenticated: true},
		{Agent: "anonymous", Authenticated: true}, {Agent: "a\x00"}, {Tenant: "t\x00x"}} {
		e := callErr(t, srv, c, "list_entities", `{}`)
		assert.Equal(t, crux.CodeInvalidRequest, e.Code, "%+v", c)
	}
	// Names are at most 256 bytes: they become part of index keys.
	long := strings.Repeat("a", 256)
	call(t, srv, crux.Caller{Agent: long, Tenant: long, Authenticated: true}, "store_fact", `{"entity":"e","key":"k","value":"v","private":true}`)
	for _, c := range []crux.Caller{{Agent: long + "a", Authenticated: true}, {Tenant: long + "a"}} {
		e := callErr(t, srv, c, "store_fact", `{"entity":"e","key":"k","value":"v"}`)
		assert.Equal(t, crux.CodeInvalidRequest, e.Code)
		assert.Contains(t, e.Message, "longer than 256 bytes")
	}
}

func TestIntegralNumbersAccepted(t *testing.T) {
	srv, _ := newServer(t, nil)
	call(t, srv, alice, "store_fact", `{"entity":"e","key":"k","value":"v","confidence":1.0}`)
	got := call(t, srv, alice, "query_facts", `{"top_k":1.0e0,"token_budget":5.00}`)
	assert.EqualValues(t, 1, got["count"])
	e := callErr(t, srv, alice, "query_facts", `{"top_k":2.5}`)
	assert.Equal(t, "query_facts: top_k: must be an integer", e.Message)
}

func TestLimitsPrintAsWholeNumbers(t *testing.T) {
	ttl := toolkit.New("ttl", "takes a large limit", json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","maximum":31536000}}}`),
		toolkit.Annotations{}, func(context.Context, *toolkit.Env, toolkit.Caller, json.RawMessage) (*toolkit.Result, error) {
			return &toolkit.Result{Content: []toolkit.Content{{Type: "text", Text: "ok"}}}, nil
		})
	srv, _ := newServer(t, nil, ttl)
	e := callErr(t, srv, alice, "ttl", `{"n":31536001}`)
	assert.Equal(t, "ttl: n: must be <= 31536000", e.Message)
}

// errReadOnly is the error of a write to a read-only updateCounter.
var errReadOnly = errors.New("the store is read-only")

// updateCounter is a store that counts the read-write transactions asked
// of it and, when readOnly is set, refuses them.
type updateCounter struct {
	store.Backend
	readOnly bool
	updates  atomic.Int32
}

func (u *updateCounter) Update(ctx context.Context, fn func(store.Tx) error) error {
	u.updates.Add(1)
	if u.readOnly {
		return errReadOnly
	}
	return u.Backend.Update(ctx, fn)
}

// TestNewServerDoesNotWrite: NewServer reads a store at the current format
// and writes nothing to it, whether it is fresh or read-only; a fresh store
// without a format record gets that record and nothing else. The writes a
// server makes of its own accord (the bootstrap knowledge, the receipt
// counts, the purge) come with its first call that uses the store, which
// on a read-only store fails with their error, as Prepare does, each try.
func TestNewServerDoesNotWrite(t *testing.T) {
	ctx := context.Background()

	fresh := &updateCounter{Backend: mem.New()}
	_, err := crux.NewServer(fresh, nil)
	require.NoError(t, err)
	assert.EqualValues(t, 1, fresh.updates.Load(), "a fresh store gets its format recorded, and nothing else")

	current := mem.New()
	_, err = store.UpgradeBackend(ctx, current)
	require.NoError(t, err)
	u := &updateCounter{Backend: current}
	srv, err := crux.NewServer(u, nil)
	require.NoError(t, err)
	assert.NotEmpty(t, srv.ListTools(ctx, alice))
	assert.Zero(t, u.updates.Load(), "NewServer and ListTools wrote to a store at the current format")
	got := call(t, srv, alice, "get_bootstrap", `{}`)
	assert.NotEmpty(t, got)
	assert.Positive(t, u.updates.Load(), "the first call seeds the bootstrap knowledge")

	ro := mem.New()
	_, err = store.UpgradeBackend(ctx, ro)
	require.NoError(t, err)
	r := &updateCounter{Backend: ro, readOnly: true}
	srv, err = crux.NewServer(r, nil)
	require.NoError(t, err, "NewServer on a read-only store")
	assert.Zero(t, r.updates.Load())
	assert.NotEmpty(t, srv.ListTools(ctx, alice))
	_, err = srv.CallTool(ctx, alice, "get_bootstrap", nil)
	var e *crux.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, crux.CodeInternalError, e.Code)
	assert.ErrorIs(t, err, errReadOnly)
	assert.EqualError(t, err, "crux: seeding bootstrap knowledge: the store is read-only (-32603)")
	tries := r.updates.Load()
	assert.ErrorIs(t, srv.Prepare(ctx), errReadOnly)
	assert.Greater(t, r.updates.Load(), tries, "a failed Prepare is tried again")
}

// The kept tool lists (listcache.go).

// listJSON is a tool list as JSON, for comparing bytes.
func listJSON(t testing.TB, list []crux.Tool) string {
	t.Helper()
	b, err := json.Marshal(list)
	require.NoError(t, err)
	return string(b)
}

// setClock sets c to t.
func setClock(c *clock, t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// tokenOptions are options enforcing a free-local token for flags, issued
// at issued for ttl, decided on the router's clock now.
func tokenOptions(t testing.TB, flags crux.Flags, issued time.Time, ttl time.Duration, now func() time.Time) *crux.Options {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	signer := receipts.NewEd25519Signer(priv)
	tok, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{IssuedAt: issued, TTL: ttl, Capabilities: crux.FreeLocalCapabilities(flags)})
	require.NoError(t, err)
	router, err := rcx.NewRouter(tok, signer.Public(), &rcx.RouterOptions{Now: now})
	require.NoError(t, err)
	return &crux.Options{Flags: &flags, Signer: signer, Router: router}
}

// grantRouter is a router of an embedder's that grants every capability
// but those denied at the moment of the decision.
type grantRouter struct {
	mu     sync.Mutex
	denied map[string]bool
}

func (r *grantRouter) deny(caps ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.denied = map[string]bool{}
	for _, c := range caps {
		r.denied[c] = true
	}
}

func (r *grantRouter) Decide(_ context.Context, c rcx.Call) rcx.Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.denied[c.Capability] {
		return rcx.Decision{Mode: rcx.ModeRefused, ReasonCode: rcx.ReasonCapabilityNotPermitted}
	}
	return rcx.Decision{Authorised: true, Mode: rcx.ModeLocal}
}

func (r *grantRouter) Info() rcx.Info {
	return rcx.Info{TokenID: "embedder", TokenHash: "00", Tier: "free", ReceiptClass: "verified"}
}

// declare declares intent for c with cuecrux_session; a refused call (an
// expired token) declares nothing.
func declare(srv *crux.Server, c crux.Caller, intent string) {
	_, _ = srv.CallTool(context.Background(), c, "cuecrux_session", json.RawMessage(`{"intent":"`+intent+`"}`))
}

// TestListToolsIsTheRebuild: on every tool surface, with no router, a
// free-local token, an expired one and an embedder's router, and agent
// passports on and off, every caller (anonymous, two agents, an agent of
// another tenant, an unauthenticated name, a sync replica), before and
// after they declare intents, is listed by ListTools and ListToolsShared
// exactly what a list built afresh holds, byte for byte, asked in turn so
// that each finds the lists of the others kept.
func TestListToolsIsTheRebuild(t *testing.T) {
	ctx := context.Background()
	t0 := time.Now().Add(-time.Minute)
	callers := []crux.Caller{
		anon, alice, bob,
		{Agent: "alice", Authenticated: true, Tenant: "t2"},
		{Agent: "alice"},
		{Agent: "replica-a", Authenticated: true, Replica: true},
	}
	intents := []string{"document_ingest", "audit_review", "knowledge_query", "session_review", "compliance_export", "none of the five"}
	for _, mode := range []crux.Surface{crux.SurfaceFull, crux.SurfaceMinimal, crux.SurfaceDynamic} {
		for _, router := range []string{"none", "free-local", "expired", "embedder"} {
			for _, passports := range []bool{false, true} {
				if passports && mode != crux.SurfaceDynamic {
					continue
				}
				t.Run(fmt.Sprintf("%s/%s/passports=%v", mode, router, passports), func(t *testing.T) {
					flags := crux.DefaultFlags()
					flags.ToolSurface = mode
					flags.AgentPassports = passports
					opts := &crux.Options{Flags: &flags}
					switch router {
					case "free-local":
						opts = tokenOptions(t, flags, t0, time.Hour, nil)
					case "expired":
						opts = tokenOptions(t, flags, t0.Add(-2*time.Hour), time.Hour, nil)
					case "embedder":
						opts.Router = &grantRouter{}
					}
					srv, _ := newServer(t, opts)
					seen := map[string]bool{}
					check := func(round string) {
						for pass := range 2 {
							for i, c := range callers {
								want := listJSON(t, srv.ListToolsUncached(ctx, c))
								assert.Equal(t, want, listJSON(t, srv.ListTools(ctx, c)), "%s, pass %d, caller %d: ListTools", round, pass, i)
								assert.Equal(t, want, listJSON(t, srv.ListToolsShared(ctx, c)), "%s, pass %d, caller %d: ListToolsShared", round, pass, i)
								seen[want] = true
							}
						}
					}
					check("before the intents")
					for i, c := range callers {
						declare(srv, c, intents[i])
					}
					check("after the intents")
					switch {
					case router == "expired":
						assert.Len(t, seen, 1, "an expired token lists nothing to anyone")
					case mode == crux.SurfaceDynamic:
						assert.Greater(t, len(seen), 4, "the intents list differently")
					default:
						assert.Len(t, seen, 2, "a replica and the others")
					}
					assert.LessOrEqual(t, srv.KeptListings(), len(seen))
				})
			}
		}
	}
}

// TestListToolsFollowsTheIntent: under the dynamic surface, a caller's
// list changes as soon as it declares an intent, again when it declares
// another, and back when the intent expires (surface.IntentTTL); another
// caller's list does not change with it.
func TestListToolsFollowsTheIntent(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Now()}
	for _, enforce := range []bool{false, true} {
		flags := crux.DefaultFlags()
		flags.ToolSurface = crux.SurfaceDynamic
		opts := &crux.Options{Flags: &flags}
		if enforce {
			opts = tokenOptions(t, flags, clk.now().Add(-time.Minute), 30*24*time.Hour, clk.now)
		}
		opts.Now = clk.now
		srv, _ := newServer(t, opts)
		list := func(c crux.Caller) string {
			got := listJSON(t, srv.ListTools(ctx, c))
			require.Equal(t, listJSON(t, srv.ListToolsUncached(ctx, c)), got, "enforce=%v: the kept list is the rebuilt one", enforce)
			return got
		}
		base := list(alice)
		require.Equal(t, base, list(bob))
		declare(srv, alice, "session_review")
		session := list(alice)
		assert.NotEqual(t, base, session, "enforce=%v: the intent shapes alice's list", enforce)
		assert.Equal(t, base, list(bob), "enforce=%v: bob declared nothing", enforce)
		declare(srv, alice, "audit_review")
		audit := list(alice)
		assert.NotEqual(t, base, audit, "enforce=%v", enforce)
		assert.NotEqual(t, session, audit, "enforce=%v: another intent, another list", enforce)
		clk.advance(surface.IntentTTL + time.Second)
		assert.Equal(t, base, list(alice), "enforce=%v: the intent expired", enforce)
		assert.Equal(t, base, list(bob), "enforce=%v", enforce)
	}
}

// TestListToolsFollowsTheTokenExpiry: a token that expires while the
// server runs lists nothing from that instant on (its fallback refuses),
// and a clock set back lists it all again.
func TestListToolsFollowsTheTokenExpiry(t *testing.T) {
	ctx := context.Background()
	issued := time.Now().Truncate(time.Second)
	clk := &clock{t: issued.Add(time.Minute)}
	srv, _ := newServer(t, tokenOptions(t, crux.DefaultFlags(), issued, time.Hour, clk.now))
	live := listJSON(t, srv.ListTools(ctx, alice))
	require.NotEqual(t, "[]", live)
	require.Equal(t, listJSON(t, srv.ListToolsUncached(ctx, alice)), live)
	clk.advance(time.Hour)
	assert.Equal(t, "[]", listJSON(t, srv.ListTools(ctx, alice)), "the token has expired")
	assert.Equal(t, "[]", listJSON(t, srv.ListToolsShared(ctx, alice)))
	setClock(clk, issued.Add(time.Minute))
	assert.Equal(t, live, listJSON(t, srv.ListTools(ctx, alice)), "the token is valid again")
}

// TestListToolsFollowsTheRouter: an embedder's router that stops granting
// a capability while the server runs has its tool left out of the next
// list, and listed again once it grants it again.
func TestListToolsFollowsTheRouter(t *testing.T) {
	ctx := context.Background()
	r := &grantRouter{}
	srv, _ := newServer(t, &crux.Options{Router: r})
	names := func() []string {
		var out []string
		for _, tool := range srv.ListTools(ctx, alice) {
			out = append(out, tool.Name)
		}
		assert.Equal(t, listJSON(t, srv.ListToolsUncached(ctx, alice)), listJSON(t, srv.ListToolsShared(ctx, alice)))
		return out
	}
	all := names()
	require.Contains(t, all, "store_fact")
	r.deny(surface.Capability("store_fact"))
	assert.NotContains(t, names(), "store_fact", "store_fact is no longer granted")
	assert.Len(t, names(), len(all)-1)
	r.deny()
	assert.Equal(t, all, names(), "granted again")
}

// TestListToolsKeepsAtMostMaxListings: a router that lists more distinct
// lists than MaxListings leaves the server keeping MaxListings at most,
// each list asked for still the rebuilt one, the first ones included.
func TestListToolsKeepsAtMostMaxListings(t *testing.T) {
	ctx := context.Background()
	r := &grantRouter{}
	srv, _ := newServer(t, &crux.Options{Router: r})
	all := srv.ListTools(ctx, alice)
	require.Greater(t, len(all)*len(all), 2*crux.MaxListings)
	n := 0
	for _, round := range []string{"first", "second"} {
		for i := range all {
			for j := i; j < len(all) && n < 2*crux.MaxListings; j++ {
				r.deny(surface.Capability(all[i].Name), surface.Capability(all[j].Name))
				assert.Equal(t, listJSON(t, srv.ListToolsUncached(ctx, alice)), listJSON(t, srv.ListToolsShared(ctx, alice)), "%s round, denying %d and %d", round, i, j)
				assert.LessOrEqual(t, srv.KeptListings(), crux.MaxListings)
				n++
			}
		}
		n = 0
	}
	assert.Equal(t, crux.MaxListings, srv.KeptListings())
}

// TestListToolsIsTheCallersOwn: what a caller does to the list ListTools
// returned (its schemas, its _meta maps) changes neither the kept list nor
// the next caller's; and the lists stay as they are while callers list,
// declare intents and change grants at once.
func TestListToolsIsTheCallersOwn(t *testing.T) {
	ctx := context.Background()
	flags := crux.DefaultFlags()
	flags.ToolSurface = crux.SurfaceDynamic
	opts := tokenOptions(t, flags, time.Now().Add(-time.Minute), time.Hour, nil)
	srv, _ := newServer(t, opts)
	want := listJSON(t, srv.ListToolsUncached(ctx, alice))
	list := srv.ListTools(ctx, alice)
	require.NotEmpty(t, list)
	for i := range list {
		for j := range list[i].InputSchema {
			list[i].InputSchema[j] = ' '
		}
		if list[i].OutputSchema != nil {
			list[i].OutputSchema[0] = 'x'
		}
		cm := list[i].Meta["crux"].(map[string]any)
		cm["tier"] = "changed"
		cm["token_ref"].(map[string]string)["token_id"] = "changed"
		list[i].Meta["other"] = true
	}
	assert.Equal(t, want, listJSON(t, srv.ListToolsShared(ctx, alice)))
	assert.Equal(t, want, listJSON(t, srv.ListTools(ctx, alice)))

	var wg sync.WaitGroup
	callers := []crux.Caller{alice, bob, anon}
	for g := range 6 {
		wg.Go(func() {
			c := callers[g%len(callers)]
			for i := range 30 {
				switch i % 3 {
				case 0:
					declare(srv, c, []string{"audit_review", "knowledge_query", "session_review"}[(g+i)%3])
				case 1:
					_ = srv.ListTools(ctx, c)
				default:
					_ = listJSON(t, srv.ListToolsShared(ctx, c))
				}
			}
		})
	}
	wg.Wait()
	for _, c := range callers {
		assert.Equal(t, listJSON(t, srv.ListToolsUncached(ctx, c)), listJSON(t, srv.ListToolsShared(ctx, c)))
	}
}
