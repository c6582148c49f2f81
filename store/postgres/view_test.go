package postgres

import (
	"bytes"
	"context"
	"fmt"
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

// A commit inserts the keys the transaction read as absent, upserts the
// others, deletes only the keys it did not read as absent, and sends
// nothing when no write is left.
func TestCommitStatementsByBase(t *testing.T) {
	k := func(s string) []byte { return []byte(s) }
	x := &tx{db: &DB{commitTokens: true}, ctx: context.Background(), begun: true, writable: true}
	// Read: a1 and a2 absent, p1 present, and the range [r, s) in full (r1 in it).
	x.record(&fetch{bucket: "b", keys: [][]byte{k("a1"), k("a2"), k("p1")}}, []*entry{{key: k("p1"), val: k("v"), present: true}})
	x.record(&fetch{bucket: "b", lo: k("r"), hi: k("s")}, []*entry{{key: k("r1"), val: k("v"), present: true}})
	for _, key := range []string{"a1", "p1", "u1", "r2", "r1"} {
		if err := x.Put("b", k(key), k("new")); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{"a2", "r3", "u2", "p1", "r1"} { // p1, r1: written, then deleted
		if err := x.Delete("b", k(key)); err != nil {
			t.Fatal(err)
		}
	}
	if err := x.Put("b", k("a2"), k("again")); err != nil { // deleted, then written: still read as absent
		t.Fatal(err)
	}
	b := x.commitBatch()
	var got []string
	for _, q := range b.QueuedQueries {
		line := q.SQL
		if len(q.Arguments) > 1 {
			line = ""
			for _, key := range q.Arguments[1].([][]byte) {
				line += string(key) + " "
			}
			switch q.SQL {
			case sqlInsert:
				line = "insert " + line
			case sqlUpsert:
				line = "upsert " + line
			case sqlDelete:
				line = "delete " + line
			}
		}
		got = append(got, line)
	}
	want := []string{"insert a1 a2 r2 ", "upsert u1 ", "delete p1 r1 u2 ", sqlCommitToken, "COMMIT"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("statements %q, want %q", got, want)
	}

	// Only keys read as absent, deleted: nothing to send but the COMMIT.
	x = &tx{db: &DB{commitTokens: true}, ctx: context.Background(), begun: true, writable: true}
	x.record(&fetch{bucket: "b", keys: [][]byte{k("a1")}}, nil)
	if err := x.Delete("b", k("a1")); err != nil {
		t.Fatal(err)
	}
	if b := x.commitBatch(); b == nil || len(b.QueuedQueries) != 1 || b.QueuedQueries[0].SQL != "COMMIT" {
		t.Errorf("deleting a key read as absent: %v, want a lone COMMIT", b)
	}
}
