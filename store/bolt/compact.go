package bolt

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
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
// (mode 0600), which is flushed to disk (fsync) and renamed over the
// database file; the directory is flushed; the DB continues on the new file
// and closes the old one. Should any step before the rename fail, the new
// file is removed and the database is left as it was; a copy left behind by
// a crash is removed by the next Open. Other processes wait on the DB's lock
// file, which is never renamed, so none can open the old file meanwhile.
//
// Compact waits for the View and Update calls in progress to end, and every
// call made meanwhile waits for Compact: none fails, and none sees the files
// being switched. Compacts run one at a time. Compact fails on a read-only
// DB (an error wrapping store.ErrReadOnly) and after Close
// (store.ErrClosed); it returns ctx.Err() if ctx ends while it waits for the
// calls in progress (the copy itself is not interrupted). It must not be called
// from inside a transaction function, which it would wait for forever.
func (db *DB) Compact(ctx context.Context) error {
	if db.readOnly {
		return fmt.Errorf("store/bolt: compact %s: opened read-only: %w", db.path, store.ErrReadOnly)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	locked := make(chan struct{})
	go func() { db.gate.Lock(); close(locked) }()
	select {
	case <-locked:
	case <-ctx.Done():
		go func() { <-locked; db.gate.Unlock() }() // give the gate back once it comes
		return ctx.Err()
	}
	defer db.gate.Unlock()
	db.mu.Lock()
	closed := db.closed
	db.mu.Unlock()
	if closed {
		return fmt.Errorf("store/bolt: compact %s: %w", db.path, store.ErrClosed)
	}
	return db.compactLocked()
}

// removeCompactCopies removes the copies a Compact interrupted by a crash
// left next to the database at path. The caller holds the lock file.
func removeCompactCopies(path string) error {
	leftovers, err := filepath.Glob(path + ".compact-*")
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range leftovers {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// compactLocked does the work of Compact; db.gate is held exclusively, so
// nothing else uses db.bdb.
func (db *DB) compactLocked() (err error) {
	if err := db.failure(); err != nil {
		// The log, still dirty, holds commits that the next Open
		// recovers on this file.
		return err
	}
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
	dst.AllocSize = allocSize
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
	if db.wal != nil {
		// The log's checkpoint is a state of the old file: mark the log
		// clean before the new file takes the old one's place. The next
		// commit makes a checkpoint (of whichever file is then in place).
		if err := db.closeLog(); err != nil {
			return fmt.Errorf("store/bolt: compact %s: %w", db.path, err)
		}
	}
	if err := os.Rename(tmp, db.path); err != nil {
		return fmt.Errorf("store/bolt: compact %s: rename: %w", db.path, err)
	}
	// From here on the database is the new file, whatever else fails.
	renamed = true
	dst.NoSync, dst.NoGrowSync = src.NoSync, src.NoGrowSync
	db.bdb = dst
	db.resetDurable()
	if db.wal != nil {
		// The next commit makes the checkpoint if this one fails.
		_ = db.checkpoint()
	}
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
