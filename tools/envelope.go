package tools

import (
	"math"
	"time"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/surface"
)

// Envelope is the audit envelope a tool adds to its result when
// CORECRUXD_FEATURE_AUDIT_ENVELOPE is on: what the answer drew on and what
// the call does. It sits at structuredContent.envelope and, mirrored, at
// _meta.envelope.
type Envelope struct {
	ReceiptsUsed     []string          `json:"receipts_used"`
	MemoriesUsed     []MemoryUsed      `json:"memories_used"`
	AutonomyConsumed map[string]any    `json:"autonomy_consumed"`
	PredictedEffects []Effect          `json:"predicted_effects"`
	Links            map[string]string `json:"links"`
}

// MemoryUsed is a fact an answer drew on. Reserved entities, private facts
// included (they are stored under __agent::), are never listed.
type MemoryUsed struct {
	FactID    string  `json:"fact_id"`
	Topic     string  `json:"topic"`
	AgeDays   float64 `json:"age_days"`
	AgeHours  float64 `json:"age_hours"`
	Freshness string  `json:"freshness"`
}

// Effect is one thing a call does to the store.
type Effect struct {
	Kind   string `json:"kind"` // fact_read, fact_write, forget, receipt_emit
	Entity string `json:"entity"`
	Key    string `json:"key"`
}

// readEnvelope is the envelope of a call of tool that read facts.
func readEnvelope(tool string, facts []store.RankedFact, now time.Time) *Envelope {
	e := &Envelope{
		ReceiptsUsed: []string{}, MemoriesUsed: []MemoryUsed{}, PredictedEffects: []Effect{}, Links: map[string]string{},
		AutonomyConsumed: map[string]any{"capability": surface.Capability(tool), "cost_credits": 0, "scope": surface.Capability(tool)},
	}
	for _, f := range facts {
		if !store.Public(f.Fact) {
			continue
		}
		age := max(0, now.Sub(f.Anchor()).Hours())
		e.MemoriesUsed = append(e.MemoriesUsed, MemoryUsed{
			FactID: f.ID, Topic: f.Entity, AgeHours: math.Round(age*100) / 100,
			AgeDays: math.Round(age/24*100) / 100, Freshness: f.Freshness,
		})
		e.PredictedEffects = append(e.PredictedEffects, Effect{Kind: "fact_read", Entity: f.Entity, Key: f.Key})
		if f.SourceReceipt != "" {
			e.ReceiptsUsed = append(e.ReceiptsUsed, f.SourceReceipt)
		}
	}
	return e
}
