package store

import (
	"encoding/binary"
	"encoding/hex"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBlockLayouts encodes blocks of standard and other ids, equal and
// different confidences and times going either way, and reads them back;
// format-6 blocks still decode, and damaged blocks are refused.
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

	b := encodeBlock(ps)
	got, current, err := decodeBlockLayout(b)
	require.NoError(t, err)
	assert.True(t, current)
	assert.Equal(t, ps, got)
	assert.Equal(t, byte(blockMark), b[0])

	// Format 7, which Upgrade rewrites, still reads.
	b7 := encodeBlockLayout(ps, false)
	assert.Equal(t, byte(blockMark7), b7[0])
	got, current, err = decodeBlockLayout(b7)
	require.NoError(t, err)
	assert.False(t, current)
	assert.Equal(t, ps, got)

	// A block of one posting of a new fact, as most words have.
	at := time.Now()
	one := []posting{{id: NewFactID(), rank: rank(0.9, at)}}
	b1 := encodeBlock(one)
	assert.LessOrEqual(t, len(b1), 24, "%x", b1)
	assert.Less(t, len(b1)+10, len(encodeBlockLayout(one, false)))
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
		{blockMark, flagSeqID, 1, 0}, {blockMark, 0, 1, 'x', 0, flagSeqID, 1, 0}, {blockMark7, flagStdID, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, flagSeqID, 1, 0}} {
		_, err := decodeBlock(bad)
		assert.Error(t, err, "%x", bad)
	}
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

	b7 := encodeBlockLayout(ps, false)
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
