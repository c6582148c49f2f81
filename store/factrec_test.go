package store

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordFacts are facts that exercise every field of the compact record,
// and the values it writes in another form: ids that are not standard,
// times out of the nanosecond range or not in UTC, tokens and valid_from
// that differ from what the record implies, confidences 0, -0 and NaN-free
// odd values.
func recordFacts() []*Fact {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	t1 := t0.Add(time.Hour)
	far := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	early := time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)
	zoned := time.Date(2026, 3, 1, 14, 0, 0, 5, time.FixedZone("", 2*3600))
	return []*Fact{
		{ID: NewFactID(), Entity: "svc", Key: "port", Value: "8080", Confidence: 1, StoredAt: t0, ValidFrom: t0, Tokens: 1, Version: 1, HorizonClass: "none"},
		{ID: "custom-id", Tenant: "acme", Entity: "svc", Key: "port", Value: "8081", SourceReceipt: "r_1", Confidence: 0.37,
			StoredAt: t0, ValidFrom: t1, ValidTo: &far, Tokens: 99, Version: 7, Supersedes: "f_00", Retires: []string{"a", "b"},
			SupersededBy: "f_ff", Private: true, Owner: "alice", HorizonClass: "volatile", ReverifiedAt: &t1,
			Deleted: true, DeletedAt: &zoned, Origins: []FactOrigin{{Op: OriginSplit, Receipt: "r", Passport: "p", FactID: "f", Version: 2}}},
		{ID: NewFactID(), Entity: "e", Key: "k", StoredAt: early, ValidFrom: far, Tokens: 0, Confidence: 0},
		{ID: NewFactID(), Entity: "e", Key: "k", Value: "ünïcode ✓", Confidence: math.SmallestNonzeroFloat64, StoredAt: zoned, ValidFrom: zoned, Tokens: -3, Version: math.MaxUint32},
		{ID: "F_" + NewFactID()[2:]}, // uppercase: not standard
		// Standard ids among the retirement's fields, in 16 bytes each,
		// and one that is not, in order.
		{ID: NewFactID(), Supersedes: NewFactID(), Retires: []string{NewFactID(), "odd", NewFactID()},
			SupersededBy: NewFactID(), StoredAt: t0, ValidFrom: t0, ValidTo: &t1},
		// Ids made about when the fact was stored: stored_at counts from
		// the id's millisecond, forward or back.
		{ID: idAt(t0), Entity: "e", StoredAt: t0.Add(5 * time.Microsecond), ValidFrom: t0, HorizonClass: "stable"},
		{ID: idAt(t0), Entity: "e", StoredAt: t0.Add(-time.Minute), ValidFrom: t0, HorizonClass: "weekly"},
		{},
	}
}

// idAt is a standard fact id whose millisecond is that of t.
func idAt(t time.Time) string {
	id := []byte(NewFactID())
	copy(id[2:], fmt.Sprintf("%012x", t.UnixMilli()))
	return string(id)
}

func TestFactRecordRoundTrip(t *testing.T) {
	for _, f := range recordFacts() {
		b, err := encodeFact(f)
		require.NoError(t, err)
		require.Equal(t, byte(factRecordMark), b[0])
		var got Fact
		require.NoError(t, decodeFact(b, f.ID, &got))
		assert.Equal(t, f.ID, got.ID)
		// Times compare by instant; everything else exactly.
		assert.True(t, f.StoredAt.Equal(got.StoredAt), "stored_at %v vs %v", f.StoredAt, got.StoredAt)
		assert.True(t, f.ValidFrom.Equal(got.ValidFrom), "valid_from %v vs %v", f.ValidFrom, got.ValidFrom)
		for _, p := range [][2]*time.Time{{f.ReverifiedAt, got.ReverifiedAt}, {f.ValidTo, got.ValidTo}, {f.DeletedAt, got.DeletedAt}} {
			require.Equal(t, p[0] == nil, p[1] == nil)
			if p[0] != nil {
				assert.True(t, p[0].Equal(*p[1]), "%v vs %v", *p[0], *p[1])
			}
		}
		want, have := *f, got
		want.StoredAt, want.ValidFrom, want.ReverifiedAt, want.ValidTo, want.DeletedAt = time.Time{}, time.Time{}, nil, nil, nil
		have.StoredAt, have.ValidFrom, have.ReverifiedAt, have.ValidTo, have.DeletedAt = time.Time{}, time.Time{}, nil, nil, nil
		assert.Equal(t, want, have)
		assert.Equal(t, math.Signbit(f.Confidence), math.Signbit(got.Confidence))
	}
}

// TestFactRecordSmaller: the compact record of a typical fact is under half
// its CBOR size, and the CBOR form still decodes to the same fact.
func TestFactRecordSmaller(t *testing.T) {
	f := recordFacts()[0]
	compact, err := encodeFact(f)
	require.NoError(t, err)
	old, err := factEnc.Marshal(f)
	require.NoError(t, err)
	assert.Less(t, 2*len(compact), len(old), "compact %d bytes, CBOR %d", len(compact), len(old))
	var a, b Fact
	require.NoError(t, decodeFact(compact, f.ID, &a))
	require.NoError(t, decodeFact(old, "f_ignored", &b))
	assert.Equal(t, b, a)
}

// TestFactRecordFormat9: a record of format 9 leaves the id to its key,
// counts stored_at from the id's millisecond and writes a known horizon
// class as a byte, 25 bytes less than the record of format 8 of the same
// fact, which still decodes to it.
func TestFactRecordFormat9(t *testing.T) {
	now := time.Now().UTC()
	f := &Fact{ID: idAt(now), Entity: "project:1", Key: "k1", Value: "value 1", Confidence: 1,
		StoredAt: now.Add(300 * time.Microsecond), Version: 2, HorizonClass: HorizonNone}
	f.ValidFrom, f.Tokens = f.StoredAt, EstimateTokens(f.Value)
	b, err := encodeFact(f)
	require.NoError(t, err)
	raw, _ := compactID(f.ID)
	assert.NotContains(t, string(b), string(raw[:]), "the id is the key's")

	// The same fact as format 8 wrote it.
	old := append([]byte{factRecordMark, tagIDRaw}, raw[:]...)
	old = appendStr(old, tagEntity, f.Entity)
	old = appendStr(old, tagKey, f.Key)
	old = appendStr(old, tagValue, f.Value)
	old = binary.AppendUvarint(append(old, tagConfidence), bits.ReverseBytes64(math.Float64bits(1)))
	old = binary.AppendVarint(append(old, tagStoredAt), f.StoredAt.UnixNano())
	old = binary.AppendUvarint(append(old, tagVersion), 2)
	old = appendStr(old, tagHorizon, f.HorizonClass)
	assert.LessOrEqual(t, len(b)+25, len(old), "format 9 %d bytes, format 8 %d", len(b), len(old))
	var a, c Fact
	require.NoError(t, decodeFact(b, f.ID, &a))
	require.NoError(t, decodeFact(old, "f_other", &c))
	assert.Equal(t, *f, a)
	assert.Equal(t, *f, c, "a record naming its id is that id's")

	// stored_at counted from an id that is not standard does not decode.
	assert.Error(t, decodeFact(b, "custom-id", new(Fact)))
	assert.Error(t, decodeFact([]byte{factRecordMark, tagHorizonID, byte(len(horizonClasses))}, f.ID, new(Fact)), "unknown horizon class")
}

// TestFactRecordDamage: a truncated or altered record is an error, never a
// panic or a fact with invalid text.
func TestFactRecordDamage(t *testing.T) {
	b, err := encodeFact(recordFacts()[1])
	require.NoError(t, err)
	for n := 1; n < len(b); n++ {
		var f Fact
		if err := decodeFact(b[:n], "custom-id", &f); err == nil {
			// A cut between two fields reads as a shorter record; its strings are whole.
			for _, s := range []string{f.ID, f.Entity, f.Key, f.Value, f.Owner} {
				assert.LessOrEqual(t, len(s), len(b))
			}
		}
	}
	bad := append([]byte(nil), b...)
	bad = append(bad, 0xee)
	assert.Error(t, decodeFact(bad, "custom-id", new(Fact)), "unknown tag")
	assert.Error(t, decodeFact([]byte{factRecordMark, tagValue, 3, 'a', 0xff, 'b'}, "x", new(Fact)), "invalid UTF-8")
	assert.Error(t, decodeFact([]byte{factRecordMark, tagValue, 9, 'a'}, "x", new(Fact)), "string past the end")
	assert.Error(t, decodeFact([]byte{factRecordMark, tagIDRaw, 1, 2}, "x", new(Fact)), "short raw id")
}

func FuzzDecodeFact(f *testing.F) {
	for _, x := range recordFacts() {
		b, _ := encodeFact(x)
		f.Add(b, x.ID)
	}
	f.Fuzz(func(t *testing.T, b []byte, id string) {
		var x Fact
		if decodeFact(b, id, &x) != nil {
			return
		}
		// What decodes re-encodes and decodes to the same fact.
		c, err := encodeFact(&x)
		if err != nil {
			return // invalid text from a CBOR record
		}
		var y Fact
		require.NoError(t, decodeFact(c, x.ID, &y))
		c2, err := encodeFact(&y)
		require.NoError(t, err)
		assert.Equal(t, c, c2)
	})
}

// TestFactTextValid: the quick check finds what CheckText finds, in every
// string field of a fact.
func TestFactTextValid(t *testing.T) {
	f := recordFacts()[1]
	require.True(t, factTextValid(f))
	require.NoError(t, CheckText("fact", f))
	bad := "a\xffb"
	for _, set := range []func(*Fact){
		func(f *Fact) { f.ID = bad }, func(f *Fact) { f.Tenant = bad }, func(f *Fact) { f.Entity = bad },
		func(f *Fact) { f.Key = bad }, func(f *Fact) { f.Value = bad }, func(f *Fact) { f.SourceReceipt = bad },
		func(f *Fact) { f.Supersedes = bad }, func(f *Fact) { f.SupersededBy = bad }, func(f *Fact) { f.Owner = bad },
		func(f *Fact) { f.HorizonClass = bad }, func(f *Fact) { f.Retires = []string{"a", bad} },
		func(f *Fact) { f.Origins = []FactOrigin{{Op: bad}} }, func(f *Fact) { f.Origins = []FactOrigin{{FactID: bad}} },
		func(f *Fact) { f.Origins = []FactOrigin{{Receipt: bad}} }, func(f *Fact) { f.Origins = []FactOrigin{{Passport: bad}} },
	} {
		g := *recordFacts()[1]
		set(&g)
		assert.False(t, factTextValid(&g))
		assert.Error(t, CheckText("fact", &g))
		_, err := encodeFact(&g)
		assert.ErrorIs(t, err, ErrInvalidUTF8)
	}
}

// TestFactTextValidCoversFields fails when Fact or FactOrigin gains a
// string field that factTextValid (and TestFactTextValid) do not check.
func TestFactTextValidCoversFields(t *testing.T) {
	count := func(v any) (n int) {
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			switch k := rt.Field(i).Type.Kind(); {
			case k == reflect.String:
				n++
			case k == reflect.Slice && rt.Field(i).Type.Elem().Kind() == reflect.String:
				n++
			}
		}
		return n
	}
	assert.Equal(t, 11, count(Fact{}), "ten strings and retires")
	assert.Equal(t, 4, count(FactOrigin{}))
}
