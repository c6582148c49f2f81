package store

import "errors"

// Scope is who reads or writes the store: a tenant, and the authenticated
// agent acting in it ("" for an anonymous caller).
//
// Visibility is decided here, once, for every tool and every backend:
// within its tenant a scope sees the shared records and its own private
// ones; an anonymous scope sees only the shared ones; no scope ever sees
// another tenant's records. Entities starting with [ReservedPrefix] belong
// to crux itself (its bootstrap knowledge, pins, decisions, audits...):
// the client-facing memory tools neither show nor change them, which
// [Scope.SeesClientFact] and [VisibleFact] add to [Scope.Sees].
type Scope struct {
	Tenant string
	Agent  string // the authenticated agent; "" when anonymous
}

// Sees reports whether s may see f: f is of s's tenant, and shared or s's
// own private fact.
func (s Scope) Sees(f *Fact) bool { return f.Tenant == s.Tenant && f.VisibleTo(s.Agent) }

// SeesClientFact reports whether s sees f and f is a client's fact, not
// one of crux's own reserved entities.
func (s Scope) SeesClientFact(f *Fact) bool { return s.Sees(f) && !IsReserved(f.Entity) }

// storedNames are the stored names under which s may find facts of the
// logical entity: the shared one, and s's private one when it has an
// agent.
func (s Scope) storedNames(entity string) []string {
	if s.Agent == "" {
		return []string{entity}
	}
	return []string{entity, PrivateEntity(s.Agent, entity)}
}

// ErrReserved is returned by [VisibleFact] for a fact of a reserved entity.
var ErrReserved = errors.New("store: reserved entity")

// VisibleFact reads fact id as s sees it. It returns [ErrNotFound] when
// there is no such fact or s does not see it (so another agent's private
// fact is indistinguishable from none), and the fact together with
// [ErrReserved] when it belongs to a reserved entity.
func VisibleFact(tx Tx, s Scope, id string) (*Fact, error) {
	f, err := GetFact(tx, id)
	switch {
	case err != nil:
		return nil, err
	case !s.Sees(f):
		return nil, ErrNotFound
	case IsReserved(f.Entity):
		return f, ErrReserved
	}
	return f, nil
}

// Public reports whether f is a shared client fact: one every scope of its
// tenant sees, anonymous ones included, and not one of crux's reserved
// entities. Audit envelopes and handoff packages carry only such facts.
func Public(f *Fact) bool { return (Scope{Tenant: f.Tenant}).SeesClientFact(f) }
