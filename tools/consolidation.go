package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// Contradiction surfacing and safe consolidation.
//
// memory_contradictions compares the current facts a caller can see (the
// shared pool and its own private facts) that share a logical (entity,
// key), and reports those whose values fall in opposite polarity classes
// (store.Polarity). A write supersedes the current fact of its scope, so a
// scope holds one current fact per (entity, key) and such pairs meet where
// scopes meet: the shared fact and the caller's own private fact. A chain
// holding two current facts (a fact brought back outside store_fact) is
// found as well. Superseded versions are history, not contradictions: only
// active, non-superseded facts are compared, and memory_consolidate
// could not take a superseded fact as a target anyway. The scan is bounded
// (store.Contradictions): without a filter it examines only the entities
// where the caller holds private facts, and it reads at most
// store.DefaultContradictionScan facts per call.
//
// memory_consolidate is the explicit resolution: one store transaction
// writes the canonical fact (superseding the targets, whose history
// stays), records the consolidation id and mints a signed "consolidation"
// receipt. Both tools answer -32030 while CORECRUXD_FEATURE_CONSOLIDATION
// is off, as the freshness tools do.

// consolidationOff is the gate of both tools: -32030 while the flag is off
// (a fresh error each time, so no caller shares its data).
func consolidationOff(tool string) func(env *toolkit.Env) (*toolkit.Result, error) {
	return func(env *toolkit.Env) (*toolkit.Result, error) {
		if env.Flags.Consolidation {
			return nil, nil
		}
		return nil, &toolkit.Error{
			Code: toolkit.CodeCapabilityDenied,
			Message: tool + " is disabled: " + feature.EnvConsolidation + " is off (it is on by default; " +
				"unset it or set it to 1 to enable)",
			Data: map[string]any{"feature_flag": feature.EnvConsolidation, "enabled": false},
		}
	}
}

// ---- memory_contradictions ----

type contradictionsArgs struct {
	Limit        *int   `json:"limit,omitempty" schema:"default=50;maximum=500;minimum=1"`
	TokenBudget  *int   `json:"token_budget,omitempty" schema:"default=500;minimum=1"`
	Entity       string `json:"entity,omitempty" schema:"minLength=1" doc:"Default: the entities of your private facts."`
	EntityPrefix string `json:"entity_prefix,omitempty" schema:"minLength=1"`
	Key          string `json:"key,omitempty" schema:"minLength=1"`
}

// ContradictionRow is one candidate of memory_contradictions: current
// facts of one (entity, key) with opposite polarity. FactIDs, Values and
// Scopes are parallel, oldest fact first; polarity_a is the class of the
// oldest.
type ContradictionRow struct {
	Entity    string   `json:"entity"`
	Key       string   `json:"key"`
	Reason    string   `json:"reason"`
	PolarityA string   `json:"polarity_a"`
	PolarityB string   `json:"polarity_b"`
	FactIDs   []string `json:"fact_ids"`
	Values    []string `json:"values"`
	// Scopes says, per fact, whether it is "shared" or "private" (yours).
	Scopes []string `json:"scopes"`
}

// reasonOppositePolarity is the reason of every contradiction candidate.
const reasonOppositePolarity = "opposite_polarity_same_entity_key"

// MemoryContradictionsOutput is what memory_contradictions returns.
type MemoryContradictionsOutput struct {
	Candidates             []ContradictionRow `json:"candidates"`
	Count                  int                `json:"count"`
	Limit                  int                `json:"limit"`
	DryRun                 bool               `json:"dry_run"`
	Mode                   string             `json:"mode"`
	EntitiesExamined       int                `json:"entities_examined"`
	FactsRead              int                `json:"facts_read"`
	ScanTruncated          bool               `json:"scan_truncated"`
	LimitReached           bool               `json:"limit_reached"`
	TotalTokens            int                `json:"total_tokens"`
	TruncatedByTokenBudget bool               `json:"truncated_by_token_budget"`
	Notes                  []string           `json:"notes"`
}

func memoryContradictions() *toolkit.Tool {
	const name = "memory_contradictions"
	return &toolkit.Tool{
		Name:        name,
		Description: "Current facts of one (entity, key) with opposite polarity (yes/no). Resolve with memory_consolidate.",
		Annotations: toolkit.Annotations{Title: "Memory contradictions", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[MemoryContradictionsOutput](),
		Gate:        consolidationOff(name),
		Run:         toolkit.Bind(name, runMemoryContradictions),
	}
}

// runMemoryContradictions runs one memory_contradictions call.
func runMemoryContradictions(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *contradictionsArgs) (*toolkit.Result, error) {
	const name = "memory_contradictions"
	if err := checkNames(name, "entity", in.Entity, "entity_prefix", in.EntityPrefix, "key", in.Key); err != nil {
		return nil, err
	}
	switch {
	case in.Entity != "" && in.EntityPrefix != "":
		return nil, toolkit.InvalidParams(name, "entity_prefix", "cannot be combined with entity")
	case store.IsReserved(in.Entity):
		return nil, reservedEntity(name, "entity", reservedForCrux)
	case store.IsReserved(in.EntityPrefix):
		return nil, reservedEntity(name, "entity_prefix", reservedForCrux)
	}
	limit, tokenLimit := 50, 500
	if in.Limit != nil {
		limit = *in.Limit
	}
	if in.TokenBudget != nil {
		tokenLimit = *in.TokenBudget
	}
	q := store.ContradictionQuery{
		Scope:  c.Scope(),
		Entity: in.Entity, EntityPrefix: in.EntityPrefix, Key: in.Key, Limit: limit,
	}
	out := MemoryContradictionsOutput{Candidates: []ContradictionRow{}, Limit: limit, DryRun: true, Notes: []string{}}
	switch {
	case in.Entity != "":
		out.Mode = "entity"
	case in.EntityPrefix != "":
		out.Mode = "entity_prefix"
	case in.Key != "":
		out.Mode = "key"
	default:
		out.Mode = "own_private_entities"
		if c.Identity() == "" {
			out.Notes = append(out.Notes, "anonymous callers have no private facts to compare; "+
				"name entity, entity_prefix or key to examine shared facts")
		}
	}
	var res store.ContradictionResult
	err := env.Store.View(ctx, func(tx store.Tx) error {
		var err error
		res, err = store.Contradictions(tx, q)
		return err
	})
	if err != nil {
		return nil, err
	}
	out.EntitiesExamined, out.FactsRead = res.Entities, res.FactsRead
	out.ScanTruncated, out.LimitReached = res.Truncated, res.LimitReached
	if res.Truncated {
		out.Notes = append(out.Notes, fmt.Sprintf("stopped after reading %d facts: the first %d entities "+
			"in byte order were compared, the rest were not; narrow with entity, entity_prefix or key",
			res.FactsRead, res.Entities))
	}
	b := budget{Limit: tokenLimit}
	for _, cand := range res.Candidates {
		row := ContradictionRow{
			Entity: cand.Entity, Key: cand.Key, Reason: reasonOppositePolarity,
			PolarityA: cand.PolarityA, PolarityB: cand.PolarityB,
		}
		for _, f := range cand.Facts {
			scope := "shared"
			if f.Private {
				scope = "private"
			}
			row.FactIDs = append(row.FactIDs, f.ID)
			row.Values = append(row.Values, f.Value)
			row.Scopes = append(row.Scopes, scope)
		}
		if !b.take(rowTokens(row)) {
			break
		}
		out.Candidates = append(out.Candidates, row)
	}
	out.TotalTokens, out.TruncatedByTokenBudget = b.Used, b.Exceeded
	out.Count = len(out.Candidates)
	return toolkit.JSONResult(out)
}

// ---- memory_consolidate ----

type consolidateArgs struct {
	Entity                   string   `json:"entity" schema:"minLength=1"`
	Key                      string   `json:"key" schema:"minLength=1"`
	CanonicalValue           string   `json:"canonical_value"`
	TargetFactIDs            []string `json:"target_fact_ids" schema:"items.minLength=1;maxItems=256;minItems=1"`
	ProtectedFactIDs         []string `json:"protected_fact_ids,omitempty" schema:"items.minLength=1;maxItems=1024"`
	Confidence               *float64 `json:"confidence,omitempty" schema:"default=1;maximum=1;minimum=0"`
	ProtectedConfidenceFloor *float64 `json:"protected_confidence_floor,omitempty" schema:"default=0.99;maximum=1;minimum=0"`
	ConsolidationID          *string  `json:"consolidation_id,omitempty" schema:"maxLength=256;minLength=1" doc:"Unique in your tenant; reuse is -32004."`
	HorizonClass             string   `json:"horizon_class,omitempty" schema:"enum=volatile|medium|stable|none"`
}

// ConsolidationReceipt is the payload of a "consolidation" receipt, and
// the receipt memory_consolidate returns (with ReceiptID, which is not
// part of the payload).
type ConsolidationReceipt struct {
	ConsolidationID string `json:"consolidation_id" cbor:"consolidation_id"`
	Entity          string `json:"entity" cbor:"entity"`
	Key             string `json:"key" cbor:"key"`
	CanonicalFactID string `json:"canonical_fact_id" cbor:"canonical_fact_id"`
	// CanonicalHash is "blake3:" and the hex BLAKE3 of the canonical value.
	CanonicalHash     string   `json:"canonical_hash" cbor:"canonical_hash"`
	SupersededFactIDs []string `json:"superseded_fact_ids" cbor:"superseded_fact_ids"`
	SourceFactIDs     []string `json:"source_fact_ids" cbor:"source_fact_ids"`
	// ReceiptID names the signed receipt; `crux verify receipt` checks it.
	ReceiptID string `json:"receipt_id" cbor:"-"`
}

// receiptKindConsolidation is the kind of the receipt memory_consolidate mints.
const receiptKindConsolidation = "consolidation"

// MemoryConsolidateOutput is what memory_consolidate returns: status
// consolidated and the receipt.
type MemoryConsolidateOutput struct {
	Receipt ConsolidationReceipt `json:"receipt"`
	Status  string               `json:"status"`
}

func memoryConsolidate() *toolkit.Tool {
	const name = "memory_consolidate"
	return &toolkit.Tool{
		Name:        name,
		Description: "Collapse target_fact_ids (live shared facts of one (entity, key), the current one included) into one canonical fact. Protected, pinned or high-confidence ones are refused.",
		Annotations: toolkit.Annotations{Title: "Consolidate memory", DestructiveHint: true},
		Out:         toolkit.OutputOf[MemoryConsolidateOutput](),
		Gate:        consolidationOff(name),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *consolidateArgs) (*toolkit.Result, error) {
			if err := needIdentity(name, c); err != nil {
				return nil, err
			}
			if err := checkNames(name, "entity", in.Entity, "key", in.Key); err != nil {
				return nil, err
			}
			if store.IsReserved(in.Entity) {
				return nil, reservedEntity(name, "entity", reservedForCrux)
			}
			id := "mcp-" + newUUID()
			if in.ConsolidationID != nil {
				id = strings.TrimSpace(*in.ConsolidationID)
				if id == "" {
					return nil, toolkit.InvalidParams(name, "consolidation_id", "must not be blank; omit it for an automatic id")
				}
				if err := checkName(name, "consolidation_id", id); err != nil {
					return nil, err
				}
			}
			req := store.ConsolidateRequest{
				Scope: c.Scope(), ID: id,
				Entity: in.Entity, Key: in.Key, Value: in.CanonicalValue,
				Targets: in.TargetFactIDs, Protected: in.ProtectedFactIDs,
				Confidence: 1.0, Floor: 0.99, HorizonClass: in.HorizonClass,
			}
			if in.Confidence != nil {
				req.Confidence = *in.Confidence
			}
			if in.ProtectedConfidenceFloor != nil {
				req.Floor = *in.ProtectedConfidenceFloor
			}
			var out ConsolidationReceipt
			err := env.Store.Update(ctx, func(tx store.Tx) error {
				r := req
				r.Now = env.Time() // inside the transaction, so the chain's times follow its versions
				cons, err := store.Consolidate(tx, r)
				if err != nil {
					return err
				}
				p := ConsolidationReceipt{
					ConsolidationID: cons.ID, Entity: r.Entity, Key: r.Key,
					CanonicalFactID: cons.Canonical.ID, CanonicalHash: cons.CanonicalHash,
					SupersededFactIDs: cons.Superseded, SourceFactIDs: cons.Sources,
				}
				rec, err := receipts.Append(tx, env.Signer, c.TenantID(), receiptKindConsolidation, c.Name(), p, r.Now)
				if err != nil {
					return err
				}
				p.ReceiptID = rec.ID
				out = p
				return nil
			})
			if err != nil {
				return nil, consolidateError(name, err)
			}
			return toolkit.JSONResult(MemoryConsolidateOutput{Receipt: out, Status: "consolidated"})
		}),
	}
}

// consolidateError maps the store's refusals to the tool's errors: a guard
// is -32030 with data {reason, fact_id}, a bad target -32602 naming
// target_fact_ids, a reused id -32004.
func consolidateError(tool string, err error) error {
	var ge *store.GuardError
	var te *store.TargetError
	var ce *store.ConsolidationExistsError
	switch {
	case errors.As(err, &ge):
		data := map[string]any{"reason": ge.Reason, "fact_id": ge.FactID}
		if ge.Reason == store.GuardHighConfidence {
			data["confidence"], data["floor"] = ge.Confidence, ge.Floor
		}
		return &toolkit.Error{Code: toolkit.CodeCapabilityDenied, Message: tool + ": " + ge.Error(), Data: data}
	case errors.As(err, &te):
		e := toolkit.InvalidParams(tool, "target_fact_ids", te.Error())
		e.Data.(*toolkit.ParamError).ErrorCode = "TARGET_" + strings.ToUpper(te.Reason)
		return e
	case errors.As(err, &ce):
		return &toolkit.Error{Code: toolkit.CodeConflict, Message: tool + ": consolidation_id: " + ce.Error(),
			Data: map[string]any{"consolidation_id": ce.ID, "canonical_fact_id": ce.CanonicalFactID}}
	}
	return err
}

// newUUID returns a random (version 4) UUID in its text form.
func newUUID() string {
	h := store.NewID("")
	b := []byte(h)
	b[12] = '4'                                                    // version
	b[16] = "89ab"[strings.IndexByte("0123456789abcdef", b[16])&3] // variant
	return fmt.Sprintf("%s-%s-%s-%s-%s", b[0:8], b[8:12], b[12:16], b[16:20], b[20:32])
}
