package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store"
)

const (
	maxSessionStateBytes = 1 << 20 // the largest state, as compact JSON
	maxListedSessions    = 1000    // list_sessions returns at most this many
	checkpointSchema     = "crux.session_checkpoint.v1"
)

func sessionIDs(t *testing.T, got map[string]any) []string {
	t.Helper()
	raw, ok := got["sessions"].([]any)
	require.True(t, ok, "no sessions in %v", got)
	out := []string{}
	for _, r := range raw {
		out = append(out, r.(string))
	}
	return out
}

func TestSaveAndGetSession(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	state := `{"title":"Port crux","summary":"One paragraph.","zeta":[1,{"b":2,"a":1}],"alpha":"<&>"}`
	got := call(t, srv, alice, "save_session", `{"session_id":"s1","state":`+state+`}`)
	assert.Equal(t, "s1", got["session_id"])
	assert.Equal(t, clk.Now().Format(time.RFC3339Nano), got["updated_at"])
	assert.NotContains(t, got, "expires_at")

	res, err := srv.CallTool(context.Background(), alice, "get_session", json.RawMessage(`{"session_id":"s1"}`))
	require.NoError(t, err)
	require.False(t, res.IsError)
	got = structured(t, res)
	assert.Equal(t, "s1", got["session_id"])
	assert.Equal(t, clk.Now().Format(time.RFC3339Nano), got["updated_at"])
	assert.Equal(t, float64(len(state)/4), got["total_tokens"])
	assert.Equal(t, "alice", got["written_by"])
	assert.Equal(t, false, got["archived"])
	// Verbatim: key order and values as written.
	var out struct {
		State json.RawMessage `json:"state"`
	}
	decode(t, res.StructuredContent, &out)
	assert.Equal(t, state, string(out.State))

	// A second save replaces the state.
	clk.Advance(time.Minute)
	call(t, srv, alice, "save_session", `{"session_id":"s1","state":{"n":2}}`)
	got = call(t, srv, alice, "get_session", `{"session_id":"s1"}`)
	assert.Equal(t, map[string]any{"n": float64(2)}, got["state"])
	assert.Equal(t, clk.Now().Format(time.RFC3339Nano), got["updated_at"])
	assert.Equal(t, float64(1), got["total_tokens"]) // {"n":2} is 7 bytes: at least 1
}

func TestSaveSessionAnonymousHasNoWriter(t *testing.T) {
	srv, _, _ := newTestServer(t)
	call(t, srv, anon, "save_session", `{"session_id":"s","state":{}}`)
	got := call(t, srv, anon, "get_session", `{"session_id":"s"}`)
	assert.NotContains(t, got, "written_by")
	assert.Equal(t, map[string]any{}, got["state"])
}

func TestGetSessionNotFound(t *testing.T) {
	srv, _, _ := newTestServer(t)
	assert.Equal(t, "session not found: nope", toolError(t, srv, alice, "get_session", `{"session_id":"nope"}`))
}

func TestSessionArgumentErrors(t *testing.T) {
	srv, _, _ := newTestServer(t)
	big := `{"x":"` + strings.Repeat("a", maxSessionStateBytes/2) + `","y":"` + strings.Repeat("b", maxSessionStateBytes/2) + `"}`
	tests := []struct {
		name, tool, args, param, reason string
	}{
		{"state required", "save_session", `{"session_id":"s"}`, "state", "is required"},
		{"state not object", "save_session", `{"session_id":"s","state":[1]}`, "state", "must be an object"},
		{"state too large", "save_session", `{"session_id":"s","state":` + big + `}`, "state", "larger than 1048576 bytes as compact JSON"},
		{"negative ttl", "save_session", `{"session_id":"s","state":{},"ttl_seconds":-1}`, "ttl_seconds", "must be >= 0"},
		{"ttl above maximum", "save_session", `{"session_id":"s","state":{},"ttl_seconds":31536001}`, "ttl_seconds", "must be <= 31536000 (365 days)"},
		{"empty id", "get_session", `{"session_id":""}`, "session_id", "must not be empty"},
		{"reserved id", "get_session", `{"session_id":"__agent_session::alice::s"}`, "session_id", "ids starting with __agent_session:: are reserved for crux"},
		{"control character", "delete_session", `{"session_id":"a\u0000b"}`, "session_id", "must not contain control characters"},
		{"unknown list argument", "list_sessions", `{"pattern":"a*"}`, "pattern", "unknown argument"},
		{"unknown save argument", "save_session", `{"session_id":"s","state":{},"writer":"bob"}`, "writer", "unknown argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertInvalidParam(t, callErr(t, srv, anon, tt.tool, tt.args), tt.tool, tt.param, tt.reason)
		})
	}
	// The anonymous caller cannot reach an agent's session through its stored id.
	call(t, srv, alice, "save_session", `{"session_id":"s","state":{"secret":1}}`)
	e := callErr(t, srv, anon, "get_session", `{"session_id":"__agent_session::alice::s"}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	// Nothing of the rejected saves was stored.
	assert.Empty(t, sessionIDs(t, call(t, srv, anon, "list_sessions", `{}`)))
}

func TestSessionsInvisibleAcrossAgents(t *testing.T) {
	srv, _, db := newTestServer(t)
	call(t, srv, alice, "save_session", `{"session_id":"plan","state":{"who":"alice"}}`)
	toolError(t, srv, bob, "get_session", `{"session_id":"plan"}`)
	toolError(t, srv, anon, "get_session", `{"session_id":"plan"}`)
	assert.Empty(t, sessionIDs(t, call(t, srv, bob, "list_sessions", `{"include_archived":true}`)))
	assert.Empty(t, sessionIDs(t, call(t, srv, anon, "list_sessions", `{}`)))
	toolError(t, srv, bob, "archive_session", `{"session_id":"plan"}`)
	assert.Equal(t, false, call(t, srv, bob, "delete_session", `{"session_id":"plan"}`)["deleted"])

	// Same id, three separate sessions.
	call(t, srv, bob, "save_session", `{"session_id":"plan","state":{"who":"bob"}}`)
	call(t, srv, anon, "save_session", `{"session_id":"plan","state":{"who":"anon"}}`)
	for c, who := range map[crux.Caller]string{alice: "alice", bob: "bob", anon: "anon"} {
		got := call(t, srv, c, "get_session", `{"session_id":"plan"}`)
		assert.Equal(t, map[string]any{"who": who}, got["state"])
		assert.Equal(t, []string{"plan"}, sessionIDs(t, call(t, srv, c, "list_sessions", `{}`)))
	}
	// Stored under the documented ids.
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		s, err := store.GetSession(tx, store.Scope{Tenant: tenant, Agent: "alice"}, "plan", time.Now())
		require.NoError(t, err)
		assert.Equal(t, "__agent_session::alice::plan", s.StoredID())
		s, err = store.GetSession(tx, store.Scope{Tenant: tenant, Agent: ""}, "plan", time.Now())
		require.NoError(t, err)
		assert.Equal(t, "plan", s.StoredID())
		return nil
	}))
	// Tenants are separate.
	other := crux.Caller{Agent: "alice", Authenticated: true, Tenant: "other"}
	toolError(t, srv, other, "get_session", `{"session_id":"plan"}`)
	assert.Empty(t, sessionIDs(t, call(t, srv, other, "list_sessions", `{}`)))
}

func TestSessionTTL(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	got := call(t, srv, alice, "save_session", `{"session_id":"short","state":{},"ttl_seconds":60}`)
	assert.Equal(t, clk.Now().Add(time.Minute).Format(time.RFC3339Nano), got["expires_at"])
	call(t, srv, alice, "save_session", `{"session_id":"forever","state":{},"ttl_seconds":0}`)
	call(t, srv, alice, "save_session", `{"session_id":"default","state":{}}`)
	assert.Equal(t, clk.Now().Add(time.Minute).Format(time.RFC3339Nano), call(t, srv, alice, "get_session", `{"session_id":"short"}`)["expires_at"])

	clk.Advance(59 * time.Second)
	call(t, srv, alice, "get_session", `{"session_id":"short"}`)
	clk.Advance(time.Second) // the deadline itself: expired
	assert.Equal(t, "session not found: short", toolError(t, srv, alice, "get_session", `{"session_id":"short"}`))
	assert.Equal(t, []string{"default", "forever"}, sessionIDs(t, call(t, srv, alice, "list_sessions", `{"include_archived":true}`)))
	toolError(t, srv, alice, "archive_session", `{"session_id":"short"}`)
	assert.Equal(t, false, call(t, srv, alice, "delete_session", `{"session_id":"short"}`)["deleted"])

	clk.Advance(1000 * 24 * time.Hour)
	call(t, srv, alice, "get_session", `{"session_id":"forever"}`)
	call(t, srv, alice, "get_session", `{"session_id":"default"}`)

	// Saving again sets the deadline anew; an expired id can be reused.
	call(t, srv, alice, "save_session", `{"session_id":"short","state":{"v":2},"ttl_seconds":60}`)
	assert.Equal(t, map[string]any{"v": float64(2)}, call(t, srv, alice, "get_session", `{"session_id":"short"}`)["state"])
	call(t, srv, alice, "save_session", `{"session_id":"short","state":{"v":3}}`)
	clk.Advance(time.Hour)
	call(t, srv, alice, "get_session", `{"session_id":"short"}`)
}

func TestExpiredSessionsReclaimed(t *testing.T) {
	srv, clk, db := newTestServer(t)
	call(t, srv, alice, "save_session", `{"session_id":"a","state":{},"ttl_seconds":1}`)
	call(t, srv, bob, "save_session", `{"session_id":"b","state":{},"ttl_seconds":1}`)
	clk.Advance(time.Hour)
	present := func(owner, id string) bool {
		var found bool
		require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
			_, err := store.GetSession(tx, store.Scope{Tenant: tenant, Agent: owner}, id, time.Time{})
			found = err == nil
			return nil
		}))
		return found
	}
	require.True(t, present("alice", "a"))
	toolError(t, srv, alice, "get_session", `{"session_id":"a"}`)
	assert.False(t, present("alice", "a"), "get reclaims the expired session it meets")
	require.True(t, present("bob", "b"))
	call(t, srv, anon, "save_session", `{"session_id":"x","state":{}}`)
	assert.False(t, present("bob", "b"), "a save reclaims expired sessions of its tenant")
}

func TestSessionCheckpoint(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	got := call(t, srv, alice, "session_checkpoint", `{"session_id":"cp","token_budget":500,"objective":"ship sessions",
		"current_milestone":"m2","decisions":["use bbolt",{"id":2}],"open_questions":["ttl max?"],"files_touched":["a.go"],
		"commands_run":["go test ./..."],"test_status":{"passing":12},"next_action":"write docs","ttl_seconds":3600}`)
	assert.Equal(t, "cp", got["session_id"])
	assert.Equal(t, clk.Now().Format(time.RFC3339Nano), got["updated_at"])
	assert.Equal(t, clk.Now().Add(time.Hour).Format(time.RFC3339Nano), got["expires_at"])
	assert.NotContains(t, got, "trimmed")
	s := call(t, srv, alice, "get_session", `{"session_id":"cp"}`)
	assert.Equal(t, got["total_tokens"], s["total_tokens"])
	assert.Equal(t, map[string]any{
		"schema": checkpointSchema, "objective": "ship sessions", "current_milestone": "m2",
		"decisions": []any{"use bbolt", map[string]any{"id": float64(2)}}, "open_questions": []any{"ttl max?"},
		"files_touched": []any{"a.go"}, "commands_run": []any{"go test ./..."}, "test_status": map[string]any{"passing": float64(12)},
		"next_action": "write docs",
	}, s["state"])

	// Per agent, like every session.
	toolError(t, srv, bob, "get_session", `{"session_id":"cp"}`)
	assert.Empty(t, sessionIDs(t, call(t, srv, bob, "list_sessions", `{}`)))
	assertInvalidParam(t, callErr(t, srv, alice, "session_checkpoint", `{"session_id":"cp","token_budget":10,"ttl_seconds":31536001}`),
		"session_checkpoint", "ttl_seconds", "must be <= 31536000 (365 days)")

	// Only the fields given are stored.
	call(t, srv, alice, "session_checkpoint", `{"session_id":"cp2","token_budget":100,"next_action":"x"}`)
	s = call(t, srv, alice, "get_session", `{"session_id":"cp2"}`)
	assert.Equal(t, map[string]any{"schema": checkpointSchema, "next_action": "x"}, s["state"])
}

func TestSessionCheckpointTokenBudgetRequired(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for args, reason := range map[string]string{
		`{"session_id":"cp"}`:                   "is required",
		`{"session_id":"cp","token_budget":0}`:  "must be >= 1",
		`{"session_id":"cp","token_budget":-5}`: "must be >= 1",
		`{"session_id":"cp","token_budget":2}`:  "too small: a checkpoint needs at least 9 tokens",
	} {
		assertInvalidParam(t, callErr(t, srv, alice, "session_checkpoint", args), "session_checkpoint", "token_budget", reason)
	}
	toolError(t, srv, alice, "get_session", `{"session_id":"cp"}`)
}

func TestSessionCheckpointTrimsToBudget(t *testing.T) {
	srv, _, _ := newTestServer(t)
	var cmds, files []string
	for i := range 200 {
		cmds = append(cmds, fmt.Sprintf("go test -run Test%03d ./...", i))
		files = append(files, fmt.Sprintf("pkg/file%03d.go", i))
	}
	args, err := json.Marshal(map[string]any{
		"session_id": "cp", "token_budget": 150, "objective": "keep this", "decisions": []string{"d1", "d2"},
		"commands_run": cmds, "files_touched": files, "test_status": "passing", "next_action": "resume",
	})
	require.NoError(t, err)
	got := call(t, srv, alice, "session_checkpoint", string(args))
	assert.LessOrEqual(t, got["total_tokens"], float64(150))
	trimmed := got["trimmed"].(map[string]any)
	assert.Equal(t, float64(200), trimmed["commands_run"], "commands go first, all of them")
	assert.Greater(t, trimmed["files_touched"], float64(0))
	assert.NotContains(t, trimmed, "decisions")

	s := call(t, srv, alice, "get_session", `{"session_id":"cp"}`)
	state := s["state"].(map[string]any)
	assert.Equal(t, got["total_tokens"], s["total_tokens"])
	assert.NotContains(t, state, "commands_run")
	kept := state["files_touched"].([]any)
	assert.Equal(t, "pkg/file199.go", kept[len(kept)-1], "the newest entries are kept")
	assert.Equal(t, float64(200-len(kept)), trimmed["files_touched"])
	assert.Equal(t, trimmed, state["trimmed"])
	assert.Equal(t, "keep this", state["objective"])
	assert.Equal(t, "passing", state["test_status"])

	// A long text is shortened when nothing else is left to cut.
	args, err = json.Marshal(map[string]any{"session_id": "cp3", "token_budget": 40, "objective": strings.Repeat("é", 400), "test_status": "x"})
	require.NoError(t, err)
	got = call(t, srv, alice, "session_checkpoint", string(args))
	assert.LessOrEqual(t, got["total_tokens"], float64(40))
	trimmed = got["trimmed"].(map[string]any)
	assert.Equal(t, float64(1), trimmed["test_status"])
	assert.Greater(t, trimmed["objective"], float64(0))
	state = call(t, srv, alice, "get_session", `{"session_id":"cp3"}`)["state"].(map[string]any)
	assert.True(t, strings.HasPrefix(strings.Repeat("é", 400), state["objective"].(string)), "cut at a rune boundary")
}

func TestListSessions(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for _, id := range []string{"proj-b", "proj-a", "misc", "Proj-c"} {
		call(t, srv, alice, "save_session", `{"session_id":"`+id+`","state":{}}`)
	}
	got := call(t, srv, alice, "list_sessions", `{}`)
	assert.Equal(t, []string{"Proj-c", "misc", "proj-a", "proj-b"}, sessionIDs(t, got))
	assert.Equal(t, float64(4), got["count"])
	assert.Equal(t, false, got["truncated"])
	assert.Equal(t, []string{"proj-a", "proj-b"}, sessionIDs(t, call(t, srv, alice, "list_sessions", `{"prefix":"proj-"}`)))
	assert.Empty(t, sessionIDs(t, call(t, srv, alice, "list_sessions", `{"prefix":"zzz"}`)))
}

func TestListSessionsTruncated(t *testing.T) {
	srv, _, db := newTestServer(t)
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		for i := range maxListedSessions + 5 {
			err := store.PutSession(tx, &store.Session{ID: fmt.Sprintf("s%05d", i), Tenant: tenant, Owner: "alice", State: json.RawMessage(`{}`)})
			if err != nil {
				return err
			}
		}
		return nil
	}))
	got := call(t, srv, alice, "list_sessions", `{}`)
	ids := sessionIDs(t, got)
	assert.Len(t, ids, maxListedSessions)
	assert.Equal(t, "s00000", ids[0])
	assert.Equal(t, true, got["truncated"])
	assert.Len(t, sessionIDs(t, call(t, srv, alice, "list_sessions", `{"prefix":"s0100"}`)), 5)
}

func TestDeleteSession(t *testing.T) {
	srv, _, _ := newTestServer(t)
	call(t, srv, alice, "save_session", `{"session_id":"s","state":{"a":1}}`)
	assert.Equal(t, map[string]any{"deleted": true, "session_id": "s"}, call(t, srv, alice, "delete_session", `{"session_id":"s"}`))
	toolError(t, srv, alice, "get_session", `{"session_id":"s"}`)
	assert.Equal(t, map[string]any{"deleted": false, "session_id": "s"}, call(t, srv, alice, "delete_session", `{"session_id":"s"}`))
	assert.Empty(t, sessionIDs(t, call(t, srv, alice, "list_sessions", `{"include_archived":true}`)))
}

func TestArchiveSession(t *testing.T) {
	srv, clk, _ := newTestServer(t)
	call(t, srv, alice, "save_session", `{"session_id":"old","state":{"title":"Old work","big":[1,2,3]}}`)
	call(t, srv, alice, "save_session", `{"session_id":"new","state":{}}`)
	got := call(t, srv, alice, "archive_session", `{"session_id":"old","reason":"done"}`)
	assert.Equal(t, map[string]any{"session_id": "old", "archived": true, "archived_at": clk.Now().Format(time.RFC3339Nano),
		"reason": "done", "was_archived": false}, got)

	assert.Equal(t, []string{"new"}, sessionIDs(t, call(t, srv, alice, "list_sessions", `{}`)), "archived hidden by default")
	assert.Equal(t, []string{"new", "old"}, sessionIDs(t, call(t, srv, alice, "list_sessions", `{"include_archived":true}`)))
	s := call(t, srv, alice, "get_session", `{"session_id":"old"}`)
	assert.Equal(t, map[string]any{"title": "Old work", "big": []any{float64(1), float64(2), float64(3)}}, s["state"], "state kept in full")
	assert.Equal(t, true, s["archived"])
	assert.Equal(t, "done", s["archive_reason"])

	// Saving keeps it archived; archiving again replaces the reason.
	call(t, srv, alice, "save_session", `{"session_id":"old","state":{"title":"Old work v2"}}`)
	assert.Equal(t, []string{"new"}, sessionIDs(t, call(t, srv, alice, "list_sessions", `{}`)))
	got = call(t, srv, alice, "archive_session", `{"session_id":"old"}`)
	assert.Equal(t, true, got["was_archived"])
	assert.NotContains(t, got, "reason")

	got = call(t, srv, alice, "unarchive_session", `{"session_id":"old"}`)
	assert.Equal(t, map[string]any{"session_id": "old", "archived": false, "was_archived": true}, got)
	assert.Equal(t, []string{"new", "old"}, sessionIDs(t, call(t, srv, alice, "list_sessions", `{}`)))
	s = call(t, srv, alice, "get_session", `{"session_id":"old"}`)
	assert.Equal(t, false, s["archived"])
	assert.NotContains(t, s, "archive_reason")
	assert.Equal(t, map[string]any{"title": "Old work v2"}, s["state"])
	assert.Equal(t, false, call(t, srv, alice, "unarchive_session", `{"session_id":"old"}`)["was_archived"])
}

func TestArchiveSessionNotFound(t *testing.T) {
	srv, _, _ := newTestServer(t)
	assert.Equal(t, "session not found: x", toolError(t, srv, alice, "archive_session", `{"session_id":"x"}`))
	assert.Equal(t, "session not found: x", toolError(t, srv, alice, "unarchive_session", `{"session_id":"x"}`))
}

func TestSessionToolAnnotations(t *testing.T) {
	srv, _, _ := newTestServer(t)
	hints := map[string][2]bool{} // read-only, destructive
	for _, tl := range srv.ListTools(context.Background(), alice) {
		hints[tl.Name] = [2]bool{tl.Annotations.ReadOnlyHint, tl.Annotations.DestructiveHint}
	}
	assert.Equal(t, [2]bool{true, false}, hints["get_session"], "read-only: reclaiming an expired session is crux's bookkeeping")
	assert.Equal(t, [2]bool{true, false}, hints["list_sessions"], "read-only: reclaiming expired sessions is crux's bookkeeping")
	assert.Equal(t, [2]bool{false, true}, hints["delete_session"])
	assert.Equal(t, [2]bool{false, false}, hints["archive_session"])
	assert.Equal(t, [2]bool{false, false}, hints["save_session"])
}
