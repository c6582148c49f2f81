package tools_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
)

// Every string that reaches a stored record must be valid UTF-8: a record
// holding invalid UTF-8 cannot be decoded again, and once it sits in the
// shared pool every scan that meets it would fail for every agent.

func TestNonUTF8CallerIsRefused(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for _, c := range []crux.Caller{
		{Agent: "bad\xff", Authenticated: true},         // the probe: a name that is not UTF-8
		{Agent: "bad\xed\xa0\x80", Authenticated: true}, // a surrogate encoded as UTF-8 (CESU-8)
		{Agent: "bad\xff"},                              // unauthenticated: still refused
		{Agent: "alice", Authenticated: true, Tenant: "t\xc3"},
	} {
		e := callErr(t, srv, c, "store_fact", `{"entity":"e","key":"k","value":"v"}`)
		assert.Equal(t, crux.CodeInvalidRequest, e.Code, "%+q", c)
		assert.Contains(t, e.Message, "not valid UTF-8", "%+q", c)
	}
	// Nothing was stored, and every other agent's scans work.
	for _, tool := range []string{"query_facts", "memory_view", "memory_freshness", "memory_sweep_candidates"} {
		call(t, srv, bob, tool, `{}`)
	}
	assert.EqualValues(t, 0, call(t, srv, bob, "query_facts", `{}`)["count"])
	assert.Empty(t, call(t, srv, bob, "list_entities", `{}`)["entities"])
}

func TestNonUTF8ArgumentsAreRefused(t *testing.T) {
	srv, _, _ := newTestServer(t)
	tests := []struct {
		name, tool, args, param string
	}{
		{"entity bytes", "store_fact", `{"entity":"e` + "\xff" + `","key":"k","value":"v"}`, "entity"},
		{"key bytes", "store_fact", `{"entity":"e","key":"k` + "\xc3" + `","value":"v"}`, "key"},
		{"value bytes", "store_fact", `{"entity":"e","key":"k","value":"` + "\xed\xa0\x80" + `"}`, "value"},
		{"entity lone high surrogate", "store_fact", `{"entity":"e\ud800","key":"k","value":"v"}`, "entity"},
		{"key lone low surrogate", "store_fact", `{"entity":"e","key":"\udc00k","value":"v"}`, "key"},
		{"value reversed pair", "store_fact", `{"entity":"e","key":"k","value":"\udc00\ud800"}`, "value"},
		{"value surrogate at the end", "store_fact", `{"entity":"e","key":"k","value":"v\ud83d"}`, "value"},
		{"array item", "store_fact", `{"entity":"e","key":"k","value":"v","supersedes":["f_1","\ud800"]}`, "supersedes.1"},
		{"nested object key", "save_session", `{"session_id":"s1","state":{"ok":1,"b\udfff":2}}`, "state.b\uFFFD"},
		{"nested value beside a real U+FFFD", "save_session", `{"session_id":"s1","state":{"a":"\ufffd","b":"\ud800"}}`, "state"},
		{"top-level name", "store_fact", `{"entity":"e","key":"k","value":"v","\ud800":1}`, "\uFFFD"},
		{"top-level name bytes", "store_fact", `{"entity":"e","key":"k","value":"v","` + "\xff" + `":1}`, "\uFFFD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := callErr(t, srv, alice, tt.tool, tt.args)
			assertInvalidParam(t, e, tt.tool, tt.param, "is not valid UTF-8")
		})
	}
	assert.EqualValues(t, 0, call(t, srv, alice, "query_facts", `{}`)["count"], "nothing was stored")
	assert.Equal(t, "session not found: s1", toolError(t, srv, alice, "get_session", `{"session_id":"s1"}`))

	// Paired surrogates, escaped U+FFFD and an escaped backslash before a u
	// are text like any other.
	for _, v := range []string{`\ud83d\ude00`, `\ufffd`, `\\ud800`, "\uFFFD"} {
		id := storeID(t, srv, alice, `{"entity":"e","key":"ok","value":"`+v+`"}`)
		assert.NotEmpty(t, id, v)
	}
}

// A caller with an invalid name is refused before the capability check, so
// no refusal receipt is minted with a body that would not verify.
func TestNonUTF8CallerMintsNoRefusalReceipt(t *testing.T) {
	signer, _, router := freeLocal(t)
	srv, _, db := newTestServer(t, withSigner(signer), withRouter(router))
	before := receiptCount(t, db)
	_, err := srv.CallTool(context.Background(), crux.Caller{Agent: "bad\xff", Authenticated: true}, "issue_passport", json.RawMessage(`{}`))
	var e *crux.Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, crux.CodeInvalidRequest, e.Code)
	assert.Equal(t, before, receiptCount(t, db), "no refusal receipt")

	// A valid caller's refusal receipt verifies.
	e = callErr(t, srv, alice, "issue_passport", `{}`)
	require.Equal(t, crux.CodeCapabilityDenied, e.Code)
	assert.Equal(t, before+1, receiptCount(t, db))
}
