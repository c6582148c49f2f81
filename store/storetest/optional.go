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

// testOptional checks each optional interface of package store that the
// backend implements against the fallback the store uses where a backend
// does not: over the same data, the method must give the answers and the
// errors of the fallback (for a hint or a prefetch, the answers of not
// calling it at all). A check of an interface the backend lacks is
// skipped. [store.CountSummer] and [store.ChangeLogger] are also checked
// by testSumCounts and testChangeLog.
//
// The checks share one backend, each in buckets of its own; Compact runs
// last, as it ends by closing the backend.
func testOptional(t *testing.T, b store.Backend) {
	t.Run("ScanFrom", func(t *testing.T) { testScanFrom(t, b) })
	t.Run("Prefetch", func(t *testing.T) { testPrefetch(t, b) })
	t.Run("Hints", func(t *testing.T) { testHints(t, b) })
	t.Run("SumCountsEdges", func(t *testing.T) { testSumCountsEdges(t, b) })
	t.Run("Compact", func(t *testing.T) { testCompact(t, b) })
}

// reading is one read's outcome, as a string to compare: the keys and
// values it returned, then its error, named by the sentinel it wraps.
func reading(out []string, err error) string {
	s := fmt.Sprintf("%q", out)
	for _, e := range []error{store.ErrNotFound, store.ErrEmptyKey, store.ErrReadOnly, store.ErrClosed, errBoom, context.Canceled} {
		if errors.Is(err, e) {
			return s + " error: " + e.Error()
		}
	}
	if err != nil {
		return s + " error: " + err.Error()
	}
	return s
}

// collect returns a callback that appends key=value to out, ending the
// scan with ErrStop once out has stopAt entries (never, when 0) or with
// errBoom as the failAt-th key's error (never, when 0).
func collect(out *[]string, stopAt, failAt int) func(k, v []byte) error {
	return func(k, v []byte) error {
		if failAt > 0 && len(*out)+1 == failAt {
			return fmt.Errorf("callback: %w", errBoom)
		}
		*out = append(*out, string(k)+"="+string(v))
		if stopAt > 0 && len(*out) == stopAt {
			return store.ErrStop
		}
		return nil
	}
}

// scanFromFallback is what the store does for ScanFrom on a Tx without
// [store.Seeker]: the prefix's ascending scan, skipping keys below from.
func scanFromFallback(tx store.Tx, bkt string, prefix, from []byte, fn func(k, v []byte) error) error {
	return tx.Scan(bkt, prefix, false, func(k, v []byte) error {
		if bytes.Compare(k, from) < 0 {
			return nil
		}
		return fn(k, v)
	})
}

// withReporting is b and b wrapped by store.Reporting, whose transactions
// pass each optional method on to b's, or to the store's fallback.
func withReporting(b store.Backend) map[string]store.Backend {
	return map[string]store.Backend{
		"backend":   b,
		"Reporting": store.Reporting(b, func(*store.CorruptRecordError) {}),
	}
}

// testScanFrom checks [store.Seeker]: ScanFrom of every prefix of
// scanKeySet's keys from keys below, inside, between and above them gives
// the keys, values and errors of the fallback, also when the callback
// stops or fails, in a missing bucket, with an empty bucket name, and in
// an Update over its own uncommitted writes.
func testScanFrom(t *testing.T, b store.Backend) {
	const bkt = "opt.seek"
	err := b.Update(t.Context(), func(tx store.Tx) error {
		for _, i := range []int{7, 3, 20, 0, 12, 5, 23, 1, 9, 15, 2, 18, 4, 22, 6, 11, 8, 19, 10, 14, 13, 21, 16, 17} {
			if err := tx.Put(bkt, []byte(scanKeySet[i]), []byte("v:"+scanKeySet[i])); err != nil {
				return err
			}
		}
		return tx.Put(bkt+"x", []byte("a"), []byte("other"))
	})
	require.NoError(t, err)
	prefixes := []string{"", "\x00", "a", "a\xfe", "a\xff", "a\xff\xff", "ab", "b", "c", "\xff", "\xff\xff", "\xff\xff\xff\xff"}
	froms := []string{"", "\x00", "\x01", "a\xff\xff\xff\xff\xff", "az", "\xff\xff\xff\xff"}
	for _, k := range scanKeySet {
		froms = append(froms, k, k+"\x00", k[:len(k)-1])
	}
	compare := func(t *testing.T, tx store.Tx, s store.Seeker, bkt string, prefix, from []byte) {
		t.Helper()
		for _, c := range []struct{ stop, fail int }{{0, 0}, {1, 0}, {2, 0}, {0, 1}, {0, 3}} {
			var got, want []string
			gotErr := s.ScanFrom(bkt, prefix, from, collect(&got, c.stop, c.fail))
			wantErr := scanFromFallback(tx, bkt, prefix, from, collect(&want, c.stop, c.fail))
			assert.Equal(t, reading(want, wantErr), reading(got, gotErr),
				"ScanFrom(%q, prefix %q, from %q), stop at %d, fail at %d", bkt, prefix, from, c.stop, c.fail)
		}
	}
	for name, b := range withReporting(b) {
		t.Run(name, func(t *testing.T) {
			err := b.View(t.Context(), func(tx store.Tx) error {
				s, ok := tx.(store.Seeker)
				if !ok {
					t.Skip("the backend's Tx has no ScanFrom")
				}
				for _, prefix := range prefixes {
					for _, from := range froms {
						compare(t, tx, s, bkt, []byte(prefix), []byte(from))
					}
					compare(t, tx, s, bkt, []byte(prefix), nil)
					compare(t, tx, s, "opt.nobucket", []byte(prefix), []byte("a"))
				}
				compare(t, tx, s, "", nil, []byte("a"))
				return nil
			})
			require.NoError(t, err)
			// In an Update, over writes and deletes not yet committed.
			err = b.Update(t.Context(), func(tx store.Tx) error {
				s, ok := tx.(store.Seeker)
				if !ok {
					t.Skip("the backend's Tx has no ScanFrom in an Update")
				}
				for _, k := range []string{"a\x01", "ab\x00", "abc", "a\xff\xff\xff\xff", "b\x01"} {
					if err := tx.Put(bkt, []byte(k), []byte("new:"+k)); err != nil {
						return err
					}
				}
				for _, k := range []string{"a", "abd", "a\xff\x00", "\xff"} {
					if err := tx.Delete(bkt, []byte(k)); err != nil {
						return err
					}
				}
				for _, prefix := range prefixes {
					for _, from := range froms {
						compare(t, tx, s, bkt, []byte(prefix), []byte(from))
					}
				}
				return errBoom // roll back
			})
			require.ErrorIs(t, err, errBoom)
		})
	}
}

// prefetchReads are the reads of testPrefetch: Gets of keys present,
// missing and empty, and scans of prefixes both ways, some stopped early.
func prefetchReads(tx store.Tx, bkt string) []string {
	var out []string
	for _, k := range []string{"p/00", "p/07", "p/49", "p/50", "p/0", "q/03", "missing", "", "new/1", "new/2"} {
		v, err := tx.Get(bkt, []byte(k))
		var got []string
		if err == nil {
			got = []string{string(v)}
		}
		out = append(out, "Get "+k+": "+reading(got, err))
	}
	_, err := tx.Get("opt.nobucket", []byte("k"))
	out = append(out, "Get of a missing bucket: "+reading(nil, err))
	for _, prefix := range []string{"", "p/", "p/1", "q/", "new/", "none/"} {
		for _, reverse := range []bool{false, true} {
			for _, stop := range []int{0, 3} {
				var got []string
				err := tx.Scan(bkt, []byte(prefix), reverse, collect(&got, stop, 0))
				out = append(out, fmt.Sprintf("Scan %q reverse %v stop %d: %s", prefix, reverse, stop, reading(got, err)))
			}
		}
	}
	return out
}

// prefetchAll announces every read of prefetchReads, and a few that
// never come (invalid, or of a missing bucket).
func prefetchAll(p store.Prefetcher, bkt string) {
	var keys [][]byte
	for _, k := range []string{"p/00", "p/07", "p/49", "p/50", "p/0", "q/03", "missing", "", "new/1", "new/2"} {
		keys = append(keys, []byte(k))
	}
	p.Prefetch(bkt, keys)
	p.Prefetch(bkt, nil)
	p.Prefetch("", keys)
	p.Prefetch("opt.nobucket", [][]byte{[]byte("k")})
	for _, prefix := range []string{"", "p/", "p/1", "q/", "new/", "none/"} {
		p.PrefetchScan(bkt, []byte(prefix), false)
		p.PrefetchScan(bkt, []byte(prefix), true)
	}
	p.PrefetchScan("", nil, false)
	p.PrefetchScan("opt.nobucket", []byte("p/"), true)
}

// prefetchWrites writes to bkt in an Update: new keys, overwrites and
// deletes, some of keys prefetched before.
func prefetchWrites(tx store.Tx, bkt string) error {
	for _, k := range []string{"p/07", "new/1", "q/03", "p/11"} {
		if err := tx.Put(bkt, []byte(k), []byte("rewritten "+k)); err != nil {
			return err
		}
	}
	for _, k := range []string{"p/00", "p/49", "q/00", "new/2"} {
		if err := tx.Delete(bkt, []byte(k)); err != nil {
			return err
		}
	}
	return nil
}

// testPrefetch checks [store.Prefetcher]: a transaction that announces
// its reads, before them or between them, and before or after its own
// writes, reads what one that does not reads.
func testPrefetch(t *testing.T, b store.Backend) {
	const bkt = "opt.prefetch"
	require.NoError(t, b.Update(t.Context(), func(tx store.Tx) error {
		for i := range 50 {
			if err := tx.Put(bkt, fmt.Appendf(nil, "p/%02d", i), fmt.Appendf(nil, "value %d", i)); err != nil {
				return err
			}
		}
		for i := range 5 {
			if err := tx.Put(bkt, fmt.Appendf(nil, "q/%02d", i), nil); err != nil {
				return err
			}
		}
		return nil
	}))
	var plainView, plainUpdate []string
	require.NoError(t, b.View(t.Context(), func(tx store.Tx) error {
		plainView = prefetchReads(tx, bkt)
		return nil
	}))
	require.ErrorIs(t, b.Update(t.Context(), func(tx store.Tx) error {
		if err := prefetchWrites(tx, bkt); err != nil {
			return err
		}
		plainUpdate = prefetchReads(tx, bkt)
		return errBoom
	}), errBoom)
	for name, b := range withReporting(b) {
		t.Run(name, func(t *testing.T) {
			var got []string
			require.NoError(t, b.View(t.Context(), func(tx store.Tx) error {
				p, ok := tx.(store.Prefetcher)
				if !ok {
					t.Skip("the backend's Tx has no Prefetch")
				}
				prefetchAll(p, bkt)
				got = prefetchReads(tx, bkt)
				return nil
			}))
			assert.Equal(t, plainView, got, "a View that prefetched first")
			require.NoError(t, b.View(t.Context(), func(tx store.Tx) error {
				got = got[:0]
				reads := prefetchReads(tx, bkt) // read once, prefetch what was read, read again
				prefetchAll(tx.(store.Prefetcher), bkt)
				got = append(reads, prefetchReads(tx, bkt)...)
				return nil
			}))
			assert.Equal(t, append(slices.Clone(plainView), plainView...), got, "a View that prefetched between reads")
			for _, before := range []bool{true, false} {
				require.ErrorIs(t, b.Update(t.Context(), func(tx store.Tx) error {
					p, ok := tx.(store.Prefetcher)
					if !ok {
						t.Skip("the backend's Tx has no Prefetch in an Update")
					}
					if before {
						prefetchAll(p, bkt)
					}
					if err := prefetchWrites(tx, bkt); err != nil {
						return err
					}
					if !before {
						prefetchAll(p, bkt)
					}
					got = prefetchReads(tx, bkt)
					return errBoom
				}), errBoom)
				assert.Equal(t, plainUpdate, got, "an Update that prefetched before its writes: %v", before)
			}
			// Nothing leaked from the Updates rolled back.
			require.NoError(t, b.View(t.Context(), func(tx store.Tx) error {
				got = prefetchReads(tx, bkt)
				return nil
			}))
			assert.Equal(t, plainView, got, "a View after the Updates rolled back")
		})
	}
}

// hintOps writes to bkt what testHints compares: keys appended in order,
// a few before them, overwrites (longer values), and deletes, including
// of keys written in the same transaction. writeOnce leaves out the
// overwrites, which a bucket hinted as written once does not get.
func hintOps(tx store.Tx, bkt string, round int, writeOnce bool) error {
	for i := range 400 {
		k := fmt.Appendf(nil, "id/%02d/%04d", round, i)
		if err := tx.Put(bkt, k, bytes.Repeat([]byte{byte('a' + i%26)}, 20+i%90)); err != nil {
			return err
		}
	}
	if err := tx.Put(bkt, fmt.Appendf(nil, "early/%02d", round), []byte("before the others")); err != nil {
		return err
	}
	for i := 0; i < 400; i += 7 {
		k := fmt.Appendf(nil, "id/%02d/%04d", round, i)
		if !writeOnce {
			if err := tx.Put(bkt, k, bytes.Repeat([]byte("rewritten longer "), 1+i%5)); err != nil {
				return err
			}
		}
		if i%3 == 0 {
			if err := tx.Delete(bkt, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// dump returns every key=value of bkt, ascending then descending.
func dump(tx store.Tx, bkt string) string {
	var up, down []string
	err := tx.Scan(bkt, nil, false, collect(&up, 0, 0))
	err2 := tx.Scan(bkt, nil, true, collect(&down, 0, 0))
	return reading(up, err) + "\nreverse: " + reading(down, err2)
}

// testHints checks [store.AppendHinter] and [store.WriteOnceHinter]: a
// bucket whose writes the transaction hinted holds what one without the
// hint holds, during the transaction and after its commit or rollback; a
// hint in a View changes nothing.
func testHints(t *testing.T, b store.Backend) {
	for _, kind := range []string{"append", "write-once"} {
		t.Run(kind, func(t *testing.T) {
			hinted, plain := "opt.hint."+kind, "opt.plain."+kind
			hint := func(tx store.Tx, bkt string) bool {
				if h, ok := tx.(store.AppendHinter); ok && kind == "append" {
					h.HintAppend(bkt)
					return true
				}
				if h, ok := tx.(store.WriteOnceHinter); ok && kind == "write-once" {
					h.HintWriteOnce(bkt)
					return true
				}
				return false
			}
			for round := range 3 {
				commit := round != 1
				err := b.Update(t.Context(), func(tx store.Tx) error {
					if !hint(tx, hinted) {
						t.Skipf("the backend's Tx takes no %s hint", kind)
					}
					if err := hintOps(tx, hinted, round, kind == "write-once"); err != nil {
						return err
					}
					hint(tx, hinted) // again, after writes
					if err := hintOps(tx, plain, round, kind == "write-once"); err != nil {
						return err
					}
					assert.Equal(t, dump(tx, plain), dump(tx, hinted), "round %d, before the commit", round)
					if !commit {
						return errBoom
					}
					return nil
				})
				if commit {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, errBoom)
				}
				require.NoError(t, b.View(t.Context(), func(tx store.Tx) error {
					assert.Equal(t, dump(tx, plain), dump(tx, hinted), "round %d, after the Update (commit: %v)", round, commit)
					hint(tx, hinted)
					assert.Equal(t, dump(tx, plain), dump(tx, hinted), "round %d, after a hint in a View", round)
					return nil
				}))
			}
		})
	}
}

// testSumCountsEdges checks [store.CountSummer] where testSumCounts does
// not: in a missing bucket and with an empty bucket name it answers as
// the scan does.
func testSumCountsEdges(t *testing.T, b store.Backend) {
	require.NoError(t, b.View(t.Context(), func(tx store.Tx) error {
		cs, ok := tx.(store.CountSummer)
		if !ok {
			t.Skip("the backend has no CountSummer")
		}
		for _, bkt := range []string{"opt.nobucket", ""} {
			keys := 0
			wantErr := tx.Scan(bkt, nil, false, func(_, _ []byte) error { keys++; return nil })
			sum, n, err := cs.SumCounts(bkt, nil, 10, 100)
			assert.Equal(t, reading([]string{"0", fmt.Sprint(keys)}, wantErr),
				reading([]string{fmt.Sprint(sum), fmt.Sprint(n)}, err), "SumCounts of bucket %q", bkt)
		}
		return nil
	}))
}

// testCompact checks [store.Compacter], whose fallback is to do nothing:
// after Compact every bucket holds what it held, Views and Updates run
// meanwhile neither fail nor see a partial state, the backend goes on
// working, a cancelled context's error is returned and, after Close,
// store.ErrClosed. It closes the backend.
func testCompact(t *testing.T, b store.Backend) {
	c, ok := b.(store.Compacter)
	if !ok {
		t.Skip("the backend has no Compact")
	}
	ctx := t.Context()
	buckets := []string{"opt.compact.a", "opt.compact.b", "opt.compact.big"}
	for round := range 4 {
		require.NoError(t, b.Update(ctx, func(tx store.Tx) error {
			for i := range 500 {
				k := fmt.Appendf(nil, "k/%04d", i)
				for j, bkt := range buckets[:2] {
					if (i+round+j)%5 == 0 {
						if err := tx.Delete(bkt, k); err != nil {
							return err
						}
						continue
					}
					if err := tx.Put(bkt, k, bytes.Repeat(fmt.Appendf(nil, "%d.%d.", round, i), 1+i%40)); err != nil {
						return err
					}
				}
			}
			// A large value, replaced every round, and deleted in the last.
			if round == 3 {
				return tx.Delete(buckets[2], []byte("large"))
			}
			if err := tx.Put(buckets[2], []byte("large"), bytes.Repeat([]byte{byte(round)}, 1<<20)); err != nil {
				return err
			}
			return tx.Put(buckets[2], fmt.Appendf(nil, "kept/%d", round), []byte("small"))
		}))
	}
	snapshot := func() []string {
		var out []string
		require.NoError(t, b.View(ctx, func(tx store.Tx) error {
			out = out[:0]
			for _, bkt := range buckets {
				out = append(out, bkt+": "+dump(tx, bkt))
			}
			return nil
		}))
		return out
	}
	before := snapshot()

	// Readers and a writer run while it compacts: the writer keeps "a" and
	// "b" equal, and counts its commits in "n".
	const counters = "opt.compact.counters"
	var stop atomic.Bool
	var commits atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	wg.Go(func() {
		for i := 1; !stop.Load() || i == 1; i++ {
			v := fmt.Appendf(nil, "%d", i)
			if err := b.Update(ctx, func(tx store.Tx) error {
				for _, k := range []string{"a", "b", "n"} {
					if err := tx.Put(counters, []byte(k), v); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				errs <- fmt.Errorf("Update during Compact: %w", err)
				return
			}
			commits.Store(int64(i))
		}
	})
	for r := range 3 {
		wg.Go(func() {
			for reads := 0; !stop.Load() || reads == 0; reads++ {
				if err := b.View(ctx, func(tx store.Tx) error {
					a, errA := tx.Get(counters, []byte("a"))
					bv, errB := tx.Get(counters, []byte("b"))
					if reading(nil, errA) != reading(nil, errB) || !bytes.Equal(a, bv) {
						return fmt.Errorf("a partial state: a=%q (%v), b=%q (%v)", a, errA, bv, errB)
					}
					if _, err := tx.Get(buckets[r%2], []byte("k/0002")); err != nil && !errors.Is(err, store.ErrNotFound) {
						return err
					}
					return nil
				}); err != nil {
					errs <- fmt.Errorf("View %d during Compact: %w", r, err)
					return
				}
			}
		})
	}
	compactErr := c.Compact(ctx)
	stop.Store(true)
	wg.Wait()
	close(errs)
	require.NoError(t, compactErr, "Compact")
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, before, snapshot(), "the buckets after Compact")
	requireValue(t, b, counters, "n", fmt.Sprint(commits.Load()))

	// Again, then the backend goes on working.
	require.NoError(t, c.Compact(ctx), "a second Compact")
	assert.Equal(t, before, snapshot(), "the buckets after a second Compact")
	put(t, b, buckets[0], "after", "compact")
	requireValue(t, b, buckets[0], "after", "compact")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, c.Compact(cancelled), context.Canceled, "Compact with a cancelled context")
	requireValue(t, b, buckets[0], "after", "compact")

	require.NoError(t, b.Close())
	require.ErrorIs(t, c.Compact(ctx), store.ErrClosed, "Compact after Close")
}
