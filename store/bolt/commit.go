package bolt

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/crux-go/crux/store"
)

// maxBatch caps the number of Update calls committed in one transaction.
const maxBatch = 256

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

// lead runs the batch at the head of the queue, which starts with self, then
// hands leadership to the first call queued meanwhile, if any. The caller
// reads self's result when lead returns.
func (db *DB) lead(self *call) {
	db.mu.Lock()
	db.awaitRequeue()
	n := min(len(db.pending), maxBatch)
	batch := make([]*call, n)
	copy(batch, db.pending)
	rest := copy(db.pending, db.pending[n:])
	clear(db.pending[rest:])
	db.pending = db.pending[:rest]
	db.mu.Unlock()
	if n == 0 || batch[0] != self {
		panic("store/bolt: internal error: the group commit leader is not at the head of the queue")
	}
	db.lastBatch = n

	// Runs also when self's own fn calls runtime.Goexit on this goroutine.
	defer db.handoff()

	if n == 1 {
		// Alone: run inline, on the caller's goroutine, at no extra cost.
		// A panic or Goexit of fn then happens on the right goroutine: let
		// it unwind as it is, with its original stack trace.
		db.execute(batch, true)
		return
	}
	// Other callers' fns are run on a goroutine of their own, so that a
	// runtime.Goexit in one of them cannot end this caller's goroutine. A
	// Goexit leaves the calls after it unfinished: run them again.
	for len(batch) > 0 {
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			db.execute(batch, false)
		}()
		<-ended
		unfinished := batch[:0]
		for _, c := range batch {
			if !c.finished {
				unfinished = append(unfinished, c)
			}
		}
		batch = unfinished
	}
}

// maxRequeueWait bounds how long a leader waits for the callers of the
// previous batch to queue again (see awaitRequeue). Tests may lengthen it
// through DB.requeueWait.
const maxRequeueWait = time.Millisecond

// awaitRequeue keeps batches full. Leadership passes as soon as a batch has
// committed, when its callers have only just been woken: without waiting,
// the next batch would hold only the calls that arrived during the commit,
// and concurrent callers would split into two groups taking turns, each
// paying a commit for half of them. So when fewer calls are queued than the
// previous batch held, the leader waits for that many, but no longer than
// half of the previous commit took, and at most maxRequeueWait. A caller
// alone never waits: its previous batch held one call. db.mu is held on
// entry and on return, and released while waiting.
func (db *DB) awaitRequeue() {
	want := min(db.lastBatch, maxBatch)
	if want <= 1 || len(db.pending) >= want {
		return
	}
	wait := min(db.lastCommit/2, db.requeueWait)
	if wait <= 0 {
		return
	}
	fill := make(chan struct{})
	db.fill, db.fillWant = fill, want
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

// handoff passes leadership to the head of the queue, or ends it.
func (db *DB) handoff() {
	db.mu.Lock()
	defer db.mu.Unlock()
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
	btx     *bbolt.Tx // open read-write transaction, if any
	exiting *call     // call whose fn called runtime.Goexit
	ok      bool      // execute returned normally
	inline  bool      // running the leader's own call, on its goroutine
}

// execute runs calls until every one of them has a final result, unless a
// fn calls runtime.Goexit: then that call is finished as such, the open
// transaction is rolled back and the calls not yet finished are left so.
// With inline set, calls is the caller's own call alone, and a panic or
// Goexit of its fn is not intercepted: the transaction is rolled back and
// the goroutine unwinds.
func (db *DB) execute(calls []*call, inline bool) {
	r := &runner{db: db, inline: inline}
	defer r.cleanup()
	for len(calls) > 0 {
		var failed *call
		calls, failed = r.attempt(calls)
		if failed != nil {
			r.attempt([]*call{failed})
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

// attempt runs calls in one read-write transaction and commits it. It
// returns the calls that must run again because the transaction was rolled
// back, and, when an fn failed after writing, that call, to be run alone.
// Every other call has its final result when attempt returns.
func (r *runner) attempt(calls []*call) (retry []*call, failed *call) {
	btx, err := r.db.bdb.Begin(true)
	if err != nil {
		err = fmt.Errorf("store/bolt: begin write transaction: %w", err)
		for _, c := range calls {
			c.finish(err)
		}
		return nil, nil
	}
	r.btx = btx
	w := &writeState{}
	ran := make([]*call, 0, len(calls)) // ran in btx; final result depends on the commit
	writes := 0
	for i, c := range calls {
		if err := c.ctx.Err(); err != nil {
			c.finish(err)
			continue
		}
		t := &tx{ctx: c.ctx, btx: btx, w: w}
		err, panicked, pv := r.run(c, t)
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
	start := time.Now()
	err = btx.Commit() // rolls back by itself on failure
	r.db.noteCommit(time.Since(start))
	r.btx = nil
	st := btx.Stats()
	r.db.stats.pages.Add(uint64(st.GetWrite()))
	if err != nil {
		err = fmt.Errorf("store/bolt: commit: %w", err)
		for _, c := range ran {
			c.finish(err)
		}
		return nil, nil
	}
	r.db.stats.commits.Add(1)
	for _, c := range ran {
		c.finish(c.tentative)
	}
	return nil, nil
}

// run calls c.fn, recovering a panic unless inline. A runtime.Goexit cannot
// be stopped: run records it for cleanup and lets the goroutine end.
func (r *runner) run(c *call, t *tx) (err error, panicked bool, pv any) {
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
	return err, false, nil
}

// noteCommit records how long the last commit took, for awaitRequeue.
func (db *DB) noteCommit(d time.Duration) {
	db.mu.Lock()
	db.lastCommit = d
	db.mu.Unlock()
}
