package bolt

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/storetest"
)

// openTest opens a fresh DB in t's temporary directory, with fsync on, and
// closes it at cleanup.
func openTest(t testing.TB, opts *Options) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "crux.db"), opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, db.Close()) })
	return db
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend { return openTest(t, nil) })
}

func put(t testing.TB, db *DB, key, value string) {
	t.Helper()
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		return tx.Put("b", []byte(key), []byte(value))
	}))
}

// get returns a copy of key's value, or "" and the error.
func get(t testing.TB, db store.Backend, key string) (string, error) {
	t.Helper()
	var out string
	err := db.View(context.Background(), func(tx store.Tx) error {
		v, err := tx.Get("b", []byte(key))
		out = string(v)
		return err
	})
	return out, err
}

func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crux.db")
	db, err := Open(path, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	put(t, db, "k", "v")

	const timeout = 300 * time.Millisecond
	start := time.Now()
	db2, err := Open(path, &Options{LockTimeout: timeout})
	elapsed := time.Since(start)
	require.Nil(t, db2)
	require.ErrorIs(t, err, ErrLocked)
	assert.Equal(t, "store/bolt: "+path+" is in use by another process (waited 300ms)", err.Error())
	assert.Less(t, elapsed, timeout+2*time.Second, "Open waits about LockTimeout")

	// A negative timeout fails at once; read-only opens conflict too.
	_, err = Open(path, &Options{LockTimeout: -1})
	require.ErrorIs(t, err, ErrLocked)
	_, err = Open(path, &Options{LockTimeout: -1, ReadOnly: true})
	require.ErrorIs(t, err, ErrLocked)

	// The first DB is unharmed.
	put(t, db, "k2", "v2")
	v, err := get(t, db, "k")
	require.NoError(t, err)
	require.Equal(t, "v", v)
}

// TestHelperHoldLock is not a test: TestOpenLockedByOtherProcess runs the
// test binary with it to hold a DB open in another process.
func TestHelperHoldLock(t *testing.T) {
	path := os.Getenv("CRUX_BOLT_TEST_HOLD")
	if path == "" {
		t.Skip("helper process only")
	}
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	put(t, db, "from", "other process")
	os.Stdout.WriteString("locked\n")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenLockedByOtherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	path := filepath.Join(t.TempDir(), "crux.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldLock$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CRUX_BOLT_TEST_HOLD="+path)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	sc := bufio.NewScanner(stdout)
	locked := false
	for !locked && sc.Scan() {
		locked = sc.Text() == "locked"
	}
	require.True(t, locked, "helper process did not open the DB")

	_, err = Open(path, &Options{LockTimeout: 200 * time.Millisecond})
	require.ErrorIs(t, err, ErrLocked)
	require.ErrorContains(t, err, "is in use by another process")

	// Once the other process closes the DB, Open succeeds and sees its data.
	require.NoError(t, stdin.Close())
	rest, _ := io.ReadAll(stdout) // until the helper exits
	require.NoError(t, cmd.Wait(), "helper output:\n%s", rest)
	db, err := Open(path, nil)
	require.NoError(t, err)
	defer db.Close()
	v, err := get(t, db, "from")
	require.NoError(t, err)
	require.Equal(t, "other process", v)
}

func TestFileMode(t *testing.T) {
	db := openTest(t, nil)
	put(t, db, "k", "v")
	fi, err := os.Stat(db.Path())
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "missing", "crux.db")
	_, err := Open(path, nil)
	require.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorContains(t, err, "does not exist")
	_, err = os.Stat(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, fs.ErrNotExist, "Open must not create the directory")

	_, err = Open("", nil)
	require.Error(t, err)

	// A file that is not a bbolt database.
	junk := filepath.Join(dir, "junk.db")
	require.NoError(t, os.WriteFile(junk, []byte(strings.Repeat("not a database ", 1000)), 0o600))
	_, err = Open(junk, nil)
	require.Error(t, err)

	// Read-only needs an existing file.
	_, err = Open(filepath.Join(dir, "absent.db"), &Options{ReadOnly: true})
	require.Error(t, err)
}

func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crux.db")
	db, err := Open(path, nil)
	require.NoError(t, err)
	require.Equal(t, path, db.Path())
	for _, k := range []string{"a", "b", "c"} {
		put(t, db, k, "value "+k)
	}
	require.NoError(t, db.Close())

	db, err = Open(path, nil)
	require.NoError(t, err)
	for _, k := range []string{"a", "b", "c"} {
		v, err := get(t, db, k)
		require.NoError(t, err)
		require.Equal(t, "value "+k, v)
	}
	require.NoError(t, db.Close())

	// Read-only: readable, shared, not writable.
	ro1, err := Open(path, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro1.Close()
	ro2, err := Open(path, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro2.Close()
	v, err := get(t, ro2, "b")
	require.NoError(t, err)
	require.Equal(t, "value b", v)
	err = ro1.Update(t.Context(), func(tx store.Tx) error { return nil })
	require.ErrorIs(t, err, store.ErrReadOnly)
}

func TestCloseWaitsForUpdate(t *testing.T) {
	db := openTest(t, nil)
	release := make(chan struct{})
	running := make(chan struct{})
	updated := make(chan error, 1)
	go func() {
		updated <- db.Update(context.Background(), func(tx store.Tx) error {
			close(running)
			<-release
			return tx.Put("b", []byte("k"), []byte("v"))
		})
	}()
	<-running
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()

	// Close cannot finish while the Update runs; new calls are refused.
	waitFor(t, func() bool {
		db.mu.Lock()
		defer db.mu.Unlock()
		return db.closed
	})
	require.ErrorIs(t, db.Update(t.Context(), func(store.Tx) error { return nil }), store.ErrClosed)
	require.ErrorIs(t, db.View(t.Context(), func(store.Tx) error { return nil }), store.ErrClosed)
	select {
	case <-closed:
		t.Fatal("Close returned while an Update was in progress")
	default:
	}
	close(release)
	require.NoError(t, <-updated, "the in-flight Update commits")
	require.NoError(t, <-closed)

	// And it is on disk.
	db2, err := Open(db.Path(), nil)
	require.NoError(t, err)
	defer db2.Close()
	v, err := get(t, db2, "k")
	require.NoError(t, err)
	require.Equal(t, "v", v)
}

func TestTxUseAfterReturn(t *testing.T) {
	db := openTest(t, nil)
	var leaked store.Tx
	require.NoError(t, db.Update(t.Context(), func(tx store.Tx) error { leaked = tx; return nil }))
	require.ErrorIs(t, leaked.Put("b", []byte("k"), []byte("v")), errTxDone)
	_, err := leaked.Get("b", []byte("k"))
	require.ErrorIs(t, err, errTxDone)

	require.NoError(t, db.View(t.Context(), func(tx store.Tx) error { leaked = tx; return nil }))
	_, err = leaked.Get("b", []byte("k"))
	require.ErrorIs(t, err, errTxDone)
}

func TestScanWhileWriting(t *testing.T) {
	const n = 2000
	key := func(i int) []byte { return []byte{'k', byte(i >> 8), byte(i)} }
	for _, reverse := range []bool{false, true} {
		db := openTest(t, nil)
		require.NoError(t, db.Update(t.Context(), func(tx store.Tx) error {
			for i := range n {
				if err := tx.Put("b", key(i), []byte("v")); err != nil {
					return err
				}
			}
			return nil
		}))

		// Delete every key visited, and put k+"x" right after it: ahead of
		// the cursor when ascending (so visited, and deleted in turn),
		// behind it when descending (so not visited).
		var visited []string
		require.NoError(t, db.Update(t.Context(), func(tx store.Tx) error {
			visited = nil
			return tx.Scan("b", []byte("k"), reverse, func(k, _ []byte) error {
				visited = append(visited, string(k))
				k = append([]byte(nil), k...)
				if err := tx.Delete("b", k); err != nil {
					return err
				}
				if len(k) == 3 {
					return tx.Put("b", append(k, 'x'), nil)
				}
				return nil
			})
		}))
		var left []string
		require.NoError(t, db.View(t.Context(), func(tx store.Tx) error {
			return tx.Scan("b", nil, false, func(k, _ []byte) error { left = append(left, string(k)); return nil })
		}))
		if !reverse {
			require.Len(t, visited, 2*n)
			for i := range n {
				require.Equal(t, string(key(i)), visited[2*i])
				require.Equal(t, string(key(i))+"x", visited[2*i+1])
			}
			require.Empty(t, left)
		} else {
			require.Len(t, visited, n)
			for i := range n {
				require.Equal(t, string(key(n-1-i)), visited[i])
			}
			require.Len(t, left, n)
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"\xff", ""},
		{"\xff\xff", ""},
		{"a", "b"},
		{"a\xff", "b"},
		{"a\xff\xff", "b"},
		{"a\xfe", "a\xff"},
		{"ab\x00", "ab\x01"},
		{"\x00\xff", "\x01"},
	} {
		got := prefixEnd([]byte(tc.in))
		assert.Equal(t, tc.want, string(got), "prefixEnd(%q)", tc.in)
		if tc.want == "" {
			assert.Nil(t, got)
		}
	}
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestErrLockedMessage(t *testing.T) {
	err := error(&lockedError{path: "/x/crux.db", waited: time.Second})
	require.True(t, errors.Is(err, ErrLocked))
	require.Equal(t, "store/bolt: /x/crux.db is in use by another process (waited 1s)", err.Error())
}

// TestFreelistRebuiltOnOpen: commits write no list of free pages; an Open
// after a crash rebuilds it, one after a clean Close reads the list Close
// wrote, and either way the free pages are used again.
func TestFreelistRebuiltOnOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crux.db")
	db, err := Open(path, &Options{NoSync: true})
	require.NoError(t, err)
	value := strings.Repeat("v", 1000)
	keys := func(db *DB, from, to int, del bool) {
		require.NoError(t, db.Update(t.Context(), func(tx store.Tx) error {
			for i := from; i < to; i++ {
				k := []byte(fmt.Sprintf("k%05d", i))
				if del {
					if err := tx.Delete("b", k); err != nil {
						return err
					}
				} else if err := tx.Put("b", k, []byte(value)); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	keys(db, 0, 4000, false)
	keys(db, 0, 4000, true) // about a thousand pages free
	// Each of the two meta pages names no freelist page: the freelist field
	// (after the 16-byte page header, 32 bytes into the meta) is all ones.
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, meta := range []int{0, os.Getpagesize()} {
		require.Equal(t, uint64(math.MaxUint64), binary.LittleEndian.Uint64(raw[meta+48:]), "meta page at %d", meta)
	}
	crashed := filepath.Join(t.TempDir(), "crux.db")
	require.NoError(t, os.WriteFile(crashed, raw, 0o600))
	require.NoError(t, db.Close())
	assert.NotEqual(t, noFreelist, lastFreelist(t, path), "Close writes the list")

	for name, p := range map[string]string{"after a crash": crashed, "after Close": path} {
		t.Run(name, func(t *testing.T) {
			size := func() int64 {
				fi, err := os.Stat(p)
				require.NoError(t, err)
				return fi.Size()
			}
			before := size()
			db, err := Open(p, nil)
			require.NoError(t, err)
			assert.Greater(t, db.bdb.Stats().FreePageN, 900, "the free pages are known again")
			keys(db, 0, 3000, false)
			assert.Equal(t, before, size(), "the free pages are used again")
			checkBolt(t, db.bdb)
			require.NoError(t, db.Close())
		})
	}
}

// TestScanReverseAfterDeletingEveryKey: a reverse scan of a bucket whose
// every key the same transaction deleted visits nothing, and returns (bbolt's
// cursor alone would search its empty leaves forever).
func TestScanReverseAfterDeletingEveryKey(t *testing.T) {
	db := openTest(t, &Options{NoSync: true})
	require.NoError(t, db.Update(t.Context(), func(tx store.Tx) error {
		for i := range 3000 {
			if err := tx.Put("b", fmt.Appendf(nil, "k%05d", i), []byte("v")); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, db.Update(t.Context(), func(tx store.Tx) error {
		for i := range 3000 {
			if err := tx.Delete("b", fmt.Appendf(nil, "k%05d", i)); err != nil {
				return err
			}
		}
		for _, prefix := range []string{"", "k", "k0"} {
			n := 0
			require.NoError(t, tx.Scan("b", []byte(prefix), true, func(_, _ []byte) error { n++; return nil }))
			require.Zero(t, n, "prefix %q", prefix)
		}
		return nil
	}))
}

// TestScanFrom: a scan from a key inside a prefix visits the keys of the
// prefix from that key on, in order, and none outside the prefix.
func TestScanFrom(t *testing.T) {
	db := openTest(t, &Options{NoSync: true})
	for _, k := range []string{"a1", "a3", "a5", "a7", "b1", "0"} {
		put(t, db, k, "v")
	}
	for _, tc := range []struct{ prefix, from, want string }{
		{"a", "a4", "a5 a7"},
		{"a", "a5", "a5 a7"},
		{"a", "", "a1 a3 a5 a7"},
		{"a", "0", "a1 a3 a5 a7"},
		{"a", "a8", ""},
		{"a", "b", ""},
		{"", "a6", "a7 b1"},
	} {
		var got []string
		require.NoError(t, db.View(t.Context(), func(st store.Tx) error {
			return st.(store.Seeker).ScanFrom("b", []byte(tc.prefix), []byte(tc.from), func(k, _ []byte) error {
				got = append(got, string(k))
				return nil
			})
		}))
		assert.Equal(t, tc.want, strings.Join(got, " "), "%+v", tc)
	}
}
