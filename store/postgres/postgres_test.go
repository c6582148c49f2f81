package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/postgres"
	"github.com/crux-go/crux/store/storetest"
)

// testDSN is the database the tests use: $CRUX_TEST_POSTGRES. Without it
// the tests skip, except in CI ($CI set), where a missing server fails
// them.
func testDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("CRUX_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CRUX_TEST_POSTGRES is not set: CI must run the PostgreSQL tests (.ci/run sets it)")
		}
		t.Skip("CRUX_TEST_POSTGRES is not set (for example postgres://postgres@127.0.0.1:5432/test); skipping the PostgreSQL tests")
	}
	return dsn
}

// openTest opens a store in a schema of its own, dropped when the test
// ends, so test runs do not see each other.
func openTest(t testing.TB, opts *postgres.Options) *postgres.DB {
	db, _ := openSchema(t, opts)
	return db
}

// openSchema is openTest, also returning the schema's name.
func openSchema(t testing.TB, opts *postgres.Options) (*postgres.DB, string) {
	t.Helper()
	dsn := testDSN(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "crux_test_" + hex.EncodeToString(b[:])
	o := postgres.Options{}
	if opts != nil {
		o = *opts
	}
	o.Schema = schema
	db, err := postgres.Open(context.Background(), dsn, &o)
	require.NoError(t, err)
	t.Cleanup(func() {
		db.Close()
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return db, schema
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend { return openTest(t, nil) })
}

// Opening runs each migration once: a second Open of the same schema, and
// two Opens at once, find them applied.
func TestMigrationsOnce(t *testing.T) {
	first, schema := openSchema(t, nil)
	first.Close()
	dsn := testDSN(t)
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
	var n int
	require.NoError(t, conn.QueryRow(context.Background(),
		"SELECT count(*) FROM "+pgx.Identifier{schema, "crux_migrations"}.Sanitize()).Scan(&n))
	assert.Equal(t, 1, n, "one migration, recorded once")
}

// ScanFrom starts inside the prefix, at the first key not less than from.
func TestScanFrom(t *testing.T) {
	db := openTest(t, nil)
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
