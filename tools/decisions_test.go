package tools_test

import (
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
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/tools"
)

func TestRecordDecision(t *testing.T) {
	srv, _, db := newTestServer(t)
	got := call(t, srv, alice, "record_decision", `{"action":"use bbolt","rationale":"embedded, fsync","alternatives":["sqlite","badger"],
		"confidence":0.8,"session_id":"s1","context_refs":["f_1"]}`)
	assert.Equal(t, "__decisions__::s1", got["entity"])
	assert.Equal(t, "use bbolt", got["action"])

	// decision_hash is BLAKE3 of the canonical JSON of the six fields.
	canonical := `{"action":"use bbolt","alternatives":["sqlite","badger"],"confidence":0.8,"context_refs":["f_1"],"rationale":"embedded, fsync","session_id":"s1"}`
	sum := blake3.Sum256([]byte(canonical))
	assert.Equal(t, hex.EncodeToString(sum[:]), got["decision_hash"])

	// The receipt is signed, chained and verifiable with the server's keyring.
	r := getReceipt(t, db, got["receipt_id"].(string))
	rep := receipts.Verify(r, srv.Keyring(), time.Now())
	assert.True(t, rep.OK(), "receipt verifies: %+v", rep)
	h, err := r.Header()
	require.NoError(t, err)
	assert.Equal(t, "decision", h.Kind)
	var payload map[string]any
	require.NoError(t, r.Payload(&payload))
	assert.Equal(t, got["decision_hash"], payload["decision_hash"])
	assert.Equal(t, got["decision_id"], payload["decision_id"])

	// Queryable with query_facts under the reserved prefix, by any agent.
	q := rows(t, call(t, srv, bob, "query_facts", `{"entity_prefix":"__decisions__::"}`))
	require.Len(t, q, 1)
	assert.Equal(t, got["decision_id"], q[0]["key"])
	assert.Equal(t, got["fact_id"], q[0]["fact_id"])
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(q[0]["value"].(string)), &rec))
	assert.Equal(t, "embedded, fsync", rec["rationale"])
	assert.Equal(t, got["receipt_id"], rec["receipt_id"])
	assert.Equal(t, "alice", rec["recorded_by"])
	assert.InDelta(t, 0.8, q[0]["confidence"], 1e-9)

	// Reserved: not returned unasked, and not writable or deletable by clients.
	assert.Empty(t, rows(t, call(t, srv, bob, "query_facts", `{"query":"bbolt"}`)))
	e := callErr(t, srv, bob, "store_fact", `{"entity":"__decisions__::s1","key":"x","value":"forged"}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	e = callErr(t, srv, bob, "delete_fact", `{"fact_id":"`+got["fact_id"].(string)+`"}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
}

func TestRecordDecisionAppendOnly(t *testing.T) {
	srv, _, _ := newTestServer(t)
	a := call(t, srv, alice, "record_decision", `{"action":"ship","rationale":"ready"}`)
	b := call(t, srv, alice, "record_decision", `{"action":"ship","rationale":"ready"}`)
	assert.Equal(t, "__decisions__::_default", a["entity"])
	assert.NotEqual(t, a["decision_id"], b["decision_id"])
	assert.Equal(t, a["decision_hash"], b["decision_hash"], "same content, same hash")
	assert.NotEqual(t, a["receipt_id"], b["receipt_id"])
	q := rows(t, call(t, srv, alice, "query_facts", `{"entity":"__decisions__::_default","include_superseded":true}`))
	require.Len(t, q, 2)
	for _, r := range q {
		assert.Empty(t, r["superseded_by"], "no decision supersedes another")
	}
	canonical := `{"action":"ship","alternatives":[],"confidence":1,"context_refs":[],"rationale":"ready","session_id":"_default"}`
	sum := blake3.Sum256([]byte(canonical))
	assert.Equal(t, hex.EncodeToString(sum[:]), a["decision_hash"])
	h, err := store.DecisionHash(store.DecisionContent{Action: "ship", Rationale: "ready", Confidence: 1, SessionID: "_default"})
	require.NoError(t, err)
	assert.Equal(t, a["decision_hash"], h)
}

func TestRecordDecisionTenantScoped(t *testing.T) {
	srv, _, _ := newTestServer(t)
	call(t, srv, alice, "record_decision", `{"action":"a","rationale":"r"}`)
	other := crux.Caller{Agent: "carol", Authenticated: true, Tenant: "acme"}
	assert.Empty(t, rows(t, call(t, srv, other, "query_facts", `{"entity_prefix":"__decisions__::"}`)))
	// Visible to every agent of the tenant, anonymous callers included.
	assert.Len(t, rows(t, call(t, srv, anon, "query_facts", `{"entity_prefix":"__decisions__::"}`)), 1)
}

func TestRecordDecisionErrors(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for _, tc := range []struct{ args, param string }{
		{`{"rationale":"r"}`, "action"},
		{`{"action":"a"}`, "rationale"},
		{`{"action":" ","rationale":"r"}`, "action"},
		{`{"action":"a","rationale":"\t"}`, "rationale"},
		{`{"action":"a","rationale":"r","confidence":1.5}`, "confidence"},
		{`{"action":"a","rationale":"r","session_id":""}`, "session_id"},
		{`{"action":"a","rationale":"r","session_id":"a\u0000b"}`, "session_id"},
		{`{"action":"a","rationale":"r","alternatives":"x"}`, "alternatives"},
		{`{"action":"a","rationale":"r","why":"x"}`, "why"},
	} {
		e := callErr(t, srv, alice, "record_decision", tc.args)
		assert.Equal(t, crux.CodeInvalidParams, e.Code, tc.args)
		assert.Contains(t, e.Message, tc.param, tc.args)
	}
	assert.Empty(t, rows(t, call(t, srv, alice, "query_facts", `{"entity_prefix":"__decisions__::"}`)), "nothing written")
}

// TestPrefixedNameLimits: a value crux stores behind a prefix is limited to
// what the prefix leaves of MaxNameBytes, and the refusal says that limit.
func TestPrefixedNameLimits(t *testing.T) {
	srv, _, _ := newTestServer(t)
	for _, tc := range []struct {
		tool, param, args string // args holds %s where the value goes
		limit             int
	}{
		{"record_decision", "session_id", `{"action":"a","rationale":"r","session_id":"%s"}`, tools.MaxNameBytes - len("__decisions__::")},
		{"execplan_gate", "slug", `{"slug":"%s","milestone":"M1","status":"passed","commit_sha":"3277c67","token_budget":5}`, tools.MaxNameBytes - len("execplan:")},
		{"execplan_gate", "milestone", `{"slug":"s","milestone":"%s","status":"passed","commit_sha":"3277c67","token_budget":5}`, tools.MaxNameBytes - len("gate:")},
	} {
		call(t, srv, alice, tc.tool, fmt.Sprintf(tc.args, strings.Repeat("x", tc.limit)))
		e := callErr(t, srv, alice, tc.tool, fmt.Sprintf(tc.args, strings.Repeat("x", tc.limit+1)))
		assertInvalidParam(t, e, tc.tool, tc.param, fmt.Sprintf("longer than %d bytes", tc.limit))
	}
	// gate: is not part of the milestone's length.
	call(t, srv, alice, "execplan_gate", `{"slug":"s","milestone":"gate:`+strings.Repeat("x", tools.MaxNameBytes-len("gate:"))+`","status":"passed","commit_sha":"3277c67","token_budget":5}`)
}
