package tools_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// Without a router the hosted tools run: sync_pull says what it lacks.
func TestSyncPullNotConfigured(t *testing.T) {
	srv, _, _ := newTestServer(t)
	res, err := srv.CallTool(context.Background(), alice, "sync_pull", nil)
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Equal(t, "sync not configured: CORECRUXD_SYNC_REMOTE_URL is not set", res.Content[0].Text)
	st := call(t, srv, alice, "sync_status", `{}`)
	assert.Equal(t, "local-only", st["mode"])
	assert.Equal(t, false, st["configured"])
	assert.Empty(t, st["remotes"])
}

// replica is a server for the sync tests: its store, clock and, when
// remote is set, its sync remote.
type replica struct {
	srv *crux.Server
	db  *bolt.DB
	clk *clock
}

func newReplica(t *testing.T, remote crux.Remote, opts ...func(*crux.Options)) *replica {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	clk := &clock{t: start}
	o := &crux.Options{Now: clk.Now, Remote: remote, Signer: newSigner(t)}
	for _, f := range opts {
		f(o)
	}
	srv, err := crux.NewServer(db, o)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return &replica{srv: srv, db: db, clk: clk}
}

// withPassport gives c a passport on r, earned by n receipts.
func (r *replica) withPassport(t *testing.T, c crux.Caller, n int) {
	t.Helper()
	require.NoError(t, r.db.Update(context.Background(), func(tx store.Tx) error {
		return store.PutPassport(tx, &store.Passport{PrincipalID: c.Agent, Tenant: tenant, Tier: store.TierUnverified, IssuedAt: start})
	}))
	earn(t, r.db, tenant, c.Agent, n)
}

// current is the value of the current shared version of (entity, key) on r.
func (r *replica) current(t *testing.T, entity, key string) string {
	t.Helper()
	out := call(t, r.srv, bob, "query_facts", `{"entity":"`+entity+`","key":"`+key+`"}`)
	facts, _ := out["rows"].([]any)
	require.Len(t, facts, 1, "%s/%s: %v", entity, key, facts)
	return facts[0].(map[string]any)["value"].(string)
}

// history is the values of every version of (entity, key) on r.
func (r *replica) history(t *testing.T, entity, key string) []string {
	t.Helper()
	out := call(t, r.srv, bob, "fact_history", `{"entity":"`+entity+`","key":"`+key+`"}`)
	var vs []string
	for _, v := range out["versions"].([]any) {
		vs = append(vs, v.(map[string]any)["value"].(string))
	}
	return vs
}

// peer is the identity a replica uses on another.
var peer = crux.Caller{Agent: "replica-a", Authenticated: true, Replica: true}

// Two servers synced both ways: a pulls b's facts and pushes its own, never
// its private facts or what it pulled, and a chain both wrote is resolved
// alike on both, the later version winning, every version kept.
func TestSyncTwoServersBothWays(t *testing.T) {
	b := newReplica(t, nil)
	a := newReplica(t, crux.ServerRemote(b.srv, peer))
	a.withPassport(t, alice, 100)

	// b holds two facts; a pulls them.
	call(t, b.srv, bob, "store_fact", `{"entity":"project:crux","key":"owner","value":"bob"}`)
	call(t, b.srv, bob, "store_fact", `{"entity":"team:ops","key":"pager","value":"on"}`)
	pulled := call(t, a.srv, alice, "sync_pull", `{}`)
	assert.EqualValues(t, 2, pulled["facts_pulled"])
	assert.Equal(t, false, pulled["more"])
	assert.Equal(t, "bob", a.current(t, "project:crux", "owner"))
	again := call(t, a.srv, alice, "sync_pull", `{}`)
	assert.EqualValues(t, 0, again["facts_pulled"], "the cursor resumes where the last pull stopped")

	// a writes a shared and a private fact; the preview names the shared
	// one only and sends nothing.
	a.clk.Advance(time.Minute)
	mine := call(t, a.srv, alice, "store_fact", `{"entity":"project:crux","key":"lang","value":"Go"}`)
	call(t, a.srv, alice, "store_fact", `{"entity":"project:crux","key":"secret","value":"hunter2","private":true}`)
	preview := call(t, a.srv, alice, "sync_push", `{}`)
	assert.Equal(t, "preview", preview["mode"])
	assert.EqualValues(t, 1, preview["would_promote"])
	assert.EqualValues(t, 2, preview["skipped_synced"], "what a pulled is not pushed back")
	assert.Equal(t, mine["fact_id"], preview["facts"].([]any)[0].(map[string]any)["fact_id"])
	assert.Len(t, preview["preview_hash"], 64)
	assert.Empty(t, call(t, b.srv, bob, "query_facts", `{"entity":"project:crux","key":"lang"}`)["rows"], "a preview pushes nothing")

	pushed := call(t, a.srv, alice, "sync_push", `{"confirm":true}`)
	assert.Equal(t, "push", pushed["mode"])
	assert.EqualValues(t, 1, pushed["facts_pushed"])
	assert.Equal(t, "Go", b.current(t, "project:crux", "lang"))
	assert.Empty(t, call(t, b.srv, bob, "query_facts", `{"query":"hunter2"}`)["rows"], "private facts are never pushed")
	assert.EqualValues(t, 0, call(t, a.srv, alice, "sync_push", `{"confirm":true}`)["facts_pushed"])
	// What b got from a comes back to a as a duplicate, not a new version.
	back := call(t, a.srv, alice, "sync_pull", `{}`)
	assert.EqualValues(t, 0, back["facts_pulled"])
	assert.EqualValues(t, 1, back["duplicates"])

	// Both write lang concurrently: b first, then a. a's pull meets the
	// conflict and keeps its own later version; its push makes b adopt it.
	b.clk.Set(start.Add(2 * time.Minute))
	call(t, b.srv, bob, "store_fact", `{"entity":"project:crux","key":"lang","value":"Rust"}`)
	a.clk.Set(start.Add(3 * time.Minute))
	call(t, a.srv, alice, "store_fact", `{"entity":"project:crux","key":"lang","value":"Zig"}`)
	pulled = call(t, a.srv, alice, "sync_pull", `{}`)
	assert.EqualValues(t, 1, pulled["conflict_count"])
	cf := pulled["conflicts"].([]any)[0].(map[string]any)
	assert.Equal(t, "local", cf["kept"])
	assert.Equal(t, "lang", cf["key"])
	assert.Equal(t, "Zig", a.current(t, "project:crux", "lang"))
	pushed = call(t, a.srv, alice, "sync_push", `{"confirm":true}`)
	assert.EqualValues(t, 1, pushed["conflict_count"])
	assert.Equal(t, "local", pushed["conflicts"].([]any)[0].(map[string]any)["kept"])
	assert.Equal(t, "Zig", b.current(t, "project:crux", "lang"))
	assert.ElementsMatch(t, []string{"Go", "Rust", "Zig"}, a.history(t, "project:crux", "lang"))
	assert.ElementsMatch(t, []string{"Go", "Rust", "Zig"}, b.history(t, "project:crux", "lang"))

	// The other way round: b's later version wins on a's pull.
	a.clk.Set(start.Add(4 * time.Minute))
	call(t, a.srv, alice, "store_fact", `{"entity":"team:ops","key":"pager","value":"off"}`)
	b.clk.Set(start.Add(5 * time.Minute))
	call(t, b.srv, bob, "store_fact", `{"entity":"team:ops","key":"pager","value":"muted"}`)
	pulled = call(t, a.srv, alice, "sync_pull", `{}`)
	assert.Equal(t, "remote", pulled["conflicts"].([]any)[0].(map[string]any)["kept"])
	assert.Equal(t, "muted", a.current(t, "team:ops", "pager"))
	pushed = call(t, a.srv, alice, "sync_push", `{"confirm":true}`)
	assert.Equal(t, "remote", pushed["conflicts"].([]any)[0].(map[string]any)["kept"], "b keeps its later version")
	assert.Equal(t, "muted", b.current(t, "team:ops", "pager"))
	assert.ElementsMatch(t, a.history(t, "team:ops", "pager"), b.history(t, "team:ops", "pager"))

	// A third replica pulling from b gets what a pushed to it, and ends
	// where a and b are.
	c := newReplica(t, crux.ServerRemote(b.srv, crux.Caller{Agent: "replica-c", Authenticated: true, Replica: true}))
	c.withPassport(t, alice, 10)
	call(t, c.srv, alice, "sync_pull", `{}`)
	assert.Equal(t, "Zig", c.current(t, "project:crux", "lang"))
	assert.Equal(t, "muted", c.current(t, "team:ops", "pager"))
	assert.ElementsMatch(t, []string{"Go", "Rust", "Zig"}, c.history(t, "project:crux", "lang"))

	// sync_status tells what a knows, without asking b.
	a.clk.Advance(time.Minute)
	call(t, a.srv, alice, "store_fact", `{"entity":"project:crux","key":"ci","value":"green"}`)
	st := call(t, a.srv, alice, "sync_status", `{}`)
	assert.Equal(t, "manual sync", st["mode"])
	assert.Equal(t, true, st["configured"])
	remotes := st["remotes"].([]any)
	require.Len(t, remotes, 1)
	r := remotes[0].(map[string]any)
	assert.Contains(t, r["remote"], "crux:p_")
	assert.EqualValues(t, 1, r["pending_push"])
	assert.NotNil(t, r["last_pull_at"])
	assert.NotNil(t, r["last_push_at"])
	assert.EqualValues(t, 4, r["conflict_count"])
	assert.Contains(t, r["pull_cursors"], "")
}

// The passport tiers gate the tools: basic to pull, established to push.
func TestSyncPassportTiers(t *testing.T) {
	b := newReplica(t, nil)
	a := newReplica(t, crux.ServerRemote(b.srv, peer))
	for _, tool := range []string{"sync_pull", "sync_push"} {
		e := callErr(t, a.srv, anon, tool, `{}`)
		assert.Equal(t, crux.CodeForbidden, e.Code)
		e = callErr(t, a.srv, alice, tool, `{}`)
		assert.Equal(t, crux.CodeForbidden, e.Code)
		assert.Contains(t, e.Message, "no passport")
	}
	a.withPassport(t, alice, 10)
	call(t, a.srv, alice, "sync_pull", `{}`)
	e := callErr(t, a.srv, alice, "sync_push", `{}`)
	assert.Equal(t, crux.CodeForbidden, e.Code)
	assert.Equal(t, "established", e.Data.(map[string]any)["required_tier"])
	earn(t, a.db, tenant, "alice", 90)
	call(t, a.srv, alice, "sync_push", `{}`)
}

func TestSyncArguments(t *testing.T) {
	b := newReplica(t, nil)
	a := newReplica(t, crux.ServerRemote(b.srv, peer))
	a.withPassport(t, alice, 100)
	e := callErr(t, a.srv, alice, "sync_pull", `{"tenant_id":"globex"}`)
	assert.Equal(t, crux.CodeForbidden, e.Code)
	e = callErr(t, a.srv, alice, "sync_pull", `{"entity_prefix":"__agent::"}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	e = callErr(t, a.srv, alice, "sync_push", `{"allowlist":["constraints"]}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, "allowlist.0")
	call(t, a.srv, alice, "sync_push", `{"allowlist":["*"],"tenant_id":"default"}`)

	// An allowlist pushes what it names and holds the cursor before what it
	// leaves out, so a wider push later still sends it.
	call(t, a.srv, alice, "store_fact", `{"entity":"ops:x","key":"k","value":"1"}`)
	call(t, a.srv, alice, "store_fact", `{"entity":"project:y","key":"k","value":"2"}`)
	p := call(t, a.srv, alice, "sync_push", `{"confirm":true,"allowlist":["entity:project:"]}`)
	assert.EqualValues(t, 1, p["facts_pushed"])
	assert.EqualValues(t, 1, p["skipped_not_allowlisted"])
	p = call(t, a.srv, alice, "sync_push", `{"confirm":true}`)
	assert.EqualValues(t, 1, p["facts_pushed"])
	assert.EqualValues(t, 1, p["duplicates"], "project:y is sent again and counted as a duplicate")
	assert.EqualValues(t, 0, call(t, a.srv, alice, "sync_push", `{"confirm":true}`)["facts_pushed"])

	// entity_prefix pulls only those entities, with a cursor of its own.
	call(t, b.srv, bob, "store_fact", `{"entity":"ops:z","key":"k","value":"3"}`)
	call(t, b.srv, bob, "store_fact", `{"entity":"docs:z","key":"k","value":"4"}`)
	p = call(t, a.srv, alice, "sync_pull", `{"entity_prefix":"docs:"}`)
	assert.EqualValues(t, 1, p["facts_pulled"])
	assert.EqualValues(t, 1, p["collection_cursor_count"])
	p = call(t, a.srv, alice, "sync_pull", `{}`)
	assert.EqualValues(t, 1, p["facts_pulled"], "ops:z; docs:z is a duplicate")
	assert.EqualValues(t, 2, p["collection_cursor_count"])
}

// failingRemote fails every call after its identity.
type failingRemote struct{ crux.Remote }

func (failingRemote) Changes(context.Context, crux.ChangesRequest) (*crux.ChangesResponse, error) {
	return nil, errors.New("connection refused")
}

func TestSyncRemoteFailure(t *testing.T) {
	b := newReplica(t, nil)
	a := newReplica(t, failingRemote{crux.ServerRemote(b.srv, peer)})
	a.withPassport(t, alice, 10)
	assert.Contains(t, toolError(t, a.srv, alice, "sync_pull", `{}`), "connection refused")
	st := call(t, a.srv, alice, "sync_status", `{}`)
	assert.Equal(t, "degraded", st["mode"])
	r := st["remotes"].([]any)[0].(map[string]any)
	assert.Equal(t, true, r["failing"])
	assert.Contains(t, r["last_error"], "connection refused")
}

// pushFailsAfter is a remote whose pushes fail after the first n.
type pushFailsAfter struct {
	crux.Remote
	n int
}

func (r *pushFailsAfter) Push(ctx context.Context, req crux.PushRequest) (*crux.PushResponse, error) {
	if r.n == 0 {
		return nil, errors.New("connection reset")
	}
	r.n--
	return r.Remote.Push(ctx, req)
}

// A push that fails after a page says how many versions it had sent.
func TestSyncPushFailsMidway(t *testing.T) {
	b := newReplica(t, nil)
	a := newReplica(t, &pushFailsAfter{crux.ServerRemote(b.srv, peer), 1})
	a.withPassport(t, alice, 100)
	for i := range 300 { // two pages
		call(t, a.srv, alice, "store_fact", fmt.Sprintf(`{"entity":"e","key":"k%d","value":"v"}`, i))
	}
	msg := toolError(t, a.srv, alice, "sync_push", `{"confirm":true}`)
	assert.Contains(t, msg, "connection reset")
	assert.Contains(t, msg, "(250 versions were sent before it failed;")
}

// The serving side refuses anonymous replicas and bad cursors.
func TestSyncServing(t *testing.T) {
	b := newReplica(t, nil)
	ctx := context.Background()
	_, err := b.srv.SyncChanges(ctx, anon, crux.ChangesRequest{Limit: 10})
	var ce *crux.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, crux.CodeForbidden, ce.Code)
	_, err = b.srv.SyncChanges(ctx, peer, crux.ChangesRequest{Cursor: "x", Limit: 10})
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, crux.CodeInvalidParams, ce.Code)
	_, err = b.srv.SyncChanges(ctx, peer, crux.ChangesRequest{Limit: 0})
	require.ErrorAs(t, err, &ce)

	// A pushed batch with bad versions applies the good ones and says why
	// it refused the others.
	good := store.SyncFact{ID: "f_0123456789abcdef0123456789abcdef", Entity: "e", Key: "k", Value: "v", Confidence: 1, StoredAt: start}
	bad := []store.SyncFact{
		{ID: "nope", Entity: "e", Key: "k2", StoredAt: start},
		{ID: "f_1123456789abcdef0123456789abcdef", Entity: "__bootstrap__::x", Key: "k", StoredAt: start},
		{ID: "f_2123456789abcdef0123456789abcdef", Entity: "e", Key: "k3", Confidence: 2, StoredAt: start},
	}
	resp, err := b.srv.SyncPush(ctx, peer, crux.PushRequest{Facts: append(bad, good)})
	require.NoError(t, err)
	assert.Equal(t, 1, resp.Applied)
	assert.Len(t, resp.Rejected, 3)
	assert.Equal(t, "v", b.current(t, "e", "k"))
	resp, err = b.srv.SyncPush(ctx, peer, crux.PushRequest{Facts: []store.SyncFact{good}})
	require.NoError(t, err)
	assert.Equal(t, 1, resp.Duplicates)

	page, err := b.srv.SyncChanges(ctx, peer, crux.ChangesRequest{Limit: 10})
	require.NoError(t, err)
	require.Len(t, page.Facts, 1)
	assert.Equal(t, good.ID, page.Facts[0].ID)
	assert.Equal(t, "1", page.Cursor)
}

// The hosted tier stays: a free-local token refuses sync_pull before it
// runs; a token that grants it lets it run.
func TestSyncHostedTier(t *testing.T) {
	b := newReplica(t, nil)
	signer := newSigner(t)
	mint := func(extra ...string) rcx.Router {
		caps := append(crux.FreeLocalCapabilities(crux.DefaultFlags()), extra...)
		tok, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{Tenant: tenant, IssuedAt: time.Now(), Capabilities: caps})
		require.NoError(t, err)
		r, err := rcx.NewRouter(tok, signer.Public(), nil)
		require.NoError(t, err)
		return r
	}
	free := newReplica(t, crux.ServerRemote(b.srv, peer), func(o *crux.Options) { o.Signer, o.Router = signer, mint() })
	free.withPassport(t, alice, 100)
	for _, tool := range []string{"sync_pull", "sync_push"} {
		e := callErr(t, free.srv, alice, tool, `{}`)
		assert.Equal(t, crux.CodeCapabilityDenied, e.Code, tool)
	}
	assert.NotContains(t, names(free.srv.ListTools(context.Background(), alice)), "sync_pull")
	assert.Contains(t, names(free.srv.ListTools(context.Background(), alice)), "sync_status")

	granted := newReplica(t, crux.ServerRemote(b.srv, peer), func(o *crux.Options) {
		o.Signer, o.Router = signer, mint("crux-mcp.sync_pull", "crux-mcp.sync_push")
	})
	granted.withPassport(t, alice, 100)
	call(t, b.srv, bob, "store_fact", `{"entity":"e","key":"k","value":"v"}`)
	assert.EqualValues(t, 1, call(t, granted.srv, alice, "sync_pull", `{}`)["facts_pulled"])
	assert.Equal(t, "preview", call(t, granted.srv, alice, "sync_push", `{}`)["mode"])
	assert.Contains(t, names(granted.srv.ListTools(context.Background(), alice)), "sync_pull")
}

func names(list []crux.Tool) []string {
	var out []string
	for _, t := range list {
		out = append(out, t.Name)
	}
	return out
}

// forgingRemote serves one page of the versions it holds.
type forgingRemote struct{ facts []store.SyncFact }

func (forgingRemote) Identity(context.Context) (crux.RemoteIdentity, error) {
	return crux.RemoteIdentity{Name: "crux:forger", Tenant: tenant}, nil
}

func (r forgingRemote) Changes(context.Context, crux.ChangesRequest) (*crux.ChangesResponse, error) {
	return &crux.ChangesResponse{Facts: r.facts, Cursor: "1"}, nil
}

func (forgingRemote) Push(context.Context, crux.PushRequest) (*crux.PushResponse, error) {
	return nil, errors.New("not used")
}

// What a pulled remote sends is held to the same rules as what a replica
// pushes: a version stored in the far future is rejected and listed in
// sync_pull's rejected, and the one applied is owned by the remote, not
// by the agent it names.
func TestSyncPullHoldsTheRemoteToWhatItMayAssert(t *testing.T) {
	far := store.SyncFact{ID: "f_40000000000000000000000000000001", Entity: "acct", Key: "balance", Value: "FORGED-0", Confidence: 1,
		StoredAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), Owner: "alice"}
	near := store.SyncFact{ID: "f_40000000000000000000000000000002", Entity: "acct", Key: "limit", Value: "5", Confidence: 1,
		StoredAt: start, Owner: "alice"}
	a := newReplica(t, forgingRemote{facts: []store.SyncFact{far, near}})
	a.withPassport(t, alice, 10)
	out := call(t, a.srv, alice, "sync_pull", `{}`)
	assert.EqualValues(t, 1, out["facts_pulled"])
	rejected := out["rejected"].([]any)
	require.Len(t, rejected, 1)
	assert.Equal(t, far.ID, rejected[0].(map[string]any)["fact_id"])
	assert.Contains(t, rejected[0].(map[string]any)["reason"], "stored_at 9999-01-01T00:00:00Z is more than 5m0s after this replica's clock")
	assert.Empty(t, call(t, a.srv, alice, "query_facts", `{"entity":"acct","key":"balance"}`)["rows"])
	require.NoError(t, a.db.View(context.Background(), func(tx store.Tx) error {
		f, err := store.GetFact(tx, near.ID)
		if err == nil {
			assert.Equal(t, "sync::crux:forger", f.Owner)
		}
		return err
	}))
}
