package store

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"

	"lukechampine.com/blake3"
)

// Contradictions and consolidation.
//
// A write to (entity, key) supersedes the current fact of its scope (the
// shared pool, or one agent's private facts), so a scope normally holds at
// most one current fact per (entity, key). Two current facts of one logical
// (entity, key) therefore meet where scopes meet: the shared fact and an
// agent's own private fact. A chain can also hold two current facts when a
// fact comes back outside PutFact (a restore, an import); [Contradictions]
// finds those too, and [Consolidate] refuses to retire one it was not told
// to.

// bucketConsolidations records the consolidation ids in use:
// tenant, consolidation id → canonical fact id.
const bucketConsolidations = "consolidations"

// Polarity classes of a fact value.
const (
	PolarityPositive = "positive"
	PolarityNegative = "negative"
)

// Polarity returns the deterministic polarity class of a fact value:
// PolarityPositive for true, yes, y, on, enabled, enable, active, complete,
// completed, passed, pass, approved, approve, present; PolarityNegative for
// false, no, n, off, disabled, disable, inactive, blocked, failed, fail,
// rejected, reject, absent; "" for anything else. The value is compared
// whole, after trimming white space and, at both ends, every character that
// is not a letter, a digit or '_', and ASCII lowercasing ("Enabled." is
// positive; "is enabled" has no class).
func Polarity(value string) string {
	v := strings.TrimFunc(value, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_'
	})
	switch strings.ToLower(v) {
	case "true", "yes", "y", "on", "enabled", "enable", "active", "complete", "completed",
		"passed", "pass", "approved", "approve", "present":
		return PolarityPositive
	case "false", "no", "n", "off", "disabled", "disable", "inactive", "blocked", "failed",
		"fail", "rejected", "reject", "absent":
		return PolarityNegative
	}
	return ""
}

// DefaultContradictionScan is the number of facts [Contradictions] reads
// at most when ContradictionQuery.MaxFacts is zero.
const DefaultContradictionScan = 10000

// ContradictionQuery says which facts [Contradictions] compares. At most one
// of Entity and EntityPrefix may be set.
type ContradictionQuery struct {
	Scope // the caller

	// Which logical entities are examined: Entity alone; the entities
	// starting with EntityPrefix; the entities holding a fact under Key;
	// with none of the three, the entities where Agent holds a current
	// private fact (none for an anonymous caller). Each is examined in the
	// shared pool and in Agent's private scope; Key, when set, narrows the
	// examination to that key. Reserved entities are never examined.
	Entity       string
	EntityPrefix string
	Key          string

	// Limit caps the candidates returned; 0 means no cap.
	Limit int
	// MaxFacts caps the facts read; 0 means DefaultContradictionScan.
	MaxFacts int
}

// Contradiction is one (entity, key) whose current facts, as the caller
// sees them, carry opposite polarity classes.
type Contradiction struct {
	Entity string // logical entity
	Key    string
	// PolarityA is the class of the oldest fact, PolarityB the other one.
	PolarityA, PolarityB string
	// Facts are the current facts of (Entity, Key) visible to the caller
	// that have a polarity class, oldest first. Facts without a class are
	// left out.
	Facts []*Fact
}

// ContradictionResult is the outcome of [Contradictions].
type ContradictionResult struct {
	Candidates []Contradiction
	// Entities is the number of logical entities examined, FactsRead the
	// number of facts read.
	Entities  int
	FactsRead int
	// Truncated reports that the scan stopped at MaxFacts: entities after
	// the last one examined (in byte order) were not compared.
	Truncated bool
	// LimitReached reports that the scan stopped at Limit candidates; more
	// may exist.
	LimitReached bool
}

// errScanFull stops a contradiction scan at its fact budget.
var errScanFull = errors.New("store: contradiction scan budget reached")

// Contradictions finds the (entity, key) pairs whose current facts, among
// those q.Agent can see (the shared pool and its own private facts), carry
// opposite polarity classes (see [Polarity]). It only reads. The work is
// bounded: the entities to examine come from an index (see
// ContradictionQuery), they are examined in byte order, and the scan stops
// after MaxFacts facts (Truncated) or Limit candidates (LimitReached).
func Contradictions(tx Tx, q ContradictionQuery) (ContradictionResult, error) {
	var res ContradictionResult
	if q.Entity != "" && q.EntityPrefix != "" {
		return res, errors.New("store: a contradiction query takes an entity or an entity prefix, not both")
	}
	budget := q.MaxFacts
	if budget <= 0 {
		budget = DefaultContradictionScan
	}
	entities, full, err := contradictionEntities(tx, q, budget)
	if err != nil {
		return res, err
	}
	res.Truncated = full
	for _, entity := range entities {
		if res.LimitReached {
			break
		}
		byKey := make(map[string][]*Fact)
		stored := q.storedNames(entity)
		for _, s := range stored {
			prefix := indexKey(q.Tenant, s, q.Key)
			if q.Key == "" {
				prefix = indexKey(q.Tenant, s, "")
			} else {
				prefix = append(prefix, 0)
			}
			err := tx.Scan(bucketEntity, prefix, false, func(_, v []byte) error {
				if res.FactsRead >= budget {
					return errScanFull
				}
				res.FactsRead++
				f, err := entryFact(tx, v)
				if err != nil {
					return SkipCorrupt(tx, err)
				}
				if q.Sees(f) && f.Current() && Polarity(f.Value) != "" {
					byKey[f.Key] = append(byKey[f.Key], f)
				}
				return nil
			})
			if errors.Is(err, errScanFull) {
				res.Truncated = true
				break
			}
			if err != nil {
				return res, err
			}
		}
		if res.Truncated {
			break // a half-read entity is not compared
		}
		res.Entities++
		keys := make([]string, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if c, ok := contradiction(entity, k, byKey[k]); ok {
				if q.Limit > 0 && len(res.Candidates) >= q.Limit {
					res.LimitReached = true
					break
				}
				res.Candidates = append(res.Candidates, c)
			}
		}
	}
	return res, nil
}

// contradiction reports whether facts (current, of one (entity, key), each
// with a polarity class) hold both classes.
func contradiction(entity, key string, facts []*Fact) (Contradiction, bool) {
	if len(facts) < 2 {
		return Contradiction{}, false
	}
	sort.SliceStable(facts, func(i, j int) bool {
		if !facts[i].StoredAt.Equal(facts[j].StoredAt) {
			return facts[i].StoredAt.Before(facts[j].StoredAt)
		}
		return facts[i].ID < facts[j].ID
	})
	a := Polarity(facts[0].Value)
	for _, f := range facts[1:] {
		if b := Polarity(f.Value); b != a {
			return Contradiction{Entity: entity, Key: key, PolarityA: a, PolarityB: b, Facts: facts}, true
		}
	}
	return Contradiction{}, false
}

// contradictionEntities lists, sorted and without duplicates, the logical
// entities q examines, at most budget of them (full reports a cut list).
func contradictionEntities(tx Tx, q ContradictionQuery, budget int) (out []string, full bool, err error) {
	own := ""
	if q.Agent != "" {
		own = PrivateEntity(q.Agent, "")
	}
	seen := make(map[string]struct{})
	visited := 0
	add := func(name string) error {
		// Every index entry visited counts against the budget, skipped or
		// not, so no walk is longer than it says.
		if visited++; visited > budget {
			return errScanFull
		}
		if IsReserved(name) {
			return nil
		}
		seen[name] = struct{}{}
		return nil
	}
	// activeNames calls add with the logical name of every entity of the
	// tenant holding a current fact whose stored name starts with prefix
	// (strip is removed from it first).
	activeNames := func(prefix, strip string) error {
		p := indexKey(q.Tenant, prefix)
		return tx.Scan(bucketActive, p, false, func(k, _ []byte) error {
			return add(strings.TrimPrefix(string(k[len(q.Tenant)+1:]), strip))
		})
	}
	switch {
	case q.Entity != "":
		err = add(q.Entity)
	case q.EntityPrefix != "":
		err = activeNames(q.EntityPrefix, "")
		if err == nil && own != "" {
			err = activeNames(own+q.EntityPrefix, own)
		}
	case q.Key != "":
		p := append(indexKey(q.Tenant, q.Key), 0)
		err = tx.Scan(bucketKey, p, false, func(k, _ []byte) error {
			_, stored, ok := parseKeyEntry(k, q.Tenant)
			if !ok || !keyEntrySeen(stored, q.Agent) {
				return nil // crux's own, or another agent's private entity
			}
			return add(strings.TrimPrefix(stored, own))
		})
	case own != "":
		err = activeNames(own, own)
	}
	if errors.Is(err, errScanFull) {
		err, full = nil, true
	}
	if err != nil {
		return nil, false, err
	}
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out, full, nil
}

// Consolidation guard reasons: why [Consolidate] refused a target.
const (
	GuardProtected      = "protected"      // listed in ConsolidateRequest.Protected
	GuardPinned         = "pinned"         // pinned by the consolidating agent
	GuardReceiptLinked  = "receipt_linked" // has a source receipt
	GuardPrivate        = "private"        // a private fact
	GuardHighConfidence = "high_confidence"
)

// GuardError reports a consolidation target that a guard protects. Nothing
// was written.
type GuardError struct {
	FactID string
	Reason string // one of the Guard constants
	// Confidence and Floor are set for GuardHighConfidence.
	Confidence, Floor float64
}

// Error says which target is protected and why.
func (e *GuardError) Error() string {
	switch e.Reason {
	case GuardProtected:
		return fmt.Sprintf("target %s is protected: it is listed in protected_fact_ids", e.FactID)
	case GuardPinned:
		return fmt.Sprintf("target %s is pinned", e.FactID)
	case GuardReceiptLinked:
		return fmt.Sprintf("target %s is receipt-linked: it has a source receipt", e.FactID)
	case GuardPrivate:
		return fmt.Sprintf("target %s is a private fact", e.FactID)
	case GuardHighConfidence:
		return fmt.Sprintf("target %s has confidence %g, at or above the protected floor %g", e.FactID, e.Confidence, e.Floor)
	}
	return fmt.Sprintf("target %s is protected (%s)", e.FactID, e.Reason)
}

// Reasons a consolidation target is not one [Consolidate] can work on.
const (
	TargetNotFound   = "not_found"  // no such fact visible to the caller in the tenant
	TargetDeleted    = "deleted"    // soft-deleted
	TargetSuperseded = "superseded" // already retired
	TargetOutside    = "outside"    // not in the consolidation's (entity, key)
	TargetUnlisted   = "unlisted"   // FactID is a current fact of (entity, key) the canonical fact would retire, but not a target
	TargetDuplicate  = "duplicate"  // listed twice
	TargetNone       = "no_targets" // the request has no targets
	TargetBadID      = "invalid_id" // not a usable id
)

// TargetError reports a consolidation target that is not a live fact of
// the consolidation's (entity, key) visible to the caller, or a request
// that names no target. Nothing was written.
type TargetError struct {
	FactID       string
	Reason       string // one of the Target constants
	SupersededBy string // for TargetSuperseded
}

// Error says which target cannot be consolidated and why.
func (e *TargetError) Error() string {
	switch e.Reason {
	case TargetNone:
		return "no target facts"
	case TargetDeleted:
		return fmt.Sprintf("fact %s is deleted", e.FactID)
	case TargetSuperseded:
		return fmt.Sprintf("fact %s is already superseded by %s", e.FactID, e.SupersededBy)
	case TargetOutside:
		return fmt.Sprintf("fact %s is not in the consolidation's (entity, key)", e.FactID)
	case TargetUnlisted:
		return fmt.Sprintf("fact %s is the current fact of (entity, key); the canonical fact supersedes it, so it must be a target", e.FactID)
	case TargetDuplicate:
		return fmt.Sprintf("fact %s is listed more than once", e.FactID)
	case TargetBadID:
		return fmt.Sprintf("%q is not a fact id", e.FactID)
	}
	return fmt.Sprintf("fact %s does not exist or is not visible to the caller", e.FactID)
}

// ConsolidationExistsError reports a consolidation id already used in the
// tenant. Nothing was written.
type ConsolidationExistsError struct {
	ID              string
	CanonicalFactID string // the canonical fact of the earlier consolidation
}

// Error names the consolidation id and its canonical fact.
func (e *ConsolidationExistsError) Error() string {
	return fmt.Sprintf("consolidation %s already exists (canonical fact %s)", e.ID, e.CanonicalFactID)
}

// ConsolidateRequest is what [Consolidate] needs.
type ConsolidateRequest struct {
	Scope // the consolidating agent is required

	ID           string // the consolidation id, unique in the tenant; required
	Entity       string
	Key          string
	Value        string   // the canonical value
	Targets      []string // facts to collapse into the canonical fact; at least one
	Protected    []string // ids the caller protects: naming one as a target is refused
	Confidence   float64  // of the canonical fact
	Floor        float64  // targets with confidence at or above it are refused
	HorizonClass string   // of the canonical fact; "" means DefaultHorizon(Entity)
	Now          time.Time
}

// Consolidation is the outcome of [Consolidate].
type Consolidation struct {
	ID        string
	Canonical *Fact
	// CanonicalHash is "blake3:" and the hex BLAKE3 of the canonical value.
	CanonicalHash string
	// Superseded are the facts the canonical fact retired; Sources are the
	// targets as requested. They hold the same ids: every fact the
	// canonical write retires must be a target.
	Superseded []string
	Sources    []string
}

// CanonicalHash is "blake3:" followed by the lowercase hex BLAKE3-256 of value.
func CanonicalHash(value string) string {
	h := blake3.Sum256([]byte(value))
	return "blake3:" + hex.EncodeToString(h[:])
}

// SourceReceiptPrefix starts the source receipt of a canonical fact:
// "consolidation:" and the consolidation id.
const SourceReceiptPrefix = "consolidation:"

// Consolidate collapses r.Targets into one canonical shared fact of
// (r.Entity, r.Key) with value r.Value: the canonical fact is a new version
// of the pair, stored with PutFact, whose source receipt is
// "consolidation:<id>" and which supersedes every target. History is
// preserved: the targets stay in the version chain, superseded by the
// canonical fact.
//
// Each target, in order, must exist in the tenant and be visible to
// r.Agent, be live (neither deleted nor superseded) and belong to
// (r.Entity, r.Key), else Consolidate returns a *TargetError; an unknown id
// and another agent's private fact are reported alike (TargetNotFound).
// Then the guards refuse, with a *GuardError, a target that is listed in
// r.Protected, pinned by r.Agent (other agents' pins are invisible to it
// and do not count), receipt-linked (it has a source receipt), private, or
// whose confidence is at or above r.Floor. The current shared fact of the
// pair, which the canonical version supersedes, must itself be a target
// (TargetUnlisted), so that no fact is retired without passing the guards.
// An id already used in the tenant is a *ConsolidationExistsError.
//
// Consolidate only writes through tx: on any error the caller must roll
// back (nothing has been written then, except by PutFact errors, which
// the caller's rollback undoes).
func Consolidate(tx Tx, r ConsolidateRequest) (*Consolidation, error) {
	if r.Agent == "" {
		return nil, fmt.Errorf("%w: a consolidation needs an agent", ErrInvalidFact)
	}
	if r.ID == "" || strings.IndexFunc(r.ID, unicode.IsControl) >= 0 {
		return nil, fmt.Errorf("%w: invalid consolidation id %q", ErrInvalidFact, r.ID)
	}
	if len(r.Targets) == 0 {
		return nil, &TargetError{Reason: TargetNone}
	}
	idKey := indexKey(r.Tenant, r.ID)
	if v, err := tx.Get(bucketConsolidations, idKey); err == nil {
		return nil, &ConsolidationExistsError{ID: r.ID, CanonicalFactID: string(v)}
	} else if !errors.Is(err, ErrNotFound) {
		return nil, err
	}

	for i, id := range r.Targets {
		if slices.Contains(r.Targets[:i], id) {
			return nil, &TargetError{FactID: id, Reason: TargetDuplicate}
		}
		if id == "" {
			return nil, &TargetError{FactID: id, Reason: TargetBadID}
		}
		f, err := GetFact(tx, id)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil, &TargetError{FactID: id, Reason: TargetNotFound}
		case err != nil:
			return nil, err
		case !r.Sees(f):
			return nil, &TargetError{FactID: id, Reason: TargetNotFound}
		case f.Deleted:
			return nil, &TargetError{FactID: id, Reason: TargetDeleted}
		case f.SupersededBy != "":
			return nil, &TargetError{FactID: id, Reason: TargetSuperseded, SupersededBy: f.SupersededBy}
		case f.Entity != r.Entity || f.Key != r.Key:
			return nil, &TargetError{FactID: id, Reason: TargetOutside}
		}
		if err := guard(tx, r, f); err != nil {
			return nil, err
		}
	}
	// The canonical version retires the pair's current shared fact (the
	// one PutFact finds first): it must have passed the guards above.
	err := tx.Scan(bucketEntity, indexKey(r.Tenant, r.Entity, r.Key, ""), true, func(_, v []byte) error {
		f, err := entryFact(tx, v)
		if err != nil {
			return SkipCorrupt(tx, err)
		}
		if f.Current() && !f.Private {
			if !slices.Contains(r.Targets, f.ID) {
				return &TargetError{FactID: f.ID, Reason: TargetUnlisted}
			}
			return ErrStop
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	canonical, retired, err := PutFact(tx, NewFact{Scope: r.Scope,
		Entity: r.Entity, Key: r.Key, Value: r.Value,
		SourceReceipt: SourceReceiptPrefix + r.ID, Confidence: r.Confidence,
		HorizonClass: r.HorizonClass, Supersedes: r.Targets, Now: r.Now,
	})
	if err != nil {
		return nil, err
	}
	if err := tx.Put(bucketConsolidations, idKey, []byte(canonical.ID)); err != nil {
		return nil, err
	}
	return &Consolidation{
		ID: r.ID, Canonical: canonical, CanonicalHash: CanonicalHash(r.Value),
		Superseded: retired, Sources: slices.Clone(r.Targets),
	}, nil
}

// guard applies the consolidation guards to the live target f.
func guard(tx Tx, r ConsolidateRequest, f *Fact) error {
	if slices.Contains(r.Protected, f.ID) {
		return &GuardError{FactID: f.ID, Reason: GuardProtected}
	}
	pinned, err := PinnedByAnyone(tx, r.Tenant, f.ID) // a pin protects for every agent, as in forget
	if err != nil {
		return err
	}
	switch {
	case pinned:
		return &GuardError{FactID: f.ID, Reason: GuardPinned}
	case receiptLinked(f.SourceReceipt):
		return &GuardError{FactID: f.ID, Reason: GuardReceiptLinked}
	case f.Private:
		return &GuardError{FactID: f.ID, Reason: GuardPrivate}
	case f.Confidence >= r.Floor:
		return &GuardError{FactID: f.ID, Reason: GuardHighConfidence, Confidence: f.Confidence, Floor: r.Floor}
	}
	return nil
}

// receiptLinked reports whether a source receipt links a fact to evidence
// outside the memory: the marks crux itself leaves on consolidated and
// edited facts do not, so such facts can be consolidated again.
func receiptLinked(source string) bool {
	return source != "" && !strings.HasPrefix(source, SourceReceiptPrefix) && !strings.HasPrefix(source, "memory_edit")
}

// ConsolidationCanonical returns the canonical fact id of consolidation id
// in tenant, or ErrNotFound.
func ConsolidationCanonical(tx Tx, tenant, id string) (string, error) {
	v, err := tx.Get(bucketConsolidations, indexKey(tenant, id))
	if err != nil {
		return "", err
	}
	return string(v), nil
}
