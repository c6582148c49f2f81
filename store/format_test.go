package store_test

import (
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"encoding/json"
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
func openFixture(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "format1", "crux.db.gz"))
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

	unchanged := []string{"facts", "facts.entity", "facts.rank", "facts.active",
		"receipts", "receipts.chain", "receipts.head"}
	before := map[string]map[string]string{}
	var oldKeys, oldPostings map[string]string
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		format, err := store.StoredFormat(tx)
		require.NoError(t, err)
		require.Equal(t, 1, format)
		for _, b := range unchanged {
			before[b] = dump(t, tx, b)
		}
		oldKeys = dump(t, tx, "facts.key")
		oldPostings = dump(t, tx, "facts.words")
		return nil
	}))
	require.Greater(t, len(before["facts"]), 150, "the fixture holds the facts generate.go wrote")
	require.Len(t, oldKeys, len(before["facts.entity"]), "format 1: one key entry per version")

	from, err := store.UpgradeBackend(ctx, db)
	require.NoError(t, err)
	assert.Equal(t, 1, from)
	assert.Equal(t, uint64(1), db.Stats().Commits, "one transaction upgrades the store")

	tenants := map[string]bool{}
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		format, err := store.StoredFormat(tx)
		require.NoError(t, err)
		assert.Equal(t, store.Format, format)
		for _, b := range unchanged {
			assert.Equal(t, before[b], dump(t, tx, b), "bucket %s", b)
		}

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
	db, err = bolt.Open(path, nil)
	require.NoError(t, err)
	defer db.Close()
	from, err = store.UpgradeBackend(ctx, db)
	require.NoError(t, err)
	assert.Equal(t, store.Format, from)
	assert.Zero(t, db.Stats().Commits)
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
