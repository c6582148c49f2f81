package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/crux-go/crux/internal/codec"
)

// Identity continuity: a passport split into a new one ([SplitPassport]),
// two passports merged into one ([MergePassports]), a device linked to a
// passport ([LinkDevice]). Each runs inside the caller's transaction, with
// the receipt the caller mints in it, so that a failure anywhere leaves
// the store as it was.
//
// The rules, for every backend:
//
//   - Both passports of an operation belong to one tenant; neither may be
//     revoked or retired ([IdentityError]).
//   - A split copies the source's current private facts into the new
//     passport's private space, each as version 1 of its (entity, key),
//     with the same value, confidence, horizon, validity and stored_at, and
//     a [FactOrigin] naming the fact it was copied from. The source's
//     history stays where it is, reached through that link; writes after
//     the split diverge, neither passport seeing the other's. Nothing else
//     (pins, sessions, artefacts, devices) is copied.
//   - A merge moves the source's private facts (every version, deleted and
//     forgotten ones included), its live sessions, its pins and its live
//     artefacts to the target, and nothing else: the source's shared facts
//     keep naming it as their writer, its receipts, observations, gap
//     records and device links stay with it. Fact ids do not change, so
//     pins, receipts and forgets that name them still do. A moved chain
//     joins the target's chain of the same (entity, key) after the
//     target's highest version, each fact keeping its links and recording
//     its former owner and version in a [FactOrigin]. Where both chains have
//     a current fact with different values the policy decides which stays
//     current ([MergeConflict]); equal values are no conflict and the
//     target's fact stays current. The source is retired: a terminal mark
//     on its passport names the target and the merge receipt.
//   - Moved sessions become read-only references ([Session.ReadOnly])
//     under their own id, or, when the target holds a live session of that
//     id, under id@source (then id@source~2, ...).
const (
	bucketLineage     = "passports.lineage"       // tenant, passport, NUL, other passport → JSON LineageLink
	bucketDevices     = "passports.devices"       // tenant, passport, NUL, fingerprint → JSON DeviceLink
	bucketDeviceOwner = "passports.devices.owner" // tenant, fingerprint → passport id
)

// The conflict policies of a merge.
const (
	PreferSource    = "prefer_source"     // the source's current fact stays current
	PreferTarget    = "prefer_target"     // the target's current fact stays current
	ErrorOnConflict = "error_on_conflict" // any conflict fails the merge
)

// ConflictPolicies lists the conflict policies.
var ConflictPolicies = []string{PreferSource, PreferTarget, ErrorOnConflict}

// The operations a [FactOrigin] or a [LineageLink] records.
const (
	OriginSplit = "split" // the fact was copied from another by a split
	OriginMerge = "merge" // the fact was moved from another passport by a merge

	LinkSplitInto  = "split_into"  // the passport was split into the other
	LinkMergedFrom = "merged_from" // the other passport was merged into this one
)

// FactOrigin is one passport operation that brought a fact where it is.
type FactOrigin struct {
	Op       string `json:"op"`                // OriginSplit or OriginMerge
	Receipt  string `json:"receipt_id"`        // the operation's receipt
	Passport string `json:"passport"`          // the passport whose private fact it was
	FactID   string `json:"fact_id,omitempty"` // a split: the fact copied; a merge keeps the id
	Version  uint32 `json:"version"`           // its version number there
}

// LineageLink is one split or merge as the passports concerned record it.
type LineageLink struct {
	Kind     string    `json:"kind"`     // LinkSplitInto or LinkMergedFrom
	Passport string    `json:"passport"` // the other passport
	Receipt  string    `json:"receipt_id"`
	At       time.Time `json:"at"`
}

// Reasons of an [IdentityError]; test with errors.Is.
var (
	ErrPassportNotFound = fmt.Errorf("%w: no such passport", ErrNotFound)
	ErrPassportRevoked  = errors.New("store: the passport is revoked")
	ErrPassportRetired  = errors.New("store: the passport was retired by a merge")
	ErrPassportExists   = errors.New("store: the passport name is taken")
	ErrDeviceLinked     = errors.New("store: the device is linked to another passport")
	ErrTooManyDevices   = errors.New("store: the passport has the most linked devices it may have")
)

// IdentityError is an identity operation refused for what the store
// holds. Its message is a sentence for the caller; it unwraps to one of
// the reasons above.
type IdentityError struct {
	Reason error
	Detail string
}

// Error returns the sentence for the caller.
func (e *IdentityError) Error() string { return e.Detail }

// Unwrap returns the reason.
func (e *IdentityError) Unwrap() error { return e.Reason }

func identityErr(reason error, format string, args ...any) error {
	return &IdentityError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// livePassport reads the passport id of tenant, which must exist and be
// neither revoked nor retired.
func livePassport(tx Tx, tenant, id string) (*Passport, error) {
	p, err := GetPassport(tx, tenant, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, identityErr(ErrPassportNotFound, "no passport %s in tenant %s", id, tenant)
	case err != nil:
		return nil, err
	case p.Revoked():
		return nil, identityErr(ErrPassportRevoked, "passport %s was revoked at %s", id, p.RevokedAt.UTC().Format(time.RFC3339))
	case p.Retired():
		return nil, identityErr(ErrPassportRetired, "passport %s was retired into %s at %s by a merge",
			id, p.RetiredInto, p.RetiredAt.UTC().Format(time.RFC3339))
	}
	return p, nil
}

// anyUnder reports whether bucket holds a key starting with prefix.
func anyUnder(tx Tx, bucket string, prefix []byte) (bool, error) {
	found := false
	err := tx.Scan(bucket, prefix, false, func(_, _ []byte) error {
		found = true
		return ErrStop
	})
	return found, err
}

// nameTaken returns an IdentityError when id names a passport of tenant,
// or an agent that holds private facts, sessions, artefacts or pins there.
func nameTaken(tx Tx, tenant, id string) error {
	if _, err := GetPassport(tx, tenant, id); err == nil {
		return identityErr(ErrPassportExists, "passport %s already exists in tenant %s", id, tenant)
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	owner := append(indexKey(tenant, id), 0)
	for _, c := range []struct {
		bucket string
		prefix []byte
	}{
		{bucketEntity, indexKey(tenant, PrivateEntity(id, ""))},
		{bucketMemSessions, owner},
		{bucketArtefacts, owner},
		{bucketPins, owner},
	} {
		found, err := anyUnder(tx, c.bucket, c.prefix)
		if err != nil {
			return err
		}
		if found {
			return identityErr(ErrPassportExists, "the name %s is in use: an agent of that name holds records in tenant %s", id, tenant)
		}
	}
	return nil
}

// privateChain is one (entity, key) chain of an owner's private facts.
type privateChain struct {
	stored, entity, key string
	facts               []*Fact // ascending version: the owner's facts and forgotten tombstones
}

// privateChains returns every chain of owner's private facts in tenant,
// in index order. Facts that do not decode are reported and left out.
func privateChains(tx Tx, tenant, owner string) ([]*privateChain, error) {
	base := PrivateEntity(owner, "")
	var out []*privateChain
	err := tx.Scan(bucketEntity, indexKey(tenant, base), false, func(k, v []byte) error {
		rest := k[len(tenant)+1:]
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			return nil
		}
		stored, tail := string(rest[:i]), rest[i+1:]
		if len(tail) < 5 || tail[len(tail)-5] != 0 {
			return nil
		}
		key := string(tail[:len(tail)-5])
		f, err := entryFact(tx, v)
		if err != nil {
			return SkipCorrupt(tx, err)
		}
		if !IsForgotten(f) && !(f.Private && f.Owner == owner) {
			return nil // not one of owner's facts: left where it is
		}
		if n := len(out); n == 0 || out[n-1].stored != stored || out[n-1].key != key {
			out = append(out, &privateChain{stored: stored, entity: stored[len(base):], key: key})
		}
		c := out[len(out)-1]
		c.facts = append(c.facts, f)
		return nil
	})
	return out, err
}

// current is the chain's current fact, or nil.
func (c *privateChain) current() *Fact {
	for _, f := range slices.Backward(c.facts) {
		if f.Current() && !IsForgotten(f) {
			return f
		}
	}
	return nil
}

func putLineage(tx Tx, tenant, id string, l LineageLink) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return tx.Put(bucketLineage, append(append(indexKey(tenant, id), 0), l.Passport...), b)
}

// PassportLineage returns the splits and merges passport id of tenant took
// part in as the source of a split or the target of a merge, by the other
// passport's id. (A passport made by a split names its source in
// ForkedFrom; one retired by a merge its target in RetiredInto.)
func PassportLineage(tx Tx, tenant, id string) ([]LineageLink, error) {
	var out []LineageLink
	err := tx.Scan(bucketLineage, append(indexKey(tenant, id), 0), false, func(_, v []byte) error {
		var l LineageLink
		if err := json.Unmarshal(v, &l); err != nil {
			return fmt.Errorf("store: lineage of passport %s: %w", id, err)
		}
		out = append(out, l)
		return nil
	})
	return out, err
}

// ---- split ----

// SplitRequest asks [SplitPassport] to fork the passport Source of Tenant
// into a new passport New.
type SplitRequest struct {
	Tenant, Source, New string
	Now                 time.Time
}

// InheritedFact is one fact a split copied.
type InheritedFact struct {
	FactID     string `json:"fact_id" cbor:"fact_id"`           // the copy, the new passport's
	FromFactID string `json:"from_fact_id" cbor:"from_fact_id"` // the source's fact it copies
	Entity     string `json:"entity" cbor:"entity"`             // logical entity
	Key        string `json:"key" cbor:"key"`
}

// SplitResult is what a split made: the new passport and the facts it
// inherited, by (entity, key).
type SplitResult struct {
	Passport  *Passport
	Inherited []InheritedFact
}

// SplitPassport forks req.Source into the new passport req.New (see the
// rules above). The source must be a live passport, and New a name no
// passport or agent of the tenant holds (else an [*IdentityError]). The new
// passport is sponsored by the source, of its category, and starts
// unverified with no receipts: its tier is earned as every passport's is.
//
// receipt is called with the split planned and nothing yet written, to
// mint the split's receipt in tx; its id is recorded on the new passport,
// in the source's lineage and in each inherited fact's origin.
func SplitPassport(tx Tx, req SplitRequest, receipt func(*SplitResult) (string, error)) (*SplitResult, error) {
	now := req.Now.UTC()
	src, err := livePassport(tx, req.Tenant, req.Source)
	if err != nil {
		return nil, err
	}
	if err := nameTaken(tx, req.Tenant, req.New); err != nil {
		return nil, err
	}
	chains, err := privateChains(tx, req.Tenant, req.Source)
	if err != nil {
		return nil, err
	}
	res := &SplitResult{Passport: &Passport{
		PrincipalID: req.New, Tenant: req.Tenant, SponsorID: req.Source, Category: src.Category,
		Tier: TierUnverified, IssuedAt: now, ForkedFrom: req.Source,
	}}
	var copies []*Fact
	for _, c := range chains {
		f := c.current()
		if f == nil {
			continue
		}
		g := *f
		g.ID, g.Owner, g.Version = NewFactID(), req.New, 1
		g.Supersedes, g.Retires, g.SupersededBy = "", nil, ""
		copies = append(copies, &g)
		res.Inherited = append(res.Inherited, InheritedFact{FactID: g.ID, FromFactID: f.ID, Entity: f.Entity, Key: f.Key})
		g.Origins = append(slices.Clone(f.Origins), FactOrigin{Op: OriginSplit, Passport: req.Source, FactID: f.ID, Version: f.Version})
	}
	id, err := receipt(res)
	if err != nil {
		return nil, err
	}
	res.Passport.ForkReceipt = id
	if err := PutPassport(tx, res.Passport); err != nil {
		return nil, err
	}
	if err := putLineage(tx, req.Tenant, req.Source, LineageLink{Kind: LinkSplitInto, Passport: req.New, Receipt: id, At: now}); err != nil {
		return nil, err
	}
	for _, g := range copies {
		g.Origins[len(g.Origins)-1].Receipt = id
		stored := g.StoredEntity()
		if err := writeFact(tx, g); err != nil {
			return nil, err
		}
		if err := tx.Put(bucketEntity, indexKey(g.Tenant, stored, g.Key, version(g.Version)), entityValue(g.ID)); err != nil {
			return nil, err
		}
		if err := putKeyEntry(tx, g.Tenant, g.Key, stored); err != nil {
			return nil, err
		}
		if err := indexLive(tx, g, true); err != nil {
			return nil, err
		}
		if err := addActive(tx, g.Tenant, stored, 1); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// ---- merge ----

// MergeRequest asks [MergePassports] to merge the passport Source of
// Tenant into Target under the conflict policy Policy.
type MergeRequest struct {
	Tenant, Source, Target string
	Policy                 string // one of ConflictPolicies
	Now                    time.Time
	// MaxSessionID bounds the ids of renamed sessions, in bytes; 0 means
	// no bound. A rename that would pass it shortens the original id.
	MaxSessionID int
}

// MergeConflict is one (entity, key) whose chains both had a current fact,
// with different values.
type MergeConflict struct {
	Entity       string `json:"entity" cbor:"entity"` // logical entity
	Key          string `json:"key" cbor:"key"`
	SourceFactID string `json:"source_fact_id" cbor:"source_fact_id"`
	TargetFactID string `json:"target_fact_id" cbor:"target_fact_id"`
	// Resolution is the policy that resolved it (prefer_source or
	// prefer_target), and ChosenFactID the fact that stayed current.
	Resolution   string `json:"resolution" cbor:"resolution"`
	ChosenFactID string `json:"chosen_fact_id" cbor:"chosen_fact_id"`
}

// MovedFact is one fact version a merge moved.
type MovedFact struct {
	FactID      string `json:"fact_id" cbor:"fact_id"`
	Entity      string `json:"entity" cbor:"entity"` // logical entity
	Key         string `json:"key" cbor:"key"`
	FromVersion uint32 `json:"from_version" cbor:"from_version"`
	ToVersion   uint32 `json:"to_version" cbor:"to_version"`
	Forgotten   bool   `json:"forgotten,omitempty" cbor:"forgotten,omitempty"` // a forgotten fact's tombstone
}

// MovedSession is one session a merge moved: its id in the source's space
// and in the target's.
type MovedSession struct {
	From string `json:"from" cbor:"from"`
	To   string `json:"to" cbor:"to"`
}

// MergeResult is what a merge moved, each list in index order.
type MergeResult struct {
	Conflicts  []MergeConflict
	Duplicates int // chains whose current facts had equal values: the target's stayed current
	Chains     int // (entity, key) chains moved
	Facts      []MovedFact
	Sessions   []MovedSession
	Pins       []string // fact ids the target now pins
	Artefacts  []string // artefact ids
}

// MergeConflictError refuses a merge under ErrorOnConflict: it lists every
// conflict, none resolved (Resolution and ChosenFactID empty).
type MergeConflictError struct {
	Conflicts []MergeConflict
}

// Error names the first conflict and counts the others.
func (e *MergeConflictError) Error() string {
	c := e.Conflicts[0]
	msg := fmt.Sprintf("conflict on (entity %q, key %q): both passports hold a current value", c.Entity, c.Key)
	if n := len(e.Conflicts); n > 1 {
		msg += fmt.Sprintf(", and on %d more (entity, key) pairs", n-1)
	}
	return msg
}

// chainMove is the plan of one chain of a merge.
type chainMove struct {
	*privateChain
	to         string // the target's stored entity
	offset     uint32 // added to each version
	src, tgt   *Fact  // the chains' current facts
	keepSource bool   // src stays current, tgt is retired
}

// MergePassports merges req.Source into req.Target (see the rules above).
// Both must be live passports of the tenant and differ; the policy must be
// one of [ConflictPolicies]. Under ErrorOnConflict a conflict is a
// [*MergeConflictError] and nothing is written.
//
// receipt is called with the merge planned and nothing yet written, to
// mint the merge's receipt in tx; its id is recorded on the retired
// source, in the target's lineage and in every moved fact's and session's
// origin.
func MergePassports(tx Tx, req MergeRequest, receipt func(*MergeResult) (string, error)) (*MergeResult, error) {
	now := req.Now.UTC()
	if !slices.Contains(ConflictPolicies, req.Policy) {
		return nil, fmt.Errorf("store: merge: unknown conflict policy %q", req.Policy)
	}
	if req.Source == req.Target {
		return nil, errors.New("store: merge: a passport cannot be merged into itself")
	}
	src, err := livePassport(tx, req.Tenant, req.Source)
	if err != nil {
		return nil, err
	}
	if _, err := livePassport(tx, req.Tenant, req.Target); err != nil {
		return nil, err
	}
	res := &MergeResult{}

	moves, err := planFactMoves(tx, req, res)
	if err != nil {
		return nil, err
	}
	sessions, artefacts, err := planOwnedMoves(tx, req, now, res)
	if err != nil {
		return nil, err
	}
	id, err := receipt(res)
	if err != nil {
		return nil, err
	}
	if err := applyMerge(tx, req, id, now, src, res, moves, sessions, artefacts); err != nil {
		return nil, err
	}
	return res, nil
}

// planFactMoves plans the move of each of the source's private chains to
// the target, renumbered past the target's versions of the same (entity,
// key), and adds the chains, facts, duplicates and resolved conflicts to
// res. Under ErrorOnConflict a conflict is a [*MergeConflictError]. It
// writes nothing.
func planFactMoves(tx Tx, req MergeRequest, res *MergeResult) ([]*chainMove, error) {
	chains, err := privateChains(tx, req.Tenant, req.Source)
	if err != nil {
		return nil, err
	}
	moves := make([]*chainMove, 0, len(chains))
	var unresolved []MergeConflict
	for _, c := range chains {
		m := &chainMove{privateChain: c, to: PrivateEntity(req.Target, c.entity), src: c.current()}
		var top uint32
		err := tx.Scan(bucketEntity, indexKey(req.Tenant, m.to, c.key, ""), false, func(k, v []byte) error {
			top = max(top, uint32FromKey(k))
			f, err := entryFact(tx, v)
			if err != nil {
				return SkipCorrupt(tx, err)
			}
			if f.Current() && f.Private && f.Owner == req.Target {
				m.tgt = f
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if last := c.facts[len(c.facts)-1].Version; uint64(top)+uint64(last) > uint64(^uint32(0)) {
			return nil, fmt.Errorf("store: merge: the chain (%q, %q) would pass the highest version", c.entity, c.key)
		}
		m.offset = top
		if m.src != nil && m.tgt != nil {
			if m.src.Value == m.tgt.Value {
				res.Duplicates++
			} else {
				conflict := MergeConflict{Entity: c.entity, Key: c.key, SourceFactID: m.src.ID, TargetFactID: m.tgt.ID}
				switch req.Policy {
				case ErrorOnConflict:
					unresolved = append(unresolved, conflict)
				case PreferSource:
					m.keepSource = true
					conflict.Resolution, conflict.ChosenFactID = PreferSource, m.src.ID
					res.Conflicts = append(res.Conflicts, conflict)
				default:
					conflict.Resolution, conflict.ChosenFactID = PreferTarget, m.tgt.ID
					res.Conflicts = append(res.Conflicts, conflict)
				}
			}
		}
		moves = append(moves, m)
		res.Chains++
		for _, f := range c.facts {
			res.Facts = append(res.Facts, MovedFact{FactID: f.ID, Entity: c.entity, Key: c.key,
				FromVersion: f.Version, ToVersion: f.Version + m.offset, Forgotten: IsForgotten(f)})
		}
	}
	if len(unresolved) > 0 {
		return nil, &MergeConflictError{Conflicts: unresolved}
	}
	return moves, nil
}

// planOwnedMoves lists in res the sessions (with the ids they take under
// the target), pins and artefacts of the source that move to the target,
// and returns the sessions and artefacts. It writes nothing.
func planOwnedMoves(tx Tx, req MergeRequest, now time.Time, res *MergeResult) ([]*Session, []*Artefact, error) {
	sessions, err := ownedSessions(tx, req.Tenant, req.Source, now)
	if err != nil {
		return nil, nil, err
	}
	assigned := make(map[string]bool, len(sessions))
	for _, s := range sessions {
		to, err := mergedSessionID(tx, req, s.ID, now, assigned)
		if err != nil {
			return nil, nil, err
		}
		assigned[to] = true
		res.Sessions = append(res.Sessions, MovedSession{From: s.ID, To: to})
	}
	err = Pinned(tx, Scope{Tenant: req.Tenant, Agent: req.Source}, func(id string) error {
		res.Pins = append(res.Pins, id)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	artefacts, err := ownedArtefacts(tx, req.Tenant, req.Source, now)
	if err != nil {
		return nil, nil, err
	}
	for _, a := range artefacts {
		res.Artefacts = append(res.Artefacts, a.ID)
	}
	return sessions, artefacts, nil
}

// applyMerge writes the merge planned in res, moves, sessions and
// artefacts under the receipt id: the chains, sessions, pins and artefacts
// move to the target, the source is retired into it, and the target's
// lineage records the merge.
func applyMerge(tx Tx, req MergeRequest, id string, now time.Time, src *Passport, res *MergeResult, moves []*chainMove, sessions []*Session, artefacts []*Artefact) error {
	for _, m := range moves {
		if err := m.apply(tx, req, id, now); err != nil {
			return err
		}
	}
	for i, s := range sessions {
		if err := moveSession(tx, req, s, res.Sessions[i].To, id, now); err != nil {
			return err
		}
	}
	for _, fid := range res.Pins {
		if err := SetPin(tx, Scope{Tenant: req.Tenant, Agent: req.Target}, fid, true); err != nil {
			return err
		}
		if err := SetPin(tx, Scope{Tenant: req.Tenant, Agent: req.Source}, fid, false); err != nil {
			return err
		}
	}
	for _, a := range artefacts {
		if err := moveArtefact(tx, a, req.Target, now); err != nil {
			return err
		}
	}
	src.RetiredAt, src.RetiredInto, src.RetireReceipt = &now, req.Target, id
	if err := PutPassport(tx, src); err != nil {
		return err
	}
	return putLineage(tx, req.Tenant, req.Target, LineageLink{Kind: LinkMergedFrom, Passport: req.Source, Receipt: id, At: now})
}

// uint32FromKey is the version at the end of an entity-index key.
func uint32FromKey(k []byte) uint32 {
	if len(k) < 4 {
		return 0
	}
	b := k[len(k)-4:]
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// apply moves the chain into the target's private space.
func (m *chainMove) apply(tx Tx, req MergeRequest, receiptID string, now time.Time) error {
	tenant := req.Tenant
	for _, f := range m.facts {
		forgotten := IsForgotten(f)
		if err := tx.Delete(bucketEntity, indexKey(tenant, m.stored, m.key, version(f.Version))); err != nil {
			return err
		}
		if !forgotten && !f.Deleted {
			if err := indexLive(tx, f, false); err != nil { // under the source's rank partition
				return err
			}
		}
		if !forgotten && f.Current() {
			if err := addActive(tx, tenant, m.stored, -1); err != nil {
				return err
			}
		}
		origin := FactOrigin{Op: OriginMerge, Receipt: receiptID, Passport: req.Source, Version: f.Version}
		f.Version += m.offset
		f.Origins = append(f.Origins, origin)
		if !forgotten {
			f.Owner = req.Target
		}
		if f == m.src && m.tgt != nil && !m.keepSource {
			f.SupersededBy = m.tgt.ID
			if f.ValidTo == nil {
				f.ValidTo = &now
			}
		}
		if err := writeFact(tx, f); err != nil {
			return err
		}
		if err := tx.Put(bucketEntity, indexKey(tenant, m.to, m.key, version(f.Version)), entityValue(f.ID)); err != nil {
			return err
		}
		if !forgotten && !f.Deleted {
			if err := indexLive(tx, f, true); err != nil {
				return err
			}
		}
		if !forgotten && f.Current() {
			if err := addActive(tx, tenant, m.to, 1); err != nil {
				return err
			}
		}
		if forgotten {
			if err := moveForgottenOriginal(tx, f, req.Target, m.offset, origin); err != nil {
				return err
			}
		}
	}
	if m.keepSource && m.tgt != nil {
		if err := retire(tx, m.tgt, m.src.ID, now); err != nil {
			return err
		}
	}
	if err := tx.Delete(bucketKey, indexKey(tenant, m.key, m.stored)); err != nil {
		return err
	}
	return putKeyEntry(tx, tenant, m.key, m.to)
}

// moveForgottenOriginal updates the saved original of the forgotten fact
// whose tombstone is tomb, if its forget is still restorable, so that a
// restore puts it back in the target's chain at its new version.
func moveForgottenOriginal(tx Tx, tomb *Fact, target string, offset uint32, origin FactOrigin) error {
	forget := tomb.SourceReceipt
	v, err := tx.Get(bucketForgetFacts, forgetFactKey(forget, tomb.ID))
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	ff := new(ForgottenFact)
	if err := factDec.Unmarshal(v, ff); err != nil {
		return &CorruptRecordError{Bucket: bucketForgetFacts, Key: forgetFactKey(forget, tomb.ID), ID: tomb.ID, Err: err}
	}
	if ff.Original == nil {
		return nil // restored or purged: nothing would come back
	}
	f := new(Fact)
	if err := decodeFact(ff.Original, ff.ID, f); err != nil {
		return &CorruptRecordError{Bucket: bucketForgetFacts, Key: forgetFactKey(forget, tomb.ID), ID: tomb.ID, Err: err}
	}
	f.Owner, f.Version = target, f.Version+offset
	f.Origins = append(f.Origins, origin)
	if ff.Original, err = encodeRecord("fact "+f.ID, f); err != nil {
		return err
	}
	return writeForgottenFact(tx, forget, ff)
}

// ownedSessions returns owner's live sessions in tenant, by id.
func ownedSessions(tx Tx, tenant, owner string, now time.Time) ([]*Session, error) {
	var out []*Session
	err := tx.Scan(bucketMemSessions, append(indexKey(tenant, owner), 0), false, func(k, v []byte) error {
		s := new(Session)
		if err := json.Unmarshal(v, s); err != nil {
			return fmt.Errorf("store: session %q: %w", k, err)
		}
		if !s.Expired(now) {
			out = append(out, s)
		}
		return nil
	})
	return out, err
}

// mergedSessionID is the id the source's session id takes in the target's
// space: id itself, unless the target holds a live session of that id or
// another moved session took it; then id@source, id@source~2, ...
func mergedSessionID(tx Tx, req MergeRequest, id string, now time.Time, assigned map[string]bool) (string, error) {
	free := func(name string) (bool, error) {
		if assigned[name] {
			return false, nil
		}
		s, err := getSessionRaw(tx, req.Tenant, req.Target, name)
		if errors.Is(err, ErrNotFound) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return s.Expired(now), nil
	}
	for n := 1; ; n++ {
		name := id
		if n > 1 {
			suffix := "@" + req.Source
			if n > 2 {
				suffix += "~" + strconv.Itoa(n-1)
			}
			base := id
			if req.MaxSessionID > 0 && len(base)+len(suffix) > req.MaxSessionID {
				base = codec.CutUTF8(base, max(req.MaxSessionID-len(suffix), 0))
			}
			name = base + suffix
		}
		ok, err := free(name)
		if err != nil || ok {
			return name, err
		}
	}
}

// moveSession moves the source's session s to the target's space as the
// read-only session to.
func moveSession(tx Tx, req MergeRequest, s *Session, to, receiptID string, now time.Time) error {
	if err := removeSession(tx, s); err != nil {
		return err
	}
	if old, err := getSessionRaw(tx, req.Tenant, req.Target, to); err == nil {
		if err := removeSession(tx, old); err != nil { // expired: mergedSessionID took only free ids
			return err
		}
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	moved := *s
	moved.ID, moved.Owner, moved.ReadOnly = to, req.Target, true
	moved.Origins = append(slices.Clone(s.Origins), SessionOrigin{Passport: req.Source, SessionID: s.ID, Receipt: receiptID})
	return PutSession(tx, &moved)
}

// ownedArtefacts returns owner's live artefacts in tenant, by id.
func ownedArtefacts(tx Tx, tenant, owner string, now time.Time) ([]*Artefact, error) {
	var out []*Artefact
	err := tx.Scan(bucketArtefacts, append(indexKey(tenant, owner), 0), false, func(k, v []byte) error {
		a := new(Artefact)
		if err := json.Unmarshal(v, a); err != nil {
			return fmt.Errorf("store: artefact %q: %w", k, err)
		}
		if !a.Expired(now) {
			out = append(out, a)
		}
		return nil
	})
	return out, err
}

// moveArtefact gives the artefact a to owner. When owner already holds a
// live copy (the same bytes, since ids are content hashes), that copy
// stays, with the later of the two deadlines (none if either has none).
func moveArtefact(tx Tx, a *Artefact, owner string, now time.Time) error {
	content, err := tx.Get(bucketArtefactContent, artefactKey(a.Tenant, a.Owner, a.ID))
	if err != nil {
		return err
	}
	content = bytes.Clone(content)
	if err := DeleteArtefact(tx, a); err != nil {
		return err
	}
	kept, err := getArtefactRaw(tx, a.Tenant, owner, a.ID)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return err
	case kept.Expired(now):
		if err := DeleteArtefact(tx, kept); err != nil {
			return err
		}
	default:
		if kept.ExpiresAt == nil || a.ExpiresAt != nil && !a.ExpiresAt.After(*kept.ExpiresAt) {
			return nil // kept lives as long
		}
		if err := tx.Delete(bucketArtefactExpiry, artefactExpiryKey(*kept.ExpiresAt, artefactKey(a.Tenant, owner, a.ID))); err != nil {
			return err
		}
		kept.ExpiresAt = a.ExpiresAt
		return putArtefact(tx, kept, nil)
	}
	moved := *a
	moved.Owner = owner
	return putArtefact(tx, &moved, content)
}

// putArtefact writes the record of a and its index entries, and content
// unless nil.
func putArtefact(tx Tx, a *Artefact, content []byte) error {
	pk := artefactKey(a.Tenant, a.Owner, a.ID)
	if content != nil {
		if err := tx.Put(bucketArtefactContent, pk, content); err != nil {
			return err
		}
		if err := tx.Put(bucketArtefactByTime, artefactTimeKey(a), pk); err != nil {
			return err
		}
		if err := tx.Put(bucketArtefactHolders, indexKey(a.Tenant, a.ID, a.Owner), pk); err != nil {
			return err
		}
	}
	if a.ExpiresAt != nil {
		if err := tx.Put(bucketArtefactExpiry, artefactExpiryKey(*a.ExpiresAt, pk), pk); err != nil {
			return err
		}
	}
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return tx.Put(bucketArtefacts, pk, b)
}

// ---- devices ----

// MaxDevicesPerPassport is the most devices one passport may have linked.
const MaxDevicesPerPassport = 64

// DeviceLink is a device bound to a passport, by the fingerprint of its
// attestation (the attestation itself is never stored), with the
// capabilities it is granted.
type DeviceLink struct {
	Tenant       string    `json:"tenant_id"`
	Passport     string    `json:"passport_id"`
	Fingerprint  string    `json:"device_fingerprint"`
	Capabilities []string  `json:"capabilities_subset"`
	LinkedAt     time.Time `json:"linked_at"`
	Receipt      string    `json:"receipt_id"`
}

func deviceKey(tenant, passport, fingerprint string) []byte {
	return append(append(indexKey(tenant, passport), 0), fingerprint...)
}

// LinkDevice binds the device fingerprint to the live passport of tenant
// with the capabilities caps. A device is bound to one passport of a
// tenant: one bound to another is an [*IdentityError] (ErrDeviceLinked),
// as is a new device past [MaxDevicesPerPassport]. Linking a device the
// passport has linked already replaces its capabilities; the earlier link
// is returned as prev.
//
// receipt is called with nothing yet written, and the earlier link (nil
// if none), to mint the link's receipt in tx.
func LinkDevice(tx Tx, tenant, passport, fingerprint string, caps []string, now time.Time,
	receipt func(prev *DeviceLink) (string, error)) (link, prev *DeviceLink, err error) {
	if _, err := livePassport(tx, tenant, passport); err != nil {
		return nil, nil, err
	}
	owner, err := tx.Get(bucketDeviceOwner, indexKey(tenant, fingerprint))
	switch {
	case errors.Is(err, ErrNotFound):
		n := 0
		err := tx.Scan(bucketDevices, append(indexKey(tenant, passport), 0), false, func(_, _ []byte) error {
			n++
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		if n >= MaxDevicesPerPassport {
			return nil, nil, identityErr(ErrTooManyDevices, "passport %s already has %d linked devices, the most it may have",
				passport, MaxDevicesPerPassport)
		}
	case err != nil:
		return nil, nil, err
	case string(owner) != passport:
		return nil, nil, identityErr(ErrDeviceLinked, "device %s is linked to passport %s; a device belongs to one passport", fingerprint, owner)
	default:
		v, err := tx.Get(bucketDevices, deviceKey(tenant, passport, fingerprint))
		if err != nil {
			return nil, nil, err
		}
		prev = new(DeviceLink)
		if err := json.Unmarshal(v, prev); err != nil {
			return nil, nil, fmt.Errorf("store: device link %s: %w", fingerprint, err)
		}
	}
	id, err := receipt(prev)
	if err != nil {
		return nil, nil, err
	}
	link = &DeviceLink{Tenant: tenant, Passport: passport, Fingerprint: fingerprint,
		Capabilities: slices.Clone(caps), LinkedAt: now.UTC(), Receipt: id}
	b, err := json.Marshal(link)
	if err != nil {
		return nil, nil, err
	}
	if err := tx.Put(bucketDevices, deviceKey(tenant, passport, fingerprint), b); err != nil {
		return nil, nil, err
	}
	if err := tx.Put(bucketDeviceOwner, indexKey(tenant, fingerprint), []byte(passport)); err != nil {
		return nil, nil, err
	}
	return link, prev, nil
}

// DeviceLinks returns the devices linked to passport in tenant, by
// fingerprint.
func DeviceLinks(tx Tx, tenant, passport string) ([]*DeviceLink, error) {
	var out []*DeviceLink
	err := tx.Scan(bucketDevices, append(indexKey(tenant, passport), 0), false, func(_, v []byte) error {
		l := new(DeviceLink)
		if err := json.Unmarshal(v, l); err != nil {
			return fmt.Errorf("store: device link of %s: %w", passport, err)
		}
		out = append(out, l)
		return nil
	})
	return out, err
}
