package mcpserver

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/surface"
)

// listingServer is a crux server over a fresh store with the dynamic tool
// surface, enforcing a free-local token signed with a key of its own when
// enforce is set.
func listingServer(t *testing.T, enforce bool) *crux.Server {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	flags := crux.DefaultFlags()
	flags.ToolSurface = crux.SurfaceDynamic
	opts := &crux.Options{Flags: &flags}
	if enforce {
		_, priv, err := ed25519.GenerateKey(nil)
		require.NoError(t, err)
		signer := receipts.NewEd25519Signer(priv)
		tok, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{Capabilities: crux.FreeLocalCapabilities(flags)})
		require.NoError(t, err)
		opts.Signer = signer
		opts.Router, err = rcx.NewRouter(tok, signer.Public(), nil)
		require.NoError(t, err)
	}
	srv, err := crux.NewServer(db, opts)
	require.NoError(t, err)
	return srv
}

// switchBackend forwards to one of its backends, the one cur names, as a
// Backend whose token or surface changes between two requests would.
type switchBackend struct {
	bs  []Backend
	cur atomic.Int32
}

func (s *switchBackend) ListTools(ctx context.Context, c crux.Caller) ([]crux.Tool, error) {
	return s.bs[s.cur.Load()].ListTools(ctx, c)
}

func (s *switchBackend) CallTool(ctx context.Context, c crux.Caller, name string, args json.RawMessage) (*crux.Result, error) {
	return s.bs[s.cur.Load()].CallTool(ctx, c, name, args)
}

// freshList is the tools/list reply, to a request of the given id, of a new
// session over b: made by an adapter that has answered nothing before.
func freshList(t *testing.T, ctx context.Context, b Backend, id string) string {
	t.Helper()
	s := startSession(t, ctx, b, true)
	defer s.close()
	s.send(initLine("2025-06-18"))
	s.await(`"init"`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"}`)
	return s.await(id)
}

// TestListCacheFollowsTheBackend: a session whose backend lists other
// tools from one request to the next (another token, no token, another
// surface) gets, at each tools/list, the reply a new session over that
// backend gets, byte for byte: the reply of an earlier list is never sent
// again once the list has changed.
func TestListCacheFollowsTheBackend(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tokenA, tokenB, none := listingServer(t, true), listingServer(t, true), listingServer(t, false)
	sw := &switchBackend{bs: []Backend{Local(tokenA), Local(tokenB), Local(none)}}
	want := make([]string, len(sw.bs))
	for i, b := range sw.bs {
		want[i] = freshList(t, ctx, b, "7")
	}
	require.NotEqual(t, want[0], want[1], "two tokens list differently")
	require.NotEqual(t, want[0], want[2], "a token and none list differently")
	require.NotEqual(t, want[1], want[2])

	s := startSession(t, ctx, sw, true)
	defer s.close()
	s.send(initLine("2025-06-18"))
	s.await(`"init"`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for n, i := range []int32{0, 0, 1, 1, 0, 2, 2, 1, 0} {
		sw.cur.Store(i)
		id := fmt.Sprint(n + 100)
		s.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"}`)
		got := s.await(id)
		assert.Equal(t, want[i][len(`{"jsonrpc":"2.0","id":7`):], got[len(`{"jsonrpc":"2.0","id":`+id):], "request %d, backend %d", n, i)
	}
}

// TestListCacheFollowsTheSurface: under the dynamic surface, once the
// caller declares an intent its next tools/list is the one a new session
// gets, and not the list the session was answered before.
func TestListCacheFollowsTheSurface(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, enforce := range []bool{false, true} {
		b := Local(listingServer(t, enforce))
		before := freshList(t, ctx, b, "1")
		s := startSession(t, ctx, b, true)
		s.send(initLine("2025-06-18"))
		s.await(`"init"`)
		s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		assert.Equal(t, before, s.await("1"), "enforce=%v: the first list", enforce)
		s.send(callLine("2", `{"name":"cuecrux_session","arguments":{"intent":"session_review"}}`))
		s.await("2")
		s.send(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
		got := s.await("3")
		s.close()
		after := freshList(t, ctx, b, "3")
		assert.NotEqual(t, before[len(`{"jsonrpc":"2.0","id":1`):], after[len(`{"jsonrpc":"2.0","id":3`):], "enforce=%v: the intent changes the list", enforce)
		assert.Equal(t, after, got, "enforce=%v: the list after the intent", enforce)
	}
}

// TestSameValue: the comparison of two tools' _meta is reflect.DeepEqual's,
// a nil map and an empty one included (they encode as null and {}).
func TestSameValue(t *testing.T) {
	type upgrade struct{ Requires, Docs string }
	vals := []any{
		nil,
		"free",
		"hosted",
		map[string]any(nil),
		map[string]any{},
		map[string]any{"tier": "free"},
		map[string]any{"tier": "hosted"},
		map[string]any{"tier": "free", "x": nil},
		map[string]any{"ref": map[string]string(nil)},
		map[string]any{"ref": map[string]string{}},
		map[string]any{"ref": map[string]string{"token_id": "a"}},
		map[string]any{"ref": map[string]string{"token_id": "b"}},
		map[string]any{"ref": map[string]any{"token_id": "a"}},
		map[string]any{"up": upgrade{"rcx", "d"}},
		map[string]any{"up": upgrade{"rcx", "e"}},
		map[string]string{"tier": "free"},
		1,
	}
	for i, a := range vals {
		for j, b := range vals {
			assert.Equal(t, i == j, sameValue(a, b), "%d %#v vs %d %#v", i, a, j, b)
			assert.Equal(t, reflect.DeepEqual(a, b), sameValue(a, b), "%#v vs %#v", a, b)
		}
	}
	assert.True(t, sameValue(map[string]any{"a": map[string]any{"b": "c"}}, map[string]any{"a": map[string]any{"b": "c"}}))
}

// failingLister is a Backend whose ListTools fails with err.
type failingLister struct {
	scriptedBackend
	err error
}

func (b *failingLister) ListTools(context.Context, crux.Caller) ([]crux.Tool, error) {
	return nil, b.err
}

// listLines are the tools/list requests TestDirectListIsTheSDKs sends, by
// id, with whether the direct path takes them.
var listLines = []struct {
	id, line string
	direct   bool
}{
	{`1`, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, true},
	{`"b"`, `{"jsonrpc":"2.0","id":"b","method":"tools/list","params":{}}`, true},
	{`3`, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params": { } }`, true},
	{`4`, `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"cursor":"x"}}`, false},
	{`5`, `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"progressToken":1}}}`, false},
	{`6`, `{"jsonrpc":"2.0","id":6,"method":"tools/list","params":null}`, false},
	{`"<&>"`, `{"jsonrpc":"2.0","id":"<&>","method":"tools/list"}`, true},
	{`8`, `{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, false},
}

// runList sends listLines on a session over b, with the direct path on or
// off, and returns the replies by id and how many the direct path
// answered.
func runList(t *testing.T, b Backend, version string, direct bool) (map[string]string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := startSession(t, ctx, b, direct)
	s.send(`{"jsonrpc":"2.0","id":"early","method":"tools/list"}`)
	s.await(`"early"`)
	s.send(initLine(version))
	s.await(`"init"`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	for _, l := range listLines {
		s.send(l.line)
		s.await(l.id) // one at a time, so that the cache is used
	}
	s.close()
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	require.Empty(t, s.f.pending)
	require.Empty(t, s.f.calls)
	return s.replies(), s.f.directed
}

// TestDirectListIsTheSDKs: a tools/list answered by the stdio transport
// itself, from the cached listing, is the SDK's answer byte for byte, for
// every protocol version, with and without a token, and when the backend
// fails; a list with a cursor or a _meta is the SDK's to answer.
func TestDirectListIsTheSDKs(t *testing.T) {
	wantDirect := 0
	for _, l := range listLines {
		if l.direct {
			wantDirect++
		}
	}
	backends := map[string]Backend{
		"none":     Local(listingServer(t, false)),
		"token":    Local(listingServer(t, true)),
		"internal": &failingLister{err: errors.New("backend down")},
		"refused":  &failingLister{err: &crux.Error{Code: crux.CodeCapabilityDenied, Message: "no <list> & more", Data: map[string]any{"why": "a<b"}}},
	}
	for name, b := range backends {
		for _, version := range []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"} {
			t.Run(name+"/"+version, func(t *testing.T) {
				viaSDK, n := runList(t, b, version, false)
				require.Zero(t, n)
				direct, n := runList(t, b, version, true)
				assert.Equal(t, wantDirect, n, "lists answered on the direct path")
				require.Len(t, viaSDK, len(listLines)+2)
				for id, want := range viaSDK {
					assert.Equal(t, want, direct[id], "id %s", id)
				}
				assert.Len(t, direct, len(viaSDK))
				if name == "token" {
					assert.Contains(t, direct["1"], `"tools":[{`, "a listing")
				}
			})
		}
	}
}

// denyRouter grants every capability but the one it denies at the moment
// of the decision, as an embedder's router whose grants change might.
type denyRouter struct{ denied atomic.Value } // string

func (r *denyRouter) Decide(_ context.Context, c rcx.Call) rcx.Decision {
	if d, _ := r.denied.Load().(string); d == c.Capability {
		return rcx.Decision{Mode: rcx.ModeRefused, ReasonCode: rcx.ReasonCapabilityNotPermitted}
	}
	return rcx.Decision{Authorised: true, Mode: rcx.ModeLocal}
}

func (r *denyRouter) Info() rcx.Info {
	return rcx.Info{TokenID: "embedder", TokenHash: "00", Tier: "free", ReceiptClass: "verified"}
}

// TestListCacheFollowsTheServer: over Local, whose lists are the crux
// server's shared ones, a session whose server stops granting a tool, and
// grants it again, gets at each tools/list the reply a new session gets
// then, byte for byte; so does a session over a server that has built more
// lists than it keeps (crux.MaxListings), and so builds one it answered
// before anew.
func TestListCacheFollowsTheServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	r := &denyRouter{}
	r.denied.Store("")
	srv, err := crux.NewServer(db, &crux.Options{Router: r})
	require.NoError(t, err)
	b := Local(srv)
	caps := []string{"", surface.Capability("store_fact"), surface.Capability("query_facts")}
	want := make([]string, len(caps))
	for i, c := range caps {
		r.denied.Store(c)
		want[i] = freshList(t, ctx, b, "7")
	}
	require.NotEqual(t, want[0], want[1])
	require.NotEqual(t, want[1], want[2])

	s := startSession(t, ctx, b, true)
	defer s.close()
	s.send(initLine("2025-06-18"))
	s.await(`"init"`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	sdk := startSession(t, ctx, b, false)
	defer sdk.close()
	sdk.send(initLine("2025-06-18"))
	sdk.await(`"init"`)
	sdk.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	list := func(n, i int) {
		t.Helper()
		r.denied.Store(caps[i])
		id := fmt.Sprint(n + 100)
		for k, s := range []*session{s, sdk} {
			s.send(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list"}`)
			got := s.await(id)
			assert.Equal(t, want[i][len(`{"jsonrpc":"2.0","id":7`):], got[len(`{"jsonrpc":"2.0","id":`+id):], "request %d, denying %q, %s", n, caps[i], []string{"direct", "via the SDK"}[k])
		}
	}
	for n, i := range []int{0, 0, 1, 1, 0, 2, 2, 1, 0} {
		list(n, i)
	}
	// Every tool denied in turn: more lists than the server keeps, so
	// that the next is built anew, a slice the sessions have not seen.
	tools := srv.ListTools(ctx, crux.Caller{})
	require.Greater(t, len(tools)+len(caps), crux.MaxListings)
	for _, tool := range tools {
		r.denied.Store(surface.Capability(tool.Name))
		srv.ListToolsShared(ctx, crux.Caller{})
	}
	list(20, 0)
	list(21, 1)
	list(22, 0)
}
