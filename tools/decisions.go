package tools

import (
	"context"
	"strings"
	"time"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// Decisions: record_decision.
//
// Decisions are shared facts, visible tenant-wide to every agent, never
// private: a decision log is a team record. Each has its own key, so one
// never supersedes another, and clients cannot write, edit or delete
// reserved entities, so the log is append-only.

type recordDecisionArgs struct {
	Action       string   `json:"action" schema:"minLength=1"`
	Rationale    string   `json:"rationale" schema:"minLength=1"`
	Alternatives []string `json:"alternatives,omitempty" schema:"maxItems=256"`
	Confidence   *float64 `json:"confidence,omitempty" schema:"default=1;maximum=1;minimum=0"`
	SessionID    string   `json:"session_id,omitempty" schema:"default=_default;minLength=1"`
	ContextRefs  []string `json:"context_refs,omitempty" schema:"maxItems=256"`
}

// RecordDecisionOutput is what record_decision returns: the decision
// stored and its receipt.
type RecordDecisionOutput struct {
	Action       string `json:"action"`
	DecisionHash string `json:"decision_hash"`
	DecisionID   string `json:"decision_id"`
	Entity       string `json:"entity"`
	FactID       string `json:"fact_id"`
	ReceiptID    string `json:"receipt_id"`
}

func recordDecision() *toolkit.Tool {
	const name = "record_decision"
	return &toolkit.Tool{
		Name:        name,
		Description: "Record a decision (action, rationale, alternatives) under a session: append-only, hashed, tenant-wide.",
		Annotations: toolkit.Annotations{Title: "Record decision"},
		Out:         toolkit.OutputOf[RecordDecisionOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *recordDecisionArgs) (*toolkit.Result, error) {
			if strings.TrimSpace(in.Action) == "" {
				return nil, toolkit.InvalidParams(name, "action", "must not be empty")
			}
			if strings.TrimSpace(in.Rationale) == "" {
				return nil, toolkit.InvalidParams(name, "rationale", "must not be empty")
			}
			session := in.SessionID
			if session == "" {
				session = "_default"
			}
			if err := checkPrefixedName(name, "session_id", store.DecisionsPrefix, session); err != nil {
				return nil, err
			}
			entity := store.DecisionsPrefix + session
			content := store.DecisionContent{Action: in.Action, Alternatives: in.Alternatives, Confidence: 1,
				ContextRefs: in.ContextRefs, Rationale: in.Rationale, SessionID: session}
			if in.Confidence != nil {
				content.Confidence = *in.Confidence
			}
			if content.Alternatives == nil {
				content.Alternatives = []string{}
			}
			if content.ContextRefs == nil {
				content.ContextRefs = []string{}
			}
			hash, err := store.DecisionHash(content)
			if err != nil {
				return nil, err
			}
			now := env.Time()
			rec := store.DecisionRecord{
				DecisionID: store.NewDecisionID(), DecisionHash: hash, FactID: store.NewFactID(), Entity: entity,
				Action: content.Action, Rationale: content.Rationale, Alternatives: content.Alternatives,
				Confidence: content.Confidence, ContextRefs: content.ContextRefs, SessionID: session,
				RecordedBy: c.Name(), RecordedAt: now.Format(time.RFC3339Nano),
			}
			var receiptID string
			err = env.Store.Update(ctx, func(tx store.Tx) error {
				r, err := receipts.Append(tx, env.Signer, c.TenantID(), "decision", c.Name(), rec, now)
				if err != nil {
					return err
				}
				if err := store.PutDecision(tx, c.Scope(), rec, r.ID, now); err != nil {
					return err
				}
				receiptID = r.ID
				return nil
			})
			if err != nil {
				return nil, err
			}
			return toolkit.JSONResult(RecordDecisionOutput{
				DecisionID: rec.DecisionID, DecisionHash: hash, Entity: entity, Action: rec.Action,
				FactID: rec.FactID, ReceiptID: receiptID,
			})
		}),
	}
}
