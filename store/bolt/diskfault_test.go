package bolt

// Disk faults. A workload of concurrent writers runs while one kind of
// I/O call fails: the n-th call only (a transient fault) or every call
// from the n-th on (a persistent one). The calls are the log's writes and
// flushes, the flushes of the database file, and bbolt's commits (a
// failure after the commit wrote everything, as when its last fdatasync
// fails). A failed call leaves what it wrote in the page cache, as a
// failed fdatasync does whose writes reach the disk later: the faults
// strace injects into a running crux. Whatever the fault, the answer and
// the stored state must agree: every write whose Update returned nil is
// there, in the running DB and after a reopen, and every write whose
// Update failed is in neither. A DB that can no longer tell serves
// nothing: its View and Update fail with ErrFailed until it is reopened.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

// The kinds of I/O call a diskFaults fails.
const (
	faultWALWrite  = "log write"
	faultWALSync   = "log flush"
	faultFileFlush = "file flush"
	faultCommit    = "bbolt commit"
)

// faultAnyFlush is every flush: the log's, the file's, and bbolt's own
// (a failed bbolt commit stands for one), counted together, as strace's
// inject=fdatasync counts them.
const faultAnyFlush = "any flush"

var faultGroups = map[string][]string{
	faultAnyFlush: {faultWALSync, faultFileFlush, faultCommit},
}

var errDisk = errors.New("injected input/output error")

// diskFaults counts the I/O calls of each kind, and of each group of
// kinds, once armed, and fails those that rule picks, given the kind or
// group and the call's number in it (from 1).
type diskFaults struct {
	mu     sync.Mutex
	armed  bool
	counts map[string]int
	failed int
	rule   func(kind string, n int) bool
}

// hit counts a call of kind and returns the error it fails with, if any.
func (d *diskFaults) hit(kind string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.armed {
		return nil
	}
	d.counts[kind]++
	fail := d.rule != nil && d.rule(kind, d.counts[kind])
	for g, kinds := range faultGroups {
		if slices.Contains(kinds, kind) {
			d.counts[g]++
			fail = fail || d.rule != nil && d.rule(g, d.counts[g])
		}
	}
	if fail {
		d.failed++
		return fmt.Errorf("%s: %w", kind, errDisk)
	}
	return nil
}

func (d *diskFaults) arm(on bool) {
	d.mu.Lock()
	d.armed = on
	d.mu.Unlock()
}

// diskFaultWAL is a walFile whose writes and flushes go through a
// diskFaults. A failed write writes nothing; a failed flush flushes
// nothing, and what was written stays in the page cache.
type diskFaultWAL struct {
	walFile
	d *diskFaults
}

func (f *diskFaultWAL) WriteAt(p []byte, off int64) (int, error) {
	if err := f.d.hit(faultWALWrite); err != nil {
		return 0, err
	}
	return f.walFile.WriteAt(p, off)
}

func (f *diskFaultWAL) Sync() error {
	if err := f.d.hit(faultWALSync); err != nil {
		return err
	}
	return f.walFile.Sync()
}

// faultOptions returns options whose I/O goes through d.
func faultOptions(d *diskFaults, noWAL bool) *Options {
	return &Options{NoWAL: noWAL, hooks: &hooks{
		checkpointBytes: 4 << 10, // frequent checkpoints, each flushing the file
		maxRecord:       2 << 10, // large writes are made durable by a checkpoint
		wrapWAL:         func(f walFile) walFile { return &diskFaultWAL{walFile: f, d: d} },
		failFlush:       func() error { return d.hit(faultFileFlush) },
		failCommit:      func() error { return d.hit(faultCommit) },
	}}
}

// faultWrite is the i-th write of writer g: its key in two buckets, one
// of them staged; every fifth value is too large for the log's record.
func faultWrite(g, i int) (key, value string) {
	key = fmt.Sprintf("w%d-%03d", g, i)
	n := 20
	if i%5 == 4 {
		n = 3000
	}
	return key, strings.Repeat(string(rune('a'+(g+i)%26)), n)
}

// faultOutcome is what became of the writes: the value of each key whose
// Update returned nil, and the keys whose Update failed.
type faultOutcome struct {
	mu      sync.Mutex
	acked   map[string]string
	refused map[string]bool
	failed  bool // an Update or View failed with ErrFailed
}

// lookup returns key's value in both buckets, whether it is there, and
// the error of a View that could not tell (ErrFailed).
func lookup(db *DB, key string) (value string, found bool, err error) {
	err = db.View(context.Background(), func(tx store.Tx) error {
		v, err := tx.Get("b", []byte(key))
		s, serr := tx.Get(stagedBucket, []byte(key))
		switch {
		case err == nil && serr == nil:
			if string(v) != string(s) {
				return fmt.Errorf("%q: %q in b, %q in %s", key, v, s, stagedBucket)
			}
			value, found = string(v), true
			return nil
		case errors.Is(err, store.ErrNotFound) && errors.Is(serr, store.ErrNotFound):
			return nil
		default:
			return fmt.Errorf("%q: half a write: %v, %v", key, err, serr)
		}
	})
	return value, found, err
}

// runFaultWorkload runs writers goroutines of rounds Updates each on db,
// checking after each Update that the running DB agrees with its answer.
func runFaultWorkload(t *testing.T, db *DB, writers, rounds int) *faultOutcome {
	out := &faultOutcome{acked: map[string]string{}, refused: map[string]bool{}}
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				key, value := faultWrite(g, i)
				err := db.Update(context.Background(), func(tx store.Tx) error {
					if err := tx.Put("b", []byte(key), []byte(value)); err != nil {
						return err
					}
					return tx.Put(stagedBucket, []byte(key), []byte(value))
				})
				out.mu.Lock()
				if err == nil {
					out.acked[key] = value
				} else {
					out.refused[key] = true
					out.failed = out.failed || errors.Is(err, ErrFailed)
				}
				out.mu.Unlock()

				got, found, verr := lookup(db, key)
				switch {
				case errors.Is(verr, ErrFailed):
					out.mu.Lock()
					out.failed = true
					out.mu.Unlock()
					if err == nil {
						assert.ErrorIs(t, db.Update(context.Background(), func(store.Tx) error { return nil }), ErrFailed,
							"a DB whose View fails with ErrFailed takes no Update either")
					}
				case verr != nil:
					t.Errorf("write %s: View: %v", key, verr)
				case err == nil && !found:
					t.Errorf("write %s: Update returned nil, but the running DB does not have it", key)
				case err == nil && got != value:
					t.Errorf("write %s: the running DB has %.20q, want %.20q", key, got, value)
				case err != nil && found:
					t.Errorf("write %s: Update failed (%v), but the running DB has it", key, err)
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// checkFaultOutcome checks, on the reopened DB, that every acknowledged
// write is there and no refused one.
func checkFaultOutcome(t *testing.T, db *DB, out *faultOutcome) {
	t.Helper()
	for key, want := range out.acked {
		got, found, err := lookup(db, key)
		if assert.NoError(t, err) && assert.True(t, found, "acknowledged write %s lost", key) {
			assert.Equal(t, want, got, "acknowledged write %s", key)
		}
	}
	for key := range out.refused {
		_, found, err := lookup(db, key)
		if assert.NoError(t, err) {
			assert.False(t, found, "refused write %s stored", key)
		}
	}
}

func TestDiskFaults(t *testing.T) {
	const writers, rounds = 4, 12
	kinds := []string{faultWALWrite, faultWALSync, faultFileFlush, faultCommit, faultAnyFlush}
	modes := []struct {
		name  string
		noWAL bool
		kinds []string
	}{
		{"log", false, kinds},
		{"no log", true, []string{faultCommit}},
	}
	for _, mode := range modes {
		// Count the calls of each kind the workload makes when nothing
		// fails, to aim faults at all of them.
		d := &diskFaults{counts: map[string]int{}}
		db, err := Open(filepath.Join(t.TempDir(), "crux.db"), faultOptions(d, mode.noWAL))
		require.NoError(t, err)
		d.arm(true)
		out := runFaultWorkload(t, db, writers, rounds)
		d.arm(false)
		require.NoError(t, db.Close())
		require.Empty(t, out.refused)
		for _, kind := range mode.kinds {
			calls := d.counts[kind]
			require.NotZero(t, calls, "%s: no %s", mode.name, kind)
			step := max(1, calls/8)
			if testing.Short() {
				step = max(1, calls/3)
			}
			for n := 1; n <= calls; n += step {
				for _, persistent := range []bool{false, true} {
					name := fmt.Sprintf("%s/%s %d of %d", mode.name, kind, n, calls)
					if persistent {
						name += " on"
					}
					t.Run(name, func(t *testing.T) {
						testDiskFault(t, mode.noWAL, writers, rounds, func(k string, i int) bool {
							return k == kind && (i == n || persistent && i > n)
						})
					})
				}
			}
		}
	}
}

// testDiskFault runs the workload with the faults rule picks, then checks
// the DB reopened without faults.
func testDiskFault(t *testing.T, noWAL bool, writers, rounds int, rule func(string, int) bool) {
	path := filepath.Join(t.TempDir(), "crux.db")
	d := &diskFaults{counts: map[string]int{}, rule: rule}
	db, err := Open(path, faultOptions(d, noWAL))
	require.NoError(t, err)
	d.arm(true)
	out := runFaultWorkload(t, db, writers, rounds)
	if out.failed {
		// Once failed, always failed, until reopened.
		_, _, err := lookup(db, "w0-000")
		assert.ErrorIs(t, err, ErrFailed)
		err = db.Update(context.Background(), func(tx store.Tx) error { return tx.Put("b", []byte("x"), []byte("x")) })
		assert.ErrorIs(t, err, ErrFailed)
		assert.Contains(t, err.Error(), "reopen")
		assert.ErrorIs(t, db.Compact(context.Background()), ErrFailed)
	}
	cerr := db.Close()
	d.arm(false)
	if !out.failed && d.failed == 0 {
		// Batches form as the scheduler lets them: this run made fewer
		// calls than the one counted.
		t.Skipf("no fault hit: fewer calls than counted (%v)", d.counts)
	}
	if cerr != nil && !errors.Is(cerr, ErrFailed) {
		t.Errorf("Close: %v", cerr)
	}
	t.Logf("%d acknowledged, %d refused, failed state: %v, close: %v", len(out.acked), len(out.refused), out.failed, cerr)

	re := openChecked(t, path, &Options{NoWAL: noWAL})
	checkFaultOutcome(t, re, out)
	// And the DB goes on.
	put(t, re, "after", "v")
}

// TestViewWaitsForDurability: bbolt shows a commit to readers once it has
// written it, before its record is flushed to the log. A View begun then
// waits: it sees the write once the Update returns nil, and fails with
// ErrFailed when the Update fails, rather than seeing a write that is then
// refused.
func TestViewWaitsForDurability(t *testing.T) {
	for _, fails := range []bool{false, true} {
		t.Run(fmt.Sprintf("commit fails %v", fails), func(t *testing.T) {
			d := &diskFaults{counts: map[string]int{}}
			if fails {
				// The record's flush fails, and so does the file's.
				d.rule = func(kind string, _ int) bool { return kind == faultWALSync || kind == faultFileFlush }
			}
			opts := faultOptions(d, false)
			type result struct {
				found bool
				err   error
			}
			var db *DB
			var watch sync.Once
			views := make(chan result, 1)
			early := make(chan result, 1)
			opts.hooks.afterCommit = func() {
				watch.Do(func() {
					go func() {
						_, found, err := lookup(db, "k")
						views <- result{found, err}
					}()
					select {
					case r := <-views:
						early <- r // the View did not wait
					case <-time.After(50 * time.Millisecond):
					}
				})
			}
			var err error
			db, err = Open(filepath.Join(t.TempDir(), "crux.db"), opts)
			require.NoError(t, err)
			defer db.Close()
			d.arm(true)
			err = db.Update(context.Background(), func(tx store.Tx) error {
				if err := tx.Put("b", []byte("k"), []byte("v")); err != nil {
					return err
				}
				return tx.Put(stagedBucket, []byte("k"), []byte("v"))
			})
			var r result
			select {
			case <-time.After(10 * time.Second):
				t.Fatal("no View ran")
			case r = <-early:
				t.Errorf("the View did not wait for the commit it sees to be durable")
			case r = <-views:
			}
			if fails {
				require.ErrorIs(t, err, ErrFailed)
				assert.False(t, r.found, "the View saw a refused write")
				assert.ErrorIs(t, r.err, ErrFailed)
			} else {
				require.NoError(t, err)
				assert.NoError(t, r.err)
				assert.True(t, r.found)
			}
		})
	}
}
