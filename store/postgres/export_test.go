package postgres

// RoundTrips returns the round trips the transactions of db have made,
// once the rollbacks of finished Views are done.
func RoundTrips(db *DB) uint64 {
	db.bg.Wait()
	return db.trips.Load()
}
