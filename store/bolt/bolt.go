// Package bolt is crux's reference storage backend: a [store.Backend] on a
// single bbolt (go.etcd.io/bbolt) file.
//
// Each store bucket is a top-level bbolt bucket, created by the first Put
// into it. Reads run in bbolt read-only transactions and may run in parallel
// with each other and with a writer.
//
// # Group commit
//
// bbolt allows one writer at a time, and with fsync on (the default) every
// commit costs at least one disk flush. [DB.Update] therefore commits
// concurrent callers together: the first caller to find no commit in progress
// becomes the leader and runs every queued fn (up to 256) in one bbolt
// read-write transaction, each fn with its own [store.Tx] and its own context,
// then commits once. Callers arriving while it runs them join the batch;
// those arriving during its commit queue up for the next batch, which is led
// by the first of them. A caller alone pays no extra latency:
// there is no batching delay.
//
// Batches stay full: a batch's callers are woken only once it has
// committed, so the next leader starts at once with the calls queued, runs
// those that queue while it runs them in the same transaction, and before
// its commit waits until the batch holds as many calls as the previous one
// held, but never longer than half the previous commit took, nor than a
// millisecond. Without this, concurrent callers split into two groups
// taking turns at half the batch size. A leader whose previous batch held
// one call never waits.
//
// Semantics are those of a serial execution of the fns in queue order:
//
//   - If an fn returns an error after writing, the whole transaction is
//     rolled back, that fn is run again alone (so the error it returns is the
//     one it gets in a transaction of its own, and its partial writes are
//     discarded) and the other fns are run again as a batch. An fn that
//     returns an error without having written anything does not force a
//     rollback; it receives its error once the batch has committed. This is
//     why Update's fn may run more than once (see package store).
//   - If an fn panics, nothing it wrote is committed and the panic is
//     re-raised, with the same value, in the goroutine that called Update; the
//     other fns of the batch are unaffected. The same holds for
//     runtime.Goexit (as called by testing.T.FailNow).
//   - Once queued, a call is waited for even if its context is cancelled
//     meanwhile, so Update never reports failure for a write that committed.
//     The leader checks each fn's context before running it and skips fns
//     whose context is done.
//   - A commit error is returned to every fn of the failed batch: one
//     flush covers the whole batch, so all its calls share one verdict, and
//     the stored state agrees with it (see "When the disk fails").
//
// # Durability and locking
//
// By default every commit is on disk before Update returns; [Options.NoSync]
// turns this off for tests and benchmarks only.
//
// A commit is made durable by a write-ahead log beside the file (path +
// ".wal"): bbolt writes the commit's pages without flushing them, and the
// commit's changes are appended to the log, which is flushed once (one
// fdatasync, where a flushed bbolt commit costs two). A checkpoint flushes
// the file and starts the log afresh; until the next one, the pages of the
// checkpoint's state are kept from reuse, so that a power loss leaves them
// intact. The next comes once the commits since (16 at least) have freed
// 256 such pages (about a hundred lone commits), or logged a megabyte. Open
// applies the log of a database that was not closed cleanly: it brings
// back the checkpoint's state and replays the commits logged since. Close
// flushes the file and marks the log clean. Keep the log with the file:
// copy, move or back up the two together. [Options.NoWAL] turns the log
// off; commits then flush the file themselves. If writing the log fails,
// the file is flushed, the log removed, and commits flush the file from
// then on (the commit whose record failed is then durable in the file,
// and Update returns nil for it). bbolt maps 1 GiB of address space (no memory) up front on 64-bit
// systems other than Windows, so that a commit seldom has to remap the
// file while the checkpoint's pages are held.
//
// The list of free pages is not written with each commit (bbolt's
// NoFreelistSync): that saves a page or more per commit. [DB.Close] writes
// it once, and an Open after a clean Close reads it; an Open after a crash
// rebuilds it by walking the pages in use, which costs about 70 ms per
// hundred megabytes of file (0.5 s at a million facts) and touches every
// page. A crash can therefore never leave a stale freelist behind; files
// written either way open either way. The pages of the file that reads
// touch stay mapped into the process; the DB drops them from its resident
// memory after Open and whenever they exceed 128 MiB (see mapped.go).
//
// # When the disk fails
//
// An Update returns nil exactly when its commit is durable: its record
// flushed to the log (or, without the log, the file flushed by bbolt, or
// by the fallback above). An Update that fails has stored nothing: its
// commit is not in the log (a record whose write or flush failed has its
// header zeroed, so that no Open replays it), and the changes bbolt wrote
// to the file are discarded by the next Open, which brings back the
// checkpoint's state before replaying the log (without the log, the
// failed commit's meta page is overwritten with the one before). A View
// never sees a commit that is not yet durable: it waits for the commit's
// flush, and fails if the commit does.
//
// A commit that bbolt could not write for want of space (ENOSPC or EDQUOT
// from a write or a growth of the file) is refused and the DB goes on: such
// a write left nothing in the page cache, and bbolt writes its meta page
// last, so the file still holds the state before it. A full disk thus
// refuses writes, clearly, until space is freed, without a reopen.
//
// After any other failed write, or a failed flush, of the file or the log, the operating
// system's page cache can no longer be trusted: a page whose write-back
// failed may be dropped, or kept and reported flushed by a later fsync
// that never wrote it (PostgreSQL's "fsyncgate", 2018). So the DB does not
// retry: it goes into the failed state, in which every View, Update and
// Compact fails with an error wrapping [ErrFailed] that says to reopen the
// store, and Close neither flushes the file nor marks the log clean. The
// next [Open] recovers from the disk: every commit Update returned nil for
// is there, and no commit whose Update failed. (A failed flush of the log
// whose record the fallback above makes durable does not count: that
// Update returns nil and the DB goes on.) The guarantee for a refused
// commit holds as long as the disk takes the zeroes written over its
// record, or never took the record: if writes fail too from the moment a
// record's flush failed, a commit refused may come back at the next Open.
//
// While a DB
// is open, a lock file beside it (path + ".lock", never renamed) and the
// database file itself are locked with flock(2), so a second [Open] of the
// same file, by this or another process, fails with [ErrLocked] after
// [Options.LockTimeout] instead of corrupting it; [DB.Compact] replaces the
// database file without ever letting another process open the old one.
//
// As with bbolt itself, a commit that has to grow the memory map waits for
// all read transactions to end: keep Views short, and do not call Update
// from inside a View's fn, nor Update from inside an Update's fn (either may
// wait for itself forever).
//
// # Staged buckets
//
// A commit writes every page on the path from each leaf it changed up to
// its bucket's root. The buckets that [store.StagedIndexes] names, whose
// keys land anywhere, therefore take their writes in a small bucket of
// their own first, one page, and receive them together, sorted, once it
// has grown past a few kilobytes; reads see the two as one bucket (see
// stage.go).
package bolt

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/crux-go/crux/store"
)

// DefaultLockTimeout is how long [Open] waits for the file lock when
// [Options.LockTimeout] is zero.
const DefaultLockTimeout = time.Second

// fileMode is the permission of a database file created by Open.
const fileMode fs.FileMode = 0o600

// ErrLocked reports that the database file is locked by another open DB, in
// this or another process. [Open] returns an error wrapping it that names the
// file and how long Open waited; test for it with errors.Is.
var ErrLocked = errors.New("store/bolt: database file is locked by another process")

// ErrNeedsRecovery reports that a database opened read-only was not closed
// cleanly: its write-ahead log holds commits that only a read-write [Open]
// can apply. [Open] returns an error wrapping it that names the files; test
// for it with errors.Is.
var ErrNeedsRecovery = errors.New("store/bolt: database was not closed cleanly")

// ErrFailed reports that the DB is in the failed state: a write or flush of
// the database file or its write-ahead log failed, the DB can no longer
// trust what the operating system's page cache holds of them, and so it
// serves nothing more: every View, Update and Compact fails with an error
// wrapping ErrFailed (and the I/O error), until the DB is closed and opened
// again, which recovers every acknowledged commit from the files (see the
// package documentation, "When the disk fails"). Test for it with errors.Is.
var ErrFailed = errors.New("store/bolt: the database failed and must be reopened")

// failedError is the error of a DB in the failed state.
type failedError struct {
	path  string
	what  string // what failed, such as "flush the database file"
	cause error
}

func (e *failedError) Error() string {
	return fmt.Sprintf("store/bolt: %s: %s: %v; the store reads and writes nothing more until it is reopened: "+
		"restart the server (or Close the DB and Open it again), which recovers every write that was acknowledged", e.path, e.what, e.cause)
}

func (e *failedError) Unwrap() []error { return []error{ErrFailed, e.cause} }

// lockedError is the error Open returns when the file lock is not obtained.
type lockedError struct {
	path   string
	waited time.Duration
}

func (e *lockedError) Error() string {
	return fmt.Sprintf("store/bolt: %s is in use by another process (waited %s)", e.path, e.waited)
}

func (e *lockedError) Unwrap() error { return ErrLocked }

// Options configures [Open]. A nil *Options is the same as a zero Options,
// and the zero value of every field is the production setting.
type Options struct {
	// LockTimeout is how long Open waits for the file lock while another
	// DB, in this or another process, has the file open. Zero means
	// DefaultLockTimeout (1s); a negative value means do not wait.
	LockTimeout time.Duration

	// NoSync skips the fsync of each commit. Zero (false) flushes every
	// commit to disk before Update returns, which is the only setting that
	// makes a successful Update durable. NoSync is meant for tests and
	// benchmarks: after an OS crash or power loss a NoSync database may lose
	// recent commits or be corrupt.
	NoSync bool

	// ReadOnly opens the file read-only with a shared lock, so several
	// read-only DBs may have it open at once (but not together with a
	// writable one). Update then fails with an error wrapping
	// store.ErrReadOnly. The file must exist. Zero (false) opens it
	// read-write, creating it if needed.
	ReadOnly bool

	// NoWAL turns the write-ahead log off: each commit then flushes the
	// database file itself, which costs two fdatasyncs instead of one (see
	// the package documentation). The log is off also with NoSync or
	// ReadOnly. A log left by a database that was not closed cleanly is
	// applied by Open whatever the options, except ReadOnly.
	NoWAL bool

	hooks *hooks // tests only
}

// DB is a [store.Backend] on a bbolt file. It is safe for concurrent use.
// Create it with [Open] and release it with [DB.Close].
type DB struct {
	bdb      *bbolt.DB
	path     string
	readOnly bool

	lock *os.File // the lock file, held while the DB is open; nil where unsupported

	// gate is held shared by every View and Update for its whole duration,
	// and exclusively by Compact and Close while they switch or close files.
	gate sync.RWMutex

	mu      sync.Mutex
	closed  bool
	pending []*call // queued Update calls, in arrival order
	leading bool    // a goroutine leads the group commit

	callers     atomic.Int64  // Update calls in progress
	nextBatch   int           // calls the next batch waits for (see DB.more)
	lastCommit  time.Duration // how long the last commit took
	fill        chan struct{} // closed when a call queues; nil when no leader waits for one
	requeueWait time.Duration // maxRequeueWait, but for tests

	inflight  sync.WaitGroup // View and Update calls in progress
	closeOnce sync.Once
	closeErr  error

	wal        *wal                        // the write-ahead log; nil when commits flush the file themselves
	hooks      *hooks                      // tests only
	broken     atomic.Pointer[failedError] // the failed state (see DB.fail): View and Update fail
	pinMu      sync.Mutex
	pin        *bbolt.Tx     // read transaction on the state of the log's checkpoint
	committing bool          // a commit is running (see DB.watchCommit)
	pinTimer   *time.Timer   // drops the pin when a commit runs too long
	logBuf     []byte        // the last commit's record buffer, for the next
	trimDone   chan struct{} // closed by Close: keepTrimmed returns (see mapped.go)

	// durable is the last transaction known to be durable. bbolt shows a
	// commit to readers once it has written it, before it is durable
	// (before its record is flushed to the log): a View that would see a
	// commit not yet durable waits until it is, or until it fails, so
	// that no View ever sees a write whose Update then fails.
	durableMu   sync.Mutex
	durableCond sync.Cond // signalled when durable grows or the DB fails
	durable     atomic.Uint64

	stats struct {
		updates, commits, reruns, pages, checkpoints atomic.Uint64
	}
}

var (
	_ store.Backend      = (*DB)(nil)
	_ store.AppendHinter = (*tx)(nil)
	_ store.Seeker       = (*tx)(nil)
)

// Open opens the bbolt database at path, creating the file (mode 0600) if it
// does not exist unless opts.ReadOnly is set. The parent directory must
// exist. opts may be nil for the defaults.
//
// If the file is held by another DB, Open waits up to opts.LockTimeout and
// then returns an error wrapping [ErrLocked].
func Open(path string, opts *Options) (*DB, error) {
	if opts == nil {
		opts = &Options{}
	}
	if path == "" {
		return nil, errors.New("store/bolt: open: empty path")
	}
	if err := checkDir(path); err != nil {
		return nil, err
	}

	timeout := opts.waited()
	if timeout == 0 {
		// bbolt treats 0 as "wait forever"; the smallest positive timeout
		// makes it try exactly once.
		timeout = time.Nanosecond
	}
	// The lock file (path.lock) is never renamed, unlike the database file,
	// which Compact replaces: a process waiting for it never ends up holding
	// a file that is no longer the database.
	lock, err := lockFile(path+".lock", !opts.ReadOnly, timeout)
	if errors.Is(err, errLockTimeout) {
		return nil, &lockedError{path: path, waited: opts.waited()}
	}
	if err != nil {
		return nil, fmt.Errorf("store/bolt: open %s: lock: %w", path, err)
	}
	if !opts.ReadOnly {
		if err := removeCompactCopies(path); err != nil {
			unlockFile(lock)
			return nil, fmt.Errorf("store/bolt: open %s: removing an interrupted compaction's copy: %w", path, err)
		}
	}
	w, replay, err := prepareLog(path, opts)
	if err != nil {
		unlockFile(lock)
		if errors.Is(err, ErrNeedsRecovery) {
			return nil, err
		}
		return nil, fmt.Errorf("store/bolt: open %s: %w", path, err)
	}
	bdb, err := bbolt.Open(path, fileMode, opts.bboltOptions(timeout, w != nil))
	if err == nil {
		bdb.AllocSize = allocSize
	}
	if err != nil {
		w.close()
		unlockFile(lock)
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, &lockedError{path: path, waited: opts.waited()}
		}
		return nil, fmt.Errorf("store/bolt: open %s: %w", path, err)
	}
	db := &DB{bdb: bdb, path: path, readOnly: opts.ReadOnly, lock: lock, requeueWait: maxRequeueWait, hooks: opts.hooks}
	db.durableCond.L = &db.durableMu
	if err := db.startLog(w, replay, opts); err != nil {
		db.setPin(nil)
		w.close()
		_ = bdb.Close()
		unlockFile(lock)
		return nil, err
	}
	db.resetDurable()
	db.trimMapped(-1) // Open's walk of the file touched every page
	db.trimDone = make(chan struct{})
	go db.keepTrimmed(db.trimDone)
	return db, nil
}

// checkDir refuses a path whose directory does not exist or is not a
// directory.
func checkDir(path string) error {
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("store/bolt: open %s: directory %s does not exist: %w", path, dir, err)
		}
		return fmt.Errorf("store/bolt: open %s: %w", path, err)
	} else if !fi.IsDir() {
		return fmt.Errorf("store/bolt: open %s: %s is not a directory", path, dir)
	}
	return nil
}

// bboltOptions is the options Open opens the file with, waiting timeout for its
// lock; logged says whether Open holds a write-ahead log, whose commits,
// unless the store is opened NoSync or NoWAL, want the file mapped large
// from the start.
func (o *Options) bboltOptions(timeout time.Duration, logged bool) *bbolt.Options {
	bopts := &bbolt.Options{
		Timeout:        timeout,
		NoSync:         o.NoSync,
		ReadOnly:       o.ReadOnly,
		FreelistType:   bbolt.FreelistMapType,
		NoFreelistSync: true, // rebuilt on open; see the package doc
	}
	if logged && !o.NoSync && !o.NoWAL {
		bopts.InitialMmapSize = logMmapSize()
		if o.hooks != nil && o.hooks.mmapSize > 0 {
			bopts.InitialMmapSize = o.hooks.mmapSize
		}
	}
	return bopts
}

// waited is how long Open waits for the lock, as a locked error reports
// it: DefaultLockTimeout when LockTimeout is 0, none when it is negative.
func (o *Options) waited() time.Duration {
	waited := o.LockTimeout
	if waited == 0 {
		waited = DefaultLockTimeout
	} else if waited < 0 {
		waited = 0
	}
	return waited
}

// allocSize is how much bbolt grows the file by, past the data it holds,
// once the file is over that size (below it bbolt doubles the file). Its
// default, 16 MiB, leaves up to 16 MiB of the file unused; 1 MiB costs a
// file extension (and its sync) per 256 new pages instead of per 4,096.
const allocSize = 1 << 20

// Path returns the path the DB was opened with.
func (db *DB) Path() string { return db.path }

// acquire registers a View or Update call, failing once Close has begun.
func (db *DB) acquire() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return fmt.Errorf("store/bolt: %s: %w", db.path, store.ErrClosed)
	}
	if err := db.failure(); err != nil {
		return err
	}
	db.inflight.Add(1)
	return nil
}

// failure returns the error of the failed state, or nil if the DB is not
// in it.
func (db *DB) failure() error {
	if f := db.broken.Load(); f != nil {
		return f
	}
	return nil
}

// resetDurable records the current state of db.bdb as durable: at Open,
// and when Compact has switched files. Should bbolt fail to begin a
// transaction, every state is taken as durable: Views never wait.
func (db *DB) resetDurable() {
	id := uint64(math.MaxUint64)
	if btx, err := db.bdb.Begin(false); err == nil {
		id = uint64(btx.ID())
		_ = btx.Rollback()
	}
	db.durableMu.Lock()
	db.durable.Store(id)
	db.durableMu.Unlock()
}

// setDurable records that the commit of transaction id is durable.
func (db *DB) setDurable(id uint64) {
	db.durableMu.Lock()
	db.durable.Store(id)
	db.durableCond.Broadcast()
	db.durableMu.Unlock()
}

// waitDurable waits until the commit of transaction id is durable, and
// returns the error of the failed state if the DB fails first.
func (db *DB) waitDurable(id uint64) error {
	if db.durable.Load() >= id {
		return nil
	}
	db.durableMu.Lock()
	defer db.durableMu.Unlock()
	for db.durable.Load() < id {
		if err := db.failure(); err != nil {
			return err
		}
		db.durableCond.Wait()
	}
	return nil
}

// fail puts the DB in the failed state, if it is not in it already, and
// returns the state's error: what failed and its cause are the first
// failure's. From then on View, Update and Compact fail; Close neither
// flushes the file nor marks the log clean, so that the next Open recovers
// from the files as they are on disk. Only the writer calls it.
func (db *DB) fail(what string, cause error) error {
	db.broken.CompareAndSwap(nil, &failedError{path: db.path, what: what, cause: cause})
	db.durableMu.Lock()
	db.durableCond.Broadcast()
	db.durableMu.Unlock()
	return db.failure()
}

// View runs fn in a read-only bbolt transaction; see [store.Backend.View].
// It returns ctx.Err() without running fn if ctx is already done. Values
// passed out by the Tx point into the memory-mapped file and are valid only
// until fn returns.
func (db *DB) View(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.inflight.Done()
	db.gate.RLock()
	defer db.gate.RUnlock()

	btx, err := db.bdb.Begin(false)
	if err != nil {
		return fmt.Errorf("store/bolt: begin read transaction: %w", err)
	}
	defer func() { _ = btx.Rollback() }()
	if err := db.waitDurable(uint64(btx.ID())); err != nil {
		return err
	}

	t := &tx{ctx: ctx, btx: btx}
	defer t.end()
	err = fn(t)
	if err == nil {
		err = t.ctxErr
	}
	return err
}

// Update runs fn in a read-write transaction and commits it when fn returns
// nil; see [store.Backend.Update] and the package documentation for the
// group commit. fn may run more than once and must have no side effects
// outside the transaction. Update returns ctx.Err() without running fn if
// ctx is already done, and the context's error if fn touches the Tx after
// ctx was cancelled (the transaction is then rolled back, even if fn ignores
// that error and returns nil).
//
// If fn panics, Update panics with the same value in the calling goroutine
// and nothing fn wrote is committed. When fn ran in a batch that could take
// other callers' fns (after a batch of several), the re-raised panic's stack
// trace starts in Update, not in fn. fn must not call Update on the same DB:
// it would wait for itself.
//
// With the default options Update returns only after the commit is on disk.
func (db *DB) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if db.readOnly {
		return fmt.Errorf("store/bolt: %s was opened read-only: %w", db.path, store.ErrReadOnly)
	}
	if err := db.failure(); err != nil {
		return err
	}
	c := &call{ctx: ctx, fn: fn, done: make(chan struct{})}

	db.gate.RLock()
	defer db.gate.RUnlock()
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return fmt.Errorf("store/bolt: %s: %w", db.path, store.ErrClosed)
	}
	db.inflight.Add(1)
	defer db.inflight.Done()
	db.callers.Add(1)
	defer db.callers.Add(-1)
	db.pending = append(db.pending, c)
	if db.fill != nil {
		close(db.fill)
		db.fill = nil
	}
	first := !db.leading
	if first {
		db.leading = true
		c.lead = true
	}
	db.mu.Unlock()

	if !first {
		// Either our result, or the leadership of the next batch: the
		// leader handing over sets c.lead before closing c.done.
		<-c.done
	}
	if c.lead {
		db.lead(c)
	}
	switch {
	case c.goexit:
		runtime.Goexit()
	case c.panicked:
		panic(c.panicVal)
	}
	if c.err == nil {
		db.stats.updates.Add(1)
	}
	return c.err
}

// Close waits for the View and Update calls in progress, writes the list of
// free pages (so that the next Open need not rebuild it), flushes and
// closes the file, marks the log clean and releases the lock. Calls made once Close has begun fail with an
// error wrapping [store.ErrClosed]. Close is idempotent: later calls wait for
// the first to finish and return nil. Close must not be called from inside a
// transaction function, which it would wait for forever.
func (db *DB) Close() error {
	first := false
	db.closeOnce.Do(func() {
		first = true
		close(db.trimDone)
		db.mu.Lock()
		db.closed = true
		db.mu.Unlock()
		db.inflight.Wait()
		db.gate.Lock() // a Compact in progress finishes first
		defer db.gate.Unlock()
		var errs []error
		errs = append(errs, db.saveFreelist())
		if db.wal != nil {
			errs = append(errs, db.closeLog(), db.wal.close())
		}
		if err := db.bdb.Close(); err != nil {
			errs = append(errs, fmt.Errorf("store/bolt: close %s: %w", db.path, err))
		}
		db.closeErr = errors.Join(errs...)
		unlockFile(db.lock)
	})
	if first {
		return db.closeErr
	}
	return nil
}

// Stats are cumulative counters of a DB since [Open]. They show how well
// group commit coalesces writes: Updates/Commits is the average batch size.
type Stats struct {
	// Updates is the number of Update calls that returned nil.
	Updates uint64
	// Commits is the number of bbolt read-write transactions committed, each
	// costing one round of fsync unless Options.NoSync is set.
	Commits uint64
	// Reruns is the number of fn executions that were rolled back because
	// another fn of their batch failed or panicked, and so were run again.
	Reruns uint64
	// PageWrites is the number of writes the commits made to the file, as
	// bbolt counts them: one per page, a run of overflow pages counting
	// once, and one for the meta page of each commit.
	PageWrites uint64
	// Checkpoints is the number of times the database file was flushed and
	// the write-ahead log started afresh, Open's included.
	Checkpoints uint64
}

// Stats returns the DB's counters. It may be called at any time, also after
// Close.
func (db *DB) Stats() Stats {
	return Stats{
		Updates:     db.stats.updates.Load(),
		Commits:     db.stats.commits.Load(),
		Reruns:      db.stats.reruns.Load(),
		PageWrites:  db.stats.pages.Load(),
		Checkpoints: db.stats.checkpoints.Load(),
	}
}
