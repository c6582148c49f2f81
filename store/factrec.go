package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"time"
	"unicode/utf8"
)

// The records of the facts bucket are, from format 6, a compact binary
// layout of their own rather than CBOR with field names: the byte
// factRecordMark, then the fields that are set, each a tag byte and its
// payload. Strings are a uvarint length and their bytes; numbers are
// uvarints (signed ones zigzag); times are the Unix time in nanoseconds,
// zigzag (a time outside the years 1678–2262 is written as RFC 3339 text
// instead); a standard fact id ("f_" and 32 lowercase hex digits) is the 16
// bytes it stands for, and so (from format 8) is a standard id in
// supersedes, retires or superseded_by. Fields equal to what the rest of
// the record implies
// are left out: valid_from when it is stored_at, tokens when they are the
// estimate of the value's length. The record is a third of its CBOR size,
// and encoding and decoding it allocate only the strings.
//
// From format 9 a record leaves out the fact id, which its key holds (a
// record of an older format that names it still reads so); writes
// stored_at, when the id is standard, as the nanoseconds from the start of
// the id's millisecond (time-ordered ids are made when the fact is
// stored: a few bytes instead of nine); and writes a horizon class of the
// four crux knows as a byte.
//
// A record written before format 6 is a CBOR map, whose first byte is
// never factRecordMark: [decodeFact] reads both, so records that [Upgrade]
// has not rewritten yet, and forgotten facts' originals, stay readable.

// factRecordMark is the first byte of a compact fact record. As CBOR it
// would be the unsigned integer 1, never a fact.
const factRecordMark = 0x01

// Field tags of a compact fact record.
const (
	tagIDRaw         = 1  // 16 bytes: a standard fact id
	tagID            = 2  // string: any other id
	tagTenant        = 3  // string
	tagEntity        = 4  // string
	tagKey           = 5  // string
	tagValue         = 6  // string
	tagSource        = 7  // string: source_receipt
	tagConfidence    = 8  // uvarint: the float64 bits, bytes reversed (short for round numbers)
	tagStoredAt      = 9  // time
	tagTokens        = 10 // zigzag varint: only when not EstimateTokens(value)
	tagVersion       = 11 // uvarint
	tagSupersedes    = 12 // string
	tagRetires       = 13 // string, once per id, in order
	tagSupersededBy  = 14 // string
	tagPrivate       = 15 // no payload
	tagOwner         = 16 // string
	tagHorizon       = 17 // string
	tagReverifiedAt  = 18 // time
	tagValidFrom     = 19 // time: only when not stored_at
	tagValidTo       = 20 // time
	tagDeleted       = 21 // no payload
	tagDeletedAt     = 22 // time
	tagOrigins       = 23 // bytes, length first: the CBOR of the origins
	tagStoredAtText  = 24 // string: RFC 3339 time, when nanoseconds overflow
	tagReverifText   = 25
	tagValidFromText = 26
	tagValidToText   = 27
	tagDeletedAtText = 28
	// From format 8: a standard fact id as the 16 bytes it stands for.
	tagSupersedesRaw   = 29
	tagRetiresRaw      = 30
	tagSupersededByRaw = 31
	// From format 9.
	tagStoredAtID = 32 // zigzag varint: stored_at in nanoseconds less the start of the id's millisecond (see idNanos)
	tagHorizonID  = 33 // one byte: the class's index in horizonClasses
)

// horizonClasses are the horizon classes a record writes as a byte
// (tagHorizonID), by their index: the order is part of the format.
var horizonClasses = [...]string{HorizonNone, HorizonVolatile, HorizonMedium, HorizonStable}

// storedAtIDMax bounds the distance from the id's millisecond of a
// stored_at that a record writes under tagStoredAtID: about 73 minutes,
// seven bytes at most; farther, the plain time (nine) is written.
const storedAtIDMax = 1 << 42

// idNanos is the Unix time in nanoseconds of the start of the
// millisecond of the standard id raw, modulo 2⁶⁴ (a random id's
// "millisecond" may lie far beyond the range of a time).
func idNanos(raw []byte) uint64 { return idMs(raw) * 1e6 }

// encodeFact returns the compact record of f, to be stored under f.ID,
// which it leaves out. A string of f that is not valid UTF-8 is a
// [*TextError]: it is refused as the CBOR records refused it, so what is
// written reads back the same.
func encodeFact(f *Fact) ([]byte, error) {
	if !factTextValid(f) {
		if err := CheckText("fact "+f.ID, f); err != nil {
			return nil, err
		}
	}
	b := make([]byte, 0, 64+len(f.Entity)+len(f.Key)+len(f.Value)+len(f.Owner)+len(f.SourceReceipt))
	b = append(b, factRecordMark)
	b = appendStr(b, tagTenant, f.Tenant)
	b = appendStr(b, tagEntity, f.Entity)
	b = appendStr(b, tagKey, f.Key)
	b = appendStr(b, tagValue, f.Value)
	b = appendStr(b, tagSource, f.SourceReceipt)
	if f.Confidence != 0 || math.Signbit(f.Confidence) {
		b = binary.AppendUvarint(append(b, tagConfidence), bits.ReverseBytes64(math.Float64bits(f.Confidence)))
	}
	if d, ok := storedAtFromID(f); ok {
		b = binary.AppendVarint(append(b, tagStoredAtID), d)
	} else {
		b = appendTime(b, tagStoredAt, tagStoredAtText, f.StoredAt)
	}
	if f.Tokens != EstimateTokens(f.Value) {
		b = binary.AppendVarint(append(b, tagTokens), int64(f.Tokens))
	}
	if f.Version != 0 {
		b = binary.AppendUvarint(append(b, tagVersion), uint64(f.Version))
	}
	b = appendID(b, tagSupersedes, tagSupersedesRaw, f.Supersedes)
	for _, id := range f.Retires {
		if raw, ok := compactID(id); ok {
			b = append(append(b, tagRetiresRaw), raw[:]...)
		} else {
			b = appendStrAlways(b, tagRetires, id)
		}
	}
	b = appendID(b, tagSupersededBy, tagSupersededByRaw, f.SupersededBy)
	if f.Private {
		b = append(b, tagPrivate)
	}
	b = appendStr(b, tagOwner, f.Owner)
	if i := slices.Index(horizonClasses[:], f.HorizonClass); i >= 0 {
		b = append(b, tagHorizonID, byte(i))
	} else {
		b = appendStr(b, tagHorizon, f.HorizonClass)
	}
	if f.ReverifiedAt != nil {
		b = appendTimeAlways(b, tagReverifiedAt, tagReverifText, *f.ReverifiedAt)
	}
	if !f.ValidFrom.Equal(f.StoredAt) || f.ValidFrom.Location() != f.StoredAt.Location() {
		b = appendTimeAlways(b, tagValidFrom, tagValidFromText, f.ValidFrom)
	}
	if f.ValidTo != nil {
		b = appendTimeAlways(b, tagValidTo, tagValidToText, *f.ValidTo)
	}
	if f.Deleted {
		b = append(b, tagDeleted)
	}
	if f.DeletedAt != nil {
		b = appendTimeAlways(b, tagDeletedAt, tagDeletedAtText, *f.DeletedAt)
	}
	if f.Origins != nil {
		o, err := factEnc.Marshal(f.Origins)
		if err != nil {
			return nil, err
		}
		b = appendStrAlways(b, tagOrigins, string(o))
	}
	return b, nil
}

// storedAtFromID returns f.StoredAt as the nanoseconds from the start of
// the millisecond of f's standard id, when it is within storedAtIDMax of
// it (and in UTC, in the range of nanoseconds).
func storedAtFromID(f *Fact) (int64, bool) {
	raw, ok := compactID(f.ID)
	if !ok || f.StoredAt.IsZero() || !nanosRange(f.StoredAt) || f.StoredAt.Location() != time.UTC {
		return 0, false
	}
	d := int64(uint64(f.StoredAt.UnixNano()) - idNanos(raw[:]))
	return d, d > -storedAtIDMax && d < storedAtIDMax
}

// factTextValid reports whether every string of f is valid UTF-8: the
// check of [CheckText] without reflection, which then only names the
// field.
func factTextValid(f *Fact) bool {
	for _, s := range [...]string{f.ID, f.Tenant, f.Entity, f.Key, f.Value, f.SourceReceipt,
		f.Supersedes, f.SupersededBy, f.Owner, f.HorizonClass} {
		if !utf8.ValidString(s) {
			return false
		}
	}
	for _, s := range f.Retires {
		if !utf8.ValidString(s) {
			return false
		}
	}
	for _, o := range f.Origins {
		for _, s := range [...]string{o.Op, o.Receipt, o.Passport, o.FactID} {
			if !utf8.ValidString(s) {
				return false
			}
		}
	}
	return true
}

// appendID appends the fact id, unless empty: a standard one under rawTag
// as its 16 bytes, any other under tag as a string.
func appendID(b []byte, tag, rawTag byte, id string) []byte {
	if raw, ok := compactID(id); ok {
		return append(append(b, rawTag), raw[:]...)
	}
	return appendStr(b, tag, id)
}

func appendStr(b []byte, tag byte, s string) []byte {
	if s == "" {
		return b
	}
	return appendStrAlways(b, tag, s)
}

func appendStrAlways(b []byte, tag byte, s string) []byte {
	b = binary.AppendUvarint(append(b, tag), uint64(len(s)))
	return append(b, s...)
}

// appendTime appends t unless it is the zero time, which a record leaves
// out.
func appendTime(b []byte, tag, textTag byte, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	return appendTimeAlways(b, tag, textTag, t)
}

// nanosRange reports whether t's Unix time in nanoseconds fits an int64.
func nanosRange(t time.Time) bool {
	return t.Year() >= 1678 && t.Year() <= 2261
}

func appendTimeAlways(b []byte, tag, textTag byte, t time.Time) []byte {
	if !nanosRange(t) || t.Location() != time.UTC {
		return appendStrAlways(b, textTag, t.Format(time.RFC3339Nano))
	}
	return binary.AppendVarint(append(b, tag), t.UnixNano())
}

var (
	errBadFactRecord = errors.New("store: malformed fact record")
	errInvalidUTF8   = errors.New("store: fact record holds a string of invalid UTF-8")
)

// decodeFact decodes the fact record v, stored under the fact id id, into
// f: a compact record, or the CBOR of a record written before format 6.
// A record that names no id (from format 9) is that of id. f's strings
// share no memory with v.
func decodeFact(v []byte, id string, f *Fact) error {
	if len(v) == 0 || v[0] != factRecordMark {
		return factDec.Unmarshal(v, f)
	}
	*f = Fact{ID: id}
	d := recordDecoder{b: v[1:]}
	tokens, validFrom := false, false
	for len(d.b) > 0 && d.err == nil {
		tag := d.b[0]
		d.b = d.b[1:]
		switch tag {
		case tagIDRaw:
			f.ID = d.rawID()
		case tagSupersedesRaw:
			f.Supersedes = d.rawID()
		case tagRetiresRaw:
			f.Retires = append(f.Retires, d.rawID())
		case tagSupersededByRaw:
			f.SupersededBy = d.rawID()
		case tagID:
			f.ID = d.str()
		case tagTenant:
			f.Tenant = d.str()
		case tagEntity:
			f.Entity = d.str()
		case tagKey:
			f.Key = d.str()
		case tagValue:
			f.Value = d.str()
		case tagSource:
			f.SourceReceipt = d.str()
		case tagConfidence:
			f.Confidence = math.Float64frombits(bits.ReverseBytes64(d.uvarint()))
		case tagStoredAt, tagStoredAtText:
			f.StoredAt = d.time(tag == tagStoredAtText)
		case tagStoredAtID:
			raw, ok := compactID(f.ID)
			if !ok {
				return fmt.Errorf("%w: stored_at counted from the id %q, which is not standard", errBadFactRecord, f.ID)
			}
			f.StoredAt = time.Unix(0, int64(idNanos(raw[:])+uint64(d.varint()))).UTC()
		case tagTokens:
			f.Tokens, tokens = int(d.varint()), true
		case tagVersion:
			n := d.uvarint()
			if n > math.MaxUint32 {
				return errBadFactRecord
			}
			f.Version = uint32(n)
		case tagSupersedes:
			f.Supersedes = d.str()
		case tagRetires:
			f.Retires = append(f.Retires, d.str())
		case tagSupersededBy:
			f.SupersededBy = d.str()
		case tagPrivate:
			f.Private = true
		case tagOwner:
			f.Owner = d.str()
		case tagHorizon:
			f.HorizonClass = d.str()
		case tagHorizonID:
			if len(d.b) == 0 || int(d.b[0]) >= len(horizonClasses) {
				return errBadFactRecord
			}
			f.HorizonClass, d.b = horizonClasses[d.b[0]], d.b[1:]
		case tagReverifiedAt, tagReverifText:
			t := d.time(tag == tagReverifText)
			f.ReverifiedAt = &t
		case tagValidFrom, tagValidFromText:
			f.ValidFrom, validFrom = d.time(tag == tagValidFromText), true
		case tagValidTo, tagValidToText:
			t := d.time(tag == tagValidToText)
			f.ValidTo = &t
		case tagDeleted:
			f.Deleted = true
		case tagDeletedAt, tagDeletedAtText:
			t := d.time(tag == tagDeletedAtText)
			f.DeletedAt = &t
		case tagOrigins:
			if err := factDec.Unmarshal(d.raw(), &f.Origins); err != nil {
				return fmt.Errorf("store: fact record origins: %w", err)
			}
		default:
			return fmt.Errorf("%w: unknown field tag %d", errBadFactRecord, tag)
		}
	}
	if d.err != nil {
		return d.err
	}
	if !tokens {
		f.Tokens = EstimateTokens(f.Value)
	}
	if !validFrom {
		f.ValidFrom = f.StoredAt
	}
	return nil
}

// recordDecoder reads the payloads of a compact record; the first error
// sticks.
type recordDecoder struct {
	b   []byte
	err error
}

func (d *recordDecoder) uvarint() uint64 {
	n, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.err, d.b = errBadFactRecord, nil
		return 0
	}
	d.b = d.b[k:]
	return n
}

func (d *recordDecoder) varint() int64 {
	n, k := binary.Varint(d.b)
	if k <= 0 {
		d.err, d.b = errBadFactRecord, nil
		return 0
	}
	d.b = d.b[k:]
	return n
}

// raw returns the next length-prefixed bytes, in place.
func (d *recordDecoder) raw() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err, d.b = errBadFactRecord, nil
		return nil
	}
	r := d.b[:n]
	d.b = d.b[n:]
	return r
}

// rawID returns the standard fact id of the next 16 bytes.
func (d *recordDecoder) rawID() string {
	if len(d.b) < 16 {
		d.err, d.b = errBadFactRecord, nil
		return ""
	}
	id := standardID(d.b[:16])
	d.b = d.b[16:]
	return id
}

func (d *recordDecoder) str() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err, d.b = errBadFactRecord, nil
		return ""
	}
	if !utf8.Valid(d.b[:n]) {
		d.err, d.b = errInvalidUTF8, nil
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *recordDecoder) time(text bool) time.Time {
	if text {
		t, err := time.Parse(time.RFC3339Nano, d.str())
		if err != nil && d.err == nil {
			d.err = fmt.Errorf("%w: %v", errBadFactRecord, err)
		}
		return t
	}
	n := d.varint()
	return time.Unix(0, n).UTC()
}

// upgradeFactRecords rewrites every fact record still in CBOR in the
// compact layout: the format-6 step of [Upgrade]. A record that does not
// decode is left for crux doctor to report.
func upgradeFactRecords(tx Tx) error {
	var old []*Fact
	err := tx.Scan(bucketFacts, nil, false, func(k, v []byte) error {
		if len(v) > 0 && v[0] == factRecordMark {
			return nil
		}
		f := new(Fact)
		if err := factDec.Unmarshal(v, f); err != nil || f.ID != string(k) {
			return nil
		}
		old = append(old, f)
		return nil
	})
	if err != nil {
		return err
	}
	for _, f := range old {
		b, err := encodeFact(f)
		if err != nil {
			var te *TextError
			if errors.As(err, &te) {
				continue // unreadable once rewritten: it stays as it is
			}
			return err
		}
		if err := tx.Put(bucketFacts, []byte(f.ID), b); err != nil {
			return err
		}
	}
	return nil
}
