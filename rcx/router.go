package rcx

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Mode is how a call is served, the value of the X-Crux-Mode stamp.
type Mode string

// The modes.
const (
	// ModeLocal: authorised on the local backend.
	ModeLocal Mode = "local"
	// ModeHosted: authorised on a hosted backend.
	ModeHosted Mode = "hosted"
	// ModeCustomerHosted: authorised on a customer: backend.
	ModeCustomerHosted Mode = "customer_hosted"
	// ModeDegradedLocal: authorised by a degrade_to_local fallback, to be
	// served locally.
	ModeDegradedLocal Mode = "degraded-local"
	// ModeDegradedQueued: authorised by a queue fallback, to be queued for
	// at most the stamp's QueueTTLSeconds.
	ModeDegradedQueued Mode = "degraded-queued"
	// ModeRefused: not authorised.
	ModeRefused Mode = "refused"
)

// Reason codes of decisions, those of the CueCrux tool contract. A refused
// decision always has one; a degraded decision carries the reason that
// triggered the fallback; an ordinary authorised decision has none.
const (
	// ReasonTokenInvalid: the token fails verification or a structural
	// check, or is not yet valid.
	ReasonTokenInvalid = "denied:token_invalid"
	// ReasonTokenExpired: the token has expired.
	ReasonTokenExpired = "denied:token_expired"
	// ReasonCapabilityNotPermitted: the preferred backend is not in the
	// token or does not list the capability.
	ReasonCapabilityNotPermitted = "denied:capability_not_permitted"
	// ReasonEgressNotPermitted: the call requests an egress class the
	// capability does not permit.
	ReasonEgressNotPermitted = "denied:egress_not_permitted"
	// ReasonAttestationMissing: the call lacks an attestation the
	// capability requires.
	ReasonAttestationMissing = "denied:attestation_missing"
	// ReasonInsufficientCredit: the balance (with any overdraft allowed)
	// does not cover the call's cost.
	ReasonInsufficientCredit = "denied:insufficient_credit"
	// ReasonReceiptClassSideEffectDenied: a replay-class token may not
	// make a call that costs credits.
	ReasonReceiptClassSideEffectDenied = "denied:receipt_class_side_effect_denied"
	// ReasonBackendUnavailable: the selected non-local backend is
	// unreachable.
	ReasonBackendUnavailable = "denied:backend_unavailable"
)

// StampHeader is the name of the HTTP header (and the header field of a
// [Stamp]) that carries the mode.
const StampHeader = "X-Crux-Mode"

// RefusalEventType is the event type of every [RefusalReceipt].
const RefusalEventType = "rcx.capability_token.call_refused.v1"

// Call is one capability check.
type Call struct {
	// Capability is the capability string, such as crux-mcp.store_fact.
	Capability string
	// PreferredBackend is the backend the call wants; "" means
	// [LocalBackendID].
	PreferredBackend string
	// EgressClasses lists the egress classes the call needs; each must be
	// permitted. Empty asks for none.
	EgressClasses []string
	// Attestations lists the attestations the call presents.
	Attestations []string
	// EstimatedCost is the call's estimated credit cost; the cost charged
	// is the larger of it and the capability's credit_cost.
	EstimatedCost uint64
}

// Decision is the router's answer to a [Call].
type Decision struct {
	// Authorised reports whether the call may proceed (in Mode).
	Authorised bool `json:"authorised"`
	// Mode is how the call is served, [ModeRefused] when not authorised.
	Mode Mode `json:"mode"`
	// BackendID is the backend: the selected one when authorised, "local"
	// when degraded to local, the preferred one when queued or refused.
	BackendID string `json:"backend_id"`
	// ReasonCode is one of the Reason* constants; empty for an ordinary
	// authorised decision (null on the wire).
	ReasonCode string `json:"reason_code"`
	// TokenID is the token's id.
	TokenID string `json:"token_id"`
	// TokenHash is the token hash in lowercase hex.
	TokenHash string `json:"token_hash"`
	// Stamp is the X-Crux-Mode stamp of the decision.
	Stamp Stamp `json:"stamp"`
	// RefusalReceipt is set exactly when the call is refused.
	RefusalReceipt *RefusalReceipt `json:"refusal_receipt"`
}

// Stamp is the X-Crux-Mode stamp a response carries.
type Stamp struct {
	// Header is [StampHeader].
	Header string `json:"header"`
	// Mode is the decision's mode.
	Mode Mode `json:"mode"`
	// ReasonCode is the decision's reason code, empty (null on the wire)
	// when it has none.
	ReasonCode string `json:"reason_code"`
	// TokenID is the token's id.
	TokenID string `json:"token_id"`
	// TokenHash is the token hash in lowercase hex.
	TokenHash string `json:"token_hash"`
	// QueueTTLSeconds is set for [ModeDegradedQueued].
	QueueTTLSeconds *uint64 `json:"queue_ttl_seconds"`
	// RevocationChecked is always false: the router does not consult
	// revocation lists, and a stamp never claims it did.
	RevocationChecked bool `json:"revocation_checked"`
}

// RefusalReceipt describes a refused call. It is unsigned: whoever
// enforces the decision (the crux server) signs and persists it.
type RefusalReceipt struct {
	// EventType is [RefusalEventType].
	EventType string `json:"event_type"`
	// TokenID is the token's id.
	TokenID string `json:"token_id"`
	// TokenHash is the token hash in lowercase hex.
	TokenHash string `json:"token_hash"`
	// Capability is the refused capability.
	Capability string `json:"capability"`
	// BackendID is the backend the call preferred ("local" by default).
	BackendID string `json:"backend_id"`
	// DataEgressClasses are the egress classes the call requested.
	DataEgressClasses []string `json:"data_egress_classes"`
	// RequiredAttestations are those of the capability on the preferred
	// backend, when the token lists it there; empty otherwise.
	RequiredAttestations []string `json:"required_attestations"`
	// PresentAttestations are the attestations the call presented.
	PresentAttestations []string `json:"present_attestations"`
	// ReasonCode is the refusal's reason code.
	ReasonCode string `json:"reason_code"`
	// ReceiptClass is the token's receipt class.
	ReceiptClass string `json:"receipt_class"`
}

// Info describes the token behind a router, for tools/list annotations and
// audits.
type Info struct {
	// TokenID is the token's id.
	TokenID string `json:"token_id"`
	// TokenHash is the token hash in lowercase hex.
	TokenHash string `json:"token_hash"`
	// Tier is the token's tier.
	Tier string `json:"tier"`
	// ReceiptClass is the token's receipt class.
	ReceiptClass string `json:"receipt_class"`
}

// Router decides whether calls are authorised. Implementations must be safe
// for concurrent use; Decide must be cheap, since it runs on every tool
// call and once per tool for every tools/list.
type Router interface {
	// Decide decides one call. The context is for implementations that
	// consult remote state; [TokenRouter] ignores it.
	Decide(ctx context.Context, c Call) Decision
	// Info describes the router's token.
	Info() Info
}

// RouterOptions configures [NewRouter]. A nil *RouterOptions is the zero
// value.
type RouterOptions struct {
	// Now returns the current time; time.Now when nil.
	Now func() time.Time
	// Reachable reports whether a non-local backend can be reached now;
	// nil means every backend is reachable. It is never asked about the
	// local backend.
	Reachable func(backendID string) bool
}

// TokenRouter is the built-in router over one capability token. It is
// immutable after [NewRouter] and safe for concurrent use. The zero value
// refuses every call with [ReasonTokenInvalid].
type TokenRouter struct {
	id, hash     string
	info         Info
	invalid      error // verification or structural failure: refuse all
	issuedAt     uint64
	expiresAt    uint64
	fallback     Fallback
	receiptClass string
	replay       bool
	balance      uint64
	overdraft    Overdraft
	limit        uint64
	// grants maps backend id, then capability, to the first matching
	// permitted capability of the first backend with that id that lists
	// it: select the backend, then find the capability.
	grants map[string]map[string]*grant
	// anywhere holds every capability some backend lists.
	anywhere  map[string]bool
	now       func() time.Time
	reachable func(string) bool
}

type grant struct {
	backendID string
	mode      Mode
	egress    []EgressClass
	attest    []string
	cost      uint64
}

// NewRouter returns the built-in router for t, trusting the issuer key
// trusted.
//
// It verifies t's signature against trusted once, here ([Token.Verify]),
// and checks t's time-independent structure ([Token.ValidateBasic] minus
// the time checks). A token that fails either (signed by another key,
// modified after signing, a bad algorithm or key id, no backend, ...) does
// not make NewRouter fail: it yields a router that refuses every call with
// [ReasonTokenInvalid], and [TokenRouter.Err] says why. This fails closed
// for an embedder who would otherwise run without a router (which enforces
// nothing) on error; check Err at startup to surface the misconfiguration.
//
// NewRouter returns an error only for misuse: a nil token, or a trusted key
// that is not a usable Ed25519 public key ([ErrBadPublicKey]). The router
// works on a deep copy of t, so later changes to t do not affect it.
//
// Every backend, local included, relies on the verified signature:
// skipping it for the local backend would be sound only for self-minted
// tokens.
func NewRouter(t *Token, trusted ed25519.PublicKey, opts *RouterOptions) (*TokenRouter, error) {
	if t == nil {
		return nil, errors.New("rcx: new router: nil token")
	}
	if err := checkPublicKey(trusted); err != nil {
		return nil, fmt.Errorf("rcx: new router: trusted key: %w", err)
	}
	t = t.Clone()
	r := &TokenRouter{
		id:           t.TokenID,
		issuedAt:     t.IssuedAt,
		expiresAt:    t.ExpiresAt,
		fallback:     t.Fallback,
		receiptClass: string(t.ReceiptClass),
		replay:       t.ReceiptClass == ReceiptReplay,
		overdraft:    t.Credits.Overdraft,
		now:          time.Now,
		grants:       make(map[string]map[string]*grant, len(t.Backends)),
		anywhere:     make(map[string]bool),
	}
	if opts != nil {
		if opts.Now != nil {
			r.now = opts.Now
		}
		r.reachable = opts.Reachable
	}
	if t.Credits.Balance != nil {
		r.balance = *t.Credits.Balance
	}
	if t.Credits.OverdraftLimit != nil {
		r.limit = *t.Credits.OverdraftLimit
	}
	r.hash, r.invalid = t.HashHex()
	if r.invalid == nil {
		r.invalid = t.Verify(trusted)
	}
	if r.invalid == nil {
		if issues := t.issues(0, false); len(issues) > 0 {
			codes := make([]string, len(issues))
			for i, is := range issues {
				codes[i] = is.Code
			}
			r.invalid = fmt.Errorf("rcx: token fails validation: %s", strings.Join(codes, ", "))
		}
	}
	r.info = Info{TokenID: r.id, TokenHash: r.hash, Tier: string(t.Tier), ReceiptClass: r.receiptClass}

	for _, b := range t.Backends {
		caps := r.grants[b.BackendID]
		if caps == nil {
			caps = make(map[string]*grant, len(b.PermittedCapabilities))
			r.grants[b.BackendID] = caps
		}
		mode := ModeHosted
		switch {
		case b.BackendID == LocalBackendID:
			mode = ModeLocal
		case strings.HasPrefix(b.BackendID, CustomerBackendPrefix):
			mode = ModeCustomerHosted
		}
		for _, p := range b.PermittedCapabilities {
			r.anywhere[p.Capability] = true
			if _, dup := caps[p.Capability]; dup {
				continue
			}
			g := &grant{backendID: b.BackendID, mode: mode, egress: p.DataEgressClasses, attest: p.RequiredAttestations}
			if p.CreditCost != nil {
				g.cost = p.CreditCost.Cost
			}
			caps[p.Capability] = g
		}
	}
	return r, nil
}

// Err returns why the router refuses every call with
// [ReasonTokenInvalid] (a signature or structure failure found by
// [NewRouter]), or nil when the token verified.
func (r *TokenRouter) Err() error { return r.invalid }

// Info describes the router's token.
func (r *TokenRouter) Info() Info { return r.info }

// Decide decides c, following the decision algorithm of the CueCrux tool
// contract:
//
//  1. Token validity. A token that failed verification or a structural
//     check at [NewRouter], or whose issued_at is in the future, is refused
//     with [ReasonTokenInvalid]. An expired token (expires_at at or before
//     now) applies fallback.on_expiry: degrade_to_local authorises in
//     [ModeDegradedLocal] with reason [ReasonTokenExpired], as long as
//     some backend of the token lists the capability (the fallback never
//     widens the grant); anything else, queue included, refuses with
//     [ReasonTokenExpired].
//  2. Backend selection: the first backend whose id is the preferred one
//     (default "local") and which lists the capability; none refuses with
//     [ReasonCapabilityNotPermitted]. This is what refuses hosted-gated
//     tools under a free-local token.
//  3. Reachability of a non-local backend (RouterOptions.Reachable); an
//     unreachable one applies fallback.on_backend_unreachable with
//     [ReasonBackendUnavailable].
//  4. Every requested egress class must be permitted
//     ([ReasonEgressNotPermitted]) and every required attestation present
//     ([ReasonAttestationMissing]).
//  5. Cost = max(EstimatedCost, credit_cost). A positive cost under a
//     replay-class token refuses with [ReasonReceiptClassSideEffectDenied].
//     A positive cost the balance does not cover (overdraft forbid), or
//     that balance plus overdraft_limit does not cover (warn,
//     allow_to_limit), applies fallback.on_credits_exhausted with
//     [ReasonInsufficientCredit].
//  6. Authorised in mode local, customer_hosted (a "customer:" backend) or
//     hosted.
//
// A fallback of degrade_to_local authorises in [ModeDegradedLocal] on the
// local backend; queue authorises in [ModeDegradedQueued] when the token
// sets queue_ttl_seconds; anything else refuses. Every refusal carries a
// [RefusalReceipt]. The signature was checked once, in NewRouter.
//
// An authorised decision costs a few map lookups and allocates nothing.
func (r *TokenRouter) Decide(_ context.Context, c Call) Decision {
	if r.invalid != nil || r.now == nil { // r.now is nil only in a zero TokenRouter
		return r.refuse(&c, ReasonTokenInvalid)
	}
	now := unixSeconds(r.now())
	if r.issuedAt > now {
		return r.refuse(&c, ReasonTokenInvalid)
	}
	if r.expiresAt <= now {
		if r.fallback.OnExpiry == FallbackDegradeToLocal && r.anywhere[c.Capability] {
			return r.degradedLocal(ReasonTokenExpired)
		}
		return r.refuse(&c, ReasonTokenExpired)
	}

	g := r.lookup(&c)
	if g == nil {
		return r.refuse(&c, ReasonCapabilityNotPermitted)
	}
	if g.backendID != LocalBackendID && r.reachable != nil && !r.reachable(g.backendID) {
		return r.applyFallback(&c, r.fallback.OnBackendUnreachable, ReasonBackendUnavailable)
	}
	for _, want := range c.EgressClasses {
		if !slices.Contains(g.egress, EgressClass(want)) {
			return r.refuse(&c, ReasonEgressNotPermitted)
		}
	}
	for _, need := range g.attest {
		if !slices.Contains(c.Attestations, need) {
			return r.refuse(&c, ReasonAttestationMissing)
		}
	}
	cost := max(c.EstimatedCost, g.cost)
	if cost > 0 {
		if r.replay {
			return r.refuse(&c, ReasonReceiptClassSideEffectDenied)
		}
		if !r.hasCredit(cost) {
			return r.applyFallback(&c, r.fallback.OnCreditsExhausted, ReasonInsufficientCredit)
		}
	}
	return Decision{
		Authorised: true,
		Mode:       g.mode,
		BackendID:  g.backendID,
		TokenID:    r.id,
		TokenHash:  r.hash,
		Stamp:      r.stamp(g.mode, "", nil),
	}
}

// lookup returns the grant of c's capability on c's preferred backend.
func (r *TokenRouter) lookup(c *Call) *grant {
	return r.grants[preferred(c)][c.Capability]
}

func preferred(c *Call) string {
	if c.PreferredBackend == "" {
		return LocalBackendID
	}
	return c.PreferredBackend
}

func (r *TokenRouter) hasCredit(cost uint64) bool {
	if r.balance >= cost {
		return true
	}
	if r.overdraft == OverdraftForbid {
		return false
	}
	total := r.balance + r.limit
	if total < r.balance { // saturate
		return true
	}
	return total >= cost
}

func (r *TokenRouter) applyFallback(c *Call, a FallbackAction, reason string) Decision {
	switch {
	case a == FallbackDegradeToLocal:
		return r.degradedLocal(reason)
	case a == FallbackQueue && r.fallback.QueueTTLSeconds != nil:
		ttl := *r.fallback.QueueTTLSeconds
		return Decision{
			Authorised: true,
			Mode:       ModeDegradedQueued,
			BackendID:  preferred(c),
			ReasonCode: reason,
			TokenID:    r.id,
			TokenHash:  r.hash,
			Stamp:      r.stamp(ModeDegradedQueued, reason, &ttl),
		}
	}
	return r.refuse(c, reason)
}

func (r *TokenRouter) degradedLocal(reason string) Decision {
	return Decision{
		Authorised: true,
		Mode:       ModeDegradedLocal,
		BackendID:  LocalBackendID,
		ReasonCode: reason,
		TokenID:    r.id,
		TokenHash:  r.hash,
		Stamp:      r.stamp(ModeDegradedLocal, reason, nil),
	}
}

func (r *TokenRouter) refuse(c *Call, reason string) Decision {
	required := []string{}
	if g := r.lookup(c); g != nil && len(g.attest) > 0 {
		required = slices.Clone(g.attest)
	}
	egress := slices.Clone(c.EgressClasses)
	if egress == nil {
		egress = []string{}
	}
	present := slices.Clone(c.Attestations)
	if present == nil {
		present = []string{}
	}
	backend := preferred(c)
	return Decision{
		Mode:       ModeRefused,
		BackendID:  backend,
		ReasonCode: reason,
		TokenID:    r.id,
		TokenHash:  r.hash,
		Stamp:      r.stamp(ModeRefused, reason, nil),
		RefusalReceipt: &RefusalReceipt{
			EventType:            RefusalEventType,
			TokenID:              r.id,
			TokenHash:            r.hash,
			Capability:           c.Capability,
			BackendID:            backend,
			DataEgressClasses:    egress,
			RequiredAttestations: required,
			PresentAttestations:  present,
			ReasonCode:           reason,
			ReceiptClass:         r.receiptClass,
		},
	}
}

func (r *TokenRouter) stamp(m Mode, reason string, ttl *uint64) Stamp {
	return Stamp{
		Header:          StampHeader,
		Mode:            m,
		ReasonCode:      reason,
		TokenID:         r.id,
		TokenHash:       r.hash,
		QueueTTLSeconds: ttl,
	}
}

// ToolCall returns the [Call] an MCP server makes for a tool whose
// capability string is capability: egress class "none", no attestations,
// no cost, and the local backend, except that a hosted-gated tool prefers
// [HostedBackendID]. Under a free-local token both routes refuse a
// capability the token does not grant with [ReasonCapabilityNotPermitted];
// the preferred backend shows in the refusal receipt.
func ToolCall(capability string, hosted bool) Call {
	c := Call{Capability: capability, EgressClasses: []string{string(EgressNone)}}
	if hosted {
		c.PreferredBackend = HostedBackendID
	}
	return c
}

// MarshalJSON writes the decision in its CueCrux wire shape:
// backend_id and reason_code are null when empty.
func (d Decision) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Authorised     bool            `json:"authorised"`
		Mode           Mode            `json:"mode"`
		BackendID      *string         `json:"backend_id"`
		ReasonCode     *string         `json:"reason_code"`
		TokenID        string          `json:"token_id"`
		TokenHash      string          `json:"token_hash"`
		Stamp          Stamp           `json:"stamp"`
		RefusalReceipt *RefusalReceipt `json:"refusal_receipt"`
	}{d.Authorised, d.Mode, nullable(d.BackendID), nullable(d.ReasonCode), d.TokenID, d.TokenHash, d.Stamp, d.RefusalReceipt})
}

// MarshalJSON writes the stamp in its CueCrux wire shape:
// reason_code is null when empty.
func (s Stamp) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Header            string  `json:"header"`
		Mode              Mode    `json:"mode"`
		ReasonCode        *string `json:"reason_code"`
		TokenID           string  `json:"token_id"`
		TokenHash         string  `json:"token_hash"`
		QueueTTLSeconds   *uint64 `json:"queue_ttl_seconds"`
		RevocationChecked bool    `json:"revocation_checked"`
	}{s.Header, s.Mode, nullable(s.ReasonCode), s.TokenID, s.TokenHash, s.QueueTTLSeconds, s.RevocationChecked})
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
