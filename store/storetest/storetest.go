// Package storetest is the conformance suite for [store.Backend]
// implementations. Every backend's tests call [Run], and may call [Bench]
// from a benchmark:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Backend {
//			b, err := mybackend.Open(t.TempDir())
//			require.NoError(t, err)
//			t.Cleanup(func() { _ = b.Close() })
//			return b
//		})
//	}
//
// The suite checks the contract documented in package store. Run it with
// -race: several subtests are concurrent.
//
// [Faulty] serves the other side of the contract: it wraps a backend and
// fails one chosen operation, so that a test of code using a store can
// check that a failure at any point returns an error and leaves the store
// as it was ([Faulty.Snapshot] reads it back).
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

// Run runs the conformance suite against the backends made by newBackend,
// one fresh, empty backend per subtest. newBackend must register its own
// cleanup (for example with t.Cleanup); the suite closes some backends
// itself, so that cleanup must tolerate a second Close, as the contract
// requires.
func Run(t *testing.T, newBackend func(t *testing.T) store.Backend) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, b store.Backend)
	}{
		{"Get/RoundTrip", testRoundTrip},
		{"Get/MissingKey", testGetMissingKey},
		{"Get/MissingBucket", testGetMissingBucket},
		{"Get/CopiedValueSurvives", testCopiedValueSurvives},
		{"Put/Overwrite", testPutOverwrite},
		{"Put/NilValue", testPutNilValue},
		{"Put/EmptyKey", testEmptyKey},
		{"Put/InView", testWriteInView},
		{"Put/Aliasing", testPutAliasing},
		{"Put/LargeValue", testPutLargeValue},
		{"Delete/Missing", testDeleteMissing},
		{"Scan/Prefix", testScanPrefix},
		{"Scan/MissingBucket", testScanMissingBucket},
		{"Scan/Stop", testScanStop},
		{"Scan/Error", testScanError},
		{"Scan/ManyKeys", testScanManyKeys},
		{"Buckets/Independent", testBucketsIndependent},
		{"Update/ErrorRollsBack", testUpdateErrorRollsBack},
		{"Update/ReadYourWrites", testUpdateReadYourWrites},
		{"Concurrent/Writers", testConcurrentWriters},
		{"Concurrent/ReadersAndWriters", testConcurrentReadersWriters},
		{"Context/CancelledBeforeView", testCancelledBeforeView},
		{"Context/CancelledBeforeUpdate", testCancelledBeforeUpdate},
		{"Context/CancelledDuringView", testCancelledDuringView},
		{"Context/CancelledDuringUpdate", testCancelledDuringUpdate},
		{"Context/CancelledDuringUpdateIgnored", testCancelledDuringUpdateIgnored},
		{"Close/ThenUse", testCloseThenUse},
		{"Close/Twice", testCloseTwice},
		{"Facts/Relevance", testFactRelevance},
		{"Facts/TopK", testFactTopK},
		{"Facts/TopKCommon", testFactTopKCommon},
		{"Sync/ChangeLog", testChangeLog},
		{"Counts/Sum", testSumCounts},
		{"Optional", testOptional}, // see optional.go
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t)
			require.NotNil(t, b, "newBackend returned nil")
			tc.fn(t, b)
		})
	}
}

// errBoom is returned by test functions to make a transaction fail.
var errBoom = errors.New("storetest: boom")

const bucket = "test"

// put stores key/value in its own Update.
func put(t testing.TB, b store.Backend, bkt, key, value string) {
	t.Helper()
	err := b.Update(context.Background(), func(tx store.Tx) error {
		return tx.Put(bkt, []byte(key), []byte(value))
	})
	require.NoError(t, err, "put %q/%q", bkt, key)
}

// get reads key in its own View and returns a copy of its value.
func get(t testing.TB, b store.Backend, bkt, key string) ([]byte, error) {
	t.Helper()
	var out []byte
	err := b.View(context.Background(), func(tx store.Tx) error {
		v, err := tx.Get(bkt, []byte(key))
		if err != nil {
			return err
		}
		out = bytes.Clone(v)
		if out == nil {
			out = []byte{}
		}
		return nil
	})
	return out, err
}

// requireValue checks that key holds value.
func requireValue(t testing.TB, b store.Backend, bkt, key, value string) {
	t.Helper()
	v, err := get(t, b, bkt, key)
	require.NoError(t, err, "get %q/%q", bkt, key)
	require.Equal(t, value, string(v), "value of %q/%q", bkt, key)
}

// requireAbsent checks that key does not exist.
func requireAbsent(t testing.TB, b store.Backend, bkt, key string) {
	t.Helper()
	_, err := get(t, b, bkt, key)
	require.ErrorIs(t, err, store.ErrNotFound, "get %q/%q", bkt, key)
}

// scanKeys returns copies of the keys Scan visits in a View.
func scanKeys(t testing.TB, b store.Backend, bkt string, prefix []byte, reverse bool) []string {
	t.Helper()
	var keys []string
	err := b.View(context.Background(), func(tx store.Tx) error {
		keys = nil // in case fn runs more than once
		return tx.Scan(bkt, prefix, reverse, func(k, _ []byte) error {
			keys = append(keys, string(k))
			return nil
		})
	})
	require.NoError(t, err, "scan %q prefix %q reverse %v", bkt, prefix, reverse)
	return keys
}

func testRoundTrip(t *testing.T, b store.Backend) {
	put(t, b, bucket, "k", "v")
	requireValue(t, b, bucket, "k", "v")

	// Also readable from a read-write transaction.
	err := b.Update(t.Context(), func(tx store.Tx) error {
		v, err := tx.Get(bucket, []byte("k"))
		if err != nil {
			return err
		}
		if string(v) != "v" {
			return fmt.Errorf("got %q in Update, want %q", v, "v")
		}
		return nil
	})
	require.NoError(t, err)

	err = b.Update(t.Context(), func(tx store.Tx) error {
		return tx.Delete(bucket, []byte("k"))
	})
	require.NoError(t, err)
	requireAbsent(t, b, bucket, "k")
}

func testGetMissingKey(t *testing.T, b store.Backend) {
	put(t, b, bucket, "k", "v")
	for _, key := range []string{"j", "k\x00", "kk", "l", "\xff"} {
		requireAbsent(t, b, bucket, key)
	}
	err := b.Update(t.Context(), func(tx store.Tx) error {
		_, err := tx.Get(bucket, []byte("missing"))
		return err
	})
	require.ErrorIs(t, err, store.ErrNotFound, "Get in Update")
}

func testGetMissingBucket(t *testing.T, b store.Backend) {
	requireAbsent(t, b, "nobucket", "k")
	err := b.Update(t.Context(), func(tx store.Tx) error {
		_, err := tx.Get("nobucket", []byte("k"))
		return err
	})
	require.ErrorIs(t, err, store.ErrNotFound, "Get in Update")
}

func testCopiedValueSurvives(t *testing.T, b store.Backend) {
	put(t, b, bucket, "k", "original")
	kept, err := get(t, b, bucket, "k")
	require.NoError(t, err)

	// Overwrite it, and churn enough to reuse freed storage.
	for i := range 20 {
		err := b.Update(t.Context(), func(tx store.Tx) error {
			if err := tx.Put(bucket, []byte("k"), bytes.Repeat([]byte{'x'}, 100+i)); err != nil {
				return err
			}
			for j := range 50 {
				key := fmt.Appendf(nil, "churn/%02d", j)
				if err := tx.Put(bucket, key, bytes.Repeat([]byte{byte(i)}, 512)); err != nil {
					return err
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.Equal(t, "original", string(kept))
}

func testPutOverwrite(t *testing.T, b store.Backend) {
	put(t, b, bucket, "k", "one")
	put(t, b, bucket, "k", "two")
	requireValue(t, b, bucket, "k", "two")
	put(t, b, bucket, "k", "a longer third value")
	requireValue(t, b, bucket, "k", "a longer third value")
	require.Equal(t, []string{"k"}, scanKeys(t, b, bucket, nil, false))
}

func testPutNilValue(t *testing.T, b store.Backend) {
	err := b.Update(t.Context(), func(tx store.Tx) error {
		if err := tx.Put(bucket, []byte("nil"), nil); err != nil {
			return err
		}
		if err := tx.Put(bucket, []byte("empty"), []byte{}); err != nil {
			return err
		}
		// An empty value is a value, also inside the transaction.
		v, err := tx.Get(bucket, []byte("nil"))
		if err != nil {
			return fmt.Errorf("Get after Put(nil) in the same Update: %w", err)
		}
		if len(v) != 0 {
			return fmt.Errorf("Get after Put(nil) = %q, want empty", v)
		}
		return nil
	})
	require.NoError(t, err)
	requireValue(t, b, bucket, "nil", "")
	requireValue(t, b, bucket, "empty", "")

	var lens []int
	err = b.View(t.Context(), func(tx store.Tx) error {
		lens = nil
		return tx.Scan(bucket, nil, false, func(_, v []byte) error {
			lens = append(lens, len(v))
			return nil
		})
	})
	require.NoError(t, err)
	require.Equal(t, []int{0, 0}, lens, "Scan visits both empty values")
}

func testEmptyKey(t *testing.T, b store.Backend) {
	ctx := t.Context()
	for name, op := range map[string]func(tx store.Tx) error{
		"Put empty key":     func(tx store.Tx) error { return tx.Put(bucket, []byte{}, []byte("v")) },
		"Put nil key":       func(tx store.Tx) error { return tx.Put(bucket, nil, []byte("v")) },
		"Put empty bucket":  func(tx store.Tx) error { return tx.Put("", []byte("k"), []byte("v")) },
		"Get empty key":     func(tx store.Tx) error { _, err := tx.Get(bucket, nil); return err },
		"Get empty bucket":  func(tx store.Tx) error { _, err := tx.Get("", []byte("k")); return err },
		"Delete empty key":  func(tx store.Tx) error { return tx.Delete(bucket, nil) },
		"Delete empty bkt":  func(tx store.Tx) error { return tx.Delete("", []byte("k")) },
		"Scan empty bucket": func(tx store.Tx) error { return tx.Scan("", nil, false, func(_, _ []byte) error { return nil }) },
	} {
		err := b.Update(ctx, op)
		assert.ErrorIs(t, err, store.ErrEmptyKey, "%s in Update", name)
	}
	for name, op := range map[string]func(tx store.Tx) error{
		"Get empty key":     func(tx store.Tx) error { _, err := tx.Get(bucket, nil); return err },
		"Get empty bucket":  func(tx store.Tx) error { _, err := tx.Get("", []byte("k")); return err },
		"Scan empty bucket": func(tx store.Tx) error { return tx.Scan("", nil, false, func(_, _ []byte) error { return nil }) },
	} {
		err := b.View(ctx, op)
		assert.ErrorIs(t, err, store.ErrEmptyKey, "%s in View", name)
	}
	// Nothing was written.
	require.Empty(t, scanKeys(t, b, bucket, nil, false))
}

func testWriteInView(t *testing.T, b store.Backend) {
	put(t, b, bucket, "k", "v")
	var writable, putErr, delErr = true, error(nil), error(nil)
	err := b.View(t.Context(), func(tx store.Tx) error {
		writable = tx.Writable()
		putErr = tx.Put(bucket, []byte("k"), []byte("changed"))
		delErr = tx.Delete(bucket, []byte("k"))
		// Also into a bucket that does not exist yet.
		if err := tx.Put("new", []byte("k"), []byte("v")); !errors.Is(err, store.ErrReadOnly) {
			return fmt.Errorf("Put into a new bucket in View: got %v, want ErrReadOnly", err)
		}
		return nil
	})
	require.NoError(t, err)
	require.False(t, writable, "Writable in View")
	require.ErrorIs(t, putErr, store.ErrReadOnly)
	require.ErrorIs(t, delErr, store.ErrReadOnly)
	requireValue(t, b, bucket, "k", "v")
	requireAbsent(t, b, "new", "k")

	err = b.Update(t.Context(), func(tx store.Tx) error {
		writable = tx.Writable()
		return nil
	})
	require.NoError(t, err)
	require.True(t, writable, "Writable in Update")
}

func testPutAliasing(t *testing.T, b store.Backend) {
	key := []byte("key-1")
	val := []byte("value-1")
	// One backing array for several Puts, as a caller reusing a buffer does.
	buf := []byte("shared-0=value-0")
	err := b.Update(t.Context(), func(tx store.Tx) error {
		key, val := bytes.Clone(key), bytes.Clone(val) // fn may run more than once
		if err := tx.Put(bucket, key, val); err != nil {
			return err
		}
		key[4], val[6] = '9', '9' // mutate after Put, before commit
		for i := range 3 {
			buf := bytes.Clone(buf)
			buf[7], buf[15] = byte('0'+i), byte('0'+i)
			if err := tx.Put(bucket, buf[:8], buf[9:]); err != nil {
				return err
			}
			buf[7], buf[15] = 'X', 'X'
		}
		// Visible as stored, in the same transaction.
		v, err := tx.Get(bucket, []byte("key-1"))
		if err != nil {
			return err
		}
		if string(v) != "value-1" {
			return fmt.Errorf("in Update: got %q, want value-1", v)
		}
		return nil
	})
	require.NoError(t, err)

	// Mutate after commit too.
	key[0], val[0] = 'X', 'X'
	requireValue(t, b, bucket, "key-1", "value-1")
	requireAbsent(t, b, bucket, "key-9")
	for i := range 3 {
		requireValue(t, b, bucket, fmt.Sprintf("shared-%d", i), fmt.Sprintf("value-%d", i))
	}
	require.Equal(t, []string{"key-1", "shared-0", "shared-1", "shared-2"}, scanKeys(t, b, bucket, nil, false))
}

func testPutLargeValue(t *testing.T, b store.Backend) {
	large := make([]byte, 1<<20)
	for i := range large {
		large[i] = byte(i * 7)
	}
	longKey := bytes.Repeat([]byte("k"), 512)
	err := b.Update(t.Context(), func(tx store.Tx) error {
		if err := tx.Put(bucket, []byte("large"), large); err != nil {
			return err
		}
		return tx.Put(bucket, longKey, []byte("long key"))
	})
	require.NoError(t, err)
	v, err := get(t, b, bucket, "large")
	require.NoError(t, err)
	require.True(t, bytes.Equal(large, v), "1 MiB value round trip")
	requireValue(t, b, bucket, string(longKey), "long key")
}

func testDeleteMissing(t *testing.T, b store.Backend) {
	put(t, b, bucket, "k", "v")
	err := b.Update(t.Context(), func(tx store.Tx) error {
		if err := tx.Delete(bucket, []byte("missing")); err != nil {
			return fmt.Errorf("missing key: %w", err)
		}
		if err := tx.Delete("nobucket", []byte("k")); err != nil {
			return fmt.Errorf("missing bucket: %w", err)
		}
		if err := tx.Delete(bucket, []byte("k")); err != nil {
			return err
		}
		if err := tx.Delete(bucket, []byte("k")); err != nil {
			return fmt.Errorf("deleted twice: %w", err)
		}
		return nil
	})
	require.NoError(t, err)
	requireAbsent(t, b, bucket, "k")
	requireAbsent(t, b, "nobucket", "k")
}

// scanKeySet has keys around 0x00 and 0xff boundaries and keys that are
// prefixes of each other.
var scanKeySet = []string{
	"\x00", "\x00\xff",
	"a", "a\x00", "a\xfe", "a\xfe\xff", "a\xff", "a\xff\x00", "a\xff\xff", "a\xff\xff\xff", "a\xff\xff\xff\x01",
	"ab", "abc", "abd", "ac",
	"b", "b\x00", "ba",
	"\xfe\xff", "\xff", "\xff\x00", "\xff\xff", "\xff\xff\x01", "\xff\xff\xff",
}

func testScanPrefix(t *testing.T, b store.Backend) {
	err := b.Update(t.Context(), func(tx store.Tx) error {
		// Insert out of order.
		for _, i := range []int{7, 3, 20, 0, 12, 5, 23, 1, 9, 15, 2, 18, 4, 22, 6, 11, 8, 19, 10, 14, 13, 21, 16, 17} {
			k := scanKeySet[i]
			if err := tx.Put(bucket, []byte(k), []byte("v:"+k)); err != nil {
				return err
			}
		}
		// A neighbour bucket whose keys must never show up.
		return tx.Put(bucket+"x", []byte("a"), []byte("other"))
	})
	require.NoError(t, err)
	require.Len(t, scanKeySet, 24)

	sorted := slices.Clone(scanKeySet)
	slices.Sort(sorted)
	for _, prefix := range []string{
		"", "\x00", "a", "a\x00", "a\xfe", "a\xff", "a\xff\xff", "a\xff\xff\xff", "a\xff\xff\xff\xff",
		"ab", "abc", "abcd", "b", "c", "z", "\x01", "\xfe", "\xff", "\xff\xff", "\xff\xff\xff", "\xff\xff\xff\xff",
	} {
		var want []string
		for _, k := range sorted {
			if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
				want = append(want, k)
			}
		}
		got := scanKeys(t, b, bucket, []byte(prefix), false)
		assert.Equal(t, want, got, "ascending, prefix %q", prefix)

		slices.Reverse(want)
		got = scanKeys(t, b, bucket, []byte(prefix), true)
		assert.Equal(t, want, got, "reverse, prefix %q", prefix)
	}

	// nil and empty prefixes visit the whole bucket; values match keys.
	for _, reverse := range []bool{false, true} {
		var keys []string
		err := b.View(t.Context(), func(tx store.Tx) error {
			keys = nil
			return tx.Scan(bucket, nil, reverse, func(k, v []byte) error {
				if string(v) != "v:"+string(k) {
					return fmt.Errorf("key %q has value %q", k, v)
				}
				keys = append(keys, string(k))
				return nil
			})
		})
		require.NoError(t, err)
		want := slices.Clone(sorted)
		if reverse {
			slices.Reverse(want)
		}
		require.Equal(t, want, keys, "nil prefix, reverse %v", reverse)
	}
}

func testScanMissingBucket(t *testing.T, b store.Backend) {
	put(t, b, bucket, "k", "v")
	for _, reverse := range []bool{false, true} {
		require.Empty(t, scanKeys(t, b, "nobucket", nil, reverse))
		require.Empty(t, scanKeys(t, b, "nobucket", []byte("k"), reverse))
		// A prefix that matches nothing in an existing bucket.
		require.Empty(t, scanKeys(t, b, bucket, []byte("x"), reverse))
		require.Empty(t, scanKeys(t, b, bucket, []byte("a"), reverse))
	}
}

func testScanStop(t *testing.T, b store.Backend) {
	for _, k := range []string{"p1", "p2", "p3", "p4", "p5"} {
		put(t, b, bucket, k, k)
	}
	for _, reverse := range []bool{false, true} {
		var visited []string
		err := b.View(t.Context(), func(tx store.Tx) error {
			visited = nil
			return tx.Scan(bucket, []byte("p"), reverse, func(k, _ []byte) error {
				visited = append(visited, string(k))
				if len(visited) == 2 {
					return store.ErrStop
				}
				return nil
			})
		})
		require.NoError(t, err, "ErrStop ends the scan without error")
		want := []string{"p1", "p2"}
		if reverse {
			want = []string{"p5", "p4"}
		}
		require.Equal(t, want, visited, "reverse %v", reverse)
	}
}

func testScanError(t *testing.T, b store.Backend) {
	for _, k := range []string{"p1", "p2", "p3"} {
		put(t, b, bucket, k, k)
	}
	for _, reverse := range []bool{false, true} {
		var visited, after int
		var scanErr error
		err := b.View(t.Context(), func(tx store.Tx) error {
			visited = 0
			scanErr = tx.Scan(bucket, nil, reverse, func(_, _ []byte) error {
				visited++
				if visited == 2 {
					return fmt.Errorf("wrapped: %w", errBoom)
				}
				return nil
			})
			// The transaction is still usable after a failed Scan.
			after = len(scanKeysTx(tx))
			return scanErr
		})
		require.ErrorIs(t, scanErr, errBoom, "Scan returns the callback's error")
		require.ErrorIs(t, err, errBoom, "View returns fn's error")
		require.Equal(t, 2, visited, "the scan ends at the error")
		require.Equal(t, 3, after)
	}

	// In an Update, the error rolls back what the callback wrote.
	err := b.Update(t.Context(), func(tx store.Tx) error {
		return tx.Scan(bucket, nil, false, func(k, _ []byte) error {
			if err := tx.Put("other", k, k); err != nil {
				return err
			}
			return errBoom
		})
	})
	require.ErrorIs(t, err, errBoom)
	requireAbsent(t, b, "other", "p1")
}

// scanKeysTx returns copies of all keys of the test bucket, or nil on error.
func scanKeysTx(tx store.Tx) []string {
	var keys []string
	if err := tx.Scan(bucket, nil, false, func(k, _ []byte) error {
		keys = append(keys, string(k))
		return nil
	}); err != nil {
		return nil
	}
	return keys
}

func testScanManyKeys(t *testing.T, b store.Backend) {
	const n = 5000
	key := func(i int) []byte { return fmt.Appendf(nil, "m/%05d", i) }
	err := b.Update(t.Context(), func(tx store.Tx) error {
		for i := range n {
			if err := tx.Put(bucket, key(i), fmt.Appendf(nil, "value %d", i)); err != nil {
				return err
			}
		}
		// Keys around the range must not be visited.
		if err := tx.Put(bucket, []byte("m"), nil); err != nil {
			return err
		}
		if err := tx.Put(bucket, []byte("m."), nil); err != nil {
			return err
		}
		return tx.Put(bucket, []byte("m0"), nil)
	})
	require.NoError(t, err)

	for _, reverse := range []bool{false, true} {
		keys := scanKeys(t, b, bucket, []byte("m/"), reverse)
		require.Len(t, keys, n, "reverse %v", reverse)
		for i, k := range keys {
			want := i
			if reverse {
				want = n - 1 - i
			}
			if k != string(key(want)) {
				require.Equal(t, string(key(want)), k, "reverse %v, position %d", reverse, i)
			}
		}
	}
}

func testBucketsIndependent(t *testing.T, b store.Backend) {
	err := b.Update(t.Context(), func(tx store.Tx) error {
		for _, bk := range []string{"a", "ab", "b"} {
			if err := tx.Put(bk, []byte("k"), []byte("in "+bk)); err != nil {
				return err
			}
			if err := tx.Put(bk, []byte("only-"+bk), []byte(bk)); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, err)
	for _, bk := range []string{"a", "ab", "b"} {
		requireValue(t, b, bk, "k", "in "+bk)
		require.Equal(t, []string{"k", "only-" + bk}, scanKeys(t, b, bk, nil, false), "bucket %q", bk)
	}
	requireAbsent(t, b, "a", "only-b")

	err = b.Update(t.Context(), func(tx store.Tx) error { return tx.Delete("a", []byte("k")) })
	require.NoError(t, err)
	requireAbsent(t, b, "a", "k")
	requireValue(t, b, "ab", "k", "in ab")
	requireValue(t, b, "b", "k", "in b")
}

func testUpdateErrorRollsBack(t *testing.T, b store.Backend) {
	put(t, b, bucket, "keep", "old")
	put(t, b, bucket, "doomed", "still here")
	for _, fail := range []func() error{
		func() error { return errBoom },
		func() error { return fmt.Errorf("wrapped: %w", errBoom) },
	} {
		err := b.Update(t.Context(), func(tx store.Tx) error {
			if err := tx.Put(bucket, []byte("new"), []byte("v")); err != nil {
				return err
			}
			if err := tx.Put(bucket, []byte("keep"), []byte("overwritten")); err != nil {
				return err
			}
			if err := tx.Delete(bucket, []byte("doomed")); err != nil {
				return err
			}
			if err := tx.Put("newbucket", []byte("k"), []byte("v")); err != nil {
				return err
			}
			return fail()
		})
		require.ErrorIs(t, err, errBoom, "Update returns fn's error")
		requireAbsent(t, b, bucket, "new")
		requireValue(t, b, bucket, "keep", "old")
		requireValue(t, b, bucket, "doomed", "still here")
		requireAbsent(t, b, "newbucket", "k")
		require.Empty(t, scanKeys(t, b, "newbucket", nil, false))
	}
	// The backend still works.
	put(t, b, bucket, "after", "ok")
	requireValue(t, b, bucket, "after", "ok")
}

func testUpdateReadYourWrites(t *testing.T, b store.Backend) {
	put(t, b, bucket, "gone", "x")
	err := b.Update(t.Context(), func(tx store.Tx) error {
		if err := tx.Put(bucket, []byte("a"), []byte("1")); err != nil {
			return err
		}
		if err := tx.Put(bucket, []byte("b"), []byte("2")); err != nil {
			return err
		}
		if err := tx.Delete(bucket, []byte("gone")); err != nil {
			return err
		}
		v, err := tx.Get(bucket, []byte("a"))
		if err != nil || string(v) != "1" {
			return fmt.Errorf("Get a = %q, %v; want 1", v, err)
		}
		if _, err := tx.Get(bucket, []byte("gone")); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("Get deleted key: %v, want ErrNotFound", err)
		}
		if keys := scanKeysTx(tx); !slices.Equal(keys, []string{"a", "b"}) {
			return fmt.Errorf("Scan in Update = %q, want [a b]", keys)
		}
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, scanKeys(t, b, bucket, nil, false))
}

// concurrency is the number of goroutines of the concurrent tests.
const concurrency = 32

func testConcurrentWriters(t *testing.T, b store.Backend) {
	perWorker := 40
	if testing.Short() {
		perWorker = 10
	}
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, concurrency)
	for w := range concurrency {
		wg.Go(func() {
			own := fmt.Appendf(nil, "worker/%02d", w)
			for range perWorker {
				err := b.Update(ctx, func(tx store.Tx) error {
					if err := increment(tx, own); err != nil {
						return err
					}
					return increment(tx, []byte("counter"))
				})
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	err := b.View(ctx, func(tx store.Tx) error {
		total, err := readCounter(tx, []byte("counter"))
		if err != nil {
			return err
		}
		if total != uint64(concurrency*perWorker) {
			return fmt.Errorf("counter = %d, want %d (lost updates)", total, concurrency*perWorker)
		}
		for w := range concurrency {
			n, err := readCounter(tx, fmt.Appendf(nil, "worker/%02d", w))
			if err != nil {
				return err
			}
			if n != uint64(perWorker) {
				return fmt.Errorf("worker %d counter = %d, want %d", w, n, perWorker)
			}
		}
		return nil
	})
	require.NoError(t, err)
}

// increment adds one to the decimal counter under key, read-modify-write.
func increment(tx store.Tx, key []byte) error {
	n, err := readCounter(tx, key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return tx.Put(bucket, key, fmt.Appendf(nil, "%d", n+1))
}

func readCounter(tx store.Tx, key []byte) (uint64, error) {
	v, err := tx.Get(bucket, key)
	if err != nil {
		return 0, err
	}
	var n uint64
	if _, err := fmt.Sscanf(string(v), "%d", &n); err != nil {
		return 0, fmt.Errorf("counter %q = %q: %w", key, v, err)
	}
	return n, nil
}

func testConcurrentReadersWriters(t *testing.T, b store.Backend) {
	const writers, readers = concurrency / 2, concurrency / 2
	perWriter := 20
	if testing.Short() {
		perWriter = 5
	}
	ctx := t.Context()
	// Each Update sets "a" and "b" to the same new value, adds an item and
	// increments "count": a reader must see them agree.
	var wg sync.WaitGroup
	var stop atomic.Bool
	errs := make(chan error, writers+readers)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				err := b.Update(ctx, func(tx store.Tx) error {
					n, err := readCounter(tx, []byte("count"))
					if err != nil && !errors.Is(err, store.ErrNotFound) {
						return err
					}
					v := fmt.Appendf(nil, "%d", n+1)
					for _, k := range []string{"a", "count", "b"} {
						if err := tx.Put(bucket, []byte(k), v); err != nil {
							return err
						}
					}
					return tx.Put(bucket, fmt.Appendf(nil, "item/%02d/%03d", w, i), v)
				})
				if err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
			}
		})
	}
	var readersWG sync.WaitGroup
	for r := range readers {
		readersWG.Go(func() {
			for reads := 0; !stop.Load() || reads == 0; reads++ {
				err := b.View(ctx, func(tx store.Tx) error {
					count, err := readCounter(tx, []byte("count"))
					if errors.Is(err, store.ErrNotFound) {
						return nil // no write yet
					}
					if err != nil {
						return err
					}
					av, errA := readCounter(tx, []byte("a"))
					bv, errB := readCounter(tx, []byte("b"))
					if errA != nil || errB != nil || av != count || bv != count {
						return fmt.Errorf("inconsistent snapshot: a=%d (%v) b=%d (%v) count=%d", av, errA, bv, errB, count)
					}
					items := uint64(0)
					if err := tx.Scan(bucket, []byte("item/"), r%2 == 1, func(_, _ []byte) error {
						items++
						return nil
					}); err != nil {
						return err
					}
					if items != count {
						return fmt.Errorf("inconsistent snapshot: %d items, count=%d", items, count)
					}
					return nil
				})
				if err != nil {
					errs <- fmt.Errorf("reader %d: %w", r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	readersWG.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	v, err := get(t, b, bucket, "count")
	require.NoError(t, err)
	require.Equal(t, fmt.Sprint(writers*perWriter), string(v))
	require.Len(t, scanKeys(t, b, bucket, []byte("item/"), false), writers*perWriter)
}

func testCancelledBeforeView(t *testing.T, b store.Backend) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var ran atomic.Bool
	err := b.View(ctx, func(tx store.Tx) error {
		ran.Store(true)
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, ran.Load(), "fn must not run with a cancelled context")
}

func testCancelledBeforeUpdate(t *testing.T, b store.Backend) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var ran atomic.Bool
	err := b.Update(ctx, func(tx store.Tx) error {
		ran.Store(true)
		return tx.Put(bucket, []byte("k"), []byte("v"))
	})
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, ran.Load(), "fn must not run with a cancelled context")
	requireAbsent(t, b, bucket, "k")
}

func testCancelledDuringView(t *testing.T, b store.Backend) {
	put(t, b, bucket, "k", "v")
	for name, op := range map[string]func(tx store.Tx) error{
		"Get":  func(tx store.Tx) error { _, err := tx.Get(bucket, []byte("k")); return err },
		"Scan": func(tx store.Tx) error { return tx.Scan(bucket, nil, false, func(_, _ []byte) error { return nil }) },
	} {
		ctx, cancel := context.WithCancel(t.Context())
		var opErr error
		err := b.View(ctx, func(tx store.Tx) error {
			cancel()
			opErr = op(tx)
			return opErr
		})
		assert.ErrorIs(t, opErr, context.Canceled, "%s after cancel", name)
		assert.ErrorIs(t, err, context.Canceled, "View, %s after cancel", name)
	}
}

func testCancelledDuringUpdate(t *testing.T, b store.Backend) {
	put(t, b, bucket, "existing", "old")
	for name, op := range map[string]func(tx store.Tx) error{
		"Put":    func(tx store.Tx) error { return tx.Put(bucket, []byte("k2"), []byte("v")) },
		"Get":    func(tx store.Tx) error { _, err := tx.Get(bucket, []byte("existing")); return err },
		"Delete": func(tx store.Tx) error { return tx.Delete(bucket, []byte("existing")) },
		"Scan":   func(tx store.Tx) error { return tx.Scan(bucket, nil, false, func(_, _ []byte) error { return nil }) },
	} {
		ctx, cancel := context.WithCancel(t.Context())
		err := b.Update(ctx, func(tx store.Tx) error {
			if err := tx.Put(bucket, []byte("k1"), []byte("v")); err != nil {
				return err
			}
			if err := tx.Put(bucket, []byte("existing"), []byte("new")); err != nil {
				return err
			}
			cancel()
			return op(tx)
		})
		require.ErrorIs(t, err, context.Canceled, "%s after cancel", name)
		requireAbsent(t, b, bucket, "k1")
		requireAbsent(t, b, bucket, "k2")
		requireValue(t, b, bucket, "existing", "old")
	}
}

func testCancelledDuringUpdateIgnored(t *testing.T, b store.Backend) {
	// fn ignores the context error and returns nil: the store access after
	// the cancellation still makes Update fail and roll back.
	ctx, cancel := context.WithCancel(t.Context())
	err := b.Update(ctx, func(tx store.Tx) error {
		_ = tx.Put(bucket, []byte("k1"), []byte("v"))
		cancel()
		_ = tx.Put(bucket, []byte("k2"), []byte("v"))
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	requireAbsent(t, b, bucket, "k1")
	requireAbsent(t, b, bucket, "k2")
}

func testCloseThenUse(t *testing.T, b store.Backend) {
	put(t, b, bucket, "k", "v")
	require.NoError(t, b.Close())
	var ran atomic.Bool
	err := b.View(t.Context(), func(tx store.Tx) error { ran.Store(true); return nil })
	require.ErrorIs(t, err, store.ErrClosed, "View after Close")
	err = b.Update(t.Context(), func(tx store.Tx) error { ran.Store(true); return nil })
	require.ErrorIs(t, err, store.ErrClosed, "Update after Close")
	require.False(t, ran.Load(), "fn must not run after Close")
}

func testCloseTwice(t *testing.T, b store.Backend) {
	put(t, b, bucket, "k", "v")
	require.NoError(t, b.Close())
	require.NoError(t, b.Close(), "second Close")
	// Concurrent Close calls are fine too (the factory's cleanup adds one).
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { assert.NoError(t, b.Close()) })
	}
	wg.Wait()
}
