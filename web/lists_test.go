package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/tools"
	"github.com/crux-go/crux/web"
)

// getJSON fetches the JSON twin of path as token and decodes it.
func getJSON[T any](t *testing.T, f *fixture, path, token string) T {
	t.Helper()
	code, _, body := f.get(t, path, token, "application/json")
	require.Equal(t, http.StatusOK, code, "%s: %s", path, body)
	var out T
	require.NoError(t, json.Unmarshal([]byte(body), &out), body)
	return out
}

func TestQueryPageShowsLanes(t *testing.T) {
	f := newFixture(t, lookup)
	_, err := f.srv.Ingest(context.Background(), crux.DefaultTenant, []crux.Document{
		{ID: "doc-lighthouse", Title: "Lighthouses", Text: "The lighthouse keeper trims the lamp wick every evening."},
		{ID: "doc-bread", Title: "Bread", Text: "Knead the dough and let it rise overnight."},
	}, nil)
	require.NoError(t, err)

	p := getJSON[web.QueryPage](t, f, "/ui/query?q=lighthouse+lamp", "alice-token")
	require.NotNil(t, p.Output)
	want := call[tools.QueryOutput](t, f.srv, alice, "query", map[string]any{"tenant_id": "default", "query": "lighthouse lamp", "limit": 10})
	require.Equal(t, want.Results, p.Output.Results, "the page's results are query's")
	require.NotEmpty(t, p.Output.Results)
	require.Equal(t, "doc-lighthouse", p.Output.Results[0].DocID)
	require.NotEmpty(t, p.Output.Results[0].Lanes)

	code, _, body := f.get(t, "/ui/query?q=lighthouse+lamp", "alice-token", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `<span class="tag lane">`+p.Output.Results[0].Lanes[0]+`</span>`)
	require.Contains(t, body, "Lighthouses")

	for _, bad := range []string{"limit=0", "limit=101", "limit=x"} {
		code, _, _ := f.get(t, "/ui/query?q=a&"+bad, "alice-token", "application/json")
		require.Equal(t, http.StatusBadRequest, code, bad)
	}
	// Another tenant's documents are not carol's.
	tokens["carol-token"] = crux.Caller{Agent: "carol", Authenticated: true, Tenant: "acme"}
	t.Cleanup(func() { delete(tokens, "carol-token") })
	p = getJSON[web.QueryPage](t, f, "/ui/query?q=lighthouse+lamp", "carol-token")
	require.Empty(t, p.Output.Results)
}

func TestSessionsPagedAndOwn(t *testing.T) {
	f := newFixture(t, lookup)
	n := web.ListPerPage + 5
	for i := range n {
		call[tools.SaveSessionOutput](t, f.srv, alice, "save_session", map[string]any{"session_id": fmt.Sprintf("s%03d", i), "state": map[string]any{"step": i}})
	}
	call[tools.SaveSessionOutput](t, f.srv, bob, "save_session", map[string]any{"session_id": "bobs-session", "state": map[string]any{"secret": "bobs-session-state"}})

	first := getJSON[web.SessionsPage](t, f, "/ui/sessions", "alice-token")
	require.Len(t, first.Sessions, web.ListPerPage)
	require.NotEmpty(t, first.Next)
	second := getJSON[web.SessionsPage](t, f, first.Next, "alice-token")
	require.Len(t, second.Sessions, 5)
	require.Empty(t, second.Next)
	require.Equal(t, "s000", first.Sessions[0])
	require.NotContains(t, append(first.Sessions, second.Sessions...), "bobs-session")

	s := getJSON[tools.GetSessionOutput](t, f, "/ui/session?id=s007", "alice-token")
	require.JSONEq(t, `{"step":7}`, string(s.State))
	code, _, body := f.get(t, "/ui/session?id=bobs-session", "alice-token", "")
	require.NotEqual(t, http.StatusOK, code)
	require.NotContains(t, body, "bobs-session-state")
	code, _, body = f.get(t, "/ui/session?id=bobs-session", "bob-token", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "bobs-session-state")
}

func TestDecisionsAndPassport(t *testing.T) {
	f := newFixture(t, lookup)
	call[map[string]any](t, f.srv, alice, "record_decision", map[string]any{"session_id": "plan", "action": "ship the web view", "rationale": "people asked"})
	call[map[string]any](t, f.srv, bob, "record_decision", map[string]any{"session_id": "other", "action": "write the docs", "rationale": "nobody reads code"})
	p := getJSON[web.DecisionsPage](t, f, "/ui/decisions", "alice-token")
	require.Len(t, p.Decisions, 2)
	actions := []string{p.Decisions[0].Action, p.Decisions[1].Action}
	require.ElementsMatch(t, []string{"ship the web view", "write the docs"}, actions)
	p = getJSON[web.DecisionsPage](t, f, "/ui/decisions?session=plan", "alice-token")
	require.Len(t, p.Decisions, 1)
	require.Equal(t, "alice", p.Decisions[0].RecordedBy)
	require.NotEmpty(t, p.Decisions[0].ReceiptID)

	// Without a passport, the page says what get_passport says.
	code, _, body := f.get(t, "/ui/passport", "bob-token", "")
	require.Equal(t, http.StatusUnprocessableEntity, code)
	require.Contains(t, body, "call issue_passport to get one")
	call[map[string]any](t, f.srv, bob, "issue_passport", map[string]any{})
	pp := getJSON[web.PassportPage](t, f, "/ui/passport", "bob-token")
	require.Equal(t, "bob", pp.Passport.PrincipalID)
}

func TestForgetsPageStatusAndPins(t *testing.T) {
	f := newFixture(t, lookup)
	keep := call[tools.StoreFactOutput](t, f.srv, alice, "store_fact", map[string]any{"entity": "pinned:thing", "key": "k", "value": "kept"})
	call[map[string]any](t, f.srv, alice, "memory_pin", map[string]any{"fact_id": keep.FactID})
	forgot := call[tools.MemoryForgetOutput](t, f.srv, alice, "memory_forget", map[string]any{
		"scope": map[string]any{"type": "entity_prefix", "value": "project:"}, "reason": "tidy"})
	bobs := call[tools.MemoryForgetOutput](t, f.srv, bob, "memory_forget", map[string]any{
		"scope": map[string]any{"type": "entity_prefix", "value": "project:"}, "reason": "bob tidies"})

	p := getJSON[web.ForgetsPage](t, f, "/ui/forgets", "alice-token")
	require.Len(t, p.Forgets, 1, "alice's forget only")
	require.Equal(t, forgot.ForgetReceiptID, p.Forgets[0].ForgetReceiptID)
	require.Contains(t, p.Forgets[0].Status, "restorable until")
	require.True(t, p.Forgets[0].Restorable)
	require.Len(t, p.Pins, 1)
	require.Equal(t, keep.FactID, p.Pins[0].ID)

	_, err := f.srv.RestoreForget(context.Background(), forgot.ForgetReceiptID)
	require.NoError(t, err)
	p = getJSON[web.ForgetsPage](t, f, "/ui/forgets", "alice-token")
	require.Contains(t, p.Forgets[0].Status, "restored at")
	require.False(t, p.Forgets[0].Restorable)

	p = getJSON[web.ForgetsPage](t, f, "/ui/forgets", "bob-token")
	require.Len(t, p.Forgets, 1)
	require.Equal(t, bobs.ForgetReceiptID, p.Forgets[0].ForgetReceiptID)
	require.Empty(t, p.Pins, "alice's pin is not bob's")
}

func TestHandoffsOfTheCaller(t *testing.T) {
	f := newFixture(t, lookup)
	carol := crux.Caller{Agent: "carol", Authenticated: true}
	tokens["carol-token"] = carol
	t.Cleanup(func() { delete(tokens, "carol-token") })
	call[tools.SaveSessionOutput](t, f.srv, alice, "save_session", map[string]any{"session_id": "work", "state": map[string]any{"a": 1}})
	toBob := call[map[string]any](t, f.srv, alice, "create_handoff", map[string]any{"session_id": "work", "target_agent": "bob"})
	toCarol := call[map[string]any](t, f.srv, alice, "create_handoff", map[string]any{"session_id": "work", "target_agent": "carol"})
	ids := func(token string) []string {
		p := getJSON[web.HandoffsPage](t, f, "/ui/handoffs", token)
		var out []string
		for _, h := range p.Handoffs {
			out = append(out, h.ID)
		}
		return out
	}
	require.ElementsMatch(t, []any{toBob["handoff_id"], toCarol["handoff_id"]}, anys(ids("alice-token")), "alice made both")
	require.Equal(t, []any{toBob["handoff_id"]}, anys(ids("bob-token")), "bob sees his, not carol's")
	require.Equal(t, []any{toCarol["handoff_id"]}, anys(ids("carol-token")))
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func TestForgetPastItsWindow(t *testing.T) {
	f := newFixture(t, lookup)
	forgot := call[tools.MemoryForgetOutput](t, f.srv, alice, "memory_forget", map[string]any{
		"scope": map[string]any{"type": "entity_prefix", "value": "project:"}, "reason": "tidy"})
	later := func() time.Time { return time.Now().AddDate(10, 0, 0) }
	ts := httptest.NewServer(web.New(f.srv, &web.Options{Lookup: lookup, Operator: f.srv, Now: later,
		Ledger: web.NewStoreLedger(f.db, f.srv.Keyring(), later)}))
	t.Cleanup(ts.Close)
	g := &fixture{db: f.db, srv: f.srv, ts: ts}
	p := getJSON[web.ForgetPage](t, g, "/ui/forgets/"+forgot.ForgetReceiptID, "alice-token")
	require.False(t, p.Restorable)
	require.Contains(t, p.Status, "purge due since")
	code, _, body := g.get(t, "/ui/forgets/"+forgot.ForgetReceiptID, "alice-token", "")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, `id="restore"`, "no restore button past the window")
	list := getJSON[web.ForgetsPage](t, g, "/ui/forgets", "alice-token")
	require.Contains(t, list.Forgets[0].Status, "purge due since")
}

func TestFactPageNamesItsReceipt(t *testing.T) {
	f := newFixture(t, lookup)
	d := call[map[string]any](t, f.srv, alice, "record_decision", map[string]any{"session_id": "plan", "action": "ship", "rationale": "ready"})
	path := fmt.Sprintf("/ui/fact?entity=%s&key=%s", d["entity"], d["decision_id"])
	code, _, body := f.get(t, path, "bob-token", "")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `<code class="source-receipt">`+d["receipt_id"].(string)+`</code>`)
	require.Contains(t, body, `<td class="writer">alice</td>`)
}
