package store

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEntityEntries: an entity-index value names its fact, standard id or
// not, in the layout of format 8 and as format 7 wrote it (the id alone),
// and a retirement written into it reads back on the fact it names only.
func TestEntityEntries(t *testing.T) {
	std, other := NewFactID(), "fact-of-a-test"
	at := time.Date(2026, 12, 3, 10, 0, 0, 123, time.UTC)
	for _, id := range []string{std, other} {
		for _, by := range []string{NewFactID(), "a successor"} {
			v := entityValue(id)
			assert.Equal(t, id, entityID(v))
			assert.Equal(t, id, entityID([]byte(id)), "a format-7 value")
			if id == std {
				assert.Len(t, v, 17)
			}
			f := &Fact{ID: id, SupersededBy: by, ValidTo: &at}
			r, ok := retiredEntry(f)
			require.True(t, ok)
			assert.Equal(t, id, entityID(r))
			g := &Fact{ID: id}
			applyRetired(g, r)
			assert.Equal(t, by, g.SupersededBy)
			require.NotNil(t, g.ValidTo)
			assert.True(t, g.ValidTo.Equal(at))
			h := &Fact{ID: id + "x"}
			applyRetired(h, r)
			assert.Empty(t, h.SupersededBy, "a retirement of another fact")
			for _, plain := range [][]byte{v, []byte(id), r[:len(r)-1]} {
				k := &Fact{ID: id}
				applyRetired(k, plain)
				assert.Empty(t, k.SupersededBy, "%q", plain)
				assert.Nil(t, k.ValidTo)
			}
		}
	}
	local := at.In(time.FixedZone("x", 3600))
	_, ok := retiredEntry(&Fact{ID: std, SupersededBy: std, ValidTo: &local})
	assert.False(t, ok, "a time not in UTC goes to the record")
}

// TestRankEntries: the keys of facts.rank sort in the reverse order of the
// rank keys they stand for, and a newer fact's key after the older ones of
// its confidence; rankOfEntry reads them back, and reads a key of format 7
// as it is.
func TestRankEntries(t *testing.T) {
	base := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	var ranks [][]byte
	for i, conf := range []float64{1, 0.5, 0, 0.5, 1, 0.25} {
		ranks = append(ranks, rankKey(&Fact{ID: NewFactID(), Confidence: conf, StoredAt: base.Add(time.Duration(i) * time.Hour)}))
	}
	for i, a := range ranks {
		ea := rankEntry("t", "", a)
		assert.Equal(t, a, rankOfEntry(ea[len(rankPrefix("t", "")):]))
		assert.Equal(t, a, rankOfEntry(a), "a key of format 7")
		for _, b := range ranks[i+1:] {
			eb := rankEntry("t", "", b)
			assert.Equal(t, bytes.Compare(a, b), -bytes.Compare(ea, eb))
		}
	}
	older, newer := rankEntry("t", "", ranks[1]), rankEntry("t", "", ranks[3]) // both 0.5
	assert.Negative(t, bytes.Compare(older, newer))
}
