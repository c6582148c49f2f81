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
//   - An Update whose connection is lost while its COMMIT was on its way:
//     PostgreSQL may or may not have committed it. Every commit that
//     writes inserts a random token of its own into crux_commits, with its
//     writes; once the server process that ran it has ended (a restart
//     ends them all), the token is in the table if and only if the
//     transaction committed. The Update then succeeds if it did, and runs
//     again if it did not.
//
// Not retried, and reported to the caller:
//
//   - A COMMIT whose outcome could not be learned within the timeout (the
//     server still unreachable, or its old process still running): running
//     the function again could store its writes twice, so the error says
//     the writes may or may not have been committed (errCommitUnknown).
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

// notCommitted is the error of a commit cut by a lost connection that
// did not take effect: the Update runs again.
type notCommitted struct{ err error }

func (e *notCommitted) Error() string {
	return "store/postgres: the connection was lost during COMMIT, which did not take effect: " + e.err.Error()
}
func (e *notCommitted) Unwrap() error { return e.err }

// commitOutcome learns whether the transaction whose COMMIT carried token,
// sent on the connection served by server process pid, committed: once
// that process has ended, the token is in crux_commits if and only if it
// did. It waits for the process to end and for the server to answer, up
// to the reconnect timeout.
func (db *DB) commitOutcome(pid uint32, token []byte) (bool, error) {
	ctx := context.Background()
	deadline := time.Now().Add(db.reconnect)
	for n := 1; ; n++ {
		committed, ended, err := db.checkCommit(ctx, pid, token)
		switch {
		case err == nil && ended:
			return committed, nil
		case err != nil && !connLost(err):
			return false, err
		case db.closed.Load():
			return false, errors.New("store/postgres: closed")
		case time.Now().After(deadline):
			if err == nil {
				err = fmt.Errorf("server process %d still runs", pid)
			}
			return false, fmt.Errorf("after %v: %w", db.reconnect, err)
		}
		_ = sleepCtx(ctx, reconnectBackoff(n))
	}
}

// checkCommit reports whether server process pid has ended and, if it
// has, whether token is in crux_commits: two statements, so that the
// second one's snapshot comes after the process ended.
func (db *DB) checkCommit(ctx context.Context, pid uint32, token []byte) (committed, ended bool, err error) {
	conn, err := db.pool.Acquire(ctx)
	if err != nil {
		return false, false, err
	}
	defer conn.Release()
	if err := conn.QueryRow(ctx, "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)", int32(pid)).Scan(&ended); err != nil || !ended {
		return false, false, err
	}
	err = conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM crux_commits WHERE token = $1)", token).Scan(&committed)
	return committed, err == nil, err
}

// maybeSweepTokens deletes, after every 1024th commit of db, in the
// background, the commit tokens older than ten minutes, or twice the
// reconnect timeout if that is longer: a lost commit's token is read
// within the reconnect timeout.
func (db *DB) maybeSweepTokens() {
	if db.commits.Add(1)%1024 != 0 || db.closed.Load() {
		return
	}
	keep := max(10*time.Minute, 2*db.reconnect)
	db.bg.Add(1)
	go func() {
		defer db.bg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = db.pool.Exec(ctx, "DELETE FROM crux_commits WHERE at < now() - make_interval(secs => $1)", keep.Seconds())
	}()
}

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
// b on another connection recorded in it (its prepared statements), and
// without a first ROLLBACK, which only the connection that owed it needed
// (see park.go).
func fresh(b *pgx.Batch) *pgx.Batch {
	nb := &pgx.Batch{}
	for i, q := range b.QueuedQueries {
		if i == 0 && q.SQL == sqlRollback {
			continue
		}
		nb.Queue(q.SQL, q.Arguments...)
	}
	return nb
}
