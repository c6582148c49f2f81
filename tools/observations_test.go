package tools_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store"
)

func observeFlags() crux.Flags {
	f := crux.DefaultFlags()
	f.Observe = true
	return f
}

func observe(t *testing.T, srv *crux.Server, c crux.Caller, session, provider, payload string) *crux.SessionObservation {
	t.Helper()
	o, err := srv.Observe(context.Background(), c, crux.Observation{SessionID: session, Provider: provider, Kind: "tool_call",
		Payload: json.RawMessage(payload)})
	require.NoError(t, err)
	return o
}

func TestObservationsOff(t *testing.T) {
	srv, _, _ := newTestServer(t)
	_, err := srv.Observe(context.Background(), alice, crux.Observation{SessionID: "s", Provider: "p", Kind: "k"})
	assert.ErrorIs(t, err, crux.ErrObservationsOff)
	for tool, args := range map[string]string{
		"list_observations":  `{"session_id":"s"}`,
		"get_observation":    `{"session_id":"s","observation_id":"obs_1"}`,
		"verify_observation": `{"session_id":"s","observation_id":"obs_1"}`,
	} {
		assert.Contains(t, toolError(t, srv, alice, tool, args), "session observations are off; set CORECRUXD_OBSERVE=1")
	}
}

func TestObservations(t *testing.T) {
	clk := &clock{t: start}
	srv, _, db := newTestServer(t, withFlags(observeFlags()), withClock(clk))
	first := observe(t, srv, alice, "s1", "claude-code", `{"tool": "Bash", "n": 1}`)
	clk.Advance(time.Minute)
	second := observe(t, srv, alice, "s1", "openai", `{"tool":"Edit"}`)
	observe(t, srv, alice, "s2", "claude-code", `{}`)
	observe(t, srv, bob, "s1", "claude-code", `{"bob":true}`)
	observe(t, srv, crux.Caller{Agent: "alice", Authenticated: true, Tenant: "other"}, "s1", "claude-code", `{}`)

	// Chained per session, signed, the payload kept as compact JSON.
	assert.EqualValues(t, 1, first.Seq)
	assert.EqualValues(t, 2, second.Seq)
	assert.Equal(t, strings.Repeat("0", 64), first.PrevHash)
	assert.Equal(t, first.Receipt.BodyHash, second.PrevHash)
	assert.Equal(t, `{"tool":"Bash","n":1}`, string(first.Payload))
	assert.Equal(t, "alice", first.Principal)
	assert.Equal(t, "ed25519", first.Receipt.Alg)
	assert.Regexp(t, `^obs_[0-9a-f]{32}$`, first.ObservationID)

	list := call(t, srv, alice, "list_observations", `{"session_id":"s1"}`)
	assert.EqualValues(t, 2, list["count"])
	obs := list["observations"].([]any)
	assert.Equal(t, first.ObservationID, obs[0].(map[string]any)["observation_id"], "oldest first")
	assert.Equal(t, false, list["truncated"])

	// Only the observed agent, in its tenant, sees them.
	assert.EqualValues(t, 1, call(t, srv, bob, "list_observations", `{"session_id":"s1"}`)["count"])
	assert.EqualValues(t, 0, call(t, srv, anon, "list_observations", `{"session_id":"s1"}`)["count"])
	assert.Contains(t, toolError(t, srv, bob, "get_observation", `{"session_id":"s1","observation_id":"`+first.ObservationID+`"}`),
		"observation "+first.ObservationID+" not found in session s1")

	// Filters and pages.
	assert.EqualValues(t, 1, call(t, srv, alice, "list_observations", `{"session_id":"s1","provider":"openai"}`)["count"])
	since := start.Add(30 * time.Second).Format(time.RFC3339)
	assert.EqualValues(t, 1, call(t, srv, alice, "list_observations", `{"session_id":"s1","since":"`+since+`"}`)["count"])
	page := call(t, srv, alice, "list_observations", `{"session_id":"s1","limit":1}`)
	assert.EqualValues(t, 1, page["count"])
	assert.Equal(t, true, page["truncated"])
	next := call(t, srv, alice, "list_observations", `{"session_id":"s1","limit":1,"cursor":"`+page["next_cursor"].(string)+`"}`)
	assert.Equal(t, second.ObservationID, next["observations"].([]any)[0].(map[string]any)["observation_id"])
	assert.Equal(t, false, next["truncated"])
	for args, msg := range map[string]string{
		`{"session_id":"s1","limit":501}`:      "list_observations: limit:",
		`{"session_id":"s1","since":"monday"}`: "list_observations: since: must be an RFC 3339 date-time",
		`{"session_id":"s1","cursor":"x"}`:     "list_observations: cursor: is not a next_cursor of list_observations",
		`{}`:                                   "list_observations: session_id:",
		`{"session_id":"a\u0001"}`:             "list_observations: session_id: must not contain control characters",
	} {
		assert.Contains(t, callErr(t, srv, alice, "list_observations", args).Message, msg, args)
	}

	got := call(t, srv, alice, "get_observation", `{"session_id":"s1","observation_id":"`+second.ObservationID+`"}`)
	assert.Equal(t, "openai", got["provider"])
	assert.Equal(t, second.Receipt.Signature, got["receipt"].(map[string]any)["signature"])

	v := call(t, srv, alice, "verify_observation", `{"session_id":"s1","observation_id":"`+first.ObservationID+`"}`)
	assert.Equal(t, true, v["ok"], "%v", v)
	assert.Equal(t, true, v["hash_match"])
	assert.Equal(t, true, v["signature_valid"])
	assert.Equal(t, first.Receipt.BodyHash, v["recomputed_hash"])

	// A changed record no longer hashes to what was signed.
	tamper := func(edit func(o *store.SessionObservation)) map[string]any {
		require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
			o, err := store.GetSessionObservation(tx, tenant, "alice", "s1", first.ObservationID)
			if err != nil {
				return err
			}
			edit(o)
			_, hash, err := store.SessionObservationHead(tx, tenant, "alice", "s1")
			if err != nil {
				return err
			}
			return store.PutSessionObservation(tx, "alice", o, hash)
		}))
		return call(t, srv, alice, "verify_observation", `{"session_id":"s1","observation_id":"`+first.ObservationID+`"}`)
	}
	v = tamper(func(o *store.SessionObservation) { o.Payload = json.RawMessage(`{"tool":"Bash","n":2}`) })
	assert.Equal(t, false, v["ok"])
	assert.Equal(t, false, v["hash_match"])
	assert.Contains(t, v["reason"], "BODY_HASH_MISMATCH")
	v = tamper(func(o *store.SessionObservation) {
		o.Payload = json.RawMessage(`{"tool":"Bash","n":1}`)
		o.Receipt.Signature = strings.Repeat("00", 64)
	})
	assert.Equal(t, true, v["hash_match"])
	assert.Equal(t, false, v["signature_valid"])
	assert.Contains(t, v["reason"], "SIG_INVALID")
}

func TestObserveRefusesBadObservations(t *testing.T) {
	srv, _, _ := newTestServer(t, withFlags(observeFlags()))
	for _, tc := range []struct {
		o   crux.Observation
		msg string
	}{
		{crux.Observation{Provider: "p", Kind: "k"}, "session_id is required"},
		{crux.Observation{SessionID: "s", Kind: "k"}, "provider is required"},
		{crux.Observation{SessionID: "s", Provider: "p"}, "kind is required"},
		{crux.Observation{SessionID: "s", Provider: strings.Repeat("p", 65), Kind: "k"}, "provider: longer than 64 bytes"},
		{crux.Observation{SessionID: "s", Provider: "p", Kind: "k", Payload: json.RawMessage(`{bad`)}, "payload: not a JSON value"},
		{crux.Observation{SessionID: "s", Provider: "p", Kind: "k", Payload: json.RawMessage(`"` + strings.Repeat("x", 16<<10) + `"`)}, "payload: larger than 16384 bytes"},
		{crux.Observation{SessionID: strings.Repeat("s", 1025), Provider: "p", Kind: "k"}, "session_id: longer than 1024 bytes"},
	} {
		_, err := srv.Observe(context.Background(), alice, tc.o)
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.msg)
	}
	// An anonymous caller's observations are its own log.
	o, err := srv.Observe(context.Background(), anon, crux.Observation{SessionID: "s", Provider: "p", Kind: "k"})
	require.NoError(t, err)
	assert.Equal(t, "anonymous", o.Principal)
	assert.EqualValues(t, 1, call(t, srv, anon, "list_observations", `{"session_id":"s"}`)["count"])
}

func TestHandoffObservations(t *testing.T) {
	flags := observeFlags()
	flags.HandoffObservations = true
	srv, _, _ := newTestServer(t, withFlags(flags))
	call(t, srv, alice, "save_session", `{"session_id":"s1","state":{"title":"t"}}`)
	pkg := call(t, srv, alice, "create_handoff", `{"session_id":"s1","target_agent":"bob"}`)
	list := call(t, srv, alice, "list_observations", `{"session_id":"s1"}`)
	require.EqualValues(t, 1, list["count"])
	o := list["observations"].([]any)[0].(map[string]any)
	assert.Equal(t, "handoff.created", o["kind"])
	assert.Equal(t, "crux", o["provider"])
	assert.Equal(t, pkg["receipt_id"], o["payload"].(map[string]any)["receipt_id"])

	b, err := json.Marshal(pkg["package_json"])
	require.NoError(t, err)
	accepted := call(t, srv, bob, "accept_handoff", `{"package":`+string(b)+`}`)
	list = call(t, srv, bob, "list_observations", `{"session_id":"s1"}`)
	require.EqualValues(t, 1, list["count"])
	o = list["observations"].([]any)[0].(map[string]any)
	assert.Equal(t, "handoff.accepted", o["kind"])
	assert.Equal(t, accepted["receipt_id"], o["payload"].(map[string]any)["receipt_id"])

	// Off, nothing is recorded.
	plain, _, _ := newTestServer(t, withFlags(observeFlags()))
	call(t, plain, alice, "save_session", `{"session_id":"s1","state":{}}`)
	call(t, plain, alice, "create_handoff", `{"session_id":"s1"}`)
	assert.EqualValues(t, 0, call(t, plain, alice, "list_observations", `{"session_id":"s1"}`)["count"])
}
