package bolt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/bbolt"

	"github.com/crux-go/crux/store"
)

// maxBatch caps the number of Update calls committed in one transaction.
const maxBatch = 256

// maxLogBuf bounds the record buffer a DB keeps for its next commit.
const maxLogBuf = 1 << 20

// call is one queued Update.
//
// done is closed exactly once: by the leader handing over leadership (lead is
// then set first), or, for a call that is not a leader, when its result is
// set. The result fields are written before done is closed or, for a leader,
// before its batch goroutine ends, and read by the caller afterwards.
type call struct {
	ctx  context.Context
	fn   func(store.Tx) error
	done chan struct{}
	lead bool // this call's goroutine leads the batch it is in

	finished  bool  // the result below is final
	tentative error // fn's error when it failed without writing; final if the batch commits

	err      error
	panicked bool
	panicVal any
	goexit   bool
}

// finish sets the call's final result and wakes its caller.
func (c *call) finish(err error) {
	c.err = err
	c.finished = true
	if !c.lead {
		close(c.done)
	}
}

func (c *call) finishPanic(v any) {
	c.panicked, c.panicVal = true, v
	c.finish(nil)
}

func (c *call) finishGoexit() {
	c.goexit = true
	c.finish(nil)
}

// batch is the calls a leader runs in one transaction: those queued when
// it began, and those that queue while it runs them (see more).
type batch struct {
	calls    []*call       // every call taken, in queue order; calls[0] is the leader's
	want     int           // how many calls the batch waits for before its commit
	wait     time.Duration // how long it waits for them, once it has run every call queued
	deadline time.Time     // when the wait ends, once it has begun
}

// lead runs the batch at the head of the queue, which starts with self, then
// hands leadership to the first call queued meanwhile, if any. The caller
// reads self's result when lead returns.
func (db *DB) lead(self *call) {
	db.mu.Lock()
	b := &batch{calls: db.take(maxBatch)}
	// Keep batches full: see more.
	if want, wait := min(db.nextBatch, maxBatch), min(db.lastCommit/2, db.requeueWait); want > len(b.calls) && wait > 0 {
		b.want, b.wait = want, wait
	}
	db.mu.Unlock()
	if len(b.calls) == 0 || b.calls[0] != self {
		panic("store/bolt: internal error: the group commit leader is not at the head of the queue")
	}

	// Runs also when self's own fn calls runtime.Goexit on this goroutine.
	defer db.handoff(b)

	if len(b.calls) == 1 && b.want == 0 {
		// Alone, and no other call awaited: run inline, on the caller's
		// goroutine, at no extra cost. A panic or Goexit of fn then
		// happens on the right goroutine: let it unwind as it is, with
		// its original stack trace.
		db.execute(b, b.calls, true)
		return
	}
	// Other callers' fns are run on a goroutine of their own, so that a
	// runtime.Goexit in one of them cannot end this caller's goroutine. A
	// Goexit leaves the calls after it unfinished: run them again.
	for todo := b.calls; len(todo) > 0; {
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			db.execute(b, todo, false)
		}()
		<-ended
		todo = nil
		for _, c := range b.calls {
			if !c.finished {
				todo = append(todo, c)
			}
		}
	}
}

// take removes the first calls of the queue, at most n, and returns them.
// db.mu is held.
func (db *DB) take(n int) []*call {
	n = min(n, len(db.pending))
	calls := slices.Clone(db.pending[:n])
	rest := copy(db.pending, db.pending[n:])
	clear(db.pending[rest:])
	db.pending = db.pending[:rest]
	return calls
}

// maxRequeueWait bounds how long a batch waits for the callers of the
// previous batch to queue again (see more). Tests may lengthen it through
// DB.requeueWait.
const maxRequeueWait = time.Millisecond

// more returns the calls queued since b began, which b's transaction runs
// too, up to maxBatch calls in all; nil when there are none.
//
// It keeps batches full. Leadership passes as soon as a batch has
// committed, when its callers have only just been woken: a batch of the
// calls queued at that moment would hold only those that arrived during
// the commit, and concurrent callers would split into two groups taking
// turns, each paying a commit for half of them. So a leader starts at once
// with the calls queued, runs those that queue while it runs them in the
// same transaction, and once it has run them all waits, before its commit,
// until the batch holds as many calls as the previous one (or as there
// were callers when it ended, see handoff), but no longer than half the
// previous commit took, and at most maxRequeueWait. A caller alone never
// waits: its previous batch held one call.
func (db *DB) more(b *batch) []*call {
	db.mu.Lock()
	defer db.mu.Unlock()
	for len(db.pending) == 0 && len(b.calls) < b.want {
		if b.deadline.IsZero() {
			b.deadline = time.Now().Add(b.wait)
		}
		wait := time.Until(b.deadline)
		if wait <= 0 {
			break
		}
		fill := make(chan struct{})
		db.fill = fill
		db.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-fill:
		case <-t.C:
		}
		t.Stop()
		db.mu.Lock()
		if db.fill == fill {
			db.fill = nil
		}
	}
	calls := db.take(maxBatch - len(b.calls))
	if len(calls) == 0 {
		return nil
	}
	b.calls = append(b.calls, calls...)
	return calls
}

// handoff sets how many calls the next batch waits for, and passes
// leadership to the head of the queue, or ends it. The next batch waits for
// as many calls as b, the batch just run, held, or as there are callers in
// Update now if they are more: b's, who come back if they write again, and
// those queued meanwhile. (Waiting only for as many as b held, batches
// would shrink, each to the size of the last, whenever a caller came back
// late.)
func (db *DB) handoff(b *batch) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.nextBatch = max(len(b.calls), int(db.callers.Load()))
	if len(db.pending) == 0 {
		db.leading = false
		return
	}
	next := db.pending[0]
	next.lead = true
	close(next.done)
}

// runner executes one batch; it keeps what its cleanup needs to know if a fn
// ends the goroutine with runtime.Goexit.
type runner struct {
	db      *DB
	b       *batch    // the batch the calls run belong to
	btx     *bbolt.Tx // open read-write transaction, if any
	exiting *call     // call whose fn called runtime.Goexit
	ok      bool      // execute returned normally
	inline  bool      // running the leader's own call, on its goroutine
}

// execute runs calls, of b, and those that b takes meanwhile (see more)
// until every one of them has a final result, unless a fn calls
// runtime.Goexit: then that call is finished as such, the open transaction
// is rolled back and the calls not yet finished are left so. With inline
// set, calls is the caller's own call alone, and a panic or Goexit of its
// fn is not intercepted: the transaction is rolled back and the goroutine
// unwinds.
func (db *DB) execute(b *batch, calls []*call, inline bool) {
	r := &runner{db: db, b: b, inline: inline}
	defer r.cleanup()
	for len(calls) > 0 {
		var failed *call
		calls, failed = r.attempt(calls, !inline)
		if failed != nil {
			r.attempt([]*call{failed}, false)
		}
	}
	r.ok = true
}

func (r *runner) cleanup() {
	if r.ok {
		return
	}
	r.rollback()
	if r.exiting != nil && !r.exiting.finished {
		r.exiting.finishGoexit()
	}
}

func (r *runner) rollback() {
	if r.btx != nil {
		_ = r.btx.Rollback()
		r.btx = nil
	}
}

// attempt runs calls in one read-write transaction and commits it; with
// more set, also the calls the batch takes meanwhile (see DB.more). It
// returns the calls that must run again because the transaction was rolled
// back, and, when an fn failed after writing, that call, to be run alone.
// Every other call has its final result when attempt returns.
func (r *runner) attempt(calls []*call, more bool) (retry []*call, failed *call) {
	db := r.db
	err := db.failure()
	if err == nil && db.wal != nil && !db.pinned() {
		// The pin was dropped (see DB.watchCommit), or the log marked
		// clean by Compact: no page of the log's checkpoint may be
		// reused before a new checkpoint.
		err = db.checkpoint()
	}
	var btx *bbolt.Tx
	if err == nil {
		btx, err = db.bdb.Begin(true)
		if err != nil {
			err = fmt.Errorf("store/bolt: begin write transaction: %w", err)
		}
	}
	if err != nil {
		for _, c := range calls {
			c.finish(err)
		}
		return nil, nil
	}
	r.btx = btx
	w := &writeState{}
	if db.wal != nil {
		w.log = append(db.logBuf[:0], make([]byte, recHeader)...)
	}
	ran := make([]*call, 0, len(calls)) // ran in btx; final result depends on the commit
	writes := 0
	for i := 0; ; i++ {
		if i == len(calls) {
			var taken []*call
			if more {
				taken = r.db.more(r.b)
			}
			if len(taken) == 0 {
				break
			}
			calls = append(slices.Clip(calls), taken...) // calls may share its array with b.calls
		}
		c := calls[i]
		if err := c.ctx.Err(); err != nil {
			c.finish(err)
			continue
		}
		t := &tx{ctx: c.ctx, btx: btx, w: w}
		panicked, pv, err := r.run(c, t)
		if panicked && t.writes == 0 {
			c.finishPanic(pv)
			continue
		}
		if panicked || (err != nil && t.writes > 0) {
			// Discard what fn wrote, and what the calls before it wrote
			// while seeing it.
			r.rollback()
			r.db.stats.reruns.Add(uint64(len(ran)))
			switch {
			case panicked:
				c.finishPanic(pv)
			case len(calls) == 1:
				c.finish(err) // already alone: the error is authentic
			default:
				failed = c
			}
			return append(ran, calls[i+1:]...), failed
		}
		c.tentative = err
		writes += t.writes
		ran = append(ran, c)
	}

	if writes == 0 {
		// Nothing to commit: spare the fsync.
		r.rollback()
		for _, c := range ran {
			c.finish(c.tentative)
		}
		return nil, nil
	}
	if err := (&tx{ctx: context.Background(), btx: btx, w: w}).flushStages(); err != nil {
		r.rollback()
		for _, c := range ran {
			c.finish(err)
		}
		return nil, nil
	}
	// The verdict, shared by every call of the batch, is whether the
	// commit is durable: its record flushed to the log, or, without the
	// log, the file flushed by bbolt. A commit that is not has been taken
	// back, and a failure whose effect on the files is unknown puts the DB
	// in the failed state (see "When the disk fails" in the package doc).
	start := time.Now()
	id := btx.ID()
	if w.log != nil {
		db.watchCommit()
		err = db.committed(btx.Commit()) // rolls back by itself on failure
		db.endCommit()
		switch {
		case noSpace(err):
			// Refused for want of space: nothing of it was written.
		case err != nil:
			// Not in the log: the next Open brings back the
			// checkpoint's state, without this commit.
			err = db.fail("commit to the database file", err)
		default:
			err = db.logCommit(w.log)
		}
		if cap(w.log) <= maxLogBuf {
			db.logBuf = w.log[:0]
		}
	} else {
		err = db.committed(btx.Commit())
		if err != nil && !db.bdb.NoSync && !noSpace(err) {
			db.undoCommit(id)
			err = db.fail("commit to the database file", err)
		}
	}
	r.db.noteCommit(time.Since(start))
	r.btx = nil
	st := btx.Stats()
	r.db.stats.pages.Add(uint64(st.GetWrite()))
	if err != nil {
		if !errors.Is(err, ErrFailed) {
			err = fmt.Errorf("store/bolt: commit: %w", err)
		}
		for _, c := range ran {
			c.finish(err)
		}
		return nil, nil
	}
	r.db.stats.commits.Add(1)
	db.setDurable(uint64(id))
	for _, c := range ran {
		c.finish(c.tentative)
	}
	if db.wal != nil && db.wal.due(db.bdb.Stats().PendingPageN) {
		// The batch is durable whatever happens here. Should the
		// checkpoint fail before flushing the file, the log goes on from
		// the last checkpoint, and the next commit tries again; should
		// the flush fail, the DB is in the failed state (see
		// DB.checkpoint).
		_ = db.checkpoint()
	}
	return nil, nil
}

// run calls c.fn, recovering a panic unless inline. A runtime.Goexit cannot
// be stopped: run records it for cleanup and lets the goroutine end.
func (r *runner) run(c *call, t *tx) (panicked bool, pv any, err error) {
	normal := false
	defer func() {
		t.end()
		if normal || r.inline {
			return
		}
		if v := recover(); v != nil {
			panicked, pv = true, v
			return
		}
		// Since Go 1.21 panic(nil) panics with *runtime.PanicNilError, so a
		// nil recover means runtime.Goexit.
		r.exiting = c
	}()
	err = c.fn(t)
	if err == nil {
		err = t.ctxErr
	}
	normal = true
	return false, nil, err
}

// noteCommit records how long the last commit took, for DB.more.
func (db *DB) noteCommit(d time.Duration) {
	db.mu.Lock()
	db.lastCommit = d
	db.mu.Unlock()
}

// committed returns the error of a bbolt commit, err, or the one a test
// injects in its place (see hooks.failCommit).
func (db *DB) committed(err error) error {
	if err == nil && db.hooks != nil && db.hooks.failCommit != nil {
		err = db.hooks.failCommit()
	}
	return err
}

// undoCommit takes back the meta page of transaction id, whose commit
// failed, if bbolt wrote it: bbolt writes the meta page before its last
// flush, which may be what failed, and reads the meta page of the highest
// transaction as the state in force, in this process and the next. The
// meta page of the transaction before is written over it. This is a best
// effort: the DB is put in the failed state anyway, and if the disk fails
// for these writes too, the commit's fate is in the disk's hands.
func (db *DB) undoCommit(id int) {
	ps := db.bdb.Info().PageSize
	if _, err := readMeta(db.path, ps, uint64(id)); err != nil {
		return // not written
	}
	prev, err := readMeta(db.path, ps, uint64(id-1))
	if err != nil {
		return
	}
	_ = restoreMeta(db.path, ps, prev)
}
