package tools_test

// Bounded answers: every listing is capped, counted and says truncated, and
// a default answer stays under 64 KB whatever the store holds.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store"
)

// maxDefaultAnswer is the size every default answer stays under.
const maxDefaultAnswer = 64 << 10

// answerSize is the size of a tool's whole result as JSON, as a client
// receives it (text and structuredContent).
func answerSize(t testing.TB, srv *crux.Server, c crux.Caller, name, args string) int {
	t.Helper()
	b, err := json.Marshal(result(t, srv, c, name, args))
	require.NoError(t, err)
	return len(b)
}

// fillChain writes n versions of (entity, key) as agent (private or
// shared) straight into the store, one millisecond apart from at, in one
// transaction, and returns their ids, oldest first. value names each.
func fillChain(t testing.TB, db store.Backend, agent, entity, key string, private bool, n int, at time.Time, value func(i int) string) []string {
	t.Helper()
	ids := make([]string, 0, n)
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		ids = ids[:0]
		for i := range n {
			f, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: tenant, Agent: agent},
				Entity: entity, Key: key, Value: value(i), Confidence: 1, Private: private,
				Now: at.Add(time.Duration(i) * time.Millisecond)})
			if err != nil {
				return err
			}
			ids = append(ids, f.ID)
		}
		return nil
	}))
	return ids
}

// reversed returns ids newest first.
func reversed(ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[len(ids)-1-i] = id
	}
	return out
}

// historyIDs are the version ids of a history page, in order; idField
// names them (fact_id in fact_history, id in memory_history).
func historyIDs(t testing.TB, got map[string]any, idField string) []string {
	t.Helper()
	var ids []string
	for _, v := range objects(t, got, "versions") {
		ids = append(ids, v[idField].(string))
	}
	return ids
}

// walkHistory reads every page of a history, passing each next_cursor
// back, and returns the ids in order and the number of pages.
func walkHistory(t testing.TB, srv *crux.Server, c crux.Caller, name, idField string, args map[string]any) ([]string, int) {
	t.Helper()
	var ids []string
	for pages := 1; pages < 10_000; pages++ {
		b, err := json.Marshal(args)
		require.NoError(t, err)
		got := call(t, srv, c, name, string(b))
		ids = append(ids, historyIDs(t, got, idField)...)
		cursor, more := got["next_cursor"].(string)
		assert.Equal(t, more, got["truncated"], "truncated says whether a next_cursor follows")
		if !more {
			return ids, pages
		}
		require.NotEmpty(t, historyIDs(t, got, idField), "a page with a next_cursor lists a version")
		args["cursor"] = cursor
	}
	t.Fatal("the walk does not end")
	return nil, 0
}

func TestHistoryLimit(t *testing.T) {
	srv, clk, db := newTestServer(t)
	ids := fillChain(t, db, "", "e", "k", false, 100, clk.Now(), func(i int) string { return fmt.Sprint("v", i) })

	for _, name := range []string{"fact_history", "memory_history"} {
		idField := map[string]string{"fact_history": "fact_id", "memory_history": "id"}[name]
		// 100 versions: the default limit, one page.
		got := call(t, srv, alice, name, `{"entity":"e","key":"k"}`)
		assert.Equal(t, reversed(ids), historyIDs(t, got, idField), "%s: newest first", name)
		assert.Equal(t, false, got["truncated"], name)
		assert.NotContains(t, got, "next_cursor", name)
		assert.Less(t, answerSize(t, srv, alice, name, `{"entity":"e","key":"k"}`), maxDefaultAnswer, name)

		// An explicit limit, at the chain's length and one below.
		got = call(t, srv, alice, name, `{"entity":"e","key":"k","limit":100}`)
		assert.Len(t, historyIDs(t, got, idField), 100, name)
		assert.NotContains(t, got, "next_cursor", name)
		got = call(t, srv, alice, name, `{"entity":"e","key":"k","limit":99}`)
		assert.Equal(t, reversed(ids)[:99], historyIDs(t, got, idField), name)
		assert.Equal(t, true, got["truncated"], name)
		got = call(t, srv, alice, name, fmt.Sprintf(`{"entity":"e","key":"k","limit":99,"cursor":%q}`, got["next_cursor"]))
		assert.Equal(t, []string{ids[0]}, historyIDs(t, got, idField), name)
		assert.NotContains(t, got, "next_cursor", name)
	}

	// 101 versions: the default page holds 100, the next one the oldest.
	more := fillChain(t, db, "", "e", "k", false, 1, clk.Now().Add(time.Hour), func(int) string { return "v100" })
	all := append(ids, more...)
	for _, name := range []string{"fact_history", "memory_history"} {
		idField := map[string]string{"fact_history": "fact_id", "memory_history": "id"}[name]
		got := call(t, srv, alice, name, `{"entity":"e","key":"k"}`)
		assert.Equal(t, reversed(all)[:100], historyIDs(t, got, idField), name)
		assert.Equal(t, true, got["truncated"], name)
		require.IsType(t, "", got["next_cursor"], name)
		got = call(t, srv, alice, name, fmt.Sprintf(`{"entity":"e","key":"k","cursor":%q}`, got["next_cursor"]))
		assert.Equal(t, []string{ids[0]}, historyIDs(t, got, idField), name)
		assert.Equal(t, false, got["truncated"], name)
	}

	// memory_history by fact_id pages the same way.
	got := call(t, srv, alice, "memory_history", fmt.Sprintf(`{"fact_id":%q,"limit":1}`, ids[5]))
	assert.Equal(t, more, historyIDs(t, got, "id"))
	got = call(t, srv, alice, "memory_history", fmt.Sprintf(`{"fact_id":%q,"limit":1,"cursor":%q}`, ids[5], got["next_cursor"]))
	assert.Equal(t, []string{ids[99]}, historyIDs(t, got, "id"))
}

func TestHistoryCursorWalksEveryVersionOnce(t *testing.T) {
	srv, clk, db := newTestServer(t)
	// A shared chain and alice's private chain of the same pair, interleaved,
	// and bob's private chain, which alice never sees.
	shared := fillChain(t, db, "bob", "e", "k", false, 700, clk.Now(), func(i int) string { return fmt.Sprint("shared ", i) })
	private := fillChain(t, db, "alice", "e", "k", true, 555, clk.Now().Add(time.Second/2), func(i int) string { return fmt.Sprint("private ", i) })
	fillChain(t, db, "bob", "e", "k", true, 10, clk.Now(), func(i int) string { return "bob's" })

	// The newest-first merge of the two chains by stored_at.
	var want []string
	for i, j := len(shared)-1, len(private)-1; i >= 0 || j >= 0; {
		// shared[i] is stored at i ms, private[j] at 500+j ms; shared first on a tie.
		if j < 0 || i >= 0 && i >= 500+j {
			want, i = append(want, shared[i]), i-1
		} else {
			want, j = append(want, private[j]), j-1
		}
	}
	for _, tc := range []struct {
		limit any
		pages int
	}{{nil, 13}, {1000, 0}, {7, 180}, {1, 1255}} {
		for _, name := range []string{"fact_history", "memory_history"} {
			idField := map[string]string{"fact_history": "fact_id", "memory_history": "id"}[name]
			args := map[string]any{"entity": "e", "key": "k"}
			if tc.limit != nil {
				args["limit"] = tc.limit
			}
			if tc.limit == 1 && name == "memory_history" {
				continue // one walk of 1255 pages is enough
			}
			got, pages := walkHistory(t, srv, alice, name, idField, args)
			assert.Equal(t, want, got, "%s limit %v: every version once, newest first", name, tc.limit)
			if tc.pages > 0 {
				assert.Equal(t, tc.pages, pages, "%s limit %v", name, tc.limit)
			} else {
				assert.Greater(t, pages, 1, "%s limit %v: the answer size ends a page early", name, tc.limit)
			}
		}
	}
	// By fact_id: the private chain alone, and the shared one alone.
	got, _ := walkHistory(t, srv, alice, "memory_history", "id", map[string]any{"fact_id": private[3], "limit": 50})
	assert.Equal(t, reversed(private), got)
	got, _ = walkHistory(t, srv, alice, "memory_history", "id", map[string]any{"fact_id": shared[3], "limit": 50})
	assert.Equal(t, reversed(shared), got)
	// anonymous: the shared chain.
	got, _ = walkHistory(t, srv, anon, "fact_history", "fact_id", map[string]any{"entity": "e", "key": "k"})
	assert.Equal(t, reversed(shared), got)
}

func TestHistoryWalkIgnoresLaterWrites(t *testing.T) {
	srv, clk, db := newTestServer(t)
	ids := fillChain(t, db, "", "e", "k", false, 5, clk.Now(), func(i int) string { return fmt.Sprint(i) })
	got := call(t, srv, alice, "fact_history", `{"entity":"e","key":"k","limit":2}`)
	first := historyIDs(t, got, "fact_id")
	clk.Advance(time.Hour)
	storeID(t, srv, alice, `{"entity":"e","key":"k","value":"late"}`)
	storeID(t, srv, alice, `{"entity":"e","key":"k","value":"private late","private":true}`)
	rest, _ := walkHistory(t, srv, alice, "fact_history", "fact_id", map[string]any{"entity": "e", "key": "k", "limit": 2, "cursor": got["next_cursor"]})
	assert.Equal(t, reversed(ids), append(first, rest...), "the walk lists the history as it stood at its first page")
	assert.Len(t, objects(t, call(t, srv, alice, "fact_history", `{"entity":"e","key":"k"}`), "versions"), 7, "a new walk sees them")
}

func TestHistoryPageStopsBeforeTheAnswerGrowsTooLarge(t *testing.T) {
	srv, clk, db := newTestServer(t)
	big := strings.Repeat(`"quoted" <text> `, 256) // 4 KiB, and more once escaped
	ids := fillChain(t, db, "", "e", "k", false, 40, clk.Now(), func(i int) string { return fmt.Sprint(i, big) })
	for _, name := range []string{"fact_history", "memory_history"} {
		idField := map[string]string{"fact_history": "fact_id", "memory_history": "id"}[name]
		got := call(t, srv, alice, name, `{"entity":"e","key":"k"}`)
		n := len(historyIDs(t, got, idField))
		assert.Less(t, n, 40, name)
		assert.Greater(t, n, 1, name)
		assert.Equal(t, true, got["truncated"], name)
		assert.Less(t, answerSize(t, srv, alice, name, `{"entity":"e","key":"k"}`), maxDefaultAnswer, name)
		walked, _ := walkHistory(t, srv, alice, name, idField, map[string]any{"entity": "e", "key": "k", "limit": 1000})
		assert.Equal(t, reversed(ids), walked, name)
	}
	// A version larger than the answer budget comes back alone.
	huge := fillChain(t, db, "", "huge", "k", false, 2, clk.Now(), func(int) string { return strings.Repeat("x", 100_000) })
	got := call(t, srv, alice, "fact_history", `{"entity":"huge","key":"k"}`)
	assert.Equal(t, []string{huge[1]}, historyIDs(t, got, "fact_id"))
	assert.Equal(t, true, got["truncated"])
}

func TestHistoryCursorErrors(t *testing.T) {
	srv, clk, db := newTestServer(t)
	ids := fillChain(t, db, "", "e", "k", false, 3, clk.Now(), func(i int) string { return fmt.Sprint(i) })
	fillChain(t, db, "", "other", "k", false, 3, clk.Now(), func(i int) string { return fmt.Sprint(i) })
	cursor := call(t, srv, alice, "fact_history", `{"entity":"e","key":"k","limit":1}`)["next_cursor"].(string)

	for _, tc := range []struct {
		c          crux.Caller
		name, args string
		reason     string
	}{
		{alice, "fact_history", `{"entity":"e","key":"k","cursor":"nonsense"}`, "is not a next_cursor this tool returned; pass it back unchanged"},
		{alice, "fact_history", `{"entity":"e","key":"k","cursor":"h1.AAAAAAAAAAAAAAAAAAAAAA"}`, "is not a next_cursor this tool returned; pass it back unchanged"},
		{alice, "fact_history", fmt.Sprintf(`{"entity":"e","key":"k","cursor":%q}`, cursor+"A"), "is not a next_cursor this tool returned; pass it back unchanged"},
		{alice, "fact_history", fmt.Sprintf(`{"entity":"other","key":"k","cursor":%q}`, cursor), "belongs to another history: pass it with the same arguments as the call that returned it"},
		{bob, "fact_history", fmt.Sprintf(`{"entity":"e","key":"k","cursor":%q}`, cursor), "belongs to another history: pass it with the same arguments as the call that returned it"},
		{alice, "memory_history", fmt.Sprintf(`{"entity":"e","key":"k","cursor":%q}`, cursor), "belongs to another history: pass it with the same arguments as the call that returned it"},
		{alice, "memory_history", fmt.Sprintf(`{"fact_id":%q,"cursor":%q}`, ids[0], cursor), "belongs to another history: pass it with the same arguments as the call that returned it"},
	} {
		assertInvalidParam(t, callErr(t, srv, tc.c, tc.name, tc.args), tc.name, "cursor", tc.reason)
	}
	for _, name := range []string{"fact_history", "memory_history"} {
		for _, args := range []string{`{"entity":"e","key":"k","limit":0}`, `{"entity":"e","key":"k","limit":1001}`, `{"entity":"e","key":"k","cursor":""}`} {
			e := callErr(t, srv, alice, name, args)
			assert.Equal(t, crux.CodeInvalidParams, e.Code, args)
			assert.Equal(t, map[bool]string{true: "cursor", false: "limit"}[strings.Contains(args, "cursor")], paramOf(t, e).Param, args)
		}
	}
}

// fillFacts writes n shared facts, one per entity named by entity, as
// agent straight into the store in one transaction, and returns their ids
// in order.
func fillFacts(t testing.TB, db store.Backend, agent string, n int, at time.Time, entity func(i int) string) []string {
	t.Helper()
	ids := make([]string, 0, n)
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		ids = ids[:0]
		for i := range n {
			f, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: tenant, Agent: agent},
				Entity: entity(i), Key: "k", Value: "v", Confidence: 1, Now: at.Add(time.Duration(i) * time.Millisecond)})
			if err != nil {
				return err
			}
			ids = append(ids, f.ID)
		}
		return nil
	}))
	return ids
}

// strs converts a JSON array of strings.
func strs(t testing.TB, v any) []string {
	t.Helper()
	raw, ok := v.([]any)
	require.True(t, ok, "%v is not an array", v)
	out := make([]string, len(raw))
	for i, s := range raw {
		out[i] = s.(string)
	}
	return out
}

func TestForgetListsAreCapped(t *testing.T) {
	const scope = `{"type":"entity_prefix","value":"p:"}`
	for _, n := range []int{100, 101} {
		srv, clk, db := newTestServer(t)
		ids := fillFacts(t, db, "alice", n, clk.Now(), func(i int) string { return fmt.Sprintf("p:%03d", i) })

		dry := call(t, srv, alice, "memory_forget_dry_run", `{"scope":`+scope+`}`)
		assert.EqualValues(t, n, dry["count"], "count is every fact selected")
		assert.Equal(t, ids[:100], forgetAffected(t, dry), "the first 100, oldest first")
		assert.Equal(t, n > 100, dry["truncated"], n)

		got := call(t, srv, alice, "memory_forget", `{"scope":`+scope+`,"reason":"cap"}`)
		assert.EqualValues(t, n, got["facts_affected"])
		assert.Equal(t, ids[:100], strs(t, got["fact_ids"]))
		assert.Equal(t, n > 100, got["truncated"], n)
		// The forget applies to every fact selected, listed or not.
		_, p := forgetReceipt(t, db, got["forget_receipt_id"].(string))
		assert.Len(t, p.FactsAffected, n, "the receipt names every fact")
		assert.Empty(t, rows(t, call(t, srv, alice, "query_facts", `{"entity_prefix":"p:","top_k":1000}`)))
		assert.EqualValues(t, 0, call(t, srv, alice, "memory_forget_dry_run", `{"scope":`+scope+`}`)["count"])
	}
}

func TestForgetReceiptBodyInlineUpToALimit(t *testing.T) {
	srv, clk, db := newTestServer(t)
	fillFacts(t, db, "alice", 3, clk.Now(), func(i int) string { return fmt.Sprintf("small:%d", i) })
	fillFacts(t, db, "alice", 200, clk.Now(), func(i int) string { return fmt.Sprintf("large:%d", i) })

	small := call(t, srv, alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"small:"},"reason":"r"}`)
	r := getReceipt(t, db, small["forget_receipt_id"].(string))
	assert.Equal(t, false, small["receipt_body_omitted"])
	assert.EqualValues(t, len(r.Body), small["receipt_body_bytes"])
	assert.Equal(t, fmt.Sprintf("%x", r.Body), small["receipt_body_cbor_hex"])

	large := call(t, srv, alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"large:"},"reason":"r"}`)
	r = getReceipt(t, db, large["forget_receipt_id"].(string))
	assert.Greater(t, len(r.Body), 8<<10)
	assert.Equal(t, true, large["receipt_body_omitted"])
	assert.EqualValues(t, len(r.Body), large["receipt_body_bytes"])
	assert.NotContains(t, large, "receipt_body_cbor_hex")
	assert.Equal(t, fmt.Sprintf("%x", r.PayloadHash), large["receipt_body_hash_hex"], "the hash always names the body")
	assert.Len(t, strs(t, large["fact_ids"]), 100)
}

func TestForgetDryRunStopsBeforeTheAnswerGrowsTooLarge(t *testing.T) {
	srv, clk, db := newTestServer(t)
	long := strings.Repeat("<&>", 300) // 900 bytes, escaped to 5,400
	ids := fillFacts(t, db, "alice", 60, clk.Now(), func(i int) string { return fmt.Sprintf("p:%03d%s", i, long) })
	args := `{"scope":{"type":"entity_prefix","value":"p:"}}`
	dry := call(t, srv, alice, "memory_forget_dry_run", args)
	listed := forgetAffected(t, dry)
	assert.Less(t, len(listed), 60)
	assert.Greater(t, len(listed), 1)
	assert.Equal(t, ids[:len(listed)], listed)
	assert.EqualValues(t, 60, dry["count"])
	assert.Equal(t, true, dry["truncated"])
	assert.Less(t, answerSize(t, srv, alice, "memory_forget_dry_run", args), maxDefaultAnswer)
}

func TestListEntitiesIsCapped(t *testing.T) {
	srv, clk, db := newTestServer(t)
	fillFacts(t, db, "", 200, clk.Now(), func(i int) string { return fmt.Sprintf("e:%03d", i) })
	got := call(t, srv, alice, "list_entities", `{}`)
	assert.Len(t, strs(t, got["entities"]), 200)
	assert.EqualValues(t, 200, got["count"])
	assert.Equal(t, false, got["truncated"])

	fillFacts(t, db, "", 1, clk.Now(), func(int) string { return "e:200" })
	got = call(t, srv, alice, "list_entities", `{}`)
	names := strs(t, got["entities"])
	assert.Len(t, names, 200)
	assert.Equal(t, "e:199", names[199], "sorted: the first 200")
	assert.EqualValues(t, 201, got["count"])
	assert.Equal(t, true, got["truncated"])
	got = call(t, srv, alice, "list_entities", `{"limit":201}`)
	assert.Len(t, strs(t, got["entities"]), 201)
	assert.Equal(t, false, got["truncated"])

	// prefix narrows them.
	got = call(t, srv, alice, "list_entities", `{"prefix":"e:19"}`)
	assert.Equal(t, []string{"e:190", "e:191", "e:192", "e:193", "e:194", "e:195", "e:196", "e:197", "e:198", "e:199"}, strs(t, got["entities"]))
	assert.EqualValues(t, 10, got["count"])
	assert.Equal(t, false, got["truncated"])

	// Long names: the answer size stops the list first.
	fillFacts(t, db, "", 100, clk.Now(), func(i int) string { return fmt.Sprintf("long:%03d:%s", i, strings.Repeat("n", 1000)) })
	got = call(t, srv, alice, "list_entities", `{"prefix":"long:"}`)
	n := len(strs(t, got["entities"]))
	assert.Less(t, n, 100)
	assert.Greater(t, n, 1)
	assert.EqualValues(t, 100, got["count"])
	assert.Equal(t, true, got["truncated"])
	assert.Less(t, answerSize(t, srv, alice, "list_entities", `{"prefix":"long:","limit":1000}`), maxDefaultAnswer)

	for _, args := range []string{`{"limit":0}`, `{"limit":1001}`, `{"prefix":""}`} {
		assert.Equal(t, crux.CodeInvalidParams, callErr(t, srv, alice, "list_entities", args).Code, args)
	}
}

func TestListSessionsAndConstraintsStopBeforeTheAnswerGrowsTooLarge(t *testing.T) {
	srv, clk, db := newTestServer(t)
	for i := range 80 {
		id := fmt.Sprintf("%03d-%s", i, strings.Repeat("s", 1000))
		call(t, srv, alice, "save_session", fmt.Sprintf(`{"session_id":%q,"state":{}}`, id))
	}
	got := call(t, srv, alice, "list_sessions", `{}`)
	n := len(strs(t, got["sessions"]))
	assert.Less(t, n, 80)
	assert.Greater(t, n, 1)
	assert.EqualValues(t, n, got["count"])
	assert.Equal(t, true, got["truncated"])
	assert.Less(t, answerSize(t, srv, alice, "list_sessions", `{}`), maxDefaultAnswer)

	// Constraints: 100 long ones that all match the same action.
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		for i := range 100 {
			if err := store.PutConstraint(tx, &store.Constraint{Tenant: tenant, Type: "policy", Severity: "high",
				Assertion: fmt.Sprintf("never drop the production database %d %s", i, strings.Repeat("x", 2000)),
				CreatedAt: clk.Now()}); err != nil {
				return err
			}
		}
		return nil
	}))
	got = call(t, srv, alice, "get_constraints", `{}`)
	n = len(objects(t, got, "constraints"))
	assert.Less(t, n, 100)
	assert.Greater(t, n, 1)
	assert.EqualValues(t, n, got["count"])
	assert.Equal(t, true, got["truncated"])
	assert.Less(t, answerSize(t, srv, alice, "get_constraints", `{}`), maxDefaultAnswer)

	args := `{"action_description":"drop the production database"}`
	got = call(t, srv, alice, "check_constraints", args)
	assert.Equal(t, "warn", got["verdict"])
	n = len(objects(t, got, "matched_constraints"))
	assert.Less(t, n, 100)
	assert.Greater(t, n, 1)
	assert.EqualValues(t, 100, got["matched_count"])
	assert.Equal(t, true, got["truncated"])
	assert.Less(t, answerSize(t, srv, alice, "check_constraints", args), maxDefaultAnswer)
}

func TestCheckConstraintsListsAtMost100Matches(t *testing.T) {
	for _, n := range []int{100, 101} {
		srv, clk, db := newTestServer(t)
		require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
			for i := range n {
				severity := "low"
				if i == n-1 {
					severity = "critical" // declared last, listed first
				}
				if err := store.PutConstraint(tx, &store.Constraint{Tenant: tenant, Type: "policy", Severity: severity,
					Assertion: fmt.Sprintf("never drop production %d", i), CreatedAt: clk.Now()}); err != nil {
					return err
				}
			}
			return nil
		}))
		got := call(t, srv, alice, "check_constraints", `{"action_description":"drop production"}`)
		matched := objects(t, got, "matched_constraints")
		assert.Len(t, matched, 100, n)
		assert.Equal(t, "critical", matched[0]["severity"], "most severe first")
		assert.Equal(t, "block", got["verdict"])
		assert.EqualValues(t, n, got["matched_count"])
		assert.Equal(t, n > 100, got["truncated"], n)
	}
}

// TestDefaultAnswersStayUnder64KB fills a store as an abusive tenant would
// (20,000 facts, a 5,000-version chain, big unanswered queries from every
// kind of caller; an eighth of the facts under the race detector, still far
// beyond every cap) and checks every listing tool's default answer.
func TestDefaultAnswersStayUnder64KB(t *testing.T) {
	srv, clk, db := newTestServer(t)
	ctx := context.Background()
	facts, versions := 20_000, 5_000
	if raceDetector {
		facts, versions = 2_500, 1_000
	}
	for from := 0; from < facts; from += 5_000 {
		require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
			for i := from; i < min(from+5_000, facts); i++ {
				_, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: tenant, Agent: "alice"},
					Entity: fmt.Sprintf("project:%05d", i), Key: "status", Value: fmt.Sprint("value ", i),
					Confidence: 1, Private: i%4 == 0, Now: clk.Now()})
				if err != nil {
					return err
				}
			}
			return nil
		}))
	}
	fillChain(t, db, "alice", "chain", "k", false, versions, clk.Now(), func(i int) string { return fmt.Sprint("version ", i) })
	// Big unanswered queries: as many distinct words as a query may rank
	// by, then a long tail.
	tail := strings.Repeat("zq", 1<<18)
	for i, c := range []crux.Caller{alice, bob, anon, alice, bob, anon, alice, bob, anon, anon} {
		var words []string
		for j := range 63 {
			words = append(words, fmt.Sprintf("w%dx%d", i, j))
		}
		args, err := json.Marshal(map[string]any{"query": strings.Join(words, " ") + " " + tail, "entity_prefix": strings.Repeat("p", 1000)})
		require.NoError(t, err)
		res, err := srv.CallTool(ctx, c, "query_facts", args)
		require.NoError(t, err)
		require.Empty(t, rows(t, structured(t, res)))
	}
	for i := range 120 {
		call(t, srv, alice, "save_session", fmt.Sprintf(`{"session_id":"session-%03d-%s","state":{}}`, i, strings.Repeat("s", 200)))
	}

	for _, tc := range []struct {
		c          crux.Caller
		name, args string
	}{
		{alice, "memory_forget_dry_run", `{"scope":{"type":"tenant_id","value":"default"}}`},
		{alice, "fact_history", `{"entity":"chain","key":"k"}`},
		{alice, "memory_history", `{"entity":"chain","key":"k"}`},
		{anon, "get_gaps", `{}`},
		{alice, "get_gaps", `{}`},
		{alice, "list_entities", `{}`},
		{anon, "list_entities", `{}`},
		{alice, "query_facts", `{}`},
		{alice, "memory_view", `{}`},
		{alice, "memory_freshness", `{}`},
		{alice, "memory_sweep_candidates", `{}`},
		{alice, "memory_contradictions", `{}`},
		{alice, "list_sessions", `{}`},
		{alice, "get_constraints", `{}`},
		{alice, "check_constraints", `{}`},
		{alice, "get_bootstrap", `{}`},
		{alice, "memory_forget", `{"scope":{"type":"entity_prefix","value":"project:0"},"reason":"size"}`}, // last: it forgets 2,500 facts or more
	} {
		size := answerSize(t, srv, tc.c, tc.name, tc.args)
		assert.Less(t, size, maxDefaultAnswer, "%s %s by %s: %d bytes", tc.name, tc.args, tc.c.Name(), size)
	}
}

// TestMeasureAnswerSizes logs the answer sizes of the big-store cases:
// 50,000 facts, a 15,000-version chain, twenty 1 MiB unanswered queries.
// It runs only with CRUX_MEASURE=1:
//
//	CRUX_MEASURE=1 go test ./tools -run TestMeasureAnswerSizes -v
func TestMeasureAnswerSizes(t *testing.T) {
	if os.Getenv("CRUX_MEASURE") != "1" {
		t.Skip("set CRUX_MEASURE=1 to measure")
	}
	srv, clk, db := newTestServer(t)
	ctx := context.Background()
	for from := 0; from < 50_000; from += 5_000 {
		fillFacts(t, db, "alice", 5_000, clk.Now(), func(i int) string { return fmt.Sprintf("project:%05d", from+i) })
	}
	fillChain(t, db, "alice", "chain", "k", false, 15_000, clk.Now(), func(i int) string { return fmt.Sprint("value ", i) })
	big := strings.Repeat("zq", 1<<19-16)
	for i := range 20 {
		_, err := srv.CallTool(ctx, bob, "query_facts", json.RawMessage(fmt.Sprintf(`{"query":"%d %s"}`, i, big)))
		require.NoError(t, err)
	}
	for _, tc := range []struct {
		c          crux.Caller
		name, args string
	}{
		{alice, "memory_forget_dry_run", `{"scope":{"type":"tenant_id","value":"default"}}`},
		{bob, "get_gaps", `{}`},
		{alice, "get_gaps", `{}`},
		{alice, "fact_history", `{"entity":"chain","key":"k"}`},
		{alice, "memory_history", `{"entity":"chain","key":"k"}`},
		{alice, "list_entities", `{}`},
		{alice, "memory_forget", `{"scope":{"type":"tenant_id","value":"default"},"reason":"measure"}`},
	} {
		res := result(t, srv, tc.c, tc.name, tc.args)
		b, err := json.Marshal(res)
		require.NoError(t, err)
		t.Logf("%-22s by %-5s %-62s result %9d bytes, text %9d bytes", tc.name, tc.c.Name(), tc.args, len(b), len(res.Content[0].Text))
	}
}
