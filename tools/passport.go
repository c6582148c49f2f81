package tools

import (
	"context"
	"errors"
	"time"

	"github.com/crux-go/crux/store"
)

type issuePassportArgs struct {
	SponsorID string `json:"sponsor_id,omitempty"`
}

func issuePassport() *Tool {
	const name = "issue_passport"
	return &Tool{
		Name: name,
		Description: "Issue your passport: the identity record your tier and revocation hang on. Needs an " +
			"authenticated caller. Idempotent: an existing passport is returned unchanged. A new passport starts " +
			"unverified with no receipts. Hosted tier unless agent passports are enabled (CORECRUXD_AGENT_PASSPORTS).",
		Annotations: Annotations{Title: "Issue passport", IdempotentHint: true},
		Output:      "{principal_id, reputation_tier, receipt_count, sponsor_id, issued_at, created}",
		schema:      schemaFor(name),
		run: bind(name, func(ctx context.Context, env *Env, c Caller, in *issuePassportArgs) (*Result, error) {
			id := c.Identity()
			if id == "" {
				return errorResult("issue_passport needs an authenticated agent identity; anonymous callers have no passport"), nil
			}
			var p *store.Passport
			created := false
			err := env.Store.Update(ctx, func(tx store.Tx) error {
				var err error
				p, err = store.GetPassport(tx, c.TenantID(), id)
				if !errors.Is(err, store.ErrNotFound) {
					return err
				}
				p = &store.Passport{PrincipalID: id, Tenant: c.TenantID(), SponsorID: in.SponsorID,
					Tier: store.TierUnverified, IssuedAt: env.now()}
				created = true
				return store.PutPassport(tx, p)
			})
			if err != nil {
				return nil, err
			}
			return jsonResult(map[string]any{
				"principal_id": p.PrincipalID, "reputation_tier": p.Tier, "receipt_count": p.ReceiptCount,
				"sponsor_id": p.SponsorID, "issued_at": p.IssuedAt.Format(time.RFC3339Nano), "created": created,
			})
		}),
	}
}
