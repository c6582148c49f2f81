package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// A View ends with a ROLLBACK, which changes nothing but costs the server
// a statement and, sent alone, a round trip. So a View that ends cleanly
// parks its connection, transaction still open, instead of sending it:
// the next transaction that takes the connection (a View or a batch of
// Updates, of any caller) sends the ROLLBACK first in its own first round
// trip, before its BEGIN. A connection parked for longer than parkFor
// (default 1 ms: a read-only snapshot held that long keeps no row
// versions that matter from VACUUM) is rolled back and returned to the
// pool in the background, as a View's ROLLBACK was before; at most
// parkMax connections wait so, the others are returned at once. Nor is a
// connection parked when the pool has none idle and no room for more:
// callers may then be waiting for one in the pool, and parked connections,
// taken by the next View or batch without queueing there, could pass
// among a busy stream of Views and never reach them.

// parkMax bounds the connections parked at once.
const parkMax = 2

// sqlRollback ends a parked connection's transaction.
const sqlRollback = "ROLLBACK"

// parked is a connection whose read-only transaction has ended but not
// been rolled back.
type parked struct {
	conn  *pgxpool.Conn
	timer *time.Timer
}

// park keeps conn, whose read-only transaction is over, for the next
// transaction to roll back; it reports false (conn is then the caller's
// to release) when parkMax are parked already, the pool is exhausted, or
// db is closing.
func (db *DB) park(conn *pgxpool.Conn) bool {
	db.parkMu.Lock()
	defer db.parkMu.Unlock()
	if db.closed.Load() || len(db.parked) >= parkMax {
		return false
	}
	if st := db.pool.Stat(); st.IdleConns() == 0 && st.TotalConns() >= st.MaxConns() {
		return false
	}
	p := &parked{conn: conn}
	db.parked = append(db.parked, p)
	p.timer = time.AfterFunc(db.parkFor, func() {
		if db.unpark(p) {
			rollbackRelease(p.conn)
		}
	})
	return true
}

// unpark takes p from the parked connections, reporting whether it was
// still there.
func (db *DB) unpark(p *parked) bool {
	db.parkMu.Lock()
	defer db.parkMu.Unlock()
	for i, q := range db.parked {
		if q == p {
			db.parked = append(db.parked[:i], db.parked[i+1:]...)
			return true
		}
	}
	return false
}

// takeParked returns the most recently parked connection, whose ROLLBACK
// the caller must send first, or nil when none is parked.
func (db *DB) takeParked() *pgxpool.Conn {
	db.parkMu.Lock()
	defer db.parkMu.Unlock()
	n := len(db.parked)
	if n == 0 {
		return nil
	}
	p := db.parked[n-1]
	db.parked = db.parked[:n-1]
	p.timer.Stop()
	return p.conn
}

// unparkAll rolls back and releases every parked connection.
func (db *DB) unparkAll() {
	db.parkMu.Lock()
	ps := db.parked
	db.parked = nil
	db.parkMu.Unlock()
	for _, p := range ps {
		p.timer.Stop()
		rollbackRelease(p.conn)
	}
}

// rollbackRelease rolls back conn's transaction and returns it to the
// pool (which drops it if the ROLLBACK failed).
func rollbackRelease(conn *pgxpool.Conn) {
	_, _ = conn.Exec(context.Background(), sqlRollback)
	conn.Release()
}
