package postgres

import (
	"bytes"
	"slices"
	"sort"
)

// A transaction keeps, per bucket, its view of the table: the rows it has
// read (its snapshot's values, which do not change while it runs) and the
// rows it has written (sent to the server only at commit). Ranges it has
// read in full are recorded as spans, so a second Scan or a Get inside one
// is answered without a round trip.

// entry is one key of a bucket's view: its value in the transaction, or
// its absence (present false), read from the server (clean) or written by
// the transaction (dirty). A dirty entry also knows whether the key has a
// row in the transaction's snapshot (base), when the transaction read it
// before writing it: the commit then inserts or deletes the row with
// cheaper statements, or sends nothing.
type entry struct {
	key, val []byte
	present  bool
	dirty    bool
	base     base
}

// base is what a transaction knows of a key's row in its snapshot.
type base uint8

const (
	baseUnknown base = iota // never read
	baseAbsent              // read: no row
	basePresent             // read: a row
)

// base returns what the view knows of the row of key in the snapshot:
// from the entry read from the server, or the one the first write of the
// key replaced, or a range read that covered the key.
func (bv *bucketView) base(key []byte) base {
	switch e := bv.ents[string(key)]; {
	case e != nil && e.dirty:
		return e.base
	case e != nil && e.present:
		return basePresent
	case e != nil:
		return baseAbsent
	}
	if _, ok := bv.covering(key); ok {
		return baseAbsent
	}
	return baseUnknown
}

// span is a key range [lo, hi) (hi nil: no upper bound) every row of
// which is in the view.
type span struct{ lo, hi []byte }

// bucketView is the view of one bucket.
type bucketView struct {
	ents  map[string]*entry
	keys  []*entry // every entry of ents, sorted by key
	spans []span   // sorted, disjoint and not adjacent
}

func newBucketView() *bucketView { return &bucketView{ents: make(map[string]*entry)} }

// search returns the index of the first entry whose key is not less than k.
func (bv *bucketView) search(k []byte) int {
	return sort.Search(len(bv.keys), func(i int) bool { return bytes.Compare(bv.keys[i].key, k) >= 0 })
}

// set puts e in the view, replacing the entry of its key, and returns the
// entry it replaced (nil if none).
func (bv *bucketView) set(e *entry) *entry {
	old := bv.ents[string(e.key)]
	bv.ents[string(e.key)] = e
	i := bv.search(e.key)
	if old != nil {
		bv.keys[i] = e
		return old
	}
	bv.keys = append(bv.keys, nil)
	copy(bv.keys[i+1:], bv.keys[i:])
	bv.keys[i] = e
	return nil
}

// remove takes the entry of key out of the view.
func (bv *bucketView) remove(key []byte) {
	if _, ok := bv.ents[string(key)]; !ok {
		return
	}
	delete(bv.ents, string(key))
	i := bv.search(key)
	bv.keys = append(bv.keys[:i], bv.keys[i+1:]...)
}

// below reports whether a < b, b nil meaning no upper bound.
func below(a, b []byte) bool { return b == nil || bytes.Compare(a, b) < 0 }

// covering returns the span holding key k.
func (bv *bucketView) covering(k []byte) (span, bool) {
	i := sort.Search(len(bv.spans), func(i int) bool { return below(k, bv.spans[i].hi) })
	if i < len(bv.spans) && bytes.Compare(bv.spans[i].lo, k) <= 0 {
		return bv.spans[i], true
	}
	return span{}, false
}

// coveringBelow returns the span holding the keys just below k (k nil: the
// greatest keys), that is the span with lo < k <= hi.
func (bv *bucketView) coveringBelow(k []byte) (span, bool) {
	if k == nil {
		if n := len(bv.spans); n > 0 && bv.spans[n-1].hi == nil {
			return bv.spans[n-1], true
		}
		return span{}, false
	}
	// The first span whose hi is not below k, i.e. hi >= k.
	i := sort.Search(len(bv.spans), func(i int) bool { return bv.spans[i].hi == nil || bytes.Compare(bv.spans[i].hi, k) >= 0 })
	if i < len(bv.spans) && bytes.Compare(bv.spans[i].lo, k) < 0 {
		return bv.spans[i], true
	}
	return span{}, false
}

// addSpan records that every row of [lo, hi) is in the view, merging the
// spans it overlaps or touches. It finds them by binary search, so that a
// transaction that reads many ranges (an upgrade reindexing a store) does
// not pay for all its spans at each one.
func (bv *bucketView) addSpan(lo, hi []byte) {
	if hi != nil && bytes.Compare(lo, hi) >= 0 {
		return
	}
	// spans[:i] end before lo; spans[j:] start after hi.
	i := sort.Search(len(bv.spans), func(k int) bool {
		s := bv.spans[k]
		return s.hi == nil || bytes.Compare(s.hi, lo) >= 0
	})
	j := i
	if hi == nil {
		j = len(bv.spans)
	} else {
		j += sort.Search(len(bv.spans)-i, func(k int) bool { return bytes.Compare(bv.spans[i+k].lo, hi) > 0 })
	}
	if i < j {
		if first := bv.spans[i]; bytes.Compare(first.lo, lo) < 0 {
			lo = first.lo
		}
		if last := bv.spans[j-1]; hi != nil && (last.hi == nil || bytes.Compare(last.hi, hi) > 0) {
			hi = last.hi
		}
	}
	bv.spans = slices.Replace(bv.spans, i, j, span{lo, hi})
}

// next returns the first present entry with lo <= key < hi (hi nil: no
// bound), or nil.
func (bv *bucketView) next(lo, hi []byte) *entry {
	for i := bv.search(lo); i < len(bv.keys) && below(bv.keys[i].key, hi); i++ {
		if bv.keys[i].present {
			return bv.keys[i]
		}
	}
	return nil
}

// prev returns the last present entry with lo <= key < hi (hi nil: no
// bound), or nil.
func (bv *bucketView) prev(lo, hi []byte) *entry {
	i := len(bv.keys)
	if hi != nil {
		i = bv.search(hi)
	}
	for i--; i >= 0 && bytes.Compare(bv.keys[i].key, lo) >= 0; i-- {
		if bv.keys[i].present {
			return bv.keys[i]
		}
	}
	return nil
}

// dropClean forgets the rows read from the server, keeping the writes.
func (bv *bucketView) dropClean() {
	bv.spans = nil
	kept := bv.keys[:0]
	for _, e := range bv.keys {
		if e.dirty {
			kept = append(kept, e)
		} else {
			delete(bv.ents, string(e.key))
		}
	}
	clear(bv.keys[len(kept):])
	bv.keys = kept
}
