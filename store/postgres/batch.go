package postgres

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/crux-go/crux/store"
)

// maxBatch caps the Update calls committed in one transaction.
const maxBatch = 64

// maxProbes caps the probes of one call (see probe).
const maxProbes = 4

// Group commit. Concurrent Updates of one DB join a batch: their fns run
// one after the other, each on its caller's goroutine, in one PostgreSQL
// transaction, which commits once for all of them. A batch begins its
// transaction only when the one before it has ended, so that it reads
// what that one wrote instead of colliding with it; callers arriving
// meanwhile, or while it runs, join it. An fn that fails has its writes
// taken back from the shared transaction (they were never sent: writes go
// to the server at commit) and its error is its result if the batch
// commits. When the batch's transaction aborts, every fn of it runs again
// (the store contract allows it); when the commit fails for another reason
// and the batch held several writers, each runs again alone, so that the
// error reaches the caller whose writes caused it.
//
// Probes. The calls of a batch run one after the other, so a call that
// reads what the transaction does not hold would make a round trip while
// the others wait for their turn, and a batch of n calls would make about
// 2n. Instead, while other calls of the batch are unfinished, a call runs
// its fn as a probe: a read that the transaction's view cannot answer is
// queued, with the prefetches fn announced, and unwinds fn (a panic that
// the probe recovers; fn's writes are taken back), and the call waits
// until its reads have been sent. They are sent, in one round trip with
// those of every other call waiting so, by the call that finds every
// unfinished call of the batch waiting; then each runs its fn again. A
// probe that reads nothing the view lacks has run fn for real, at its
// place in the batch's order: its writes stay. After maxProbes probes, or
// when it is the batch's only unfinished call, a call runs fn plainly,
// making its own round trips. A batch of store_facts so makes about three
// round trips for all its calls, and the commit.

// batch is one shared transaction and the calls that joined it.
type batch struct {
	t     *tx
	turn  sync.Mutex    // held by the fn running on t
	cond  sync.Cond     // on turn: signalled when reads have been sent
	ready chan struct{} // closed when the batch before has ended
	done  chan struct{} // closed when the batch has ended; err is then set

	// Guarded by DB.mu.
	joined, ran int
	solo        bool // takes no other call
	sealed      bool

	// Guarded by turn until sealed, then read-only.
	broken      error // the statement error that aborted t
	brokenBy    *member
	flushFailed bool // broken by the reads of waiting probes, sent for all
	writers     int  // calls whose writes the commit holds
	finished    int  // calls that have left runIn
	waiting     int  // calls waiting for the reads of their probes

	err error // the commit's result
}

// member is one call's part in a batch.
type member struct{ wrote bool }

// errRerun tells the calls of a batch whose transaction was aborted by
// another call's statement to run again; errRerunAlone, to run again in a
// batch of their own.
var (
	errRerun      = errors.New("store/postgres: batch aborted, run again")
	errRerunAlone = errors.New("store/postgres: batch commit failed, run again alone")
)

// join adds a call to the open batch, or opens a new one (then the call
// leads it: it commits it).
func (db *DB) join(solo bool) (b *batch, lead bool) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if b = db.open; b != nil && !solo && !b.solo && b.joined < maxBatch {
		b.joined++
		return b, false
	}
	b = &batch{ready: make(chan struct{}), done: make(chan struct{}), joined: 1, solo: solo}
	b.cond.L = &b.turn
	if prev := db.last; prev != nil {
		go func() { <-prev.done; close(b.ready) }()
	} else {
		close(b.ready)
	}
	db.open, db.last = b, b
	return b, true
}

// leave records that a call of b has run (or given up).
func (db *DB) leave(b *batch) {
	db.mu.Lock()
	b.ran++
	db.mu.Unlock()
	db.cond.Broadcast()
}

// seal waits until every call that joined b has run and closes it to new
// ones.
func (db *DB) seal(b *batch) {
	db.mu.Lock()
	for b.ran < b.joined {
		db.cond.Wait()
	}
	b.sealed = true
	if db.open == b {
		db.open = nil
	}
	db.mu.Unlock()
}

// attempt runs fn once in a batch and returns its result: fn's error, the
// commit's, or errRerun / errRerunAlone / a retryable abort to run again.
func (db *DB) attempt(ctx context.Context, fn func(store.Tx) error, solo bool) error {
	b, lead := db.join(solo)
	ended, left := false, false
	if lead {
		defer func() {
			if !ended { // fn panicked or called runtime.Goexit
				db.end(ctx, b)
			}
		}()
	}
	defer func() {
		if !left {
			db.leave(b)
		}
	}()
	<-b.ready
	m := &member{}
	err := db.runIn(ctx, b, m, fn)
	left = true
	db.leave(b)
	if lead {
		db.seal(b)
		db.commit(ctx, b)
		ended = true
		db.end(ctx, b)
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err // fn's writes were taken back: nothing to wait for
	}
	<-b.done
	switch {
	case b.brokenBy == m:
		return err
	case b.flushFailed && retryable(b.broken):
		return b.broken // aborted: back off and run again
	case b.flushFailed:
		return errRerunAlone // so that the error reaches the caller whose reads caused it
	case b.broken != nil:
		return errRerun
	case b.err != nil && retryable(b.err):
		return b.err
	case b.err != nil && m.wrote && errors.Is(b.err, errCommitUnknown):
		return b.err // perhaps committed: never run again (see reconnect.go)
	case b.err != nil && b.writers > 1 && m.wrote:
		return errRerunAlone
	case b.err != nil && m.wrote:
		return b.err
	}
	return err
}

// runIn runs fn, in its turn, on b's transaction: as probes while other
// calls of b are unfinished, then plainly (see Probes above).
func (db *DB) runIn(ctx context.Context, b *batch, m *member, fn func(store.Tx) error) error {
	b.turn.Lock()
	defer b.turn.Unlock()
	defer db.finish(b)
	for probes := 0; ; probes++ {
		if b.broken != nil {
			return errRerun
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if b.t == nil {
			conn, owed := db.takeParked(), true
			if conn == nil {
				var err error
				if conn, err = db.acquireRetry(ctx, context.WithoutCancel(ctx)); err != nil {
					b.broken, b.brokenBy = db.wrap(ctx, err), m
					return b.broken
				}
				owed = false
			}
			b.t = &tx{db: db, conn: conn, owed: owed, begin: "BEGIN ISOLATION LEVEL SERIALIZABLE", writable: true, wake: &b.cond}
		}
		probe := probes < maxProbes && db.unfinished(b) > 1
		err, missed := db.runOnce(ctx, b, m, fn, probe)
		if !missed {
			return err
		}
		db.await(b)
	}
}

// runOnce runs fn once on b's transaction. As a probe, it returns missed
// when fn read what the view lacks: fn was unwound and its writes are taken
// back.
func (db *DB) runOnce(ctx context.Context, b *batch, m *member, fn func(store.Tx) error, probe bool) (err error, missed bool) {
	t := b.t
	t.ctx, t.sctx = ctx, context.WithoutCancel(ctx)
	t.ctxErr, t.done = nil, false
	t.probing, t.missed = probe, false
	t.startUndo()
	ok := false
	defer func() {
		t.done = true
		t.probing = false
		if t.missed {
			// Unwound at a read. Whatever fn did after (recovered and
			// returned, or panicked otherwise), the probe is void.
			if !ok {
				recover()
			}
			t.rollbackUndo()
			t.logging, t.missed = false, false
			err, missed = nil, true
			return
		}
		if t.pgErr != nil && b.broken == nil {
			b.broken, b.brokenBy = t.pgErr, m
			b.cond.Broadcast() // the waiting probes run again elsewhere
		}
		if !ok || err != nil || b.brokenBy == m {
			t.rollbackUndo() // also when fn panics or calls runtime.Goexit
		}
		if ok && err == nil && t.writes > 0 {
			m.wrote = true
			b.writers++
		}
		t.logging = false
	}()
	err = fn(t)
	if err == nil {
		err = t.ctxErr
	}
	if t.pgErr != nil {
		err = t.pgErr // a retryable abort fn saw (and may have passed on)
	}
	ok = true
	return err, false
}

// unfinished is the number of calls of b that have not left runIn.
// Called with b.turn held.
func (db *DB) unfinished(b *batch) int {
	db.mu.Lock()
	defer db.mu.Unlock()
	return b.joined - b.finished
}

// await waits, with b.turn released meanwhile, until the reads queued on
// b's transaction have been sent; it sends them itself when every
// unfinished call of b waits so. Called with b.turn held.
func (db *DB) await(b *batch) {
	t := b.t
	sent := t.sent
	b.waiting++
	defer func() { b.waiting-- }()
	if b.waiting >= db.unfinished(b) {
		db.flush(b)
		return
	}
	for t.sent == sent && b.broken == nil {
		b.cond.Wait()
	}
}

// finish records that a call has left runIn, and sends the reads of the
// waiting probes if every other unfinished call waits. Called with b.turn
// held.
func (db *DB) finish(b *batch) {
	b.finished++
	if b.waiting > 0 && b.waiting >= db.unfinished(b) {
		db.flush(b)
	}
}

// flush sends the reads of the waiting probes of b. When it fails, b is
// broken, and every call of b runs again (see attempt).
func (db *DB) flush(b *batch) {
	if b.broken != nil {
		b.cond.Broadcast()
		return
	}
	t := b.t
	t.sctx = context.WithoutCancel(t.sctx)
	if err := t.flush(); err != nil && b.broken == nil {
		b.broken, b.flushFailed = db.wrap(context.Background(), err), true
		b.cond.Broadcast()
	}
}

// commit ends b's transaction: it commits the writes of the calls that
// succeeded, or rolls back when a statement aborted it.
func (db *DB) commit(ctx context.Context, b *batch) {
	t := b.t
	if t == nil || b.broken != nil {
		return
	}
	t.ctx, t.sctx = ctx, context.WithoutCancel(ctx)
	if b.writers > 0 {
		if err := t.commit(); err != nil {
			b.err = db.wrap(context.Background(), err)
		}
	}
}

// end releases b's connection and wakes its calls and the next batch.
func (db *DB) end(ctx context.Context, b *batch) {
	if !b.sealed {
		// The leader's fn panicked or called runtime.Goexit: the other
		// calls run again.
		db.seal(b)
		if b.broken == nil {
			b.broken = errRerun
		}
	}
	if b.t != nil {
		b.t.sctx = context.WithoutCancel(ctx)
		b.t.release()
	}
	close(b.done)
}

// acquire takes a connection from the pool for a read-only transaction.
func (db *DB) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	conn, err := db.acquireRetry(ctx, ctx)
	if err != nil {
		return nil, db.wrap(ctx, err)
	}
	return conn, nil
}
