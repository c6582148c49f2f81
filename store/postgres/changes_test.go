package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/internal/pgtest"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/postgres"
)

// logEntry is an entry of a change log as a reader sees it.
type logEntry struct {
	seq uint64
	id  string
}

// readLog returns the entries of tenant's change log after seq after, as
// SyncPending walks them (the facts they name), in one View.
func readLog(t *testing.T, db store.Backend, tenant string, after uint64) []logEntry {
	t.Helper()
	var out []logEntry
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		_, _, err := store.SyncPending(tx, tenant, after, 1_000_000, func(seq uint64, f *store.Fact, _ bool) bool {
			out = append(out, logEntry{seq, f.ID})
			return true
		})
		return err
	}))
	return out
}

func putShared(t *testing.T, db store.Backend, tenant, entity, key string) *store.Fact {
	t.Helper()
	var f *store.Fact
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		var err error
		f, _, err = store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: tenant}, Entity: entity, Key: key,
			Value: "v " + key, Confidence: 1, Now: time.Now()})
		return err
	}))
	return f
}

// A transaction that began writing before another one committed its entry
// holds that entry back until it ends: a reader never reads an entry with
// a seq above one that may still appear, so a cursor passes over nothing.
// The open transaction here writes an entry of its own, as a crux server
// whose COMMIT is slow would, and its entry comes first.
func TestChangeLogStablePrefix(t *testing.T) {
	ctx := context.Background()
	db, schema := openSchema(t)
	conn, err := pgx.Connect(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	slow, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer slow.Rollback(ctx)
	var xid int64
	require.NoError(t, slow.QueryRow(ctx, "SELECT pg_current_xact_id()::text::bigint").Scan(&xid))

	f := putShared(t, db, "t", "project:a", "k")
	assert.Empty(t, readLog(t, db, "t", 0), "an entry committed after an older transaction began stays hidden while it runs")
	var count uint64
	require.NoError(t, db.View(ctx, func(tx store.Tx) error { count, err = store.SyncCount(tx, "t"); return err }))
	assert.EqualValues(t, 1, count, "the count includes it")

	// The slow transaction logs the version f supersedes... any entry will
	// do: the reader must see it before f's.
	old := putShared(t, db, "other", "project:b", "k") // a fact to name
	table := pgx.Identifier{schema, "crux_changes"}.Sanitize()
	_, err = slow.Exec(ctx, "INSERT INTO "+table+" (tenant, seq, entry) SELECT 't', $1::bigint << 20, entry FROM "+table+" WHERE tenant = 'other'", xid)
	require.NoError(t, err)
	require.NoError(t, slow.Commit(ctx))

	var got []logEntry
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < 2 && time.Now().Before(deadline) { // other clients of the server may hold it back a moment
		time.Sleep(10 * time.Millisecond)
		got = readLog(t, db, "t", 0)
	}
	require.Len(t, got, 2)
	assert.Equal(t, []string{old.ID, f.ID}, []string{got[0].id, got[1].id}, "the older transaction's entry first")
	assert.Less(t, got[0].seq, got[1].seq)
}

// Writers on two stores of one database, and a reader that keeps resuming
// from its cursor while they write: the reader ends with every version
// once, each after the version it superseded, and nothing it read twice.
func TestChangeLogConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	a, schema := openSchema(t)
	b, err := postgres.Open(ctx, pgtest.DSN(t), &postgres.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })

	const writers, each = 8, 40
	var mu sync.Mutex
	written := map[string]string{} // id → the id it supersedes
	var wg sync.WaitGroup
	for w := range writers {
		db := store.Backend(a)
		if w%2 == 1 {
			db = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var f *store.Fact
				err := db.Update(ctx, func(tx store.Tx) error {
					var err error
					// Four chains shared by all writers, so versions supersede each other across stores.
					f, _, err = store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "t"}, Entity: fmt.Sprintf("project:c%d", i%4),
						Key: "k", Value: fmt.Sprintf("writer %d write %d", w, i), Confidence: 1, Now: time.Now()})
					return err
				})
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				written[f.ID] = f.Supersedes
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	var read []logEntry
	var cursor uint64
	deadline := time.Now().Add(60 * time.Second)
	finished := false
	for len(read) < writers*each && time.Now().Before(deadline) {
		select {
		case <-done:
			finished = true
		default:
		}
		page := readLog(t, a, "t", cursor)
		if len(page) > 0 {
			cursor = page[len(page)-1].seq
			read = append(read, page...)
		} else if finished {
			time.Sleep(10 * time.Millisecond)
		}
	}
	<-done
	require.Len(t, read, writers*each, "every version read")
	pos := map[string]int{}
	for i, e := range read {
		_, twice := pos[e.id]
		assert.False(t, twice, "%s read twice", e.id)
		pos[e.id] = i
		if i > 0 {
			assert.Less(t, read[i-1].seq, e.seq)
		}
	}
	for id, sup := range written {
		_, ok := pos[id]
		assert.True(t, ok, "%s read", id)
		if sup != "" {
			assert.Less(t, pos[sup], pos[id], "%s read before %s, which supersedes it", sup, id)
		}
	}
}

// A store made by crux before migration 2 keeps its change log in kv
// (buckets sync.log and sync.log.new). Opening it moves the log into
// crux_changes: every entry keeps its seq, the counts match, later
// versions follow the old ones, and a crux that still writes the log in
// kv is refused, its write taken back whole.
func TestChangeLogMigration(t *testing.T) {
	ctx := context.Background()
	schema, _ := pgtest.Schema(t, "crux_test")
	old, err := postgres.OpenAtMigration(ctx, pgtest.DSN(t), &postgres.Options{Schema: schema}, 1)
	require.NoError(t, err)
	kv := postgres.KVOnly(old)
	for i := range 70 { // more than sync.log.new holds: entries in both buckets
		putShared(t, kv, "t", fmt.Sprintf("project:e%d", i%9), "k")
	}
	require.NoError(t, kv.Update(ctx, func(tx store.Tx) error {
		for i := range 5 {
			if _, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "u"}, Entity: "project:u",
				Key: fmt.Sprintf("k%d", i), Value: "v", Confidence: 1, Now: time.Now()}); err != nil {
				return err
			}
		}
		return nil
	}))
	before := map[string][]logEntry{"t": readLog(t, kv, "t", 0), "u": readLog(t, kv, "u", 0)}
	require.Len(t, before["t"], 70)
	require.Len(t, before["u"], 5)
	require.NoError(t, old.Close())

	db, err := postgres.Open(ctx, pgtest.DSN(t), &postgres.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	for tenant, want := range before {
		assert.Equal(t, want, readLog(t, db, tenant, 0), "tenant %s: the same entries, the same seqs", tenant)
		assert.Equal(t, want[3:], readLog(t, db, tenant, want[2].seq), "tenant %s: an old cursor resumes", tenant)
		require.NoError(t, db.View(ctx, func(tx store.Tx) error {
			n, err := store.SyncCount(tx, tenant)
			assert.EqualValues(t, len(want), n, "tenant %s: count", tenant)
			return err
		}))
	}
	var left int
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		for _, b := range []string{"sync.log", "sync.log.new"} {
			if err := tx.Scan(b, nil, false, func(_, _ []byte) error { left++; return nil }); err != nil {
				return err
			}
		}
		return nil
	}))
	assert.Zero(t, left, "nothing left in the kv buckets")

	f := putShared(t, db, "t", "project:new", "k")
	got := stable(t, db, "t", 71)
	assert.Equal(t, f.ID, got[70].id)
	assert.Greater(t, got[70].seq, before["t"][69].seq, "a new version follows the moved ones")

	err = postgres.KVOnly(db).Update(ctx, func(tx store.Tx) error { // the old layout's writer, on the new schema
		_, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "t"}, Entity: "project:stale", Key: "k",
			Value: "v", Confidence: 1, Now: time.Now()})
		return err
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "upgrade its crux")
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		res, err := store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: "t"}, Entity: "project:stale", Limit: 10})
		assert.Empty(t, res.Facts, "the refused write left nothing")
		return err
	}))
}

// stable reads tenant's log until it holds n entries (other clients of
// the server may hold new entries back a moment), for at most 30 s.
func stable(t *testing.T, db store.Backend, tenant string, n int) []logEntry {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := readLog(t, db, tenant, 0)
		if len(got) >= n || time.Now().After(deadline) {
			require.Len(t, got, n)
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}
