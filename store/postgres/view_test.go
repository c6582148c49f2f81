package postgres

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// addSpanRef is the obvious addSpan, merging by a pass over every span.
func addSpanRef(spans []span, lo, hi []byte) []span {
	if hi != nil && bytes.Compare(lo, hi) >= 0 {
		return spans
	}
	var out []span
	placed := false
	for _, s := range spans {
		switch {
		case s.hi != nil && bytes.Compare(s.hi, lo) < 0:
			out = append(out, s)
		case hi != nil && bytes.Compare(s.lo, hi) > 0:
			if !placed {
				out = append(out, span{lo, hi})
				placed = true
			}
			out = append(out, s)
		default:
			if bytes.Compare(s.lo, lo) < 0 {
				lo = s.lo
			}
			if hi != nil && (s.hi == nil || bytes.Compare(s.hi, hi) > 0) {
				hi = s.hi
			}
		}
	}
	if !placed {
		out = append(out, span{lo, hi})
	}
	return out
}

// addSpan keeps the spans the obvious merge keeps, over random ranges of
// one-byte keys (so that ranges often overlap, touch and nest), some
// without an upper bound.
func TestAddSpanMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		bv := newBucketView()
		var ref []span
		for range 1 + r.IntN(12) {
			lo := []byte{byte(r.IntN(40))}
			var hi []byte
			if r.IntN(8) > 0 {
				hi = []byte{byte(r.IntN(40))}
			}
			bv.addSpan(lo, hi)
			ref = addSpanRef(ref, lo, hi)
			if len(bv.spans) != len(ref) {
				t.Fatalf("round %d: after [%v, %v): spans %v, want %v", round, lo, hi, bv.spans, ref)
			}
			for i := range ref {
				if !bytes.Equal(bv.spans[i].lo, ref[i].lo) || !bytes.Equal(bv.spans[i].hi, ref[i].hi) || (bv.spans[i].hi == nil) != (ref[i].hi == nil) {
					t.Fatalf("round %d: after [%v, %v): spans %v, want %v", round, lo, hi, bv.spans, ref)
				}
			}
		}
	}
}
