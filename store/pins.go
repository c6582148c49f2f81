package store

import "errors"

// Pins are per agent: an agent's pin never shows to another agent. Both
// buckets hold the same pins, keyed for the two questions asked of them.
const (
	bucketPins       = "pins"         // tenant, agent, fact id → empty
	bucketPinsByFact = "pins.by_fact" // tenant, fact id, agent → empty
)

// SetPin pins (pinned=true) or unpins fact id for agent in tenant. Pinning
// twice, or unpinning what is not pinned, is not an error.
func SetPin(tx Tx, s Scope, id string, pinned bool) error {
	if s.Agent == "" || id == "" {
		return ErrEmptyKey
	}
	a, b := indexKey(s.Tenant, s.Agent, id), indexKey(s.Tenant, id, s.Agent)
	if !pinned {
		if err := tx.Delete(bucketPins, a); err != nil {
			return err
		}
		return tx.Delete(bucketPinsByFact, b)
	}
	if err := tx.Put(bucketPins, a, nil); err != nil {
		return err
	}
	return tx.Put(bucketPinsByFact, b, nil)
}

// IsPinned reports whether agent pinned fact id in tenant.
func IsPinned(tx Tx, s Scope, id string) (bool, error) {
	if s.Agent == "" {
		return false, nil
	}
	_, err := tx.Get(bucketPins, indexKey(s.Tenant, s.Agent, id))
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// PinnedByAnyone reports whether any agent of tenant pinned fact id.
func PinnedByAnyone(tx Tx, tenant, id string) (bool, error) {
	found := false
	err := tx.Scan(bucketPinsByFact, append(indexKey(tenant, id), 0), false, func(_, _ []byte) error {
		found = true
		return ErrStop
	})
	return found, err
}

// Pinned calls fn with the id of every fact agent pinned in tenant.
func Pinned(tx Tx, s Scope, fn func(id string) error) error {
	p := append(indexKey(s.Tenant, s.Agent), 0)
	return tx.Scan(bucketPins, p, false, func(k, _ []byte) error { return fn(string(k[len(p):])) })
}
