package postgres

import (
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"

	"github.com/crux-go/crux/store"
)

// Sums of counts (store.CountSummer). A keyword query adds up the counts
// of a tenant's first 256 entities of facts.active; read as rows, they
// were a quarter of its time. The server adds them up instead and sends
// one row. A value is a count when it is 8 bytes long, read big-endian as
// unsigned: as a bigint it is negative from 2^63 on, which get_byte tells
// apart, and those are all above any cap.

const (
	sqlSumCounts = `SELECT coalesce(sum(CASE WHEN length(value) <> 8 THEN 0 WHEN get_byte(value, 0) >= 128 THEN $5
		ELSE least(('x' || encode(value, 'hex'))::bit(64)::bigint, $5) END), 0)::bigint, count(*)
		FROM (SELECT value FROM kv WHERE bucket = $1 AND key >= $2 AND key < $3 ORDER BY key LIMIT $4) s`
	sqlSumCountsOpen = `SELECT coalesce(sum(CASE WHEN length(value) <> 8 THEN 0 WHEN get_byte(value, 0) >= 128 THEN $4
		ELSE least(('x' || encode(value, 'hex'))::bit(64)::bigint, $4) END), 0)::bigint, count(*)
		FROM (SELECT value FROM kv WHERE bucket = $1 AND key >= $2 ORDER BY key LIMIT $3) s`
)

var _ store.CountSummer = (*tx)(nil)

// SumCounts adds up the counts of the first limit keys of bucket starting
// with prefix, on the server (store.CountSummer).
func (t *tx) SumCounts(bucket string, prefix []byte, limit int, most uint64) (uint64, int, error) {
	if err := t.check(); err != nil {
		return 0, 0, err
	}
	if bucket == "" {
		return 0, 0, store.ErrEmptyKey
	}
	if limit <= 0 {
		return 0, 0, nil
	}
	c := t.sumRead(bucket, prefix, limit, most)
	for range 2 {
		if s, ok := t.sums[c.id]; ok {
			return s[0], int(s[1]), nil
		}
		if err := t.fetch(fetch{custom: c}); err != nil {
			return 0, 0, err
		}
	}
	return 0, 0, fmt.Errorf("store/postgres: internal error: sum of %s not in the view after reading it", bucket)
}

// PrefetchSumCounts queues the statement of SumCounts for the next round
// trip (store.CountSummer).
func (t *tx) PrefetchSumCounts(bucket string, prefix []byte, limit int, most uint64) {
	if t.check() != nil || bucket == "" || limit <= 0 {
		return
	}
	c := t.sumRead(bucket, prefix, limit, most)
	if _, ok := t.sums[c.id]; !ok {
		t.queue = append(t.queue, fetch{custom: c})
	}
}

// sumRead is the read of a SumCounts.
func (t *tx) sumRead(bucket string, prefix []byte, limit int, most uint64) *customRead {
	id := fmt.Sprintf("sum\x00%s\x00%x\x00%d\x00%d", bucket, prefix, limit, most)
	capped := int64(min(most, math.MaxInt64))
	lo, hi := prefixRange(prefix)
	lo = append([]byte{}, lo...) // never nil: nil is NULL
	c := &customRead{id: id, sql: sqlSumCounts, args: []any{bucket, lo, hi, int64(limit), capped}}
	if hi == nil {
		c.sql, c.args = sqlSumCountsOpen, []any{bucket, lo, int64(limit), capped}
	}
	c.got = func(r pgx.Rows) error {
		var sum, n int64
		for r.Next() {
			if err := r.Scan(&sum, &n); err != nil {
				return err
			}
		}
		if err := r.Err(); err != nil {
			return err
		}
		if t.sums == nil {
			t.sums = map[string][2]uint64{}
		}
		t.sums[id] = [2]uint64{uint64(sum), uint64(n)}
		return nil
	}
	return c
}
