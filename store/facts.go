package store

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/crux-go/crux/internal/codec"
)

// Buckets holding facts and their indexes. Every index key starts with the
// tenant, so tenants never see each other's facts.
const (
	bucketFacts  = "facts"        // fact id → Fact record (see factrec.go)
	bucketEntity = "facts.entity" // tenant, stored entity, key, version → fact id
	bucketKey    = "facts.key"    // tenant, key, stored entity → empty: the chain (stored entity, key) exists
	bucketWords  = "facts.words"  // tenant, word, last fact id (0xff for the tail block) → block of postings (fact id, rank key prefix); see postings.go (facts not deleted, superseded ones included)
	bucketRank   = "facts.rank"   // tenant, scope, the rank key (^confidence, ^stored_at, fact id: a standard one in 17 bytes) complemented (see rankEntry) → empty (facts not deleted); scope: "" shared, else the private owner
	bucketActive = "facts.active" // tenant, stored entity → number of current facts
	bucketFresh  = "facts.fresh"  // tenant, fact id → rank key prefix, rank scope, NUL, the fact's words (entries not yet in facts.words and facts.rank)
)

// StagedIndexes returns the names of the index buckets whose writes a
// backend whose commits write pages may hold back in a small bucket of its
// own, moving them in together later, so that a lone write does not cost
// pages on a random leaf of each (store/bolt does, for the entity index,
// whose keys are not time-ordered). Such a backend must read the two as
// one bucket, in every transaction; a store written so is of format 8 or
// later.
func StagedIndexes() []string { return []string{bucketEntity} }

// freshMax is how many facts of one tenant the fresh postings hold at
// most: the write that brings them to freshMax moves that tenant's into
// facts.words (see indexLive).
const freshMax = 64

// freshBytesMax bounds the bytes of the fresh postings likewise: every
// keyword query reads each word they hold, so long facts (a passage of a
// few hundred words each) are moved in smaller groups, and a query's cost
// for them stays bounded whatever the facts' length.
const freshBytesMax = 16 << 10

// Reserved entity prefixes. Entities starting with "__" belong to crux
// itself: clients cannot write them with store_fact, and queries return
// them only when the caller names the entity or prefix explicitly.
const (
	ReservedPrefix  = "__"
	PrivatePrefix   = "__agent::"
	BootstrapPrefix = "__bootstrap__::"
)

// IsReserved reports whether entity belongs to crux rather than to clients.
func IsReserved(entity string) bool { return strings.HasPrefix(entity, ReservedPrefix) }

// PrivateEntity is the stored name of owner's private entity.
func PrivateEntity(owner, entity string) string { return PrivatePrefix + owner + "::" + entity }

// Fact is one stored version of a value under (entity, key).
//
// A private fact is stored under [PrivateEntity](Owner, Entity) and is
// visible to its owner only, who sees it under its logical name.
type Fact struct {
	ID            string     `json:"id"`
	Tenant        string     `json:"tenant"`
	Entity        string     `json:"entity"` // logical entity, as the owner sees it
	Key           string     `json:"key"`
	Value         string     `json:"value"`
	SourceReceipt string     `json:"source_receipt,omitempty"`
	Confidence    float64    `json:"confidence"`
	StoredAt      time.Time  `json:"stored_at"`
	Tokens        int        `json:"tokens"`
	Version       uint32     `json:"version"`
	Supersedes    string     `json:"supersedes,omitempty"`    // previous version in this chain
	Retires       []string   `json:"retires,omitempty"`       // facts explicitly superseded by this one
	SupersededBy  string     `json:"superseded_by,omitempty"` // the fact that retired this one
	Private       bool       `json:"private,omitempty"`       // visible to Owner only
	Owner         string     `json:"owner,omitempty"`         // agent that stored it
	HorizonClass  string     `json:"horizon_class"`           // volatile, medium, stable or none
	ReverifiedAt  *time.Time `json:"reverified_at,omitempty"` // re-anchors the decay clock
	ValidFrom     time.Time  `json:"valid_from"`              // valid-time interval start (inclusive)
	ValidTo       *time.Time `json:"valid_to,omitempty"`      // valid-time interval end (exclusive)
	Deleted       bool       `json:"deleted,omitempty"`       // soft-deleted; kept for history
	DeletedAt     *time.Time `json:"deleted_at,omitempty"`    // when it was deleted
	// Origins records, oldest first, each passport operation that brought
	// the fact into its owner's private space: a split that copied it
	// from another fact, a merge that moved it from another passport's
	// chain. Empty for a fact written where it is.
	Origins []FactOrigin `json:"origins,omitempty"`
}

// StoredEntity is the entity the fact is stored and indexed under.
func (f *Fact) StoredEntity() string {
	if f.Private {
		return PrivateEntity(f.Owner, f.Entity)
	}
	return f.Entity
}

// Current reports whether the fact is neither deleted nor superseded.
func (f *Fact) Current() bool { return !f.Deleted && f.SupersededBy == "" }

// VisibleTo reports whether agent may see f. Non-private facts are a
// shared pool; private facts are visible to their owner only.
func (f *Fact) VisibleTo(agent string) bool { return !f.Private || (agent != "" && agent == f.Owner) }

// Anchor is the time the decay clock runs from.
func (f *Fact) Anchor() time.Time {
	if f.ReverifiedAt != nil {
		return *f.ReverifiedAt
	}
	return f.StoredAt
}

// ValidAt reports whether t lies in the fact's half-open valid interval.
func (f *Fact) ValidAt(t time.Time) bool {
	return !t.Before(f.ValidFrom) && (f.ValidTo == nil || t.Before(*f.ValidTo))
}

// NewFactID returns a fresh fact id: "f_" and 32 hex digits, which sort in
// the order the ids were made (see [NewOrderedID]).
func NewFactID() string { return NewOrderedID("f_") }

// orderedIDs is the state of NewOrderedID: the last id's time and random
// part.
var orderedIDs struct {
	sync.Mutex
	ms   uint64
	rand [10]byte
}

// NewOrderedID returns prefix followed by 32 hex digits that sort in the
// order the ids were made, in the manner of a ULID: the first 12 digits are
// the Unix time in milliseconds, the other 20 are random (80 bits from
// crypto/rand) and, for ids made in the same millisecond, one more than
// the previous id's. Keys that grow like this are appended to the end of a
// B+tree instead of landing on a random leaf, so a commit writing a few of
// them dirties few pages and pages are filled. Should the clock step back,
// the ids made until it catches up are still unique but sort before the
// newest older ones.
func NewOrderedID(prefix string) string {
	ms := uint64(time.Now().UnixMilli())
	var b [16]byte
	orderedIDs.Lock()
	if ms == orderedIDs.ms && increment(orderedIDs.rand[:]) {
		// same millisecond: the next number keeps the order
	} else {
		if _, err := rand.Read(orderedIDs.rand[:]); err != nil {
			panic(err) // crypto/rand never fails on supported platforms
		}
		// Leave room to count up within the millisecond.
		orderedIDs.rand[0] &= 0x7f
		orderedIDs.ms = ms
	}
	binary.BigEndian.PutUint64(b[:8], ms<<16)
	copy(b[6:], orderedIDs.rand[:])
	orderedIDs.Unlock()
	return prefix + hex.EncodeToString(b[:])
}

// increment adds one to the big-endian number b and reports whether it did
// not overflow.
func increment(b []byte) bool {
	for i := len(b) - 1; i >= 0; i-- {
		b[i]++
		if b[i] != 0 {
			return true
		}
	}
	return false
}

// NewID returns prefix followed by 32 random hex digits (128 bits from
// crypto/rand).
func NewID(prefix string) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return prefix + hex.EncodeToString(b[:])
}

// EstimateTokens is the token estimate crux uses for a text: its length in
// bytes divided by four, rounded up.
func EstimateTokens(s string) int { return (len(s) + 3) / 4 }

// NewFact is what [PutFact] needs to write a fact.
type NewFact struct {
	Scope         // the writer: its tenant, and its agent ("" when anonymous)
	Entity        string
	Key           string
	Value         string
	SourceReceipt string
	Confidence    float64
	Private       bool
	HorizonClass  string   // "" means DefaultHorizon(Entity)
	Supersedes    []string // fact ids this write explicitly retires
	Now           time.Time
	ID            string // "" means NewFactID()
	// Received marks a version another replica wrote (see
	// ApplySyncFacts): it keeps Now as its stored_at. A version written
	// here is never stored before a version it retires: its stored_at is
	// Now or, when one of them was stored later (a version received from
	// a replica whose clock runs ahead), that one's stored_at.
	Received bool
}

// ErrInvalidFact reports a NewFact that breaks a rule of the store (a
// confidence outside [0, 1], a private fact without an owner).
var ErrInvalidFact = errors.New("store: invalid fact")

// SupersedeError reports a supersedes id that does not exist, is deleted,
// is not visible to the writer, was already superseded (by SupersededBy),
// or is shared while the new fact is private (a private write cannot retire
// what everyone sees).
type SupersedeError struct {
	ID           string
	SupersededBy string
	Shared       bool
}

func (e *SupersedeError) Error() string {
	switch {
	case e.SupersededBy != "":
		return fmt.Sprintf("fact %s is already superseded", e.ID)
	case e.Shared:
		return fmt.Sprintf("fact %s is shared; a private fact cannot retire it", e.ID)
	}
	return fmt.Sprintf("fact %s does not exist or is not visible to the caller", e.ID)
}

// PutFact writes a new version of (entity, key): its version is one more
// than the chain's highest, it supersedes the chain's current fact (and
// is stored no earlier than the facts it retires, see NewFact.Received), and it
// retires every fact in n.Supersedes (each must exist, be live and be
// visible to n.Agent, not yet superseded, and private only if the new fact
// is, else PutFact returns a *SupersedeError and the caller must roll back).
// A confidence outside [0, 1] is an ErrInvalidFact. It returns the new fact and the ids it superseded.
func PutFact(tx Tx, n NewFact) (*Fact, []string, error) {
	if !(n.Confidence >= 0 && n.Confidence <= 1) { // NaN fails both
		return nil, nil, fmt.Errorf("%w: confidence %v is not in [0, 1]", ErrInvalidFact, n.Confidence)
	}
	if n.Confidence == 0 {
		n.Confidence = 0 // +0: -0 would sort first in the rank index
	}
	if n.Private && n.Agent == "" {
		return nil, nil, fmt.Errorf("%w: a private fact needs an owner", ErrInvalidFact)
	}
	f := &Fact{
		ID: n.ID, Tenant: n.Tenant, Entity: n.Entity, Key: n.Key, Value: n.Value,
		SourceReceipt: n.SourceReceipt, Confidence: n.Confidence, StoredAt: n.Now.UTC(),
		Tokens: EstimateTokens(n.Value), Private: n.Private, Owner: n.Agent,
		HorizonClass: n.HorizonClass, ValidFrom: n.Now.UTC(),
	}
	if f.ID == "" {
		f.ID = NewFactID()
	}
	if f.HorizonClass == "" {
		f.HorizonClass = DefaultHorizon(n.Entity)
	}
	stored := f.StoredEntity()
	if _, ok := tx.(Prefetcher); ok {
		// What the write reads, in one go where reads cost a round trip.
		prefetchScan(tx, bucketEntity, indexKey(n.Tenant, stored, n.Key, ""), true)
		prefetch(tx, bucketKey, [][]byte{indexKey(n.Tenant, n.Key, stored)})
		prefetch(tx, bucketActive, [][]byte{indexKey(n.Tenant, stored)})
		prefetchScan(tx, bucketFresh, indexKey(n.Tenant, ""), false)
		if _, own := tx.(ChangeLogger); syncable(f) && !own {
			prefetchScan(tx, bucketSyncLog, append([]byte(n.Tenant), 0), true)
			prefetchScan(tx, bucketSyncNew, append([]byte(n.Tenant), 0), true)
			prefetchScan(tx, bucketSyncNew, nil, false)
		}
	}

	// The chain: highest version, and the current fact if there is one.
	var current *Fact
	err := tx.Scan(bucketEntity, indexKey(n.Tenant, stored, n.Key, ""), true, func(k, v []byte) error {
		if f.Version == 0 {
			f.Version = binary.BigEndian.Uint32(k[len(k)-4:]) + 1
		}
		old, err := entryFact(tx, v)
		if err != nil {
			return SkipCorrupt(tx, err)
		}
		// A chain holds one scope: the shared pool, or one owner's private
		// facts. Anything else under the same stored name is not ours.
		if old.Current() && old.Private == f.Private && (!f.Private || old.Owner == f.Owner) {
			current = old
			return ErrStop
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if f.Version == 0 {
		f.Version = 1
	}

	// The facts retired, as read: each is read once, and retired below.
	var retired []string
	var olds []*Fact
	if current != nil {
		f.Supersedes = current.ID
		retired, olds = append(retired, current.ID), append(olds, current)
	}
	for _, id := range n.Supersedes {
		if slices.Contains(retired, id) {
			continue
		}
		old, err := GetFact(tx, id)
		switch {
		case errors.Is(err, ErrNotFound) || errors.Is(err, ErrEmptyKey):
			return nil, nil, &SupersedeError{ID: id}
		case err != nil:
			return nil, nil, err // a failing store is not a bad id
		case !(Scope{Tenant: n.Tenant, Agent: n.Agent}).Sees(old) || old.Deleted:
			return nil, nil, &SupersedeError{ID: id}
		}
		if old.SupersededBy != "" {
			return nil, nil, &SupersedeError{ID: id, SupersededBy: old.SupersededBy}
		}
		if n.Private && !old.Private {
			return nil, nil, &SupersedeError{ID: id, Shared: true}
		}
		f.Retires = append(f.Retires, id)
		retired, olds = append(retired, id), append(olds, old)
	}
	if !n.Received {
		for _, old := range olds {
			if old.StoredAt.After(f.StoredAt) {
				f.StoredAt, f.ValidFrom = old.StoredAt.UTC(), old.StoredAt.UTC()
			}
		}
	}
	active := int64(1) // the change to the count of current facts under (tenant, stored)
	for _, old := range olds {
		if old.Tenant == f.Tenant && old.StoredEntity() == stored {
			// Counted below with the new fact: a new version of a chain
			// leaves the count as it was, and then costs no write.
			active--
			if err := markRetired(tx, old, f.ID, f.StoredAt); err != nil {
				return nil, nil, err
			}
		} else if err := retire(tx, old, f.ID, f.StoredAt); err != nil {
			return nil, nil, err
		}
	}

	if err := writeFact(tx, f); err != nil {
		return nil, nil, err
	}
	if err := tx.Put(bucketEntity, entityKey(f), entityValue(f.ID)); err != nil {
		return nil, nil, err
	}
	if current == nil {
		// A new chain, or one whose entry the key index may lack (a chain
		// that was all retired, deleted or repaired away).
		if err := putKeyEntry(tx, f.Tenant, f.Key, stored); err != nil {
			return nil, nil, err
		}
	}
	if err := indexLive(tx, f, true); err != nil {
		return nil, nil, err
	}
	if err := logFact(tx, f); err != nil { // sync.go
		return nil, nil, err
	}
	if active != 0 {
		if err := addActive(tx, f.Tenant, stored, active); err != nil {
			return nil, nil, err
		}
	}
	return f, retired, nil
}

// retire marks the current fact old as superseded by id at t.
func retire(tx Tx, old *Fact, id string, t time.Time) error {
	if err := markRetired(tx, old, id, t); err != nil {
		return err
	}
	return addActive(tx, old.Tenant, old.StoredEntity(), -1)
}

// markRetired is retire without the count of current facts, which the
// caller keeps. In a backend of local reads, the retirement goes to old's
// entity-index entry when it can (see [retiredEntry]), else to its record.
func markRetired(tx Tx, old *Fact, id string, t time.Time) error {
	old.SupersededBy = id
	if old.ValidTo == nil {
		old.ValidTo = &t
	}
	if !localReads(tx) {
		return writeFact(tx, old)
	}
	k := entityKey(old)
	v, err := tx.Get(bucketEntity, k)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	if id, rest := splitEntry(v); err == nil && id == old.ID && len(rest) == 0 {
		if nv, ok := retiredEntry(old); ok {
			return tx.Put(bucketEntity, k, nv)
		}
	}
	return writeFact(tx, old)
}

// DeleteFact soft-deletes the fact id as seen by agent in tenant: it stays
// in its version chain and history but leaves every query. It returns
// ErrNotFound when the fact does not exist in tenant or is not visible to
// agent, and deleted=false when it was already deleted.
func DeleteFact(tx Tx, s Scope, id string, now time.Time) (f *Fact, deleted bool, err error) {
	f, err = GetFact(tx, id)
	if err != nil {
		return nil, false, err
	}
	if !s.Sees(f) {
		return nil, false, ErrNotFound
	}
	if f.Deleted {
		return f, false, nil
	}
	wasCurrent := f.Current()
	now = now.UTC()
	f.Deleted, f.DeletedAt = true, &now
	if f.ValidTo == nil {
		f.ValidTo = &now
	}
	if err := writeFact(tx, f); err != nil {
		return nil, false, err
	}
	if err := indexLive(tx, f, false); err != nil {
		return nil, false, err
	}
	if wasCurrent {
		if err := addActive(tx, f.Tenant, f.StoredEntity(), -1); err != nil {
			return nil, false, err
		}
	}
	return f, true, nil
}

// GetFact reads one fact by id, or returns ErrNotFound. A stored fact that
// does not decode is a [*CorruptRecordError]. In a backend of local reads
// (see [localReads]), a fact whose record does not say it was retired is
// looked up in the entity index too, whose entry says so when a later
// write retired it (see [markRetired]).
func GetFact(tx Tx, id string) (*Fact, error) {
	f, err := getRecord(tx, id)
	if err != nil || !f.Current() || !localReads(tx) {
		return f, err
	}
	v, err := tx.Get(bucketEntity, entityKey(f))
	switch {
	case err == nil:
		applyRetired(f, v)
	case !errors.Is(err, ErrNotFound):
		return nil, err
	}
	return f, nil
}

// getRecord reads the record of the fact id as it is, without what its
// entity-index entry may add.
func getRecord(tx Tx, id string) (*Fact, error) {
	v, err := tx.Get(bucketFacts, []byte(id))
	if err != nil {
		return nil, err
	}
	f := new(Fact)
	if err := decodeFact(v, id, f); err != nil {
		return nil, &CorruptRecordError{Bucket: bucketFacts, Key: []byte(id), ID: id, Err: err}
	}
	return f, nil
}

// An entry of the entity index names a version of a chain: its value
// names the fact. Up to format 7 the value is the fact id. From format 8
// it is the byte entryRaw and the 16 bytes a standard fact id stands for
// (see [compactID]), or for any other id the byte entryText and the id;
// and when a later write retires the fact (a new version of its chain, or
// a write naming it in supersedes), the entry rather than the record takes
// what the retirement sets: after the id, for a text id a NUL byte, then
// the id of the fact that retired it (entryRaw and 16 bytes, or entryText,
// a uvarint length and the id) and the end of its valid time (the zigzag
// varint of its Unix time in nanoseconds). From format 9, a standard id
// that retired the fact is the byte entryRawAt and its 16 bytes, and the
// end of the valid time is counted from the start of that id's millisecond
// (see idNanos): the retiring fact's stored_at, as a rule, a few bytes
// instead of nine. The new version's entry lands
// on the same leaf as the old one's, where the record of the old version
// lies on a leaf of its own, written long ago: a retirement so costs no
// page more. [GetFact] and [entryFact] put the two together; a record
// rewritten later (a deletion, a forget) takes the retirement in. Fact ids
// never start with any of these bytes.
//
// Only a backend of local reads (bbolt, see [localReads]) writes
// retirements there: where reads cost a round trip, looking a fact's entry
// up would cost one more for every fact read, and a record's rewrite costs
// no more than the entry's.
const (
	entryRaw   = 0x01
	entryText  = 0x02
	entryRawAt = 0x03 // from format 9: retired by a standard id, the valid time counted from it
)

// entityKey is the key of f's entry in the entity index.
func entityKey(f *Fact) []byte {
	return indexKey(f.Tenant, f.StoredEntity(), f.Key, version(f.Version))
}

// entityValue is the entity-index value naming the fact id.
func entityValue(id string) []byte { return appendEntryID(nil, id) }

// appendEntryID appends id to b as an entity-index value names it.
func appendEntryID(b []byte, id string) []byte {
	if raw, ok := compactID(id); ok {
		return append(append(b, entryRaw), raw[:]...)
	}
	return append(append(b, entryText), id...)
}

// splitEntry returns the fact id that the entity-index value v names and
// the rest of v: empty unless the entry holds a retirement.
func splitEntry(v []byte) (id string, rest []byte) {
	switch {
	case len(v) >= 1+16 && v[0] == entryRaw:
		return standardID(v[1:17]), v[17:]
	case len(v) > 0 && v[0] == entryText:
		v = v[1:]
	}
	if i := bytes.IndexByte(v, 0); i >= 0 {
		return string(v[:i]), v[i+1:]
	}
	return string(v), nil
}

// entityID is the fact id that the entity-index value v names.
func entityID(v []byte) string {
	id, _ := splitEntry(v)
	return id
}

// retiredEntry is the entity-index value of f, retired: f.SupersededBy
// and f.ValidTo follow its id. ok is false when they do not fit the layout
// (an id holding a NUL byte, a time out of range or not in UTC): the
// record must then take them.
func retiredEntry(f *Fact) (v []byte, ok bool) {
	if f.ValidTo == nil || !nanosRange(*f.ValidTo) || f.ValidTo.Location() != time.UTC ||
		strings.IndexByte(f.ID, 0) >= 0 || f.SupersededBy == "" {
		return nil, false
	}
	v = appendEntryID(make([]byte, 0, 2*len(f.ID)+16), f.ID)
	if v[0] == entryText {
		v = append(v, 0)
	}
	if raw, ok := compactID(f.SupersededBy); ok {
		v = append(append(v, entryRawAt), raw[:]...)
		return binary.AppendVarint(v, int64(uint64(f.ValidTo.UnixNano())-idNanos(raw[:]))), true
	}
	v = binary.AppendUvarint(append(v, entryText), uint64(len(f.SupersededBy)))
	v = append(v, f.SupersededBy...)
	return binary.AppendVarint(v, f.ValidTo.UnixNano()), true
}

// applyRetired sets f.SupersededBy and f.ValidTo from the entity-index
// value v of f, when v says f was retired. A value that does not parse
// adds nothing.
func applyRetired(f *Fact, v []byte) {
	id, rest := splitEntry(v)
	if len(rest) == 0 || id != f.ID {
		return
	}
	var by string
	var from uint64 // what the end of the valid time is counted from
	d := recordDecoder{b: rest[1:]}
	switch rest[0] {
	case entryRaw, entryRawAt:
		if len(d.b) < 16 {
			return
		}
		if rest[0] == entryRawAt {
			from = idNanos(d.b[:16])
		}
		by, d.b = standardID(d.b[:16]), d.b[16:]
	case entryText:
		by = d.str()
	}
	to := d.varint()
	if d.err != nil || by == "" || len(d.b) != 0 {
		return
	}
	t := time.Unix(0, int64(from+uint64(to))).UTC()
	f.SupersededBy, f.ValidTo = by, &t
}

// entryFact reads the fact that the entity-index value v names, as
// [indexedFact] does, with what v says of its retirement.
func entryFact(tx Tx, v []byte) (*Fact, error) {
	id := entityID(v)
	f, err := getRecord(tx, id)
	if err = indexedErr(bucketEntity, id, err); err != nil {
		return nil, err
	}
	if f.Current() {
		applyRetired(f, v)
	}
	return f, nil
}

// Fact records are CBOR (field names as in the JSON tags, times as RFC 3339
// with nanoseconds): three times faster to decode than JSON, and queries
// decode every candidate.
var (
	factEnc = codec.Must(cbor.EncOptions{Time: cbor.TimeRFC3339Nano}.EncMode())
	factDec = codec.Must(cbor.DecOptions{}.DecMode())
)

// encodeRecord encodes v, the record named record, with factEnc. A string
// of v that is not valid UTF-8 is a [*TextError]: factDec would reject it,
// so the record could never be read back, and it is not encoded.
func encodeRecord(record string, v any) ([]byte, error) {
	if err := CheckText(record, v); err != nil {
		return nil, err
	}
	return factEnc.Marshal(v)
}

// writeFact stores f under its id. A fact holding a string that is not
// valid UTF-8 is refused with a [*TextError].
func writeFact(tx Tx, f *Fact) error {
	b, err := encodeFact(f)
	if err != nil {
		return err
	}
	// Ids are time-ordered, and a retirement no longer grows the record
	// of the fact it retires (see markRetired): only rarer writes (a
	// deletion, a forget, a re-verification) rewrite one, so pages are
	// filled (225 bytes a fact, were 256 at 80%).
	hintWriteOnce(tx, bucketFacts)
	return tx.Put(bucketFacts, []byte(f.ID), b)
}

// indexLive adds (add=true) or removes the word postings and the rank entry
// of a live fact.
//
// A fact's postings, one per word, and its rank entry would land on as many
// leaves of facts.words and facts.rank, each a page to write. So a new
// fact's entries first go, as one entry, to facts.fresh, whose keys (ids
// being time-ordered) append; once facts.fresh holds freshMax facts of the
// tenant, the write that brings it there moves them all to facts.words and
// facts.rank, where entries of the same word and rank share leaves (see
// flushFresh). Queries read facts.fresh as well.
func indexLive(tx Tx, f *Fact, add bool) error {
	rank := rankKey(f) // posting values carry it, so keyword queries can order candidates unread
	words, tfs, dl := countWords(factText(f))
	if !add {
		if _, ok := tx.(Prefetcher); ok {
			for _, w := range words {
				prefetchScan(tx, bucketWords, wordPrefix(f.Tenant, w), true)
			}
		}
		for _, w := range words {
			if err := removePosting(tx, f.Tenant, w, f.ID); err != nil {
				return err
			}
		}
		if err := tx.Delete(bucketFresh, indexKey(f.Tenant, f.ID)); err != nil {
			return err
		}
		return tx.Delete(bucketRank, rankEntry(f.Tenant, rankScope(f), rank))
	}
	scope := rankScope(f)
	v := make([]byte, 0, 16+len(scope)+1+len(f.Value)+len(f.Key)+len(f.Entity))
	v = append(append(append(v, rank[:16]...), scope...), 0)
	for i, w := range words {
		if i > 0 {
			v = append(v, 0)
		}
		v = append(v, w...)
	}
	v = appendFreshCounts(v, tfs, dl)
	hintAppend(tx, bucketFresh)
	if err := tx.Put(bucketFresh, indexKey(f.Tenant, f.ID), v); err != nil {
		return err
	}
	return flushFresh(tx, f.Tenant, freshMax)
}

// freshEntry is one entry of facts.fresh.
type freshEntry struct {
	tenant, id string
	rank       []byte   // 16 bytes: ^confidence, ^stored_at
	scope      string   // the rank partition (see rankScope)
	words      []string // the fact's words
	tfs        []uint32 // each word's term frequency; nil when the entry has none
	dl         uint32   // the fact's number of words, when tfs is set
}

// freshCountsMark follows the words of an entry of facts.fresh written
// from format 10, before the counts its postings carry (see postings.go):
// the fact's number of words, then each word's term frequency, as
// uvarints. No word holds the byte (valid UTF-8 never does).
const freshCountsMark = 0xff

// appendFreshCounts appends to v, an entry of facts.fresh up to its words,
// the mark and counts of a fact of dl words whose words have the term
// frequencies tfs.
func appendFreshCounts(v []byte, tfs []uint32, dl int) []byte {
	v = append(v, freshCountsMark)
	v = binary.AppendUvarint(v, uint64(min(dl, tfMax)))
	for _, tf := range tfs {
		v = binary.AppendUvarint(v, uint64(min(tf, tfMax)))
	}
	return v
}

// parseFresh splits an entry of facts.fresh. The entry's bytes are copied.
func parseFresh(k, v []byte) (freshEntry, bool) {
	i := bytes.IndexByte(k, 0)
	if i < 0 || len(v) < 16 {
		return freshEntry{}, false
	}
	scope, _, ok := bytes.Cut(v[16:], []byte{0})
	if !ok {
		return freshEntry{}, false
	}
	words, counts, ok := freshWords(v)
	if !ok {
		return freshEntry{}, false
	}
	e := freshEntry{tenant: string(k[:i]), id: string(k[i+1:]), rank: bytes.Clone(v[:16]), scope: string(scope)}
	if len(words) > 0 {
		for w := range bytes.SplitSeq(words, []byte{0}) {
			e.words = append(e.words, string(w))
		}
	}
	if counts != nil {
		e.tfs = make([]uint32, len(e.words))
		dl, n := binary.Uvarint(counts)
		counts = counts[n:]
		e.dl = uint32(dl)
		for j := range e.tfs {
			tf, n := binary.Uvarint(counts)
			counts = counts[n:]
			e.tfs[j] = uint32(tf)
		}
	}
	return e, true
}

// freshWords returns the words of the facts.fresh value v, joined by NUL
// bytes, and its counts (see freshCountsMark; nil when it has none), or
// false when v is malformed.
func freshWords(v []byte) (words, counts []byte, ok bool) {
	if len(v) < 16 {
		return nil, nil, false
	}
	_, words, ok = bytes.Cut(v[16:], []byte{0})
	if !ok {
		return nil, nil, false
	}
	words, counts, marked := bytes.Cut(words, []byte{freshCountsMark})
	if !marked {
		return words, nil, true
	}
	if !validFreshCounts(counts, bytes.Count(words, []byte{0})+min(len(words), 1)) {
		return nil, nil, false
	}
	return words, counts, true
}

// validFreshCounts reports whether counts holds the uvarints of a fact's
// number of words and of the term frequencies of its n words, and nothing
// else.
func validFreshCounts(counts []byte, n int) bool {
	for range n + 1 {
		x, m := binary.Uvarint(counts)
		if m <= 0 || x > tfMax {
			return false
		}
		counts = counts[m:]
	}
	return len(counts) == 0
}

// freshRanks returns the rank keys (^confidence, ^stored_at, id) of the
// facts of facts.fresh in the rank partition of tenant and scope, sorted:
// the rank entries they do not have yet.
func freshRanks(tx Tx, tenant, scope string) ([][]byte, error) {
	var keys [][]byte
	err := tx.Scan(bucketFresh, indexKey(tenant, ""), false, func(k, v []byte) error {
		if len(v) < 16 {
			return nil
		}
		s, _, ok := bytes.Cut(v[16:], []byte{0})
		if ok && string(s) == scope {
			keys = append(keys, append(bytes.Clone(v[:16]), k[len(tenant)+1:]...))
		}
		return nil
	})
	slices.SortFunc(keys, bytes.Compare)
	return keys, err
}

// scanRank calls visit with the rank key (^confidence, ^stored_at, id) of
// every live fact of the rank partition of tenant and scope, in ascending
// order: the entries of facts.rank merged with those of the facts still in
// facts.fresh. visit returning ErrStop ends the scan without error.
func scanRank(tx Tx, tenant, scope string, visit func(key []byte) error) error {
	fresh, err := freshRanks(tx, tenant, scope)
	if err != nil {
		return err
	}
	p := rankPrefix(tenant, scope)
	err = tx.Scan(bucketRank, p, true, func(k, _ []byte) error {
		k = rankOfEntry(k[len(p):])
		for len(fresh) > 0 && bytes.Compare(fresh[0], k) < 0 {
			if err := visit(fresh[0]); err != nil {
				return err
			}
			fresh = fresh[1:]
		}
		return visit(k)
	})
	for err == nil && len(fresh) > 0 {
		err, fresh = visit(fresh[0]), fresh[1:]
	}
	if errors.Is(err, ErrStop) {
		return nil
	}
	return err
}

// flushFresh moves the postings and rank entries of every fact of tenant
// in facts.fresh to facts.words and facts.rank when facts.fresh holds at
// least min facts of tenant (min 0 or 1: whenever it holds any), or
// freshBytesMax bytes of them; with tenant "", those of every tenant, when
// it holds that many in all. A write thus reads and moves its own tenant's
// entries only: writers of different tenants neither read each other's
// (which made concurrent transactions of a serializable backend abort
// one another) nor pay for moving them. An entry whose value does
// not parse (a damaged page) is removed without moving anything: its fact
// stays readable by id and through the entity and key indexes, and leaves
// keyword and unfiltered queries.
func flushFresh(tx Tx, tenant string, min int) error {
	var prefix []byte
	if tenant != "" {
		prefix = indexKey(tenant, "")
	}
	var entries []freshEntry
	var keys [][]byte
	n, size := 0, 0
	err := tx.Scan(bucketFresh, prefix, false, func(k, v []byte) error {
		if n, size = n+1, size+len(v); n >= min || size >= freshBytesMax {
			return ErrStop
		}
		return nil
	})
	if err != nil || n < min && size < freshBytesMax {
		return err
	}
	err = tx.Scan(bucketFresh, prefix, false, func(k, v []byte) error {
		keys = append(keys, bytes.Clone(k))
		if e, ok := parseFresh(k, v); ok {
			entries = append(entries, e)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The postings of each word, sorted by id, go in together.
	type word struct{ tenant, word string }
	byWord := make(map[word][]posting)
	for _, e := range entries {
		for j, w := range e.words {
			k := word{e.tenant, w}
			p := posting{id: e.id, rank: e.rank}
			if e.tfs != nil {
				p.tf, p.dl = e.tfs[j], e.dl
			}
			byWord[k] = append(byWord[k], p)
		}
	}
	words := make([]word, 0, len(byWord))
	for w, ps := range byWord {
		words = append(words, w)
		slices.SortFunc(ps, func(a, b posting) int { return strings.Compare(a.id, b.id) })
		byWord[w] = slices.CompactFunc(ps, func(a, b posting) bool { return a.id == b.id })
	}
	slices.SortFunc(words, func(a, b word) int {
		return cmp.Or(strings.Compare(a.tenant, b.tenant), strings.Compare(a.word, b.word))
	})
	if _, ok := tx.(Prefetcher); ok {
		// Each word's last blocks, where new ids go (see findBlock), read
		// together where reads cost a round trip.
		for _, w := range words {
			prefetchScan(tx, bucketWords, wordPrefix(w.tenant, w.word), true)
		}
	}
	for _, w := range words {
		if err := addPostings(tx, w.tenant, w.word, byWord[w]); err != nil {
			return err
		}
	}
	slices.SortFunc(entries, func(a, b freshEntry) int {
		return cmp.Or(strings.Compare(a.tenant, b.tenant), strings.Compare(a.scope, b.scope), bytes.Compare(b.rank, a.rank))
	})
	hintWriteOnce(tx, bucketRank) // appended within each confidence, never rewritten
	for _, e := range entries {
		if err := tx.Put(bucketRank, rankEntry(e.tenant, e.scope, append(e.rank, e.id...)), nil); err != nil {
			return err
		}
	}
	for _, k := range keys {
		if err := tx.Delete(bucketFresh, k); err != nil {
			return err
		}
	}
	return nil
}

// rankScope is the rank-index partition of f: "" for the shared pool, the
// owner for a private fact. Partitions keep one agent's private facts out
// of every other agent's reads.
func rankScope(f *Fact) string {
	if f.Private {
		return f.Owner
	}
	return ""
}

// rankEntry is the key in facts.rank of the rank key k (^confidence,
// ^stored_at, fact id) in the partition of tenant and scope: from format
// 8, the partition's prefix and the bytes of k complemented. A newer fact,
// whose ^stored_at is smaller, so sorts after the older facts of its
// confidence, and its entry is appended rather than put before them; the
// partition is scanned backwards. From format 9, a standard fact id is
// the byte entryRaw and the 16 bytes it stands for, 17 bytes of 34, before
// it is complemented; in the order of the partition, the facts of one
// confidence and stored_at whose ids are standard then come before those
// whose ids are not (all but a store's oldest facts have standard ids).
func rankEntry(tenant, scope string, k []byte) []byte {
	e := rankPrefix(tenant, scope)
	if raw, ok := compactID(string(k[min(rankLen, len(k)):])); ok {
		k = append(append(append(make([]byte, 0, rankLen+17), k[:rankLen]...), entryRaw), raw[:]...)
	}
	for _, c := range k {
		e = append(e, ^c)
	}
	return e
}

// rankOfEntry is the rank key that rest, a key of facts.rank less its
// partition's prefix, stands for, in either layout: up to format 7 rest
// is the rank key, whose first byte (of ^confidence, for a confidence in
// [0, 1]) is at least 0xc0; from format 8 it is complemented, and its
// first byte at most 0x3f. The id of the rank key is always text.
func rankOfEntry(rest []byte) []byte {
	if !rankComplemented(rest) {
		return rest
	}
	k := make([]byte, len(rest), max(len(rest), rankLen+34))
	for i, c := range rest {
		k[i] = ^c
	}
	if len(k) == rankLen+17 && k[rankLen] == entryRaw {
		var raw [16]byte
		copy(raw[:], k[rankLen+1:])
		k = hex.AppendEncode(append(k[:rankLen], 'f', '_'), raw[:])
	}
	return k
}

// rankComplemented reports whether rest, a key of facts.rank less its
// partition's prefix, is in the layout of format 8 or later (see
// rankOfEntry).
func rankComplemented(rest []byte) bool { return len(rest) == 0 || rest[0] < 0x80 }

// rankPrefix is the rank-index prefix of a partition.
func rankPrefix(tenant, scope string) []byte { return indexKey(tenant, scope, "") }

// rankScopes are the partitions agent reads: the shared pool, and its own
// private facts when it has an identity.
func rankScopes(agent string) []string {
	if agent != "" {
		return []string{"", agent}
	}
	return []string{""}
}

// The key index holds one entry per version chain, (tenant, key, stored
// entity) with an empty value, not one per version: the versions are in the
// entity index already, under (tenant, stored entity, key), and a new
// version of a chain then writes nothing here. [scanKeyIndex] walks a
// chain's versions from its entry.

// putKeyEntry adds the key-index entry of the chain (stored, key), unless
// it is there already.
func putKeyEntry(tx Tx, tenant, key, stored string) error {
	k := indexKey(tenant, key, stored)
	if _, err := tx.Get(bucketKey, k); !errors.Is(err, ErrNotFound) {
		return err // there (nil), or the store failed
	}
	return tx.Put(bucketKey, k, nil)
}

// parseKeyEntry splits a key-index key into its key and stored entity. The
// tenant is the first len(tenant) bytes and a NUL; neither a key nor an
// entity holds a NUL byte.
func parseKeyEntry(k []byte, tenant string) (key, stored string, ok bool) {
	if len(k) <= len(tenant)+1 {
		return "", "", false
	}
	kb, sb, ok := bytes.Cut(k[len(tenant)+1:], []byte{0})
	if !ok || len(kb) == 0 || len(sb) == 0 {
		return "", "", false
	}
	return string(kb), string(sb), true
}

// errStopKeyScan carries an ErrStop of scanKeyIndex's fn out of the inner
// scan of a chain.
var errStopKeyScan = errors.New("store: stop key scan")

// scanKeyIndex calls fn with the entity-index value (see [entityID]) of
// every version of every chain whose
// key-index entry starts with prefix (the tenant, a NUL, then a prefix of
// keys, or a whole key and a NUL): chain after chain in index order (by key,
// then stored entity), each chain's versions oldest first. skip, unless nil,
// sees each chain's key and stored entity first and returns true to pass it
// over unread. fn returning ErrStop ends the walk without error.
func scanKeyIndex(tx Tx, tenant string, prefix []byte, skip func(key, stored string) bool, fn func(v []byte) error) error {
	err := tx.Scan(bucketKey, prefix, false, func(k, _ []byte) error {
		key, stored, ok := parseKeyEntry(k, tenant)
		if !ok || skip != nil && skip(key, stored) {
			return nil
		}
		return tx.Scan(bucketEntity, indexKey(tenant, stored, key, ""), false, func(_, v []byte) error {
			if err := fn(v); errors.Is(err, ErrStop) {
				return errStopKeyScan
			} else if err != nil {
				return err
			}
			return nil
		})
	})
	if errors.Is(err, errStopKeyScan) {
		return nil
	}
	return err
}

// keyEntrySeen reports whether agent may see the chain of the stored entity
// stored: shared entities that are not reserved, and agent's own private
// ones. Callers use it to skip other agents' private facts without reading
// them.
func keyEntrySeen(stored, agent string) bool {
	if !IsReserved(stored) {
		return true
	}
	return agent != "" && strings.HasPrefix(stored, PrivateEntity(agent, ""))
}

// rankKey orders facts by confidence, highest first, then newest first:
// ^confidence and ^stored_at (8 bytes each, big-endian), then the id. The
// confidence and storage time of a fact never change.
func rankKey(f *Fact) []byte {
	k := make([]byte, 0, 16+len(f.ID))
	k = binary.BigEndian.AppendUint64(k, ^math.Float64bits(f.Confidence))
	k = binary.BigEndian.AppendUint64(k, ^uint64(f.StoredAt.UnixNano()))
	return append(k, f.ID...)
}

func addActive(tx Tx, tenant, stored string, delta int64) error {
	k := indexKey(tenant, stored)
	var n int64
	if v, err := tx.Get(bucketActive, k); err == nil {
		n = int64(binary.BigEndian.Uint64(v))
	} else if err != ErrNotFound {
		return err
	}
	n += delta
	if n <= 0 {
		return tx.Delete(bucketActive, k)
	}
	return tx.Put(bucketActive, k, binary.BigEndian.AppendUint64(nil, uint64(n)))
}

// indexKey joins parts with NUL bytes. The last part is not terminated, so
// indexKey(a, b, "") is the prefix of every key under (a, b).
func indexKey(parts ...string) []byte {
	n := len(parts)
	for _, p := range parts {
		n += len(p)
	}
	b := make([]byte, 0, n) // room for a byte more: callers often append a 0
	for i, p := range parts {
		if i > 0 {
			b = append(b, 0)
		}
		b = append(b, p...)
	}
	return b
}

func version(v uint32) string { return string(binary.BigEndian.AppendUint32(nil, v)) }

// History returns every version of (entity, key) that agent may see: the
// shared chain and agent's private chain, oldest first, deleted and
// superseded versions included.
func History(tx Tx, s Scope, entity, key string) ([]*Fact, error) {
	var out []*Fact
	for _, stored := range s.storedNames(entity) {
		err := tx.Scan(bucketEntity, indexKey(s.Tenant, stored, key, ""), false, func(_, v []byte) error {
			f, err := entryFact(tx, v)
			if err != nil {
				return SkipCorrupt(tx, err)
			}
			if s.Sees(f) {
				out = append(out, f)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].StoredAt.Before(out[j].StoredAt) })
	return out, nil
}

// HistoryChain selects the version chains of (entity, key) a
// [HistoryQuery] walks.
type HistoryChain int

// The chains a history walks: both (the shared chain and the scope's own
// private chain), or one of them.
const (
	BothChains   HistoryChain = iota // the shared chain and the scope's private chain
	SharedChain                      // the shared chain only
	PrivateChain                     // the scope's private chain only (none for an anonymous scope)
)

// HistoryPos is where a newest-first walk of a history stands. In each
// chain, the versions still to come are those numbered below the chain's
// position; 0 means the walk has not started, and the first page then
// fixes the position at one past the chain's newest version, so versions
// written after the walk began do not join it.
type HistoryPos struct {
	Shared  uint32
	Private uint32
}

// HistoryQuery asks for one page of the history of (Entity, Key) as Scope
// sees it.
type HistoryQuery struct {
	Scope
	Entity, Key string       // the logical entity and the key
	Chains      HistoryChain // which chains to walk
	From        HistoryPos   // the zero value starts at the newest versions
	Limit       int          // most versions on the page; 0 or less: no limit
}

// HistoryPage is one page of a history.
type HistoryPage struct {
	// Facts are the versions on the page, newest first: each chain in
	// descending version order, the two merged by stored_at (the shared
	// version first when they tie).
	Facts []*Fact
	// Next is where the following page starts when the caller keeps every
	// fact of the page; [HistoryPage.After] gives it for a shorter prefix.
	Next HistoryPos
	// More reports that versions remain after the page.
	More bool

	start HistoryPos // where the page started, every chain's position fixed
}

// After is the position following the first n facts of the page: the
// caller kept only those (a page cut short for size, say). More versions
// remain when n is less than len(p.Facts) or p.More.
func (p *HistoryPage) After(n int) HistoryPos {
	pos := p.start
	for _, f := range p.Facts[:n] {
		if f.Private {
			pos.Private = f.Version
		} else {
			pos.Shared = f.Version
		}
	}
	return pos
}

// ReadHistory returns one page of the history of (q.Entity, q.Key): the
// versions q.Scope sees (superseded and deleted ones included) of the
// chains q.Chains selects, newest first, starting at q.From. Walking page
// after page from the zero position, each passing the previous page's
// Next, returns every version once.
func ReadHistory(tx Tx, q HistoryQuery) (*HistoryPage, error) {
	type chain struct {
		stored  string
		private bool
		from    uint32  // versions below it are still to come
		facts   []*Fact // newest first, at most Limit
		more    bool    // a visible version follows facts
	}
	var chains []*chain
	if q.Chains != PrivateChain {
		chains = append(chains, &chain{stored: q.Entity, from: q.From.Shared})
	}
	if q.Chains != SharedChain && q.Agent != "" {
		chains = append(chains, &chain{stored: PrivateEntity(q.Agent, q.Entity), private: true, from: q.From.Private})
	}
	page := &HistoryPage{}
	for _, c := range chains {
		err := tx.Scan(bucketEntity, indexKey(q.Tenant, c.stored, q.Key, ""), true, func(k, v []byte) error {
			ver := binary.BigEndian.Uint32(k[len(k)-4:])
			if c.from == 0 {
				c.from = ver + 1 // the walk starts here: later versions do not join it
			}
			if ver >= c.from {
				return nil
			}
			f, err := entryFact(tx, v)
			if err != nil {
				return SkipCorrupt(tx, err) // reported, and left out of the page
			}
			if !q.Sees(f) || f.Private != c.private {
				return nil // a forgotten fact's tombstone, say
			}
			if q.Limit > 0 && len(c.facts) == q.Limit {
				c.more = true
				return ErrStop
			}
			c.facts = append(c.facts, f)
			return nil
		})
		if err != nil {
			return nil, err
		}
		if c.from == 0 {
			c.from = 1 // an empty chain: there is nothing below version 1
		}
		if c.private {
			page.start.Private = c.from
		} else {
			page.start.Shared = c.from
		}
	}

	var shared, private []*Fact
	for _, c := range chains {
		if c.private {
			private = c.facts
		} else {
			shared = c.facts
		}
		page.More = page.More || c.more
	}
	for (q.Limit <= 0 || len(page.Facts) < q.Limit) && (len(shared) > 0 || len(private) > 0) {
		if len(private) == 0 || len(shared) > 0 && !shared[0].StoredAt.Before(private[0].StoredAt) {
			page.Facts, shared = append(page.Facts, shared[0]), shared[1:]
		} else {
			page.Facts, private = append(page.Facts, private[0]), private[1:]
		}
	}
	page.More = page.More || len(shared) > 0 || len(private) > 0
	page.Next = page.After(len(page.Facts))
	return page, nil
}

// ListEntities returns, sorted and without duplicates, the logical names of
// the entities in tenant that hold at least one current fact visible to
// agent. Reserved entities are left out.
func ListEntities(tx Tx, s Scope) ([]string, error) {
	own := ""
	if s.Agent != "" {
		own = PrivateEntity(s.Agent, "")
	}
	var out []string
	err := tx.Scan(bucketActive, indexKey(s.Tenant, ""), false, func(k, _ []byte) error {
		name := string(k[len(s.Tenant)+1:])
		if own != "" && strings.HasPrefix(name, own) {
			name = name[len(own):]
		}
		if !IsReserved(name) {
			out = append(out, name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(out)
	return compactStrings(out), nil
}

func compactStrings(s []string) []string {
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}
