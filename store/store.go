// Package store is crux's storage contract and the typed records built on it.
//
// A backend implements [Backend]: a small, ordered, transactional key-value
// store organised in named buckets. Everything crux keeps (facts with their
// version chains and indexes, and later sessions, receipts, passports, ...)
// is written through the typed helpers of this package inside one
// transaction, so every backend gets the same domain rules and a failed call
// leaves nothing behind.
//
// # Contract for implementers
//
//   - [Backend.View] runs a read-only transaction, [Backend.Update] a
//     read-write one. Update commits when fn returns nil and rolls back
//     otherwise. Update's fn may run more than once (group commit, or a
//     serialization retry), so it must have no side effects outside the
//     transaction.
//   - Values returned by [Tx.Get], and keys and values passed to a [Tx.Scan]
//     callback, are valid only until the transaction ends; callers copy what
//     they keep.
//   - Bucket names and keys are non-empty; keys are at most 32 KiB.
//   - A transaction must not start another one (View or Update inside fn):
//     a backend may deadlock.
//   - [Tx.Put] copies its arguments: the caller may reuse them at once.
//   - Missing keys are reported with [ErrNotFound]; writes in a View with
//     [ErrReadOnly]; use after Close with [ErrClosed]. Callers test with
//     errors.Is.
//   - A cancelled context makes View and Update return the context's error
//     without running fn or, if fn already runs, at its next store access;
//     Update then commits nothing, even if fn ignores that error.
//   - A Backend is safe for concurrent use by multiple goroutines.
//
// The conformance suite in package storetest checks all of this; every
// backend's test file runs it.
//
// # Layout of facts
//
// A fact is one record and a handful of index entries, all written in the
// transaction that stores it. The layout is chosen so that one store_fact
// touches few pages of a B+tree store such as bbolt, where a commit writes
// every page it dirtied, and the path from the root to it:
//
//   - facts: fact id → record (see factrec.go), which leaves the id to
//     its key. Fact ids are time-ordered ([NewFactID]), so new records
//     append to the last leaf instead of landing on a random one (and the
//     backend is told so, see [AppendHinter]). Retiring a version rewrites
//     its record in place, or in bbolt its entity-index entry.
//   - facts.entity: tenant, stored entity, key, 4-byte version → fact id.
//     The version chains: a write reads its chain's newest versions here.
//   - facts.key: tenant, key, stored entity → empty. One entry per chain,
//     not per version (the versions are in facts.entity), so a new version
//     of a chain writes nothing here.
//   - facts.fresh: tenant, fact id → rank prefix, rank partition and the
//     fact's words. The keyword postings and the rank entry of new facts,
//     one appended entry per fact instead of one entry per word and one in
//     the rank index, each on a leaf of its own; every 64 facts of a
//     tenant, that tenant's move to facts.words and facts.rank together
//     (a write reads its own tenant's only). Queries read both.
//   - facts.words: tenant, word, last fact id (or, for the word's tail
//     block, the byte 0xff) → a block of up to 48 postings of that word
//     (fact id, 16-byte rank prefix), sorted by id. One key per block
//     instead of one per posting makes the index about a third of its
//     former size, and new facts' postings append to each word's tail
//     block, whose key stays put.
//   - facts.rank: tenant, scope, then ^confidence, ^stored_at and fact id
//     (a standard id in 17 bytes) complemented → empty (see rankEntry).
//   - facts.active: tenant, stored entity → count of current facts, kept
//     for entity listings; a new version of a chain leaves it unwritten.
//   - store.meta: "format" → [Format]. [Upgrade] brings a store written by
//     an older crux to the current layout; crux.NewServer runs it on open.
package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
)

// Sentinel errors shared by all backends. Backends may wrap them.
var (
	// ErrNotFound reports a key, or a record, that does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrReadOnly reports a write attempted in a read-only transaction.
	ErrReadOnly = errors.New("store: write in a read-only transaction")
	// ErrClosed reports use of a backend after Close.
	ErrClosed = errors.New("store: backend is closed")
	// ErrEmptyKey reports an empty bucket name or key.
	ErrEmptyKey = errors.New("store: empty bucket name or key")
)

// ErrStop may be returned by a [Tx.Scan] callback to end the scan early.
// Scan then returns nil.
var ErrStop = errors.New("store: stop scan")

// Backend is a transactional, ordered key-value store.
type Backend interface {
	// View runs fn in a read-only transaction.
	View(ctx context.Context, fn func(Tx) error) error
	// Update runs fn in a read-write transaction and commits it when fn
	// returns nil. fn may be called more than once; see the package doc.
	Update(ctx context.Context, fn func(Tx) error) error
	// Close releases the backend. Further calls fail with ErrClosed.
	// Close is idempotent.
	Close() error
}

// Tx is one transaction. Buckets are created on first Put.
// A Tx must not be used after the function it was passed to returns,
// nor from several goroutines at once.
type Tx interface {
	// Get returns the value stored under key in bucket, or ErrNotFound.
	Get(bucket string, key []byte) ([]byte, error)
	// Put stores value under key in bucket, replacing any previous value.
	// A nil value is stored as an empty value.
	Put(bucket string, key, value []byte) error
	// Delete removes key from bucket. Deleting a missing key is not an error.
	Delete(bucket string, key []byte) error
	// Scan calls fn for every key in bucket that starts with prefix, in
	// ascending byte order, or descending when reverse is set. A nil or empty
	// prefix visits the whole bucket. fn returning ErrStop ends the scan
	// without error; any other error ends it and is returned.
	Scan(bucket string, prefix []byte, reverse bool, fn func(key, value []byte) error) error
	// Writable reports whether the transaction may write.
	Writable() bool
}

// AppendHinter is implemented by a [Tx] whose backend can lay out a bucket
// better when it knows how its keys grow. HintAppend tells it that the new
// keys of bucket mostly sort after every key already there (time-ordered
// ids, say), so that it may fill the pages it splits instead of leaving
// room for keys that will not come. A hint changes no result; a backend
// without the method loses nothing but space.
type AppendHinter interface {
	HintAppend(bucket string)
}

// WriteOnceHinter is implemented by a [Tx] whose backend can lay out a
// bucket better when it knows that the bucket's values, once written, are
// never rewritten (only deleted) and that its new keys sort after the old
// ones: it may then fill the pages it splits completely. A hint changes
// no result.
type WriteOnceHinter interface {
	HintWriteOnce(bucket string)
}

// hintWriteOnce passes the write-once hint for bucket to tx, if it takes
// hints, else the append hint.
func hintWriteOnce(tx Tx, bucket string) {
	if h, ok := tx.(WriteOnceHinter); ok {
		h.HintWriteOnce(bucket)
		return
	}
	hintAppend(tx, bucket)
}

// hintAppend passes the append hint for bucket to tx, if it takes hints.
func hintAppend(tx Tx, bucket string) {
	if h, ok := tx.(AppendHinter); ok {
		h.HintAppend(bucket)
	}
}

// Seeker is implemented by a [Tx] that can start a scan inside a prefix.
// ScanFrom calls fn for every key in bucket that starts with prefix and is
// not less than from, in ascending order, as [Tx.Scan] does for the whole
// prefix (fn returning ErrStop ends it without error). Without it,
// [scanFrom] walks the prefix from its start.
type Seeker interface {
	ScanFrom(bucket string, prefix, from []byte, fn func(key, value []byte) error) error
}

// scanFrom is Seeker.ScanFrom on any Tx.
func scanFrom(tx Tx, bucket string, prefix, from []byte, fn func(key, value []byte) error) error {
	if s, ok := tx.(Seeker); ok {
		return s.ScanFrom(bucket, prefix, from, fn)
	}
	return tx.Scan(bucket, prefix, false, func(k, v []byte) error {
		if bytes.Compare(k, from) < 0 {
			return nil
		}
		return fn(k, v)
	})
}

// Prefetcher is implemented by a [Tx] whose reads cost a round trip to a
// server: it is told what the transaction will soon read, so that it can
// read it together with the next read instead of one key or one range at
// a time. Prefetch announces Gets of keys in bucket, PrefetchScan a Scan
// of the keys starting with prefix (its first rows, in ascending order or
// descending when reverse is set). A prefetch changes no
// result; a backend without the methods (bbolt, whose reads are memory
// reads) loses nothing.
type Prefetcher interface {
	Prefetch(bucket string, keys [][]byte)
	PrefetchScan(bucket string, prefix []byte, reverse bool)
}

// localReads reports whether the reads of tx are memory reads, as bbolt's
// are: whether tx, beneath the store's own wrapper, takes no prefetch (a
// backend whose reads cost a round trip takes them).
func localReads(tx Tx) bool {
	if r, ok := tx.(reportingTx); ok {
		tx = r.Tx
	}
	_, remote := tx.(Prefetcher)
	return !remote
}

// prefetch passes a prefetch of keys of bucket to tx, if it takes them.
func prefetch(tx Tx, bucket string, keys [][]byte) {
	if p, ok := tx.(Prefetcher); ok && len(keys) > 0 {
		p.Prefetch(bucket, keys)
	}
}

// prefetchScan passes a prefetch of the scan of prefix in bucket to tx,
// if it takes them.
func prefetchScan(tx Tx, bucket string, prefix []byte, reverse bool) {
	if p, ok := tx.(Prefetcher); ok {
		p.PrefetchScan(bucket, prefix, reverse)
	}
}

// ChangeLogger is implemented by a [Tx] whose backend keeps the change log
// of sync (see sync.go) itself, in a structure of its own, instead of in
// the log buckets that the store writes through [Tx.Put] and a writer must
// read to number its entry (the head, a key every write of a tenant reads
// and writes, so that a tenant's writes run one transaction at a time).
// The store hands it the entries and reads them back; what an entry says
// and which versions are logged stay the store's rules. Without it the
// store keeps the log in its buckets, numbered 1, 2, 3, ... in commit order.
//
// An entry's seq is positive and orders the log. Whatever the backend,
// readers rely on these guarantees, which sync's cursors need:
//
//   - Stable prefix: once a transaction has seen an entry of seq s, every
//     entry of a lower seq that any transaction will ever see is visible
//     to it already. A reader resuming after the last seq it read misses
//     nothing and reads nothing twice, however writers interleave.
//   - Causal order: an entry comes after the entries of every transaction
//     that committed before its own transaction read what it read (a
//     version after the version it supersedes), and a transaction's
//     entries come in the order it appended them.
//   - Seqs need not be dense: the count of entries is reported apart.
//
// The entries a transaction appends need not be seen by its own reads of
// the log (a backend may write them at commit); once it has committed,
// every later transaction counts them, and reads them as soon as the
// stable prefix reaches them (on PostgreSQL, once every write transaction
// older than theirs has ended).
type ChangeLogger interface {
	// AppendChange appends entry to tenant's log. entry is the store's
	// encoding of the version logged; the backend keeps its bytes.
	AppendChange(tenant string, entry []byte) error
	// ScanChanges calls fn with each entry of tenant's log of seq at
	// least from, in seq order, up to the end of the stable prefix. fn
	// returning ErrStop ends the walk without error; entry is valid only
	// during the call.
	ScanChanges(tenant string, from uint64, fn func(seq uint64, entry []byte) error) error
	// ChangeHead returns the seq of the last entry of tenant's stable
	// prefix (0 for none) and the number of entries of the log that the
	// transaction sees, stable or not.
	ChangeHead(tenant string) (head, count uint64, err error)
	// PrefetchChangeHead announces a ChangeHead of tenant, so that a
	// backend whose reads cost a round trip may send it with the next
	// read (see [Prefetcher]); it may do nothing.
	PrefetchChangeHead(tenant string)
}

// CountSummer is implemented by a [Tx] that can add up counts where they
// are stored instead of returning every one (a server's: the rows stay
// there). SumCounts visits the first limit keys of bucket that start with
// prefix, in ascending order, and returns how many it visited and the sum
// of their values that are counts (8 bytes, big-endian), each taken as at
// most most; other values add nothing. PrefetchSumCounts announces it
// (see [Prefetcher]). The store calls them in read-only transactions only,
// which hold no writes of their own to add in. Without it, [sumCounts]
// scans the keys.
type CountSummer interface {
	SumCounts(bucket string, prefix []byte, limit int, most uint64) (sum uint64, keys int, err error)
	PrefetchSumCounts(bucket string, prefix []byte, limit int, most uint64)
}

// sumCounts is [CountSummer.SumCounts] on any Tx.
func sumCounts(tx Tx, bucket string, prefix []byte, limit int, most uint64) (sum uint64, keys int, err error) {
	if c, ok := tx.(CountSummer); ok && !tx.Writable() {
		return c.SumCounts(bucket, prefix, limit, most)
	}
	if limit <= 0 {
		return 0, 0, nil
	}
	err = tx.Scan(bucket, prefix, false, func(_, v []byte) error {
		if len(v) == 8 {
			sum += min(binary.BigEndian.Uint64(v), most)
		}
		if keys++; keys >= limit {
			return ErrStop
		}
		return nil
	})
	return sum, keys, err
}

// prefetchSumCounts announces a sumCounts (see Prefetcher).
func prefetchSumCounts(tx Tx, bucket string, prefix []byte, limit int, most uint64) {
	if c, ok := tx.(CountSummer); ok && !tx.Writable() {
		c.PrefetchSumCounts(bucket, prefix, limit, most)
		return
	}
	prefetchScan(tx, bucket, prefix, false)
}
