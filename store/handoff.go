package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// bucketHandoffs holds one record per handoff package created by
// create_handoff: tenant, handoff id → JSON Handoff.
const bucketHandoffs = "handoffs"

// Handoff records a handoff package so that accepting it survives a restart
// and happens at most once.
type Handoff struct {
	ID          string    `json:"handoff_id"`
	Tenant      string    `json:"tenant_id"`
	From        string    `json:"from_agent,omitempty"`
	Target      string    `json:"target_agent,omitempty"`
	ContentHash string    `json:"content_hash"`
	CreatedAt   time.Time `json:"created_at"`
	// AcceptedBy and AcceptedAt are set once the package is accepted;
	// AcceptedBy is "" for an anonymous acceptor, so Accepted says whether
	// it was.
	Accepted   bool       `json:"accepted,omitempty"`
	AcceptedBy string     `json:"accepted_by,omitempty"`
	AcceptedAt *time.Time `json:"accepted_at,omitempty"`
}

// PutHandoff writes h, replacing any record with the same tenant and id.
func PutHandoff(tx Tx, h *Handoff) error {
	if h.ID == "" {
		return ErrEmptyKey
	}
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return tx.Put(bucketHandoffs, indexKey(h.Tenant, h.ID), b)
}

// GetHandoff reads handoff id of tenant, or ErrNotFound.
func GetHandoff(tx Tx, tenant, id string) (*Handoff, error) {
	if id == "" {
		return nil, ErrNotFound
	}
	v, err := tx.Get(bucketHandoffs, indexKey(tenant, id))
	if err != nil {
		return nil, err
	}
	h := new(Handoff)
	if err := json.Unmarshal(v, h); err != nil {
		return nil, fmt.Errorf("store: handoff %s: %w", id, err)
	}
	return h, nil
}

// Handoffs calls fn with each handoff record of tenant, in id order.
// fn returning ErrStop ends the walk without error; any other error ends
// it and is returned.
func Handoffs(tx Tx, tenant string, fn func(*Handoff) error) error {
	err := tx.Scan(bucketHandoffs, indexKey(tenant, ""), false, func(k, v []byte) error {
		h := new(Handoff)
		if err := json.Unmarshal(v, h); err != nil {
			return fmt.Errorf("store: handoff %q: %w", k, err)
		}
		return fn(h)
	})
	if errors.Is(err, ErrStop) {
		return nil
	}
	return err
}
