package store

import (
	"encoding/binary"
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
	// Ids that are not standard: random-ordered old ones sort among them.
	ps = append(ps, posting{id: "f_" + "ffffffffffffffffffffffffffffffff", rank: rank(1, t0)},
		posting{id: "g_not-a-standard-id", rank: rank(0.5, t0)},
		posting{id: "F_0123456789ABCDEF0123456789ABCDEF", rank: rank(0.5, t0)},
		posting{id: string(make([]byte, 254)), rank: rank(0.5, t0)})

	b := encodeBlock(ps)
	got, err := decodeBlock(b)
	require.NoError(t, err)
	assert.Equal(t, ps, got)
	assert.Equal(t, byte(blockMark), b[0])

	std := encodeBlock(ps[:40])
	assert.Less(t, len(std), 40*19, "standard postings of one confidence take under 19 bytes each")
	old := encodeBlockFormat6(ps[:40])
	assert.Equal(t, 40*33, len(old))
	got, err = decodeBlock(old)
	require.NoError(t, err)
	assert.Equal(t, ps[:40], got, "a format-6 block decodes")

	// A format-6 block whose first id is 254 bytes long starts with the
	// mark; it still reads as what it is.
	long := encodeBlockFormat6(ps[len(ps)-1:])
	require.Equal(t, byte(blockMark), long[0])
	got, err = decodeBlock(long)
	require.NoError(t, err)
	assert.Equal(t, ps[len(ps)-1:], got)

	for _, bad := range [][]byte{{blockMark}, {blockMark, 0x04}, {blockMark, flagStdID, 0x02}, b[:len(b)-1], {blockMark, flagSameConf | flagStdID, 0}} {
		_, err := decodeBlock(bad)
		assert.Error(t, err, "%x", bad)
	}
}

// encodeBlockFormat6 is the block layout of format 6.
func encodeBlockFormat6(ps []posting) []byte {
	var b []byte
	for _, p := range ps {
		if raw, ok := compactID(p.id); ok {
			b = append(append(b, 0), raw...)
		} else {
			b = append(append(b, byte(len(p.id))), p.id...)
		}
		b = append(b, p.rank...)
	}
	return b
}
