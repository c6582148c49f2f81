package rcx

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// freeRouter mints a free-local token with s at fixtureIssued and returns
// a router over it with the clock at now.
func freeRouter(t *testing.T, s *testSigner, now int64, opts FreeLocalOptions) (*TokenRouter, *Token) {
	t.Helper()
	opts.IssuedAt = time.Unix(fixtureIssued, 0)
	tok, err := MintFreeLocal(s, opts)
	require.NoError(t, err)
	r, err := NewRouter(tok, s.Public(), &RouterOptions{Now: at(now)})
	require.NoError(t, err)
	require.NoError(t, r.Err())
	return r, tok
}

func TestDecideFreeLocal(t *testing.T) {
	s := newSigner(1)
	r, tok := freeRouter(t, s, fixtureIssued+10, FreeLocalOptions{Capabilities: testCaps})
	hash, err := tok.HashHex()
	require.NoError(t, err)
	ctx := context.Background()

	t.Run("local tool authorised", func(t *testing.T) {
		for _, name := range []string{"crux-mcp.store_fact", "corecrux.query.local", "crux-mcp.cuecrux_session", "crux-mcp.sync_status"} {
			d := r.Decide(ctx, Call{Capability: name})
			assert.Equal(t, Decision{
				Authorised: true,
				Mode:       ModeLocal,
				BackendID:  LocalBackendID,
				TokenID:    tok.TokenID,
				TokenHash:  hash,
				Stamp:      Stamp{Header: StampHeader, Mode: ModeLocal, TokenID: tok.TokenID, TokenHash: hash},
			}, d, name)
		}
	})

	t.Run("hosted tool refused with receipt", func(t *testing.T) {
		for _, name := range []string{"sync_pull", "sync_push", "issue_passport"} {
			d := r.Decide(ctx, Call{Capability: "crux-mcp." + name})
			assert.False(t, d.Authorised)
			assert.Equal(t, ModeRefused, d.Mode)
			assert.Equal(t, ReasonCapabilityNotPermitted, d.ReasonCode)
			assert.Equal(t, Stamp{Header: StampHeader, Mode: ModeRefused, ReasonCode: ReasonCapabilityNotPermitted, TokenID: tok.TokenID, TokenHash: hash}, d.Stamp)
			assert.Equal(t, &RefusalReceipt{
				EventType:            RefusalEventType,
				TokenID:              tok.TokenID,
				TokenHash:            hash,
				Capability:           "crux-mcp." + name,
				BackendID:            LocalBackendID,
				DataEgressClasses:    []string{},
				RequiredAttestations: []string{},
				PresentAttestations:  []string{},
				ReasonCode:           ReasonCapabilityNotPermitted,
				ReceiptClass:         "verified",
			}, d.RefusalReceipt)
		}
	})

	t.Run("hosted tool via ToolCall prefers the hosted backend", func(t *testing.T) {
		d := r.Decide(ctx, call("sync_pull"))
		assert.Equal(t, ReasonCapabilityNotPermitted, d.ReasonCode)
		assert.Equal(t, HostedBackendID, d.BackendID)
		assert.Equal(t, HostedBackendID, d.RefusalReceipt.BackendID)
		assert.Equal(t, []string{"none"}, d.RefusalReceipt.DataEgressClasses)
		assert.True(t, r.Decide(ctx, call("store_fact")).Authorised)
	})

	t.Run("text egress refused", func(t *testing.T) {
		d := r.Decide(ctx, Call{Capability: "corecrux.query.local", EgressClasses: []string{"none", "text"}})
		assert.Equal(t, ReasonEgressNotPermitted, d.ReasonCode)
		assert.Equal(t, []string{"none", "text"}, d.RefusalReceipt.DataEgressClasses)
	})

	t.Run("unknown backend", func(t *testing.T) {
		d := r.Decide(ctx, Call{Capability: "crux-mcp.store_fact", PreferredBackend: "elsewhere"})
		assert.Equal(t, ReasonCapabilityNotPermitted, d.ReasonCode)
		assert.Equal(t, "elsewhere", d.RefusalReceipt.BackendID)
	})

	t.Run("info", func(t *testing.T) {
		assert.Equal(t, Info{TokenID: tok.TokenID, TokenHash: hash, Tier: "free", ReceiptClass: "verified"}, r.Info())
	})
}

func TestDecideAgentPassports(t *testing.T) {
	s := newSigner(1)
	caps := append(slices.Clone(testCaps), "crux-mcp.issue_passport")
	r, _ := freeRouter(t, s, fixtureIssued+10, FreeLocalOptions{Capabilities: caps})
	assert.True(t, r.Decide(context.Background(), ToolCall("crux-mcp.issue_passport", false)).Authorised)
	assert.False(t, r.Decide(context.Background(), ToolCall("crux-mcp.sync_push", true)).Authorised)
}

func TestDecideTokenValidity(t *testing.T) {
	s, other := newSigner(1), newSigner(2)
	ctx := context.Background()
	local := Call{Capability: "corecrux.query.local"}

	type tc struct {
		name    string
		tok     func() *Token
		trusted *testSigner
		now     int64
		call    Call
		auth    bool
		mode    Mode
		reason  string
		errIs   error
	}
	free := func() *Token { return signed(t, issuedBy(fixture(), s), s) }
	withExpiry := func(a FallbackAction, ttl *uint64) func() *Token {
		return func() *Token {
			tok := issuedBy(fixture(), s)
			tok.Fallback.OnExpiry = a
			tok.Fallback.QueueTTLSeconds = ttl
			return signed(t, tok, s)
		}
	}
	tests := []tc{
		{name: "valid", tok: free, trusted: s, now: fixtureIssued + 1, call: local, auth: true, mode: ModeLocal},
		{name: "expired", tok: free, trusted: s, now: fixtureExpires, call: local, mode: ModeRefused, reason: ReasonTokenExpired},
		{name: "expired, degrade to local", tok: withExpiry(FallbackDegradeToLocal, nil), trusted: s, now: fixtureExpires + 1,
			call: local, auth: true, mode: ModeDegradedLocal, reason: ReasonTokenExpired},
		{name: "expired, degrade never widens the grant", tok: withExpiry(FallbackDegradeToLocal, nil), trusted: s, now: fixtureExpires + 1,
			call: Call{Capability: "crux-mcp.sync_pull"}, mode: ModeRefused, reason: ReasonTokenExpired},
		{name: "expired, queue is not honoured", tok: withExpiry(FallbackQueue, new(uint64(60))), trusted: s, now: fixtureExpires + 1,
			call: local, mode: ModeRefused, reason: ReasonTokenExpired},
		{name: "not yet valid", tok: free, trusted: s, now: fixtureIssued - 1, call: local, mode: ModeRefused, reason: ReasonTokenInvalid},
		{name: "signed by another key", tok: func() *Token { return signed(t, issuedBy(fixture(), other), other) }, trusted: s,
			now: fixtureIssued + 1, call: local, mode: ModeRefused, reason: ReasonTokenInvalid, errIs: ErrBadSignature},
		{name: "other key, expired with degrade", tok: func() *Token {
			tok := issuedBy(fixture(), other)
			tok.Fallback.OnExpiry = FallbackDegradeToLocal
			return signed(t, tok, other)
		}, trusted: s, now: fixtureExpires + 1, call: local, mode: ModeRefused, reason: ReasonTokenInvalid, errIs: ErrBadSignature},
		{name: "tampered after signing", tok: func() *Token {
			tok := free()
			tok.Backends[0].PermittedCapabilities[0].Capability = "crux-mcp.sync_pull"
			return tok
		}, trusted: s, now: fixtureIssued + 1, call: Call{Capability: "crux-mcp.sync_pull"}, mode: ModeRefused, reason: ReasonTokenInvalid, errIs: ErrBadSignature},
		{name: "unsigned", tok: func() *Token { return issuedBy(fixture(), s) }, trusted: s, now: fixtureIssued + 1,
			call: local, mode: ModeRefused, reason: ReasonTokenInvalid, errIs: ErrBadSignature},
		{name: "structurally invalid", tok: func() *Token {
			tok := issuedBy(fixture(), s)
			tok.RefreshHintAt = tok.ExpiresAt
			return signed(t, tok, s)
		}, trusted: s, now: fixtureIssued + 1, call: local, mode: ModeRefused, reason: ReasonTokenInvalid},
		{name: "unencodable", tok: func() *Token { tok := free(); tok.Tier = "gold"; return tok }, trusted: s, now: fixtureIssued + 1,
			call: local, mode: ModeRefused, reason: ReasonTokenInvalid, errIs: ErrInvalidValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRouter(tt.tok(), tt.trusted.Public(), &RouterOptions{Now: at(tt.now)})
			require.NoError(t, err)
			d := r.Decide(ctx, tt.call)
			assert.Equal(t, tt.auth, d.Authorised)
			assert.Equal(t, tt.mode, d.Mode)
			assert.Equal(t, tt.reason, d.ReasonCode)
			assert.Equal(t, tt.reason, d.Stamp.ReasonCode)
			assert.Equal(t, tt.mode, d.Stamp.Mode)
			assert.False(t, d.Stamp.RevocationChecked)
			assert.Equal(t, !tt.auth, d.RefusalReceipt != nil)
			if d.RefusalReceipt != nil {
				assert.Equal(t, tt.reason, d.RefusalReceipt.ReasonCode)
				assert.Equal(t, tt.call.Capability, d.RefusalReceipt.Capability)
			}
			if tt.mode == ModeDegradedLocal {
				assert.Equal(t, LocalBackendID, d.BackendID)
			}
			if tt.errIs != nil {
				assert.ErrorIs(t, r.Err(), tt.errIs)
			}
			if tt.reason == ReasonTokenInvalid && tt.now >= fixtureIssued {
				assert.Error(t, r.Err())
			}
		})
	}
}

func TestDecideHosted(t *testing.T) {
	s := newSigner(4)
	ctx := context.Background()
	u64 := func(v uint64) *uint64 { return &v }
	type tc struct {
		name                     string
		onUnreachable, onCredits FallbackAction
		queueTTL, balance, limit *uint64
		overdraft                Overdraft
		receiptClass             ReceiptClass
		reachable                func(string) bool
		call                     Call
		auth                     bool
		mode                     Mode
		reason                   string
		backend                  string
		wantTTL                  *uint64
		required, present        []string
	}
	tests := []tc{
		{name: "authorised hosted", balance: u64(10), call: retrieveCall(1), auth: true, mode: ModeHosted, backend: HostedBackendID},
		{name: "local backend of the same token", balance: u64(10), call: Call{Capability: "corecrux.query.local"},
			auth: true, mode: ModeLocal, backend: LocalBackendID},
		{name: "egress not permitted", balance: u64(10),
			call: func() Call { c := retrieveCall(1); c.EgressClasses = append(c.EgressClasses, "text"); return c }(),
			mode: ModeRefused, reason: ReasonEgressNotPermitted, backend: HostedBackendID,
			required: []string{"passport_bound"}, present: []string{"passport_bound"}},
		{name: "attestation missing", balance: u64(10),
			call: func() Call { c := retrieveCall(1); c.Attestations = nil; return c }(),
			mode: ModeRefused, reason: ReasonAttestationMissing, backend: HostedBackendID,
			required: []string{"passport_bound"}, present: []string{}},
		{name: "capability cost enforced when the estimate is 0", balance: u64(0), call: retrieveCall(0),
			mode: ModeRefused, reason: ReasonInsufficientCredit, backend: HostedBackendID},
		{name: "estimate above capability cost", balance: u64(3), call: retrieveCall(5),
			mode: ModeRefused, reason: ReasonInsufficientCredit, backend: HostedBackendID},
		{name: "null balance is zero", call: retrieveCall(1), mode: ModeRefused, reason: ReasonInsufficientCredit, backend: HostedBackendID},
		{name: "credits exhausted, degrade to local", onCredits: FallbackDegradeToLocal, balance: u64(0), call: retrieveCall(1),
			auth: true, mode: ModeDegradedLocal, reason: ReasonInsufficientCredit, backend: LocalBackendID},
		{name: "credits exhausted, queue", onCredits: FallbackQueue, queueTTL: u64(120), balance: u64(0), call: retrieveCall(1),
			auth: true, mode: ModeDegradedQueued, reason: ReasonInsufficientCredit, backend: HostedBackendID, wantTTL: u64(120)},
		{name: "credits exhausted, queue without ttl", onCredits: FallbackQueue, balance: u64(0), call: retrieveCall(1),
			mode: ModeRefused, reason: ReasonInsufficientCredit, backend: HostedBackendID},
		{name: "overdraft warn within limit", overdraft: OverdraftWarn, balance: u64(1), limit: u64(5), call: retrieveCall(6),
			auth: true, mode: ModeHosted, backend: HostedBackendID},
		{name: "overdraft allow_to_limit beyond limit", overdraft: OverdraftAllowToLimit, balance: u64(1), limit: u64(5), call: retrieveCall(7),
			mode: ModeRefused, reason: ReasonInsufficientCredit, backend: HostedBackendID},
		{name: "overdraft saturates", overdraft: OverdraftWarn, balance: u64(1), limit: u64(^uint64(0)), call: retrieveCall(^uint64(0)),
			auth: true, mode: ModeHosted, backend: HostedBackendID},
		{name: "overdraft forbid ignores limit", overdraft: OverdraftForbid, balance: u64(1), limit: u64(5), call: retrieveCall(2),
			mode: ModeRefused, reason: ReasonInsufficientCredit, backend: HostedBackendID},
		{name: "replay with cost", receiptClass: ReceiptReplay, balance: u64(10), call: retrieveCall(1),
			mode: ModeRefused, reason: ReasonReceiptClassSideEffectDenied, backend: HostedBackendID},
		{name: "replay without cost", receiptClass: ReceiptReplay, call: Call{Capability: "corecrux.query.local"},
			auth: true, mode: ModeLocal, backend: LocalBackendID},
		{name: "unreachable", balance: u64(10), reachable: func(string) bool { return false }, call: retrieveCall(1),
			mode: ModeRefused, reason: ReasonBackendUnavailable, backend: HostedBackendID},
		{name: "unreachable, queue", onUnreachable: FallbackQueue, queueTTL: u64(30), balance: u64(10),
			reachable: func(string) bool { return false }, call: retrieveCall(1),
			auth: true, mode: ModeDegradedQueued, reason: ReasonBackendUnavailable, backend: HostedBackendID, wantTTL: u64(30)},
		{name: "unreachable, degrade", onUnreachable: FallbackDegradeToLocal, balance: u64(10),
			reachable: func(string) bool { return false }, call: retrieveCall(1),
			auth: true, mode: ModeDegradedLocal, reason: ReasonBackendUnavailable, backend: LocalBackendID},
		{name: "local is never asked about reachability", balance: u64(10),
			reachable: func(string) bool { panic("asked") }, call: Call{Capability: "corecrux.query.local"},
			auth: true, mode: ModeLocal, backend: LocalBackendID},
		{name: "reachable", balance: u64(10), reachable: func(id string) bool { return id == HostedBackendID }, call: retrieveCall(1),
			auth: true, mode: ModeHosted, backend: HostedBackendID},
		{name: "capability on another backend", balance: u64(10),
			call: Call{Capability: HostedRetrieveCapability},
			mode: ModeRefused, reason: ReasonCapabilityNotPermitted, backend: LocalBackendID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orDefault := func(a FallbackAction) FallbackAction {
				if a == "" {
					return FallbackRefuse
				}
				return a
			}
			tok := hostedToken(s, orDefault(tt.onUnreachable), orDefault(tt.onCredits), FallbackRefuse, tt.queueTTL, tt.balance)
			tok.Credits.OverdraftLimit = tt.limit
			if tt.overdraft != "" {
				tok.Credits.Overdraft = tt.overdraft
			}
			if tt.receiptClass != "" {
				tok.ReceiptClass = tt.receiptClass
			}
			signed(t, tok, s)
			r, err := NewRouter(tok, s.Public(), &RouterOptions{Now: at(fixtureIssued + 1), Reachable: tt.reachable})
			require.NoError(t, err)
			require.NoError(t, r.Err())

			d := r.Decide(ctx, tt.call)
			assert.Equal(t, tt.auth, d.Authorised)
			assert.Equal(t, tt.mode, d.Mode)
			assert.Equal(t, tt.reason, d.ReasonCode)
			assert.Equal(t, tt.backend, d.BackendID)
			assert.Equal(t, tt.mode, d.Stamp.Mode)
			assert.Equal(t, tt.wantTTL, d.Stamp.QueueTTLSeconds)
			if tt.auth {
				assert.Nil(t, d.RefusalReceipt)
				return
			}
			require.NotNil(t, d.RefusalReceipt)
			rr := d.RefusalReceipt
			assert.Equal(t, RefusalEventType, rr.EventType)
			assert.Equal(t, tt.reason, rr.ReasonCode)
			assert.Equal(t, string(tok.ReceiptClass), rr.ReceiptClass)
			if tt.required != nil {
				assert.Equal(t, tt.required, rr.RequiredAttestations)
			}
			if tt.present != nil {
				assert.Equal(t, tt.present, rr.PresentAttestations)
			}
		})
	}
}

func TestDecideCustomerHosted(t *testing.T) {
	s := newSigner(4)
	tok := hostedToken(s, FallbackRefuse, FallbackRefuse, FallbackRefuse, nil, nil)
	tok.Backends[0].BackendID = "customer:cluster-a"
	tok.Backends[0].PermittedCapabilities[0].CreditCost = nil
	signed(t, tok, s)
	r, err := NewRouter(tok, s.Public(), &RouterOptions{Now: at(fixtureIssued + 1)})
	require.NoError(t, err)
	c := retrieveCall(0)
	c.PreferredBackend = "customer:cluster-a"
	d := r.Decide(context.Background(), c)
	assert.True(t, d.Authorised)
	assert.Equal(t, ModeCustomerHosted, d.Mode)
	assert.Equal(t, "customer:cluster-a", d.BackendID)
}

func TestDecideFirstMatchingBackend(t *testing.T) {
	// Two backends with the same id: the first that lists the capability
	// wins, and within it the first entry for the capability.
	s := newSigner(4)
	tok := issuedBy(fixture(), s)
	tok.Backends = []Backend{
		{BackendID: LocalBackendID, TrustRootKID: s.KeyID(), PermittedCapabilities: []PermittedCapability{{Capability: "x", DataEgressClasses: []EgressClass{EgressNone}}}},
		{BackendID: LocalBackendID, TrustRootKID: s.KeyID(), PermittedCapabilities: []PermittedCapability{
			{Capability: "y", DataEgressClasses: []EgressClass{EgressText}},
			{Capability: "y", DataEgressClasses: []EgressClass{EgressNone}},
		}},
		{BackendID: LocalBackendID, TrustRootKID: s.KeyID(), PermittedCapabilities: []PermittedCapability{{Capability: "y", DataEgressClasses: []EgressClass{EgressNone}}}},
	}
	signed(t, tok, s)
	r, err := NewRouter(tok, s.Public(), &RouterOptions{Now: at(fixtureIssued + 1)})
	require.NoError(t, err)
	ctx := context.Background()
	assert.True(t, r.Decide(ctx, Call{Capability: "y", EgressClasses: []string{"text"}}).Authorised)
	assert.Equal(t, ReasonEgressNotPermitted, r.Decide(ctx, Call{Capability: "y", EgressClasses: []string{"none"}}).ReasonCode)
	assert.True(t, r.Decide(ctx, Call{Capability: "x"}).Authorised)
}

func TestNewRouter(t *testing.T) {
	s := newSigner(1)
	tok := signed(t, issuedBy(fixture(), s), s)

	_, err := NewRouter(nil, s.Public(), nil)
	require.Error(t, err)
	for _, key := range [][]byte{nil, make([]byte, 31), make([]byte, 32), nonCanonical(3)} {
		_, err = NewRouter(tok, key, nil)
		require.ErrorIs(t, err, ErrBadPublicKey)
	}

	// Nil options: real clock. The fixture expired in 2026, so the real
	// clock may or may not be past it; only check the router works.
	r, err := NewRouter(tok, s.Public(), nil)
	require.NoError(t, err)
	d := r.Decide(context.Background(), Call{Capability: "corecrux.query.local"})
	assert.Contains(t, []string{"", ReasonTokenExpired}, d.ReasonCode)

	// The router works on a copy.
	r, err = NewRouter(tok, s.Public(), &RouterOptions{Now: at(fixtureIssued + 1)})
	require.NoError(t, err)
	tok.Backends[0].PermittedCapabilities[0].Capability = "changed"
	tok.TokenID = "changed"
	d = r.Decide(context.Background(), Call{Capability: "corecrux.query.local"})
	assert.True(t, d.Authorised)
	assert.NotEqual(t, "changed", d.TokenID)

	// The zero router refuses everything.
	var zero TokenRouter
	d = zero.Decide(context.Background(), Call{Capability: "corecrux.query.local"})
	assert.False(t, d.Authorised)
	assert.Equal(t, ReasonTokenInvalid, d.ReasonCode)
}

func TestDecisionJSON(t *testing.T) {
	s := newSigner(1)
	r, tok := freeRouter(t, s, fixtureIssued+10, FreeLocalOptions{Capabilities: testCaps})
	hash, _ := tok.HashHex()

	d := r.Decide(context.Background(), call("sync_pull"))
	b, err := json.Marshal(d)
	require.NoError(t, err)
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Equal(t, map[string]any{
		"authorised":  false,
		"mode":        "refused",
		"backend_id":  HostedBackendID,
		"reason_code": "denied:capability_not_permitted",
		"token_id":    tok.TokenID,
		"token_hash":  hash,
		"stamp": map[string]any{
			"header": "X-Crux-Mode", "mode": "refused", "reason_code": "denied:capability_not_permitted",
			"token_id": tok.TokenID, "token_hash": hash, "queue_ttl_seconds": nil, "revocation_checked": false,
		},
		"refusal_receipt": map[string]any{
			"event_type": "rcx.capability_token.call_refused.v1", "token_id": tok.TokenID, "token_hash": hash,
			"capability": "crux-mcp.sync_pull", "backend_id": HostedBackendID,
			"data_egress_classes": []any{"none"}, "required_attestations": []any{}, "present_attestations": []any{},
			"reason_code": "denied:capability_not_permitted", "receipt_class": "verified",
		},
	}, got)

	ok := r.Decide(context.Background(), call("store_fact"))
	b, err = json.Marshal(ok)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &got))
	assert.Nil(t, got["reason_code"])
	assert.Nil(t, got["refusal_receipt"])
	assert.Nil(t, got["stamp"].(map[string]any)["reason_code"])

	var back Decision
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, ok, back)
}

func TestUpgradeHintFor(t *testing.T) {
	for _, scope := range MeteredScopes() {
		h := UpgradeHintFor(scope)
		require.NotNil(t, h, scope)
		assert.Equal(t, UpgradeHintKind, h.Kind)
		assert.Equal(t, scope, h.Capability)
		assert.Equal(t, "pro", h.Tier)
		assert.NotEmpty(t, h.Unlocks)
		assert.Contains(t, h.StillFree, "uncapped")
	}
	for _, c := range []string{"crux-mcp.sync_pull", "crux-mcp.issue_passport", "corecrux.query.local", "crux-mcp.dense_search", ""} {
		assert.Nil(t, UpgradeHintFor(c), c)
	}
	b, err := json.Marshal(UpgradeHintFor(ScopeDenseRerank))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, k := range []string{"kind", "capability", "tier", "unlocks", "metering", "still_free", "deploy"} {
		assert.Contains(t, m, k)
	}
	assert.Len(t, m, 7)
}

func TestDecideConcurrent(t *testing.T) {
	s := newSigner(1)
	r, _ := freeRouter(t, s, fixtureIssued+10, FreeLocalOptions{Capabilities: testCaps})
	done := make(chan bool)
	for i := range 8 {
		go func() {
			ok := true
			for j := range 200 {
				name := "store_fact"
				if (i+j)%2 == 0 {
					name = "sync_pull"
				}
				d := r.Decide(context.Background(), call(name))
				ok = ok && d.Authorised == (name == "store_fact")
			}
			done <- ok
		}()
	}
	for range 8 {
		assert.True(t, <-done)
	}
}
