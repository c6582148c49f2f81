package crux_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/surface"
)

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
