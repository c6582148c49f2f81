package postgres

import (
	"context"
	"time"

	"github.com/crux-go/crux/store"
)

// RoundTrips returns the round trips the transactions of db have made,
// once the rollbacks of finished Views are done.
func RoundTrips(db *DB) uint64 {
	db.bg.Wait()
	return db.trips.Load()
}

// Joined returns the number of calls in the batch new Updates join (0 if
// none is open).
func Joined(db *DB) int {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.open == nil {
		return 0
	}
	return db.open.joined
}

// Setting returns the value of the server setting name on a connection of
// db.
func Setting(db *DB, name string) (string, error) {
	var v string
	err := db.pool.QueryRow(context.Background(), "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}

// OpenAtMigration opens the store at dsn with its migrations applied up to
// number version only: the schema of an older crux.
func OpenAtMigration(ctx context.Context, dsn string, opts *Options, version int) (*DB, error) {
	return open(ctx, dsn, opts, version)
}

// KVOnly is db without its store.ChangeLogger: the store keeps the change
// log in its kv buckets, as crux did before migration 2.
func KVOnly(db *DB) store.Backend { return kvOnly{db} }

type kvOnly struct{ *DB }

// kvTx is a transaction of db showing only the kv interfaces.
type kvTx struct {
	store.Tx
	store.Seeker
	store.Prefetcher
}

func (k kvOnly) View(ctx context.Context, fn func(store.Tx) error) error {
	return k.DB.View(ctx, func(t store.Tx) error { return fn(kvTx{t, t.(store.Seeker), t.(store.Prefetcher)}) })
}

func (k kvOnly) Update(ctx context.Context, fn func(store.Tx) error) error {
	return k.DB.Update(ctx, func(t store.Tx) error { return fn(kvTx{t, t.(store.Seeker), t.(store.Prefetcher)}) })
}

// ErrCommitUnknown is the error a write returns when its COMMIT was cut by
// a lost connection.
var ErrCommitUnknown = errCommitUnknown

// CommitOutcome is db.commitOutcome: whether the commit that carried
// token, on the connection of server process pid, took effect.
func CommitOutcome(db *DB, pid uint32, token []byte) (bool, error) {
	return db.commitOutcome(pid, token)
}

// SetParkFor sets how long a connection of db stays parked with its
// ROLLBACK owed (see park.go), before any transaction of db runs.
func SetParkFor(db *DB, d time.Duration) { db.parkFor = d }

// Parked returns the number of parked connections of db.
func Parked(db *DB) int {
	db.parkMu.Lock()
	defer db.parkMu.Unlock()
	return len(db.parked)
}
