package store

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBlockLayouts encodes blocks of standard and other ids, equal and
// different confidences and times going either way, with and without
// counts (small and large term frequencies and lengths), and reads them
// back; blocks of formats 6, 7 and 9 still decode (without counts), and
// damaged blocks are refused.
func TestBlockLayouts(t *testing.T) {
	rank := func(conf float64, at time.Time) []byte {
		r := binary.BigEndian.AppendUint64(nil, ^math.Float64bits(conf))
		return binary.BigEndian.AppendUint64(r, ^uint64(at.UnixNano()))
	}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var ps []posting
	for i := range 40 {
		ps = append(ps, posting{id: NewFactID(), rank: rank(1, t0.Add(time.Duration(i)*time.Millisecond))})
	}
	ps = append(ps,
		posting{id: NewFactID(), rank: rank(0.25, t0.Add(-time.Hour))},
		posting{id: NewFactID(), rank: rank(0, t0.Add(time.Hour))},
		posting{id: NewFactID(), rank: rank(0, time.Unix(0, 0))},
	)
	// Confidences that are not whole hundredths.
	ps = append(ps,
		posting{id: NewFactID(), rank: rank(1.0/3, t0)},
		posting{id: NewFactID(), rank: rank(math.Copysign(0, -1), t0)},
		posting{id: NewFactID(), rank: rank(0.123, t0)},
		posting{id: NewFactID(), rank: rank(0.07, t0)},
	)
	// Ids that are not standard: random-ordered old ones sort among them.
	ps = append(ps, posting{id: "f_" + "ffffffffffffffffffffffffffffffff", rank: rank(1, t0)},
		posting{id: "g_not-a-standard-id", rank: rank(0.5, t0)},
		posting{id: "F_0123456789ABCDEF0123456789ABCDEF", rank: rank(0.5, t0)},
		posting{id: string(make([]byte, 254)), rank: rank(0.5, t0)})

	// Counts on most postings: every term frequency that fits the flags,
	// those past them, lengths of one and more bytes, and none.
	for i := range ps {
		if i%11 != 10 {
			ps[i].tf = uint32([]int{1, 2, 5, 6, 7, 8, 130, 1 << 20, 3, 4}[i%11])
			ps[i].dl = uint32([]int{1, 127, 128, 200, 7, 1 << 16, 1 << 20, 3, 9, 40}[i%11])
		}
	}
	ps[0].tf, ps[0].dl = tfMax, tfMax

	b := encodeBlock(ps)
	got, current, err := decodeBlockLayout(b)
	require.NoError(t, err)
	assert.True(t, current)
	assert.Equal(t, ps, got)
	assert.Equal(t, byte(blockMark10), b[0])

	// Formats 7 and 9, which Upgrade rebuilds, still read, without counts.
	plain := make([]posting, len(ps))
	for i, p := range ps {
		plain[i] = posting{id: p.id, rank: p.rank}
	}
	for _, l := range []int{layout7, layout9} {
		bl := encodeBlockLayout(ps, l)
		assert.Equal(t, markOf(l), bl[0])
		got, current, err = decodeBlockLayout(bl)
		require.NoError(t, err)
		assert.False(t, current)
		assert.Equal(t, plain, got)
	}
	assert.Less(t, len(encodeBlockLayout(ps, layout9)), len(b), "counts take room")
	ps = plain

	// A block of one posting of a new fact, as most words have.
	at := time.Now()
	one := []posting{{id: NewFactID(), rank: rank(0.9, at)}}
	b1 := encodeBlock(one)
	assert.LessOrEqual(t, len(b1), 24, "%x", b1)
	counted := []posting{{id: one[0].id, rank: one[0].rank, tf: 2, dl: 60}}
	assert.Len(t, encodeBlock(counted), len(b1)+1, "a count of up to 6 and a length under 128 take a byte")
	assert.Less(t, len(b1)+10, len(encodeBlockLayout(one, layout7)))
	got, err = decodeBlock(b1)
	require.NoError(t, err)
	assert.Equal(t, one, got)
	for _, conf := range []float64{0, 0.01, 0.29, 0.57, 1} {
		pct, ok := confPct(rank(conf, at)[:8])
		assert.True(t, ok, "%v", conf)
		assert.Equal(t, conf, float64(pct)/100)
	}
	for _, conf := range []float64{-0.01, 1.01, 0.005, math.NaN(), math.Inf(1), math.Copysign(0, -1)} {
		_, ok := confPct(rank(conf, at)[:8])
		assert.False(t, ok, "%v", conf)
	}

	std := encodeBlock(ps[:40])
	assert.Less(t, len(std), 40*19, "standard postings of one confidence take under 19 bytes each")
	old := encodeBlockFormat6(ps[:40])
	assert.Equal(t, 40*33, len(old))
	got, err = decodeBlock(old)
	require.NoError(t, err)
	assert.Equal(t, ps[:40], got, "a format-6 block decodes")

	// A format-6 block whose first id is 254 or 253 bytes long starts
	// with a mark; it still reads as what it is.
	for _, l := range []int{254, 253} {
		long := []posting{{id: string(make([]byte, l)), rank: rank(0.5, t0)}}
		b6 := encodeBlockFormat6(long)
		require.Equal(t, byte(l), b6[0])
		got, current, err = decodeBlockLayout(b6)
		require.NoError(t, err)
		assert.False(t, current)
		assert.Equal(t, long, got)
	}

	for _, bad := range [][]byte{{blockMark}, {blockMark, 0x08}, {blockMark, flagStdID, 0x02}, b[:len(b)-1], {blockMark, flagSameConf | flagStdID, 0},
		{blockMark, flagConfPct, 1, 'x', 101, 0}, {blockMark, flagConfPct | flagSameConf, 1, 'x', 1, 0}, {blockMark7, flagConfPct, 1, 'x', 1, 0},
		{blockMark, flagSeqID, 1, 0}, {blockMark, 0, 1, 'x', 0, flagSeqID, 1, 0}, {blockMark7, flagStdID, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, flagSeqID, 1, 0},
		// Counts: in a block of format 9, a length missing or cut short, a
		// term frequency past 7 without its rest, the eighth flag bit, a
		// term frequency or a length past tfMax.
		{blockMark, flagConfPct | 1<<tfShift, 1, 'x', 50, 0, 1}, {blockMark10, flagConfPct | 1<<tfShift, 1, 'x', 50, 0},
		{blockMark10, flagConfPct | 7<<tfShift, 1, 'x', 50, 0, 1}, {blockMark10, flagConfPct | 1<<tfShift, 1, 'x', 50, 0, 0x80},
		{blockMark10, flagConfPct | 0x80, 1, 'x', 50, 0}, {blockMark10, flagConfPct | 7<<tfShift, 1, 'x', 50, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 1},
		{blockMark10, flagConfPct | 1<<tfShift, 1, 'x', 50, 0, 0x81, 0x80, 0x80, 0x80, 0x04}} {
		_, err := decodeBlock(bad)
		assert.Error(t, err, "%x", bad)
	}
	got, err = decodeBlock([]byte{blockMark10, flagConfPct | 7<<tfShift, 1, 'x', 50, 0, 2, 3})
	require.NoError(t, err)
	assert.Equal(t, []posting{{id: "x", rank: append(rank(0.5, time.Unix(0, 0))[:8], make([]byte, 8)...), tf: 9, dl: 3}}, got)
}

// encodeBlockFormat6 is the block layout of format 6.
func encodeBlockFormat6(ps []posting) []byte {
	var b []byte
	for _, p := range ps {
		if raw, ok := compactID(p.id); ok {
			b = append(append(b, 0), raw[:]...)
		} else {
			b = append(append(b, byte(len(p.id))), p.id...)
		}
		b = append(b, p.rank...)
	}
	return b
}

// TestBlockSeqIDs: ids of one millisecond a little apart, as facts
// written together get, take a byte or two each after the first, and read
// back; the distance is counted from the previous standard id only, ids
// of another millisecond or far apart take their 10 bytes, and format-7
// blocks never hold them.
func TestBlockSeqIDs(t *testing.T) {
	r := binary.BigEndian.AppendUint64(nil, ^math.Float64bits(1))
	r = binary.BigEndian.AppendUint64(r, ^uint64(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano()))
	raw, ok := compactID(NewFactID())
	require.True(t, ok)
	id := func(ms, lo uint64) string {
		b := raw
		b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
		binary.BigEndian.PutUint64(b[8:], lo)
		return standardID(b[:])
	}
	ms := idMs(raw[:])
	var ps []posting
	for i := range uint64(32) {
		ps = append(ps, posting{id: id(ms, 1000+i*i), rank: r})
	}
	b := encodeBlock(ps)
	assert.Less(t, len(b), 16+32*(1+2+1)+8, "%d bytes", len(b))
	got, err := decodeBlock(b)
	require.NoError(t, err)
	assert.Equal(t, ps, got)

	// Past seqMax, in the next millisecond, across a wrap of the last 8
	// bytes, after an id that is not standard: 10 bytes each.
	// (A block's ids are sorted; the encoding does not depend on it.)
	far := []posting{{id: id(ms, 5), rank: r}, {id: id(ms, 5+seqMax+1), rank: r}, {id: id(ms+1, 6+seqMax+1), rank: r},
		{id: id(ms+1, math.MaxUint64), rank: r}, {id: id(ms+2, 0), rank: r}, {id: "g_other", rank: r}, {id: id(ms+2, 1), rank: r}}
	b = encodeBlock(far)
	got, err = decodeBlock(b)
	require.NoError(t, err)
	assert.Equal(t, far, got)
	assert.GreaterOrEqual(t, len(b), 1+6*12+1+1+7+1, "every standard id in its 10 bytes")

	b7 := encodeBlockLayout(ps, layout7)
	assert.Greater(t, len(b7), 32*11)
	got, err = decodeBlock(b7)
	require.NoError(t, err)
	assert.Equal(t, ps, got)
}

// TestCompactID: a standard fact id stands for its 16 bytes and back; an
// id of any other form (uppercase or non-hex digits, another length or
// prefix) has no compact form, as encoding/hex decoding and re-encoding
// it would tell.
func TestCompactID(t *testing.T) {
	for range 100 {
		id := NewFactID()
		raw, ok := compactID(id)
		require.True(t, ok, id)
		want, err := hex.DecodeString(id[2:])
		require.NoError(t, err)
		assert.Equal(t, want, raw[:])
		assert.Equal(t, id, standardID(raw[:]))
	}
	std := "f_0123456789abcdef0123456789abcdef"
	_, ok := compactID(std)
	require.True(t, ok)
	for _, id := range []string{
		"f_0123456789ABCDEF0123456789abcdef", "f_0123456789abcdef0123456789abcdeg",
		"f_0123456789abcdef0123456789abcde", "f_0123456789abcdef0123456789abcdef0",
		"g_0123456789abcdef0123456789abcdef", "F_0123456789abcdef0123456789abcdef",
		"f_0123456789abcdef0123456789abcd\x00f", "f_0123456789abcdef0123456789abcd/f",
		"f_0123456789abcdef0123456789abcd:f", "f_0123456789abcdef0123456789abcd`f",
		"", "f_", "custom-id",
	} {
		raw, ok := compactID(id)
		assert.False(t, ok, id)
		assert.Equal(t, [16]byte{}, raw, id)
	}
}

// randomPostings returns n postings of the kinds a block meets, mostly in
// id order: standard ids of one millisecond a little apart or far apart,
// of later milliseconds or (rarely) earlier ones, ids that are not
// standard (some of 34 bytes), confidences of whole hundredths or not,
// often the previous posting's, and times going either way.
func randomPostings(rng *rand.Rand, n int) []posting {
	confs := []float64{1, 0.5, 0.07, 0, 1.0 / 3, 0.123, math.Copysign(0, -1)}
	ms, lo := uint64(1_700_000_000_000+rng.IntN(1000)), rng.Uint64()
	at := ms * 1e6
	conf := confs[0]
	ps := make([]posting, 0, n)
	for range n {
		switch k := rng.IntN(20); {
		case k < 8:
			lo += 1 + uint64(rng.IntN(3)) // written together
		case k < 10:
			lo += seqMax + uint64(rng.IntN(3)) // of one millisecond, far apart
		case k < 15:
			ms, lo = ms+1+uint64(rng.IntN(2000)), rng.Uint64()
		case k < 16:
			ms, lo = ms-uint64(rng.IntN(5)), rng.Uint64() // out of order
		}
		var raw [16]byte
		raw[0], raw[1], raw[2], raw[3], raw[4], raw[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
		binary.BigEndian.PutUint64(raw[8:], lo)
		id := standardID(raw[:])
		switch rng.IntN(12) {
		case 0:
			id += "-other" // sorts after id, before greater standard ids
		case 1:
			id = id[:33] + "g" // 34 bytes, not standard
		case 2:
			id = "g_" + id[2:20]
		}
		if rng.IntN(2) == 0 {
			conf = confs[rng.IntN(len(confs))]
		}
		switch rng.IntN(4) {
		case 0:
			at -= uint64(rng.IntN(1e9))
		case 1:
			at = ms*1e6 + uint64(rng.IntN(1e6))
		default:
			at += uint64(rng.IntN(1e6))
		}
		r := binary.BigEndian.AppendUint64(nil, ^math.Float64bits(conf))
		ps = append(ps, posting{id: id, rank: binary.BigEndian.AppendUint64(r, ^at)})
	}
	return ps
}

// TestAppendTail: postings appended to an encoded block, when appendTail
// takes them, give the very bytes of the block encoded again with them,
// or when they do not all fit, of the full block that putBlocks writes
// first, and it takes them whenever they sort after the block's postings,
// the block being as encodeBlock writes it and not over full. Blocks
// written otherwise (format 7; format 8, before flagSeqID; by another
// writer; damaged) it refuses, or takes with the same result as decoding
// and encoding them.
func TestAppendTail(t *testing.T) {
	// firstBlock is the first block putBlocks writes of ps, under the tail
	// key (last "") or its last id, and the postings left.
	firstBlock := func(ps []posting) (b []byte, last string, rest []posting) {
		if len(ps) <= blockMax {
			return encodeBlock(ps), "", ps[len(ps):]
		}
		return encodeBlock(ps[:blockMax]), ps[blockMax-1].id, ps[blockMax:]
	}
	rng := rand.New(rand.NewPCG(3, 4))
	taken, split, other := 0, 0, 0 // other: blocks written otherwise than by encodeBlock
	for range 20_000 {
		ps := randomPostings(rng, 1+rng.IntN(2*blockMax+8))
		k := rng.IntN(min(len(ps), blockMax+4))
		old, add := ps[:k], ps[k:]
		v := encodeBlock(old)
		vCopy := string(v)
		got, last, rest := appendTail(v, add)
		require.Equal(t, vCopy, string(v), "the block is left as it was")
		want := k > 0 && k <= blockMax && add[0].id > old[k-1].id
		for _, p := range old {
			_, std := compactID(p.id)
			want = want && (std || len(p.id) != 34)
		}
		require.Equal(t, want, got != nil, "taken")
		if got != nil {
			taken++
			if len(rest) > 0 {
				split++
			}
			wantB, wantLast, wantRest := firstBlock(ps)
			require.Equal(t, wantB, got)
			require.Equal(t, wantLast, last)
			require.Equal(t, wantRest, rest)
		}

		// The same postings of old in the layout of format 7, and of
		// format 8 (no flagSeqID), and damaged.
		checkTaken := func(v []byte) {
			t.Helper()
			got, last, rest := appendTail(v, add)
			if got == nil {
				return
			}
			dec, err := decodeBlock(v)
			require.NoError(t, err)
			require.NotEmpty(t, dec)
			assert.Less(t, dec[len(dec)-1].id, add[0].id)
			wantB, wantLast, wantRest := firstBlock(append(dec, add...))
			require.Equal(t, wantB, got, "%x", v)
			require.Equal(t, wantLast, last)
			require.Equal(t, wantRest, rest)
		}
		b7, _, _ := appendTail(encodeBlockLayout(old, layout7), add)
		require.Nil(t, b7, "format 7")
		v8 := []byte{blockMark}
		var st blockState
		for _, p := range old {
			st.std = false
			v8 = st.appendPosting(v8, p, layout9)
		}
		checkTaken(v8)
		if k > 0 {
			alt := altBlock(rng, old)
			dec, err := decodeBlock(alt)
			require.NoError(t, err)
			require.Equal(t, old, dec)
			if string(alt) != vCopy {
				other++
			}
			checkTaken(alt)
		}
		if len(v) > 1 {
			d := []byte(vCopy)
			switch i := 1 + rng.IntN(len(d)-1); rng.IntN(3) {
			case 0:
				d[i] ^= byte(1 << rng.IntN(8))
			case 1:
				d = append(d[:i], d[i+1:]...)
			default:
				d = append(d[:i], append([]byte{byte(rng.IntN(256))}, d[i:]...)...)
			}
			checkTaken(d)
		}
	}
	assert.Greater(t, taken, 1000)
	assert.Greater(t, split, 1000)
	assert.Greater(t, other, 1000)
}

// altBlock encodes ps in the layout of format 9 as another writer might:
// each id, confidence and varint in any of the forms decodeBlock reads,
// not always the shortest.
func altBlock(rng *rand.Rand, ps []posting) []byte {
	uvarint := func(b []byte, x uint64) []byte {
		if rng.IntN(8) > 0 || x >= 1<<56 {
			return binary.AppendUvarint(b, x)
		}
		for ; x >= 0x80; x >>= 7 {
			b = append(b, byte(x)|0x80)
		}
		return append(b, byte(x)|0x80, 0) // a byte too many
	}
	varint := func(b []byte, x int64) []byte { return uvarint(b, uint64(x<<1)^uint64(x>>63)) }
	b := []byte{blockMark}
	var prevMs, prevAt uint64
	var prevRaw [16]byte // the last id written as standard
	prevStd := false
	for i, p := range ps {
		raw, std := compactID(p.id)
		std = std && rng.IntN(8) > 0
		d, seq := uint64(0), false
		if std && prevStd {
			d, seq = seqDistance(prevRaw[:], raw[:])
			seq = seq && rng.IntN(4) > 0
		}
		same := i > 0 && string(p.rank[:8]) == string(ps[i-1].rank[:8]) && rng.IntN(4) > 0
		pct, isPct := confPct(p.rank[:8])
		isPct = isPct && !same && rng.IntN(4) > 0
		flags := byte(0)
		switch {
		case seq:
			flags |= flagSeqID
		case std:
			flags |= flagStdID
		}
		switch {
		case same:
			flags |= flagSameConf
		case isPct:
			flags |= flagConfPct
		}
		b = append(b, flags)
		switch {
		case seq:
			b = uvarint(b, d)
		case std:
			ms := idMs(raw[:])
			if i == 0 {
				prevAt = msAt(ms)
			}
			b = append(varint(b, int64(ms-prevMs)), raw[6:]...)
			prevMs = ms
		default:
			b = append(uvarint(b, uint64(len(p.id))), p.id...)
		}
		if std {
			prevRaw = raw
		}
		prevStd = std
		switch {
		case same:
		case isPct:
			b = append(b, pct)
		default:
			b = append(b, p.rank[:8]...)
		}
		at := binary.BigEndian.Uint64(p.rank[8:])
		b = varint(b, int64(at-prevAt))
		prevAt = at
	}
	return b
}

// BenchmarkDecodeBlock decodes a full block of postings of new facts, as
// keyword queries read them.
func BenchmarkDecodeBlock(b *testing.B) {
	r := binary.BigEndian.AppendUint64(nil, ^math.Float64bits(0.9))
	r = binary.BigEndian.AppendUint64(r, ^uint64(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano()))
	ps := make([]posting, blockMax)
	for i := range ps {
		ps[i] = posting{id: NewFactID(), rank: r}
	}
	v := encodeBlock(ps)
	for b.Loop() {
		if _, err := decodeBlock(v); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzDecodeBlock: any bytes decode as a block or are refused, without a
// panic; a block that decodes re-encodes, in the layout of format 10, to
// one that decodes to the same postings; and a keyword query reads from
// it the ids and counts decodeBlock gives.
func FuzzDecodeBlock(f *testing.F) {
	r := binary.BigEndian.AppendUint64(nil, ^math.Float64bits(0.5))
	r = binary.BigEndian.AppendUint64(r, ^uint64(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano()))
	ps := []posting{{id: NewFactID(), rank: r, tf: 2, dl: 9}, {id: NewFactID(), rank: r, tf: 300, dl: 1 << 20}, {id: "g_x", rank: r}}
	f.Add(encodeBlock(ps))
	f.Add(encodeBlockLayout(ps, layout9))
	f.Add(encodeBlockLayout(ps, layout7))
	f.Add(encodeBlockFormat6(ps))
	f.Fuzz(func(t *testing.T, v []byte) {
		got, err := decodeBlock(v)
		if err != nil {
			return
		}
		again, err := decodeBlock(encodeBlock(got))
		require.NoError(t, err)
		require.Equal(t, got, again)
		cs := appendCandidates(nil, v, 1)
		require.Len(t, cs, len(got))
		for i, c := range cs {
			require.Equal(t, got[i].id, c.factID())
			require.Equal(t, got[i].dl, c.dl)
			require.Equal(t, got[i].tf == 0, c.uncounted)
			if got[i].tf > 0 {
				require.Equal(t, float64(got[i].tf), c.w)
			}
		}
	})
}
