package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/storetest"
)

// fileContains reports whether the database file holds needle.
func fileContains(t *testing.T, path string, needle []byte) bool {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return bytes.Contains(b, needle)
}

func TestCompactDropsFreedBytes(t *testing.T) {
	db := openTest(t, nil)
	secret := []byte("compact-test-secret-" + strings.Repeat("q7", 16))
	big := bytes.Repeat(append(append([]byte{}, secret...), ' '), 2000) // overflow pages
	for i := range 50 {
		put(t, db, fmt.Sprintf("keep-%02d", i), fmt.Sprintf("value %d", i))
	}
	put(t, db, "secret", string(big))
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		return tx.Delete("b", []byte("secret"))
	}))
	// bbolt freed the pages but did not wipe them.
	require.True(t, fileContains(t, db.Path(), secret), "the deleted value should linger in freed pages before compaction")
	before, err := os.Stat(db.Path())
	require.NoError(t, err)

	require.NoError(t, db.Compact(context.Background()))

	assert.False(t, fileContains(t, db.Path(), secret), "compaction must drop freed pages")
	after, err := os.Stat(db.Path())
	require.NoError(t, err)
	assert.Less(t, after.Size(), before.Size())
	assert.Equal(t, fileMode, after.Mode().Perm())
	for i := range 50 {
		v, err := get(t, db, fmt.Sprintf("keep-%02d", i))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("value %d", i), v)
	}
	_, err = get(t, db, "secret")
	assert.ErrorIs(t, err, store.ErrNotFound)

	// The DB goes on working on the new file, and nothing is left behind.
	put(t, db, "after", "compaction")
	left, err := filepath.Glob(db.Path() + ".compact-*")
	require.NoError(t, err)
	require.Empty(t, left, "no temporary file may remain")
}

func TestCompactSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crux.db")
	db, err := Open(path, nil)
	require.NoError(t, err)
	put(t, db, "a", "1")
	require.NoError(t, db.Compact(context.Background()))
	put(t, db, "b", "2")
	require.NoError(t, db.Close())

	db, err = Open(path, nil)
	require.NoError(t, err)
	defer db.Close()
	for k, want := range map[string]string{"a": "1", "b": "2"} {
		v, err := get(t, db, k)
		require.NoError(t, err)
		assert.Equal(t, want, v)
	}
}

func TestCompactKeepsTheFileLocked(t *testing.T) {
	db := openTest(t, nil)
	put(t, db, "a", "1")
	require.NoError(t, db.Compact(context.Background()))
	_, err := Open(db.Path(), &Options{LockTimeout: -1})
	assert.ErrorIs(t, err, ErrLocked, "the compacted file must be locked by the DB that uses it")
}

func TestCompactErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crux.db")
	db, err := Open(path, nil)
	require.NoError(t, err)
	put(t, db, "a", "1")
	require.NoError(t, db.Close())
	assert.ErrorIs(t, db.Compact(context.Background()), store.ErrClosed)

	ro, err := Open(path, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	assert.ErrorIs(t, ro.Compact(context.Background()), store.ErrReadOnly)

	rw := openTest(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, rw.Compact(ctx), context.Canceled)
}

// TestCompactWaitsForWrites: while an Update runs, Compact waits (and gives
// up when its context ends); the Update is unaffected.
func TestCompactWaitsForWrites(t *testing.T) {
	db := openTest(t, nil)
	b := block(t, db)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, db.Compact(ctx), context.DeadlineExceeded)

	// Compact waits for the running Update; Updates made meanwhile wait
	// for Compact; all of them succeed.
	compacted := make(chan error, 1)
	go func() { compacted <- db.Compact(context.Background()) }()
	queued := make(chan error, 3)
	for i := range 3 {
		go func() {
			queued <- db.Update(context.Background(), func(tx store.Tx) error {
				return tx.Put("b", fmt.Appendf(nil, "queued-%d", i), []byte("q"))
			})
		}()
	}
	select {
	case err := <-compacted:
		t.Fatalf("Compact returned %v while an Update was running", err)
	case <-time.After(20 * time.Millisecond):
	}
	b.release()
	require.NoError(t, <-b.done)
	require.NoError(t, <-compacted)
	for range 3 {
		require.NoError(t, <-queued)
	}
	for _, k := range []string{"blocker", "queued-0", "queued-1", "queued-2"} {
		_, err := get(t, db, k)
		require.NoError(t, err, k)
	}
}

// TestCompactsOneAtATime: concurrent Compacts (two Purges on one DB) take
// turns.
func TestCompactsOneAtATime(t *testing.T) {
	db := openTest(t, nil)
	b := block(t, db)
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- db.Compact(context.Background()) }()
	}
	time.Sleep(10 * time.Millisecond)
	b.release()
	require.NoError(t, <-b.done)
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)
	_, err := get(t, db, "blocker")
	require.NoError(t, err)
}

// TestOpenRemovesInterruptedCopy: a copy a crash left behind is removed.
func TestOpenRemovesInterruptedCopy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "crux.db")
	leftover := path + ".compact-123"
	require.NoError(t, os.WriteFile(leftover, []byte("old values"), 0o600))
	db, err := Open(path, &Options{NoSync: true})
	require.NoError(t, err)
	defer db.Close()
	_, err = os.Stat(leftover)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// TestCompactConcurrent hammers the DB with Views and Updates while it is
// compacted again and again: no call fails, and no write is lost. Run with
// -race.
func TestCompactConcurrent(t *testing.T) {
	db := openTest(t, &Options{NoSync: true})
	ctx := context.Background()
	var (
		wg      sync.WaitGroup
		stop    atomic.Bool
		written atomic.Int64
		errs    = make(chan error, 64)
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				err := db.Update(ctx, func(tx store.Tx) error {
					return tx.Put("b", fmt.Appendf(nil, "w%d-%06d", w, i), bytes.Repeat([]byte{'x'}, 200))
				})
				if err != nil {
					errs <- err
					return
				}
				written.Add(1)
			}
		}()
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				err := db.View(ctx, func(tx store.Tx) error {
					return tx.Scan("b", []byte("w0-"), false, func(_, v []byte) error {
						if len(v) != 200 {
							return errors.New("torn value")
						}
						return nil
					})
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for range 5 {
		time.Sleep(10 * time.Millisecond)
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		require.NoError(t, db.Compact(cctx))
		cancel()
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var n int64
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		return tx.Scan("b", nil, false, func(_, _ []byte) error { n++; return nil })
	}))
	assert.Equal(t, written.Load(), n)
}

// TestConformanceAfterCompact runs the conformance suite on DBs that have
// been compacted once, so the DB behaves the same on its new file.
func TestConformanceAfterCompact(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend {
		db := openTest(t, &Options{NoSync: true})
		require.NoError(t, db.Compact(context.Background()))
		return db
	})
}
