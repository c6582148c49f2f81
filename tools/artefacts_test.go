package tools_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"lukechampine.com/blake3"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// artefactServer is a server with CORECRUXD_FEATURE_ARTEFACTS on (and the
// audit envelope as asked).
func artefactServer(t *testing.T, envelope bool) (*crux.Server, *clock, *bolt.DB) {
	t.Helper()
	flags := crux.DefaultFlags()
	flags.Artefacts = true
	flags.AuditEnvelope = envelope
	return newTestServer(t, withFlags(flags))
}

// maxArtefactBytes is the largest artefact: what 1 MiB of base64 holds.
const maxArtefactBytes = 1 << 20 / 4 * 3

func putArtefact(t *testing.T, srv *crux.Server, c crux.Caller, content, extra string) map[string]any {
	t.Helper()
	return call(t, srv, c, "artefact_put", fmt.Sprintf(`{"content_bytes_base64":%q,"mime_type":"text/plain"%s}`, b64(content), extra))
}

func TestArtefactPutGet(t *testing.T) {
	srv, clk, _ := artefactServer(t, false)
	got := putArtefact(t, srv, alice, "hello artefact", `,"tool_origin":"query"`)
	h := blake3.Sum256([]byte("hello artefact"))
	id := "art_" + hex.EncodeToString(h[:])
	assert.Equal(t, id, got["artefact_id"])
	assert.Equal(t, "text/plain", got["mime_type"])
	assert.Equal(t, "query", got["tool_origin"])
	assert.EqualValues(t, len("hello artefact"), got["size_bytes"])
	assert.Equal(t, clk.Now().Format(time.RFC3339Nano), got["created_at"])
	assert.Equal(t, clk.Now().Add(7*24*time.Hour).Format(time.RFC3339Nano), got["expires_at"], "default ttl 7 days")
	assert.Equal(t, true, got["created"])

	out := call(t, srv, alice, "artefact_get", fmt.Sprintf(`{"artefact_id":%q}`, id))
	assert.Equal(t, b64("hello artefact"), out["content_base64"])
	assert.Equal(t, false, out["truncated"])
	assert.Equal(t, "query", out["tool_origin"])
}

func TestArtefactIdenticalBytesSameID(t *testing.T) {
	srv, clk, _ := artefactServer(t, false)
	first := putArtefact(t, srv, alice, "same", `,"tool_origin":"a"`)
	clk.Advance(time.Hour)
	second := call(t, srv, alice, "artefact_put", fmt.Sprintf(`{"content_bytes_base64":%q,"mime_type":"text/markdown","tool_origin":"b"}`, b64("same")))
	assert.Equal(t, first["artefact_id"], second["artefact_id"])
	assert.Equal(t, false, second["created"], "a refresh")
	assert.Equal(t, first["created_at"], second["created_at"], "created_at kept")
	assert.Equal(t, "text/markdown", second["mime_type"], "metadata refreshed")
	assert.NotEqual(t, first["expires_at"], second["expires_at"], "deadline refreshed")

	// Another passport parking identical bytes gets the same id and its own copy.
	bobs := putArtefact(t, srv, bob, "same", "")
	assert.Equal(t, first["artefact_id"], bobs["artefact_id"])
	assert.Equal(t, true, bobs["created"])
	assert.Equal(t, "text/plain", call(t, srv, bob, "artefact_get", fmt.Sprintf(`{"artefact_id":%q}`, bobs["artefact_id"]))["mime_type"])
	assert.Equal(t, "text/markdown", call(t, srv, alice, "artefact_get", fmt.Sprintf(`{"artefact_id":%q}`, bobs["artefact_id"]))["mime_type"])
	assert.Len(t, objects(t, call(t, srv, alice, "artefact_list", `{}`), "artefacts"), 1)
}

func TestArtefactTTL(t *testing.T) {
	srv, clk, _ := artefactServer(t, false)
	maxTTL := putArtefact(t, srv, alice, "max", `,"ttl_seconds":7776000`)
	assert.Equal(t, clk.Now().Add(90*24*time.Hour).Format(time.RFC3339Nano), maxTTL["expires_at"])

	e := callErr(t, srv, alice, "artefact_put", fmt.Sprintf(`{"content_bytes_base64":%q,"mime_type":"x","ttl_seconds":7776001}`, b64("over")))
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, "ttl_seconds")

	never := putArtefact(t, srv, alice, "never", `,"ttl_seconds":0`)
	assert.Nil(t, never["expires_at"])
	clk.Advance(1000 * 24 * time.Hour)
	out := call(t, srv, alice, "artefact_get", fmt.Sprintf(`{"artefact_id":%q}`, never["artefact_id"]))
	assert.Equal(t, b64("never"), out["content_base64"], "ttl 0 never expires")
}

func TestArtefactExpiryHidesAndReclaims(t *testing.T) {
	srv, clk, db := artefactServer(t, false)
	short := putArtefact(t, srv, alice, "short", `,"ttl_seconds":60`)
	swept := putArtefact(t, srv, bob, "swept", `,"ttl_seconds":60`)
	listed := putArtefact(t, srv, alice, "listed", `,"ttl_seconds":60`)
	clk.Advance(61 * time.Second)

	raw := func(owner string, id any) error {
		return db.View(context.Background(), func(tx store.Tx) error {
			_, _, err := store.GetArtefact(tx, store.Scope{Tenant: "default", Agent: owner}, id.(string), clk.Now())
			return err
		})
	}
	require.ErrorIs(t, raw("alice", short["artefact_id"]), store.ErrArtefactExpired, "still stored before anyone looks")

	res, err := srv.CallTool(context.Background(), alice, "artefact_get", json.RawMessage(fmt.Sprintf(`{"artefact_id":%q}`, short["artefact_id"])))
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content[0].Text, "not found")
	err = raw("alice", short["artefact_id"])
	assert.ErrorIs(t, err, store.ErrNotFound)
	assert.NotErrorIs(t, err, store.ErrArtefactExpired, "reclaimed on access")

	assert.Empty(t, objects(t, call(t, srv, alice, "artefact_list", `{}`), "artefacts"))
	assert.NotErrorIs(t, raw("alice", listed["artefact_id"]), store.ErrArtefactExpired, "list reclaims too")

	// A put sweeps expired artefacts of any passport.
	putArtefact(t, srv, alice, "fresh", "")
	err = raw("bob", swept["artefact_id"])
	assert.ErrorIs(t, err, store.ErrNotFound)
	assert.NotErrorIs(t, err, store.ErrArtefactExpired)
}

func TestArtefactPutSizeLimit(t *testing.T) {
	srv, _, _ := artefactServer(t, false)
	big := base64.StdEncoding.EncodeToString(make([]byte, maxArtefactBytes+1))
	e := callErr(t, srv, alice, "artefact_put", fmt.Sprintf(`{"content_bytes_base64":%q,"mime_type":"application/octet-stream"}`, big))
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Equal(t, "content_bytes_base64", paramOf(t, e).Param)
	assert.Contains(t, e.Message, "1048576")

	atLimit := base64.StdEncoding.EncodeToString(make([]byte, maxArtefactBytes))
	got := call(t, srv, alice, "artefact_put", fmt.Sprintf(`{"content_bytes_base64":%q,"mime_type":"application/octet-stream"}`, atLimit))
	assert.EqualValues(t, maxArtefactBytes, got["size_bytes"])
}

func TestArtefactPutInvalidInput(t *testing.T) {
	srv, _, _ := artefactServer(t, false)
	for _, tc := range []struct{ args, param string }{
		{`{"content_bytes_base64":"not base64!","mime_type":"text/plain"}`, "content_bytes_base64"},
		{`{"content_bytes_base64":"aGVsbG8","mime_type":"text/plain"}`, "content_bytes_base64"}, // missing padding
		{`{"content_bytes_base64":"","mime_type":"text/plain"}`, "content_bytes_base64"},
		{`{"content_bytes_base64":"aGk=","mime_type":"__internal"}`, "mime_type"},
		{`{"content_bytes_base64":"aGVsbG8=","mime_type":"text/plain","token_budget":1}`, "token_budget"},
	} {
		e := callErr(t, srv, alice, "artefact_put", tc.args)
		assert.Equal(t, crux.CodeInvalidParams, e.Code, tc.args)
		assert.Equal(t, tc.param, paramOf(t, e).Param, tc.args)
	}
	e := callErr(t, srv, alice, "artefact_put", `{"content_bytes_base64":"aGk=","mime_type":"text/plain","extra":1}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code, "unknown arguments are refused")
	// The budget admits content that fits: "aGk=" is one token.
	call(t, srv, alice, "artefact_put", `{"content_bytes_base64":"aGk=","mime_type":"text/plain","token_budget":2}`)
	assert.Empty(t, objects(t, call(t, srv, alice, "artefact_list", `{}`), "artefacts")[1:], "refused puts stored nothing")
}

func TestArtefactPutAnonymousRefused(t *testing.T) {
	srv, _, _ := artefactServer(t, false)
	assertNeedsIdentity(t, srv, "artefact_put", `{"content_bytes_base64":"aGk=","mime_type":"text/plain"}`)
}

func TestArtefactGetCrossPassport(t *testing.T) {
	srv, _, _ := artefactServer(t, false)
	id := putArtefact(t, srv, alice, "secret", "")["artefact_id"].(string)
	e := callErr(t, srv, bob, "artefact_get", fmt.Sprintf(`{"artefact_id":%q}`, id))
	assert.Equal(t, crux.CodeCapabilityDenied, e.Code)
	assert.Equal(t, map[string]any{"artefact_id": id, "reason": "cross_passport"}, e.Data)
	assert.NotContains(t, e.Message, "secret")
	// An anonymous caller learns nothing of who holds what: not found.
	res, err := srv.CallTool(context.Background(), anon, "artefact_get", json.RawMessage(fmt.Sprintf(`{"artefact_id":%q}`, id)))
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content[0].Text, "not found")
	// Another tenant does not see alice's artefact at all.
	other := crux.Caller{Agent: "bob", Authenticated: true, Tenant: "t2"}
	res, err = srv.CallTool(context.Background(), other, "artefact_get", json.RawMessage(fmt.Sprintf(`{"artefact_id":%q}`, id)))
	require.NoError(t, err)
	assert.True(t, res.IsError)
}

func TestArtefactGetNotFound(t *testing.T) {
	srv, _, _ := artefactServer(t, false)
	res, err := srv.CallTool(context.Background(), alice, "artefact_get", json.RawMessage(`{"artefact_id":"art_00"}`))
	require.NoError(t, err)
	assert.True(t, res.IsError)
	assert.Contains(t, res.Content[0].Text, "not found")
}

func TestArtefactGetTokenBudget(t *testing.T) {
	srv, _, _ := artefactServer(t, false)
	content := strings.Repeat("x", 30) // 40 base64 characters: 10 tokens
	id := putArtefact(t, srv, alice, content, "")["artefact_id"]
	over := call(t, srv, alice, "artefact_get", fmt.Sprintf(`{"artefact_id":%q,"token_budget":9}`, id))
	assert.Equal(t, true, over["truncated"])
	assert.NotContains(t, over, "content_base64")
	assert.EqualValues(t, 10, over["content_tokens"])
	assert.Equal(t, id, over["artefact_id"])
	fits := call(t, srv, alice, "artefact_get", fmt.Sprintf(`{"artefact_id":%q,"token_budget":10}`, id))
	assert.Equal(t, false, fits["truncated"])
	assert.Equal(t, b64(content), fits["content_base64"])
}

func TestArtefactListScopedNewestFirst(t *testing.T) {
	srv, clk, _ := artefactServer(t, false)
	var ids []any
	for i, origin := range []string{"query", "render", "query_scan"} {
		ids = append(ids, call(t, srv, alice, "artefact_put", fmt.Sprintf(
			`{"content_bytes_base64":%q,"mime_type":"text/plain","tool_origin":%q}`, b64(fmt.Sprint(i)), origin))["artefact_id"])
		clk.Advance(time.Second)
	}
	putArtefact(t, srv, bob, "bob's", `,"tool_origin":"query"`)

	got := call(t, srv, alice, "artefact_list", `{}`)
	arts := objects(t, got, "artefacts")
	assert.EqualValues(t, 3, got["count"])
	require.Len(t, arts, 3)
	assert.Equal(t, []any{ids[2], ids[1], ids[0]}, []any{arts[0]["artefact_id"], arts[1]["artefact_id"], arts[2]["artefact_id"]}, "newest first")
	assert.NotContains(t, arts[0], "content_base64", "metadata only")

	scoped := objects(t, call(t, srv, alice, "artefact_list", `{"scope":"query"}`), "artefacts")
	assert.Len(t, scoped, 2)
	assert.Len(t, objects(t, call(t, srv, alice, "artefact_list", `{"scope":"text/"}`), "artefacts"), 3, "scope matches mime_type too")
	assert.Len(t, objects(t, call(t, srv, alice, "artefact_list", `{"top_k":1}`), "artefacts"), 1)

	bobs := objects(t, call(t, srv, bob, "artefact_list", `{}`), "artefacts")
	require.Len(t, bobs, 1, "alice's artefacts are invisible to bob")
	assert.Empty(t, objects(t, call(t, srv, anon, "artefact_list", `{}`), "artefacts"))

	e := callErr(t, srv, alice, "artefact_list", `{"top_k":101}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, "top_k")
}

func TestArtefactListTokenBudget(t *testing.T) {
	srv, clk, _ := artefactServer(t, false)
	for i := range 3 {
		putArtefact(t, srv, alice, fmt.Sprint(i), "")
		clk.Advance(time.Second)
	}
	all := objects(t, call(t, srv, alice, "artefact_list", `{}`), "artefacts")
	b, _ := json.Marshal(all[0])
	row := len(b) / 4
	got := call(t, srv, alice, "artefact_list", fmt.Sprintf(`{"token_budget":%d}`, row+row/2))
	assert.Len(t, objects(t, got, "artefacts"), 1)
	assert.Equal(t, true, got["truncated"])
	assert.EqualValues(t, 1, got["count"])
	assert.Equal(t, false, call(t, srv, alice, "artefact_list", `{"token_budget":100000}`)["truncated"])
}

func TestArtefactListFiltersReservedMime(t *testing.T) {
	srv, clk, db := artefactServer(t, false)
	putArtefact(t, srv, alice, "visible", "")
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		_, _, err := store.PutArtefact(tx, store.Scope{Tenant: "default", Agent: "alice"}, "__crux/internal", "", []byte("internal"), 0, clk.Now())
		return err
	}))
	arts := objects(t, call(t, srv, alice, "artefact_list", `{}`), "artefacts")
	require.Len(t, arts, 1)
	assert.Equal(t, "text/plain", arts[0]["mime_type"])
}

func TestArtefactListAuditEnvelope(t *testing.T) {
	srv, _, _ := artefactServer(t, false)
	putArtefact(t, srv, alice, "a", "")
	assert.NotContains(t, call(t, srv, alice, "artefact_list", `{}`), "envelope", "off by default")

	srv, _, _ = artefactServer(t, true)
	id := putArtefact(t, srv, alice, "a", "")["artefact_id"]
	res, err := srv.CallTool(context.Background(), alice, "artefact_list", json.RawMessage(`{}`))
	require.NoError(t, err)
	env := structured(t, res)["envelope"].(map[string]any)
	used := env["memories_used"].([]any)
	require.Len(t, used, 1)
	assert.Equal(t, id, used[0].(map[string]any)["fact_id"])
	assert.NotNil(t, res.Meta["envelope"], "mirrored at _meta")
}

func TestArtefactsFlagOff(t *testing.T) {
	srv, _, db := newTestServer(t)
	for name, args := range map[string]string{
		"artefact_put":  `{"content_bytes_base64":"aGk=","mime_type":"text/plain"}`,
		"artefact_get":  `{"artefact_id":"art_00"}`,
		"artefact_list": `{}`,
	} {
		got := call(t, srv, alice, name, args)
		assert.Equal(t, false, got["feature_enabled"], name)
		assert.Equal(t, "CORECRUXD_FEATURE_ARTEFACTS", got["feature_flag"], name)
		assert.Equal(t, name, got["tool"], name)
	}
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		holders, err := store.ArtefactHolders(tx, "default", store.ArtefactID([]byte("hi")), time.Now())
		assert.Empty(t, holders, "nothing stored while off")
		return err
	}))
}
