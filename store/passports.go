package store

import (
	"encoding/json"
	"fmt"
	"time"
)

const bucketPassports = "passports" // tenant, principal id → JSON Passport

// Passport reputation tiers, by the number of receipts a passport has
// earned, and their ranks.
const (
	TierUnverified  = "unverified"  // rank 0
	TierBasic       = "basic"       // rank 1, 10 receipts
	TierEstablished = "established" // rank 2, 100 receipts
	TierTrusted     = "trusted"     // rank 3, 500 receipts: operator tier
	TierElite       = "elite"       // rank 4, 2000 receipts
)

var tiers = []struct {
	name     string
	receipts uint64
}{{TierUnverified, 0}, {TierBasic, 10}, {TierEstablished, 100}, {TierTrusted, 500}, {TierElite, 2000}}

// TierRank is the rank of a tier (0 for unverified up to 4 for elite), or
// -1 for an unknown tier.
func TierRank(tier string) int {
	for i, t := range tiers {
		if t.name == tier {
			return i
		}
	}
	return -1
}

// TierFor is the tier a passport with n receipts has reached.
func TierFor(n uint64) string {
	tier := TierUnverified
	for _, t := range tiers {
		if n >= t.receipts {
			tier = t.name
		}
	}
	return tier
}

// Passport is an agent's identity record within a tenant.
type Passport struct {
	PrincipalID  string     `json:"principal_id"`
	Tenant       string     `json:"tenant_id"`
	SponsorID    string     `json:"sponsor_id,omitempty"`
	Category     string     `json:"category,omitempty"` // personal, work or public
	Tier         string     `json:"reputation_tier"`
	ReceiptCount uint64     `json:"receipt_count"`
	IssuedAt     time.Time  `json:"issued_at"`
	RevokedAt    *time.Time `json:"revoked_at,omitempty"` // set once, terminal
	RevokedBy    string     `json:"revoked_by,omitempty"`
	RevokeReason string     `json:"revoke_reason,omitempty"`
}

// Revoked reports whether the passport has been revoked.
func (p *Passport) Revoked() bool { return p.RevokedAt != nil }

// GetPassport reads the passport id of tenant, or returns ErrNotFound.
func GetPassport(tx Tx, tenant, id string) (*Passport, error) {
	v, err := tx.Get(bucketPassports, indexKey(tenant, id))
	if err != nil {
		return nil, err
	}
	p := new(Passport)
	if err := json.Unmarshal(v, p); err != nil {
		return nil, fmt.Errorf("store: passport %s: %w", id, err)
	}
	return p, nil
}

// PutPassport writes p, replacing any record with the same tenant and id.
func PutPassport(tx Tx, p *Passport) error {
	if p.PrincipalID == "" {
		return ErrEmptyKey
	}
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return tx.Put(bucketPassports, indexKey(p.Tenant, p.PrincipalID), b)
}

const (
	bucketSessions  = "sessions.bindings" // tenant, session id → JSON SessionBinding
	bucketLastPlans = "sessions.lastplan" // tenant, passport id → the hash of its latest plan
)

// SessionBinding ties a session opened with cuecrux_session to the passport
// that opened it.
type SessionBinding struct {
	SessionID  string    `json:"session_id"`
	Tenant     string    `json:"tenant_id"`
	PassportID string    `json:"passport_id"`
	PlanHash   []byte    `json:"plan_hash"`
	OpenedAt   time.Time `json:"opened_at"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// PutSessionBinding records b, and b.PlanHash as its passport's latest plan.
func PutSessionBinding(tx Tx, b *SessionBinding) error {
	v, err := json.Marshal(b)
	if err != nil {
		return err
	}
	if err := tx.Put(bucketSessions, indexKey(b.Tenant, b.SessionID), v); err != nil {
		return err
	}
	return tx.Put(bucketLastPlans, indexKey(b.Tenant, b.PassportID), b.PlanHash)
}

// GetSessionBinding reads the binding of session id in tenant, or returns
// ErrNotFound.
func GetSessionBinding(tx Tx, tenant, id string) (*SessionBinding, error) {
	if id == "" {
		return nil, ErrNotFound
	}
	v, err := tx.Get(bucketSessions, indexKey(tenant, id))
	if err != nil {
		return nil, err
	}
	b := new(SessionBinding)
	if err := json.Unmarshal(v, b); err != nil {
		return nil, fmt.Errorf("store: session %s: %w", id, err)
	}
	return b, nil
}

// LastPlanHash is the plan hash of the latest session passport opened in
// tenant, or nil.
func LastPlanHash(tx Tx, tenant, passport string) ([]byte, error) {
	v, err := tx.Get(bucketLastPlans, indexKey(tenant, passport))
	if err == ErrNotFound {
		return nil, nil
	}
	return append([]byte(nil), v...), err
}
