package store_test

import (
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/index"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// openFixture copies the format-1 store of testdata/format1 (made by
// generate.go with the code of that format) into a temporary directory and
// returns its path.
func openFixture(t *testing.T) string { return openFixtureOf(t, "format1") }

// openFixtureOf copies the store of testdata/<name>/crux.db.gz into a
// temporary directory and returns its path.
func openFixtureOf(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name, "crux.db.gz"))
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "crux.db")
	require.NoError(t, os.WriteFile(path, raw, 0o600))
	return path
}

// dump returns every entry of bucket.
func dump(t *testing.T, tx store.Tx, bucket string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, tx.Scan(bucket, nil, false, func(k, v []byte) error {
		out[string(k)] = string(v)
		return nil
	}))
	return out
}

// readFacts returns every fact of the store by id, each read with
// GetFact, with its times in UTC.
// fixtureQuery is a query of a fixture's facts, superseded versions
// included: by key, or by words (limit 0: the default).
type fixtureQuery struct {
	tenant, agent, key, words string
	limit                     int
}

// searchFixture returns the ids of the facts q finds, in order, at the
// time the fixtures' queries are asked.
func searchFixture(t *testing.T, tx store.Tx, q fixtureQuery) []string {
	t.Helper()
	fq := store.FactQuery{Scope: store.Scope{Tenant: q.tenant, Agent: q.agent}, Key: q.key, Limit: q.limit,
		IncludeSuperseded: true, Now: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), Policy: store.DefaultDecayPolicy}
	if q.words != "" {
		fq.Terms = store.Words(q.words)
	}
	res, err := store.SearchFacts(tx, fq)
	require.NoError(t, err)
	ids := []string{}
	for _, f := range res.Facts {
		ids = append(ids, f.ID)
	}
	return ids
}

func readFacts(t *testing.T, tx store.Tx) map[string]*store.Fact {
	t.Helper()
	out := map[string]*store.Fact{}
	var ids []string
	require.NoError(t, tx.Scan("facts", nil, false, func(k, _ []byte) error {
		ids = append(ids, string(k))
		return nil
	}))
	for _, id := range ids {
		f, err := store.GetFact(tx, id)
		require.NoError(t, err)
		utc := func(p **time.Time) {
			if *p != nil {
				u := (*p).UTC()
				*p = &u
			}
		}
		f.StoredAt, f.ValidFrom = f.StoredAt.UTC(), f.ValidFrom.UTC()
		utc(&f.ReverifiedAt)
		utc(&f.ValidTo)
		utc(&f.DeletedAt)
		out[id] = f
	}
	return out
}

// fixtureSeed is the signing key seed generate.go uses.
func fixtureKeyring() *receipts.Keyring {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i + 1)
	}
	return receipts.NewKeyring(ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey))
}

// TestUpgradeFormat1 opens a store written by the code of format 1 and
// upgrades it: every fact record, the entity index (so every version
// chain), the confidence index, the entity counts and every receipt chain
// are left byte for byte as they were; the key index becomes one entry per
// chain, and a query by key finds exactly the facts the old per-version
// entries named; the keyword postings are the same, now in blocks; crux
// doctor finds nothing amiss.
// Upgrading again, in a second open, changes nothing and commits nothing.
func TestUpgradeFormat1(t *testing.T) {
	path := openFixture(t)
	ctx := context.Background()
	db, err := bolt.Open(path, nil)
	require.NoError(t, err)

	unchanged := []string{"facts.entity", "facts.rank", "facts.active",
		"receipts", "receipts.chain", "receipts.head"}
	before := map[string]map[string]string{}
	var oldKeys, oldPostings map[string]string
	var oldFacts map[string]*store.Fact
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		format, err := store.StoredFormat(tx)
		require.NoError(t, err)
		require.Equal(t, 1, format)
		for _, b := range unchanged {
			before[b] = dump(t, tx, b)
		}
		oldKeys = dump(t, tx, "facts.key")
		oldPostings = dump(t, tx, "facts.words")
		oldFacts = readFacts(t, tx)
		return nil
	}))
	require.Greater(t, len(oldFacts), 150, "the fixture holds the facts generate.go wrote")
	require.Len(t, oldKeys, len(before["facts.entity"]), "format 1: one key entry per version")

	upgradeFrom(t, db, 1, unchanged, before)
	assert.Equal(t, uint64(1), db.Stats().Commits, "one transaction upgrades the store")

	tenants := map[string]bool{}
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		assert.Equal(t, oldFacts, readFacts(t, tx), "every fact reads as before")

		// One entry per chain: the old entries without their version.
		want := map[string]string{}
		for k := range oldKeys {
			want[k[:len(k)-5]] = ""
		}
		assert.Equal(t, want, dump(t, tx, "facts.key"))

		// The same postings, now in blocks: fewer entries.
		postings, err := store.Postings(tx)
		require.NoError(t, err)
		assert.Equal(t, stemmed(oldPostings), postings)
		assert.Less(t, len(dump(t, tx, "facts.words")), len(oldPostings)/2)

		// A query by key reaches the facts the old entries named.
		type query struct{ tenant, agent, key string }
		expect := map[query][]string{}
		for _, id := range oldKeys {
			f, err := store.GetFact(tx, id)
			require.NoError(t, err)
			tenants[f.Tenant] = true
			for _, agent := range []string{"", "alice", "bob"} {
				q := query{f.Tenant, agent, f.Key}
				if _, ok := expect[q]; !ok {
					expect[q] = []string{}
				}
				if f.VisibleTo(agent) && !f.Deleted && !store.IsReserved(f.Entity) {
					expect[q] = append(expect[q], id)
				}
			}
		}
		for q, ids := range expect {
			res, err := store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: q.tenant, Agent: q.agent},
				Key: q.key, IncludeSuperseded: true, Now: time.Now(), Policy: store.DefaultDecayPolicy})
			require.NoError(t, err)
			var got []string
			for _, f := range res.Facts {
				got = append(got, f.ID)
			}
			assert.ElementsMatch(t, ids, got, "%+v", q)
		}

		problems, err := store.Diagnose(tx)
		require.NoError(t, err)
		assert.Empty(t, problems)
		return nil
	}))
	require.True(t, tenants["acme"] && len(tenants) >= 2, "the fixture has two tenants")
	auditChains(t, db)
	require.NoError(t, db.Close())

	// The second open finds the current format: no upgrade, no commit.
	assertUpgraded(t, path)
}

// auditChains checks every tenant's receipt chain, signatures included.
func auditChains(t *testing.T, db store.Backend) {
	t.Helper()
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		tenants, err := receipts.Tenants(tx)
		require.NoError(t, err)
		require.Len(t, tenants, 2)
		for _, tenant := range tenants {
			require.NoError(t, receipts.VerifyStoredChain(tx, tenant), tenant)
			audit, err := receipts.AuditChain(tx, tenant, fixtureKeyring(), time.Now())
			require.NoError(t, err)
			assert.True(t, audit.OK(), "%s: %+v", tenant, audit)
		}
		return nil
	}))
}

// TestOpenUpgradesFormat1: crux.NewServer upgrades an old store as it
// opens it, and writes continue its chains: a new version supersedes the
// old current one, and a query by key finds the new version in place of
// the old.
func TestOpenUpgradesFormat1(t *testing.T) {
	path := openFixture(t)
	ctx := context.Background()
	db, err := bolt.Open(path, nil)
	require.NoError(t, err)
	defer db.Close()
	srv, err := crux.NewServer(db, nil)
	require.NoError(t, err)
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		format, err := store.StoredFormat(tx)
		require.NoError(t, err)
		assert.Equal(t, store.Format, format)
		return nil
	}))

	alice := crux.Caller{Agent: "alice", Authenticated: true}
	call := func(name, args string) map[string]any {
		res, err := srv.CallTool(ctx, alice, name, json.RawMessage(args))
		require.NoError(t, err)
		require.False(t, res.IsError, res.Content[0].Text)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(res.Content[0].Text), &m))
		return m
	}
	rows := func(args string) (ids []string) {
		for _, r := range call("query_facts", args)["rows"].([]any) {
			ids = append(ids, r.(map[string]any)["fact_id"].(string))
		}
		return ids
	}
	var oldCurrent []string // the shared chain's current version
	for _, r := range call("query_facts", `{"entity":"service:3","key":"setting3"}`)["rows"].([]any) {
		if r := r.(map[string]any); r["private"] == nil {
			oldCurrent = append(oldCurrent, r["fact_id"].(string))
		}
	}
	require.Len(t, oldCurrent, 1)
	byKey := rows(`{"key":"setting3","top_k":100}`)
	require.Contains(t, byKey, oldCurrent[0])

	m := call("store_fact", `{"entity":"service:3","key":"setting3","value":"after the upgrade"}`)
	assert.Equal(t, []any{oldCurrent[0]}, m["superseded_fact_ids"])
	newID := m["fact_id"].(string)
	byKey2 := rows(`{"key":"setting3","top_k":100}`)
	assert.Contains(t, byKey2, newID)
	assert.NotContains(t, byKey2, oldCurrent[0])
	assert.Len(t, byKey2, len(byKey))
	found := rows(`{"query":"upgrade","top_k":200}`)
	assert.True(t, slices.Contains(found, newID), "the keyword index finds the new fact")
	assert.Greater(t, len(found), 50, "and the old ones")
	auditChains(t, db)
}

// TestDoctorOnFormat1: the doctor reads a store not yet upgraded without
// finding anything amiss, and its repair upgrades the store before
// anything else, removing nothing: no index entry of the older layout is
// taken for a malformed one.
func TestDoctorOnFormat1(t *testing.T) {
	path := openFixture(t)
	ctx := context.Background()
	db, err := bolt.Open(path, nil)
	require.NoError(t, err)
	defer db.Close()
	var before map[string]string
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		problems, err := store.Diagnose(tx)
		require.NoError(t, err)
		assert.Empty(t, problems)
		before, err = store.Postings(tx)
		return err
	}))
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		removed, err := store.Repair(tx)
		assert.Empty(t, removed)
		return err
	}))
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		format, err := store.StoredFormat(tx)
		require.NoError(t, err)
		assert.Equal(t, store.Format, format)
		after, err := store.Postings(tx)
		assert.Equal(t, stemmed(before), after)
		return err
	}))
}

// stemmed maps keyword postings (tenant NUL word NUL id → rank) of a store
// before format 3 to the postings format 3 holds: each word stemmed.
func stemmed(old map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range old {
		parts := strings.SplitN(k, "\x00", 3)
		out[parts[0]+"\x00"+index.Stem(parts[1])+"\x00"+parts[2]] = v
	}
	return out
}

// format3Docs are the documents testdata/format3 holds, as its generate.go
// left them (one replaced, one deleted).
var format3Docs = map[string][]crux.Document{
	"acme": {
		{ID: "guide/how-to", Title: "How to rotate keys", Text: "What to do when a key leaks: rotate it over the weekend.\n\n" +
			strings.Repeat("Filler paragraph about storage engines and pages.\n\n", 40)},
		{ID: "guide/why", Title: "Why receipts", Text: "Why every answer carries a receipt, and what it proves."},
		{ID: "guide/old", Title: "Old note", Text: "Replaced: what changed and how."},
	},
	"beta": {
		{ID: "faq", Title: "FAQ", Text: "Where do the facts live? In the data directory, under your own user."},
	},
}

// TestUpgradeFormat3Documents opens a store written by the code of format
// 3, whose document index left out the words of a longer stop-word list,
// and upgrades it: the documents and their segments' text are kept as
// they were, and every query ranks them exactly as in a store the same
// documents were ingested into by today's code (same results, same
// scores), words such as "what" and "how" included; crux doctor finds
// nothing amiss, and a document deleted after the upgrade leaves no
// posting behind.
func TestUpgradeFormat3Documents(t *testing.T) {
	ctx := context.Background()
	db, err := bolt.Open(openFixtureOf(t, "format3"), nil)
	require.NoError(t, err)
	defer db.Close()
	var docsBefore map[string]string
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		format, err := store.StoredFormat(tx)
		require.NoError(t, err)
		require.Equal(t, 3, format)
		docsBefore = dump(t, tx, "docs")
		res, err := store.SearchDocuments(tx, store.DocQuery{Tenant: "acme", Terms: []string{"what"}, Limit: 10})
		require.NoError(t, err)
		assert.Zero(t, res.DF[0], "format 3 left \"what\" out")
		return nil
	}))
	srv, err := crux.NewServer(db, nil)
	require.NoError(t, err)
	defer srv.Close()

	fresh, err := bolt.Open(filepath.Join(t.TempDir(), "fresh.db"), nil)
	require.NoError(t, err)
	defer fresh.Close()
	want, err := crux.NewServer(fresh, nil)
	require.NoError(t, err)
	defer want.Close()
	for tenant, docs := range format3Docs {
		_, err := want.Ingest(ctx, tenant, docs, nil)
		require.NoError(t, err)
	}

	caller := crux.Caller{Agent: "alice", Authenticated: true}
	type row struct {
		DocID        string  `json:"doc_id"`
		SegmentIndex int     `json:"segment_index"`
		Score        float64 `json:"score"`
		Snippet      string  `json:"snippet"`
	}
	query := func(s *crux.Server, tenant, q string) []row {
		args, _ := json.Marshal(map[string]any{"tenant_id": tenant, "query": q, "limit": 20})
		res, err := s.CallTool(ctx, caller, "query", args)
		require.NoError(t, err)
		var out struct{ Results []row }
		require.NoError(t, json.Unmarshal([]byte(res.Content[0].Text), &out))
		return out.Results
	}
	for _, q := range []struct{ tenant, query, top string }{
		{"acme", "what to do when a key leaks", "guide/how-to"},
		{"acme", "how rotate", "guide/how-to"},
		{"acme", "what changed", "guide/old"},
		{"acme", "why receipts", "guide/why"},
		{"acme", "storage engines pages", "guide/how-to"},
		{"beta", "where do the facts live", "faq"},
	} {
		got := query(srv, q.tenant, q.query)
		require.NotEmpty(t, got, q.query)
		assert.Equal(t, q.top, got[0].DocID, q.query)
		assert.Equal(t, query(want, q.tenant, q.query), got, "%s: ranked as a fresh ingest ranks it", q.query)
	}
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		format, err := store.StoredFormat(tx)
		require.NoError(t, err)
		assert.Equal(t, store.Format, format)
		assert.Equal(t, docsBefore, dump(t, tx, "docs"), "document records unchanged")
		problems, err := store.Diagnose(tx)
		require.NoError(t, err)
		assert.Empty(t, problems)
		return nil
	}))

	gone, err := srv.DeleteDocuments(ctx, "acme", "guide/why")
	require.NoError(t, err)
	assert.Equal(t, []string{"guide/why"}, gone)
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		for _, term := range []string{"whi", "receipt", "prove", "what"} {
			res, err := store.SearchDocuments(tx, store.DocQuery{Tenant: "acme", Terms: []string{index.Stem(term)}, Limit: 10})
			require.NoError(t, err)
			for _, h := range res.Hits {
				seg, err := store.GetSegment(tx, "acme", h.Seq)
				require.NoError(t, err)
				assert.NotEqual(t, "guide/why", seg.DocID, "a posting of the deleted document is left for %q", term)
			}
		}
		return nil
	}))
}

// TestUpgradeFormat5Records opens a store written by the code of format 5,
// whose fact records are CBOR maps, and upgrades it: every fact reads as
// before, now from a compact record under half the size; the indexes are
// left byte for byte as they were; queries by key and by word find the
// same facts in the same order; the forgotten facts' originals (CBOR, kept
// as they were) come back when the forget is restored; crux doctor finds
// nothing amiss; and a second open commits nothing.
func TestUpgradeFormat5Records(t *testing.T) {
	path := openFixtureOf(t, "format5")
	ctx := context.Background()
	db, err := bolt.Open(path, nil)
	require.NoError(t, err)

	// facts.words is rewritten too, from format 7 (TestUpgradeFormat6
	// checks it); the queries below find the same facts.
	unchanged := []string{"facts.entity", "facts.key", "facts.rank", "facts.active", "facts.fresh",
		"sync.log", "forgets", "forgets.facts", "receipts", "receipts.chain", "receipts.head"}
	before := map[string]map[string]string{}
	var oldFacts map[string]*store.Fact
	var oldRecords map[string]string
	var queries []fixtureQuery
	results := map[fixtureQuery][]string{}
	search := func(tx store.Tx, q fixtureQuery) []string { return searchFixture(t, tx, q) }
	for _, tenant := range []string{"default", "acme"} {
		for _, agent := range []string{"", "alice", "bob"} {
			for i := range 4 {
				queries = append(queries, fixtureQuery{tenant: tenant, agent: agent, key: fmt.Sprintf("setting%d", i)})
			}
			for _, w := range []string{"widget3", "fixture", "value 7", "upgrade"} {
				queries = append(queries, fixtureQuery{tenant: tenant, agent: agent, words: w})
			}
		}
	}
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		format, err := store.StoredFormat(tx)
		require.NoError(t, err)
		require.Equal(t, 5, format)
		for _, b := range unchanged {
			before[b] = dump(t, tx, b)
		}
		oldRecords = dump(t, tx, "facts")
		oldFacts = readFacts(t, tx)
		for _, q := range queries {
			results[q] = search(tx, q)
		}
		return nil
	}))
	require.Greater(t, len(oldFacts), 150, "the fixture holds the facts generate.go wrote")
	require.NotEmpty(t, before["forgets.facts"], "the fixture holds forgotten facts")
	found := 0
	for _, ids := range results {
		found += len(ids)
	}
	require.Greater(t, found, 100, "the queries find facts")

	upgradeFrom(t, db, 5, unchanged, before)
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		assert.Equal(t, oldFacts, readFacts(t, tx), "every fact reads as before")
		records := dump(t, tx, "facts")
		// What a record holds besides its value: under half of what it was.
		oldSize, newSize := 0, 0
		for id, v := range records {
			assert.NotEqual(t, oldRecords[id], v, "record %s rewritten", id)
			newSize += len(v) - len(oldFacts[id].Value)
			oldSize += len(oldRecords[id]) - len(oldFacts[id].Value)
		}
		assert.Less(t, 2*newSize, oldSize, "records less their values: %d bytes, were %d", newSize, oldSize)
		for _, q := range queries {
			assert.Equal(t, results[q], search(tx, q), "%+v", q)
		}
		problems, err := store.Diagnose(tx)
		require.NoError(t, err)
		assert.Empty(t, problems)
		return nil
	}))

	// The originals of the forgotten facts come back as they were.
	var forgetID string
	var forgotten []string
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		for k := range before["forgets"] {
			forgetID = k
		}
		return store.ForgottenFacts(tx, forgetID, func(ff *store.ForgottenFact) error {
			forgotten = append(forgotten, ff.ID)
			return nil
		})
	}))
	require.NotEmpty(t, forgotten)
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		_, restored, err := store.RestoreForget(tx, forgetID, time.Date(2026, 11, 1, 12, 30, 0, 0, time.UTC),
			func(*store.ForgetRecord, []store.RestoredFact) (string, error) { return "r_restore", nil })
		assert.Len(t, restored, len(forgotten))
		return err
	}))
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		for _, id := range forgotten {
			f, err := store.GetFact(tx, id)
			require.NoError(t, err)
			assert.Equal(t, "service:16", f.Entity)
			assert.Contains(t, f.Value, "of the upgrade fixture")
		}
		return nil
	}))
	require.NoError(t, db.Close())

	assertUpgraded(t, path)
}

// upgradeFrom upgrades db, which must be of format from, and checks that it
// is then of the current format and that each of buckets holds what it
// held before the upgrade (before), as the upgrade turns it (see
// upgraded): facts.words, which the upgrade of a store of format 9 or
// older rebuilds, by the postings its blocks hold (see upgradedWords).
func upgradeFrom(t *testing.T, db store.Backend, from int, buckets []string, before map[string]map[string]string) {
	t.Helper()
	ctx := context.Background()
	got, err := store.UpgradeBackend(ctx, db)
	require.NoError(t, err)
	assert.Equal(t, from, got)
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		format, err := store.StoredFormat(tx)
		require.NoError(t, err)
		assert.Equal(t, store.Format, format)
		for _, b := range buckets {
			if b == "facts.words" && from < 10 {
				got, err := store.CountedPostings(tx)
				require.NoError(t, err)
				assert.Equal(t, upgradedWords(before[b], before["facts.fresh"], readFacts(t, tx)), got, "bucket %s", b)
				continue
			}
			assert.Equal(t, upgraded(from, b, before), dump(t, tx, b), "bucket %s", b)
		}
		return nil
	}))
}

// assertUpgraded opens the store at path, upgraded by an earlier open, and
// checks that it is of the current format and that opening it again
// commits nothing.
func assertUpgraded(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, nil)
	require.NoError(t, err)
	defer db.Close()
	from, err := store.UpgradeBackend(context.Background(), db)
	require.NoError(t, err)
	assert.Equal(t, store.Format, from)
	assert.Zero(t, db.Stats().Commits, "the second open commits nothing")
}
