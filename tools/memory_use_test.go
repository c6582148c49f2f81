package tools_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
)

// ackServer is a server with CORECRUXD_FEATURE_MEMORY_ACK on (and the audit
// envelope as asked), a settable clock, and its store.
func ackServer(t *testing.T, envelope bool) (*crux.Server, *clock, store.Backend) {
	t.Helper()
	flags := crux.DefaultFlags()
	flags.MemoryAck, flags.AuditEnvelope = true, envelope
	return newTestServer(t, withFlags(flags))
}

// memoryUseReceipt is the payload of a receipt of kind memory_use.
type memoryUseReceipt struct {
	TurnID            string           `cbor:"turn_id"`
	ActorPassport     string           `cbor:"actor_passport"`
	Intent            string           `cbor:"intent"`
	CreatedAt         string           `cbor:"created_at"`
	Entries           []memoryUseEntry `cbor:"entries"`
	RetrievedChunkIDs []string         `cbor:"retrieved_chunk_ids"`
	Confidence        *float64         `cbor:"confidence,omitempty"`
	Note              string           `cbor:"note,omitempty"`
	RedactedCount     int              `cbor:"redacted_count"`
}

type memoryUseEntry struct {
	FactID string `cbor:"fact_id"`
	Entity string `cbor:"entity"`
}

// ackReceipt reads and verifies the memory_use receipt id, and decodes its payload.
func ackReceipt(t *testing.T, srv *crux.Server, db store.Backend, id string, now time.Time) memoryUseReceipt {
	t.Helper()
	r := getReceipt(t, db, id)
	assert.Equal(t, "memory_use", r.Kind)
	rep := receipts.Verify(r, srv.Keyring(), now)
	assert.True(t, rep.OK(), "receipt %s: %s", id, rep.ErrorCode)
	var p memoryUseReceipt
	require.NoError(t, r.Payload(&p))
	return p
}

// ackReservedFact writes a shared fact under a reserved entity, as crux
// itself does (store_fact refuses them), and returns its id.
func ackReservedFact(t *testing.T, db store.Backend, now time.Time) string {
	t.Helper()
	return putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: tenant}, Entity: "__ops::config", Key: "audit", Value: "v", Confidence: 1, Now: now})
}

func TestMemoryAcknowledgeUseFlagOff(t *testing.T) {
	srv, _, db := newTestServer(t)
	require.False(t, srv.Flags().MemoryAck, "off by default")
	id := storeID(t, srv, alice, `{"entity":"e","key":"k","value":"v"}`)
	before := receiptCount(t, db)
	for _, c := range []crux.Caller{alice, anon} {
		for _, args := range []string{fmt.Sprintf(`{"turn_id":"t1","fact_ids":[%q]}`, id), `{}`} {
			got := call(t, srv, c, "memory_acknowledge_use", args)
			assert.Equal(t, false, got["feature_enabled"])
			assert.Equal(t, "CORECRUXD_FEATURE_MEMORY_ACK", got["feature_flag"])
			assert.Nil(t, got["receipt_ref"])
			assert.Empty(t, got["memories_used"])
			assert.Contains(t, got, "receipt_ref")
			for _, k := range []string{"filtered_count", "redacted_count", "not_found_count", "not_visible_count"} {
				assert.EqualValues(t, 0, got[k], k)
			}
		}
	}
	assert.Equal(t, before, receiptCount(t, db), "no receipt while off")

	getenv := func(k string) string {
		if k == "CORECRUXD_FEATURE_MEMORY_ACK" {
			return "yes"
		}
		return ""
	}
	assert.True(t, flagsFrom(getenv).MemoryAck, "dialect D: any value but 0/false/off/no turns it on")
}

func TestMemoryAcknowledgeUseNeedsPassport(t *testing.T) {
	srv, _, db := ackServer(t, false)
	before := receiptCount(t, db)
	assertNeedsIdentity(t, srv, "memory_acknowledge_use", `{"turn_id":"t1"}`)
	assert.Equal(t, before, receiptCount(t, db))
}

func TestMemoryAcknowledgeUseCounts(t *testing.T) {
	srv, clk, db := ackServer(t, false)
	shared := storeID(t, srv, bob, `{"entity":"project:crux","key":"language","value":"Go"}`)
	clk.Advance(48 * time.Hour)
	older := storeID(t, srv, bob, `{"entity":"project:crux","key":"db","value":"bbolt"}`)
	storeID(t, srv, bob, `{"entity":"project:crux","key":"db","value":"postgres"}`) // older is superseded: still recordable
	mine := storeID(t, srv, alice, `{"entity":"diary","key":"mood","value":"alice secret","private":true}`)
	bobs := storeID(t, srv, bob, `{"entity":"diary","key":"mood","value":"bob secret","private":true}`)
	gone := storeID(t, srv, bob, `{"entity":"tmp","key":"k","value":"v"}`)
	call(t, srv, bob, "delete_fact", fmt.Sprintf(`{"fact_id":%q}`, gone))
	foreign := storeID(t, srv, crux.Caller{Agent: "bob", Authenticated: true, Tenant: "other"}, `{"entity":"x","key":"k","value":"v"}`)
	bootID := ackReservedFact(t, db, clk.Now())
	clk.Advance(24 * time.Hour)

	args := fmt.Sprintf(`{"turn_id":"turn-7","fact_ids":[%q,%q,%q,%q,%q,%q,%q,%q,"__ops::config","f_ffffffffffffffffffffffffffffffff",%q],"confidence":0.75,"note":"used for the summary"}`,
		shared, older, mine, bobs, gone, foreign, bootID, shared, shared)
	got := call(t, srv, alice, "memory_acknowledge_use", args)
	assert.Equal(t, true, got["feature_enabled"])
	assert.Equal(t, "turn-7", got["turn_id"])
	assert.Equal(t, "answer", got["intent"])
	assert.EqualValues(t, 2, got["filtered_count"], "the __ops:: fact, the __ops:: id")
	assert.EqualValues(t, 3, got["not_found_count"], "unknown id, another tenant's fact, bob's private fact")
	assert.EqualValues(t, 1, got["not_visible_count"], "deleted")
	assert.EqualValues(t, 1, got["redacted_count"], "alice's own private fact")
	assert.Empty(t, got["notes"])
	assert.NotContains(t, fmt.Sprint(got), "secret")
	assert.NotContains(t, fmt.Sprint(got), "diary")
	assert.NotContains(t, fmt.Sprint(got), "__")

	used := got["memories_used"].([]any)
	require.Len(t, used, 3)
	u0, u1, u2 := used[0].(map[string]any), used[1].(map[string]any), used[2].(map[string]any)
	assert.Equal(t, map[string]any{"fact_id": shared, "topic": "project:crux", "age_days": 3.0}, u0)
	assert.Equal(t, map[string]any{"fact_id": older, "topic": "project:crux", "age_days": 1.0}, u1)
	assert.Equal(t, map[string]any{"fact_id": mine, "topic": "", "age_days": 1.0, "redacted": true}, u2)

	// The receipt is signed, verifies offline and records the shared facts only.
	ref := got["receipt_ref"].(string)
	require.Regexp(t, `^r_[0-9a-f]{32}$`, ref)
	p := ackReceipt(t, srv, db, ref, clk.Now())
	assert.Equal(t, "turn-7", p.TurnID)
	assert.Equal(t, "alice", p.ActorPassport)
	assert.Equal(t, "answer", p.Intent)
	assert.Equal(t, clk.Now().Format(time.RFC3339Nano), p.CreatedAt)
	assert.Equal(t, []memoryUseEntry{{FactID: shared, Entity: "project:crux"}, {FactID: older, Entity: "project:crux"}}, p.Entries)
	assert.Empty(t, p.RetrievedChunkIDs)
	require.NotNil(t, p.Confidence)
	assert.Equal(t, 0.75, *p.Confidence)
	assert.Equal(t, "used for the summary", p.Note)
	assert.Equal(t, 1, p.RedactedCount)
	h, err := getReceipt(t, db, ref).Header()
	require.NoError(t, err)
	assert.Equal(t, "alice", h.Actor)
	assert.Equal(t, tenant, h.TenantID)
}

func TestMemoryAcknowledgeUseVisibility(t *testing.T) {
	srv, clk, db := ackServer(t, true)
	mine := storeID(t, srv, alice, `{"entity":"journal","key":"plan","value":"alice secret","private":true}`)
	// Bob cannot tell alice's private fact from no fact at all, and learns nothing of it.
	got := call(t, srv, bob, "memory_acknowledge_use", fmt.Sprintf(`{"turn_id":"b1","fact_ids":[%q]}`, mine))
	assert.EqualValues(t, 1, got["not_found_count"])
	assert.EqualValues(t, 0, got["filtered_count"])
	assert.Empty(t, got["memories_used"])
	none := call(t, srv, bob, "memory_acknowledge_use", `{"turn_id":"b1","fact_ids":["f_ffffffffffffffffffffffffffffffff"]}`)
	same := func(answer map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range answer {
			if k != "receipt_ref" && k != "envelope" {
				out[k] = v
			}
		}
		return out
	}
	assert.Equal(t, same(none), same(got), "another agent's private fact answers as no such fact")
	assert.NotContains(t, fmt.Sprint(got), "journal")
	p := ackReceipt(t, srv, db, got["receipt_ref"].(string), clk.Now())
	assert.Empty(t, p.Entries)
	assert.Zero(t, p.RedactedCount)
	env := got["envelope"].(map[string]any)
	assert.Empty(t, env["memories_used"])

	// Alice's own acknowledgement keeps the private entity out of the receipt and the envelope.
	got = call(t, srv, alice, "memory_acknowledge_use", fmt.Sprintf(`{"turn_id":"a1","fact_ids":[%q]}`, mine))
	assert.EqualValues(t, 1, got["redacted_count"])
	p = ackReceipt(t, srv, db, got["receipt_ref"].(string), clk.Now())
	assert.Empty(t, p.Entries)
	assert.Equal(t, 1, p.RedactedCount)
	env = got["envelope"].(map[string]any)
	assert.Empty(t, env["memories_used"])
	assert.NotContains(t, fmt.Sprint(env), "journal")
}

func TestMemoryAcknowledgeUseIntentAndChunks(t *testing.T) {
	srv, clk, db := ackServer(t, false)
	got := call(t, srv, alice, "memory_acknowledge_use", `{"turn_id":"t1","intent":"decision"}`)
	assert.Equal(t, "decision", got["intent"])
	assert.Empty(t, got["notes"])
	assert.Empty(t, got["memories_used"])
	assert.Equal(t, "decision", ackReceipt(t, srv, db, got["receipt_ref"].(string), clk.Now()).Intent)

	// Another intent is accepted and recorded as given, with a note.
	got = call(t, srv, alice, "memory_acknowledge_use", `{"turn_id":"t2","intent":"brainstorm"}`)
	assert.Equal(t, "brainstorm", got["intent"])
	assert.Contains(t, got["notes"].([]any)[0], `intent "brainstorm" recorded as given`)
	assert.Equal(t, "brainstorm", ackReceipt(t, srv, db, got["receipt_ref"].(string), clk.Now()).Intent)

	// Chunk ids are a paid-tier feature: reported as ignored, not recorded.
	got = call(t, srv, alice, "memory_acknowledge_use", `{"turn_id":"t3","retrieved_chunk_ids":["c1","c2"]}`)
	assert.EqualValues(t, 2, got["retrieved_chunk_ids_ignored"])
	assert.Contains(t, got["notes"].([]any)[0], "paid-tier")
	p := ackReceipt(t, srv, db, got["receipt_ref"].(string), clk.Now())
	assert.Empty(t, p.RetrievedChunkIDs)
	assert.Nil(t, p.Confidence, "confidence only when given")
	assert.Empty(t, p.Note)

	// Every call mints its own receipt, chained in the tenant.
	refs := map[string]bool{}
	for range 3 {
		refs[call(t, srv, alice, "memory_acknowledge_use", `{"turn_id":"same"}`)["receipt_ref"].(string)] = true
	}
	assert.Len(t, refs, 3)
	require.NoError(t, db.View(t.Context(), func(tx store.Tx) error { return receipts.VerifyStoredChain(tx, tenant) }))
}

func TestMemoryAcknowledgeUseArguments(t *testing.T) {
	srv, _, db := ackServer(t, false)
	before := receiptCount(t, db)
	for args, param := range map[string]string{
		`{}`:                                        "turn_id",
		`{"turn_id":""}`:                            "turn_id",
		`{"turn_id":"a\u0001b"}`:                    "turn_id",
		`{"turn_id":"t","fact_ids":"f_1"}`:          "fact_ids",
		`{"turn_id":"t","fact_ids":[""]}`:           "fact_ids.0",
		`{"turn_id":"t","intent":""}`:               "intent",
		`{"turn_id":"t","confidence":1.01}`:         "confidence",
		`{"turn_id":"t","confidence":-1}`:           "confidence",
		`{"turn_id":"t","retrieved_chunk_ids":[1]}`: "retrieved_chunk_ids.0",
		`{"turn_id":"t","entries":[]}`:              "entries",
	} {
		e := callErr(t, srv, alice, "memory_acknowledge_use", args)
		assert.Equal(t, crux.CodeInvalidParams, e.Code, args)
		assert.Equal(t, param, paramOf(t, e).Param, args)
	}
	assert.Equal(t, before, receiptCount(t, db), "a rejected call writes nothing")
}

func TestMemoryAcknowledgeUseAuditEnvelope(t *testing.T) {
	srv, clk, db := ackServer(t, true)
	used := storeID(t, srv, bob, `{"entity":"proj","key":"k","value":"v","source_receipt":"r_src","horizon_class":"volatile"}`)
	boot := ackReservedFact(t, db, clk.Now())
	mine := storeID(t, srv, alice, `{"entity":"mine","key":"k","value":"v","private":true}`)
	clk.Advance(48 * time.Hour)

	res, err := srv.CallTool(t.Context(), alice, "memory_acknowledge_use",
		[]byte(fmt.Sprintf(`{"turn_id":"t1","fact_ids":[%q,%q,%q]}`, used, boot, mine)))
	require.NoError(t, err)
	got := structured(t, res)
	env := got["envelope"].(map[string]any)
	assert.Equal(t, []any{"r_src"}, env["receipts_used"])
	mu := env["memories_used"].([]any)
	require.Len(t, mu, 1, "reserved and private entities are never listed")
	m := mu[0].(map[string]any)
	assert.Equal(t, used, m["fact_id"])
	assert.Equal(t, "proj", m["topic"])
	assert.EqualValues(t, 2, m["age_days"])
	assert.Equal(t, "stale", m["freshness"])
	assert.Contains(t, env["predicted_effects"], map[string]any{"kind": "receipt_emit", "entity": "", "key": ""})
	assert.Contains(t, env["predicted_effects"], map[string]any{"kind": "fact_read", "entity": "proj", "key": "k"})
	assert.Equal(t, "crux verify receipt "+got["receipt_ref"].(string), env["links"].(map[string]any)["verify"])
	assert.Equal(t, "crux-mcp.memory_acknowledge_use", env["autonomy_consumed"].(map[string]any)["capability"])
	meta, err := json.Marshal(res.Meta["envelope"])
	require.NoError(t, err)
	want, err := json.Marshal(env)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(meta), "mirrored at _meta")
}
