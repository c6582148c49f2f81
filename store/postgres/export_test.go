package postgres

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
