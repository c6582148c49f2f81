// Package postgres is a [store.Backend] on PostgreSQL, for deployments that
// outgrow one machine: several crux servers, on several machines, share
// one database and see each other's writes.
//
//	db, err := postgres.Open(ctx, "postgres://crux@db.internal/crux", nil)
//	...
//	srv, err := crux.NewServer(db, nil)
//
// # Schema
//
// Every bucket lives in one table, kv (bucket text, key bytea, value bytea,
// primary key (bucket, key)), in the schema [Options.Schema] names (else
// the connection's search_path, normally public). Its primary key is a
// B-tree, so Get is an index lookup and a prefix Scan an ordered index
// range: keys compare as bytes, as in every crux backend. The schema is
// created and brought up to date by [Open]: the migrations embedded in
// this package are applied in order, each once, in a transaction holding
// an advisory lock (so servers starting together do not race), and each
// is recorded in the table crux_migrations (version, applied_at).
//
// Sync's change log is not in kv but in tables of its own (migration 2,
// which moves a log written in kv by an older crux, keeping its seqs):
// crux_changes (tenant, seq, entry), which a write only inserts into with
// its COMMIT, reading no head, and crux_change_counts, the entries'
// counts (see changes.go and store.ChangeLogger). A seq is the writing
// transaction's id shifted left by 20 bits plus the entry's place in it;
// a reader sees the log up to the oldest write transaction still running,
// so that no entry ever appears behind one already read. All the servers
// of a database must run a crux that knows migration 2: an older one's
// writes are refused (a trigger on kv), not lost.
//
// # Transactions
//
// [DB.Update] runs in a SERIALIZABLE transaction, so concurrent Updates,
// from this process or any other, behave as if they ran one after the
// other: two servers storing a version of the same fact at once cannot
// both make it current, and a tenant's receipt chain cannot fork. When
// PostgreSQL aborts one of them (SQLSTATE 40001, serialization failure,
// 40P01, deadlock, or 23505, unique violation: see Round trips), Update
// runs fn again in a new transaction, after a random backoff growing to at
// most 64 ms, until it commits, ctx ends, or [Options.MaxRetries] attempts
// have failed. fn may therefore run more
// than once, which the store contract allows: crux's transaction
// functions compute everything from what they read in the transaction
// and have no effect outside it (random ids and signatures are made
// afresh in each run, and only the committed run's are kept). [DB.View]
// runs in a REPEATABLE READ READ ONLY transaction: one consistent
// snapshot, never blocking or aborting writers.
//
// Concurrent Updates of one DB share a transaction (group commit): their
// functions run one after the other, each on its caller's goroutine, and
// commit together, so that callers of one process never abort each other
// on the keys every write touches (a tenant's change-log head, the fresh
// postings). A batch begins only after the one before it has ended, and
// holds at most 64 calls. A function that returns an error has its writes
// taken back from the batch, and its error is its result once the batch
// commits; when the batch's transaction aborts, every function of it runs
// again; when its commit fails for another reason, each writer runs again
// alone, so the error reaches the caller that caused it.
//
// While other calls of its batch are unfinished, a call's function runs as
// a probe: at the first read the transaction does not hold, it is unwound
// (by a panic that Update recovers; its writes are taken back), and runs
// again once that read has been sent, in one round trip with the reads of
// every other call of the batch waiting so. A probe that needs nothing the
// transaction lacks has simply run, at its place in the batch. So a batch
// of n store_facts makes about three round trips before its COMMIT, not
// 2n. A function must therefore not recover panics it did not raise
// itself, nor hold a lock across a store call without a deferred unlock.
//
// # Round trips
//
// A transaction keeps what it has read (the snapshot does not change
// while it runs) and the ranges it has read in full, so reading a key or a
// range again costs nothing. Its writes are kept too and sent at commit,
// in the same round trip as the COMMIT, as statements over arrays: an
// INSERT of the keys it read as absent, an INSERT ... ON CONFLICT of the
// others, a DELETE of the keys it did not read as absent (deleting a key
// read as absent sends nothing). A plain INSERT costs the server less than
// the speculative insertion of ON CONFLICT; when a concurrent transaction
// has inserted one of its keys since the snapshot, the unique violation
// aborts the transaction and Update runs fn again. BEGIN is sent with the first read, and the
// reads a transaction announces through [store.Prefetcher] go with its next
// one: a keyword query costs two round trips, a store_fact alone two (and
// a third when it retires a current version), a batch of concurrent
// store_facts about three for all its calls. [Options.Tracer] sees them.
// A View's ROLLBACK costs no round trip of its own when another
// transaction follows within a millisecond: its connection waits, its
// transaction open, and the next View or batch of Updates to take it sends
// the ROLLBACK first, with its BEGIN and first reads (see park.go; a
// connection not taken in time is rolled back after View has returned,
// off the caller's path). A transaction that has read more than 16 MiB
// forgets what it read (not what it wrote) and reads again what it needs.
//
// Reads sent together go as few statements: the keys of one bucket as one,
// the pages of several ranges of one bucket (same direction, same kind of
// upper bound) as one, a LATERAL join over the arrays of their bounds.
//
// A Scan reads what it does not hold a page at a time (256 rows, 16 for a
// descending scan, which mostly stops at its first key); its callback may
// call Get, Put and Delete on the same transaction, and sees the writes
// made after the key it is at.
//
// # Connections
//
// The pool is pgxpool's: [Options.MaxConns] connections at most (default
// 4 per CPU, at least 4), each statement of a View bounded by ctx. A
// transaction holds one connection for its whole run, a batch of Updates
// one for all its calls; a statement of an Update runs to its end when ctx
// ends (the call's next store access then fails, and its writes are
// dropped), so that it does not abort the calls it shares a transaction
// with. Open fails if the server cannot be reached within
// [Options.ConnectTimeout] (default 10 s).
//
// # Restarts
//
// When the server cannot be reached or a connection breaks (a restart, a
// failover), a call runs again on a new connection what is safe to run
// again, for up to [Options.ReconnectTimeout] (default 10 s): taking a
// connection waits for the server; a transaction's first round trip (its
// BEGIN and first reads, before its function has been handed anything) is
// sent again; an Update cut before its COMMIT was sent runs again; an
// Update cut while its COMMIT was on its way learns whether it took
// effect, from a random token every writing commit inserts into
// crux_commits (migration 3; kept ten minutes): it succeeds if it did,
// runs again if it did not. What fails, with an error saying why: a View
// cut after its first round trip (its function has read from a snapshot
// that is gone), and a COMMIT whose outcome stays unknown past the
// timeout (running it again could store its writes twice). An
// acknowledged write is committed: a restart loses none.
//
// # Purge and compaction
//
// A purged value is deleted from kv: no query can read it. PostgreSQL
// keeps a deleted row's bytes in its page until VACUUM reclaims the space;
// [DB.Compact] (store.Compacter, which crux purge calls) runs VACUUM
// (ANALYZE) on kv, after which they are gone from the table's live pages.
// VACUUM FULL, which rewrites the table file, needs an exclusive lock and
// is left to the operator.
//
// # Planner settings
//
// Every statement crux sends reads kv through its primary key: a key, a
// few keys, or the first rows of a key range in key order. Its
// connections set plan_cache_mode = force_generic_plan, enable_seqscan =
// off and enable_bitmapscan = off (unless the connection string sets
// them): each statement is planned once per connection instead of at each
// execution (planning was three quarters of the server's time for a range
// read), and the plan is an index scan in key order whatever the table's
// statistics say, where a table without statistics had a range read
// fetch the whole range and sort it, or a bucket scanned for a few keys.
// These settings, like search_path for [Options.Schema], are sent as
// startup parameters of each connection: a connection pooler in front of
// the server must pass them on (PgBouncer refuses a connection that sends
// parameters it does not track unless its ignore_startup_parameters lists
// them; with it, set them on the database instead, with ALTER DATABASE
// ... SET).
//
// # Server settings
//
// PostgreSQL's defaults serve crux, with two points for busy deployments:
//
//   - autovacuum must stay on (the default): it reclaims the rows that
//     writes replace (a posting block or a change-log head is rewritten at
//     each store_fact) and keeps the table's statistics. After a bulk load
//     on a server without it, run VACUUM ANALYZE on kv ([DB.Compact]
//     does).
//   - max_pred_locks_per_transaction (default 64) sizes the shared table of
//     the predicate locks that SERIALIZABLE transactions take on the rows
//     and pages they read. A batch of concurrent store_facts reads many,
//     and a parallel load of 100,000 facts has exhausted the default
//     ("out of shared memory", with a hint naming the setting): give busy
//     deployments 256 or more (it takes effect at a server restart).
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/crux-go/crux/store"
)

// Options configures [Open]. A nil *Options means all defaults.
type Options struct {
	// Schema is the PostgreSQL schema holding crux's tables, created if
	// missing. Empty means the connection's search_path (normally public).
	Schema string
	// MaxConns bounds the pool. Zero means 4 per CPU, at least 4.
	MaxConns int32
	// ConnectTimeout bounds how long Open waits for the server. Zero means
	// 10 s.
	ConnectTimeout time.Duration
	// MaxRetries bounds the attempts of one Update aborted by serialization
	// failures or deadlocks. Zero means 1000 (with the backoff, over a
	// minute of contention).
	MaxRetries int
	// ReconnectTimeout bounds how long a call waits for the server when it
	// cannot be reached or a connection breaks, running again on a new
	// connection what is safe to run again (see the package
	// documentation). Zero means 10 s; a negative value, no waiting.
	ReconnectTimeout time.Duration
	// Tracer, if not nil, traces the statements of every connection (as
	// pgx.ConnConfig.Tracer does: a tracer that also implements
	// pgx.BatchTracer sees the batches, which carry most of crux's
	// statements, one round trip each).
	Tracer pgx.QueryTracer
}

// DB is a [store.Backend] on PostgreSQL. It is safe for concurrent use.
type DB struct {
	pool         *pgxpool.Pool
	maxRetries   int
	reconnect    time.Duration // see Options.ReconnectTimeout
	commits      atomic.Uint64 // commits that wrote, for sweeping their tokens
	commitTokens bool          // commits insert a token (migration 3 applied; see reconnect.go)
	closed       atomic.Bool
	trips        atomic.Uint64  // round trips of transactions, for tests
	bg           sync.WaitGroup // rollbacks of finished Views

	parkMu  sync.Mutex    // guards parked
	parked  []*parked     // connections whose ROLLBACK is owed (see park.go)
	parkFor time.Duration // how long a connection stays parked

	mu   sync.Mutex
	cond sync.Cond // signalled on mu when a call of a batch has run
	open *batch    // the batch new Updates join, if any
	last *batch    // the newest batch
}

var (
	_ store.Backend   = (*DB)(nil)
	_ store.Compacter = (*DB)(nil)
)

//go:embed migrations/*.sql
var migrations embed.FS

// maxKey is the longest key the store contract allows.
const maxKey = 32 << 10

// Open connects to the database at dsn (a postgres:// URL or a key=value
// connection string), creates or migrates crux's schema, and returns the
// store.
func Open(ctx context.Context, dsn string, opts *Options) (*DB, error) {
	return open(ctx, dsn, opts, 0)
}

// open is Open applying the migrations up to number upTo only (0: all).
func open(ctx context.Context, dsn string, opts *Options, upTo int) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.MaxConns == 0 {
		o.MaxConns = int32(max(4, 4*runtime.NumCPU()))
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = 1000
	}
	if o.ReconnectTimeout == 0 {
		o.ReconnectTimeout = 10 * time.Second
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store/postgres: %w", err)
	}
	cfg.MaxConns = o.MaxConns
	for name, v := range plannerParams {
		if _, set := cfg.ConnConfig.RuntimeParams[name]; !set {
			cfg.ConnConfig.RuntimeParams[name] = v
		}
	}
	cfg.ConnConfig.ConnectTimeout = o.ConnectTimeout
	if o.Tracer != nil {
		cfg.ConnConfig.Tracer = o.Tracer
	}
	if o.Schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = o.Schema
	}
	octx, cancel := context.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(octx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store/postgres: %w", err)
	}
	if err := pool.Ping(octx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store/postgres: connecting: %w", err)
	}
	if err := migrate(octx, pool, o.Schema, upTo); err != nil {
		pool.Close()
		return nil, err
	}
	db := &DB{pool: pool, maxRetries: o.MaxRetries, reconnect: max(0, o.ReconnectTimeout), commitTokens: upTo == 0 || upTo >= 3,
		parkFor: time.Millisecond}
	db.cond.L = &db.mu
	return db, nil
}

// plannerParams are the planner settings of crux's connections (see the
// package documentation), unless the connection string sets them.
var plannerParams = map[string]string{
	"plan_cache_mode":   "force_generic_plan",
	"enable_seqscan":    "off",
	"enable_bitmapscan": "off",
}

// migrationLock is the advisory lock key that serialises migrations.
const migrationLock = 0x63727578 // "crux"

// migrate applies, in one transaction holding the advisory lock, every
// embedded migration not yet recorded in crux_migrations, up to number
// upTo (0: all).
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, upTo int) error {
	entries, err := migrations.ReadDir("migrations")
	if err != nil {
		return err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLock); err != nil {
			return fmt.Errorf("store/postgres: migration lock: %w", err)
		}
		if schema != "" {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
				return fmt.Errorf("store/postgres: creating schema %s: %w", schema, err)
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS crux_migrations (
			version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return fmt.Errorf("store/postgres: %w", err)
		}
		applied := map[int]bool{}
		rows, err := tx.Query(ctx, "SELECT version FROM crux_migrations")
		if err != nil {
			return err
		}
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				return err
			}
			applied[v] = true
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, e := range entries {
			num, _, ok := strings.Cut(e.Name(), "_")
			v, err := strconv.Atoi(num)
			if !ok || err != nil {
				return fmt.Errorf("store/postgres: migration %s: the name must start with its number", e.Name())
			}
			if applied[v] || upTo > 0 && v > upTo {
				continue
			}
			sql, err := migrations.ReadFile("migrations/" + e.Name())
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, string(sql)); err != nil {
				return fmt.Errorf("store/postgres: migration %s: %w", e.Name(), err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO crux_migrations (version) VALUES ($1)", v); err != nil {
				return err
			}
		}
		return nil
	})
}

// Close closes the pool. Later calls fail with store.ErrClosed. Close is
// idempotent.
func (db *DB) Close() error {
	if db.closed.Swap(true) {
		return nil
	}
	db.unparkAll()
	db.bg.Wait()
	db.pool.Close()
	return nil
}

// View runs fn in a read-only snapshot transaction.
func (db *DB) View(ctx context.Context, fn func(store.Tx) error) error {
	if db.closed.Load() {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	t := &tx{db: db, ctx: ctx, sctx: ctx, begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"}
	var err error
	if t.conn = db.takeParked(); t.conn != nil {
		t.owed = true
	} else if t.conn, err = db.acquire(ctx); err != nil {
		return err
	}
	defer func() {
		t.done = true
		if !t.begun {
			t.release()
			return
		}
		// Ending a read-only transaction changes nothing: its ROLLBACK
		// need not hold up the caller, and goes with the next
		// transaction's statements if one comes soon (see park.go).
		if t.pgErr == nil && t.ctxErr == nil && db.park(t.conn) {
			t.conn = nil
			return
		}
		db.bg.Add(1)
		go func() {
			defer db.bg.Done()
			t.release()
		}()
	}()
	err = fn(t)
	if err == nil {
		err = t.ctxErr
	}
	return err
}

// Update runs fn in a serializable transaction and commits it, running fn
// again when PostgreSQL aborts the transaction for a serialization failure
// or a deadlock (see the package documentation). Concurrent Updates share
// transactions (see batch).
func (db *DB) Update(ctx context.Context, fn func(store.Tx) error) error {
	solo := false
	var lostSince time.Time // when the connection was first lost, if it was
	for attempt := 1; ; attempt++ {
		if db.closed.Load() {
			return store.ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		err := db.attempt(ctx, fn, solo)
		switch {
		case errors.Is(err, errRerunAlone):
			solo = true
			continue
		case errors.Is(err, errRerun):
			continue // another call's failure: no backoff
		case lostBeforeCommit(err):
			// Nothing was committed: run again on a new connection (see
			// reconnect.go), for a bounded time.
			if lostSince.IsZero() {
				lostSince = time.Now()
			}
			if time.Since(lostSince) > db.reconnect {
				return fmt.Errorf("store/postgres: the server could not be reached for %v: %w", db.reconnect, err)
			}
			if err := sleepCtx(ctx, reconnectBackoff(attempt)); err != nil {
				return err
			}
			continue
		case !retryable(err):
			return err
		}
		if attempt >= db.maxRetries {
			return fmt.Errorf("store/postgres: update aborted %d times by concurrent transactions: %w", attempt, err)
		}
		// Full jitter, growing exponentially to at most 64 ms, so that
		// transactions that keep colliding spread out.
		backoff := time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 6)))
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// retryable reports whether err aborted a transaction that may run again:
// a serialization failure, a deadlock, or a unique violation, which only
// the plain INSERT of a commit can raise (every other write is an INSERT
// ... ON CONFLICT), on a key the transaction read as absent and a
// concurrent one has inserted since: a serialization failure that
// PostgreSQL reports as a unique violation.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01" || pe.Code == "23505")
}

// lostBeforeCommit reports whether err is a lost connection that cut a
// transaction before its COMMIT was sent (see reconnect.go).
func lostBeforeCommit(err error) bool {
	var cl *commitLost
	return connLost(err) && !errors.As(err, &cl)
}

// wrap turns a driver error into the store's: ctx's error when ctx ended.
func (db *DB) wrap(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if db.closed.Load() {
		return store.ErrClosed
	}
	return err
}

// Compact runs VACUUM (ANALYZE) on the table, so the space of deleted and
// overwritten values (purged facts among them) is reclaimed and the
// planner's statistics are fresh (see the package documentation). It
// implements store.Compacter.
func (db *DB) Compact(ctx context.Context) error {
	if db.closed.Load() {
		return store.ErrClosed
	}
	_, err := db.pool.Exec(ctx, "VACUUM (ANALYZE) kv")
	return db.wrap(ctx, err)
}

// CountRowsHolding counts the rows of kv whose key or value contains b:
// what an operator runs to check that a purged value is gone.
func (db *DB) CountRowsHolding(ctx context.Context, b []byte) (int, error) {
	if db.closed.Load() {
		return 0, store.ErrClosed
	}
	var n int
	err := db.pool.QueryRow(ctx, "SELECT count(*) FROM kv WHERE position($1::bytea IN key) > 0 OR position($1::bytea IN value) > 0", b).Scan(&n)
	return n, db.wrap(ctx, err)
}
