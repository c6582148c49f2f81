package store

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"lukechampine.com/blake3"
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
	// ForkedFrom is the passport a split made this one from, and
	// ForkReceipt the split's receipt (see [SplitPassport]).
	ForkedFrom  string `json:"forked_from,omitempty"`
	ForkReceipt string `json:"fork_receipt,omitempty"`
	// RetiredAt is set once, terminal, when a merge retires the passport
	// into RetiredInto, with the merge's receipt (see [MergePassports]).
	RetiredAt     *time.Time `json:"retired_at,omitempty"`
	RetiredInto   string     `json:"retired_into,omitempty"`
	RetireReceipt string     `json:"retire_receipt,omitempty"`
}

// Revoked reports whether the passport has been revoked.
func (p *Passport) Revoked() bool { return p.RevokedAt != nil }

// Retired reports whether a merge has retired the passport.
func (p *Passport) Retired() bool { return p.RetiredAt != nil }

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

// Hash is the passport's identity hash: the lowercase hex of the BLAKE3 of
// its principal id, tenant, sponsor and issue time (RFC 3339, nanoseconds,
// UTC), NUL-separated. It does not change with the tier or a revocation.
func (p *Passport) Hash() string {
	h := blake3.New(32, nil)
	for _, s := range []string{p.PrincipalID, p.Tenant, p.SponsorID, p.IssuedAt.UTC().Format(time.RFC3339Nano)} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

const bucketMintRequests = "passports.mintreq" // tenant, requester → JSON MintRequest

// MintRequest is a passport's request, filed with request_passport_mint,
// that an operator mint it a passport of another category. A passport has
// at most one pending request.
type MintRequest struct {
	RequestID         string    `json:"request_id"`
	Tenant            string    `json:"tenant_id"`
	RequesterID       string    `json:"requester_id"`
	RequestedCategory string    `json:"requested_category"`
	Reason            string    `json:"reason,omitempty"`
	Status            string    `json:"status"` // pending
	RequestedAt       time.Time `json:"requested_at"`
	ReceiptID         string    `json:"receipt_id"`
}

// GetMintRequest reads the request of requester in tenant, or returns
// ErrNotFound.
func GetMintRequest(tx Tx, tenant, requester string) (*MintRequest, error) {
	v, err := tx.Get(bucketMintRequests, indexKey(tenant, requester))
	if err != nil {
		return nil, err
	}
	r := new(MintRequest)
	if err := json.Unmarshal(v, r); err != nil {
		return nil, fmt.Errorf("store: mint request of %s: %w", requester, err)
	}
	return r, nil
}

// PutMintRequest writes r, replacing the requester's earlier request.
func PutMintRequest(tx Tx, r *MintRequest) error {
	if r.RequesterID == "" {
		return ErrEmptyKey
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return tx.Put(bucketMintRequests, indexKey(r.Tenant, r.RequesterID), b)
}
