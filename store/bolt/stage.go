package bolt

import (
	"bytes"
	"errors"
	"slices"
	"strings"

	"go.etcd.io/bbolt"

	"github.com/crux-go/crux/store"
)

// Staged buckets. A commit writes every page on the path from each leaf it
// changed to its bucket's root: an entry landing on a random leaf of a
// large bucket costs three pages or more. The writes to a bucket that
// [store.StagedIndexes] names therefore go to a small bucket of their own
// first, its stage (the bucket's name and stageSuffix), one page in a
// lone commit, and move to the bucket together, sorted, once the stage
// holds more than stageBytes: they then share the pages of the bucket's
// upper levels, and land on leaves in key order.
//
// Reads see the two as one bucket: Get looks in the stage first, Scan
// merges the two in key order, an entry of the stage taking the place of
// the bucket's entry of the same key, and Delete removes the key from
// both. Nothing else reads the stage, and the move happens in the
// transaction that fills it, so every committed state reads the same
// either side of a move.

// stageSuffix is appended to a staged bucket's name to name its stage.
const stageSuffix = ".staged"

// stageBytes bounds the size of a stage (keys, values and bbolt's 16-byte
// element headers) that a commit leaves behind: a stage that has grown
// past it is moved into its bucket before the commit. Under a page, so a
// stage is one leaf.
const stageBytes = 3200

// stages maps each staged bucket to its stage.
var stages = func() map[string]string {
	m := make(map[string]string)
	for _, b := range store.StagedIndexes() {
		m[b] = b + stageSuffix
	}
	return m
}()

// stagePut puts key and value into the stage of bucket, which is staged,
// and notes the stage for flushStages.
func (t *tx) stagePut(stage string, key, value []byte) error {
	if !slices.Contains(t.w.staged, stage) {
		t.w.staged = append(t.w.staged, stage)
	}
	return t.put(stage, key, value)
}

// stageGet is Get of a staged bucket: the stage's entry, else the
// bucket's.
func (t *tx) stageGet(bucket, stage string, key []byte) ([]byte, error) {
	v, err := t.get(stage, key)
	if !errors.Is(err, store.ErrNotFound) {
		return v, err
	}
	return t.get(bucket, key)
}

// scanBuckets is scan of the bucket b and, for a staged bucket, its stage
// s (either may be nil): both walked together in key order, an entry of s
// hiding b's entry of the same key.
func (t *tx) scanBuckets(b, s *bbolt.Bucket, prefix, from []byte, reverse bool, fn func(key, value []byte) error) error {
	cache := t.cache()
	var cb, cs *bbolt.Cursor
	var kb, vb, ks, vs []byte
	if b != nil {
		cb = cache.cursor(b)
		defer cache.release(b, cb)
		kb, vb = startScan(cb, prefix, from, reverse)
	}
	if s != nil {
		cs = cache.cursor(s)
		defer cache.release(s, cs)
		ks, vs = startScan(cs, prefix, from, reverse)
	}
	for n := 1; ; n++ {
		inB := kb != nil && bytes.HasPrefix(kb, prefix)
		inS := ks != nil && bytes.HasPrefix(ks, prefix)
		if !inB && !inS {
			return nil
		}
		if n%scanCheckEvery == 0 {
			if err := t.check(); err != nil {
				return err
			}
		}
		c := 1 // which comes first: <0 b's, >0 s's, 0 both (s's wins)
		if inB && inS {
			c = bytes.Compare(kb, ks)
			if reverse {
				c = -c
			}
		} else if inB {
			c = -1
		}
		k, v := ks, vs
		if c < 0 {
			k, v = kb, vb
		}
		if v == nil {
			v = emptyValue
		}
		gen := t.gen()
		if err := fn(k, v); err != nil {
			if errors.Is(err, store.ErrStop) {
				return nil
			}
			return err
		}
		if t.gen() != gen {
			// A write may have moved the cursors' nodes: seek again from
			// the key just visited.
			k = bytes.Clone(k)
			if cb != nil {
				kb, vb = reposition(cb, k, reverse)
			}
			if cs != nil {
				ks, vs = reposition(cs, k, reverse)
			}
			continue
		}
		if c <= 0 {
			kb, vb = step(cb, reverse)
		}
		if c >= 0 {
			ks, vs = step(cs, reverse)
		}
	}
}

// startScan positions c where a scan of prefix starts (at from, when it is
// set and greater than prefix, in an ascending scan) and returns its key.
func startScan(c *bbolt.Cursor, prefix, from []byte, reverse bool) ([]byte, []byte) {
	switch {
	case !reverse && bytes.Compare(from, prefix) > 0:
		return c.Seek(from)
	case !reverse && len(prefix) == 0:
		return c.First()
	case !reverse:
		return c.Seek(prefix)
	default:
		return seekLast(c, prefix)
	}
}

// step moves c to the next key of a scan.
func step(c *bbolt.Cursor, reverse bool) ([]byte, []byte) {
	if reverse {
		return c.Prev()
	}
	return c.Next()
}

// flushStages moves each stage that this transaction wrote to and that
// has grown past stageBytes into its bucket, in key order, and empties it.
// A stage that stays is only measured, not copied.
func (t *tx) flushStages() error {
	for _, stage := range t.w.staged {
		s := t.bucket(stage)
		if s == nil || stageSize(s) <= stageBytes {
			continue
		}
		var keys, vals [][]byte
		c := s.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v))
		}
		bucket := strings.TrimSuffix(stage, stageSuffix)
		for i, k := range keys {
			if err := t.put(bucket, k, vals[i]); err != nil {
				return err
			}
		}
		for _, k := range keys {
			if err := t.delete(stage, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// stageSize is the size of the stage s as stageBytes counts it: keys,
// values and bbolt's 16-byte element headers.
func stageSize(s *bbolt.Bucket) int {
	size := 0
	c := s.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		size += 16 + len(k) + len(v)
	}
	return size
}
