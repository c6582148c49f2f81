package tools

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/crux-go/crux/internal/codec"
	"github.com/crux-go/crux/toolkit"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/fxamacker/cbor/v2"
	"lukechampine.com/blake3"

	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/surface"
)

// hexBytes is a byte string that JSON shows as lowercase hex (and CBOR as a
// byte string).
type hexBytes []byte

// MarshalJSON writes the bytes as a hex string, or null when nil.
func (h hexBytes) MarshalJSON() ([]byte, error) {
	if h == nil {
		return []byte("null"), nil
	}
	return json.Marshal(hex.EncodeToString(h))
}

// capabilityOf is what the server's router says about one tool: its
// decision, or an unenforced allow when there is no router.
func capabilityOf(ctx context.Context, env *toolkit.Env, name string) CapabilityNode {
	n := CapabilityNode{Tool: name, Capability: surface.Capability(name), Tier: env.Surface.Tier(name).String(),
		Affinity: string(surface.AffinityOf(name)), Allowed: true, Mode: "unenforced", BackendID: rcx.LocalBackendID}
	if env.Router == nil {
		return n
	}
	d := env.Router.Decide(ctx, env.CapabilityCall(name))
	n.Allowed, n.Mode, n.BackendID, n.ReasonCode = d.Authorised, string(d.Mode), d.BackendID, d.ReasonCode
	return n
}

// CapabilityNode is one tool in a session plan's capability graph.
type CapabilityNode struct {
	Tool       string `json:"tool" cbor:"tool"`
	Capability string `json:"capability" cbor:"capability"`
	Tier       string `json:"tier" cbor:"tier"`
	Affinity   string `json:"affinity" cbor:"affinity"`
	Allowed    bool   `json:"allowed" cbor:"allowed"`
	Mode       string `json:"mode" cbor:"mode"` // the router's mode; "unenforced" without a router
	BackendID  string `json:"backend_id" cbor:"backend_id"`
	ReasonCode string `json:"reason_code,omitempty" cbor:"reason_code,omitempty"`
}

// PlanReceipt binds a session plan: hash is BLAKE3 of the plan's RFC 8949
// core deterministic CBOR with hash zeroed and signature and signer_kid
// null; signature is Ed25519 over the 32-byte hash by signer_kid.
type PlanReceipt struct {
	Mode        string     `json:"mode" cbor:"mode"`
	Hash        hexBytes   `json:"hash" cbor:"hash"`
	Signature   hexBytes   `json:"signature" cbor:"signature"`
	SignerKID   *string    `json:"signer_kid" cbor:"signer_kid"`
	ParentChain []hexBytes `json:"parent_chain,omitempty" cbor:"parent_chain,omitempty"`
	// ReceiptID is the stored receipt (kind session_plan) that records the
	// plan's hash; `crux verify receipt` checks it. Not part of the hash.
	ReceiptID string `json:"receipt_id" cbor:"-"`
}

// CuecruxSessionOutput is what cuecrux_session returns: the session plan.
type CuecruxSessionOutput struct {
	PlanID          string           `json:"plan_id" cbor:"plan_id"`
	SessionID       string           `json:"session_id" cbor:"session_id"`
	Passport        string           `json:"passport" cbor:"passport"`
	TenantID        string           `json:"tenant_id" cbor:"tenant_id"`
	Intent          string           `json:"intent" cbor:"intent"`
	Channels        map[string]any   `json:"channels" cbor:"channels"`
	CapabilityGraph []CapabilityNode `json:"capability_graph" cbor:"capability_graph"`
	Excluded        []CapabilityNode `json:"excluded" cbor:"excluded"`
	Budget          map[string]any   `json:"budget" cbor:"budget"`
	Notes           []string         `json:"notes" cbor:"notes"`
	Receipt         PlanReceipt      `json:"receipt" cbor:"receipt"`
	MintedAt        string           `json:"minted_at" cbor:"minted_at"`
	SessionTTLs     int64            `json:"session_ttl_s" cbor:"session_ttl_s"`
}

var detCBOR = codec.Must(cbor.CoreDetEncOptions().EncMode())

// planHash is the hash that binds p (see planReceipt).
func planHash(p CuecruxSessionOutput) ([32]byte, error) {
	p.Receipt.Hash = make(hexBytes, 32)
	p.Receipt.Signature, p.Receipt.SignerKID = nil, nil
	b, err := detCBOR.Marshal(p)
	if err != nil {
		return [32]byte{}, err
	}
	return blake3.Sum256(b), nil
}

// DefaultPlanCapabilities is how many tools a cuecrux_session plan lists
// in its capability_graph when hints.max_capabilities is not given (those
// of the declared intent first), so that the answer stays under 8 KB; a
// note says how many more there are.
const DefaultPlanCapabilities = 14

type sessionArgs struct {
	Intent string `json:"intent,omitempty" doc:"Free text; empty clears it."`
	Hints  struct {
		PreferBulk      bool `json:"prefer_bulk" schema:"optional"`
		MaxCapabilities *int `json:"max_capabilities" schema:"optional;minimum=0" doc:"Tools listed: default 14."`
		WantParentChain bool `json:"want_parent_chain" schema:"optional"`
		HideExclusions  bool `json:"hide_exclusions" schema:"optional;default=false"`
	} `json:"hints,omitempty"`
}

func cuecruxSession() *toolkit.Tool {
	const name = surface.SessionTool
	return &toolkit.Tool{
		Name:        name,
		Description: "Your signed plan: the tools you may call (mode, tier), and those you may not with why. intent audit_review, document_ingest, session_review, compliance_export or knowledge_query orders it.",
		Annotations: toolkit.Annotations{Title: "Open session"},
		Out:         toolkit.OutputOf[CuecruxSessionOutput](),
		Run:         toolkit.Bind(name, runCuecruxSession),
	}
}

// runCuecruxSession runs one cuecrux_session (surface.SessionTool) call.
func runCuecruxSession(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *sessionArgs) (*toolkit.Result, error) {
	now := env.Time()
	intent, known := surface.ParseIntent(in.Intent)

	p := draftPlan(ctx, env, c, in, intent, known, now)

	err := env.Store.Update(ctx, func(tx store.Tx) error {
		q := p
		if in.Hints.WantParentChain {
			parent, err := store.LastPlanHash(tx, c.TenantID(), c.Name())
			if err != nil {
				return err
			}
			q.Receipt.ParentChain = []hexBytes{}
			if parent != nil {
				q.Receipt.ParentChain = append(q.Receipt.ParentChain, parent)
			}
		}
		hash, err := planHash(q)
		if err != nil {
			return err
		}
		sig, err := env.Signer.Sign(hash[:])
		if err != nil {
			return err
		}
		kid := env.Signer.KeyID()
		q.Receipt.Hash, q.Receipt.Signature, q.Receipt.SignerKID = hash[:], sig, &kid
		r, err := receipts.Append(tx, env.Signer, c.TenantID(), "session_plan", c.Name(), map[string]any{
			"plan_id": q.PlanID, "session_id": q.SessionID, "plan_hash": hash[:], "intent": q.Intent,
		}, now)
		if err != nil {
			return err
		}
		q.Receipt.ReceiptID = r.ID
		err = store.PutSessionBinding(tx, &store.SessionBinding{
			SessionID: q.SessionID, Tenant: c.TenantID(), PassportID: c.Name(), PlanHash: hash[:],
			OpenedAt: now, ExpiresAt: now.Add(surface.IntentTTL),
		})
		p = q
		return err
	})
	if err != nil {
		return nil, err
	}
	env.RecordIntent(c, intent, now) // only once the plan is stored: a failed call changes nothing
	return toolkit.JSONResult(p)
}

// draftPlan is the plan cuecrux_session signs: the tools the caller may
// call, those of intent first and at most hints.max_capabilities
// (DefaultPlanCapabilities without it), those it may not unless
// hints.hide_exclusions, the router's budget, and notes on hints crux
// does not act on.
func draftPlan(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *sessionArgs, intent surface.Intent, known bool, now time.Time) CuecruxSessionOutput {
	p := CuecruxSessionOutput{
		PlanID: store.NewID("plan_"), SessionID: store.NewID(""), Passport: c.Name(), TenantID: c.TenantID(),
		Intent: in.Intent, Channels: map[string]any{"mcp": map[string]any{"transport": "mcp", "enforced": env.Router != nil}},
		CapabilityGraph: []CapabilityNode{}, Excluded: []CapabilityNode{}, Notes: []string{},
		MintedAt: now.Format(time.RFC3339Nano), SessionTTLs: int64(surface.IntentTTL / time.Second),
	}
	if in.Intent != "" && !known {
		p.Notes = append(p.Notes, "intent recorded as free text: it shapes nothing (see the description for the five that do)")
	}
	if in.Hints.PreferBulk {
		p.Notes = append(p.Notes, "prefer_bulk: crux serves no bulk channel; every call goes over mcp")
	}
	budget := map[string]any{"tier": "unenforced", "receipt_class": "", "token_id": ""}
	if env.Router != nil {
		info := env.Router.Info()
		budget = map[string]any{"tier": info.Tier, "receipt_class": info.ReceiptClass, "token_id": info.TokenID}
	}
	p.Budget = budget
	for _, t := range env.Tools {
		if n := capabilityOf(ctx, env, t); n.Allowed {
			p.CapabilityGraph = append(p.CapabilityGraph, n)
		} else if !in.Hints.HideExclusions {
			p.Excluded = append(p.Excluded, n)
		}
	}
	slices.SortStableFunc(p.CapabilityGraph, func(a, b CapabilityNode) int {
		return intent.Bias(surface.Affinity(b.Affinity)) - intent.Bias(surface.Affinity(a.Affinity))
	})
	limit := DefaultPlanCapabilities
	if m := in.Hints.MaxCapabilities; m != nil {
		limit = *m
	}
	if limit < len(p.CapabilityGraph) {
		if in.Hints.MaxCapabilities == nil {
			p.Notes = append(p.Notes, fmt.Sprintf("capability_graph lists the first %d of the %d tools you may call, "+
				"those of your intent first; hints.max_capabilities lists more", limit, len(p.CapabilityGraph)))
		}
		p.CapabilityGraph = p.CapabilityGraph[:limit]
	}
	p.Receipt.Mode = "local"
	return p
}

// ---- autonomy_contract ----

type autonomyArgs struct {
	TokenBudget int `json:"token_budget,omitempty" schema:"minimum=1"`
}

// AutonomyContractOutput is what autonomy_contract returns. Without a
// router, tier is "unenforced" and the token fields are null.
type AutonomyContractOutput struct {
	Capabilities   []AutonomyRow   `json:"capabilities"`
	FeatureEnabled bool            `json:"feature_enabled"`
	PassportID     string          `json:"passport_id"`
	Summary        AutonomySummary `json:"summary"`
	Tier           string          `json:"tier"`
	TokenHash      *string         `json:"token_hash"`
	TokenID        *string         `json:"token_id"`
}

// AutonomySummary counts the tools of an autonomy matrix.
type AutonomySummary struct {
	Allowed                int  `json:"allowed"`
	Denied                 int  `json:"denied"`
	Returned               int  `json:"returned"`
	TotalTools             int  `json:"total_tools"`
	TruncatedByTokenBudget bool `json:"truncated_by_token_budget"`
}

// AutonomyRow is one tool of the autonomy matrix.
type AutonomyRow struct {
	Name        string `json:"name"`
	Allowed     bool   `json:"allowed"`
	Scope       string `json:"scope"`
	BackendID   string `json:"backend_id"`
	Mode        string `json:"mode"`
	CostCredits uint64 `json:"cost_credits"`
	WhyDenied   string `json:"why_denied,omitempty"`
}

func autonomyContract() *toolkit.Tool {
	const name = "autonomy_contract"
	return &toolkit.Tool{
		Name:        name,
		Description: "Your per-tool matrix under the capability token: allowed and why, mode, cost. Flag AUTONOMY_CONTRACT.",
		Annotations: toolkit.Annotations{Title: "Autonomy contract", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[AutonomyContractOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *autonomyArgs) (*toolkit.Result, error) {
			out := AutonomyContractOutput{FeatureEnabled: env.Flags.AutonomyContract, PassportID: c.Name(), Tier: "unenforced"}
			if env.Router != nil {
				info := env.Router.Info()
				out.Tier, out.TokenID, out.TokenHash = info.Tier, &info.TokenID, &info.TokenHash
			}
			rows := []AutonomyRow{}
			allowed, denied, total := 0, 0, 0
			b := budget{Limit: in.TokenBudget}
			if out.FeatureEnabled {
				total = len(env.Tools)
				for _, t := range env.Tools {
					n := capabilityOf(ctx, env, t)
					row := AutonomyRow{Name: t, Allowed: n.Allowed, Scope: n.Capability, BackendID: n.BackendID, Mode: n.Mode, WhyDenied: n.ReasonCode}
					if n.Allowed {
						allowed++
					} else {
						denied++
					}
					if b.take(rowTokens(row)) {
						rows = append(rows, row)
					}
				}
			}
			out.Capabilities = rows
			out.Summary = AutonomySummary{TotalTools: total, Returned: len(rows), Allowed: allowed,
				Denied: denied, TruncatedByTokenBudget: b.Exceeded}
			return toolkit.JSONResult(out)
		}),
	}
}

// ---- resolve_principal ----

type resolveArgs struct {
	SessionID  string `json:"session_id,omitempty" schema:"minLength=1"`
	PassportID string `json:"passport_id,omitempty" schema:"minLength=1"`
}

var errSessionExpired = errors.New("session expired")

// Principal is who resolve_principal found. What only a passport
// record can say (tier, category, the work gate) is null for an id without
// one: nothing is invented.
type Principal struct {
	PassportID    string   `json:"passport_id"`
	Category      *string  `json:"category"`
	Tier          *string  `json:"tier"`
	TierRank      *int     `json:"tier_rank"`
	Capabilities  []string `json:"capabilities"`
	TenantID      string   `json:"tenant_id"`
	AgentWorkGate *string  `json:"agent_work_gate"`
	ResolvedVia   string   `json:"resolved_via"`
	HasRecord     bool     `json:"has_passport_record"`
	Revoked       bool     `json:"revoked"`
	Note          string   `json:"note,omitempty"`
}

// ResolvePrincipalOutput is what resolve_principal returns: the principal
// and the argument it was resolved from (session_id, passport_id, or caller
// for the caller's own identity).
type ResolvePrincipalOutput struct {
	Principal     Principal `json:"principal"`
	ResolvedParam string    `json:"resolved_param"`
}

func resolvePrincipal() *toolkit.Tool {
	const name = "resolve_principal"
	return &toolkit.Tool{
		Name:        name,
		Description: "The passport behind session_id, passport_id or you: record or none, tier, category, capabilities.",
		Annotations: toolkit.Annotations{Title: "Resolve principal", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[ResolvePrincipalOutput](),
		Run:         toolkit.Bind(name, runResolvePrincipal),
	}
}

// runResolvePrincipal runs one resolve_principal call.
func runResolvePrincipal(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *resolveArgs) (*toolkit.Result, error) {
	const name = "resolve_principal"
	if err := checkNames(name, "session_id", in.SessionID, "passport_id", in.PassportID); err != nil {
		return nil, err
	}
	tenant, now := c.TenantID(), env.Time()
	var p Principal
	var param string
	err := env.Store.View(ctx, func(tx store.Tx) error {
		switch {
		case in.SessionID != "":
			b, err := store.GetSessionBinding(tx, tenant, in.SessionID)
			if err != nil {
				return err
			}
			if now.After(b.ExpiresAt) {
				return errSessionExpired
			}
			p.PassportID, p.ResolvedVia, param = b.PassportID, "session", "session_id"
		case in.PassportID != "":
			p.PassportID, p.ResolvedVia, param = in.PassportID, "passport", "passport_id"
		case c.Identity() != "":
			p.PassportID, p.ResolvedVia, param = c.Identity(), "identity_link:"+c.Identity(), "caller"
		default:
			return toolkit.InvalidParams(name, "passport_id", "is required when the caller has no identity and no session_id is given")
		}
		p.TenantID = tenant
		rec, err := store.GetPassport(tx, tenant, p.PassportID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			p.Note = "no passport record for " + p.PassportID + " in tenant " + tenant + ": its tier, category " +
				"and work gate are unknown (issue_passport issues one)"
			return nil
		case err != nil:
			return err
		}
		earned, _, err := earnedTier(tx, tenant, p.PassportID)
		if err != nil {
			return err
		}
		tier := rec.Tier
		if store.TierRank(earned) > store.TierRank(tier) {
			tier = earned // get_passport stores the upgrade when it is asked
		}
		rank := store.TierRank(tier)
		gate := "open"
		if rec.Revoked() && env.Flags.PassportRevocation {
			gate = "closed"
		}
		p.HasRecord, p.Tier, p.TierRank, p.Revoked, p.AgentWorkGate = true, &tier, &rank, rec.Revoked(), &gate
		if rec.Category != "" {
			p.Category = &rec.Category
		}
		return nil
	})
	var e *toolkit.Error
	switch {
	case errors.As(err, &e):
		return nil, e
	case errors.Is(err, store.ErrNotFound):
		return toolkit.ErrorResult("no session %s in tenant %s", in.SessionID, tenant), nil
	case errors.Is(err, errSessionExpired):
		return toolkit.ErrorResult("session %s has expired", in.SessionID), nil
	case err != nil:
		return nil, err
	}
	p.Capabilities = []string{}
	for _, t := range env.Tools {
		if n := capabilityOf(ctx, env, t); n.Allowed && !slices.Contains(p.Capabilities, n.Capability) {
			p.Capabilities = append(p.Capabilities, n.Capability)
		}
	}
	return toolkit.JSONResult(ResolvePrincipalOutput{Principal: p, ResolvedParam: param})
}

// JSONSchema is the schema of what a hexBytes marshals to: a hex string, or
// null when nil.
func (hexBytes) JSONSchema() *jsonschema.Schema {
	return &jsonschema.Schema{Types: []string{"null", "string"}}
}
