package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.etcd.io/bbolt"

	"github.com/crux-go/crux/store"
)

var _ store.Compacter = (*DB)(nil)

// compactTxBytes bounds the data copied per write transaction of the new
// file, so that compacting a large database does not hold it all in memory.
const compactTxBytes = 64 << 20

// Compact rewrites the database into a fresh file holding only its live
// data, then puts that file in place of the old one: the pages bbolt had
// freed (which still hold the bytes of deleted and overwritten values, such
// as purged facts) are gone from the file. It implements [store.Compacter].
//
// Steps: the live data is copied into a new file next to the database
// (mode 0600, locked like the database itself), which is flushed to disk
// (fsync), renamed over the database file, and the directory is flushed; the
// DB then continues on the new file and closes the old one. The new file is
// locked before it takes the database's name, so another process never
// finds the database unlocked. Should any step before the rename fail, the
// new file is removed and the database is left as it was.
//
// Compact first takes the lead of the group commit, queueing ahead of the
// Update calls waiting for the batch in progress, if any; it runs the calls
// that were queued before it, then waits for the Views in progress to end.
// From then until it returns, every View and Update call waits, as does
// Close: none fails, and none sees the files being switched. Compact returns
// ctx.Err() if ctx ends before it has the lead; the copy itself is not
// interrupted by ctx. Compact fails on a read-only DB (an error wrapping
// store.ErrReadOnly) and after Close (store.ErrClosed). It must not be
// called from inside a transaction function, which it would wait for
// forever.
func (db *DB) Compact(ctx context.Context) error {
	if db.readOnly {
		return fmt.Errorf("store/bolt: compact %s: opened read-only: %w", db.path, store.ErrReadOnly)
	}
	if err := db.takeLead(ctx); err != nil {
		return err
	}
	// db.mu is held and Compact leads: no batch runs. Update calls that
	// queued meanwhile are in the inflight count and wait for a leader, so
	// run them now; later ones wait for db.mu before they can register.
	queued := db.pending
	db.pending = nil
	db.runQueued(queued)
	defer func() {
		db.leading = false // the queue is empty: the next Update leads
		db.mu.Unlock()
	}()
	if db.closed {
		return fmt.Errorf("store/bolt: compact %s: %w", db.path, store.ErrClosed)
	}
	// What remains in flight are Views, which do not take db.mu again, and
	// Update calls about to return: waiting for them cannot deadlock.
	db.inflight.Wait()
	return db.compactLocked()
}

// takeLead makes the caller the leader of the group commit and returns
// with db.mu held. With no batch in progress it takes the lead at once;
// otherwise it queues a barrier at the head of the queue, which the
// running leader hands the lead to when its batch is done (a barrier is
// never run as part of a batch: leaders take their batch when they start,
// and the barrier is queued only after that).
func (db *DB) takeLead(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		db.mu.Lock()
		if db.closed {
			db.mu.Unlock()
			return fmt.Errorf("store/bolt: compact %s: %w", db.path, store.ErrClosed)
		}
		if !db.leading {
			db.leading = true
			return nil
		}
		if len(db.pending) > 0 && db.pending[0].lead {
			// A leader has been named but has not taken its batch yet,
			// which the barrier would then be part of: let it start.
			db.mu.Unlock()
			time.Sleep(20 * time.Microsecond)
			continue
		}
		barrier := &call{ctx: ctx, done: make(chan struct{})}
		db.pending = append([]*call{barrier}, db.pending...)
		db.mu.Unlock()

		select {
		case <-barrier.done:
		case <-ctx.Done():
		}
		db.mu.Lock()
		i := slices.Index(db.pending, barrier)
		if i >= 0 {
			db.pending = slices.Delete(db.pending, i, i+1)
		}
		if barrier.lead {
			if ctx.Err() == nil {
				return nil
			}
			db.mu.Unlock()
			db.handoff() // we were handed the lead and no longer want it
			return ctx.Err()
		}
		db.mu.Unlock()
		return ctx.Err()
	}
}

// runQueued runs queued Update calls in batches as a leader would, on a
// goroutine of their own so that a runtime.Goexit in one of them cannot end
// the caller's goroutine (see DB.lead). Their callers get their results.
func (db *DB) runQueued(calls []*call) {
	for len(calls) > 0 {
		batch := calls[:min(len(calls), maxBatch)]
		calls = calls[len(batch):]
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
}

// compactLocked does the work of Compact; db.mu is held and nothing else
// uses db.bdb.
func (db *DB) compactLocked() (err error) {
	src := db.bdb
	dir := filepath.Dir(db.path)
	f, err := os.CreateTemp(dir, filepath.Base(db.path)+".compact-*")
	if err != nil {
		return fmt.Errorf("store/bolt: compact %s: %w", db.path, err)
	}
	tmp := f.Name()
	if err := f.Close(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("store/bolt: compact %s: %w", db.path, err)
	}
	dst, err := bbolt.Open(tmp, fileMode, &bbolt.Options{
		Timeout:        time.Second,
		NoSync:         true, // one fsync at the end instead of one per copy transaction
		NoGrowSync:     src.NoGrowSync,
		NoFreelistSync: src.NoFreelistSync,
		FreelistType:   src.FreelistType,
	})
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("store/bolt: compact %s: open %s: %w", db.path, tmp, err)
	}
	renamed := false
	defer func() {
		if !renamed {
			_ = dst.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err := bbolt.Compact(dst, src, compactTxBytes); err != nil {
		return fmt.Errorf("store/bolt: compact %s: copy: %w", db.path, err)
	}
	if err := dst.Sync(); err != nil {
		return fmt.Errorf("store/bolt: compact %s: sync: %w", db.path, err)
	}
	if err := os.Rename(tmp, db.path); err != nil {
		return fmt.Errorf("store/bolt: compact %s: rename: %w", db.path, err)
	}
	// From here on the database is the new file, whatever else fails.
	renamed = true
	dst.NoSync = src.NoSync
	db.bdb = dst
	var errs []error
	if err := syncDir(dir); err != nil {
		errs = append(errs, fmt.Errorf("store/bolt: compact %s: sync directory: %w", db.path, err))
	}
	if err := src.Close(); err != nil {
		errs = append(errs, fmt.Errorf("store/bolt: compact %s: close the old file: %w", db.path, err))
	}
	return errors.Join(errs...)
}

// syncDir flushes a directory, making a rename in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
