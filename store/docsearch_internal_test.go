package store

import (
	"math/rand/v2"
	"testing"
)

// TestAddBlockMatchesReference: addBlock, with and without a probe, adds
// the scores a posting-by-posting decoding gives, on well-formed blocks
// (values of one to five bytes) and on blocks cut short or with bytes
// changed, where it must stop at the fault.
func TestAddBlockMatchesReference(t *testing.T) {
	const next = 1 << 16
	w := newTermWeight(1.7, 40)
	reference := func(v []byte, marked map[uint32]bool, probe bool) (map[uint32]float64, int) {
		scores := map[uint32]float64{}
		n, i := uvarintSlow(v, 0)
		if i < 0 || n == 0 || n > docBlockMax {
			return scores, 0
		}
		found := 0
		var seq uint64
		for range n {
			var x [3]uint64
			for j := range x {
				if x[j], i = uvarintSlow(v, i); i < 0 {
					return scores, found
				}
			}
			if seq += x[0]; seq >= next {
				return scores, found
			}
			s := uint32(seq)
			if x[1] == 0 || probe && !marked[s] && scores[s] == 0 {
				continue
			}
			found++
			f := float64(x[1])
			scores[s] += w.c * f / (f + w.k + w.kdl*float64(x[2]))
		}
		return scores, found
	}
	r := rand.New(rand.NewPCG(3, 4))
	value := func() uint32 { // one to five bytes as a uvarint
		return uint32(r.Uint64N(1<<(7*(1+r.IntN(5)))) & (1<<32 - 1))
	}
	for round := range 3000 {
		ps := make([]docPosting, 1+r.IntN(docBlockMax))
		seq := uint32(r.IntN(100))
		for i := range ps {
			if r.IntN(4) == 0 {
				seq += value() % 3000
			} else {
				seq += uint32(1 + r.IntN(200))
			}
			ps[i] = docPosting{seq: seq % next, tf: uint32(r.IntN(3)), dl: value() % 70000}
			if r.IntN(3) > 0 {
				ps[i].tf = 1 + uint32(r.IntN(300))
			}
			seq = ps[i].seq
		}
		v := encodeDocBlock(ps)
		switch round % 3 {
		case 1:
			v = v[:r.IntN(len(v)+1)]
		case 2:
			for range 1 + r.IntN(3) {
				v[r.IntN(len(v))] = byte(r.Uint32())
			}
		}
		probe := round%2 == 1
		a := &accumulator{score: make([]float64, next), count: make([]uint8, next), marked: make([]uint64, next/64)}
		marked := map[uint32]bool{}
		if probe {
			for range r.IntN(2 * len(ps)) {
				s := ps[r.IntN(len(ps))].seq + uint32(r.IntN(2))
				if s < next {
					marked[s] = true
					a.marked[s/64] |= 1 << (s % 64)
				}
			}
		}
		found := a.addBlock(v, next, w, true, probe)
		want, wantFound := reference(v, marked, probe)
		if found != wantFound {
			t.Fatalf("round %d: addBlock took %d postings, want %d", round, found, wantFound)
		}
		for s, x := range want {
			if a.score[s] != x {
				t.Fatalf("round %d: score of %d is %v, want %v", round, s, a.score[s], x)
			}
		}
		for _, s := range a.touched {
			if _, ok := want[s]; !ok {
				t.Fatalf("round %d: segment %d was scored, the reference scores it not", round, s)
			}
		}
	}
}
