package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/crux-go/crux/store"
)

// scanPage is how many rows a Scan reads per query.
const scanPage = 256

// errTxDone reports use of a store.Tx after its function returned.
var errTxDone = errors.New("store/postgres: transaction used after its function returned")

// tx implements store.Tx on a PostgreSQL transaction.
type tx struct {
	ctx      context.Context
	ptx      pgx.Tx
	writable bool
	done     bool
	ctxErr   error // ctx's error, once seen: every later call fails with it
	pgErr    error // the statement error that aborted the transaction: every later call fails with it
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
	if err := t.ctx.Err(); err != nil {
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

func (t *tx) Get(bucket string, key []byte) ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if err := checkKey(bucket, key); err != nil {
		return nil, err
	}
	var v []byte
	err := t.ptx.QueryRow(t.ctx, "SELECT value FROM kv WHERE bucket = $1 AND key = $2", bucket, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, t.failed(err)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
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
	if value == nil {
		value = []byte{}
	}
	_, err := t.ptx.Exec(t.ctx, `INSERT INTO kv (bucket, key, value) VALUES ($1, $2, $3)
		ON CONFLICT (bucket, key) DO UPDATE SET value = EXCLUDED.value`, bucket, key, value)
	if err != nil {
		return t.failed(err)
	}
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
	if _, err := t.ptx.Exec(t.ctx, "DELETE FROM kv WHERE bucket = $1 AND key = $2", bucket, key); err != nil {
		return t.failed(err)
	}
	return nil
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

type row struct{ k, v []byte }

// Scan visits the keys of bucket starting with prefix in key order (or
// reverse), a page of scanPage rows at a time.
func (t *tx) Scan(bucket string, prefix []byte, reverse bool, fn func(key, value []byte) error) error {
	if err := t.check(); err != nil {
		return err
	}
	if bucket == "" {
		return store.ErrEmptyKey
	}
	lo, hi := prefix, successor(prefix) // keys in [lo, hi); hi nil: no upper bound
	if len(lo) == 0 {
		lo, hi = []byte{}, nil
	}
	return t.scanRange(bucket, lo, hi, reverse, fn)
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
	lo, hi := prefix, successor(prefix)
	if len(prefix) == 0 {
		hi = nil
	}
	if bytes.Compare(from, lo) > 0 {
		lo = from
	}
	return t.scanRange(bucket, lo, hi, false, fn)
}

// scanRange visits the keys of bucket in [lo, hi) (hi nil: no upper
// bound), a page at a time.
func (t *tx) scanRange(bucket string, lo, hi []byte, reverse bool, fn func(key, value []byte) error) error {
	for {
		page, err := t.page(bucket, lo, hi, reverse)
		if err != nil {
			return err
		}
		for _, r := range page {
			if err := fn(r.k, r.v); err != nil {
				if errors.Is(err, store.ErrStop) {
					return nil
				}
				return err
			}
			if err := t.check(); err != nil {
				return err
			}
		}
		if len(page) < scanPage {
			return nil
		}
		last := page[len(page)-1].k
		if reverse {
			hi = last // the next page is below the last key
		} else {
			lo = append(append([]byte(nil), last...), 0) // the least key above the last
		}
	}
}

// page reads up to scanPage rows of bucket with keys in [lo, hi).
func (t *tx) page(bucket string, lo, hi []byte, reverse bool) ([]row, error) {
	order := "ASC"
	if reverse {
		order = "DESC"
	}
	q := "SELECT key, value FROM kv WHERE bucket = $1 AND key >= $2"
	args := []any{bucket, lo}
	if hi != nil {
		q += " AND key < $3"
		args = append(args, hi)
	}
	q += " ORDER BY key " + order + fmt.Sprintf(" LIMIT %d", scanPage)
	rows, err := t.ptx.Query(t.ctx, q, args...)
	if err != nil {
		return nil, t.failed(err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.k, &r.v); err != nil {
			return nil, t.failed(err)
		}
		if r.v == nil {
			r.v = []byte{}
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, t.failed(err)
	}
	return out, nil
}
