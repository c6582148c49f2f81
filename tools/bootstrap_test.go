package tools_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/tools"
)

func TestGetBootstrap(t *testing.T) {
	srv, _, _ := newTestServer(t)
	res, err := srv.CallTool(t.Context(), anon, "get_bootstrap", nil)
	require.NoError(t, err)
	text := res.Content[0].Text
	assert.Contains(t, text, "[__bootstrap__::doc:quickstart] Quickstart = ")
	assert.NotContains(t, text, "[__bootstrap__::_meta]", "the sentinel is not served")
	// Without token_budget the answer is bounded (DefaultBootstrapBudget);
	// a larger budget serves every entry.
	def := call(t, srv, anon, "get_bootstrap", `{}`)
	assert.Equal(t, true, def["truncated"])
	assert.LessOrEqual(t, int(def["total_tokens"].(float64)), tools.DefaultBootstrapBudget)
	res, err = srv.CallTool(t.Context(), anon, "get_bootstrap", []byte(`{"token_budget":100000}`))
	require.NoError(t, err)
	assert.Contains(t, res.Content[0].Text, "[__bootstrap__::tool-output:query_facts] query_facts output schema = {contract?, kind?, rows:")
	one := call(t, srv, anon, "get_bootstrap", `{"topic":"tool-output","query":"store_fact"}`)
	require.NotEmpty(t, one["facts"], "a tool's output fields, by its name")
	assert.Contains(t, fmt.Sprint(one["facts"]), "tool-output:store_fact")

	for _, topic := range []string{"docs", "patterns", "errors", "tool"} {
		got := call(t, srv, anon, "get_bootstrap", fmt.Sprintf(`{"topic":%q}`, topic))
		facts := got["facts"].([]any)
		require.NotEmpty(t, facts, topic)
		want := map[string]string{"docs": "doc:", "patterns": "pattern:", "errors": "resolution:", "tool": "tool-output:"}[topic]
		for _, f := range facts {
			assert.Contains(t, f.(map[string]any)["entity"], "__bootstrap__::"+want)
		}
	}
	// Every tool's output contract is there, whether its flags make it
	// present on this server or not (the store serves servers of any flags).
	got := call(t, srv, anon, "get_bootstrap", `{"topic":"tool-output","token_budget":100000}`)
	assert.Len(t, got["facts"], len(tools.All(nil)))

	got = call(t, srv, anon, "get_bootstrap", `{"query":"supersedes"}`)
	assert.NotEmpty(t, got["facts"])
	small := call(t, srv, anon, "get_bootstrap", `{"token_budget":50}`)
	assert.Len(t, small["facts"], 1, "token_budget is honoured, keeping the first entry")
	assert.Equal(t, true, small["truncated"])

	res, err = srv.CallTool(t.Context(), anon, "get_bootstrap", []byte(`{"topic":"nothing"}`))
	require.NoError(t, err)
	assert.Equal(t, "no bootstrap knowledge for topic 'nothing'", res.Content[0].Text)

	// Bootstrap knowledge is not in the callers' fact pool.
	assert.Empty(t, rows(t, call(t, srv, anon, "query_facts", `{"query":"quickstart"}`)))
	assert.Empty(t, call(t, srv, anon, "list_entities", `{}`)["entities"])
}

func TestBootstrapSeededOnce(t *testing.T) {
	_, _, db := newTestServer(t)
	before := db.Stats()
	srv, err := crux.NewServer(db, nil)
	require.NoError(t, err)
	assert.Equal(t, before.Commits, db.Stats().Commits, "a second start writes nothing")
	got := call(t, srv, anon, "get_bootstrap", `{"topic":"doc","query":"quickstart"}`)
	assert.Len(t, got["facts"], 1, "no duplicate versions")
}
