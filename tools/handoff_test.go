package tools_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"lukechampine.com/blake3"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/tools"
)

// handoffPkg is a created package, decoded.
func handoffPkg(t *testing.T, out map[string]any) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out["package_json"].(string)), &m))
	return m
}

// flip changes the first hex digit of s.
func flip(s string) string {
	if s[0] == '0' {
		return "1" + s[1:]
	}
	return "0" + s[1:]
}

func acceptArgs(t *testing.T, pkg string) string {
	t.Helper()
	b, err := json.Marshal(map[string]string{"package": pkg})
	require.NoError(t, err)
	return string(b)
}

func TestCreateAndAcceptHandoff(t *testing.T) {
	srv, _, db := newTestServer(t)
	call(t, srv, alice, "store_fact", `{"entity":"project:crux","key":"language","value":"Go"}`)
	call(t, srv, alice, "store_fact", `{"entity":"project:other","key":"language","value":"Rust"}`)
	call(t, srv, alice, "save_session", `{"session_id":"s1","state":{"title":"port","focus":"project:crux","n":1.50}}`)

	out := call(t, srv, alice, "create_handoff", `{"session_id":"s1","target_agent":"bob","include_facts":true,
		"message":"over to you","task_record":{"requester":"carol","desired_outcome":"done","sources":["a"],
		"acceptance_criteria":["tests pass"],"boundaries":["no deletes"],"blocker_rule":"ask"}}`)
	assert.EqualValues(t, 1, out["relevant_fact_count"], "only the entity the state mentions")
	pkg := handoffPkg(t, out)
	assert.Equal(t, "crux.handoff.v1", pkg["schema"])
	assert.Equal(t, "alice", pkg["from_agent"])
	assert.Equal(t, "bob", pkg["target_agent"])
	assert.Equal(t, out["content_hash"], pkg["content_hash"])
	assert.Equal(t, out["signature"], pkg["signature"])
	assert.Equal(t, out["handoff_id"], pkg["handoff_id"])
	assert.Equal(t, srv.Keyring().Len(), 1)
	assert.Equal(t, "handoff", getReceipt(t, db, out["receipt_id"].(string)).Kind)

	got := call(t, srv, bob, "accept_handoff", acceptArgs(t, out["package_json"].(string)))
	assert.Equal(t, true, got["verified"])
	assert.Equal(t, true, got["session_loaded"])
	assert.EqualValues(t, 1, got["facts_loaded"], "verified present")
	assert.EqualValues(t, 0, got["facts_written"])
	tr := got["task_record"].(map[string]any)
	assert.Equal(t, "carol", tr["requester"])
	assert.Equal(t, "handoff_accept", getReceipt(t, db, got["receipt_id"].(string)).Kind)

	sess := call(t, srv, bob, "get_session", `{"session_id":"s1"}`)
	assert.Equal(t, map[string]any{"title": "port", "focus": "project:crux", "n": 1.5}, sess["state"])
}

func TestHandoffCanonicalContent(t *testing.T) {
	srv, _, _ := newTestServer(t)
	call(t, srv, alice, "save_session", `{"session_id":"s1","state":{"b":"<x>&","a":[1,2.5]}}`)
	out := call(t, srv, alice, "create_handoff", `{"session_id":"s1"}`)
	raw := out["package_json"].(string)
	canon, err := tools.ExportHandoffCanonical([]byte(raw))
	require.NoError(t, err)
	assert.NotContains(t, string(canon), "content_hash")
	assert.NotContains(t, string(canon), `"signature"`)
	assert.Contains(t, string(canon), `"state":{"a":[1,2.5],"b":"<x>&"}`, "sorted keys, no HTML escaping")
	assert.True(t, strings.HasPrefix(string(canon), `{"created_at":`), "keys sorted")
	sum := blake3.Sum256(canon)
	assert.Equal(t, out["content_hash"], hex.EncodeToString(sum[:]), "the hex BLAKE3 of the canonical content")

	// Re-encoding the package with other whitespace and key order keeps
	// the canonical content.
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw), &m))
	pretty, err := json.MarshalIndent(m, "", "  ")
	require.NoError(t, err)
	canon2, err := tools.ExportHandoffCanonical(pretty)
	require.NoError(t, err)
	assert.Equal(t, string(canon), string(canon2))
}

func TestAcceptHandoffTamperedRefused(t *testing.T) {
	srv, _, _ := newTestServer(t)
	call(t, srv, alice, "save_session", `{"session_id":"s1","state":{"plan":"alpha"}}`)
	out := call(t, srv, alice, "create_handoff", `{"session_id":"s1","message":"hello"}`)
	raw := out["package_json"].(string)
	sig := out["signature"].(string)

	for name, bad := range map[string]string{
		"state":     strings.Replace(raw, "alpha", "alphb", 1),
		"message":   strings.Replace(raw, "hello", "hellp", 1),
		"signature": strings.Replace(raw, sig, flip(sig), 1),
		"hash":      strings.Replace(raw, out["content_hash"].(string), strings.Repeat("0", 64), 1),
		"not json":  raw[:len(raw)-1],
	} {
		t.Run(name, func(t *testing.T) {
			e := callErr(t, srv, bob, "accept_handoff", acceptArgs(t, bad))
			assert.Equal(t, crux.CodeInvalidParams, e.Code)
			assert.Contains(t, e.Message, "package")
			res, err := srv.CallTool(context.Background(), bob, "get_session", json.RawMessage(`{"session_id":"s1"}`))
			require.NoError(t, err)
			assert.True(t, res.IsError, "nothing loaded")
		})
	}
	e := callErr(t, srv, bob, "accept_handoff", acceptArgs(t, strings.Replace(raw, "alpha", "alphb", 1)))
	assert.Contains(t, e.Message, "content hash mismatch")
	e = callErr(t, srv, bob, "accept_handoff", acceptArgs(t, strings.Replace(raw, sig, flip(sig), 1)))
	assert.Contains(t, e.Message, "signature verification failed")
	// The genuine package is still acceptable.
	call(t, srv, bob, "accept_handoff", acceptArgs(t, raw))
}

// A package whose text was swapped for an unpaired surrogate escape, which
// decodes to the same U+FFFD and so keeps the content hash, is refused.
func TestAcceptHandoffLoneSurrogateRefused(t *testing.T) {
	srv, _, _ := newTestServer(t)
	call(t, srv, alice, "save_session", `{"session_id":"s1","state":{"plan":"a\ufffdb"}}`)
	raw := call(t, srv, alice, "create_handoff", `{"session_id":"s1"}`)["package_json"].(string)
	require.Contains(t, raw, `a\ufffdb`)
	bad := strings.Replace(raw, `a\ufffdb`, `a\ud800b`, 1)
	canon, err := tools.ExportHandoffCanonical([]byte(raw))
	require.NoError(t, err)
	canonBad, err := tools.ExportHandoffCanonical([]byte(bad))
	require.NoError(t, err)
	require.Equal(t, string(canon), string(canonBad), "the swap keeps the content hash")

	e := callErr(t, srv, bob, "accept_handoff", acceptArgs(t, bad))
	assertInvalidParam(t, e, "accept_handoff", "package", "is not valid UTF-8: it holds an unpaired surrogate escape")
	assert.Equal(t, "session not found: s1", toolError(t, srv, bob, "get_session", `{"session_id":"s1"}`))
	call(t, srv, bob, "accept_handoff", acceptArgs(t, raw))
}

func TestAcceptHandoffOtherKeyRefused(t *testing.T) {
	srv1, _, _ := newTestServer(t, withSigner(newSigner(t)))
	srv2, _, _ := newTestServer(t, withSigner(newSigner(t)))
	call(t, srv1, alice, "save_session", `{"session_id":"s1","state":{}}`)
	out := call(t, srv1, alice, "create_handoff", `{"session_id":"s1"}`)
	e := callErr(t, srv2, alice, "accept_handoff", acceptArgs(t, out["package_json"].(string)))
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, "not this server's key")
}

func TestAcceptHandoffOnlyTarget(t *testing.T) {
	srv, _, _ := newTestServer(t)
	carol := crux.Caller{Agent: "carol", Authenticated: true}
	call(t, srv, alice, "save_session", `{"session_id":"s1","state":{"x":1}}`)
	out := call(t, srv, alice, "create_handoff", `{"session_id":"s1","target_agent":"bob"}`)
	for _, c := range []crux.Caller{carol, anon} {
		e := callErr(t, srv, c, "accept_handoff", acceptArgs(t, out["package_json"].(string)))
		assert.Equal(t, crux.CodeCapabilityDenied, e.Code)
	}
	res, err := srv.CallTool(context.Background(), carol, "get_session", json.RawMessage(`{"session_id":"s1"}`))
	require.NoError(t, err)
	assert.True(t, res.IsError)
	call(t, srv, bob, "accept_handoff", acceptArgs(t, out["package_json"].(string)))
}

func TestAcceptHandoffOnce(t *testing.T) {
	srv, _, _ := newTestServer(t)
	call(t, srv, alice, "save_session", `{"session_id":"s1","state":{"x":1}}`)
	out := call(t, srv, alice, "create_handoff", `{"session_id":"s1"}`)
	call(t, srv, bob, "accept_handoff", acceptArgs(t, out["package_json"].(string)))
	e := callErr(t, srv, bob, "accept_handoff", acceptArgs(t, out["package_json"].(string)))
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, "already accepted")
}

func TestAcceptHandoffOtherTenantRefused(t *testing.T) {
	srv, _, _ := newTestServer(t)
	call(t, srv, alice, "save_session", `{"session_id":"s1","state":{"x":1}}`)
	out := call(t, srv, alice, "create_handoff", `{"session_id":"s1"}`)
	other := crux.Caller{Agent: "bob", Authenticated: true, Tenant: "t2"}
	e := callErr(t, srv, other, "accept_handoff", acceptArgs(t, out["package_json"].(string)))
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, "another tenant")
}

func TestCreateHandoffMissingSession(t *testing.T) {
	srv, _, _ := newTestServer(t)
	call(t, srv, alice, "save_session", `{"session_id":"s1","state":{"x":1}}`)
	// bob cannot hand off alice's session: sessions are per agent.
	res, err := srv.CallTool(context.Background(), bob, "create_handoff", json.RawMessage(`{"session_id":"s1"}`))
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content[0].Text, "session not found")
}

// TestCreateHandoffTooLarge: create_handoff makes no package larger than
// accept_handoff takes (a string argument, at most 1 MiB): it answers an
// error result and records nothing.
func TestCreateHandoffTooLarge(t *testing.T) {
	srv, _, db := newTestServer(t)
	call(t, srv, alice, "save_session", `{"session_id":"s1","state":{"a":"`+strings.Repeat("x", 700_000)+`"}}`)
	receipts := receiptCount(t, db)
	msg := `{"session_id":"s1","target_agent":"bob","message":"` + strings.Repeat("m", 400_000) + `"}`
	text := toolError(t, srv, alice, "create_handoff", msg)
	assert.Regexp(t, `^the package would be 1100\d\d\d bytes, more than the 1048576 accept_handoff takes; nothing was recorded`, text)
	assert.Equal(t, receipts, receiptCount(t, db), "no receipt")

	// Without the message it fits, and bob accepts it.
	out := call(t, srv, alice, "create_handoff", `{"session_id":"s1","target_agent":"bob"}`)
	call(t, srv, bob, "accept_handoff", acceptArgs(t, out["package_json"].(string)))
}

func TestCreateHandoffInvalidParams(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for args, param := range map[string]string{
		`{}`: "session_id",
		`{"session_id":"__agent_session::bob::s1"}`:       "session_id",
		`{"session_id":"s1","include_facts":"yes"}`:       "include_facts",
		`{"session_id":"s1","task_record":{"owner":"x"}}`: "owner",
		`{"session_id":"s1","target_agent":"a\u0000b"}`:   "target_agent",
		`{"session_id":"s1","bogus":1}`:                   "bogus",
	} {
		e := callErr(t, srv, alice, "create_handoff", args)
		assert.Equal(t, crux.CodeInvalidParams, e.Code, args)
		assert.Contains(t, e.Message, param, args)
	}
	e := callErr(t, srv, alice, "accept_handoff", `{}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, "package")
}

func TestHandoffFactsPrivateAndReservedExcluded(t *testing.T) {
	srv, _, _ := newTestServer(t)
	call(t, srv, alice, "store_fact", `{"entity":"svc","key":"port","value":"80"}`)
	call(t, srv, alice, "store_fact", `{"entity":"svc","key":"secret","value":"hunter2","private":true}`)
	call(t, srv, alice, "save_session", `{"session_id":"s1","state":{"on":["svc","__decisions__::x"]}}`)
	out := call(t, srv, alice, "create_handoff", `{"session_id":"s1","include_facts":true}`)
	assert.EqualValues(t, 1, out["relevant_fact_count"])
	assert.NotContains(t, out["package_json"], "hunter2")
	facts := handoffPkg(t, out)["facts"].([]any)
	require.Len(t, facts, 1)
	assert.Equal(t, "port", facts[0].(map[string]any)["key"])

	// Without include_facts, none.
	out = call(t, srv, alice, "create_handoff", `{"session_id":"s1"}`)
	assert.EqualValues(t, 0, out["relevant_fact_count"])
}

func TestAcceptHandoffFactsWrittenAndStale(t *testing.T) {
	srv, _, _ := newTestServer(t)
	a := call(t, srv, alice, "store_fact", `{"entity":"svc","key":"port","value":"80"}`)
	call(t, srv, alice, "store_fact", `{"entity":"svc","key":"host","value":"h1"}`)
	call(t, srv, alice, "save_session", `{"session_id":"s1","state":{"on":"svc"}}`)
	out := call(t, srv, alice, "create_handoff", `{"session_id":"s1","include_facts":true}`)
	require.EqualValues(t, 2, out["relevant_fact_count"])
	call(t, srv, alice, "delete_fact", `{"fact_id":"`+a["fact_id"].(string)+`"}`)
	call(t, srv, alice, "store_fact", `{"entity":"svc","key":"host","value":"h2"}`)

	got := call(t, srv, bob, "accept_handoff", acceptArgs(t, out["package_json"].(string)))
	assert.EqualValues(t, 1, got["facts_loaded"], "port written anew")
	assert.EqualValues(t, 1, got["facts_written"])
	assert.EqualValues(t, 1, got["facts_stale"], "host changed since: the newer value wins")
	assert.ElementsMatch(t, []string{"80"}, values(t, call(t, srv, bob, "query_facts", `{"entity":"svc","key":"port"}`)))
	assert.ElementsMatch(t, []string{"h2"}, values(t, call(t, srv, bob, "query_facts", `{"entity":"svc","key":"host"}`)))
}

func TestHandoffFactsByIDAndSessionEntity(t *testing.T) {
	srv, _, _ := newTestServer(t)
	cited := call(t, srv, alice, "store_fact", `{"entity":"unnamed","key":"k","value":"by id"}`)
	call(t, srv, alice, "store_fact", `{"entity":"unnamed","key":"other","value":"not cited"}`)
	call(t, srv, alice, "store_fact", `{"entity":"s1","key":"k","value":"by session id"}`)
	mine := call(t, srv, alice, "store_fact", `{"entity":"x","key":"k","value":"private","private":true}`)
	call(t, srv, alice, "save_session", `{"session_id":"s1","state":{"refs":["`+
		cited["fact_id"].(string)+`","`+mine["fact_id"].(string)+`","f_00000000000000000000000000000000"]}}`)
	out := call(t, srv, alice, "create_handoff", `{"session_id":"s1","include_facts":true}`)
	var got []string
	for _, f := range handoffPkg(t, out)["facts"].([]any) {
		got = append(got, f.(map[string]any)["value"].(string))
	}
	assert.Equal(t, []string{"by id", "by session id"}, got)
}
