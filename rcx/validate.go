package rcx

import (
	"strings"
	"time"
)

// Issue is one problem [Token.ValidateBasic] found.
type Issue struct {
	// Code is one of the Issue* constants.
	Code string `json:"code"`
	// Message says what is wrong, in English.
	Message string `json:"message"`
}

// Issue codes of [Token.ValidateBasic], those of the rcx-ct/1.0 format.
const (
	// IssueInvalidSpecVersion: spec_version is not [SpecVersion].
	IssueInvalidSpecVersion = "invalid_spec_version"
	// IssueMissingTokenID: token_id is blank.
	IssueMissingTokenID = "missing_token_id"
	// IssueTokenNotYetValid: issued_at is after the validation time.
	IssueTokenNotYetValid = "token_not_yet_valid"
	// IssueTokenExpired: expires_at is at or before the validation time.
	IssueTokenExpired = "token_expired"
	// IssueInvalidRefreshHint: refresh_hint_at is not before expires_at.
	IssueInvalidRefreshHint = "invalid_refresh_hint"
	// IssueUnsupportedSignatureAlg: signature.alg is not [SignatureAlg].
	IssueUnsupportedSignatureAlg = "unsupported_signature_alg"
	// IssueSignatureKIDMismatch: signature.kid differs from
	// issuer.passport_kid.
	IssueSignatureKIDMismatch = "signature_kid_mismatch"
	// IssueMissingBackend: there are no backends.
	IssueMissingBackend = "missing_backend"
	// IssueMissingTeamScope: a team-tier token has no team_scope.
	IssueMissingTeamScope = "missing_team_scope"
	// IssueMissingEnterpriseScope: an enterprise-tier token has no
	// enterprise_scope.
	IssueMissingEnterpriseScope = "missing_enterprise_scope"
	// IssueMissingTeamID: team_scope.team_id is blank.
	IssueMissingTeamID = "missing_team_id"
	// IssueMissingPooledCreditAgentID: team_scope.pooled_credit_agent_id
	// is blank.
	IssueMissingPooledCreditAgentID = "missing_pooled_credit_agent_id"
	// IssueMissingPrincipalScope: team_scope.principal_passport_fprs is
	// empty.
	IssueMissingPrincipalScope = "missing_principal_scope"
	// IssueMissingEnterpriseCustomerID: enterprise_scope.customer_id is
	// blank.
	IssueMissingEnterpriseCustomerID = "missing_enterprise_customer_id"
	// IssueInvalidEnterpriseBackend: enterprise_scope.backend_id does not
	// start with [CustomerBackendPrefix].
	IssueInvalidEnterpriseBackend = "invalid_enterprise_backend"
	// IssueMissingEnterpriseTrustRoot: enterprise_scope.trust_root_kid is
	// blank.
	IssueMissingEnterpriseTrustRoot = "missing_enterprise_trust_root"
	// IssueTrustRootMismatch: the enterprise backend's trust_root_kid
	// differs from enterprise_scope.trust_root_kid.
	IssueTrustRootMismatch = "trust_root_mismatch"
	// IssueEnterpriseBackendMissing: enterprise_scope.backend_id is not
	// among the backends.
	IssueEnterpriseBackendMissing = "enterprise_backend_missing"
	// IssueBackendNotPermitted: an airgap enterprise token lists
	// [HostedBackendID].
	IssueBackendNotPermitted = "backend_not_permitted"
)

// ValidateBasic checks the token's structure at time now and returns every
// issue found, in the format's check order, or nil when there is none. It
// does not check the signature; see [Token.Verify].
//
// Besides the time checks (token_not_yet_valid when issued_at is after now,
// token_expired when expires_at is at or before now), it checks the spec
// version, token id, refresh hint, signature algorithm and key id, that
// there is a backend, and the team and enterprise scopes.
// A token minted "now" and checked a moment later never trips
// token_not_yet_valid.
func (t *Token) ValidateBasic(now time.Time) []Issue {
	return t.issues(unixSeconds(now), true)
}

// issues returns the issues of [Token.ValidateBasic] at now (Unix
// seconds), leaving out the two time checks when timed is false.
func (t *Token) issues(now uint64, timed bool) []Issue {
	var issues []Issue
	add := func(code, msg string) { issues = append(issues, Issue{code, msg}) }
	blank := func(s string) bool { return strings.TrimSpace(s) == "" }

	if t.SpecVersion != SpecVersion {
		add(IssueInvalidSpecVersion, "spec_version must be "+SpecVersion)
	}
	if blank(t.TokenID) {
		add(IssueMissingTokenID, "token_id is required")
	}
	if timed && t.IssuedAt > now {
		add(IssueTokenNotYetValid, "issued_at must be at or before the validation time")
	}
	if timed && t.ExpiresAt <= now {
		add(IssueTokenExpired, "token has expired")
	}
	if t.RefreshHintAt >= t.ExpiresAt {
		add(IssueInvalidRefreshHint, "refresh_hint_at must be before expires_at")
	}
	if t.Signature.Alg != SignatureAlg {
		add(IssueUnsupportedSignatureAlg, "signature.alg must be "+SignatureAlg)
	}
	if t.Signature.KID != t.Issuer.PassportKID {
		add(IssueSignatureKIDMismatch, "signature.kid must match issuer.passport_kid")
	}
	if len(t.Backends) == 0 {
		add(IssueMissingBackend, "at least one backend is required")
	}
	if t.Tier == TierTeam && t.TeamScope == nil {
		add(IssueMissingTeamScope, "team tier tokens require team_scope")
	}
	if t.Tier == TierEnterprise && t.EnterpriseScope == nil {
		add(IssueMissingEnterpriseScope, "enterprise tier tokens require enterprise_scope")
	}
	if ts := t.TeamScope; ts != nil {
		if blank(ts.TeamID) {
			add(IssueMissingTeamID, "team_scope.team_id is required")
		}
		if blank(ts.PooledCreditAgentID) {
			add(IssueMissingPooledCreditAgentID, "team_scope.pooled_credit_agent_id is required")
		}
		if len(ts.PrincipalPassportFprs) == 0 {
			add(IssueMissingPrincipalScope, "team_scope.principal_passport_fprs must not be empty")
		}
	}
	if es := t.EnterpriseScope; es != nil {
		if blank(es.CustomerID) {
			add(IssueMissingEnterpriseCustomerID, "enterprise_scope.customer_id is required")
		}
		if !strings.HasPrefix(es.BackendID, CustomerBackendPrefix) {
			add(IssueInvalidEnterpriseBackend, "enterprise_scope.backend_id must start with "+CustomerBackendPrefix)
		}
		if blank(es.TrustRootKID) {
			add(IssueMissingEnterpriseTrustRoot, "enterprise_scope.trust_root_kid is required")
		}
		var found *Backend
		for i := range t.Backends {
			if t.Backends[i].BackendID == es.BackendID {
				found = &t.Backends[i]
				break
			}
		}
		switch {
		case found == nil:
			add(IssueEnterpriseBackendMissing, "enterprise_scope backend is not present in token backends")
		case found.TrustRootKID != es.TrustRootKID:
			add(IssueTrustRootMismatch, "enterprise backend trust root does not match enterprise_scope")
		}
		if es.Airgap {
			for _, b := range t.Backends {
				if b.BackendID == HostedBackendID {
					add(IssueBackendNotPermitted, "airgap enterprise tokens must not permit "+HostedBackendID)
					break
				}
			}
		}
	}
	return issues
}

// unixSeconds returns now in Unix seconds, clamped at 0.
func unixSeconds(now time.Time) uint64 {
	s := now.Unix()
	if s < 0 {
		return 0
	}
	return uint64(s)
}
