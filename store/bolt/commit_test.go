package bolt

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/storetest"
)

// blocker makes the group commit deterministic: it starts an Update whose
// fn blocks, so that the calls made meanwhile queue up behind it and run as
// one batch once release is called.
type blocker struct {
	release func()
	done    chan error
}

func block(t *testing.T, db *DB) *blocker {
	t.Helper()
	running, release := make(chan struct{}), make(chan struct{})
	b := &blocker{done: make(chan error, 1)}
	var once sync.Once
	b.release = func() { once.Do(func() { close(release) }) }
	t.Cleanup(b.release)
	go func() {
		b.done <- db.Update(context.Background(), func(tx store.Tx) error {
			close(running)
			<-release
			return tx.Put("b", []byte("blocker"), []byte("v"))
		})
	}()
	<-running
	return b
}

// queued returns how many Update calls wait for the next batch.
func (db *DB) queued() int {
	db.mu.Lock()
	defer db.mu.Unlock()
	return len(db.pending)
}

// enqueue starts fn in a goroutine and waits until it has queued an Update,
// so that calls enqueued one after the other run in that order.
func enqueue(t *testing.T, db *DB, fn func()) {
	t.Helper()
	n := db.queued()
	go fn()
	waitFor(t, func() bool { return db.queued() > n })
}

func TestGroupCommitCoalesces(t *testing.T) {
	db := openTest(t, nil)
	put(t, db, "warm", "up")
	before := db.Stats()

	const writers = 64
	b := block(t, db)
	errs := make(chan error, writers-1)
	for i := range writers - 1 {
		go func() {
			errs <- db.Update(t.Context(), func(tx store.Tx) error {
				return tx.Put("b", fmt.Appendf(nil, "w%02d", i), []byte("v"))
			})
		}()
	}
	waitFor(t, func() bool { return db.queued() == writers-1 })
	b.release()
	require.NoError(t, <-b.done)
	for range writers - 1 {
		require.NoError(t, <-errs)
	}

	st := db.Stats()
	commits := st.Commits - before.Commits
	assert.Equal(t, uint64(writers), st.Updates-before.Updates)
	assert.Less(t, commits, uint64(writers), "concurrent Updates must share commits")
	assert.Equal(t, uint64(2), commits, "the blocker's commit, then one for all the others")
	for i := range writers - 1 {
		v, err := get(t, db, fmt.Sprintf("w%02d", i))
		require.NoError(t, err)
		require.Equal(t, "v", v)
	}
}

func TestGroupCommitSequentialAlone(t *testing.T) {
	db := openTest(t, nil)
	for i := range 10 {
		put(t, db, fmt.Sprint(i), "v")
	}
	st := db.Stats()
	require.Equal(t, uint64(10), st.Commits)
	require.Equal(t, uint64(10), st.Updates)
	require.Zero(t, st.Reruns)

	// An Update that writes nothing costs no commit.
	require.NoError(t, db.Update(t.Context(), func(tx store.Tx) error {
		_, err := tx.Get("b", []byte("1"))
		return err
	}))
	require.Equal(t, uint64(10), db.Stats().Commits)
}

func TestUpdatePanic(t *testing.T) {
	db := openTest(t, nil)
	type boom struct{ n int }

	// Alone: the panic reaches the caller, nothing is written.
	func() {
		defer func() {
			require.Equal(t, boom{1}, recover())
		}()
		_ = db.Update(t.Context(), func(tx store.Tx) error {
			if err := tx.Put("b", []byte("panicked"), []byte("v")); err != nil {
				return err
			}
			panic(boom{1})
		})
		t.Fatal("Update returned")
	}()
	_, err := get(t, db, "panicked")
	require.ErrorIs(t, err, store.ErrNotFound)
	put(t, db, "after", "v")

	// In a batch: the panicking fn runs on the leader's side, but the panic
	// is raised in its caller's goroutine; the others commit.
	before := db.Stats()
	b := block(t, db)
	results := make(chan error, 3)
	write := func(key string) func() {
		return func() {
			results <- db.Update(context.Background(), func(tx store.Tx) error {
				return tx.Put("b", []byte(key), []byte("v"))
			})
		}
	}
	recovered := make(chan any, 1)
	enqueue(t, db, write("w1"))
	enqueue(t, db, func() {
		defer func() { recovered <- recover() }()
		_ = db.Update(context.Background(), func(tx store.Tx) error {
			if err := tx.Put("b", []byte("panicked"), []byte("v")); err != nil {
				return err
			}
			panic(boom{2})
		})
		recovered <- "Update returned"
	})
	enqueue(t, db, write("w2"))
	enqueue(t, db, write("w3"))
	b.release()
	require.NoError(t, <-b.done)
	require.Equal(t, boom{2}, <-recovered)
	for range 3 {
		require.NoError(t, <-results)
	}
	for _, k := range []string{"w1", "w2", "w3", "blocker"} {
		_, err := get(t, db, k)
		require.NoError(t, err, k)
	}
	_, err = get(t, db, "panicked")
	require.ErrorIs(t, err, store.ErrNotFound)
	st := db.Stats()
	require.Equal(t, uint64(1), st.Reruns-before.Reruns, "w1 ran before the panic and again after")
	require.Equal(t, uint64(2), st.Commits-before.Commits)
}

func TestGroupCommitErrors(t *testing.T) {
	db := openTest(t, nil)
	put(t, db, "n", "0")
	errWrote := errors.New("failed after writing")
	errRead := errors.New("failed without writing")

	b := block(t, db)
	type result struct {
		name string
		err  error
	}
	results := make(chan result, 5)
	update := func(name string, fn func(tx store.Tx) error) func() {
		return func() { results <- result{name, db.Update(context.Background(), fn)} }
	}
	var mu sync.Mutex
	runs := map[string]int{}
	count := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		runs[name]++
	}
	enqueue(t, db, update("w1", func(tx store.Tx) error {
		count("w1")
		return tx.Put("b", []byte("w1"), []byte("v"))
	}))
	enqueue(t, db, update("wrote", func(tx store.Tx) error {
		count("wrote")
		if err := tx.Put("b", []byte("wrote"), []byte("v")); err != nil {
			return err
		}
		return errWrote
	}))
	enqueue(t, db, update("read", func(tx store.Tx) error {
		count("read")
		// Sees w1's write: the batch is a serial execution.
		if _, err := tx.Get("b", []byte("w1")); err != nil {
			return err
		}
		return errRead
	}))
	// Its context is cancelled while it is queued: skipped.
	ctx, cancel := context.WithCancel(context.Background())
	enqueue(t, db, func() {
		results <- result{"cancelled", db.Update(ctx, func(tx store.Tx) error {
			count("cancelled")
			return tx.Put("b", []byte("cancelled"), []byte("v"))
		})}
	})
	enqueue(t, db, update("w2", func(tx store.Tx) error {
		count("w2")
		return tx.Put("b", []byte("w2"), []byte("v"))
	}))
	cancel()
	b.release()
	require.NoError(t, <-b.done)
	got := map[string]error{}
	for range 5 {
		r := <-results
		got[r.name] = r.err
	}
	require.NoError(t, got["w1"])
	require.NoError(t, got["w2"])
	require.ErrorIs(t, got["wrote"], errWrote)
	require.ErrorIs(t, got["read"], errRead)
	require.ErrorIs(t, got["cancelled"], context.Canceled)

	for _, k := range []string{"w1", "w2"} {
		_, err := get(t, db, k)
		require.NoError(t, err, k)
	}
	_, err := get(t, db, "wrote")
	require.ErrorIs(t, err, store.ErrNotFound, "partial writes of a failed fn are discarded")
	require.Equal(t, 2, runs["wrote"], "the failing fn is run again alone")
	require.Equal(t, 2, runs["w1"], "w1 ran before the failure and again after")
	require.Equal(t, 1, runs["w2"])
	require.Equal(t, 1, runs["read"], "no rollback for a failure without writes")
	require.Zero(t, runs["cancelled"])
	_, err = get(t, db, "cancelled")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestGroupCommitCancelledWhileQueued(t *testing.T) {
	db := openTest(t, nil)
	b := block(t, db)
	ctx, cancel := context.WithCancel(context.Background())
	var ran sync.Map
	done := make(chan error, 2)
	enqueue(t, db, func() {
		done <- db.Update(ctx, func(tx store.Tx) error {
			ran.Store("cancelled", true)
			return tx.Put("b", []byte("cancelled"), []byte("v"))
		})
	})
	enqueue(t, db, func() {
		done <- db.Update(context.Background(), func(tx store.Tx) error {
			return tx.Put("b", []byte("other"), []byte("v"))
		})
	})
	cancel()
	b.release()
	require.NoError(t, <-b.done)
	errs := []error{<-done, <-done}
	assert.Contains(t, errs, context.Canceled)
	assert.Contains(t, errs, nil)
	_, loaded := ran.Load("cancelled")
	require.False(t, loaded, "a cancelled queued fn is skipped")
	_, err := get(t, db, "cancelled")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = get(t, db, "other")
	require.NoError(t, err)
}

func TestUpdateGoexit(t *testing.T) {
	db := openTest(t, nil)

	// Alone: the goroutine ends (as with t.FailNow), nothing is written,
	// and the DB keeps working (no lock is left held).
	exited := make(chan bool)
	go func() {
		returned := false
		defer func() { exited <- returned }()
		_ = db.Update(context.Background(), func(tx store.Tx) error {
			_ = tx.Put("b", []byte("goexit"), []byte("v"))
			runtime.Goexit()
			return nil
		})
		returned = true
	}()
	require.False(t, <-exited, "Update returned after fn called runtime.Goexit")
	put(t, db, "after", "v")
	_, err := get(t, db, "goexit")
	require.ErrorIs(t, err, store.ErrNotFound)

	// In a batch: the Goexit ends the goroutine of the caller whose fn
	// called it, not the leader's; the others commit.
	b := block(t, db)
	results := make(chan error, 2)
	enqueue(t, db, func() {
		results <- db.Update(context.Background(), func(tx store.Tx) error {
			return tx.Put("b", []byte("w1"), []byte("v"))
		})
	})
	enqueue(t, db, func() {
		returned := false
		defer func() { exited <- returned }()
		_ = db.Update(context.Background(), func(tx store.Tx) error {
			_ = tx.Put("b", []byte("goexit"), []byte("v"))
			runtime.Goexit()
			return nil
		})
		returned = true
	})
	enqueue(t, db, func() {
		results <- db.Update(context.Background(), func(tx store.Tx) error {
			return tx.Put("b", []byte("w2"), []byte("v"))
		})
	})
	b.release()
	require.NoError(t, <-b.done, "the leader is unaffected")
	require.False(t, <-exited)
	require.NoError(t, <-results)
	require.NoError(t, <-results)
	for _, k := range []string{"w1", "w2"} {
		_, err := get(t, db, k)
		require.NoError(t, err, k)
	}
	_, err = get(t, db, "goexit")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// openBench opens a DB with fsync on, the production setting.
func openBench(b *testing.B) *DB {
	b.Helper()
	db, err := Open(b.TempDir()+"/crux.db", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

func benchUpdate(b *testing.B, goroutines int) {
	db := openBench(b)
	storetest.BenchUpdate(b, db, goroutines)
	if st := db.Stats(); st.Commits > 0 {
		b.ReportMetric(float64(st.Updates)/float64(st.Commits), "updates/commit")
	}
}

// BenchmarkUpdateSequential measures durable (fsync) Updates of one small
// record each, from one goroutine.
func BenchmarkUpdateSequential(b *testing.B) { benchUpdate(b, 1) }

// BenchmarkUpdate32Concurrent measures durable (fsync) Updates of one small
// record each, from 32 goroutines: group commit at work.
func BenchmarkUpdate32Concurrent(b *testing.B) { benchUpdate(b, 32) }

// BenchmarkStoretest runs the backend-independent benchmarks.
func BenchmarkStoretest(b *testing.B) {
	storetest.Bench(b, func(b *testing.B) store.Backend { return openBench(b) })
}

// batchOfTwo commits a batch of two calls, c1 and c2, after the blocker's
// commit, and then makes the next leader wait for a second call as long as
// the requeue wait allows (as if that commit had taken two hours).
func batchOfTwo(t *testing.T, db *DB) {
	t.Helper()
	b := block(t, db)
	results := make(chan error, 2)
	for _, k := range []string{"c1", "c2"} {
		enqueue(t, db, func() {
			results <- db.Update(t.Context(), func(tx store.Tx) error { return tx.Put("b", []byte(k), []byte("v")) })
		})
	}
	b.release()
	require.NoError(t, <-b.done)
	require.NoError(t, <-results)
	require.NoError(t, <-results)
	db.mu.Lock()
	require.Equal(t, 2, db.nextBatch)
	db.lastCommit = 2 * time.Hour
	db.mu.Unlock()
}

// TestGroupCommitTakesCallsWhileRunning: after a batch of two, the next
// leader runs its own fn at once instead of first waiting for a second
// call, and a call that queues while that fn runs joins its transaction:
// the two share one commit.
func TestGroupCommitTakesCallsWhileRunning(t *testing.T) {
	db := openTest(t, nil)
	db.mu.Lock()
	db.requeueWait = time.Hour // only the second call ends the wait
	db.mu.Unlock()
	batchOfTwo(t, db)
	commits := db.Stats().Commits

	results := make(chan error, 2)
	running, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	go func() {
		results <- db.Update(t.Context(), func(tx store.Tx) error {
			once.Do(func() { close(running) })
			<-release
			return tx.Put("b", []byte("c3"), []byte("v"))
		})
	}()
	select {
	case <-running:
	case <-time.After(10 * time.Second):
		t.Error("the leader waited for a second call before running its own")
	}
	go func() {
		results <- db.Update(t.Context(), func(tx store.Tx) error { return tx.Put("b", []byte("c4"), []byte("v")) })
	}()
	close(release)
	require.NoError(t, <-results)
	require.NoError(t, <-results)
	assert.Equal(t, commits+1, db.Stats().Commits, "c3 and c4 share a commit")
	for _, k := range []string{"c3", "c4"} {
		v, err := get(t, db, k)
		require.NoError(t, err)
		require.Equal(t, "v", v)
	}
}

// waiting reports whether a leader waits for callers to queue again.
func (db *DB) waiting() bool {
	db.mu.Lock()
	defer db.mu.Unlock()
	return db.fill != nil
}

// TestGroupCommitWaitsForRequeue: after a batch of n calls, the next leader
// waits for n calls to queue before it takes its batch, so callers that
// come back at once share the next commit instead of splitting it; and a
// caller whose previous batch held it alone does not wait at all.
func TestGroupCommitWaitsForRequeue(t *testing.T) {
	db := openTest(t, nil)
	db.mu.Lock()
	db.requeueWait = time.Hour // only the requeue ends the wait
	db.mu.Unlock()

	batchOfTwo(t, db)
	commits := db.Stats().Commits
	results := make(chan error, 2)

	// c3 alone leads and waits until c4 has queued; both share one commit.
	go func() {
		results <- db.Update(t.Context(), func(tx store.Tx) error { return tx.Put("b", []byte("c3"), []byte("v")) })
	}()
	waitFor(t, db.waiting)
	go func() {
		results <- db.Update(t.Context(), func(tx store.Tx) error { return tx.Put("b", []byte("c4"), []byte("v")) })
	}()
	require.NoError(t, <-results)
	require.NoError(t, <-results)
	assert.Equal(t, commits+1, db.Stats().Commits, "c3 and c4 share a commit")

	// Callers one at a time: the first waits at most half of the short
	// commit before it for a second caller, then each runs alone at once
	// (an hour's wait would time the test out).
	for i := range 3 {
		put(t, db, fmt.Sprint("alone", i), "v")
	}
	assert.Equal(t, commits+4, db.Stats().Commits)
	assert.False(t, db.waiting())
}

// TestGroupCommitWaitsForCallers: the next batch waits for as many calls
// as there are callers in Update when a batch ends, when they are more
// than the batch held (callers queued during its commit, or come back
// late), and for as many as it held otherwise.
func TestGroupCommitWaitsForCallers(t *testing.T) {
	db := openTest(t, nil)
	calls := []*call{{done: make(chan struct{})}, {done: make(chan struct{})}}
	for _, tc := range []struct{ callers, want int }{{5, 5}, {1, 2}, {0, 2}} {
		db.mu.Lock()
		db.leading = true
		db.mu.Unlock()
		db.callers.Store(int64(tc.callers))
		db.handoff(&batch{calls: calls})
		db.mu.Lock()
		assert.Equal(t, tc.want, db.nextBatch, "%d callers after a batch of %d", tc.callers, len(calls))
		assert.False(t, db.leading, "no call queued: leadership ends")
		db.mu.Unlock()
	}
	db.callers.Store(0)
}
