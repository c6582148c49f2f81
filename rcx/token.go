package rcx

import "slices"

// Wire constants of the token format.
const (
	// SpecVersion is the only spec_version this package accepts.
	SpecVersion = "rcx-ct/1.0"

	// SignatureAlg is the only signature.alg this package accepts.
	SignatureAlg = "ed25519"

	// SignatureSize is the length of signature.sig in bytes.
	SignatureSize = 64

	// HashSize is the length of a token hash in bytes (BLAKE3-256).
	HashSize = 32
)

// Well-known backend ids and capability strings.
const (
	// LocalBackendID is the backend every free-local token carries and the
	// backend a [Call] names when it names none. Decisions routed to it
	// have mode [ModeLocal].
	LocalBackendID = "local"

	// HostedBackendID is the hosted backend's id in CueCrux's rcx-ct/1.0
	// token format; crux runs no such backend. An airgap enterprise token
	// must not list it (issue [IssueBackendNotPermitted]).
	HostedBackendID = "hosted.vaultcrux.com"

	// CustomerBackendPrefix starts the id of a customer-hosted backend;
	// decisions routed to one have mode [ModeCustomerHosted].
	CustomerBackendPrefix = "customer:"

	// FederationReadCapability is the federation read capability, which
	// every free-local token crux mints grants.
	FederationReadCapability = "federation.read"

	// HostedRetrieveCapability is the hosted retrieval capability.
	HostedRetrieveCapability = "vaultcrux.retrieve"

	// TeamConstraintsSyncCapability is the team constraint sync capability.
	TeamConstraintsSyncCapability = "vaultcrux.team.constraints.sync"

	// TeamDecisionsSyncCapability is the team decision sync capability.
	TeamDecisionsSyncCapability = "vaultcrux.team.decisions.sync"

	// EnterpriseBlobMirrorCapability is the enterprise encrypted-blob
	// mirror capability.
	EnterpriseBlobMirrorCapability = "vaultcrux.enterprise.encrypted_blob.mirror"
)

// Tier is a token's commercial tier.
type Tier string

// The tiers.
const (
	// TierFree is the tier of the free-local token.
	TierFree Tier = "free"
	// TierPro is the paid individual tier.
	TierPro Tier = "pro"
	// TierTeam requires a [TeamScope].
	TierTeam Tier = "team"
	// TierEnterprise requires an [EnterpriseScope].
	TierEnterprise Tier = "enterprise"
)

func (t Tier) valid() bool {
	switch t {
	case TierFree, TierPro, TierTeam, TierEnterprise:
		return true
	}
	return false
}

// ReceiptClass is the class of receipts calls under the token produce.
type ReceiptClass string

// The receipt classes.
const (
	// ReceiptVerified is the class of ordinary, signed production receipts.
	ReceiptVerified ReceiptClass = "verified"
	// ReceiptDev marks development receipts.
	ReceiptDev ReceiptClass = "dev"
	// ReceiptReplay marks replays, which must have no side effects: the
	// router refuses any call that would cost credits with
	// [ReasonReceiptClassSideEffectDenied].
	ReceiptReplay ReceiptClass = "replay"
)

func (c ReceiptClass) valid() bool {
	switch c {
	case ReceiptVerified, ReceiptDev, ReceiptReplay:
		return true
	}
	return false
}

// EgressClass is a class of data a call may send off the machine.
type EgressClass string

// The egress classes.
const (
	// EgressNone: nothing leaves. Every free-local capability permits only
	// this class.
	EgressNone EgressClass = "none"
	// EgressVectors: embedding vectors.
	EgressVectors EgressClass = "vectors"
	// EgressReceiptHashes: receipt hashes.
	EgressReceiptHashes EgressClass = "receipt_hashes"
	// EgressConstraintRecords: constraint records.
	EgressConstraintRecords EgressClass = "constraint_records"
	// EgressDecisionRecords: decision records.
	EgressDecisionRecords EgressClass = "decision_records"
	// EgressEncryptedBlob: encrypted blobs.
	EgressEncryptedBlob EgressClass = "encrypted_blob"
	// EgressText: plain text.
	EgressText EgressClass = "text"
)

func (c EgressClass) valid() bool {
	switch c {
	case EgressNone, EgressVectors, EgressReceiptHashes, EgressConstraintRecords,
		EgressDecisionRecords, EgressEncryptedBlob, EgressText:
		return true
	}
	return false
}

// CostUnit is the unit a [CreditCost] is counted in.
type CostUnit string

// The cost units.
const (
	// CostPerCall counts calls.
	CostPerCall CostUnit = "call"
	// CostPerToken counts model tokens.
	CostPerToken CostUnit = "token"
	// CostPerByte counts bytes.
	CostPerByte CostUnit = "byte"
)

func (u CostUnit) valid() bool {
	switch u {
	case CostPerCall, CostPerToken, CostPerByte:
		return true
	}
	return false
}

// RefillPeriod is how often a credit balance is refilled.
type RefillPeriod string

// The refill periods.
const (
	// RefillDaily refills every day.
	RefillDaily RefillPeriod = "daily"
	// RefillMonthly refills every month.
	RefillMonthly RefillPeriod = "monthly"
	// RefillNone never refills.
	RefillNone RefillPeriod = "none"
)

func (p RefillPeriod) valid() bool {
	switch p {
	case RefillDaily, RefillMonthly, RefillNone:
		return true
	}
	return false
}

// Overdraft is what happens when a call costs more than the balance.
type Overdraft string

// The overdraft policies.
const (
	// OverdraftForbid refuses any call the balance does not cover.
	OverdraftForbid Overdraft = "forbid"
	// OverdraftWarn allows overdraft up to the overdraft limit.
	OverdraftWarn Overdraft = "warn"
	// OverdraftAllowToLimit allows overdraft up to the overdraft limit.
	OverdraftAllowToLimit Overdraft = "allow_to_limit"
)

func (o Overdraft) valid() bool {
	switch o {
	case OverdraftForbid, OverdraftWarn, OverdraftAllowToLimit:
		return true
	}
	return false
}

// FallbackAction is what the router does when a backend is unreachable,
// credits run out or the token expires.
type FallbackAction string

// The fallback actions.
const (
	// FallbackDegradeToLocal authorises the call in mode
	// [ModeDegradedLocal], routed to the local backend.
	FallbackDegradeToLocal FallbackAction = "degrade_to_local"
	// FallbackRefuse refuses the call.
	FallbackRefuse FallbackAction = "refuse"
	// FallbackQueue authorises the call in mode [ModeDegradedQueued] when
	// the token sets queue_ttl_seconds, and refuses it otherwise. It is
	// not honoured on expiry (see [TokenRouter.Decide]).
	FallbackQueue FallbackAction = "queue"
)

func (a FallbackAction) valid() bool {
	switch a {
	case FallbackDegradeToLocal, FallbackRefuse, FallbackQueue:
		return true
	}
	return false
}

// SeatRole is a team member's role.
type SeatRole string

// The seat roles.
const (
	// SeatOwner owns the team.
	SeatOwner SeatRole = "owner"
	// SeatAdmin administers the team.
	SeatAdmin SeatRole = "admin"
	// SeatMember is an ordinary member.
	SeatMember SeatRole = "member"
	// SeatViewer may only read.
	SeatViewer SeatRole = "viewer"
)

func (r SeatRole) valid() bool {
	switch r {
	case SeatOwner, SeatAdmin, SeatMember, SeatViewer:
		return true
	}
	return false
}

// Token is an RCX capability token (spec rcx-ct/1.0): who issued it, to
// whom, for which tenant, until when, and which capabilities it grants on
// which backends, under which credit and fallback rules.
//
// The struct tags are the wire names. Optional values are pointers and are
// encoded as CBOR null when nil, except TeamScope and EnterpriseScope, which
// are left out of the map entirely when nil, as the rcx-ct/1.0 format
// requires, so the bytes (and therefore the hash) agree with other
// implementations.
// Slices are never encoded as null: a nil slice is an empty array.
//
// A Token is a plain value. Methods do not modify it, except [Sign], and are
// safe for concurrent use as long as nobody modifies the token.
type Token struct {
	// SpecVersion must be [SpecVersion].
	SpecVersion string `cbor:"spec_version" json:"spec_version"`
	// TokenID identifies the token, for example rcxct_free_<fpr16>_<tenant>.
	TokenID string `cbor:"token_id" json:"token_id"`
	// IssuedAt is the issue time in Unix seconds.
	IssuedAt uint64 `cbor:"issued_at" json:"issued_at"`
	// ExpiresAt is the expiry time in Unix seconds; the token is expired at
	// and after it.
	ExpiresAt uint64 `cbor:"expires_at" json:"expires_at"`
	// RefreshHintAt is when the holder should fetch a fresh token, in Unix
	// seconds; it must be before ExpiresAt.
	RefreshHintAt uint64 `cbor:"refresh_hint_at" json:"refresh_hint_at"`
	// Issuer names the signing key.
	Issuer Issuer `cbor:"issuer" json:"issuer"`
	// Subject names the holder.
	Subject Subject `cbor:"subject" json:"subject"`
	// TenantScope names the tenant the token is for.
	TenantScope TenantScope `cbor:"tenant_scope" json:"tenant_scope"`
	// TeamScope is required for [TierTeam]; absent (not null) when nil.
	TeamScope *TeamScope `cbor:"team_scope,omitempty" json:"team_scope,omitempty"`
	// EnterpriseScope is required for [TierEnterprise]; absent (not null)
	// when nil.
	EnterpriseScope *EnterpriseScope `cbor:"enterprise_scope,omitempty" json:"enterprise_scope,omitempty"`
	// Tier is the commercial tier.
	Tier Tier `cbor:"tier" json:"tier"`
	// ReceiptClass is the class of receipts calls produce.
	ReceiptClass ReceiptClass `cbor:"receipt_class" json:"receipt_class"`
	// Backends lists the backends and what each permits, in order.
	Backends []Backend `cbor:"backends" json:"backends"`
	// Credits is the credit balance and overdraft policy.
	Credits Credits `cbor:"credits" json:"credits"`
	// Fallback says what to do when a backend is unreachable, credits run
	// out or the token expires.
	Fallback Fallback `cbor:"fallback" json:"fallback"`
	// Revocation says where revocations are published. The router does not
	// consult it (every [Stamp] says RevocationChecked false).
	Revocation Revocation `cbor:"revocation" json:"revocation"`
	// Signature is the issuer's Ed25519 signature over the token hash.
	Signature Signature `cbor:"signature" json:"signature"`
}

// Issuer names the key that signed the token.
type Issuer struct {
	// PassportKID is the signing key's id; signature.kid must equal it.
	PassportKID string `cbor:"passport_kid" json:"passport_kid"`
	// IssuerOrg is the issuing organisation; "local" for self-minted
	// tokens.
	IssuerOrg string `cbor:"issuer_org" json:"issuer_org"`
}

// Subject names the token's holder.
type Subject struct {
	// PassportFpr is the holder's passport fingerprint.
	PassportFpr string `cbor:"passport_fpr" json:"passport_fpr"`
	// DaemonInstanceID is the holder's installation, or nil.
	DaemonInstanceID *string `cbor:"daemon_instance_id" json:"daemon_instance_id"`
}

// TenantScope names the tenant a token is for.
type TenantScope struct {
	// TenantID is the tenant.
	TenantID string `cbor:"tenant_id" json:"tenant_id"`
	// DisplayName is a human name for the tenant, or nil.
	DisplayName *string `cbor:"display_name" json:"display_name"`
}

// TeamScope binds a team-tier token to a team.
type TeamScope struct {
	// TeamID is the team; required.
	TeamID string `cbor:"team_id" json:"team_id"`
	// SeatID is the holder's seat, or nil.
	SeatID *string `cbor:"seat_id" json:"seat_id"`
	// SeatRole is the holder's role, or nil.
	SeatRole *SeatRole `cbor:"seat_role" json:"seat_role"`
	// PooledCreditAgentID is the agent whose credits the team pools;
	// required.
	PooledCreditAgentID string `cbor:"pooled_credit_agent_id" json:"pooled_credit_agent_id"`
	// PrincipalPassportFprs lists the team's principals; must not be empty.
	PrincipalPassportFprs []string `cbor:"principal_passport_fprs" json:"principal_passport_fprs"`
}

// EnterpriseScope binds an enterprise-tier token to a customer backend.
type EnterpriseScope struct {
	// CustomerID is the customer; required.
	CustomerID string `cbor:"customer_id" json:"customer_id"`
	// ContractID is the contract, or nil.
	ContractID *string `cbor:"contract_id" json:"contract_id"`
	// BackendID is the customer backend; must start with
	// [CustomerBackendPrefix] and be listed in Backends.
	BackendID string `cbor:"backend_id" json:"backend_id"`
	// EndpointURL is the customer backend's endpoint.
	EndpointURL string `cbor:"endpoint_url" json:"endpoint_url"`
	// TrustRootKID is the customer's trust root; the listed backend must
	// carry the same trust_root_kid.
	TrustRootKID string `cbor:"trust_root_kid" json:"trust_root_kid"`
	// Airgap forbids listing [HostedBackendID].
	Airgap bool `cbor:"airgap" json:"airgap"`
	// CrossSignedByVaultcrux records a cross-signature by the operator of
	// [HostedBackendID]; crux only carries the flag.
	CrossSignedByVaultcrux bool `cbor:"cross_signed_by_vaultcrux" json:"cross_signed_by_vaultcrux"`
}

// Backend is one backend a token may route calls to, with the
// capabilities it permits there.
type Backend struct {
	// BackendID identifies the backend: [LocalBackendID],
	// [HostedBackendID] or a [CustomerBackendPrefix] id.
	BackendID string `cbor:"backend_id" json:"backend_id"`
	// TrustRootKID is the key the backend trusts.
	TrustRootKID string `cbor:"trust_root_kid" json:"trust_root_kid"`
	// EndpointURL is where the backend is reached, or nil (local).
	EndpointURL *string `cbor:"endpoint_url" json:"endpoint_url"`
	// PermittedCapabilities lists what the backend may be asked to do.
	PermittedCapabilities []PermittedCapability `cbor:"permitted_capabilities" json:"permitted_capabilities"`
}

// PermittedCapability is one capability a backend permits, with its
// egress, attestation and cost rules.
type PermittedCapability struct {
	// Capability is the capability string, for example
	// "crux-mcp.store_fact" or "corecrux.query.local".
	Capability string `cbor:"capability" json:"capability"`
	// DataEgressClasses lists the egress classes a call may request.
	DataEgressClasses []EgressClass `cbor:"data_egress_classes" json:"data_egress_classes"`
	// RequiredAttestations lists attestations a call must present.
	RequiredAttestations []string `cbor:"required_attestations" json:"required_attestations"`
	// CreditCost is the minimum cost of a call, or nil for free.
	CreditCost *CreditCost `cbor:"credit_cost" json:"credit_cost"`
}

// CreditCost is the cost of one call.
type CreditCost struct {
	// Unit is what Cost counts.
	Unit CostUnit `cbor:"unit" json:"unit"`
	// Cost is the number of credits.
	Cost uint64 `cbor:"cost" json:"cost"`
}

// Credits is a token's credit balance and overdraft policy.
type Credits struct {
	// Balance is the balance, or nil (treated as 0).
	Balance *uint64 `cbor:"balance" json:"balance"`
	// Refill is the refill schedule.
	Refill Refill `cbor:"refill" json:"refill"`
	// Overdraft is the overdraft policy.
	Overdraft Overdraft `cbor:"overdraft" json:"overdraft"`
	// OverdraftLimit is how far [OverdraftWarn] and
	// [OverdraftAllowToLimit] may go below zero, or nil (0).
	OverdraftLimit *uint64 `cbor:"overdraft_limit" json:"overdraft_limit"`
}

// Refill is a credit refill schedule.
type Refill struct {
	// Period is how often the balance is refilled.
	Period RefillPeriod `cbor:"period" json:"period"`
	// Amount is how much is added, or nil.
	Amount *uint64 `cbor:"amount" json:"amount"`
}

// Fallback is a token's fallback policy.
type Fallback struct {
	// OnBackendUnreachable applies when a non-local backend is unreachable.
	OnBackendUnreachable FallbackAction `cbor:"on_backend_unreachable" json:"on_backend_unreachable"`
	// OnCreditsExhausted applies when the balance does not cover a call.
	OnCreditsExhausted FallbackAction `cbor:"on_credits_exhausted" json:"on_credits_exhausted"`
	// OnExpiry applies when the token has expired; only
	// [FallbackDegradeToLocal] authorises anything.
	OnExpiry FallbackAction `cbor:"on_expiry" json:"on_expiry"`
	// QueueTTLSeconds enables [FallbackQueue], or nil.
	QueueTTLSeconds *uint64 `cbor:"queue_ttl_seconds" json:"queue_ttl_seconds"`
}

// Revocation says where revocations of the token are published.
type Revocation struct {
	// CRLURL is a revocation list URL, or nil.
	CRLURL *string `cbor:"crl_url" json:"crl_url"`
	// PushChannel is a revocation push channel, or nil.
	PushChannel *string `cbor:"push_channel" json:"push_channel"`
}

// Signature is the issuer's signature over the token hash.
type Signature struct {
	// Alg must be [SignatureAlg].
	Alg string `cbor:"alg" json:"alg"`
	// KID must equal Issuer.PassportKID.
	KID string `cbor:"kid" json:"kid"`
	// Sig is the Ed25519 signature over [Token.Hash]; encoded as a 64-byte
	// CBOR byte string (lowercase hex in JSON).
	Sig Sig `cbor:"sig" json:"sig"`
}

// Clone returns a deep copy of t, sharing no memory with it.
func (t *Token) Clone() *Token {
	if t == nil {
		return nil
	}
	c := *t
	c.Subject.DaemonInstanceID = clonePtr(t.Subject.DaemonInstanceID)
	c.TenantScope.DisplayName = clonePtr(t.TenantScope.DisplayName)
	if t.TeamScope != nil {
		ts := *t.TeamScope
		ts.SeatID = clonePtr(ts.SeatID)
		ts.SeatRole = clonePtr(ts.SeatRole)
		ts.PrincipalPassportFprs = slices.Clone(ts.PrincipalPassportFprs)
		c.TeamScope = &ts
	}
	if t.EnterpriseScope != nil {
		es := *t.EnterpriseScope
		es.ContractID = clonePtr(es.ContractID)
		c.EnterpriseScope = &es
	}
	if t.Backends != nil {
		c.Backends = make([]Backend, len(t.Backends))
		for i, b := range t.Backends {
			b.EndpointURL = clonePtr(b.EndpointURL)
			if b.PermittedCapabilities != nil {
				caps := make([]PermittedCapability, len(b.PermittedCapabilities))
				for j, p := range b.PermittedCapabilities {
					p.DataEgressClasses = slices.Clone(p.DataEgressClasses)
					p.RequiredAttestations = slices.Clone(p.RequiredAttestations)
					p.CreditCost = clonePtr(p.CreditCost)
					caps[j] = p
				}
				b.PermittedCapabilities = caps
			}
			c.Backends[i] = b
		}
	}
	c.Credits.Balance = clonePtr(t.Credits.Balance)
	c.Credits.Refill.Amount = clonePtr(t.Credits.Refill.Amount)
	c.Credits.OverdraftLimit = clonePtr(t.Credits.OverdraftLimit)
	c.Fallback.QueueTTLSeconds = clonePtr(t.Fallback.QueueTTLSeconds)
	c.Revocation.CRLURL = clonePtr(t.Revocation.CRLURL)
	c.Revocation.PushChannel = clonePtr(t.Revocation.PushChannel)
	return &c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
