package tools

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// Acknowledged memory use.
//
// memory_acknowledge_use records, in a signed "memory_use" receipt, which
// facts a turn drew on. Each listed id is resolved in the caller's tenant
// and counted once, by the first rule that applies:
//
//   - filtered: the id itself, or the entity of a fact the caller sees,
//     starts with a reserved prefix (__ops::, __bootstrap__:: and every
//     other __ entity crux keeps).
//   - not_found: no fact with that id that the caller sees: none at all,
//     another tenant's, another agent's private fact, a forgotten one. The
//     three answer alike, so nothing reveals that another agent's private
//     fact exists.
//   - not_visible: the fact was soft-deleted: it left every query (only
//     fact_history shows it), so it is not recorded as used.
//   - redacted: the caller's own private fact. Receipts are tenant-wide
//     records, so the receipt leaves it out (it counts it in redacted_count
//     instead); the caller's memories_used lists it by fact_id with an empty
//     topic and redacted true, and the audit envelope never lists it.
//   - otherwise the fact (current or superseded) is recorded: an entry
//     {fact_id, entity} in the receipt and a row in memories_used.
//
// Duplicate ids count once. The resolution and the receipt happen in one
// store transaction. retrieved_chunk_ids belong to the paid tier: crux
// serves the local tier, so they are accepted, counted in
// retrieved_chunk_ids_ignored and not recorded.

// receiptKindMemoryUse is the kind of the receipt memory_acknowledge_use mints.
const receiptKindMemoryUse = "memory_use"

// Intents memory_acknowledge_use documents. Any other value is recorded as given.
var memoryUseIntents = []string{"answer", "decision", "tool_call", "implicit"}

type ackArgs struct {
	TurnID            string   `json:"turn_id" schema:"maxLength=1024;minLength=1"`
	FactIDs           []string `json:"fact_ids,omitempty" schema:"items.maxLength=1024;items.minLength=1;maxItems=512"`
	Intent            *string  `json:"intent,omitempty" schema:"default=answer;maxLength=128;minLength=1" doc:"answer (default), decision, tool_call, implicit or other."`
	RetrievedChunkIDs []string `json:"retrieved_chunk_ids,omitempty" schema:"maxItems=512" doc:"Paid tier only: counted, not recorded."`
	Confidence        *float64 `json:"confidence,omitempty" schema:"maximum=1;minimum=0"`
	Note              *string  `json:"note,omitempty" schema:"maxLength=4096"`
}

// memoryUseReceipt is the payload of a "memory_use" receipt, with the
// fields of the CueCrux MemoryUse receipt body (its schema, kind, receipt_id
// and tenant_id are in the receipt's own header) and RedactedCount, crux's
// addition.
type memoryUseReceipt struct {
	TurnID        string           `json:"turn_id" cbor:"turn_id"`
	ActorPassport string           `json:"actor_passport" cbor:"actor_passport"`
	Intent        string           `json:"intent" cbor:"intent"`
	CreatedAt     string           `json:"created_at" cbor:"created_at"` // RFC 3339, UTC
	Entries       []memoryUseEntry `json:"entries" cbor:"entries"`
	// RetrievedChunkIDs is always empty: chunk ids are a paid-tier feature.
	RetrievedChunkIDs []string `json:"retrieved_chunk_ids" cbor:"retrieved_chunk_ids"`
	Confidence        *float64 `json:"confidence,omitempty" cbor:"confidence,omitempty"`
	Note              string   `json:"note,omitempty" cbor:"note,omitempty"`
	// RedactedCount is the number of the actor's own private facts used but
	// left out of Entries.
	RedactedCount int `json:"redacted_count" cbor:"redacted_count"`
}

// memoryUseEntry is one fact a memory_use receipt records.
type memoryUseEntry struct {
	FactID string `json:"fact_id" cbor:"fact_id"`
	Entity string `json:"entity" cbor:"entity"`
}

// AckedMemory is one row of memory_acknowledge_use's memories_used.
type AckedMemory struct {
	FactID string `json:"fact_id"`
	// Topic is the fact's entity; empty for a redacted (own private) fact.
	Topic string `json:"topic"`
	// AgeDays is the time since the fact was stored or last reverified, in
	// days (two decimals).
	AgeDays  float64 `json:"age_days"`
	Redacted bool    `json:"redacted,omitempty"`
}

// MemoryAcknowledgeUseOutput is what memory_acknowledge_use returns.
type MemoryAcknowledgeUseOutput struct {
	TurnID                   string        `json:"turn_id"`
	Intent                   string        `json:"intent"`
	FeatureEnabled           bool          `json:"feature_enabled"`
	ReceiptRef               string        `json:"receipt_ref"`
	MemoriesUsed             []AckedMemory `json:"memories_used"`
	FilteredCount            int           `json:"filtered_count"`
	RedactedCount            int           `json:"redacted_count"`
	NotFoundCount            int           `json:"not_found_count"`
	NotVisibleCount          int           `json:"not_visible_count"`
	RetrievedChunkIDsIgnored int           `json:"retrieved_chunk_ids_ignored"`
	Notes                    []string      `json:"notes"`
	Envelope                 *Envelope     `json:"envelope,omitempty"`
}

// memoryAckOff is the answer while CORECRUXD_FEATURE_MEMORY_ACK is off: a
// success that says feature_enabled false and records nothing. It runs
// before the arguments are read, so it cannot echo turn_id.
func memoryAckOff(env *toolkit.Env) (*toolkit.Result, error) {
	if env.Flags.MemoryAck {
		return nil, nil
	}
	return toolkit.JSONResult(MemoryAcknowledgeUseOffOutput{
		FeatureFlag: feature.EnvMemoryAck, Tool: "memory_acknowledge_use", MemoriesUsed: []AckedMemory{},
		Note: "nothing was recorded: " + feature.EnvMemoryAck + " is off (off by default; set it to 1 to enable)",
	})
}

// MemoryAcknowledgeUseOffOutput is what memory_acknowledge_use returns
// while its flag is off: feature_enabled false, nothing recorded
// (receipt_ref null, every count 0).
type MemoryAcknowledgeUseOffOutput struct {
	FeatureEnabled  bool          `json:"feature_enabled"`
	FeatureFlag     string        `json:"feature_flag"`
	FilteredCount   int           `json:"filtered_count"`
	MemoriesUsed    []AckedMemory `json:"memories_used"`
	NotFoundCount   int           `json:"not_found_count"`
	NotVisibleCount int           `json:"not_visible_count"`
	Note            string        `json:"note"`
	ReceiptRef      *string       `json:"receipt_ref"`
	RedactedCount   int           `json:"redacted_count"`
	Tool            string        `json:"tool"`
}

func memoryAcknowledgeUse() *toolkit.Tool {
	const name = "memory_acknowledge_use"
	return &toolkit.Tool{
		Name:        name,
		Description: "Receipt of the fact_ids you used in a turn (turn_id); each recorded, or counted as filtered, not_found or redacted. Flag MEMORY_ACK.",
		Annotations: toolkit.Annotations{Title: "Acknowledge memory use"},
		Out:         toolkit.OutputOf[MemoryAcknowledgeUseOutput](),
		Alt:         toolkit.OutputOf[MemoryAcknowledgeUseOffOutput](),
		Gate:        memoryAckOff,
		Run:         toolkit.Bind(name, runMemoryAcknowledgeUse),
	}
}

// runMemoryAcknowledgeUse runs one memory_acknowledge_use call.
func runMemoryAcknowledgeUse(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *ackArgs) (*toolkit.Result, error) {
	const name = "memory_acknowledge_use"
	if err := needIdentity(name, c); err != nil {
		return nil, err
	}
	if err := checkName(name, "turn_id", in.TurnID); err != nil {
		return nil, err
	}
	out, ids := ackStart(in)
	scope, me := c.Scope(), c.Identity()
	var shared []store.RankedFact // recorded facts, for the envelope
	var now time.Time
	base := out
	err := env.Store.Update(ctx, func(tx store.Tx) error {
		now = env.Time()
		o := base // a retried transaction starts again from here
		o.MemoriesUsed = []AckedMemory{}
		shared = nil
		body := memoryUseReceipt{
			TurnID: in.TurnID, ActorPassport: me, Intent: o.Intent,
			CreatedAt: now.Format(time.RFC3339Nano), Entries: []memoryUseEntry{},
			RetrievedChunkIDs: []string{}, Confidence: in.Confidence,
		}
		if in.Note != nil {
			body.Note = *in.Note
		}
		for _, id := range ids {
			if store.IsReserved(id) {
				o.FilteredCount++
				continue
			}
			f, err := store.VisibleFact(tx, scope, id)
			if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrReserved) {
				if err := store.SkipCorrupt(tx, err); err != nil {
					return err
				}
				err = store.ErrNotFound // unreadable: reported, and counted as not found
			}
			switch {
			case errors.Is(err, store.ErrNotFound):
				// None, another tenant's, another agent's private fact: alike.
				o.NotFoundCount++
				continue
			case errors.Is(err, store.ErrReserved):
				o.FilteredCount++ // crux's own
				continue
			}
			switch {
			case f.Deleted:
				o.NotVisibleCount++
			case f.Private: // visible, so the caller's own
				o.RedactedCount++
				o.MemoriesUsed = append(o.MemoriesUsed, AckedMemory{FactID: f.ID, AgeDays: ageDays(f, now), Redacted: true})
			default:
				body.Entries = append(body.Entries, memoryUseEntry{FactID: f.ID, Entity: f.Entity})
				o.MemoriesUsed = append(o.MemoriesUsed, AckedMemory{FactID: f.ID, Topic: f.Entity, AgeDays: ageDays(f, now)})
				fr := env.Decay().Freshness(f.HorizonClass, f.Anchor(), now)
				shared = append(shared, store.RankedFact{Fact: f, Freshness: fr, Effective: store.EffectiveConfidence(f.Confidence, fr)})
			}
		}
		body.RedactedCount = o.RedactedCount
		rec, err := receipts.Append(tx, env.Signer, scope.Tenant, receiptKindMemoryUse, c.Name(), body, now)
		if err != nil {
			return err
		}
		o.ReceiptRef = rec.ID
		out = o
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ackResult(name, env, out, shared, now)
}

// ackStart is memory_acknowledge_use's answer before any fact is read
// (the intent, with a note when it is not a documented one, and the
// retrieved chunk ids ignored), and the distinct fact ids asked about, in
// their order.
func ackStart(in *ackArgs) (MemoryAcknowledgeUseOutput, []string) {
	out := MemoryAcknowledgeUseOutput{TurnID: in.TurnID, Intent: "answer", FeatureEnabled: true, Notes: []string{}}
	if in.Intent != nil {
		out.Intent = *in.Intent
		if !slices.Contains(memoryUseIntents, out.Intent) {
			out.Notes = append(out.Notes, fmt.Sprintf("intent %q recorded as given; the documented "+
				"intents are answer, decision, tool_call and implicit", out.Intent))
		}
	}
	if n := len(in.RetrievedChunkIDs); n > 0 {
		out.RetrievedChunkIDsIgnored = n
		out.Notes = append(out.Notes, fmt.Sprintf("retrieved_chunk_ids are a paid-tier feature: %d "+
			"accepted and ignored on this tier, not recorded in the receipt", n))
	}
	var ids []string
	for _, id := range in.FactIDs {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return out, ids
}

// ackResult is the answer of a recorded acknowledgement, with the audit
// envelope over the shared facts it recorded when AuditEnvelope is set.
func ackResult(name string, env *toolkit.Env, out MemoryAcknowledgeUseOutput, shared []store.RankedFact, now time.Time) (*toolkit.Result, error) {
	if !env.Flags.AuditEnvelope {
		return toolkit.JSONResult(out)
	}
	e := readEnvelope(name, shared, now)
	e.PredictedEffects = append(e.PredictedEffects, Effect{Kind: "receipt_emit"})
	e.Links["verify"] = "crux verify receipt " + out.ReceiptRef
	out.Envelope = e
	result, err := toolkit.JSONResult(out)
	if err == nil {
		result.Meta = map[string]any{"envelope": e}
	}
	return result, err
}

// ageDays is the age of f's decay anchor at now, in days, two decimals.
func ageDays(f *store.Fact, now time.Time) float64 {
	return math.Round(max(0, now.Sub(f.Anchor()).Hours())/24*100) / 100
}
