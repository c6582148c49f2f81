package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"lukechampine.com/blake3"
)

// Buckets of the forget lifecycle (memory_forget, its recovery window and
// the purge); see [Forget], [RestoreForget] and [PurgeForget].
const (
	bucketForgets      = "forgets"       // forget receipt id → CBOR ForgetRecord
	bucketForgetFacts  = "forgets.facts" // forget receipt id, NUL, fact id → CBOR ForgottenFact
	bucketForgetsDue   = "forgets.due"   // window end (8 bytes BE, Unix ns), forget receipt id → empty (state forgotten only)
	bucketForgetsState = "forgets.state" // "compact_pending" → the purge receipt id, while a purge awaits compaction
)

var keyCompactPending = []byte("compact_pending")

// forgottenOwner is the owner of a forgotten fact's tombstone. A caller's
// identity can never contain "::" (see toolkit.Caller.Validate), so no caller
// sees it.
const forgottenOwner = "::forgotten"

// IsForgotten reports whether f is the tombstone of a forgotten fact.
func IsForgotten(f *Fact) bool { return f.Private && f.Owner == forgottenOwner }

// The five scope types of memory_forget.
const (
	ScopeEntityPrefix    = "entity_prefix"    // logical entities starting with Value
	ScopeKeyGlob         = "key_glob"         // keys matching the path.Match pattern Value
	ScopePassportID      = "passport_id"      // facts whose Owner is Value ("anonymous": written anonymously)
	ScopeBeforeTimestamp = "before_timestamp" // facts stored before the RFC 3339 instant Value
	ScopeTenantID        = "tenant_id"        // every fact of the tenant Value (the caller's own)
)

// ScopeTypes lists the scope types in the order of the CueCrux tool contract.
var ScopeTypes = []string{ScopeEntityPrefix, ScopeKeyGlob, ScopePassportID, ScopeBeforeTimestamp, ScopeTenantID}

// AnonymousPassport is the passport_id that selects facts written by
// anonymous callers (stored with an empty Owner). It is the name crux
// gives every unauthenticated caller.
const AnonymousPassport = "anonymous"

// Forget states.
const (
	ForgetForgotten = "forgotten" // within or past its window, restorable until it ends
	ForgetRestored  = "restored"  // put back by RestoreForget
	ForgetPurged    = "purged"    // values removed by PurgeForget
)

// Errors of the forget functions. Callers test with errors.Is.
var (
	// ErrInvalidScope reports a forget scope that is malformed: an unknown
	// type, an empty value, a bad glob or timestamp, another tenant.
	ErrInvalidScope = errors.New("store: invalid forget scope")
	// ErrForgetRestored reports a forget that was already restored.
	ErrForgetRestored = errors.New("store: forget already restored")
	// ErrForgetPurged reports a forget whose values were already purged.
	ErrForgetPurged = errors.New("store: forget already purged")
	// ErrRecoveryWindowClosed reports a restore after the forget's recovery
	// window ended.
	ErrRecoveryWindowClosed = errors.New("store: recovery window has ended")
	// ErrWindowOpen reports a purge of a forget whose window has not ended.
	ErrWindowOpen = errors.New("store: recovery window has not ended")
)

// ForgetScope is the typed selector of a forget: one of [ScopeTypes] and
// its value.
type ForgetScope struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// String renders the scope as type=value.
func (s ForgetScope) String() string { return s.Type + "=" + s.Value }

// ForgetQuery selects the facts a forget touches.
type ForgetQuery struct {
	Scope    // the caller
	Selector ForgetScope
	// IncludePinned also selects facts that an agent of the tenant pinned;
	// by default they survive.
	IncludePinned bool
	// AnyWriter also selects facts written by other agents (an operator's
	// forget). Without it only the caller's own facts are selected: those
	// whose Owner is Scope.Agent ("" for facts written anonymously, which
	// an anonymous caller forgets); the others in scope are counted in
	// ForgetSelection.OthersSkipped.
	AnyWriter bool
	// Limit caps the facts selected (the first ones in the order of
	// ForgetSelection.Facts); 0 means no cap.
	Limit int
}

// ForgetSelection is what [SelectForget] found.
type ForgetSelection struct {
	// Facts are the selected facts, oldest first (by stored_at, then id).
	Facts []*Fact
	// Matched is the number of facts in scope before Limit was applied.
	Matched int
	// Capped reports that Limit left some of them out.
	Capped bool
	// PinnedSkipped counts facts in scope left out because they are pinned.
	PinnedSkipped int
	// OthersSkipped counts facts in scope left out because another agent
	// wrote them and the query is not AnyWriter.
	OthersSkipped int
}

// ValueHash is the hex BLAKE3-256 of a fact value, as forget receipts name
// a value without keeping it.
func ValueHash(value string) string {
	sum := blake3.Sum256([]byte(value))
	return hex.EncodeToString(sum[:])
}

// ParseScope checks s and returns the instant of a before_timestamp scope
// (zero for the others). The value of a tenant_id scope must be tenant.
// Every failure wraps ErrInvalidScope.
func ParseScope(s ForgetScope, tenant string) (time.Time, error) {
	if s.Value == "" {
		return time.Time{}, fmt.Errorf("%w: empty value", ErrInvalidScope)
	}
	switch s.Type {
	case ScopeEntityPrefix, ScopePassportID:
	case ScopeKeyGlob:
		if _, err := path.Match(s.Value, ""); err != nil {
			return time.Time{}, fmt.Errorf("%w: key_glob %q: %v", ErrInvalidScope, s.Value, err)
		}
	case ScopeBeforeTimestamp:
		t, err := time.Parse(time.RFC3339Nano, s.Value)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: before_timestamp %q is not an RFC 3339 date-time", ErrInvalidScope, s.Value)
		}
		return t, nil
	case ScopeTenantID:
		if s.Value != tenant {
			return time.Time{}, fmt.Errorf("%w: tenant_id %q is not the tenant %q", ErrInvalidScope, s.Value, tenant)
		}
	default:
		return time.Time{}, fmt.Errorf("%w: unknown type %q", ErrInvalidScope, s.Type)
	}
	return time.Time{}, nil
}

// SelectForget returns the facts of q.Tenant that q.Selector selects for
// q.Agent: current, superseded and deleted versions alike (a forget erases
// values, and any version left behind would keep the value readable in
// fact_history). Never selected: facts not visible to the agent (other
// agents' private facts), reserved entities (starting with "__"), facts
// already forgotten, unless q.AnyWriter facts another agent wrote, and,
// unless q.IncludePinned, facts pinned by any agent of the tenant.
//
// entity_prefix and key_glob read the entity and key indexes (a glob from
// its literal prefix); passport_id, before_timestamp and tenant_id read
// every fact of the tenant.
func SelectForget(tx Tx, q ForgetQuery) (*ForgetSelection, error) {
	before, err := ParseScope(q.Selector, q.Tenant)
	if err != nil {
		return nil, err
	}
	match := func(f *Fact) bool {
		switch q.Selector.Type {
		case ScopeEntityPrefix:
			return strings.HasPrefix(f.Entity, q.Selector.Value)
		case ScopeKeyGlob:
			ok, _ := path.Match(q.Selector.Value, f.Key)
			return ok
		case ScopePassportID:
			return f.Owner == q.Selector.Value || (f.Owner == "" && q.Selector.Value == AnonymousPassport)
		case ScopeBeforeTimestamp:
			return f.StoredAt.Before(before)
		}
		return true // tenant_id: every fact of the tenant
	}

	sel := &ForgetSelection{}
	seen := make(map[string]struct{})
	for _, s := range q.scans() {
		visit := func(v []byte) error { // an entity-index value
			id := entityID(v)
			if _, dup := seen[id]; dup {
				return nil
			}
			seen[id] = struct{}{}
			f, err := indexedFact(tx, s.bucket, id)
			if err != nil {
				return SkipCorrupt(tx, err)
			}
			if !q.SeesClientFact(f) || IsForgotten(f) || !match(f) {
				return nil
			}
			if !q.AnyWriter && f.Owner != q.Agent {
				sel.OthersSkipped++
				return nil
			}
			pinned, err := q.pinKeeps(tx, f)
			if err != nil {
				return err
			}
			if pinned {
				sel.PinnedSkipped++
				return nil
			}
			sel.Facts = append(sel.Facts, f)
			return nil
		}
		var err error
		if s.bucket == bucketKey {
			err = scanKeyIndex(tx, q.Tenant, s.prefix, nil, visit)
		} else {
			err = tx.Scan(s.bucket, s.prefix, false, func(_, v []byte) error { return visit(v) })
		}
		if err != nil {
			return nil, err
		}
	}
	sort.Slice(sel.Facts, func(i, j int) bool {
		a, b := sel.Facts[i], sel.Facts[j]
		if !a.StoredAt.Equal(b.StoredAt) {
			return a.StoredAt.Before(b.StoredAt)
		}
		return a.ID < b.ID
	})
	sel.Matched = len(sel.Facts)
	if q.Limit > 0 && len(sel.Facts) > q.Limit {
		sel.Facts, sel.Capped = sel.Facts[:q.Limit], true
	}
	return sel, nil
}

// forgetScan is one index scan of a forget's selection: the entity index
// (bucketEntity) or the key index (bucketKey), from prefix.
type forgetScan struct {
	bucket string
	prefix []byte
}

// scans are the index scans that find the facts q's selector may match:
// the entity index from the prefix (and from the caller's private form of
// it) for entity_prefix, the key index from the glob's literal prefix for
// key_glob, and the tenant's whole entity index for the others.
func (q ForgetQuery) scans() []forgetScan {
	switch q.Selector.Type {
	case ScopeEntityPrefix:
		scans := []forgetScan{{bucketEntity, indexKey(q.Tenant, q.Selector.Value)}}
		if q.Agent != "" {
			scans = append(scans, forgetScan{bucketEntity, indexKey(q.Tenant, PrivateEntity(q.Agent, q.Selector.Value))})
		}
		return scans
	case ScopeKeyGlob:
		return []forgetScan{{bucketKey, indexKey(q.Tenant, globPrefix(q.Selector.Value))}}
	default:
		return []forgetScan{{bucketEntity, indexKey(q.Tenant, "")}}
	}
}

// pinKeeps reports whether a pin keeps f out of q's forget. A pin protects
// a fact from every agent's forget; include_pinned overrides only the
// caller's own pins.
func (q ForgetQuery) pinKeeps(tx Tx, f *Fact) (bool, error) {
	pinned, err := PinnedByAnyone(tx, q.Tenant, f.ID)
	if err == nil && pinned && q.IncludePinned && q.Agent != "" {
		var own bool
		if own, err = IsPinned(tx, Scope{Tenant: q.Tenant, Agent: q.Agent}, f.ID); err == nil && own {
			pinned, err = pinnedByOthers(tx, q.Tenant, q.Agent, f.ID)
		}
	}
	return pinned, err
}

// globPrefix is the literal start of a path.Match pattern: the text before
// its first *, ?, [ or \.
func globPrefix(pattern string) string {
	if i := strings.IndexAny(pattern, `*?[\`); i >= 0 {
		return pattern[:i]
	}
	return pattern
}

// ForgetRecord is a forget as the store keeps it, under its receipt id.
type ForgetRecord struct {
	ID            string      `json:"id"` // the forget receipt id
	Tenant        string      `json:"tenant"`
	Passport      string      `json:"passport"` // the initiating passport
	Reason        string      `json:"reason"`
	Scope         ForgetScope `json:"scope"`
	IncludePinned bool        `json:"include_pinned,omitempty"`
	FactCount     int         `json:"fact_count"`
	InitiatedAt   time.Time   `json:"initiated_at"`
	WindowEndsAt  time.Time   `json:"window_ends_at"` // restorable before, purged from then on
	State         string      `json:"state"`          // ForgetForgotten, ForgetRestored or ForgetPurged

	RestoredAt     *time.Time `json:"restored_at,omitempty"`
	RestoreReceipt string     `json:"restore_receipt,omitempty"`
	PurgedAt       *time.Time `json:"purged_at,omitempty"`
	PurgeReceipt   string     `json:"purge_receipt,omitempty"`
}

// ForgottenFact is one fact of a forget.
type ForgottenFact struct {
	ID        string `json:"id"`
	Entity    string `json:"entity"` // logical entity
	Key       string `json:"key"`
	ValueHash string `json:"value_hash"` // ValueHash of the value before the forget
	// Original is the fact record as it was, value included (CBOR); nil
	// once the forget is restored or purged.
	Original []byte `json:"original,omitempty"`
	Purged   bool   `json:"purged,omitempty"` // the forget was purged
}

func forgetFactKey(forgetID, factID string) []byte { return indexKey(forgetID, factID) }

func dueKey(t time.Time, id string) []byte {
	n := t.UnixNano()
	if n < 0 {
		n = 0
	}
	return append(binary.BigEndian.AppendUint64(nil, uint64(n)), id...)
}

func writeForget(tx Tx, rec *ForgetRecord) error {
	b, err := encodeRecord("forget "+rec.ID, rec)
	if err != nil {
		return err
	}
	return tx.Put(bucketForgets, []byte(rec.ID), b)
}

func writeForgottenFact(tx Tx, forgetID string, ff *ForgottenFact) error {
	b, err := encodeRecord("forgotten fact "+ff.ID+" of forget "+forgetID, ff)
	if err != nil {
		return err
	}
	return tx.Put(bucketForgetFacts, forgetFactKey(forgetID, ff.ID), b)
}

// GetForget reads the forget recorded under receipt id, or returns an
// error wrapping ErrNotFound.
func GetForget(tx Tx, id string) (*ForgetRecord, error) {
	if id == "" {
		return nil, fmt.Errorf("store: no forget with an empty id: %w", ErrNotFound)
	}
	v, err := tx.Get(bucketForgets, []byte(id))
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("store: no forget %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	rec := new(ForgetRecord)
	if err := factDec.Unmarshal(v, rec); err != nil {
		return nil, &CorruptRecordError{Bucket: bucketForgets, Key: []byte(id), ID: id, Err: err}
	}
	return rec, nil
}

// ForgottenFacts calls fn with every fact of the forget id, in fact id
// order.
func ForgottenFacts(tx Tx, id string, fn func(*ForgottenFact) error) error {
	return tx.Scan(bucketForgetFacts, indexKey(id, ""), false, func(k, v []byte) error {
		ff := new(ForgottenFact)
		if err := factDec.Unmarshal(v, ff); err != nil {
			return &CorruptRecordError{Bucket: bucketForgetFacts, Key: bytes.Clone(k), ID: id, Err: err}
		}
		return fn(ff)
	})
}

// Forget forgets facts (as [SelectForget] returned them, read in tx) under
// rec, whose ID is the forget receipt the caller minted in tx, and records
// rec in state forgotten, due for purging when rec.WindowEndsAt comes. It
// fills rec.FactCount and rec.State. A fact already forgotten, or of
// another tenant, is an error, as is an id that already has a record.
//
// Each fact becomes a tombstone:
//
//   - The fact record keeps its id, tenant, entity, key, version and chain
//     links (supersedes, superseded_by, retires), so that its version chain
//     stays coherent and later writes never reuse its version number. Its
//     value is emptied, it is marked deleted, and it becomes private to an
//     owner no caller can be ([IsForgotten]), so every read path (queries,
//     fact_history, list_entities, delete_fact, store_fact's supersedes)
//     treats it as absent. Its source_receipt names the forget receipt.
//   - Its keyword postings and rank entry are removed (as [DeleteFact]
//     does) and, if it was current, its entity's count of current facts
//     drops.
//   - The fact as it was, value included, is kept in the forget's entry
//     (a [ForgottenFact], with the BLAKE3 of the value), so that
//     [RestoreForget] can put it back exactly during the recovery window.
//
// Once the window has ended, [PurgeForget] drops those saved values: what
// is left of each fact is its tombstone and its entry (id, entity, key,
// value hash, purged). The bytes may still lie in pages the backend freed;
// a backend that implements [Compacter] can rewrite its storage without
// them, which the purge asks for (see [NeedsCompaction]).
func Forget(tx Tx, rec *ForgetRecord, facts []*Fact) error {
	if rec.ID == "" {
		return fmt.Errorf("store: forget: %w", ErrEmptyKey)
	}
	if _, err := tx.Get(bucketForgets, []byte(rec.ID)); err == nil {
		return fmt.Errorf("store: forget %s already exists", rec.ID)
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	now := rec.InitiatedAt.UTC()
	for _, sel := range facts {
		f, err := GetFact(tx, sel.ID)
		if err != nil {
			return err
		}
		if f.Tenant != rec.Tenant || IsForgotten(f) {
			return fmt.Errorf("store: forget %s: fact %s is not a live fact of tenant %q", rec.ID, f.ID, rec.Tenant)
		}
		original, err := encodeRecord("fact "+f.ID, f)
		if err != nil {
			return err
		}
		if err := writeForgottenFact(tx, rec.ID, &ForgottenFact{
			ID: f.ID, Entity: f.Entity, Key: f.Key, ValueHash: ValueHash(f.Value), Original: original,
		}); err != nil {
			return err
		}
		if !f.Deleted {
			if err := indexLive(tx, f, false); err != nil {
				return err
			}
		}
		if f.Current() {
			if err := addActive(tx, f.Tenant, f.StoredEntity(), -1); err != nil {
				return err
			}
		}
		tomb := *f
		tomb.Value, tomb.Tokens = "", 0
		tomb.Private, tomb.Owner = true, forgottenOwner
		tomb.SourceReceipt = rec.ID
		if !tomb.Deleted {
			tomb.Deleted, tomb.DeletedAt = true, &now
		}
		if err := writeFact(tx, &tomb); err != nil {
			return err
		}
	}
	rec.FactCount, rec.State = len(facts), ForgetForgotten
	rec.RestoredAt, rec.RestoreReceipt, rec.PurgedAt, rec.PurgeReceipt = nil, "", nil, ""
	if err := writeForget(tx, rec); err != nil {
		return err
	}
	return tx.Put(bucketForgetsDue, dueKey(rec.WindowEndsAt, rec.ID), nil)
}

// RestoredFact is one fact [RestoreForget] put back.
type RestoredFact struct {
	ID string `json:"fact_id"`
	// SupersededBy is set when the fact was current and its chain gained a
	// newer current version after the forget: the fact returns as a
	// superseded version of it.
	SupersededBy string `json:"superseded_by,omitempty"`
	// Retired is set when the fact was current and its chain's current
	// version is an older one (restored by an earlier restore): the
	// returning fact is current again and retires it.
	Retired string `json:"retired,omitempty"`
}

// RestoreForget puts back every fact of the forget id, exactly as it was
// (value, indexes, count of current facts), provided its recovery window
// has not ended at now and it was neither restored nor purged before
// (ErrRecoveryWindowClosed, ErrForgetRestored, ErrForgetPurged; an unknown
// id wraps ErrNotFound).
//
// A chain holds at most one current fact. If a fact that was current comes
// back to a chain that gained a current version meanwhile, the higher
// version stays current and the other is marked superseded by it (see
// [RestoredFact]); nothing else changes.
//
// receipt is called once the facts are back, in tx, to mint the restore
// receipt; its id is recorded with the forget, now in state restored.
func RestoreForget(tx Tx, id string, now time.Time, receipt func(rec *ForgetRecord, restored []RestoredFact) (string, error)) (*ForgetRecord, []RestoredFact, error) {
	rec, err := GetForget(tx, id)
	if err != nil {
		return nil, nil, err
	}
	now = now.UTC()
	switch {
	case rec.State == ForgetRestored:
		return nil, nil, fmt.Errorf("forget %s was restored at %s (receipt %s): %w",
			id, rec.RestoredAt.Format(time.RFC3339), rec.RestoreReceipt, ErrForgetRestored)
	case rec.State == ForgetPurged:
		return nil, nil, fmt.Errorf("forget %s was purged at %s (receipt %s): %w",
			id, rec.PurgedAt.Format(time.RFC3339), rec.PurgeReceipt, ErrForgetPurged)
	case !now.Before(rec.WindowEndsAt):
		return nil, nil, fmt.Errorf("forget %s: its recovery window ended at %s: %w",
			id, rec.WindowEndsAt.Format(time.RFC3339), ErrRecoveryWindowClosed)
	}

	var entries []*ForgottenFact
	var originals []*Fact
	err = ForgottenFacts(tx, id, func(ff *ForgottenFact) error {
		f := new(Fact)
		if err := decodeFact(ff.Original, ff.ID, f); err != nil {
			return &CorruptRecordError{Bucket: bucketForgetFacts, Key: forgetFactKey(id, ff.ID), ID: ff.ID, Err: err}
		}
		entries, originals = append(entries, ff), append(originals, f)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	// Oldest first, so that within a chain lower versions return first.
	order := make([]int, len(originals))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := originals[order[i]], originals[order[j]]
		if !a.StoredAt.Equal(b.StoredAt) {
			return a.StoredAt.Before(b.StoredAt)
		}
		return a.Version < b.Version
	})

	restored := make([]RestoredFact, 0, len(originals))
	for _, i := range order {
		out, err := restoreFact(tx, id, originals[i])
		if err != nil {
			return nil, nil, err
		}
		restored = append(restored, out)
	}
	for _, ff := range entries {
		ff.Original = nil
		if err := writeForgottenFact(tx, id, ff); err != nil {
			return nil, nil, err
		}
	}
	if err := tx.Delete(bucketForgetsDue, dueKey(rec.WindowEndsAt, id)); err != nil {
		return nil, nil, err
	}
	rec.State, rec.RestoredAt = ForgetRestored, &now
	if rec.RestoreReceipt, err = receipt(rec, restored); err != nil {
		return nil, nil, err
	}
	if err := writeForget(tx, rec); err != nil {
		return nil, nil, err
	}
	return rec, restored, nil
}

// restoreFact puts back f, a fact forgotten by the forget id, in place of
// its tombstone: its record, its indexes when it is not deleted, and the
// count of current facts when it is current. When its chain gained a
// current version meanwhile, the higher version stays current: a current
// version above f's supersedes f; otherwise f retires it.
func restoreFact(tx Tx, id string, f *Fact) (RestoredFact, error) {
	tomb, err := GetFact(tx, f.ID)
	if err != nil {
		return RestoredFact{}, err
	}
	if !IsForgotten(tomb) || tomb.SourceReceipt != id {
		return RestoredFact{}, fmt.Errorf("store: forget %s: fact %s is not its tombstone", id, f.ID)
	}
	out := RestoredFact{ID: f.ID}
	if f.Current() {
		cur, err := chainCurrent(tx, f)
		if err != nil {
			return RestoredFact{}, err
		}
		switch {
		case cur == nil:
		case cur.Version > f.Version:
			f.SupersededBy = cur.ID
			if f.ValidTo == nil {
				t := cur.StoredAt
				f.ValidTo = &t
			}
			out.SupersededBy = cur.ID
		default:
			if err := retire(tx, cur, f.ID, f.StoredAt); err != nil {
				return RestoredFact{}, err
			}
			out.Retired = cur.ID
		}
	}
	if err := writeFact(tx, f); err != nil {
		return RestoredFact{}, err
	}
	if !f.Deleted {
		if err := indexLive(tx, f, true); err != nil {
			return RestoredFact{}, err
		}
	}
	if f.Current() {
		if err := addActive(tx, f.Tenant, f.StoredEntity(), 1); err != nil {
			return RestoredFact{}, err
		}
	}
	return out, nil
}

// chainCurrent returns the live current fact of f's chain (same stored
// entity and key, same scope), other than f, or nil.
func chainCurrent(tx Tx, f *Fact) (*Fact, error) {
	var cur *Fact
	err := tx.Scan(bucketEntity, indexKey(f.Tenant, f.StoredEntity(), f.Key, ""), true, func(_, v []byte) error {
		if entityID(v) == f.ID {
			return nil
		}
		g, err := entryFact(tx, v)
		if err != nil {
			return SkipCorrupt(tx, err)
		}
		if !IsForgotten(g) && g.Current() && g.Private == f.Private && (!f.Private || g.Owner == f.Owner) {
			cur = g
			return ErrStop
		}
		return nil
	})
	return cur, err
}

// DueForgets returns the ids of the forgets in state forgotten whose
// recovery window has ended at now, earliest first.
func DueForgets(tx Tx, now time.Time) ([]string, error) {
	limit := dueKey(now, "")
	var ids []string
	err := tx.Scan(bucketForgetsDue, nil, false, func(k, _ []byte) error {
		if bytes.Compare(k[:8], limit) > 0 {
			return ErrStop
		}
		ids = append(ids, string(k[8:]))
		return nil
	})
	return ids, err
}

// PurgeForget removes the saved values of the forget id, whose window must
// have ended at now (else ErrWindowOpen; a restored or purged forget gives
// ErrForgetRestored or ErrForgetPurged). Each fact keeps its tombstone and
// its entry (id, entity, key, value hash), marked purged; pins on it are
// removed, since it can never come back. receipt is called in tx with the
// purged fact ids to mint the purge receipt, recorded with the forget, now
// in state purged. When it removed any value, the purge also marks the store
// as needing compaction (see [NeedsCompaction]); the mark is the purge
// receipt id.
func PurgeForget(tx Tx, id string, now time.Time, receipt func(rec *ForgetRecord, purged []string) (string, error)) (*ForgetRecord, error) {
	rec, err := GetForget(tx, id)
	if err != nil {
		return nil, err
	}
	now = now.UTC()
	switch {
	case rec.State == ForgetRestored:
		return nil, fmt.Errorf("forget %s was restored: %w", id, ErrForgetRestored)
	case rec.State == ForgetPurged:
		return nil, fmt.Errorf("forget %s was purged: %w", id, ErrForgetPurged)
	case now.Before(rec.WindowEndsAt):
		return nil, fmt.Errorf("forget %s: its recovery window ends at %s: %w", id, rec.WindowEndsAt.Format(time.RFC3339), ErrWindowOpen)
	}
	var entries []*ForgottenFact
	if err := ForgottenFacts(tx, id, func(ff *ForgottenFact) error { entries = append(entries, ff); return nil }); err != nil {
		return nil, err
	}
	purged := make([]string, 0, len(entries))
	for _, ff := range entries {
		ff.Original, ff.Purged = nil, true
		if err := writeForgottenFact(tx, id, ff); err != nil {
			return nil, err
		}
		if err := unpinAll(tx, rec.Tenant, ff.ID); err != nil {
			return nil, err
		}
		purged = append(purged, ff.ID)
	}
	if err := tx.Delete(bucketForgetsDue, dueKey(rec.WindowEndsAt, id)); err != nil {
		return nil, err
	}
	rec.State, rec.PurgedAt = ForgetPurged, &now
	if rec.PurgeReceipt, err = receipt(rec, purged); err != nil {
		return nil, err
	}
	if err := writeForget(tx, rec); err != nil {
		return nil, err
	}
	if len(purged) > 0 { // values were removed: their bytes must leave the file
		if err := tx.Put(bucketForgetsState, keyCompactPending, []byte(rec.PurgeReceipt)); err != nil {
			return nil, err
		}
	}
	return rec, nil
}

// pinnedByOthers reports whether an agent other than agent pinned fact id.
func pinnedByOthers(tx Tx, tenant, agent, id string) (bool, error) {
	p := append(indexKey(tenant, id), 0)
	found := false
	err := tx.Scan(bucketPinsByFact, p, false, func(k, _ []byte) error {
		if string(k[len(p):]) != agent {
			found = true
			return ErrStop
		}
		return nil
	})
	return found, err
}

// unpinAll removes every agent's pin on fact id.
func unpinAll(tx Tx, tenant, id string) error {
	p := append(indexKey(tenant, id), 0)
	var agents []string
	err := tx.Scan(bucketPinsByFact, p, false, func(k, _ []byte) error {
		agents = append(agents, string(k[len(p):]))
		return nil
	})
	if err != nil {
		return err
	}
	for _, a := range agents {
		if err := SetPin(tx, Scope{Tenant: tenant, Agent: a}, id, false); err != nil {
			return err
		}
	}
	return nil
}

// NeedsCompaction returns the mark a purge left when it removed values:
// until the backend compacts, their bytes may remain in pages it freed. It
// returns "" when no purge awaits compaction.
func NeedsCompaction(tx Tx) (string, error) {
	v, err := tx.Get(bucketForgetsState, keyCompactPending)
	if errors.Is(err, ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(v), nil
}

// CompactionDone clears the mark [NeedsCompaction] returned, once the
// backend has compacted. A purge that happened since left a new mark, which
// stays.
func CompactionDone(tx Tx, mark string) error {
	cur, err := NeedsCompaction(tx)
	if err != nil || cur != mark {
		return err
	}
	return tx.Delete(bucketForgetsState, keyCompactPending)
}

// Compacter is implemented by a backend that can rewrite its storage
// without the space freed by deleted and overwritten records, so that
// purged values are gone from the medium, not just unreachable. Compact
// must preserve every record, and concurrent View and Update calls must
// wait for it, never fail or see a partial state. A backend without it
// keeps purged bytes in freed space until they happen to be reused.
type Compacter interface {
	Compact(ctx context.Context) error
}
