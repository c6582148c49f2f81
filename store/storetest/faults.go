package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/crux-go/crux/store"
)

// ErrInjected is the error a [Faulty] backend returns from the operation
// it was armed to fail.
var ErrInjected = errors.New("storetest: injected fault")

// Op is a kind of operation a [Faulty] backend counts.
type Op string

// The operations a Faulty backend counts, and may fail.
const (
	OpBegin  Op = "begin"     // View or Update starts: fn is not run
	OpGet    Op = "get"       // Tx.Get
	OpPut    Op = "put"       // Tx.Put
	OpDelete Op = "delete"    // Tx.Delete
	OpScan   Op = "scan"      // Tx.Scan starts
	OpStep   Op = "scan step" // Tx.Scan is about to hand a key to its callback
	OpCommit Op = "commit"    // Update's fn returned nil: the transaction is rolled back instead
)

// Faulty wraps a [store.Backend] and fails one chosen operation with
// [ErrInjected], to check that a failure at any point leaves the store as
// it was. It counts every operation (see [Op]) from the last [Faulty.Arm];
// armed with n, it fails the n-th and lets every other one through. A
// failed commit makes Update return ErrInjected without committing, as a
// backend whose commit fails must.
//
// Faulty remembers the name of every bucket an operation names, so that
// [Faulty.Snapshot] can read them all back: wrap the backend while it is
// still empty, or pass the names of the buckets it already holds to
// [NewFaulty]. A Faulty is safe for concurrent use, but the count is only
// meaningful for one caller at a time.
type Faulty struct {
	inner store.Backend

	mu       sync.Mutex
	failAt   int // 1-based; 0 never fails
	ops      int
	injected Op // the operation that failed since the last Arm; "" if none
	buckets  map[string]bool
}

var _ store.Backend = (*Faulty)(nil)

// NewFaulty returns b wrapped, disarmed: it fails nothing until
// [Faulty.Arm]. buckets names buckets b already holds.
func NewFaulty(b store.Backend, buckets ...string) *Faulty {
	f := &Faulty{inner: b, buckets: map[string]bool{}}
	for _, name := range buckets {
		f.buckets[name] = true
	}
	return f
}

// Arm resets the count of operations and makes the n-th operation from now
// fail; n = 0 disarms the backend.
func (f *Faulty) Arm(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failAt, f.ops, f.injected = n, 0, ""
}

// Ops is the number of operations counted since the last Arm.
func (f *Faulty) Ops() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops
}

// Injected reports the operation that failed since the last Arm, if any.
func (f *Faulty) Injected() (Op, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected, f.injected != ""
}

// step counts one operation on bucket ("" for none) and reports whether it
// must fail.
func (f *Faulty) step(op Op, bucket string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if bucket != "" {
		f.buckets[bucket] = true
	}
	f.ops++
	if f.ops != f.failAt {
		return nil
	}
	f.injected = op
	return fmt.Errorf("%w: %s, operation %d", ErrInjected, op, f.ops)
}

// View runs fn in a read-only transaction of the wrapped backend.
func (f *Faulty) View(ctx context.Context, fn func(store.Tx) error) error {
	if err := f.step(OpBegin, ""); err != nil {
		return err
	}
	return f.inner.View(ctx, func(tx store.Tx) error { return fn(&faultyTx{f: f, tx: tx}) })
}

// Update runs fn in a read-write transaction of the wrapped backend. A
// failure injected at the commit rolls the transaction back.
func (f *Faulty) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := f.step(OpBegin, ""); err != nil {
		return err
	}
	return f.inner.Update(ctx, func(tx store.Tx) error {
		if err := fn(&faultyTx{f: f, tx: tx}); err != nil {
			return err
		}
		return f.step(OpCommit, "")
	})
}

// Close closes the wrapped backend.
func (f *Faulty) Close() error { return f.inner.Close() }

// Snapshot is the content of a backend: bucket → key → value. Empty
// buckets are left out.
type Snapshot map[string]map[string]string

// Snapshot reads every bucket the backend has seen, in one read-only
// transaction of the wrapped backend; it is not counted and never fails by
// injection.
func (f *Faulty) Snapshot(ctx context.Context) (Snapshot, error) {
	f.mu.Lock()
	buckets := slices.Sorted(maps.Keys(f.buckets))
	f.mu.Unlock()
	s := Snapshot{}
	err := f.inner.View(ctx, func(tx store.Tx) error {
		for _, b := range buckets {
			err := tx.Scan(b, nil, false, func(k, v []byte) error {
				if s[b] == nil {
					s[b] = map[string]string{}
				}
				s[b][string(k)] = string(v)
				return nil
			})
			if err != nil {
				return fmt.Errorf("bucket %s: %w", b, err)
			}
		}
		return nil
	})
	return s, err
}

// Diff describes how o differs from s, one line per key (at most limit
// lines), or returns nil when they are equal.
func (s Snapshot) Diff(o Snapshot, limit int) []string {
	var out []string
	add := func(format string, args ...any) {
		if len(out) < limit {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	for _, b := range slices.Sorted(maps.Keys(s)) {
		for _, k := range slices.Sorted(maps.Keys(s[b])) {
			v, ok := o[b][k]
			switch {
			case !ok:
				add("%s %q: deleted", b, k)
			case v != s[b][k]:
				add("%s %q: changed", b, k)
			}
		}
	}
	for _, b := range slices.Sorted(maps.Keys(o)) {
		for _, k := range slices.Sorted(maps.Keys(o[b])) {
			if _, ok := s[b][k]; !ok {
				add("%s %q: added", b, k)
			}
		}
	}
	return out
}

// faultyTx counts and may fail each operation of a transaction.
type faultyTx struct {
	f  *Faulty
	tx store.Tx
}

func (t *faultyTx) Get(bucket string, key []byte) ([]byte, error) {
	if err := t.f.step(OpGet, bucket); err != nil {
		return nil, err
	}
	return t.tx.Get(bucket, key)
}

func (t *faultyTx) Put(bucket string, key, value []byte) error {
	if err := t.f.step(OpPut, bucket); err != nil {
		return err
	}
	return t.tx.Put(bucket, key, value)
}

func (t *faultyTx) Delete(bucket string, key []byte) error {
	if err := t.f.step(OpDelete, bucket); err != nil {
		return err
	}
	return t.tx.Delete(bucket, key)
}

func (t *faultyTx) Scan(bucket string, prefix []byte, reverse bool, fn func(key, value []byte) error) error {
	if err := t.f.step(OpScan, bucket); err != nil {
		return err
	}
	return t.tx.Scan(bucket, prefix, reverse, func(k, v []byte) error {
		if err := t.f.step(OpStep, ""); err != nil {
			return err
		}
		return fn(k, v)
	})
}

func (t *faultyTx) Writable() bool { return t.tx.Writable() }
