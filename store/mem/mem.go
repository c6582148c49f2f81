// Package mem is an in-memory [store.Backend]: a crux server without a
// disk, for tests of code that embeds crux and for programs whose memory
// needs to last no longer than the process.
//
// It keeps every bucket as a sorted tree in the process's memory, and
// nothing else: nothing is written anywhere, and everything is lost when
// the process ends or the DB is closed. It passes the conformance suite
// of package storetest in full.
//
// Transactions are serialisable. Updates run one at a time, each on a
// private copy of the state that is published whole when it commits, so a
// failed or cancelled Update leaves nothing behind. A View reads the state
// as the last commit before it began left it, for as long as it runs,
// and never waits for an Update, nor an Update for a View. Copying the
// state costs no more than the keys a transaction writes: the trees are
// immutable, and a write copies only the path from the root to its key.
// A View holds on to the state it reads, so memory of values overwritten
// or deleted since is freed once the Views older than that write end.
//
// Limits: everything must fit in memory, at some 80 bytes per key
// besides the key's and value's own bytes; keys are at most 32 KiB (as
// in store/bolt); an Update inside another transaction's function
// deadlocks. The DB does not implement [store.Compacter]: a purge leaves
// purged values in memory the Go runtime has freed, until it reuses it.
package mem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/crux-go/crux/store"
)

// MaxKeySize is the length of the longest key [DB] stores, as the store
// contract allows: 32 KiB.
const MaxKeySize = 32 << 10

// scanCheckEvery is how many keys Scan visits between checks of its
// context.
const scanCheckEvery = 256

// errTxDone reports use of a store.Tx after the function it was passed to
// returned.
var errTxDone = errors.New("store/mem: transaction used after its function returned")

// DB is an in-memory [store.Backend]. It is safe for concurrent use by
// multiple goroutines. The zero value is not usable: call [New].
type DB struct {
	write  sync.Mutex               // held by the Update running, and by Close
	state  atomic.Pointer[snapshot] // the last committed state
	closed atomic.Bool
}

// snapshot is a committed state: the root of each bucket's tree. Neither
// the map nor the trees change once published; an empty bucket has no
// entry.
type snapshot struct {
	buckets map[string]*node
}

var (
	_ store.Backend = (*DB)(nil)
	_ store.Seeker  = (*tx)(nil)
)

// New returns an empty DB.
func New() *DB {
	db := &DB{}
	db.state.Store(&snapshot{buckets: map[string]*node{}})
	return db
}

// View runs fn in a read-only transaction on the state of the last
// commit. It returns fn's error; store.ErrClosed after Close; ctx's error,
// without running fn, if ctx is already done.
func (db *DB) View(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if db.closed.Load() {
		return fmt.Errorf("store/mem: view: %w", store.ErrClosed)
	}
	t := &tx{ctx: ctx, buckets: db.state.Load().buckets}
	defer t.end()
	return fn(t)
}

// Update runs fn in a read-write transaction and commits it when fn
// returns nil and ctx is not done, publishing its writes to every later
// transaction at once. fn runs exactly once. It returns fn's error, or
// ctx's error if ctx ended while fn ran (committing nothing, even if fn
// returned nil), or store.ErrClosed after Close.
func (db *DB) Update(ctx context.Context, fn func(store.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	db.write.Lock()
	defer db.write.Unlock()
	if db.closed.Load() {
		return fmt.Errorf("store/mem: update: %w", store.ErrClosed)
	}
	t := &tx{ctx: ctx, buckets: db.state.Load().buckets, writable: true}
	err := fn(t)
	t.end()
	if err == nil {
		err = t.ctxErr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return err
	}
	if t.owned {
		db.state.Store(&snapshot{buckets: t.buckets})
	}
	return nil
}

// Close releases the DB's data, once the Update running (if any) has
// ended. Later calls of View and Update fail with store.ErrClosed; Views
// already running go on reading their state. Close is idempotent and
// always returns nil.
func (db *DB) Close() error {
	if db.closed.Swap(true) {
		return nil
	}
	db.write.Lock()
	defer db.write.Unlock()
	db.state.Store(&snapshot{buckets: map[string]*node{}})
	return nil
}

// tx is one transaction: the roots of the buckets as it sees them. An
// Update copies the map at its first write (owned), and each write
// replaces a bucket's root with the root of a new tree.
type tx struct {
	ctx      context.Context
	buckets  map[string]*node
	owned    bool // buckets is this transaction's own copy
	writable bool
	ctxErr   error // the context's error, once seen: every later call fails with it
	done     bool  // fn has returned
}

func (t *tx) end() { t.done = true }

// check fails if the tx is finished or its context is done.
func (t *tx) check() error {
	if t.done {
		return errTxDone
	}
	if t.ctxErr != nil {
		return t.ctxErr
	}
	if err := t.ctx.Err(); err != nil {
		t.ctxErr = err
		return err
	}
	return nil
}

// Get returns the value stored under key in bucket, or store.ErrNotFound.
// The value is shared with other transactions: the caller must not
// modify it.
func (t *tx) Get(bucket string, key []byte) ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if bucket == "" || len(key) == 0 {
		return nil, store.ErrEmptyKey
	}
	n := get(t.buckets[bucket], key)
	if n == nil {
		return nil, store.ErrNotFound
	}
	return n.val, nil
}

// writeCheck fails as Put and Delete of key in bucket must.
func (t *tx) writeCheck(op, bucket string, key []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if !t.writable {
		return fmt.Errorf("store/mem: %s in bucket %q: %w", op, bucket, store.ErrReadOnly)
	}
	if bucket == "" || len(key) == 0 {
		return store.ErrEmptyKey
	}
	if !t.owned {
		t.buckets, t.owned = maps.Clone(t.buckets), true
	}
	return nil
}

// Put stores a copy of value under a copy of key in bucket.
func (t *tx) Put(bucket string, key, value []byte) error {
	if err := t.writeCheck("put", bucket, key); err != nil {
		return err
	}
	if len(key) > MaxKeySize {
		return fmt.Errorf("store/mem: put in bucket %q: key of %d bytes, longer than the %d allowed", bucket, len(key), MaxKeySize)
	}
	buf := make([]byte, len(key)+len(value))
	n := copy(buf, key)
	copy(buf[n:], value)
	t.buckets[bucket] = insert(t.buckets[bucket], buf[:n:n], buf[n:])
	return nil
}

// Delete removes key from bucket. A missing key or bucket is not an error.
func (t *tx) Delete(bucket string, key []byte) error {
	if err := t.writeCheck("delete", bucket, key); err != nil {
		return err
	}
	root, ok := remove(t.buckets[bucket], key)
	switch {
	case !ok:
	case root == nil:
		delete(t.buckets, bucket)
	default:
		t.buckets[bucket] = root
	}
	return nil
}

// Scan calls fn for each key of bucket starting with prefix, in ascending
// or, if reverse, descending order. Keys and values are shared with other
// transactions: fn must not modify them. fn may write to the transaction,
// also to the bucket being scanned: the scan then continues after (before,
// if reverse) the last key visited, and sees the keys written there.
func (t *tx) Scan(bucket string, prefix []byte, reverse bool, fn func(key, value []byte) error) error {
	return t.scan(bucket, prefix, nil, reverse, fn)
}

// ScanFrom is Scan in ascending order, starting at the first key not less
// than from. It implements [store.Seeker].
func (t *tx) ScanFrom(bucket string, prefix, from []byte, fn func(key, value []byte) error) error {
	return t.scan(bucket, prefix, from, false, fn)
}

// scan is Scan, starting at from when it is greater than prefix
// (ascending scans only).
func (t *tx) scan(bucket string, prefix, from []byte, reverse bool, fn func(key, value []byte) error) error {
	if err := t.check(); err != nil {
		return err
	}
	if bucket == "" {
		return store.ErrEmptyKey
	}
	root := t.buckets[bucket]
	c := cursor{reverse: reverse}
	switch {
	case reverse:
		c.seek(root, prefixEnd(prefix), true)
	case bytes.Compare(from, prefix) > 0:
		c.seek(root, from, false)
	default:
		c.seek(root, prefix, false)
	}
	for i := 1; ; i++ {
		n := c.next()
		if n == nil || !bytes.HasPrefix(n.key, prefix) {
			return nil
		}
		if i%scanCheckEvery == 0 {
			if err := t.check(); err != nil {
				return err
			}
		}
		if err := fn(n.key, n.val); err != nil {
			if errors.Is(err, store.ErrStop) {
				return nil
			}
			return err
		}
		if now := t.buckets[bucket]; now != root {
			// fn wrote to the bucket: go on in the tree it left.
			root = now
			c.seek(root, n.key, true)
		}
	}
}

// Writable reports whether the transaction may write: true in Update,
// false in View.
func (t *tx) Writable() bool { return t.writable }

// prefixEnd returns the smallest key greater than every key having prefix,
// or nil if there is none (prefix is empty or all 0xff bytes).
func prefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xff {
			end := bytes.Clone(prefix[:i+1])
			end[i]++
			return end
		}
	}
	return nil
}
