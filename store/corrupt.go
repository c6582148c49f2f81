package store

import (
	"context"
	"errors"
	"fmt"
)

// ErrMissingRecord is the cause of a [*CorruptRecordError] for an index
// entry that names a record which does not exist.
var ErrMissingRecord = errors.New("store: the record an index names does not exist")

// CorruptRecordError reports a stored record that cannot be read: its
// bytes do not decode, or an index names it and it does not exist.
//
// Such a record (written by an older version that let invalid UTF-8
// through, or damaged on disk) must not take every caller down with it.
// Reading it directly ([GetFact] by id) returns this error. A scan that
// meets it — every function of this package that walks an index and reads
// the facts it names ([SearchFacts], [ScanFacts], [History],
// [SelectForget], [Contradictions], and the chain walks of [PutFact],
// [Consolidate] and [RestoreForget]) — skips it, reports it to the
// transaction's reporter (see [Reporting]) and serves every other record.
// An index entry naming a fact that does not exist is met and reported the
// same way. A forget record or a forgotten fact that does not decode is
// this error too: the restore, purge or status of that one forget fails
// with it. The crux doctor command lists such records and removes the
// unreadable facts ([Diagnose], [Repair]).
type CorruptRecordError struct {
	Bucket string // the bucket the record is (or should be) in, such as "facts"
	Key    []byte // its key there
	ID     string // the record's id, such as a fact id
	// Index is the bucket of the index entry through which a scan reached
	// the record, or "" for a direct read.
	Index string
	Err   error // why it cannot be read: the decoder's error, or ErrMissingRecord
}

// Error names the record, where it is and why it cannot be read.
func (e *CorruptRecordError) Error() string {
	via := ""
	if e.Index != "" {
		via = ", named by index " + e.Index
	}
	return fmt.Sprintf("store: record %s (bucket %q, key %q%s) cannot be read: %v; crux doctor lists such records (and --repair removes unreadable facts)",
		e.ID, e.Bucket, e.Key, via, e.Err)
}

// Unwrap returns the cause.
func (e *CorruptRecordError) Unwrap() error { return e.Err }

// CorruptionReporter is implemented by a [Tx] that hears of the
// undecodable records its scans skip. [Reporting] returns a backend whose
// transactions implement it.
type CorruptionReporter interface {
	ReportCorrupt(*CorruptRecordError)
}

// SkipCorrupt is how a scan goes past an unreadable record: when err is a
// [*CorruptRecordError] it reports it to tx (if tx is a
// [CorruptionReporter]) and returns nil, so that the scan goes on; any
// other error is returned as it is. Without a reporter the record is
// skipped silently.
func SkipCorrupt(tx Tx, err error) error {
	var ce *CorruptRecordError
	if !errors.As(err, &ce) {
		return err
	}
	if r, ok := tx.(CorruptionReporter); ok {
		r.ReportCorrupt(ce)
	}
	return nil
}

// Reporting returns b with report attached to every transaction it runs:
// the scans of this package call report for each unreadable record they
// skip (see [SkipCorrupt]). report may be called more than once for one
// record, also from concurrent transactions, and must not use the
// transaction. The result implements [Compacter] when b does.
func Reporting(b Backend, report func(*CorruptRecordError)) Backend {
	r := reporting{b: b, report: report}
	if c, ok := b.(Compacter); ok {
		return reportingCompacter{reporting: r, c: c}
	}
	return r
}

type reporting struct {
	b      Backend
	report func(*CorruptRecordError)
}

func (r reporting) View(ctx context.Context, fn func(Tx) error) error {
	return r.b.View(ctx, func(tx Tx) error { return fn(reportingTx{tx, r.report}) })
}

func (r reporting) Update(ctx context.Context, fn func(Tx) error) error {
	return r.b.Update(ctx, func(tx Tx) error { return fn(reportingTx{tx, r.report}) })
}

func (r reporting) Close() error { return r.b.Close() }

type reportingCompacter struct {
	reporting
	c Compacter
}

func (r reportingCompacter) Compact(ctx context.Context) error { return r.c.Compact(ctx) }

type reportingTx struct {
	Tx
	report func(*CorruptRecordError)
}

func (t reportingTx) ReportCorrupt(e *CorruptRecordError) { t.report(e) }

// HintAppend passes the hint on; see [AppendHinter].
func (t reportingTx) HintAppend(bucket string) { hintAppend(t.Tx, bucket) }

// HintWriteOnce passes the hint on; see [WriteOnceHinter].
func (t reportingTx) HintWriteOnce(bucket string) { hintWriteOnce(t.Tx, bucket) }

// ScanFrom passes the scan on; see [Seeker].
func (t reportingTx) ScanFrom(bucket string, prefix, from []byte, fn func(key, value []byte) error) error {
	return scanFrom(t.Tx, bucket, prefix, from, fn)
}

// AppendChange passes the entry on; see [ChangeLogger].
func (t reportingTx) AppendChange(tenant string, entry []byte) error {
	return appendChange(t.Tx, tenant, entry)
}

// ScanChanges passes the walk on; see [ChangeLogger].
func (t reportingTx) ScanChanges(tenant string, from uint64, fn func(seq uint64, entry []byte) error) error {
	return scanLog(t.Tx, tenant, from, fn)
}

// ChangeHead passes the read on; see [ChangeLogger].
func (t reportingTx) ChangeHead(tenant string) (head, count uint64, err error) {
	return changeHead(t.Tx, tenant)
}

// PrefetchChangeHead passes the prefetch on; see [ChangeLogger].
func (t reportingTx) PrefetchChangeHead(tenant string) { prefetchChangeHead(t.Tx, tenant) }

// SumCounts passes the sum on; see [CountSummer].
func (t reportingTx) SumCounts(bucket string, prefix []byte, limit int, most uint64) (uint64, int, error) {
	return sumCounts(t.Tx, bucket, prefix, limit, most)
}

// PrefetchSumCounts passes the prefetch on; see [CountSummer].
func (t reportingTx) PrefetchSumCounts(bucket string, prefix []byte, limit int, most uint64) {
	prefetchSumCounts(t.Tx, bucket, prefix, limit, most)
}

// Prefetch passes the prefetch on; see [Prefetcher].
func (t reportingTx) Prefetch(bucket string, keys [][]byte) { prefetch(t.Tx, bucket, keys) }

// PrefetchScan passes the prefetch on; see [Prefetcher].
func (t reportingTx) PrefetchScan(bucket string, prefix []byte, reverse bool) {
	prefetchScan(t.Tx, bucket, prefix, reverse)
}

// indexedFact reads the fact id that an entry of the index bucket names.
// A fact that does not decode or does not exist is a *CorruptRecordError
// naming the index.
func indexedFact(tx Tx, index, id string) (*Fact, error) {
	f, err := GetFact(tx, id)
	if err = indexedErr(index, id, err); err != nil {
		return nil, err
	}
	return f, nil
}

// indexedErr is the error of indexedFact for the error err of reading the
// fact id that an entry of the index bucket names.
func indexedErr(index, id string, err error) error {
	var ce *CorruptRecordError
	switch {
	case errors.As(err, &ce):
		e := *ce
		e.Index = index
		return &e
	case errors.Is(err, ErrNotFound):
		return &CorruptRecordError{Bucket: bucketFacts, Key: []byte(id), ID: id, Index: index, Err: ErrMissingRecord}
	}
	return err
}
