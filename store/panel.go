package store

import (
	"errors"
	"fmt"
	"time"
)

// The helpers below serve the memory panel and the freshness tools: bounded
// scans of the facts a caller may see, and changes to a fact's decay
// metadata made in place. A fact's rank key depends only on its confidence
// and storage time, which these changes leave alone, so no index moves.

// FactScan selects the facts [ScanFacts] visits. Zero fields do not filter.
type FactScan struct {
	Scope // the caller

	Entity string // exact logical entity; must not be reserved
	Key    string // exact key

	// IncludeSuperseded also visits facts that a later one retired.
	IncludeSuperseded bool
	// MaxExamined caps the number of facts read; 0 means no cap.
	MaxExamined int
}

// ScanStats says how much of its candidate set a [ScanFacts] call read.
type ScanStats struct {
	Examined int  // facts read, whether or not they matched
	Complete bool // every candidate was read
}

// ScanFacts calls fn with every fact s selects: not deleted, in s.Tenant,
// visible to s.Agent, of a logical entity that is not reserved, current
// unless s.IncludeSuperseded, and matching s.Entity and s.Key when set.
//
// Candidates come from an index, never from the whole store: the entity's
// version chains (the shared chain and the agent's private one) when
// s.Entity is set, the key index when only s.Key is, and otherwise the
// confidence index of the tenant's live facts: the shared pool's, then the
// agent's own private ones, each by stored confidence, highest first, then
// newest first. Other agents' private facts are never read or counted. ScanFacts reads at most
// s.MaxExamined facts and reports whether it read every candidate; fn
// returning [ErrStop] ends the scan early without error (Complete is then
// false).
func ScanFacts(tx Tx, s FactScan, fn func(*Fact) error) (ScanStats, error) {
	if IsReserved(s.Entity) {
		return ScanStats{Complete: true}, nil
	}
	var st ScanStats
	halted := false // the cap or fn ended the scan
	// visit reads the fact that an entry of the entity index names (its
	// value entry), or one of the confidence index (entry nil) names (id).
	visit := func(id string, entry []byte) error {
		if s.MaxExamined > 0 && st.Examined >= s.MaxExamined {
			halted = true
			return ErrStop
		}
		st.Examined++
		var f *Fact
		var err error
		if entry != nil {
			f, err = entryFact(tx, entry)
		} else {
			f, err = indexedFact(tx, bucketRank, id)
		}
		if err != nil {
			return SkipCorrupt(tx, err)
		}
		switch {
		case !s.SeesClientFact(f), f.Deleted,
			!s.IncludeSuperseded && f.SupersededBy != "",
			s.Entity != "" && f.Entity != s.Entity,
			s.Key != "" && f.Key != s.Key:
			return nil
		}
		err = fn(f)
		if errors.Is(err, ErrStop) {
			halted = true
		}
		return err
	}

	var prefixes [][]byte
	switch {
	case s.Entity != "":
		stored := s.storedNames(s.Entity)
		for _, e := range stored {
			p := indexKey(s.Tenant, e, s.Key) // "t\x00entity\x00" matches exactly this entity
			if s.Key != "" {
				p = append(p, 0)
			}
			prefixes = append(prefixes, p)
		}
	case s.Key != "":
		err := scanKeyIndex(tx, s.Tenant, append(indexKey(s.Tenant, s.Key), 0),
			// another agent's private fact, or crux's own: not read, not counted
			func(_, stored string) bool { return !keyEntrySeen(stored, s.Agent) },
			func(v []byte) error { return visit("", v) })
		if err != nil {
			return st, err
		}
		st.Complete = !halted
		return st, nil
	default:
		for _, scope := range rankScopes(s.Agent) {
			// ^confidence, ^stored_at, id
			if err := scanRank(tx, s.Tenant, scope, func(k []byte) error { return visit(string(k[16:]), nil) }); err != nil {
				return st, err
			}
			if halted {
				break
			}
		}
		st.Complete = !halted
		return st, nil
	}
	for _, p := range prefixes {
		err := tx.Scan(bucketEntity, p, false, func(_, v []byte) error { return visit("", v) })
		if err != nil {
			return st, err
		}
		if halted {
			break
		}
	}
	st.Complete = !halted
	return st, nil
}

// Successor follows the superseded_by links from f and returns the last
// fact they reach: the version that retired f, the one that retired that,
// and so on; f itself when nothing retired it. The result may be deleted.
func Successor(tx Tx, f *Fact) (*Fact, error) {
	for range 1 << 16 { // a chain cannot loop; bound the walk all the same
		if f.SupersededBy == "" {
			return f, nil
		}
		next, err := GetFact(tx, f.SupersededBy)
		if err != nil {
			return nil, fmt.Errorf("store: successor of fact %s: %w", f.ID, err)
		}
		f = next
	}
	return nil, fmt.Errorf("store: successor of fact %s: superseded_by links do not end", f.ID)
}

// SetHorizon sets the horizon class of f, a fact read in tx that is not
// deleted, and stores it in place. An unknown class or a deleted fact is an
// [ErrInvalidFact].
func SetHorizon(tx Tx, f *Fact, class string) error {
	if !ValidHorizon(class) {
		return fmt.Errorf("%w: unknown horizon class %q", ErrInvalidFact, class)
	}
	if f.Deleted {
		return fmt.Errorf("%w: fact %s is deleted", ErrInvalidFact, f.ID)
	}
	f.HorizonClass = class
	return writeFact(tx, f)
}

// Reverify sets the reverification time of f, a fact read in tx that is
// not deleted, to at and stores it in place: its decay clock then runs from
// at (see [Fact.Anchor]) while its value, confidence and storage time stay
// as they were. A deleted fact is an [ErrInvalidFact].
func Reverify(tx Tx, f *Fact, at time.Time) error {
	if f.Deleted {
		return fmt.Errorf("%w: fact %s is deleted", ErrInvalidFact, f.ID)
	}
	at = at.UTC()
	f.ReverifiedAt = &at
	return writeFact(tx, f)
}
