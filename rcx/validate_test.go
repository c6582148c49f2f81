package rcx

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestValidateBasic(t *testing.T) {
	now := time.Unix(fixtureIssued+1, 0)
	enterprise := func(t *Token) {
		t.Tier = TierEnterprise
		t.EnterpriseScope = &EnterpriseScope{
			CustomerID: "customer-a", BackendID: "customer:cluster-a",
			EndpointURL: "https://cluster-a.example/rcx", TrustRootKID: "root-a",
		}
		t.Backends[0].BackendID = "customer:cluster-a"
		t.Backends[0].TrustRootKID = "root-a"
	}
	team := func(t *Token) {
		t.Tier = TierTeam
		t.TeamScope = &TeamScope{TeamID: "team-a", PooledCreditAgentID: "pool", PrincipalPassportFprs: []string{fixtureFpr}}
	}

	tests := []struct {
		name   string
		mutate func(*Token)
		now    time.Time
		want   []string
	}{
		{"valid", func(*Token) {}, now, nil},
		{"valid team", team, now, nil},
		{"valid enterprise", enterprise, now, nil},
		{"valid at issue time", func(*Token) {}, time.Unix(fixtureIssued, 0), nil},
		{"spec version", func(t *Token) { t.SpecVersion = "rcx-ct/2.0" }, now, []string{IssueInvalidSpecVersion}},
		{"token id blank", func(t *Token) { t.TokenID = " \t" }, now, []string{IssueMissingTokenID}},
		{"expired at expiry", func(*Token) {}, time.Unix(fixtureExpires, 0), []string{IssueTokenExpired}},
		{"expired after", func(*Token) {}, time.Unix(fixtureExpires+1, 0), []string{IssueTokenExpired}},
		{"valid a second before expiry", func(*Token) {}, time.Unix(fixtureExpires-1, 0), nil},
		{"not yet valid", func(*Token) {}, time.Unix(fixtureIssued-1, 0), []string{IssueTokenNotYetValid}},
		{"before 1970", func(*Token) {}, time.Unix(-5, 0), []string{IssueTokenNotYetValid}},
		{"refresh at expiry", func(t *Token) { t.RefreshHintAt = t.ExpiresAt }, now, []string{IssueInvalidRefreshHint}},
		{"alg", func(t *Token) { t.Signature.Alg = "es256" }, now, []string{IssueUnsupportedSignatureAlg}},
		{"kid", func(t *Token) { t.Signature.KID = "p_other" }, now, []string{IssueSignatureKIDMismatch}},
		{"no backend", func(t *Token) { t.Backends = nil }, now, []string{IssueMissingBackend}},
		{"team without scope", func(t *Token) { t.Tier = TierTeam }, now, []string{IssueMissingTeamScope}},
		{"enterprise without scope", func(t *Token) { t.Tier = TierEnterprise }, now, []string{IssueMissingEnterpriseScope}},
		{"team fields", func(t *Token) { team(t); t.TeamScope = &TeamScope{} }, now,
			[]string{IssueMissingTeamID, IssueMissingPooledCreditAgentID, IssueMissingPrincipalScope}},
		{"enterprise fields", func(t *Token) {
			enterprise(t)
			t.EnterpriseScope.CustomerID = ""
			t.EnterpriseScope.TrustRootKID = " "
		}, now, []string{IssueMissingEnterpriseCustomerID, IssueMissingEnterpriseTrustRoot, IssueTrustRootMismatch}},
		{"enterprise backend prefix", func(t *Token) {
			enterprise(t)
			t.EnterpriseScope.BackendID = "cluster-a"
			t.Backends[0].BackendID = "cluster-a"
		}, now, []string{IssueInvalidEnterpriseBackend}},
		{"trust root mismatch", func(t *Token) { enterprise(t); t.Backends[0].TrustRootKID = "root-b" }, now,
			[]string{IssueTrustRootMismatch}},
		{"enterprise backend missing", func(t *Token) { enterprise(t); t.Backends[0].BackendID = "customer:other" }, now,
			[]string{IssueEnterpriseBackendMissing}},
		{"airgap lists hosted", func(t *Token) {
			enterprise(t)
			t.EnterpriseScope.Airgap = true
			t.Backends = append(t.Backends, Backend{BackendID: HostedBackendID})
		}, now, []string{IssueBackendNotPermitted}},
		{"hosted without airgap", func(t *Token) {
			enterprise(t)
			t.Backends = append(t.Backends, Backend{BackendID: HostedBackendID})
		}, now, nil},
		{"several, in the contract's order", func(t *Token) {
			t.SpecVersion = ""
			t.TokenID = ""
			t.Signature.Alg = ""
			t.Backends = nil
		}, time.Unix(fixtureExpires, 0),
			[]string{IssueInvalidSpecVersion, IssueMissingTokenID, IssueTokenExpired, IssueUnsupportedSignatureAlg, IssueMissingBackend}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := fixture()
			tt.mutate(tok)
			issues := tok.ValidateBasic(tt.now)
			var codes []string
			for _, is := range issues {
				codes = append(codes, is.Code)
				assert.NotEmpty(t, is.Message)
			}
			assert.Equal(t, tt.want, codes)
		})
	}
}
