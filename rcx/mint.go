package rcx

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Free-local token parameters.
const (
	// DefaultTenant is the tenant of a free-local token when
	// [FreeLocalOptions] names none.
	DefaultTenant = "local"

	// DefaultFreeLocalTTL is a free-local token's lifetime when
	// [FreeLocalOptions] sets none: 366 days.
	DefaultFreeLocalTTL = 366 * 24 * time.Hour

	// RefreshLead is how long before expiry a free-local token's
	// refresh_hint_at lies.
	RefreshLead = time.Hour

	// FreeLocalTokenIDPrefix starts every free-local token id.
	FreeLocalTokenIDPrefix = "rcxct_free_"
)

// FreeLocalOptions configures [MintFreeLocal]. The zero value mints the
// free-local token for tenant [DefaultTenant] with the default lifetime,
// issued now, granting nothing.
type FreeLocalOptions struct {
	// Tenant is tenant_scope.tenant_id and the token id's suffix;
	// [DefaultTenant] when empty.
	Tenant string
	// DaemonInstanceID is subject.daemon_instance_id, the installation
	// (a node id, say); null when empty.
	DaemonInstanceID string
	// IssuedAt is issued_at, truncated to the second; now when zero.
	IssuedAt time.Time
	// TTL is the lifetime: expires_at = issued_at + TTL (whole seconds).
	// [DefaultFreeLocalTTL] when zero; at least one second otherwise.
	TTL time.Duration
	// Capabilities lists the capability strings the token grants, in order,
	// duplicates dropped. rcx knows no tools: the caller names the
	// capabilities of the tools it serves locally (crux.FreeLocalCapabilities
	// lists crux's, [FederationReadCapability] included). Nil grants nothing.
	Capabilities []string
}

// MintFreeLocal mints and signs the free-local token, in the layout
// CueCrux's rcx-ct/1.0 free-local tokens have:
//
//   - token_id "rcxct_free_<fpr16>_<tenant>", where fpr is s.KeyID() and
//     fpr16 its first 16 characters after the "p_" prefix;
//   - issuer {passport_kid: fpr, issuer_org: "local"}, subject
//     {passport_fpr: fpr, daemon_instance_id}, tenant_scope {tenant_id,
//     display_name: "Local"};
//   - tier free, receipt_class verified;
//   - exactly one backend, "local", with trust_root_kid fpr, no endpoint,
//     and each capability as {capability, data_egress_classes: [none],
//     required_attestations: [], credit_cost: null};
//   - credits {balance: null, refill {none, null}, overdraft forbid,
//     overdraft_limit: null}; every fallback refuse, queue_ttl_seconds
//     null; revocation {null, null};
//   - refresh_hint_at = expires_at - 3600 (saturating);
//   - signed by s (see [Sign]).
//
// The token has no hosted backend, so even a hosted capability listed in
// opts.Capabilities is only ever routed to the local backend.
func MintFreeLocal(s Signer, opts FreeLocalOptions) (*Token, error) {
	if s == nil {
		return nil, errors.New("rcx: mint free-local token: nil signer")
	}
	fpr := s.KeyID()
	if strings.TrimSpace(fpr) == "" {
		return nil, errors.New("rcx: mint free-local token: signer has an empty key id")
	}
	tenant := opts.Tenant
	if tenant == "" {
		tenant = DefaultTenant
	}
	issued := opts.IssuedAt
	if issued.IsZero() {
		issued = time.Now()
	}
	if issued.Unix() < 0 {
		return nil, fmt.Errorf("rcx: mint free-local token: issued at %v, before 1970", issued)
	}
	ttl := opts.TTL
	if ttl == 0 {
		ttl = DefaultFreeLocalTTL
	}
	if ttl < time.Second {
		return nil, fmt.Errorf("rcx: mint free-local token: TTL %v is less than a second", ttl)
	}
	caps := dedupe(opts.Capabilities)

	issuedAt := uint64(issued.Unix())
	expiresAt := issuedAt + uint64(ttl/time.Second)
	lead := uint64(RefreshLead / time.Second)
	refresh := uint64(0)
	if expiresAt > lead {
		refresh = expiresAt - lead
	}

	permitted := make([]PermittedCapability, len(caps))
	for i, c := range caps {
		permitted[i] = PermittedCapability{
			Capability:           c,
			DataEgressClasses:    []EgressClass{EgressNone},
			RequiredAttestations: []string{},
		}
	}
	var daemon *string
	if opts.DaemonInstanceID != "" {
		daemon = new(opts.DaemonInstanceID)
	}
	t := &Token{
		SpecVersion:   SpecVersion,
		TokenID:       FreeLocalTokenIDPrefix + shortFingerprint(fpr) + "_" + tenant,
		IssuedAt:      issuedAt,
		ExpiresAt:     expiresAt,
		RefreshHintAt: refresh,
		Issuer:        Issuer{PassportKID: fpr, IssuerOrg: "local"},
		Subject:       Subject{PassportFpr: fpr, DaemonInstanceID: daemon},
		TenantScope:   TenantScope{TenantID: tenant, DisplayName: new("Local")},
		Tier:          TierFree,
		ReceiptClass:  ReceiptVerified,
		Backends: []Backend{{
			BackendID:             LocalBackendID,
			TrustRootKID:          fpr,
			PermittedCapabilities: permitted,
		}},
		Credits: Credits{
			Refill:    Refill{Period: RefillNone},
			Overdraft: OverdraftForbid,
		},
		Fallback: Fallback{
			OnBackendUnreachable: FallbackRefuse,
			OnCreditsExhausted:   FallbackRefuse,
			OnExpiry:             FallbackRefuse,
		},
		Signature: Signature{Alg: SignatureAlg, KID: fpr},
	}
	if err := Sign(t, s); err != nil {
		return nil, fmt.Errorf("rcx: mint free-local token: %w", err)
	}
	return t, nil
}

// shortFingerprint returns the first 16 characters of fpr after every
// leading "p_".
func shortFingerprint(fpr string) string {
	for strings.HasPrefix(fpr, "p_") {
		fpr = fpr[2:]
	}
	n := 0
	for i := range fpr {
		if n == 16 {
			return fpr[:i]
		}
		n++
	}
	return fpr
}

// dedupe returns s without repeated elements, first occurrences in order,
// as a new slice.
func dedupe(s []string) []string {
	out := make([]string, 0, len(s))
	seen := make(map[string]bool, len(s))
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}
