package tools

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

type issuePassportArgs struct {
	SponsorID string `json:"sponsor_id,omitempty" schema:"minLength=1"`
}

// IssuePassportOutput is what issue_passport returns: the passport, and
// whether this call created it.
type IssuePassportOutput struct {
	Created        bool   `json:"created"`
	IssuedAt       string `json:"issued_at"`
	PrincipalID    string `json:"principal_id"`
	ReceiptCount   uint64 `json:"receipt_count"`
	ReputationTier string `json:"reputation_tier"`
	SponsorID      string `json:"sponsor_id"`
}

func issuePassport() *toolkit.Tool {
	const name = "issue_passport"
	return &toolkit.Tool{
		Name:        name,
		Description: "Issue your passport (tier and revocation hang on it); an existing one comes back.",
		Annotations: toolkit.Annotations{Title: "Issue passport", IdempotentHint: true},
		Out:         toolkit.OutputOf[IssuePassportOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *issuePassportArgs) (*toolkit.Result, error) {
			if err := needIdentity(name, c); err != nil {
				return nil, err
			}
			id := c.Identity()
			var p *store.Passport
			created := false
			err := env.Store.Update(ctx, func(tx store.Tx) error {
				var err error
				p, err = store.GetPassport(tx, c.TenantID(), id)
				if !errors.Is(err, store.ErrNotFound) {
					return err
				}
				p = &store.Passport{PrincipalID: id, Tenant: c.TenantID(), SponsorID: in.SponsorID,
					Tier: store.TierUnverified, IssuedAt: env.Time()}
				created = true
				return store.PutPassport(tx, p)
			})
			if err != nil {
				return nil, err
			}
			return toolkit.JSONResult(IssuePassportOutput{
				PrincipalID: p.PrincipalID, ReputationTier: p.Tier, ReceiptCount: p.ReceiptCount,
				SponsorID: p.SponsorID, IssuedAt: p.IssuedAt.Format(time.RFC3339Nano), Created: created,
			})
		}),
	}
}

// maxPassportReason bounds the reason of request_passport_mint and
// revoke_passport, in UTF-8 bytes.
const maxPassportReason = 2048

// earnedTier is the tier the passport id of tenant has earned, and its
// standing: the tier follows the credit of the receipts that name it
// (refusals excepted), at most receipts.DailyCredit a UTC day, so that no
// burst of calls earns a tier that needs more days.
func earnedTier(tx store.Tx, tenant, id string) (string, receipts.Standing, error) {
	s, err := receipts.ActorStanding(tx, tenant, id)
	if err != nil {
		return "", s, err
	}
	return store.TierFor(s.Credit), s, nil
}

// tierShortfall says why a passport of standing s is of tier, for a
// refusal: "tier basic (12 receipts, 12 credited; a UTC day credits at
// most 50)".
func tierShortfall(tier string, s receipts.Standing) string {
	return fmt.Sprintf("tier %s (%d receipts, %d credited; a UTC day credits at most %d)", tier, s.Receipts, s.Credit, receipts.DailyCredit)
}

// GetPassportOutput is a passport as get_passport shows it. The revoked_*
// fields are set for a revoked passport, forked_from for one a split
// made, the retired_* fields for one a merge retired.
type GetPassportOutput struct {
	ForkedFrom     string `json:"forked_from,omitempty"`
	IssuedAt       string `json:"issued_at"`
	PassportHash   string `json:"passport_hash"`
	PrincipalID    string `json:"principal_id"`
	ReceiptCount   uint64 `json:"receipt_count"`
	ReputationTier string `json:"reputation_tier"`
	RetiredAt      string `json:"retired_at,omitempty"`
	RetiredInto    string `json:"retired_into,omitempty"`
	Revoked        bool   `json:"revoked"`
	RevokedAt      string `json:"revoked_at,omitempty"`
	RevokedBy      string `json:"revoked_by,omitempty"`
	SponsorID      string `json:"sponsor_id"`
	TenantID       string `json:"tenant_id"`
	TierCredit     uint64 `json:"tier_credit"`
}

// passportView is p as get_passport shows it.
func passportView(p *store.Passport) GetPassportOutput {
	out := GetPassportOutput{
		PrincipalID: p.PrincipalID, TenantID: p.Tenant, ReputationTier: p.Tier, ReceiptCount: p.ReceiptCount,
		SponsorID: p.SponsorID, IssuedAt: p.IssuedAt.UTC().Format(time.RFC3339Nano), PassportHash: p.Hash(),
		Revoked: p.Revoked(), ForkedFrom: p.ForkedFrom,
	}
	if p.Revoked() {
		out.RevokedAt = p.RevokedAt.UTC().Format(time.RFC3339Nano)
		out.RevokedBy = p.RevokedBy
	}
	if p.Retired() {
		out.RetiredAt = p.RetiredAt.UTC().Format(time.RFC3339Nano)
		out.RetiredInto = p.RetiredInto
	}
	return out
}

// howToIssue tells a caller without a passport how it gets one: by
// calling issue_passport when this server grants it, else by what the
// operator would have to change.
func howToIssue(ctx context.Context, env *toolkit.Env) string {
	const tool = "issue_passport"
	if env.Router == nil {
		return "call " + tool + " to get one"
	}
	d := env.Router.Decide(ctx, env.CapabilityCall(tool))
	switch {
	case d.Authorised:
		return "call " + tool + " to get one"
	case !env.Flags.AgentPassports:
		return fmt.Sprintf("%s is not granted here (%s): it is hosted-tier unless the operator turns on agent passports (%s=1)",
			tool, d.ReasonCode, feature.EnvAgentPassports)
	default:
		return fmt.Sprintf("%s is not granted here (%s): the operator grants it with the capability token", tool, d.ReasonCode)
	}
}

// errNoPassport is the failure of a passport tool for an id without a
// passport record.
var errNoPassport = errors.New("no passport")

func getPassport() *toolkit.Tool {
	const name = "get_passport"
	return &toolkit.Tool{
		Name:        name,
		Description: "Your passport: tier (grows with the receipts naming you, at most 50 credited a UTC day), receipts, sponsor, revoked.",
		Annotations: toolkit.Annotations{Title: "Get passport", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[GetPassportOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, _ *struct{}) (*toolkit.Result, error) {
			if err := needIdentity(name, c); err != nil {
				return nil, err
			}
			id, tenant := c.Identity(), c.TenantID()
			// read looks the passport up and reports whether its tier is
			// behind the receipts it has earned.
			var credit uint64
			read := func(tx store.Tx) (*store.Passport, bool, error) {
				p, err := store.GetPassport(tx, tenant, id)
				if errors.Is(err, store.ErrNotFound) {
					return nil, false, errNoPassport
				}
				if err != nil {
					return nil, false, err
				}
				tier, s, err := earnedTier(tx, tenant, id)
				if err != nil {
					return nil, false, err
				}
				p.ReceiptCount, credit = s.Receipts, s.Credit
				behind := store.TierRank(tier) > store.TierRank(p.Tier)
				if behind {
					p.Tier = tier
				}
				return p, behind, nil
			}
			var p *store.Passport
			var behind bool
			err := env.Store.View(ctx, func(tx store.Tx) error {
				var err error
				p, behind, err = read(tx)
				return err
			})
			if err == nil && behind {
				err = env.Store.Update(ctx, func(tx store.Tx) error {
					var err error
					if p, behind, err = read(tx); err != nil || !behind {
						return err
					}
					return store.PutPassport(tx, p)
				})
			}
			if errors.Is(err, errNoPassport) {
				return toolkit.ErrorResult("no passport for %s in tenant %s; %s", id, tenant, howToIssue(ctx, env)), nil
			}
			if err != nil {
				return nil, err
			}
			out := passportView(p)
			out.TierCredit = credit
			return toolkit.JSONResult(out)
		}),
	}
}

type mintRequestArgs struct {
	RequestedCategory string `json:"requested_category,omitempty" schema:"enum=personal|work|public"`
	Reason            string `json:"reason,omitempty"`
}

func requestPassportMint() *toolkit.Tool {
	const name = "request_passport_mint"
	return &toolkit.Tool{
		Name:        name,
		Description: "Ask an operator for a passport of another category: files one pending request, mints nothing.",
		Annotations: toolkit.Annotations{Title: "Request passport mint", IdempotentHint: true},
		Out:         toolkit.OutputOf[RequestPassportMintOutput](),
		Present:     func(f *feature.Flags) bool { return f.PassportMintRequests },
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *mintRequestArgs) (*toolkit.Result, error) {
			if len(in.Reason) > maxPassportReason {
				return nil, toolkit.InvalidParams(name, "reason", fmt.Sprintf("longer than %d bytes", maxPassportReason))
			}
			if err := needIdentity(name, c); err != nil {
				return nil, err
			}
			id, tenant := c.Identity(), c.TenantID()
			var req *store.MintRequest
			pending := false
			err := env.Store.Update(ctx, func(tx store.Tx) error {
				pending = false
				prev, err := store.GetMintRequest(tx, tenant, id)
				switch {
				case err == nil && prev.Status == "pending":
					req, pending = prev, true
					return nil
				case err != nil && !errors.Is(err, store.ErrNotFound):
					return err
				}
				category := in.RequestedCategory
				if category == "" {
					category = "personal"
					if p, err := store.GetPassport(tx, tenant, id); err == nil && p.Category != "" {
						category = p.Category
					} else if err != nil && !errors.Is(err, store.ErrNotFound) {
						return err
					}
				}
				now := env.Time()
				req = &store.MintRequest{RequestID: store.NewID("pmr_"), Tenant: tenant, RequesterID: id,
					RequestedCategory: category, Reason: in.Reason, Status: "pending", RequestedAt: now}
				r, err := receipts.Append(tx, env.Signer, tenant, "passport_mint_request", c.Name(), map[string]any{
					"request_id": req.RequestID, "requester_id": id, "requested_category": category, "reason": in.Reason,
				}, now)
				if err != nil {
					return err
				}
				req.ReceiptID = r.ID
				return store.PutMintRequest(tx, req)
			})
			if err != nil {
				return nil, err
			}
			return toolkit.JSONResult(RequestPassportMintOutput{
				RequestID: req.RequestID, RequesterID: req.RequesterID, RequestedCategory: req.RequestedCategory,
				Status: req.Status, ReceiptID: req.ReceiptID, RequestedAt: req.RequestedAt.Format(time.RFC3339Nano),
				AlreadyPending: pending,
			})
		}),
	}
}

// RequestPassportMintOutput is what request_passport_mint returns: the
// pending request, and whether it was pending already.
type RequestPassportMintOutput struct {
	AlreadyPending    bool   `json:"already_pending"`
	ReceiptID         string `json:"receipt_id"`
	RequestID         string `json:"request_id"`
	RequestedAt       string `json:"requested_at"`
	RequestedCategory string `json:"requested_category"`
	RequesterID       string `json:"requester_id"`
	Status            string `json:"status"`
}

// RevokePassportOutput is what revoke_passport returns: revoked names the
// passport revoked.
type RevokePassportOutput struct {
	Reason          string `json:"reason"`
	ReceiptID       string `json:"receipt_id"`
	Revoked         string `json:"revoked"`
	RevokedAt       string `json:"revoked_at"`
	RevokerPassport string `json:"revoker_passport"`
	TenantID        string `json:"tenant_id"`
}

type revokePassportArgs struct {
	TargetPassport string `json:"target_passport,omitempty" schema:"minLength=1"`
	Reason         string `json:"reason,omitempty"`
}

func revokePassport() *toolkit.Tool {
	const name = "revoke_passport"
	return &toolkit.Tool{
		Name:        name,
		Description: "Revoke a passport (default yours) for good: by itself, its sponsor or an elite operator. With CRUX_PASSPORT_REVOCATION on, it may then only read itself.",
		Annotations: toolkit.Annotations{Title: "Revoke passport", DestructiveHint: true, IdempotentHint: true}, // a repeat is refused and changes nothing
		Out:         toolkit.OutputOf[RevokePassportOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *revokePassportArgs) (*toolkit.Result, error) {
			if err := checkNames(name, "target_passport", in.TargetPassport); err != nil {
				return nil, err
			}
			if len(in.Reason) > maxPassportReason {
				return nil, toolkit.InvalidParams(name, "reason", fmt.Sprintf("longer than %d bytes", maxPassportReason))
			}
			if err := needIdentity(name, c); err != nil {
				return nil, err
			}
			caller, tenant := c.Identity(), c.TenantID()
			target := in.TargetPassport
			if target == "" {
				target = caller
			}
			var refusal string
			var receiptID string
			now := env.Time()
			err := env.Store.Update(ctx, func(tx store.Tx) error {
				refusal, receiptID = "", ""
				p, err := store.GetPassport(tx, tenant, target)
				if errors.Is(err, store.ErrNotFound) {
					refusal = fmt.Sprintf("no passport %s in tenant %s", target, tenant)
					return nil
				}
				if err != nil {
					return err
				}
				if p.Revoked() {
					refusal = fmt.Sprintf("passport %s was already revoked at %s by %s; revocation is terminal",
						target, p.RevokedAt.UTC().Format(time.RFC3339), p.RevokedBy)
					return nil
				}
				allowed := caller == target || p.SponsorID != "" && caller == p.SponsorID
				if !allowed {
					own, err := store.GetPassport(tx, tenant, caller)
					if err != nil && !errors.Is(err, store.ErrNotFound) {
						return err
					}
					tier, _, err := earnedTier(tx, tenant, caller)
					if err != nil {
						return err
					}
					allowed = own != nil && !own.Revoked() && tier == store.TierElite
				}
				if !allowed {
					refusal = fmt.Sprintf("%s may not revoke passport %s: only the passport itself, its sponsor or an "+
						"elite-tier operator may", caller, target)
					return nil
				}
				r, err := receipts.Append(tx, env.Signer, tenant, "passport_revoke", c.Name(), map[string]any{
					"target_passport": target, "revoker_passport": caller, "reason": in.Reason,
				}, now)
				if err != nil {
					return err
				}
				receiptID = r.ID
				p.RevokedAt, p.RevokedBy, p.RevokeReason = &now, caller, in.Reason
				return store.PutPassport(tx, p)
			})
			if err != nil {
				return nil, err
			}
			if refusal != "" {
				return toolkit.ErrorResult("%s", refusal), nil
			}
			return toolkit.JSONResult(RevokePassportOutput{
				Revoked: target, RevokerPassport: caller, Reason: in.Reason, ReceiptID: receiptID,
				RevokedAt: now.Format(time.RFC3339Nano), TenantID: tenant,
			})
		}),
	}
}
