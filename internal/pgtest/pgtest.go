// Package pgtest gives tests and benchmarks a PostgreSQL schema of their
// own, in the database that $CRUX_TEST_POSTGRES names, so that test runs
// sharing one server do not see each other.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// DSN is $CRUX_TEST_POSTGRES. Without it tb skips, except in CI ($CI
// set), where a missing server is a failure.
func DSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv("CRUX_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("CI") != "" {
			tb.Fatal("CRUX_TEST_POSTGRES is not set: CI must run the PostgreSQL tests (.ci/run sets it)")
		}
		tb.Skip("CRUX_TEST_POSTGRES is not set (for example postgres://postgres@127.0.0.1:5432/test); skipping the PostgreSQL tests")
	}
	return dsn
}

// Schema creates the schema prefix_<12 random hex digits> in the test
// database, dropped when tb ends (after the cleanups registered later,
// such as closing a store on it), and returns its name and the database's
// URL with search_path set to it.
func Schema(tb testing.TB, prefix string) (name, dsnInSchema string) {
	tb.Helper()
	dsn := DSN(tb)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name = prefix + "_" + hex.EncodeToString(b[:])
	ident := pgx.Identifier{name}.Sanitize()
	exec := func(sql string) error {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec("CREATE SCHEMA " + ident); err != nil {
		tb.Fatalf("creating schema %s: %v", name, err)
	}
	tb.Cleanup(func() {
		if err := exec("DROP SCHEMA " + ident + " CASCADE"); err != nil {
			tb.Errorf("dropping schema %s: %v", name, err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatalf("CRUX_TEST_POSTGRES is not a URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return name, u.String()
}
