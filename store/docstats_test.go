package store

import "testing"

// TestDecodeDocStats: the decoder of the statistics every query reads
// agrees with the general CBOR decoder on what putDocStats writes, at
// every integer width, and leaves any other shape to it.
func TestDecodeDocStats(t *testing.T) {
	vals := []uint64{0, 1, 23, 24, 255, 256, 65535, 65536, 1<<32 - 1}
	for i, a := range vals {
		for j, b := range vals {
			want := DocStats{Documents: int(a), Segments: int(b), Terms: int64(a)<<8 + int64(j), Next: uint32(vals[(i+j)%len(vals)])}
			v, err := factEnc.Marshal(want)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := decodeDocStats(v)
			if !ok || got != want {
				t.Fatalf("decodeDocStats(%x) = %+v, %v; want %+v", v, got, ok, want)
			}
		}
	}
	for _, v := range [][]byte{nil, {0xa4}, {0xa3, 1, 0, 2, 0, 3, 0}, {0xa4, 1, 0, 2, 0, 3, 0, 4, 0x20}, {0xa4, 1, 0, 2, 0, 4, 0, 3, 0},
		{0xa4, 1, 0, 2, 0, 3, 0, 4, 0x1a, 0, 0}, {0xa4, 1, 0, 2, 0, 3, 0, 4, 0x1b, 1, 0, 0, 0, 0, 0, 0, 0}, {0xa4, 1, 0, 2, 0, 3, 0, 4, 0, 0}} {
		if s, ok := decodeDocStats(v); ok {
			t.Errorf("decodeDocStats(%x) = %+v, want it left to the general decoder", v, s)
		}
	}
}
