package postgres_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/index"
	"github.com/crux-go/crux/internal/pgtest"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/postgres"
	"github.com/crux-go/crux/store/storetest"
)

// openTest opens a store in a schema of its own (see pgtest.Schema).
func openTest(t testing.TB) *postgres.DB {
	db, _ := openSchema(t)
	return db
}

// openSchema is openTest, also returning the schema's name.
func openSchema(t testing.TB) (*postgres.DB, string) {
	t.Helper()
	schema, _ := pgtest.Schema(t, "crux_test")
	db, err := postgres.Open(context.Background(), pgtest.DSN(t), &postgres.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db, schema
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend { return openTest(t) })
}

// Opening runs each migration once: a second Open of the same schema, and
// two Opens at once, find them applied.
func TestMigrationsOnce(t *testing.T) {
	first, schema := openSchema(t)
	first.Close()
	dsn := pgtest.DSN(t)
	conn, err := pgx.Connect(context.Background(), dsn)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			db, err := postgres.Open(context.Background(), dsn, &postgres.Options{Schema: schema})
			if err == nil {
				db.Close()
			}
			errs <- err
		}()
	}
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	var n, distinct int
	require.NoError(t, conn.QueryRow(context.Background(),
		"SELECT count(*), count(DISTINCT version) FROM "+pgx.Identifier{schema, "crux_migrations"}.Sanitize()).Scan(&n, &distinct))
	assert.Equal(t, 3, n, "three migrations")
	assert.Equal(t, n, distinct, "each recorded once")
}

// ScanFrom starts inside the prefix, at the first key not less than from.
func TestScanFrom(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		for _, k := range []string{"a1", "a2", "a3", "b1"} {
			if err := tx.Put("b", []byte(k), []byte(k)); err != nil {
				return err
			}
		}
		return nil
	}))
	var got []string
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		return tx.(interface {
			ScanFrom(bucket string, prefix, from []byte, fn func(key, value []byte) error) error
		}).ScanFrom("b", []byte("a"), []byte("a2"), func(k, _ []byte) error {
			got = append(got, string(k))
			return nil
		})
	}))
	assert.Equal(t, []string{"a2", "a3"}, got)
}

// TestScanInsideAPrefetchedRange: a scan of a prefix whose keys the view
// holds within a wider range read before (a prefetch of a shorter prefix)
// visits the keys of its prefix only, forwards and backwards, not the
// next key of the wider range.
func TestScanInsideAPrefetchedRange(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		for _, k := range []string{"w1", "w10", "w10x", "w10xyz\x00a", "w10xyz\x00b", "w11\x00a", "w2"} {
			if err := tx.Put("b", []byte(k), []byte(k)); err != nil {
				return err
			}
		}
		return nil
	}))
	for _, reverse := range []bool{false, true} {
		var got []string
		require.NoError(t, db.View(ctx, func(tx store.Tx) error {
			tx.(store.Prefetcher).PrefetchScan("b", []byte("w1"), false)
			if err := tx.Scan("b", []byte("w1"), false, func([]byte, []byte) error { return nil }); err != nil {
				return err
			}
			return tx.Scan("b", []byte("w10xyz"), reverse, func(k, _ []byte) error {
				got = append(got, string(k))
				return nil
			})
		}))
		want := []string{"w10xyz\x00a", "w10xyz\x00b"}
		if reverse {
			want = []string{want[1], want[0]}
		}
		assert.Equal(t, want, got, "reverse %v", reverse)
	}
}

// TestDocuments: the document index on PostgreSQL: ingest, replace,
// delete and search give what they give on bbolt.
func TestDocuments(t *testing.T) {
	db := openTest(t)
	ctx := context.Background()
	prepare := func(docs ...store.Document) []store.PreparedDocument {
		var out []store.PreparedDocument
		for _, d := range docs {
			p, err := store.PrepareDocument(d, nil)
			require.NoError(t, err)
			out = append(out, p)
		}
		return out
	}
	put := func(docs ...store.Document) {
		require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
			_, err := store.PutDocuments(tx, "t", prepare(docs...), time.Now())
			return err
		}))
	}
	search := func(q string) []string {
		var ids []string
		require.NoError(t, db.View(ctx, func(tx store.Tx) error {
			res, err := store.SearchDocuments(tx, store.DocQuery{Tenant: "t", Terms: index.Words(q), Limit: 10})
			for _, h := range res.Hits {
				s, err := store.GetSegment(tx, "t", h.Seq)
				if err != nil {
					return err
				}
				ids = append(ids, s.DocID)
			}
			return err
		}))
		return ids
	}
	put(store.Document{ID: "a", Text: "bbolt keeps the facts"}, store.Document{ID: "b", Text: "postgres keeps the facts too"})
	assert.Equal(t, []string{"b"}, search("postgres"))
	assert.Len(t, search("facts"), 2)
	put(store.Document{ID: "b", Text: "replaced by a note on vacuum"})
	assert.Empty(t, search("postgres"))
	assert.Equal(t, []string{"b"}, search("vacuum"))
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		_, err := store.DeleteDocument(tx, "t", "a")
		return err
	}))
	assert.Empty(t, search("bbolt"))
}

// The connections plan each statement once and read kv through its
// primary key, unless the connection string says otherwise.
func TestPlannerSettings(t *testing.T) {
	db, schema := openSchema(t)
	for name, want := range map[string]string{"plan_cache_mode": "force_generic_plan", "enable_seqscan": "off", "enable_bitmapscan": "off"} {
		got, err := postgres.Setting(db, name)
		require.NoError(t, err)
		assert.Equal(t, want, got, name)
	}
	u, err := url.Parse(pgtest.DSN(t))
	require.NoError(t, err)
	q := u.Query()
	q.Set("enable_seqscan", "on")
	u.RawQuery = q.Encode()
	own, err := postgres.Open(context.Background(), u.String(), &postgres.Options{Schema: schema})
	require.NoError(t, err)
	defer own.Close()
	got, err := postgres.Setting(own, "enable_seqscan")
	require.NoError(t, err)
	assert.Equal(t, "on", got, "the connection string's setting")
}
