package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
)

// TestForwardedListFollowsTheOwner: under the dynamic surface, a
// forwarded tools/list is at every request what the owner's crux.Server
// lists in-process, byte for byte: before an intent, after the caller
// declares one and after it declares another, while another caller's list
// stays as it was; the list held by the forwarding process is served again
// only when the owner says it is the caller's list still.
func TestForwardedListFollowsTheOwner(t *testing.T) {
	ctx := context.Background()
	env := []string{"CORECRUXD_TOOL_SURFACE=dynamic"}
	h, fwd := ownedHost(t, env)
	srv, err := h.server(env)
	require.NoError(t, err)
	alice := crux.Caller{Agent: "alice", Authenticated: true}
	bob := crux.Caller{Agent: "bob", Authenticated: true}
	check := func(c crux.Caller, what string) string {
		t.Helper()
		want, err := json.Marshal(srv.ListTools(ctx, c))
		require.NoError(t, err)
		for range 2 { // the second from the list held
			list, err := fwd.ListTools(ctx, c)
			require.NoError(t, err)
			got, err := json.Marshal(list)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got), "%s: %s", c.Agent, what)
		}
		return string(want)
	}
	base := check(alice, "no intent")
	assert.Equal(t, base, check(bob, "no intent"))
	for _, intent := range []string{"session_review", "audit_review"} {
		_, err := fwd.CallTool(ctx, alice, "cuecrux_session", json.RawMessage(`{"intent":"`+intent+`"}`))
		require.NoError(t, err)
		assert.NotEqual(t, base, check(alice, intent), "the intent shapes alice's list")
		assert.Equal(t, base, check(bob, intent), "bob declared nothing")
	}
}

// TestOwnerListAnswer: the owner answers a tools/list whose Have is the
// sum of the caller's list as of the request with null, and any other (no
// Have, as a forwarding process that does not know it sends, or the sum of
// another list) with the list in full, as the owner's server lists it.
func TestOwnerListAnswer(t *testing.T) {
	ctx := context.Background()
	h, _ := ownedHost(t, nil)
	srv, err := h.server(nil)
	require.NoError(t, err)
	full, err := marshal(srv.ListTools(ctx, crux.Caller{}))
	require.NoError(t, err)
	answer := func(have string) string {
		t.Helper()
		raw, err := json.Marshal(listReq{Have: have})
		require.NoError(t, err)
		out, err := h.Handle(ctx, opList, raw)
		require.NoError(t, err)
		return string(out)
	}
	assert.Equal(t, string(full), answer(""))
	assert.Equal(t, "null", answer(listSum(full)))
	assert.Equal(t, string(full), answer(listSum([]byte("[]"))))
	assert.Equal(t, string(full), answer("not a sum"))
	empty, err := json.Marshal(listReq{Caller: wireCaller{Agent: "r", Authenticated: true, Replica: true}, Have: listSum(full)})
	require.NoError(t, err)
	out, err := h.Handle(ctx, opList, empty)
	require.NoError(t, err)
	assert.Equal(t, "[]", string(out), "a replica is listed nothing, whatever it held")
}

// TestListCachesAreBounded: an owner keeps at most maxListAnswers encoded
// lists, and a forwarding process the lists of at most maxForwardedLists
// callers, however many it is asked for; each answer is still the list.
func TestListCachesAreBounded(t *testing.T) {
	ctx := context.Background()
	var la listAnswers
	for i := range maxListAnswers + 10 {
		list := []crux.Tool{{Name: fmt.Sprint("t", i), InputSchema: json.RawMessage(`{}`)}}
		a, err := la.of(list)
		require.NoError(t, err)
		want, err := marshal(list)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(a.raw))
		assert.Equal(t, listSum(want), a.sum)
		assert.LessOrEqual(t, len(la.m), maxListAnswers)
	}

	h, fwd := ownedHost(t, nil)
	srv, err := h.server(nil)
	require.NoError(t, err)
	want, err := json.Marshal(srv.ListTools(ctx, crux.Caller{}))
	require.NoError(t, err)
	for i := range maxForwardedLists + 10 {
		list, err := fwd.ListTools(ctx, crux.Caller{Agent: fmt.Sprint("agent", i), Authenticated: true})
		require.NoError(t, err)
		got, err := json.Marshal(list)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got))
		fwd.lists.mu.Lock()
		n := len(fwd.lists.m)
		fwd.lists.mu.Unlock()
		assert.LessOrEqual(t, n, maxForwardedLists)
	}
}

// TestForwardedListFollowsAServerMadeAgain: when the owner drops the
// server of a forwarding process's flags and makes it again (with a token
// minted anew), the forwarded list is the new server's, byte for byte.
func TestForwardedListFollowsAServerMadeAgain(t *testing.T) {
	ctx := context.Background()
	env := []string{"CORECRUXD_TOOL_SURFACE=minimal"}
	h, fwd := ownedHost(t, env)
	alice := crux.Caller{Agent: "alice", Authenticated: true}
	for round := range 3 {
		srv, err := h.server(env)
		require.NoError(t, err)
		want, err := json.Marshal(srv.ListTools(ctx, alice))
		require.NoError(t, err)
		for range 2 {
			list, err := fwd.ListTools(ctx, alice)
			require.NoError(t, err)
			got, err := json.Marshal(list)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got), "round %d", round)
		}
		h.mu.Lock()
		clear(h.servers)
		h.mu.Unlock()
		time.Sleep(time.Second) // a token minted in another second
	}
}
