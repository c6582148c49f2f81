// The PostgreSQL systems are crux and crux-facts over crux's PostgreSQL
// backend (store/postgres) instead of bbolt: the same tools, called in
// process, on a store in a schema of its own. Their rankings must equal
// the bbolt systems' (postgres_test.go checks it question by question);
// their latencies are what a server on PostgreSQL answers in.

package retrieval

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/jackc/pgx/v5"

	"github.com/crux-go/crux/store/postgres"
)

// RegisterPostgres registers crux-pg and crux-facts-pg: the crux and
// crux-facts systems over the PostgreSQL database at dsn (a postgres://
// URL), each new system in a schema of its own (crux_eval_ and 12 random
// hex digits), dropped when the system is closed.
func RegisterPostgres(dsn string) {
	Register(Factory{Name: "crux-pg", New: func(string) (System, error) {
		s, db, err := newPGSchema(dsn)
		if err != nil {
			return nil, err
		}
		x, err := newCruxOn(db, nil)
		if err != nil {
			s.drop()
			return nil, err
		}
		return &cruxPG{System: x, schema: s}, nil
	}})
	Register(Factory{Name: "crux-facts-pg", New: func(string) (System, error) {
		s, db, err := newPGSchema(dsn)
		if err != nil {
			return nil, err
		}
		x, err := newCruxFactsOn(db, nil)
		if err != nil {
			s.drop()
			return nil, err
		}
		return &cruxFactsPG{CruxFacts: x, schema: s}, nil
	}})
}

// pgSchema is a schema of the database at dsn that one system's store
// lives in.
type pgSchema struct {
	dsn, name string
}

// newPGSchema makes a new schema in the database at dsn and opens a crux
// store in it.
func newPGSchema(dsn string) (*pgSchema, *postgres.DB, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	s := &pgSchema{dsn: dsn, name: "crux_eval_" + hex.EncodeToString(b[:])}
	db, err := postgres.Open(context.Background(), dsn, &postgres.Options{Schema: s.name})
	if err != nil {
		s.drop()
		return nil, nil, err
	}
	return s, db, nil
}

// exec runs one statement on a connection of its own.
func (s *pgSchema) exec(sql string, args ...any) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// size is the bytes of the schema's tables, with their indexes and TOAST
// tables.
func (s *pgSchema) size() (int64, error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
		FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
		WHERE ns.nspname = $1 AND c.relkind = 'r'`, s.name).Scan(&n)
	return n, err
}

// drop drops the schema and everything in it.
func (s *pgSchema) drop() error {
	return s.exec("DROP SCHEMA IF EXISTS " + pgx.Identifier{s.name}.Sanitize() + " CASCADE")
}

// cruxPG is the crux system on PostgreSQL.
type cruxPG struct {
	System // a *Crux over the schema's store
	schema *pgSchema
}

// Name implements System.
func (*cruxPG) Name() string { return "crux-pg" }

// SizeOnDisk implements System: the schema's tables and indexes.
func (x *cruxPG) SizeOnDisk() (int64, error) { return x.schema.size() }

// Close implements System: the server and store, then the schema.
func (x *cruxPG) Close() error {
	err := x.System.Close()
	if err2 := x.schema.drop(); err == nil {
		err = err2
	}
	return err
}

// cruxFactsPG is the crux-facts system on PostgreSQL.
type cruxFactsPG struct {
	*CruxFacts // over the schema's store
	schema     *pgSchema
}

// Name implements System.
func (*cruxFactsPG) Name() string { return "crux-facts-pg" }

// SizeOnDisk implements System: the schema's tables and indexes.
func (x *cruxFactsPG) SizeOnDisk() (int64, error) { return x.schema.size() }

// Close implements System: the server and store, then the schema.
func (x *cruxFactsPG) Close() error {
	err := x.CruxFacts.Close()
	if err2 := x.schema.drop(); err == nil {
		err = err2
	}
	return err
}
