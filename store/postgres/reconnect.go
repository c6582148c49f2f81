package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Reconnecting. When the server restarts (or a connection breaks), what
// is safe to run again runs again, on a new connection, for up to
// Options.ReconnectTimeout after the first failure:
//
//   - Taking a connection: while the server cannot be reached (refused,
//     starting up, shutting down), a View or a batch of Updates waits for
//     it, retrying with a backoff growing to 250 ms. Nothing has run yet.
//   - The first round trip of a transaction (its BEGIN and first reads):
//     when the connection turns out to be dead, the same statements are
//     sent on a new one. The function has been handed nothing yet, so it
//     does not notice.
//   - An Update whose connection is lost after its first round trip but
//     before its COMMIT was sent: its transaction cannot have committed,
//     and it runs again from the start (Update's function may run more
//     than once, as for a serialization failure).
//
// Not retried, and reported to the caller:
//
//   - A connection lost while the COMMIT was on its way: PostgreSQL may or
//     may not have committed, and running the function again could store
//     its writes twice. The error says so (errCommitUnknown).
//   - A View whose connection is lost after its first round trip: the
//     function has read from a snapshot that is gone, and a View's
//     function is not run twice.
//
// An acknowledged write is a committed one, so a restart loses none; a
// restart shorter than ReconnectTimeout fails only the calls it cut in the
// middle, as above.

// errCommitUnknown wraps the error of a COMMIT whose connection was lost.
var errCommitUnknown = errors.New("store/postgres: the connection was lost during COMMIT: the writes may or may not have been committed")

// commitLost is the error of a commit cut by a lost connection.
type commitLost struct{ err error }

func (e *commitLost) Error() string   { return errCommitUnknown.Error() + ": " + e.err.Error() }
func (e *commitLost) Unwrap() []error { return []error{errCommitUnknown, e.err} }

// connLost reports whether err says that the server could not be reached
// or the connection broke (rather than that a statement failed): a dial
// error, a network error, a closed connection, or the server's shutdown
// and startup errors (SQLSTATE 57P01, 57P02, 57P03, class 08).
func connLost(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || strings.HasPrefix(pe.Code, "08")
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "conn closed")
}

// reconnectBackoff is the wait before attempt n (from 1) of a reconnection.
func reconnectBackoff(n int) time.Duration {
	return min(250*time.Millisecond, 10*time.Millisecond<<min(n, 5))
}

// sleepCtx waits d, or until ctx ends (then it returns ctx's error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// acquireRetry takes a connection from the pool, waiting for the server
// while it cannot be reached, up to the reconnect timeout. wait bounds
// the waits (the caller's context); the acquisitions themselves run with
// acquire's.
func (db *DB) acquireRetry(wait, acquire context.Context) (*pgxpool.Conn, error) {
	var deadline time.Time
	for n := 1; ; n++ {
		conn, err := db.pool.Acquire(acquire)
		if err == nil || !connLost(err) || db.closed.Load() || wait.Err() != nil {
			return conn, err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(db.reconnect)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("store/postgres: the server could not be reached for %v: %w", db.reconnect, err)
		}
		if err := sleepCtx(wait, reconnectBackoff(n)); err != nil {
			return nil, err
		}
	}
}

// resend sends b again on a new connection, after the first round trip
// of t failed with err because its connection was lost (see above), until
// it gets through or the reconnect timeout passes. It returns the
// results, or the error to report.
func (t *tx) resend(b *pgx.Batch, err error) (pgx.BatchResults, error) {
	deadline := time.Now().Add(t.db.reconnect)
	for n := 1; connLost(err) && !t.db.closed.Load(); n++ {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("store/postgres: the server could not be reached for %v: %w", t.db.reconnect, err)
		}
		t.conn.Release() // the pool drops a broken connection
		t.conn = nil
		conn, aerr := t.db.acquireRetry(t.ctx, context.WithoutCancel(t.sctx))
		if aerr != nil {
			return nil, aerr
		}
		t.conn = conn
		t.db.trips.Add(1)
		br := t.conn.SendBatch(t.sctx, fresh(b))
		if _, err = br.Exec(); err == nil { // the BEGIN
			return br, nil
		}
		_ = br.Close()
		if !connLost(err) {
			break
		}
		if serr := sleepCtx(t.ctx, reconnectBackoff(n)); serr != nil {
			return nil, serr
		}
	}
	return nil, err
}

// fresh is a batch of b's statements and arguments, without what sending
// b on another connection recorded in it (its prepared statements).
func fresh(b *pgx.Batch) *pgx.Batch {
	nb := &pgx.Batch{}
	for _, q := range b.QueuedQueries {
		nb.Queue(q.SQL, q.Arguments...)
	}
	return nb
}
