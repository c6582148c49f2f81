package crux_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/pgtest"
	"github.com/crux-go/crux/memio"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/postgres"
)

// clock is a settable clock for servers under test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fillMemories writes a bit of everything an export holds into srv: shared
// chains of several versions, a deleted version, an explicit supersession
// across chains, private chains of two agents, a decision, constraints and
// sessions.
func fillMemories(t *testing.T, srv *crux.Server, clk *clock) map[string]string {
	t.Helper()
	ids := map[string]string{}
	put := func(c crux.Caller, name, args string) map[string]any {
		clk.advance(time.Minute)
		return call(t, srv, c, name, args)
	}
	for i, v := range []string{"planning", "building", "launched"} {
		ids[fmt.Sprint("apollo", i)] = put(alice, "store_fact", `{"entity":"project:apollo","key":"status","value":"`+v+`","confidence":0.9}`)["fact_id"].(string)
	}
	put(anon, "store_fact", `{"entity":"project:apollo","key":"owner","value":"the rocket team"}`)
	put(bob, "store_fact", `{"entity":"project:gemini","key":"status","value":"cancelled"}`)
	ids["gemini"] = put(bob, "store_fact", `{"entity":"project:gemini","key":"status","value":"revived","horizon_class":"volatile"}`)["fact_id"].(string)
	del := put(anon, "store_fact", `{"entity":"project:mercury","key":"note","value":"to be deleted"}`)["fact_id"].(string)
	put(anon, "delete_fact", `{"fact_id":"`+del+`"}`)
	put(anon, "store_fact", `{"entity":"project:mercury","key":"summary","value":"replaces the old status of gemini","supersedes":["`+ids["gemini"]+`"]}`)
	put(alice, "store_fact", `{"entity":"diary","key":"mood","value":"curious","private":true}`)
	put(alice, "store_fact", `{"entity":"diary","key":"mood","value":"delighted","private":true}`)
	put(alice, "store_fact", `{"entity":"project:apollo","key":"status","value":"my own view: late","private":true}`)
	put(bob, "store_fact", `{"entity":"diary","key":"mood","value":"bob's secret","private":true}`)
	put(anon, "store_fact", `{"entity":"gone:x","key":"k","value":"a secret to forget"}`)
	put(anon, "store_fact", `{"entity":"gone:x","key":"k","value":"another secret to forget"}`)
	put(anon, "memory_forget", `{"scope":{"type":"entity_prefix","value":"gone:"},"reason":"test"}`) // who wrote them
	put(alice, "record_decision", `{"action":"ship apollo","rationale":"it is ready","session_id":"s1","alternatives":["wait"]}`)
	put(alice, "declare_constraint", `{"constraint_type":"policy","assertion":"never delete backups","severity":"high"}`)
	put(anon, "save_session", `{"session_id":"shared-notes","state":{"step":3,"html":"<b>&</b>"}}`)
	put(alice, "save_session", `{"session_id":"work","state":{"todo":["export","import"]}}`)
	put(bob, "save_session", `{"session_id":"work","state":{"todo":["bob's"]}}`)
	return ids
}

// structured runs a tool and returns its structured content as JSON.
func structured(t *testing.T, srv *crux.Server, c crux.Caller, name, args string) string {
	t.Helper()
	b, err := json.Marshal(call(t, srv, c, name, args))
	require.NoError(t, err)
	return string(b)
}

// scoreField is a keyword query's score in a query_facts row, and the
// answer's total_tokens, which counts the scores' digits too.
var scoreField = regexp.MustCompile(`"(score|total_tokens)":[-0-9.e+]+,?`)

// withoutScores drops the score fields of the rows of a query_facts answer,
// and its total_tokens: a keyword query's score weighs each word by how
// many of the tenant's facts hold it, other agents' private facts included,
// which an agent's export leaves behind; the rows' order is still compared.
func withoutScores(answer string) string { return scoreField.ReplaceAllString(answer, "") }

// readCalls are the reads that an import must answer as the source did.
var readCalls = []struct {
	caller crux.Caller
	name   string
	args   string
}{
	{anon, "query_facts", `{}`},
	{alice, "query_facts", `{}`},
	{alice, "query_facts", `{"include_superseded":true,"top_k":100}`},
	{anon, "query_facts", `{"include_superseded":true,"top_k":100}`},
	{alice, "query_facts", `{"query":"apollo"}`},
	{anon, "query_facts", `{"entity":"project:gemini","include_superseded":true}`},
	{alice, "query_facts", `{"entity":"diary"}`},
	{alice, "query_facts", `{"entity_prefix":"__decisions__::","include_superseded":true}`},
	{anon, "query_facts", `{"as_of":"2026-01-01T00:03:30Z","include_superseded":true}`},
	{alice, "fact_history", `{"entity":"project:apollo","key":"status"}`},
	{anon, "fact_history", `{"entity":"project:apollo","key":"status"}`},
	{bob, "fact_history", `{"entity":"project:gemini","key":"status"}`},
	{anon, "fact_history", `{"entity":"project:mercury","key":"note"}`},
	{alice, "fact_history", `{"entity":"diary","key":"mood"}`},
	{anon, "list_entities", `{}`},
	{alice, "list_entities", `{}`},
	{anon, "fact_history", `{"entity":"gone:x","key":"k"}`},
	{anon, "query_facts", `{"entity":"gone:x","include_superseded":true}`},
	{anon, "get_session", `{"session_id":"shared-notes"}`},
	{alice, "get_session", `{"session_id":"work"}`},
	{anon, "get_constraints", `{}`},
}

// TestExportImportReproduces exports a store for alice, imports the file
// into an empty store, and compares the answers of the read tools, whole:
// both servers run on the same clock, so the fields computed from the time
// of the call (age_hours, freshness, effective_confidence) agree, and no
// field needs to be left out.
func TestExportImportReproduces(t *testing.T) {
	exportImportReproduces(t, func(t *testing.T, opts *crux.Options) (*crux.Server, store.Backend) { return newServer(t, opts) })
}

// TestExportImportPostgres imports into a PostgreSQL store.
func TestExportImportPostgres(t *testing.T) {
	exportImportReproduces(t, func(t *testing.T, opts *crux.Options) (*crux.Server, store.Backend) {
		_, dsn := pgtest.Schema(t, "crux_memio")
		db, err := postgres.Open(context.Background(), dsn, nil)
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		srv, err := crux.NewServer(db, opts)
		require.NoError(t, err)
		t.Cleanup(func() { srv.Close() })
		return srv, db
	})
}

func exportImportReproduces(t *testing.T, newDst func(*testing.T, *crux.Options) (*crux.Server, store.Backend)) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	src, _ := newServer(t, &crux.Options{Now: clk.now})
	fillMemories(t, src, clk)

	var file bytes.Buffer
	st, err := src.Export(ctx, &file, &crux.ExportOptions{Agent: "alice"})
	require.NoError(t, err)
	assert.Equal(t, memio.ExportStats{Facts: 12, Sessions: 2, Constraints: 1}, st, "alice's export holds no fact or session of bob's")
	assert.NotContains(t, file.String(), "bob's secret")
	assert.NotContains(t, file.String(), "to forget", "forgotten facts are not exported")
	assert.NotContains(t, file.String(), "__bootstrap__")
	header, _, _ := strings.Cut(file.String(), "\n")
	assert.Contains(t, header, `"format":"crux-memories","version":1,"tenant":"default","agent":"alice"`)

	dst, dstDB := newDst(t, &crux.Options{Now: clk.now})
	sum, err := dst.Import(ctx, bytes.NewReader(file.Bytes()), nil)
	require.NoError(t, err)
	assert.Equal(t, store.MemoryImportCounts{Imported: 12}, sum.Facts)
	assert.Equal(t, store.MemoryImportCounts{Imported: 2}, sum.Sessions)
	assert.Equal(t, store.MemoryImportCounts{Imported: 1}, sum.Constraints)
	require.Len(t, sum.Receipts, 1)

	clk.advance(48 * time.Hour) // freshness moves on alike on both sides
	for _, c := range readCalls {
		want := withoutScores(structured(t, src, c.caller, c.name, c.args))
		got := withoutScores(structured(t, dst, c.caller, c.name, c.args))
		assert.JSONEq(t, want, got, "%s %s as %q", c.name, c.args, c.caller.Agent)
	}
	// bob's private records stayed behind.
	assert.Contains(t, structured(t, src, bob, "query_facts", `{"entity":"diary"}`), "bob's secret")
	assert.NotContains(t, structured(t, dst, bob, "query_facts", `{"entity":"diary"}`), "bob's secret")

	// The import receipt verifies with the destination's key.
	require.NoError(t, dstDB.View(ctx, func(tx store.Tx) error {
		r, err := receipts.Get(tx, sum.Receipts[0])
		require.NoError(t, err)
		assert.Equal(t, "memory_import", r.Kind)
		rep := receipts.Verify(r, dst.Keyring(), clk.now())
		assert.Equal(t, receipts.OK, rep.ErrorCode, "%+v", rep)
		return nil
	}))

	// A chain goes on from where the export left it.
	next := call(t, dst, alice, "store_fact", `{"entity":"project:apollo","key":"status","value":"retired"}`)
	assert.EqualValues(t, 4, next["version"])
}

// TestImportTwiceChangesNothing imports an export twice: the second time
// every record is unchanged, no receipt is minted, and the store exports
// exactly as before.
func TestImportTwiceChangesNothing(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	src, _ := newServer(t, &crux.Options{Now: clk.now})
	fillMemories(t, src, clk)
	var file bytes.Buffer
	_, err := src.Export(ctx, &file, &crux.ExportOptions{Agent: "alice"})
	require.NoError(t, err)

	dst, db := newServer(t, &crux.Options{Now: clk.now})
	_, err = dst.Import(ctx, bytes.NewReader(file.Bytes()), nil)
	require.NoError(t, err)
	before := exportOf(t, dst, "alice")
	head := chainHead(t, db)

	sum, err := dst.Import(ctx, bytes.NewReader(file.Bytes()), &memio.ImportOptions{MaxBatchRecords: 5})
	require.NoError(t, err)
	assert.Equal(t, store.MemoryImportCounts{Unchanged: 12}, sum.Facts)
	assert.Equal(t, store.MemoryImportCounts{Unchanged: 2}, sum.Sessions)
	assert.Equal(t, store.MemoryImportCounts{Unchanged: 1}, sum.Constraints)
	assert.Empty(t, sum.Receipts)
	assert.Equal(t, 3, sum.Batches)
	assert.Equal(t, before, exportOf(t, dst, "alice"))
	assert.Equal(t, head, chainHead(t, db))

	// Importing into the source itself changes nothing either.
	sum, err = src.Import(ctx, bytes.NewReader(file.Bytes()), nil)
	require.NoError(t, err)
	assert.Zero(t, sum.Written())
	assert.Zero(t, sum.Facts.Conflicts)
}

// exportOf is the export of srv for agent, its header (which holds the
// time of the export) left out.
func exportOf(t *testing.T, srv *crux.Server, agent string) string {
	t.Helper()
	var b bytes.Buffer
	_, err := srv.Export(context.Background(), &b, &crux.ExportOptions{Agent: agent})
	require.NoError(t, err)
	_, rest, _ := strings.Cut(b.String(), "\n")
	return rest
}

// chainHead is the default tenant's receipt chain head and sync log head.
func chainHead(t *testing.T, db store.Backend) string {
	t.Helper()
	var out string
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		n := 0
		err := receipts.ChainNewestFirst(tx, crux.DefaultTenant, func(*receipts.Receipt) error { n++; return nil })
		if err != nil {
			return err
		}
		seq, err := store.SyncHead(tx, crux.DefaultTenant)
		out = fmt.Sprintf("%d receipts, sync head %d", n, seq)
		return err
	}))
	return out
}

// TestImportConflicts imports an export into a store whose chains went on
// differently: the records the store holds otherwise are conflicts, left
// out, and the store's own versions stay current.
func TestImportConflicts(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	src, _ := newServer(t, &crux.Options{Now: clk.now})
	call(t, src, anon, "store_fact", `{"entity":"e","key":"k","value":"one"}`)
	var v1 bytes.Buffer
	_, err := src.Export(ctx, &v1, nil)
	require.NoError(t, err)
	clk.advance(time.Minute)
	call(t, src, anon, "store_fact", `{"entity":"e","key":"k","value":"two"}`)
	var v2 bytes.Buffer
	_, err = src.Export(ctx, &v2, nil)
	require.NoError(t, err)

	dst, _ := newServer(t, &crux.Options{Now: clk.now})
	_, err = dst.Import(ctx, bytes.NewReader(v1.Bytes()), nil)
	require.NoError(t, err)
	sum, err := dst.Import(ctx, bytes.NewReader(v2.Bytes()), nil)
	require.NoError(t, err)
	assert.Equal(t, store.MemoryImportCounts{Conflicts: 2}, sum.Facts, "version 1 differs (it is superseded in the file) and version 2 would be a second current version")
	require.Len(t, sum.Conflicting, 2)
	assert.Contains(t, sum.Conflicting[1].Reason, "another current version")
	got := call(t, dst, anon, "query_facts", `{"entity":"e"}`)
	assert.Equal(t, "one", got["rows"].([]any)[0].(map[string]any)["value"])
}

// TestImportKeepsChainsWhole: a version whose predecessor is neither
// before it in the file nor in the store, or is not the previous version
// of its chain, is a conflict, never a chain with a hole; the file's other
// chains import.
func TestImportKeepsChainsWhole(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	src, _ := newServer(t, &crux.Options{Now: clk.now})
	call(t, src, anon, "store_fact", `{"entity":"e","key":"k","value":"one"}`)
	clk.advance(time.Minute)
	call(t, src, anon, "store_fact", `{"entity":"e","key":"k","value":"two"}`)
	call(t, src, anon, "store_fact", `{"entity":"other","key":"k","value":"kept"}`)
	var file bytes.Buffer
	_, err := src.Export(ctx, &file, nil)
	require.NoError(t, err)
	var header, v1, v2, other string
	for _, l := range strings.Split(strings.TrimSuffix(file.String(), "\n"), "\n") {
		switch {
		case !strings.Contains(l, `"type":"fact"`):
			header += l + "\n"
		case strings.Contains(l, `"value":"one"`):
			v1 = l
		case strings.Contains(l, `"value":"two"`):
			v2 = l
		case strings.Contains(l, `"value":"kept"`):
			other = l
		}
	}
	require.NotEmpty(t, v1+v2+other)
	for name, tc := range map[string]struct{ lines, reason string }{
		"predecessor missing": {v2 + "\n" + other, "which is neither before it in the file nor in the store"},
		"version 7":           {v1 + "\n" + strings.Replace(v2, `"version":2`, `"version":7`, 1) + "\n" + other, "which is not the previous version of its chain"},
	} {
		t.Run(name, func(t *testing.T) {
			dst, _ := newServer(t, &crux.Options{Now: clk.now})
			sum, err := dst.Import(ctx, strings.NewReader(header+tc.lines+"\n"), nil)
			require.NoError(t, err)
			require.Len(t, sum.Conflicting, 1, "%+v", sum)
			assert.Contains(t, sum.Conflicting[0].Reason, tc.reason)
			var values []any
			for _, r := range call(t, dst, anon, "query_facts", `{"include_superseded":true}`)["rows"].([]any) {
				values = append(values, r.(map[string]any)["value"])
			}
			if name == "version 7" {
				assert.ElementsMatch(t, []any{"one", "kept"}, values, "the chain stops where it breaks")
			} else {
				assert.Equal(t, []any{"kept"}, values)
			}
		})
	}
}

// TestImportRefusesABadFile refuses a file with one bad line, naming it,
// and writes nothing of the lines before it.
func TestImportRefusesABadFile(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	src, _ := newServer(t, &crux.Options{Now: clk.now})
	fillMemories(t, src, clk)
	var file bytes.Buffer
	_, err := src.Export(ctx, &file, nil)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(file.String(), "\n"), "\n")
	require.Greater(t, len(lines), 5)

	for name, bad := range map[string]string{
		"not json":       `{"type":"fact",`,
		"unknown field":  `{"type":"fact","fact":{"id":"f_00000000000000000000000000000001","surprise":1}}`,
		"unknown type":   `{"type":"gadget"}`,
		"two records":    strings.Replace(lines[2], `"type":"fact",`, `"type":"fact","session":{"session_id":"x"},`, 1),
		"other tenant":   strings.Replace(lines[2], `"tenant":"default"`, `"tenant":"elsewhere"`, 1),
		"bad id":         strings.Replace(lines[2], `"id":"f_`, `"id":"g_`, 1),
		"bootstrap fact": strings.Replace(lines[2], `"entity":"project:`, `"entity":"__bootstrap__::`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			dst, db := newServer(t, &crux.Options{Now: clk.now})
			before := chainHead(t, db)
			f := strings.Join(append(append(append([]string{}, lines[:5]...), bad), lines[5:]...), "\n")
			_, err := dst.Import(ctx, strings.NewReader(f), &memio.ImportOptions{MaxBatchRecords: 1})
			var le *memio.LineError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, 6, le.Line, "%v", err)
			assert.Equal(t, before, chainHead(t, db))
			assert.Equal(t, `{"count":0,"entities":[],"truncated":false}`, structured(t, dst, anon, "list_entities", `{}`))
		})
	}
	dst, _ := newServer(t, &crux.Options{Now: clk.now})
	_, err = dst.Import(ctx, strings.NewReader(`{"format":"crux-memories","version":2,"tenant":"default"}`), nil)
	assert.ErrorContains(t, err, "line 1: format version 2 is newer")
	_, err = dst.Import(ctx, strings.NewReader(""), nil)
	assert.ErrorContains(t, err, "empty")
}

// TestImportMCPMemory imports a file the reference MCP memory server wrote
// (memio/testdata/mcp-memory.jsonl, made by mcp-memory-gen.mjs beside it
// with @modelcontextprotocol/server-memory 2026.8.31): its entities,
// observations and relations become facts that queries find, and importing
// it again changes nothing.
func TestImportMCPMemory(t *testing.T) {
	ctx := context.Background()
	srv, _ := newServer(t, nil)
	file, err := os.ReadFile("memio/testdata/mcp-memory.jsonl")
	require.NoError(t, err)
	sum, err := srv.Import(ctx, bytes.NewReader(file), &memio.ImportOptions{Source: memio.SourceMCPMemory})
	require.NoError(t, err)
	// 3 entity types, 6 observations, 2 relations.
	assert.Equal(t, store.MemoryImportCounts{Imported: 11}, sum.Facts)
	assert.Len(t, sum.Receipts, 1)

	assert.Equal(t, `{"count":3,"entities":["Ada Lovelace","Analytical Engine","Charles Babbage"],"truncated":false}`,
		structured(t, srv, anon, "list_entities", `{}`))
	got := call(t, srv, anon, "query_facts", `{"query":"Byron"}`)
	require.EqualValues(t, 1, got["count"], "%v", got)
	row := got["rows"].([]any)[0].(map[string]any)
	assert.Equal(t, "Ada Lovelace", row["entity"])
	assert.Equal(t, "Daughter of Lord Byron", row["value"])
	got = call(t, srv, anon, "query_facts", `{"entity":"Charles Babbage"}`)
	var values []string
	for _, r := range got["rows"].([]any) {
		values = append(values, r.(map[string]any)["value"].(string))
	}
	assert.ElementsMatch(t, []string{"person", "Designed the Difference Engine", "Charles Babbage designed Analytical Engine"}, values)

	again, err := srv.Import(ctx, bytes.NewReader(file), &memio.ImportOptions{Source: memio.SourceMCPMemory})
	require.NoError(t, err)
	assert.Equal(t, store.MemoryImportCounts{Unchanged: 11}, again.Facts)
	assert.Empty(t, again.Receipts)

	// A changed entity type is a new version of its fact.
	changed := bytes.Replace(file, []byte(`"entityType":"machine"`), []byte(`"entityType":"computer"`), 1)
	third, err := srv.Import(ctx, bytes.NewReader(changed), &memio.ImportOptions{Source: memio.SourceMCPMemory})
	require.NoError(t, err)
	assert.Equal(t, store.MemoryImportCounts{Imported: 1, Unchanged: 10}, third.Facts)
	hist := call(t, srv, anon, "fact_history", `{"entity":"Analytical Engine","key":"entity_type"}`)
	assert.Len(t, hist["versions"], 2, "%v", hist)

	_, err = srv.Import(ctx, strings.NewReader(`{"type":"entity","name":"__x","entityType":"t","observations":[]}`),
		&memio.ImportOptions{Source: memio.SourceMCPMemory})
	assert.ErrorContains(t, err, "line 1: entity \"__x\" starts with __")
}

// TestExportPages walks an export one record (and one index entry) a page
// at a time: the pages together hold exactly what one export holds, pages
// that only passed over records the export leaves out included.
func TestExportPages(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	srv, _ := newServer(t, &crux.Options{Now: clk.now})
	fillMemories(t, srv, clk)
	whole, err := srv.ExportMemories(ctx, crux.MemoryExportQuery{Agent: "alice", MaxRecords: 1 << 20})
	require.NoError(t, err)
	require.Empty(t, whole.Next)

	var paged []store.MemoryRecord
	cursor, pages, empty := "", 0, 0
	for {
		p, err := srv.ExportMemories(ctx, crux.MemoryExportQuery{Agent: "alice", Cursor: cursor, MaxRecords: 1, MaxScan: 1})
		require.NoError(t, err)
		require.LessOrEqual(t, len(p.Records), 1)
		paged = append(paged, p.Records...)
		pages++
		if len(p.Records) == 0 {
			empty++
		}
		if p.Next == "" {
			break
		}
		require.NotEqual(t, cursor, p.Next)
		cursor = p.Next
		require.Less(t, pages, 1000)
	}
	assert.Equal(t, whole.Records, paged)
	assert.Positive(t, empty, "bob's private facts and sessions, and the bootstrap facts, are passed over")

	for _, bad := range []string{"fact", "fact:!!", "nope:", "fact:" + "ZWxzZXdoZXJl"} {
		_, err := srv.ExportMemories(ctx, crux.MemoryExportQuery{Cursor: bad})
		assert.ErrorIs(t, err, store.ErrInvalidCursor, bad)
	}
}

// TestImportOtherOffsets imports a file whose times carry another offset
// than UTC twice: the second import finds every fact unchanged.
func TestImportOtherOffsets(t *testing.T) {
	ctx := context.Background()
	file := `{"format":"crux-memories","version":1,"tenant":"default","exported_at":"2026-03-02T00:00:00Z"}
{"type":"fact","fact":{"id":"f_0000000000000000000000000000000a","tenant":"default","entity":"e","key":"k","value":"v","confidence":1,"stored_at":"2026-03-01T02:00:00+02:00","version":1,"horizon_class":"medium","valid_from":"2026-03-01T02:00:00+02:00","deleted":true,"deleted_at":"2026-03-01T03:00:00+02:00","valid_to":"2026-03-01T03:00:00+02:00"}}`
	srv, _ := newServer(t, nil)
	sum, err := srv.Import(ctx, strings.NewReader(file), nil)
	require.NoError(t, err)
	assert.Equal(t, store.MemoryImportCounts{Imported: 1}, sum.Facts)
	sum, err = srv.Import(ctx, strings.NewReader(file), nil)
	require.NoError(t, err)
	assert.Equal(t, store.MemoryImportCounts{Unchanged: 1}, sum.Facts)
	hist := call(t, srv, anon, "fact_history", `{"entity":"e","key":"k"}`)
	v := hist["versions"].([]any)[0].(map[string]any)
	assert.Equal(t, "2026-03-01T00:00:00Z", v["stored_at"])
}
