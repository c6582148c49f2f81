package postgres

import "context"

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
