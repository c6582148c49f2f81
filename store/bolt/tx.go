package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/bbolt"

	"github.com/crux-go/crux/store"
)

// errTxDone reports use of a store.Tx after the function it was passed to
// returned. Such a Tx may share its bbolt transaction with other callers'
// functions, so it must not touch it.
var errTxDone = errors.New("store/bolt: transaction used after its function returned")

// appendFillPercent is how full bbolt fills the pages it splits in a
// bucket whose keys are appended (see tx.HintAppend). Other buckets keep
// bbolt's default, half full, which suits keys that land anywhere. Not
// quite full: records appended are often rewritten a little larger later
// (a fact gains superseded_by and valid_to when it is retired), and a page
// with no room left splits at the first such rewrite. Measured on 20,000
// facts, 0.8 used the fewest pages (0.7 and 0.95 both about 5% more).
const appendFillPercent = 0.8

// writeOnceFillPercent is the fill percent of a bucket whose values are
// never rewritten (see tx.HintWriteOnce): its pages can be filled.
const writeOnceFillPercent = 1.0

// scanCheckEvery is how many keys Scan visits between context checks.
const scanCheckEvery = 256

// emptyValue is returned for an empty stored value. Its capacity is zero, so
// a caller appending to it cannot write into shared memory.
var emptyValue = []byte{}

// tx implements store.Tx on a bbolt transaction. In a group commit, several
// tx values (one per Update fn, each with its fn's context) share one
// read-write bbolt transaction, one after the other.
type tx struct {
	ctx    context.Context
	btx    *bbolt.Tx
	w      *writeState // shared state of the read-write transaction; nil in a View
	rcache bucketCache // bucket cache of a View

	writes int   // write operations attempted through this tx
	ctxErr error // the context's error, once seen: every later call fails with it
	done   bool  // fn has returned
}

// writeState is shared by the tx values of one read-write bbolt transaction.
type writeState struct {
	gen       uint64 // incremented by every write; a running Scan then repositions
	buckets   bucketCache
	appending []string // buckets hinted as appended to
	writeOnce []string // buckets hinted as written once
	staged    []string // stages written to (see stage.go)
	log       []byte   // the commit's record for the log (see wal.go); nil when the log is off
}

// bucketCache remembers a few open buckets of a transaction, so repeated
// calls on the same buckets do not look them up again, and a cursor of
// each not in use, so that a Get or a Scan does not allocate one. (A
// query reads about six buckets.)
type bucketCache struct {
	names [8]string
	bs    [8]*bbolt.Bucket
	cs    [8]*bbolt.Cursor // a free cursor of bs[i], or nil
	next  int
}

func (c *bucketCache) get(name string) *bbolt.Bucket {
	for i, n := range c.names {
		if n == name && c.bs[i] != nil {
			return c.bs[i]
		}
	}
	return nil
}

func (c *bucketCache) put(name string, b *bbolt.Bucket) {
	c.names[c.next], c.bs[c.next], c.cs[c.next] = name, b, nil
	c.next = (c.next + 1) % len(c.names)
}

// cursor returns a cursor of b, the cached one if it is free; release it
// after use. Seek and First start from the bucket's root whatever the
// cursor did before, so a cursor serves any number of scans of one
// transaction, one at a time (a scan inside another's fn gets its own).
func (c *bucketCache) cursor(b *bbolt.Bucket) *bbolt.Cursor {
	for i, x := range c.bs {
		if x == b && c.cs[i] != nil {
			cur := c.cs[i]
			c.cs[i] = nil
			return cur
		}
	}
	return b.Cursor()
}

// release makes cur, of bucket b, the free cursor of b's cache entry.
func (c *bucketCache) release(b *bbolt.Bucket, cur *bbolt.Cursor) {
	for i, x := range c.bs {
		if x == b {
			c.cs[i] = cur
			return
		}
	}
}

// end marks the tx as finished: later calls fail.
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

func (t *tx) cache() *bucketCache {
	if t.w != nil {
		return &t.w.buckets
	}
	return &t.rcache
}

// bucket returns the named bucket, or nil if it does not exist.
func (t *tx) bucket(name string) *bbolt.Bucket {
	c := t.cache()
	if b := c.get(name); b != nil {
		return b
	}
	b := t.btx.Bucket([]byte(name))
	if b != nil {
		t.setFill(name, b)
		c.put(name, b)
	}
	return b
}

// writableBucket returns the named bucket, creating it if needed.
func (t *tx) writableBucket(name string) (*bbolt.Bucket, error) {
	c := t.cache()
	if b := c.get(name); b != nil {
		return b, nil
	}
	b, err := t.btx.CreateBucketIfNotExists([]byte(name))
	if err != nil {
		return nil, fmt.Errorf("store/bolt: create bucket %q: %w", name, err)
	}
	t.setFill(name, b)
	c.put(name, b)
	return b, nil
}

// setFill sets the fill percent of b, the bucket name just opened in a
// read-write transaction.
func (t *tx) setFill(name string, b *bbolt.Bucket) {
	switch {
	case t.w == nil:
	case slices.Contains(t.w.writeOnce, name):
		b.FillPercent = writeOnceFillPercent
	case slices.Contains(t.w.appending, name):
		b.FillPercent = appendFillPercent
	}
}

// HintAppend tells the transaction that the new keys of bucket mostly sort
// after the keys already there: the pages of bucket that this transaction
// splits are then filled to appendFillPercent instead of half. It
// implements [store.AppendHinter]; in a View it does nothing.
func (t *tx) HintAppend(bucket string) {
	if t.w == nil || t.done || slices.Contains(t.w.appending, bucket) {
		return
	}
	t.w.appending = append(t.w.appending, bucket)
	if b := t.cache().get(bucket); b != nil {
		b.FillPercent = appendFillPercent
	}
}

// HintWriteOnce tells the transaction that the values of bucket are never
// rewritten and its new keys sort after the old: the pages this
// transaction splits are then filled completely. It implements
// [store.WriteOnceHinter]; in a View it does nothing.
func (t *tx) HintWriteOnce(bucket string) {
	if t.w == nil || t.done || slices.Contains(t.w.writeOnce, bucket) {
		return
	}
	t.w.writeOnce = append(t.w.writeOnce, bucket)
	if b := t.cache().get(bucket); b != nil {
		b.FillPercent = writeOnceFillPercent
	}
}

// Get returns the value stored under key in bucket, or store.ErrNotFound.
// The value points into the transaction's memory and is valid only until
// the transaction ends; the caller must not modify it.
func (t *tx) Get(bucket string, key []byte) ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if bucket == "" || len(key) == 0 {
		return nil, store.ErrEmptyKey
	}
	if stage, ok := stages[bucket]; ok {
		return t.stageGet(bucket, stage, key)
	}
	return t.get(bucket, key)
}

// get is Get of a bucket, staged or not, as it is.
func (t *tx) get(bucket string, key []byte) ([]byte, error) {
	b := t.bucket(bucket)
	if b == nil {
		return nil, store.ErrNotFound
	}
	// bbolt's Bucket.Get cannot tell an empty value from a missing key.
	c := t.cache()
	cur := c.cursor(b)
	k, v := cur.Seek(key)
	c.release(b, cur)
	if k == nil || !bytes.Equal(k, key) {
		return nil, store.ErrNotFound
	}
	if v == nil {
		v = emptyValue
	}
	return v, nil
}

// Put stores a copy of value under a copy of key in bucket, creating the
// bucket if needed.
func (t *tx) Put(bucket string, key, value []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if t.w == nil {
		return fmt.Errorf("store/bolt: put in bucket %q: %w", bucket, store.ErrReadOnly)
	}
	if bucket == "" || len(key) == 0 {
		return store.ErrEmptyKey
	}
	if stage, ok := stages[bucket]; ok {
		return t.stagePut(stage, key, value)
	}
	return t.put(bucket, key, value)
}

// put is Put into a bucket, staged or not, as it is.
func (t *tx) put(bucket string, key, value []byte) error {
	t.writes++
	t.w.gen++
	b, err := t.writableBucket(bucket)
	if err != nil {
		return err
	}
	// bbolt keeps the slices until the commit; the caller may reuse them.
	// With the log on, they are the copies in the commit's record, which
	// is not written to until the commit.
	var k, v []byte
	mark := len(t.w.log)
	if t.w.log != nil {
		t.w.log, k, v = appendPut(t.w.log, bucket, key, value)
	} else {
		buf := make([]byte, len(key)+len(value))
		n := copy(buf, key)
		copy(buf[n:], value)
		k, v = buf[:n:n], buf[n:]
	}
	if err := b.Put(k, v); err != nil {
		t.w.log = t.w.log[:mark] // the put did not happen
		return fmt.Errorf("store/bolt: put in bucket %q: %w", bucket, err)
	}
	return nil
}

// Delete removes key from bucket. A missing key or bucket is not an error.
func (t *tx) Delete(bucket string, key []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if t.w == nil {
		return fmt.Errorf("store/bolt: delete in bucket %q: %w", bucket, store.ErrReadOnly)
	}
	if bucket == "" || len(key) == 0 {
		return store.ErrEmptyKey
	}
	if stage, ok := stages[bucket]; ok {
		if err := t.delete(stage, key); err != nil {
			return err
		}
	}
	return t.delete(bucket, key)
}

// delete is Delete from a bucket, staged or not, as it is.
func (t *tx) delete(bucket string, key []byte) error {
	b := t.bucket(bucket)
	if b == nil {
		return nil
	}
	t.writes++
	t.w.gen++
	if err := b.Delete(key); err != nil {
		return fmt.Errorf("store/bolt: delete in bucket %q: %w", bucket, err)
	}
	if t.w.log != nil {
		t.w.log = appendDelete(t.w.log, bucket, key)
	}
	return nil
}

// gen is the write generation of the transaction; it changes on every
// write.
func (t *tx) gen() uint64 {
	if t.w == nil {
		return 0
	}
	return t.w.gen
}

// Scan calls fn for each key of bucket starting with prefix, in ascending
// or, if reverse, descending order. Keys and values point into the
// transaction's memory and are valid only until the transaction ends; fn
// must not modify them. fn may write to the transaction, also to the bucket
// being scanned: the scan then continues after (before, if reverse) the last
// key visited, and sees the keys written there.
func (t *tx) Scan(bucket string, prefix []byte, reverse bool, fn func(key, value []byte) error) error {
	return t.scan(bucket, prefix, nil, reverse, fn)
}

// ScanFrom is Scan in ascending order, starting at the first key not less
// than from. It implements [store.Seeker].
func (t *tx) ScanFrom(bucket string, prefix, from []byte, fn func(key, value []byte) error) error {
	return t.scan(bucket, prefix, from, false, fn)
}

// scan is Scan, starting at from when it is set and greater than prefix
// (ascending scans only).
func (t *tx) scan(bucket string, prefix, from []byte, reverse bool, fn func(key, value []byte) error) error {
	if err := t.check(); err != nil {
		return err
	}
	if bucket == "" {
		return store.ErrEmptyKey
	}
	b := t.bucket(bucket)
	var s *bbolt.Bucket
	if stage, ok := stages[bucket]; ok {
		s = t.bucket(stage)
	}
	return t.scanBuckets(b, s, prefix, from, reverse, fn)
}

// seekLast positions c on the last key having prefix, or on the key before
// where it would be, and returns it. An empty prefix means the last key.
func seekLast(c *bbolt.Cursor, prefix []byte) ([]byte, []byte) {
	end := prefixEnd(prefix)
	if end == nil {
		return lastKey(c)
	}
	if k, _ := c.Seek(end); k == nil {
		return lastKey(c)
	}
	return c.Prev()
}

// lastKey is c.Last, except in a bucket whose every key this transaction
// deleted: its leaves are then all empty until the commit rebalances them,
// and bbolt's Last would look for a key in them forever.
func lastKey(c *bbolt.Cursor) ([]byte, []byte) {
	if k, _ := c.First(); k == nil {
		return nil, nil
	}
	return c.Last()
}

// reposition moves c to the key after (before, if reverse) last, which may
// have been deleted, and returns it.
func reposition(c *bbolt.Cursor, last []byte, reverse bool) ([]byte, []byte) {
	last = bytes.Clone(last)
	k, v := c.Seek(last)
	if !reverse {
		if k != nil && bytes.Equal(k, last) {
			return c.Next()
		}
		return k, v
	}
	if k == nil {
		return lastKey(c) // every key is < last
	}
	return c.Prev()
}

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

// Writable reports whether the transaction may write: true in Update, false
// in View.
func (t *tx) Writable() bool { return t.w != nil }
