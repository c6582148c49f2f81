package syncremote_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/syncremote"
)

// The agents' tokens of the tests of replica credentials.
const (
	aliceToken = "alice-agent-token-0123456789"
	bobToken   = "bob-agent-token-0123456789"
)

// replicaEntry is the name of a replica's entry in a token table.
func replicaEntry(name string) string { return "replica::" + name }

// postSync POSTs body to path of r's HTTP endpoint with token and
// returns the status, the decoded error body and the raw answer.
func postSync(t *testing.T, r *replica, token, path, body string) (int, syncremote.ErrorBody, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, r.http.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var eb syncremote.ErrorBody
	json.Unmarshal(raw, &eb)
	return resp.StatusCode, eb, raw
}

// pushAs pushes facts to r as the bearer of token and decodes the answer,
// which must be a 200.
func pushAs(t *testing.T, r *replica, token string, facts ...store.SyncFact) crux.PushResponse {
	t.Helper()
	body, err := json.Marshal(crux.PushRequest{Facts: facts})
	require.NoError(t, err)
	status, _, raw := postSync(t, r, token, syncremote.PathPush, string(body))
	require.Equal(t, http.StatusOK, status, "%s", raw)
	var out crux.PushResponse
	require.NoError(t, json.Unmarshal(raw, &out))
	return out
}

// getFact reads a fact of r's store by id.
func (r *replica) getFact(t *testing.T, id string) *store.Fact {
	t.Helper()
	var f *store.Fact
	require.NoError(t, r.db.View(context.Background(), func(tx store.Tx) error {
		var err error
		f, err = store.GetFact(tx, id)
		return err
	}))
	return f
}

// forgedBalance is agent bob's forgery of alice's fact acct/balance: owned
// by alice, stored in the year 9999, superseding hers.
func forgedBalance(supersedes string) store.SyncFact {
	return store.SyncFact{ID: "f_f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0", Entity: "acct", Key: "balance", Value: "FORGED-0",
		Confidence: 1, StoredAt: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), HorizonClass: "stable",
		Supersedes: supersedes, Owner: "alice"}
}

// An agent's bearer token is no replica's: bob, an agent of the table,
// is refused every request of the sync API, pull included, with -32003
// (403) saying that a replica credential is needed and how to make one,
// and his forged version of alice's fact is not applied. A replica's
// token is refused by /mcp.
func TestAgentTokenIsNotAReplica(t *testing.T) {
	b := newReplica(t, "alice="+aliceToken+" bob="+bobToken+" "+replicaEntry("replica-a")+"="+tokenA)
	orig := call(t, b.srv, alice, "store_fact", `{"entity":"acct","key":"balance","value":"100"}`)
	forged, err := json.Marshal(crux.PushRequest{Facts: []store.SyncFact{forgedBalance(orig["fact_id"].(string))}})
	require.NoError(t, err)

	for path, body := range map[string]string{
		syncremote.PathPush:     string(forged),
		syncremote.PathChanges:  `{"limit":10}`,
		syncremote.PathIdentity: `{}`,
	} {
		status, eb, raw := postSync(t, b, bobToken, path, body)
		assert.Equal(t, http.StatusForbidden, status, "%s: %s", path, raw)
		require.NotNil(t, eb.Error, "%s: %s", path, raw)
		assert.Equal(t, crux.CodeForbidden, eb.Error.Code, path)
		assert.Equal(t, http.StatusForbidden, syncremote.HTTPStatus(eb.Error.Code))
		assert.Contains(t, eb.Error.Message, "bob is an agent, not a replica", path)
		assert.Contains(t, eb.Error.Message, "replica::NAME", path)
		assert.Contains(t, eb.Error.Message, "crux token new --replica NAME", path)
		assert.JSONEq(t, `{"reason":"replica_required"}`, string(eb.Error.Data), path)
	}
	assert.Equal(t, "100", b.current(t, "acct", "balance"), "nothing was applied")
	assert.Equal(t, []string{"100"}, b.history(t, "acct", "balance"))

	// The same in process: an agent caller is refused, a replica served.
	bobCaller := crux.Caller{Agent: "bob", Authenticated: true}
	_, err = b.srv.SyncPush(context.Background(), bobCaller, crux.PushRequest{Facts: []store.SyncFact{forgedBalance(orig["fact_id"].(string))}})
	var ce *crux.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, crux.CodeForbidden, ce.Code)
	_, err = b.srv.SyncChanges(context.Background(), bobCaller, crux.ChangesRequest{Limit: 1})
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "replica_required", ce.Data.(map[string]any)["reason"])
	_, err = b.srv.SyncChanges(context.Background(), crux.Caller{Agent: "replica-a", Authenticated: true, Replica: true}, crux.ChangesRequest{Limit: 1})
	assert.NoError(t, err)

	// The replica's token syncs, and is refused by the MCP endpoint, and
	// a replica caller by every tool.
	status, _, raw := postSync(t, b, tokenA, syncremote.PathChanges, `{"limit":10}`)
	assert.Equal(t, http.StatusOK, status, "%s", raw)
	req, err := http.NewRequest(http.MethodPost, b.http.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+tokenA)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, string(msg), "sync replica's credential")
	e := callErr(t, b.srv, crux.Caller{Agent: "replica-a", Authenticated: true, Replica: true}, "query_facts", `{"entity":"acct"}`)
	assert.Equal(t, crux.CodeForbidden, e.Code)
	assert.Equal(t, "replica_not_agent", e.Data.(map[string]any)["reason"])
	assert.Empty(t, b.srv.ListTools(context.Background(), crux.Caller{Agent: "replica-a", Authenticated: true, Replica: true}))
}

// A crux server whose remote holds an agent's token, not a replica's,
// gets the remote's refusal from sync_pull and sync_push: -32003 with the
// remote's message saying what to use instead.
func TestSyncToolsWithAnAgentTokenSayWhy(t *testing.T) {
	a := newReplica(t, "")
	b := newReplica(t, "alice="+aliceToken)
	a.syncWith(t, b, aliceToken)
	a.withPassport(t, alice, 100)
	for tool, args := range map[string]string{"sync_pull": `{}`, "sync_push": `{"confirm":true}`} {
		e := callErr(t, a.srv, alice, tool, args)
		assert.Equal(t, crux.CodeForbidden, e.Code, tool)
		assert.Contains(t, e.Message, "the remote refused the exchange", tool)
		assert.Contains(t, e.Message, "needs a replica credential", tool)
	}
}

// pushedBy is the owner a version pushed with tokenA has on the replica
// that applied it.
var pushedBy = store.SyncOwner("peer:replica-a")

// A replica cannot speak for an agent: the version it pushes in place of
// alice's fact, naming alice as its owner, is applied (a replica is
// trusted with the tenant's shared facts) but owned by the replica, so
// that nothing says alice wrote it. alice's own version keeps her name.
func TestReplicaCannotForgeTheOwner(t *testing.T) {
	b := newReplica(t, "alice="+aliceToken+" "+replicaEntry("replica-a")+"="+tokenA)
	orig := call(t, b.srv, alice, "store_fact", `{"entity":"acct","key":"balance","value":"100"}`)
	v := forgedBalance(orig["fact_id"].(string))
	v.StoredAt = start.Add(time.Second)
	out := pushAs(t, b, tokenA, v)
	require.Equal(t, 1, out.Applied, "%+v", out.Rejected)
	assert.Equal(t, "FORGED-0", b.current(t, "acct", "balance"))
	assert.Equal(t, pushedBy, b.getFact(t, v.ID).Owner, "the replica, not alice, owns what it pushed")
	assert.Equal(t, "alice", b.getFact(t, orig["fact_id"].(string)).Owner)

	// Also a version that loses a conflict, kept as a retired version.
	loser := forgedBalance("")
	loser.ID, loser.StoredAt, loser.Value = "f_e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0", start, "FORGED-1"
	out = pushAs(t, b, tokenA, loser)
	require.Equal(t, 1, out.Applied, "%+v", out.Rejected)
	require.Len(t, out.Conflicts, 1)
	assert.Equal(t, pushedBy, b.getFact(t, loser.ID).Owner)

	// What the replica is served back names the replica as the owner.
	page, err := b.srv.SyncChanges(context.Background(), crux.Caller{Agent: "replica-a", Authenticated: true, Replica: true}, crux.ChangesRequest{Limit: 10})
	require.NoError(t, err)
	for _, f := range page.Facts {
		if f.ID != orig["fact_id"] {
			assert.Equal(t, pushedBy, f.Owner, f.ID)
		}
	}
}

// A replica cannot store a version in the future: the forgery stored in
// the year 9999 is rejected, with the reason, and alice's version stays
// current; one within store.MaxSyncClockSkew of the server's clock is
// applied, and alice's next write, made by a clock behind it, is not
// stored before the version it follows.
func TestReplicaCannotPushIntoTheFuture(t *testing.T) {
	b := newReplica(t, "alice="+aliceToken+" "+replicaEntry("replica-a")+"="+tokenA)
	orig := call(t, b.srv, alice, "store_fact", `{"entity":"acct","key":"balance","value":"100"}`)
	forged := forgedBalance(orig["fact_id"].(string))
	out := pushAs(t, b, tokenA, forged)
	assert.Equal(t, 0, out.Applied)
	require.Len(t, out.Rejected, 1)
	assert.Equal(t, forged.ID, out.Rejected[0].ID)
	assert.Contains(t, out.Rejected[0].Reason, "stored_at 9999-01-01T00:00:00Z is more than 5m0s after this replica's clock")
	assert.Equal(t, "100", b.current(t, "acct", "balance"))
	assert.Equal(t, []string{"100"}, b.history(t, "acct", "balance"))

	ahead := forgedBalance(orig["fact_id"].(string))
	ahead.StoredAt = start.Add(store.MaxSyncClockSkew)
	out = pushAs(t, b, tokenA, ahead)
	require.Equal(t, 1, out.Applied, "%+v", out.Rejected)
	next := call(t, b.srv, alice, "store_fact", `{"entity":"acct","key":"balance","value":"200"}`)
	stored := b.getFact(t, next["fact_id"].(string)).StoredAt
	assert.False(t, stored.Before(ahead.StoredAt), "alice's version %s is stored before the version %s it follows", stored, ahead.StoredAt)
	assert.Equal(t, "200", b.current(t, "acct", "balance"))
	prev := b.getFact(t, ahead.ID)
	require.NotNil(t, prev.ValidTo)
	assert.False(t, prev.ValidTo.Before(prev.ValidFrom), "the version followed is valid from %s to %s", prev.ValidFrom, prev.ValidTo)
}

// A replica may supersede only what it could have been sent: the shared
// versions of its tenant the change log serves, of the same chain. A
// version naming alice's private fact, another tenant's fact or a fact of
// another chain is rejected with the reason; one naming a version this
// server never held is applied.
func TestReplicaSupersedesOnlyWhatItCouldHaveBeenSent(t *testing.T) {
	b := newReplica(t, "alice="+aliceToken+" "+replicaEntry("replica-a")+"="+tokenA)
	private := call(t, b.srv, alice, "store_fact", `{"entity":"acct","key":"pin","value":"1234","private":true}`)
	globex := call(t, b.srv, crux.Caller{Agent: "carol", Authenticated: true, Tenant: "globex"}, "store_fact", `{"entity":"acct","key":"balance","value":"globex"}`)
	shared := call(t, b.srv, alice, "store_fact", `{"entity":"acct","key":"balance","value":"100"}`)
	other := call(t, b.srv, alice, "store_fact", `{"entity":"acct","key":"limit","value":"5"}`)

	version := func(id, key, supersedes string, at time.Time) store.SyncFact {
		return store.SyncFact{ID: id, Entity: "acct", Key: key, Value: "FORGED", Confidence: 1, StoredAt: at, HorizonClass: "stable", Supersedes: supersedes}
	}
	for _, tc := range []struct {
		name string
		v    store.SyncFact
		want string
	}{
		{"alice's private fact", version("f_a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1", "pin", private["fact_id"].(string), start),
			"supersedes names a version this replica was never sent"},
		{"another tenant's fact, as the loser of a conflict", version("f_a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2", "balance", globex["fact_id"].(string), start.Add(-time.Hour)),
			"supersedes names a version this replica was never sent"},
		{"another tenant's fact, as the winner", version("f_a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3a3", "balance", globex["fact_id"].(string), start.Add(time.Minute)),
			"supersedes names a version this replica was never sent"},
		{"another chain's fact", version("f_a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4", "balance", other["fact_id"].(string), start.Add(time.Minute)),
			"supersedes names a version of another entity or key"},
	} {
		out := pushAs(t, b, tokenA, tc.v)
		assert.Equal(t, 0, out.Applied, tc.name)
		require.Len(t, out.Rejected, 1, tc.name)
		assert.Equal(t, tc.v.ID, out.Rejected[0].ID, tc.name)
		assert.Contains(t, out.Rejected[0].Reason, tc.want, tc.name)
	}
	assert.Equal(t, "100", b.current(t, "acct", "balance"))
	assert.Equal(t, []string{"100"}, b.history(t, "acct", "balance"))
	assert.Equal(t, "globex", b.getFact(t, globex["fact_id"].(string)).Value)

	// A version the sender superseded, never sent here: the chain's
	// conflict rule applies, as before.
	out := pushAs(t, b, tokenA, version("f_a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5", "balance", "f_b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5", start.Add(time.Minute)))
	require.Equal(t, 1, out.Applied, "%+v", out.Rejected)
	require.Len(t, out.Conflicts, 1)
	// And one naming the shared version it follows.
	out = pushAs(t, b, tokenA, version("f_a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6a6", "limit", other["fact_id"].(string), start.Add(time.Minute)))
	require.Equal(t, 1, out.Applied, "%+v", out.Rejected)
	assert.Empty(t, out.Conflicts)
	_ = shared
}
