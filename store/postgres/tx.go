package postgres

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/crux-go/crux/store"
)

// scanPage is how many rows a Scan reads per query; a descending Scan
// reads downPage, as most stop at their first key (a chain's newest
// version, a log's head), and every row read is a predicate lock of a
// serializable transaction.
const (
	scanPage = 256
	downPage = 16
)

// maxCached bounds the bytes of rows read from the server that a
// transaction keeps in its view; past it the view forgets them (keeping
// its writes) and reads again what it needs.
const maxCached = 16 << 20

// maxPerStatement bounds the rows one statement of a commit writes.
const maxPerStatement = 4096

// errTxDone reports use of a store.Tx after its function returned.
var errTxDone = errors.New("store/postgres: transaction used after its function returned")

// tx implements store.Tx on a PostgreSQL transaction. Its reads are kept
// in a view of the table (see bucketView), its writes are buffered there
// and sent at commit, and the statements it needs are sent together: the
// BEGIN with the first read, queued prefetches with the next read, the
// writes with the COMMIT.
type tx struct {
	db       *DB
	ctx      context.Context // the caller's: checked before every operation
	sctx     context.Context // the statements'
	conn     *pgxpool.Conn
	begin    string // the BEGIN statement, until sent
	begun    bool
	owed     bool // the connection's previous transaction is to be rolled back first (see park.go)
	writable bool
	done     bool
	ctxErr   error // ctx's error, once seen: every later call fails with it
	pgErr    error // the statement error that aborted the transaction: every later call fails with it

	buckets map[string]*bucketView
	cached  int     // bytes of clean rows in the view
	queue   []fetch // prefetches not yet sent

	logging bool      // record undo entries for the writes
	undo    []undoRec // how to take back the writes since logging began
	writes  int       // writes since logging began

	token      []byte                 // the commit's token (see reconnect.go)
	changes    []change               // change-log entries appended, written at commit (see changes.go)
	changeMark int                    // len(changes) when logging began
	heads      map[string][2]uint64   // tenant → change-log head and count read
	logPages   map[string][]changeRow // change-log pages read, by customRead id
	sums       map[string][2]uint64   // sums of counts read (see counts.go), by customRead id

	probing bool       // a probe: a read the view cannot answer is queued and unwinds fn
	missed  bool       // the probe has unwound
	sent    uint64     // round trips of reads made, to tell waiting probes theirs is done
	wake    *sync.Cond // broadcast after each round trip of reads, if set
}

// missPanic is the panic that unwinds the function of a probe at a read the
// view cannot answer (see batch.go).
type missPanic struct{}

// undoRec restores one key of the view: old is the entry a write replaced,
// nil if there was none.
type undoRec struct {
	bucket string
	key    []byte
	old    *entry
}

// fetch is one read sent to the server: the rows of bucket with keys
// in [lo, hi), at most scanPage of them in key order (downPage,
// descending, when reverse), or, when keys is set, the rows of those keys.
type fetch struct {
	bucket  string
	lo, hi  []byte
	reverse bool
	keys    [][]byte
	custom  *customRead // instead, a statement of its own (see changes.go)
}

// check is run before every operation.
func (t *tx) check() error {
	switch {
	case t.done:
		return errTxDone
	case t.ctxErr != nil:
		return t.ctxErr
	case t.pgErr != nil:
		return t.pgErr
	case t.missed:
		panic(missPanic{}) // fn recovered the first: it gets no further
	}
	if err := t.ctx.Err(); err != nil {
		t.ctxErr = err
		return err
	}
	return nil
}

// failed records the error of a statement: PostgreSQL aborts the whole
// transaction on any error, so it is the answer to every later call too.
func (t *tx) failed(err error) error {
	if err := t.ctx.Err(); err != nil && t.sctx == t.ctx {
		t.ctxErr = err
		return err
	}
	t.pgErr = err
	return err
}

func checkKey(bucket string, key []byte) error {
	if bucket == "" || len(key) == 0 {
		return store.ErrEmptyKey
	}
	if len(key) > maxKey {
		return fmt.Errorf("store/postgres: key of %d bytes, more than %d", len(key), maxKey)
	}
	return nil
}

func (t *tx) Writable() bool { return t.writable }

// bucket returns the view of bucket, created on first use.
func (t *tx) bucket(name string) *bucketView {
	bv := t.buckets[name]
	if bv == nil {
		if t.buckets == nil {
			t.buckets = make(map[string]*bucketView)
		}
		bv = newBucketView()
		t.buckets[name] = bv
	}
	return bv
}

func (t *tx) Get(bucket string, key []byte) ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if err := checkKey(bucket, key); err != nil {
		return nil, err
	}
	for range 2 {
		bv := t.bucket(bucket)
		if e := bv.ents[string(key)]; e != nil {
			if !e.present {
				return nil, store.ErrNotFound
			}
			return e.val, nil
		}
		if _, ok := bv.covering(key); ok {
			return nil, store.ErrNotFound
		}
		if err := t.fetch(fetch{bucket: bucket, keys: [][]byte{key}}); err != nil {
			return nil, err
		}
	}
	// The fetch records every key it was asked for; it cannot be missing.
	return nil, fmt.Errorf("store/postgres: internal error: key %q of %s not in the view after reading it", key, bucket)
}

func (t *tx) Put(bucket string, key, value []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if !t.writable {
		return store.ErrReadOnly
	}
	if err := checkKey(bucket, key); err != nil {
		return err
	}
	t.write(bucket, &entry{key: bytes.Clone(key), val: append([]byte{}, value...), present: true, dirty: true})
	return nil
}

func (t *tx) Delete(bucket string, key []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if !t.writable {
		return store.ErrReadOnly
	}
	if err := checkKey(bucket, key); err != nil {
		return err
	}
	t.write(bucket, &entry{key: bytes.Clone(key), dirty: true})
	return nil
}

// write puts the dirty entry e in the view.
func (t *tx) write(bucket string, e *entry) {
	bv := t.bucket(bucket)
	e.base = bv.base(e.key)
	old := bv.set(e)
	if old != nil && !old.dirty {
		t.cached -= len(old.key) + len(old.val)
	}
	t.writes++
	if t.logging {
		t.undo = append(t.undo, undoRec{bucket: bucket, key: e.key, old: old})
	}
}

// startUndo starts recording the writes, so that rollbackUndo can take
// them back.
func (t *tx) startUndo() {
	t.logging, t.undo, t.writes, t.changeMark = true, t.undo[:0], 0, len(t.changes)
}

// rollbackUndo takes back the writes since startUndo, newest first.
func (t *tx) rollbackUndo() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		u := t.undo[i]
		bv := t.bucket(u.bucket)
		if u.old == nil {
			bv.remove(u.key)
			continue
		}
		bv.set(u.old)
		if !u.old.dirty {
			t.cached += len(u.old.key) + len(u.old.val)
		}
	}
	t.undo = t.undo[:0]
	t.writes = 0
	clear(t.changes[t.changeMark:])
	t.changes = t.changes[:t.changeMark]
}

// successor is the least key greater than every key starting with prefix,
// or nil when there is none (prefix is all 0xff bytes).
func successor(prefix []byte) []byte {
	s := append([]byte(nil), prefix...)
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] < 0xff {
			s[i]++
			return s[:i+1]
		}
	}
	return nil
}

// prefixRange is the key range [lo, hi) of the keys starting with prefix
// (hi nil: no upper bound).
func prefixRange(prefix []byte) (lo, hi []byte) {
	if len(prefix) == 0 {
		return []byte{}, nil
	}
	return prefix, successor(prefix)
}

// Scan visits the keys of bucket starting with prefix in key order (or
// reverse), reading from the server a page of scanPage rows at a time
// what the view does not hold.
func (t *tx) Scan(bucket string, prefix []byte, reverse bool, fn func(key, value []byte) error) error {
	if err := t.check(); err != nil {
		return err
	}
	if bucket == "" {
		return store.ErrEmptyKey
	}
	lo, hi := prefixRange(prefix)
	if reverse {
		return t.scanDown(bucket, lo, hi, fn)
	}
	return t.scanUp(bucket, lo, hi, fn)
}

// ScanFrom visits the keys of bucket starting with prefix that are not
// less than from, in ascending order, seeking to from (store.Seeker).
func (t *tx) ScanFrom(bucket string, prefix, from []byte, fn func(key, value []byte) error) error {
	if err := t.check(); err != nil {
		return err
	}
	if bucket == "" {
		return store.ErrEmptyKey
	}
	lo, hi := prefixRange(prefix)
	if bytes.Compare(from, lo) > 0 {
		lo = from
	}
	return t.scanUp(bucket, lo, hi, fn)
}

// stop turns the error of a Scan callback into Scan's.
func stop(err error) error {
	if errors.Is(err, store.ErrStop) {
		return nil
	}
	return err
}

// scanUp visits the keys of bucket in [lo, hi) in ascending order. The
// view is looked up afresh for every key, so fn may read and write the
// transaction (writes after the current key are seen).
func (t *tx) scanUp(bucket string, lo, hi []byte, fn func(key, value []byte) error) error {
	cur := lo
	for {
		if hi != nil && bytes.Compare(cur, hi) >= 0 {
			return nil
		}
		bv := t.bucket(bucket)
		s, ok := bv.covering(cur)
		if !ok {
			if err := t.fetch(fetch{bucket: bucket, lo: cur, hi: hi}); err != nil {
				return err
			}
			continue
		}
		end := s.hi // the lesser of s.hi and hi
		if hi != nil && below(hi, end) {
			end = hi
		}
		e := bv.next(cur, end)
		if e == nil {
			if end == nil {
				return nil
			}
			cur = end
			continue
		}
		if err := fn(e.key, e.val); err != nil {
			return stop(err)
		}
		if err := t.check(); err != nil {
			return err
		}
		cur = append(e.key[:len(e.key):len(e.key)], 0) // the least key above e's
	}
}

// scanDown visits the keys of bucket in [lo, hi) in descending order (see
// scanUp).
func (t *tx) scanDown(bucket string, lo, hi []byte, fn func(key, value []byte) error) error {
	cur := hi // keys below cur remain; nil: all
	for {
		if cur != nil && bytes.Compare(cur, lo) <= 0 {
			return nil
		}
		bv := t.bucket(bucket)
		s, ok := bv.coveringBelow(cur)
		if !ok {
			if err := t.fetch(fetch{bucket: bucket, lo: lo, hi: cur, reverse: true}); err != nil {
				return err
			}
			continue
		}
		start := s.lo
		if bytes.Compare(start, lo) < 0 {
			start = lo
		}
		e := bv.prev(start, cur)
		if e == nil {
			cur = start
			if bytes.Equal(start, lo) {
				return nil
			}
			continue
		}
		if err := fn(e.key, e.val); err != nil {
			return stop(err)
		}
		if err := t.check(); err != nil {
			return err
		}
		cur = e.key
	}
}

// Prefetch reads the rows of keys of bucket, with the next statement the
// transaction sends, into the view (store.Prefetcher).
func (t *tx) Prefetch(bucket string, keys [][]byte) {
	if t.check() != nil || bucket == "" {
		return
	}
	bv := t.bucket(bucket)
	var want [][]byte
	for _, k := range keys {
		if checkKey(bucket, k) != nil || bv.ents[string(k)] != nil {
			continue
		}
		if _, ok := bv.covering(k); ok {
			continue
		}
		want = append(want, bytes.Clone(k))
	}
	if len(want) > 0 {
		t.queue = append(t.queue, fetch{bucket: bucket, keys: want})
	}
}

// PrefetchScan reads the first page of the keys of bucket starting with
// prefix, in ascending order or descending when reverse is set, with the
// next statement the transaction sends, into the view (store.Prefetcher).
func (t *tx) PrefetchScan(bucket string, prefix []byte, reverse bool) {
	if t.check() != nil || bucket == "" {
		return
	}
	lo, hi := prefixRange(prefix)
	bv := t.bucket(bucket)
	if _, ok := bv.covering(lo); ok && !reverse {
		return
	}
	if _, ok := bv.coveringBelow(hi); ok && reverse {
		return
	}
	t.queue = append(t.queue, fetch{bucket: bucket, lo: bytes.Clone(lo), hi: hi, reverse: reverse})
}

// serves reports whether the fetch q reads what f would.
func (q *fetch) serves(f *fetch) bool {
	if q.custom != nil || f.custom != nil {
		return q.custom != nil && f.custom != nil && q.custom.id == f.custom.id
	}
	if q.bucket != f.bucket || (q.keys == nil) != (f.keys == nil) {
		return false
	}
	if f.keys != nil {
		return len(f.keys) == 1 && slices.ContainsFunc(q.keys, func(k []byte) bool { return bytes.Equal(k, f.keys[0]) })
	}
	return q.reverse == f.reverse && bytes.Equal(q.lo, f.lo) && bytes.Equal(q.hi, f.hi) && (q.hi == nil) == (f.hi == nil)
}

// The statements of the reads and writes.
const (
	sqlPage     = "SELECT key, value FROM kv WHERE bucket = $1 AND key >= $2 ORDER BY key LIMIT 256"
	sqlPageHi   = "SELECT key, value FROM kv WHERE bucket = $1 AND key >= $2 AND key < $3 ORDER BY key LIMIT 256"
	sqlPageDown = "SELECT key, value FROM kv WHERE bucket = $1 AND key >= $2 ORDER BY key DESC LIMIT 16"
	sqlPageDnHi = "SELECT key, value FROM kv WHERE bucket = $1 AND key >= $2 AND key < $3 ORDER BY key DESC LIMIT 16"
	// The rows of keys, one index lookup each whatever the planner's
	// statistics say: a LATERAL subquery with a LIMIT is not flattened
	// into a join, which, on a table without statistics (autovacuum off,
	// or not yet run), the planner may run as a scan of the whole bucket
	// (key = ANY($2) was: up to 1 ms a statement in a 32-caller
	// store_fact run, against 0.04 ms).
	sqlKeys = `SELECT s.key, s.value FROM unnest($2::bytea[]) AS r(k)
		CROSS JOIN LATERAL (SELECT key, value FROM kv WHERE bucket = $1 AND key = r.k LIMIT 1) s`

	// Pages of several ranges of one bucket in one statement: each
	// range's rows, in its order, with its number (from 1).
	sqlPages = `SELECT r.i, s.key, s.value FROM unnest($2::bytea[]) WITH ORDINALITY AS r(lo, i)
		CROSS JOIN LATERAL (SELECT key, value FROM kv WHERE bucket = $1 AND key >= r.lo ORDER BY key LIMIT 256) s ORDER BY r.i, s.key`
	sqlPagesHi = `SELECT r.i, s.key, s.value FROM unnest($2::bytea[], $3::bytea[]) WITH ORDINALITY AS r(lo, hi, i)
		CROSS JOIN LATERAL (SELECT key, value FROM kv WHERE bucket = $1 AND key >= r.lo AND key < r.hi ORDER BY key LIMIT 256) s ORDER BY r.i, s.key`
	sqlPagesDown = `SELECT r.i, s.key, s.value FROM unnest($2::bytea[]) WITH ORDINALITY AS r(lo, i)
		CROSS JOIN LATERAL (SELECT key, value FROM kv WHERE bucket = $1 AND key >= r.lo ORDER BY key DESC LIMIT 16) s ORDER BY r.i, s.key DESC`
	sqlPagesDnHi = `SELECT r.i, s.key, s.value FROM unnest($2::bytea[], $3::bytea[]) WITH ORDINALITY AS r(lo, hi, i)
		CROSS JOIN LATERAL (SELECT key, value FROM kv WHERE bucket = $1 AND key >= r.lo AND key < r.hi ORDER BY key DESC LIMIT 16) s ORDER BY r.i, s.key DESC`
	// The rows the transaction read as absent are inserted, which costs
	// the server less than an INSERT ... ON CONFLICT (no speculative
	// insertion); should a concurrent transaction have inserted one
	// meanwhile, the unique violation aborts the transaction, and Update
	// runs it again (see retryable).
	sqlInsert = `INSERT INTO kv (bucket, key, value) SELECT * FROM unnest($1::text[], $2::bytea[], $3::bytea[])`
	sqlUpsert = sqlInsert + `
		ON CONFLICT (bucket, key) DO UPDATE SET value = EXCLUDED.value`
	// The rows of (bucket, key) pairs, each found by a lookup of the
	// primary key (a LATERAL subquery with a LIMIT is not flattened into a
	// join; the IN form was planned as a hash join over a scan of the
	// table) and deleted by its row address.
	// The token of a commit (see reconnect.go).
	sqlCommitToken = `INSERT INTO crux_commits (token) VALUES ($1)`
	sqlDelete      = `DELETE FROM kv WHERE ctid = ANY (ARRAY(SELECT s.ctid FROM unnest($1::text[], $2::bytea[]) AS r(b, k)
		CROSS JOIN LATERAL (SELECT ctid FROM kv WHERE bucket = r.b AND key = r.k LIMIT 1) s))`
)

func init() {
	if scanPage != 256 || downPage != 16 {
		panic("store/postgres: the page statements' LIMIT is not scanPage or downPage")
	}
}

// fetch sends f, with the queued prefetches and, if the transaction has
// not begun, its BEGIN, in one round trip, and records the rows in the
// view. In a probe it queues f instead and unwinds the probe's function.
func (t *tx) fetch(f fetch) error {
	if t.probing {
		if !slices.ContainsFunc(t.queue, func(q fetch) bool { return q.serves(&f) }) {
			t.queue = append(t.queue, f)
		}
		t.missed = true
		panic(missPanic{})
	}
	return t.send(&f)
}

// flush sends the queued reads in one round trip (none if the view holds
// them all by now).
func (t *tx) flush() error { return t.send(nil) }

// send sends the queued reads and f (if not nil), with the transaction's
// BEGIN if it has not begun, in one round trip, records the rows in the
// view and wakes the probes waiting for them.
func (t *tx) send(f *fetch) error {
	defer func() {
		t.sent++
		if t.wake != nil {
			t.wake.Broadcast()
		}
	}()
	fs := t.pending(f)
	if len(fs) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	owed := !t.begun && t.owed
	if !t.begun {
		if owed {
			b.Queue(sqlRollback)
		}
		b.Queue(t.begin)
	}
	stmts := statements(fs)
	for _, st := range stmts {
		f := &fs[st[0]]
		if len(st) > 1 {
			los := make([][]byte, len(st))
			var his [][]byte
			if f.hi != nil {
				his = make([][]byte, len(st))
			}
			for j, i := range st {
				los[j] = append([]byte{}, fs[i].lo...) // never nil: nil is NULL
				if his != nil {
					his[j] = fs[i].hi
				}
			}
			switch {
			case f.hi == nil && !f.reverse:
				b.Queue(sqlPages, f.bucket, los)
			case !f.reverse:
				b.Queue(sqlPagesHi, f.bucket, los, his)
			case f.hi == nil:
				b.Queue(sqlPagesDown, f.bucket, los)
			default:
				b.Queue(sqlPagesDnHi, f.bucket, los, his)
			}
			continue
		}
		switch {
		case f.custom != nil:
			b.Queue(f.custom.sql, f.custom.args...)
		case f.keys != nil:
			b.Queue(sqlKeys, f.bucket, f.keys)
		case f.hi == nil && !f.reverse:
			b.Queue(sqlPage, f.bucket, f.lo)
		case !f.reverse:
			b.Queue(sqlPageHi, f.bucket, f.lo, f.hi)
		case f.hi == nil:
			b.Queue(sqlPageDown, f.bucket, f.lo)
		default:
			b.Queue(sqlPageDnHi, f.bucket, f.lo, f.hi)
		}
	}
	t.db.trips.Add(1)
	br := t.conn.SendBatch(t.sctx, b)
	if !t.begun {
		// The first round trip: a connection found dead is replaced and
		// the statements sent again (see reconnect.go), without the
		// ROLLBACK owed by the dead one.
		var err error
		if owed {
			t.owed = false
			_, err = br.Exec()
		}
		if err == nil {
			_, err = br.Exec()
		}
		if err != nil && connLost(err) {
			_ = br.Close()
			br, err = t.resend(b, err)
		}
		if err != nil {
			if br != nil {
				_ = br.Close()
			}
			return t.failed(err)
		}
		t.begun = true
	}
	err := t.readBatch(br, fs, stmts)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return t.failed(err)
	}
	return nil
}

// pending empties the queue and returns its reads and f (if not nil),
// without those the view can answer by now or another read of the list
// covers; the reads of keys of one bucket become one.
func (t *tx) pending(f *fetch) []fetch {
	fs := t.queue
	t.queue = nil
	if f != nil {
		fs = append(fs, *f)
	}
	if len(fs) == 1 {
		return fs
	}
	var out []fetch
	// read names a key (lo), or a range, already in out.
	type read struct {
		bucket, lo, hi     string
		key, reverse, open bool // open: no upper bound
	}
	keysAt := map[string]int{} // bucket: index in out of its reads of keys
	seen := map[read]bool{}
	for _, q := range fs {
		if q.custom != nil {
			id := read{lo: q.custom.id, key: true, open: true}
			if !seen[id] && !t.customDone(q.custom) {
				seen[id] = true
				out = append(out, q)
			}
			continue
		}
		bv := t.bucket(q.bucket)
		if q.keys != nil {
			for _, k := range q.keys {
				if bv.ents[string(k)] != nil {
					continue
				}
				if _, ok := bv.covering(k); ok {
					continue
				}
				id := read{bucket: q.bucket, lo: string(k), key: true}
				if seen[id] {
					continue
				}
				seen[id] = true
				i, ok := keysAt[q.bucket]
				if !ok {
					i = len(out)
					keysAt[q.bucket] = i
					out = append(out, fetch{bucket: q.bucket, keys: [][]byte{}})
				}
				out[i].keys = append(out[i].keys, k)
			}
			continue
		}
		if _, ok := bv.covering(q.lo); ok && !q.reverse {
			continue
		}
		if _, ok := bv.coveringBelow(q.hi); ok && q.reverse {
			continue
		}
		id := read{bucket: q.bucket, lo: string(q.lo), hi: string(q.hi), reverse: q.reverse, open: q.hi == nil}
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, q)
	}
	return out
}

// statements groups the reads fs into statements, as indexes into fs: a
// read of keys alone, the range reads of one bucket with the same
// direction and kind of upper bound together.
func statements(fs []fetch) [][]int {
	type shape struct {
		bucket        string
		reverse, open bool
	}
	var out [][]int
	at := map[shape]int{}
	for i, f := range fs {
		if f.keys != nil || f.custom != nil {
			out = append(out, []int{i})
			continue
		}
		sh := shape{f.bucket, f.reverse, f.hi == nil}
		if j, ok := at[sh]; ok {
			out[j] = append(out[j], i)
			continue
		}
		at[sh] = len(out)
		out = append(out, []int{i})
	}
	return out
}

// readBatch reads the results of the statements send sent: stmts as
// statements returned them for fs.
func (t *tx) readBatch(br pgx.BatchResults, fs []fetch, stmts [][]int) error {
	if !t.begun {
		if _, err := br.Exec(); err != nil {
			return err
		}
		t.begun = true
	}
	if t.cached > maxCached {
		for _, bv := range t.buckets {
			bv.dropClean()
		}
		t.cached = 0
	}
	for _, st := range stmts {
		rows, err := br.Query()
		if err != nil {
			return err
		}
		if c := fs[st[0]].custom; c != nil {
			err := c.got(rows)
			rows.Close()
			if err == nil {
				err = rows.Err()
			}
			if err != nil {
				return err
			}
			continue
		}
		got := make([][]*entry, len(st))
		for rows.Next() {
			var i int64
			var k, v []byte
			if len(st) > 1 {
				err = rows.Scan(&i, &k, &v)
				i-- // ordinals count from 1
			} else {
				err = rows.Scan(&k, &v)
			}
			if err == nil && (i < 0 || i >= int64(len(st))) {
				err = fmt.Errorf("store/postgres: internal error: row of range %d of %d", i+1, len(st))
			}
			if err != nil {
				rows.Close()
				return err
			}
			if v == nil {
				v = []byte{}
			}
			got[i] = append(got[i], &entry{key: k, val: v, present: true})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for j, i := range st {
			t.record(&fs[i], got[j])
		}
	}
	return nil
}

// record puts in the view the rows got that the read f returned.
func (t *tx) record(f *fetch, got []*entry) {
	bv := t.bucket(f.bucket)
	for _, e := range got {
		if bv.ents[string(e.key)] == nil {
			bv.set(e)
			t.cached += len(e.key) + len(e.val)
		}
	}
	switch {
	case f.keys != nil:
		for _, k := range f.keys {
			if bv.ents[string(k)] == nil {
				bv.set(&entry{key: k})
				t.cached += len(k)
			}
		}
	case !f.reverse && len(got) < scanPage, f.reverse && len(got) < downPage:
		bv.addSpan(f.lo, f.hi)
	case !f.reverse:
		last := got[len(got)-1].key
		bv.addSpan(f.lo, append(last[:len(last):len(last)], 0))
	default:
		bv.addSpan(got[len(got)-1].key, f.hi)
	}
}

// commitBatch builds the statements that write the view's dirty entries,
// in (bucket, key) order so that concurrent transactions lock rows in the
// same order, and then commit. It returns nil when there is nothing to
// write.
func (t *tx) commitBatch() *pgx.Batch {
	names := make([]string, 0, len(t.buckets))
	for name := range t.buckets {
		names = append(names, name)
	}
	sort.Strings(names)
	b := &pgx.Batch{}
	if !t.begun {
		if t.owed {
			b.Queue(sqlRollback)
		}
		b.Queue(t.begin)
	}
	before := b.Len()
	ins, ups, del := rowWrites{sql: sqlInsert}, rowWrites{sql: sqlUpsert}, rowWrites{sql: sqlDelete}
	dirty := false
	for _, name := range names {
		for _, e := range t.buckets[name].keys {
			if !e.dirty {
				continue
			}
			dirty = true
			switch {
			case e.present && e.base == baseAbsent:
				ins.add(b, name, e.key, e.val)
			case e.present:
				ups.add(b, name, e.key, e.val)
			case e.base != baseAbsent: // no row to delete otherwise
				del.add(b, name, e.key, nil)
			}
		}
	}
	ins.queue(b)
	ups.queue(b)
	del.queue(b)
	if len(t.changes) > 0 {
		dirty = true
		t.queueChanges(b)
	}
	if !dirty || !t.begun && b.Len() == before {
		return nil // nothing written, or nothing read nor left to write
	}
	t.token = nil
	if t.db.commitTokens && b.Len() > before { // statements that write: a token with them
		t.token = make([]byte, 16)
		_, _ = rand.Read(t.token) // crypto/rand: never fails
		b.Queue(sqlCommitToken, t.token)
	}
	b.Queue("COMMIT")
	return b
}

// rowWrites gathers the rows of one write statement of a commit.
type rowWrites struct {
	sql        string
	buckets    []string
	keys, vals [][]byte // no vals for a delete
}

// add adds a row, queueing the statement on b once it holds
// maxPerStatement rows. val is ignored for a delete.
func (w *rowWrites) add(b *pgx.Batch, bucket string, key, val []byte) {
	w.buckets, w.keys = append(w.buckets, bucket), append(w.keys, key)
	if w.sql != sqlDelete {
		w.vals = append(w.vals, val) // one for each key, an empty value too
	}
	if len(w.keys) >= maxPerStatement {
		w.queue(b)
	}
}

// queue queues the statement of the rows added since the last, if any.
func (w *rowWrites) queue(b *pgx.Batch) {
	switch {
	case len(w.keys) == 0:
		return
	case w.sql == sqlDelete:
		b.Queue(w.sql, w.buckets, w.keys)
	default:
		b.Queue(w.sql, w.buckets, w.keys, w.vals)
	}
	w.buckets, w.keys, w.vals = nil, nil, nil
}

// commit writes the view's dirty entries and commits, in one round trip.
// Without writes it only ends the transaction.
func (t *tx) commit() error {
	b := t.commitBatch()
	if b == nil {
		return nil
	}
	t.db.trips.Add(1)
	pid := t.conn.Conn().PgConn().PID()
	br := t.conn.SendBatch(t.sctx, b)
	t.owed = false // sent: its connection is rolled back, or broken
	var err error
	for range b.Len() {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		t.begun = false // committed: nothing to roll back
	}
	if connLost(err) && !pgconn.SafeToRetry(err) {
		// Sent, perhaps committed: learn which (see reconnect.go).
		if t.token == nil {
			return &commitLost{err}
		}
		committed, oerr := t.db.commitOutcome(pid, t.token)
		switch {
		case oerr != nil:
			return &commitLost{fmt.Errorf("%w (and its outcome could not be learned: %v)", err, oerr)}
		case committed:
			t.begun = false
			return nil
		}
		return &notCommitted{err}
	}
	if err == nil {
		t.db.maybeSweepTokens()
	}
	return err
}

// release rolls back what is still open and returns the connection to
// the pool. A transaction that failed to roll back leaves its connection
// closed by the pool (which drops a connection released mid-transaction).
func (t *tx) release() {
	if t.conn == nil {
		return
	}
	if t.begun || t.owed {
		t.db.trips.Add(1)
		_, _ = t.conn.Exec(context.WithoutCancel(t.sctx), sqlRollback)
	}
	t.conn.Release()
	t.conn = nil
}
