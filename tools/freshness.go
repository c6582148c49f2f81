package tools

import (
	"context"
	"sort"
	"time"

	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// Freshness and decay: memory_freshness,
// memory_sweep_candidates, memory_set_horizon and memory_reverify.
//
// A fact's freshness follows the server's decay policy (Env.Decay: 24 hours,
// 35 days and 365 days for the volatile, medium and stable classes unless
// CORECRUXD_DECAY_* say otherwise; class none never goes stale), counted
// from its reverification time, else its storage time. A fact stored without
// a class gets the default of its entity's prefix (store.DefaultHorizon).
//
// Decisions where the CueCrux tool contract is silent:
//   - CORECRUXD_FEATURE_FRESHNESS off fails all four tools with -32030
//     (CAPABILITY_DENIED), data {feature_flag, enabled: false, reason_code:
//     "feature_disabled"}, before the arguments are checked.
//   - The two reads examine a bounded candidate set, never the whole store:
//     the facts of entity and/or key through their indexes, else the
//     tenant's live facts through the confidence index (most confident
//     first), at most freshnessMaxExamined facts in either case. examined
//     and complete in the result say how far they got.
//   - memory_set_horizon and memory_reverify change the current version of
//     a fact only (a superseded one is a -32004 conflict naming the current
//     version), in place: value, confidence and storage time, and so the
//     fact's place in the confidence index, do not change.
//   - The Reverify receipt is a signed, chained receipt of kind "reverify"
//     (payload reverifyPayload) found by its receipt_id; no fact records
//     it (nothing is written under __reverify_receipts__::).

// Limits and defaults of the freshness tools.
const (
	// freshnessMaxExamined caps the facts memory_freshness and
	// memory_sweep_candidates read in one call.
	freshnessMaxExamined = 5000
	// freshnessTopK is memory_freshness's default number of rows.
	freshnessTopK = 20
	// freshnessTokenBudget is memory_freshness's default token budget.
	freshnessTokenBudget = 500
	// sweepTopK is memory_sweep_candidates's default number of rows.
	sweepTopK = 50
	// sweepTokenBudget is memory_sweep_candidates's default token budget.
	sweepTokenBudget = 500
	// freshnessMinRowTokens is the least a row costs against a token budget.
	freshnessMinRowTokens = 8
)

func freshnessOn(f *feature.Flags) bool { return f.Freshness }

// receiptKindReverify is the kind of the receipt memory_reverify mints.
const receiptKindReverify = "reverify"

// reverifyPayload is the payload of a reverify receipt: which fact was
// confirmed, the BLAKE3 (hex) of the value confirmed, by whom and when
// (RFC 3339). Decode it with receipts.Receipt.Payload.
type reverifyPayload struct {
	FactID string `cbor:"fact_id" json:"fact_id"`
	// Entity, Key and ValueHash (BLAKE3 hex of the value) are empty and
	// Redacted is true for a private fact: receipts are readable across the
	// tenant, and a hash of a short value is as good as the value.
	Entity       string `cbor:"entity" json:"entity"`
	Key          string `cbor:"key" json:"key"`
	ValueHash    string `cbor:"value_hash" json:"value_hash"`
	Redacted     bool   `cbor:"redacted" json:"redacted"`
	ReverifiedBy string `cbor:"reverified_by" json:"reverified_by"`
	ReverifiedAt string `cbor:"reverified_at" json:"reverified_at"`
}

// FreshnessRow is one fact of memory_freshness.
type FreshnessRow struct {
	FactID       string  `json:"fact_id"`
	Entity       string  `json:"entity"`
	Key          string  `json:"key"`
	HorizonClass string  `json:"horizon_class"`
	Freshness    string  `json:"freshness"`
	AgeHours     float64 `json:"age_hours"`
	StoredAt     string  `json:"stored_at"`
	ReverifiedAt string  `json:"reverified_at,omitempty"`
	Pinned       bool    `json:"pinned,omitempty"` // pinned by the caller
	Private      bool    `json:"private,omitempty"`
}

// SweepRow is one candidate of memory_sweep_candidates.
type SweepRow struct {
	FactID       string  `json:"fact_id"`
	Entity       string  `json:"entity"`
	Key          string  `json:"key"`
	Reason       string  `json:"reason"` // stale, superseded or stale+superseded
	Freshness    string  `json:"freshness"`
	HorizonClass string  `json:"horizon_class"`
	AgeHours     float64 `json:"age_hours"`
	SupersededBy string  `json:"superseded_by,omitempty"`
	StoredAt     string  `json:"stored_at"`
}

// DecayPolicyView is the decay policy as the freshness tools report it.
type DecayPolicyView struct {
	VolatileStaleHours float64 `json:"volatile_stale_hours"`
	MediumStaleDays    float64 `json:"medium_stale_days"`
	StableStaleDays    float64 `json:"stable_stale_days"`
}

func newDecayPolicyView(p store.DecayPolicy) DecayPolicyView {
	const day = 24 * time.Hour
	return DecayPolicyView{
		VolatileStaleHours: p.VolatileStale.Hours(),
		MediumStaleDays:    float64(p.MediumStale) / float64(day),
		StableStaleDays:    float64(p.StableStale) / float64(day),
	}
}

// freshnessRowCost is what a row costs against a freshness tool's token budget.
func freshnessRowCost(row any) int { return max(rowTokens(row), freshnessMinRowTokens) }

// decayedFact is a fact with its freshness at one instant.
type decayedFact struct {
	fact      *store.Fact
	freshness string
	age       time.Duration
	score     float64 // higher is staler; see stalest
}

func decayOf(p store.DecayPolicy, f *store.Fact, now time.Time) decayedFact {
	d := decayedFact{fact: f, freshness: p.Freshness(f.HorizonClass, f.Anchor(), now), age: now.Sub(f.Anchor())}
	limit, ok := p.Horizon(f.HorizonClass)
	switch {
	case !ok:
		d.score = -2 // never stale
	case d.freshness == store.Unknown:
		d.score = -1
	case limit <= 0:
		d.score = float64(d.age) // a zero horizon: stale at once, the oldest first
	default:
		d.score = float64(d.age) / float64(limit) // above 1 when stale
	}
	return d
}

// stalest orders facts stalest first: by the fraction of its horizon a
// fact's age has used (stale facts, above 1, first), then facts of unknown
// freshness, then class none; the oldest first among equals, then by id.
func stalest(a, b decayedFact) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	if a.age != b.age {
		return a.age > b.age
	}
	return a.fact.ID < b.fact.ID
}

// keepTop inserts d into the sorted slice ds, keeping at most limit entries.
func keepTop(ds []decayedFact, d decayedFact, limit int, less func(a, b decayedFact) bool) []decayedFact {
	i := sort.Search(len(ds), func(i int) bool { return less(d, ds[i]) })
	if i >= limit {
		return ds
	}
	if len(ds) < limit {
		ds = append(ds, decayedFact{})
	}
	copy(ds[i+1:], ds[i:])
	ds[i] = d
	return ds
}

// ---- memory_freshness ----

type memoryFreshnessArgs struct {
	Entity      string `json:"entity,omitempty" schema:"minLength=1"`
	Key         string `json:"key,omitempty" schema:"minLength=1"`
	TopK        *int   `json:"top_k,omitempty" schema:"default=20;maximum=500;minimum=1"`
	TokenBudget *int   `json:"token_budget,omitempty" schema:"default=500;minimum=1"`
}

// MemoryFreshnessOutput is what memory_freshness returns.
type MemoryFreshnessOutput struct {
	Rows                   []FreshnessRow  `json:"rows"`
	Policy                 DecayPolicyView `json:"policy"`
	Now                    string          `json:"now"`
	Examined               int             `json:"examined"`
	Complete               bool            `json:"complete"`
	TotalTokens            int             `json:"total_tokens"`
	TruncatedByTokenBudget bool            `json:"truncated_by_token_budget"`
	Envelope               *Envelope       `json:"envelope,omitempty"`
}

func memoryFreshness() *toolkit.Tool {
	const name = "memory_freshness"
	return &toolkit.Tool{
		Name:        name,
		Description: "Decay state of your current facts, stalest first. At most 5000 examined (complete false).",
		Annotations: toolkit.Annotations{Title: "Memory freshness", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[MemoryFreshnessOutput](),
		Gate:        memFlagGate(toolkit.CodeCapabilityDenied, name, feature.EnvFreshness, freshnessOn),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *memoryFreshnessArgs) (*toolkit.Result, error) {
			if err := checkNames(name, "entity", in.Entity, "key", in.Key); err != nil {
				return nil, err
			}
			if store.IsReserved(in.Entity) {
				return nil, reservedEntity(name, "entity", "entities starting with "+store.ReservedPrefix+" are reserved and not reported")
			}
			topK, limit := freshnessTopK, freshnessTokenBudget
			if in.TopK != nil {
				topK = *in.TopK
			}
			if in.TokenBudget != nil {
				limit = *in.TokenBudget
			}
			now := env.Time()
			out := MemoryFreshnessOutput{Policy: newDecayPolicyView(env.Decay()), Now: now.Format(time.RFC3339Nano)}
			var used []store.RankedFact
			err := env.Store.View(ctx, func(tx store.Tx) error {
				var top []decayedFact
				stats, err := store.ScanFacts(tx, store.FactScan{
					Scope: c.Scope(), Entity: in.Entity, Key: in.Key,
					MaxExamined: freshnessMaxExamined,
				}, func(f *store.Fact) error {
					top = keepTop(top, decayOf(env.Decay(), f, now), topK, stalest)
					return nil
				})
				if err != nil {
					return err
				}
				out.Examined, out.Complete = stats.Examined, stats.Complete
				out.Rows, used = []FreshnessRow{}, nil
				b := budget{Limit: limit}
				for _, d := range top {
					f := d.fact
					pinned, err := store.IsPinned(tx, c.Scope(), f.ID)
					if err != nil {
						return err
					}
					row := FreshnessRow{
						FactID: f.ID, Entity: f.Entity, Key: f.Key, HorizonClass: f.HorizonClass,
						Freshness: d.freshness, AgeHours: roundHours(d.age),
						StoredAt: f.StoredAt.Format(time.RFC3339Nano), Pinned: pinned, Private: f.Private,
					}
					if f.ReverifiedAt != nil {
						row.ReverifiedAt = f.ReverifiedAt.Format(time.RFC3339Nano)
					}
					if !b.take(freshnessRowCost(row)) {
						break
					}
					out.Rows = append(out.Rows, row)
					used = append(used, store.RankedFact{Fact: f, Freshness: d.freshness,
						Effective: store.EffectiveConfidence(f.Confidence, d.freshness)})
				}
				out.TotalTokens, out.TruncatedByTokenBudget = b.Used, b.Exceeded
				return nil
			})
			if err != nil {
				return nil, err
			}
			if !env.Flags.AuditEnvelope {
				return toolkit.JSONResult(out)
			}
			out.Envelope = readEnvelope(name, used, now)
			result, err := toolkit.JSONResult(out)
			if err == nil {
				result.Meta = map[string]any{"envelope": out.Envelope}
			}
			return result, err
		}),
	}
}

// ---- memory_sweep_candidates ----

type sweepArgs struct {
	TopK        *int `json:"top_k,omitempty" schema:"default=50;maximum=500;minimum=1"`
	TokenBudget *int `json:"token_budget,omitempty" schema:"default=500;minimum=1"`
}

// MemorySweepCandidatesOutput is what memory_sweep_candidates returns.
type MemorySweepCandidatesOutput struct {
	Rows                   []SweepRow `json:"rows"`
	DryRun                 bool       `json:"dry_run"`
	Now                    string     `json:"now"`
	Examined               int        `json:"examined"`
	Complete               bool       `json:"complete"`
	TotalTokens            int        `json:"total_tokens"`
	TruncatedByTokenBudget bool       `json:"truncated_by_token_budget"`
}

// sweepReason is why a fact is a sweep candidate, "" when it is not one.
func sweepReason(d decayedFact) string {
	stale, superseded := d.freshness == store.Stale, d.fact.SupersededBy != ""
	switch {
	case stale && superseded:
		return "stale+superseded"
	case superseded:
		return "superseded"
	case stale:
		return "stale"
	}
	return ""
}

// sweepFirst orders sweep candidates: stale and superseded first, then
// superseded, then stale; the oldest first within each, then by id.
func sweepFirst(a, b decayedFact) bool {
	ra, rb := sweepRank[sweepReason(a)], sweepRank[sweepReason(b)]
	if ra != rb {
		return ra < rb
	}
	if a.age != b.age {
		return a.age > b.age
	}
	return a.fact.ID < b.fact.ID
}

var sweepRank = map[string]int{"stale+superseded": 0, "superseded": 1, "stale": 2}

func memorySweepCandidates() *toolkit.Tool {
	const name = "memory_sweep_candidates"
	return &toolkit.Tool{
		Name:        name,
		Description: "Stale or superseded facts you see, never pinned ones. At most 5000 examined (complete false).",
		Annotations: toolkit.Annotations{Title: "Sweep candidates", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[MemorySweepCandidatesOutput](),
		Gate:        memFlagGate(toolkit.CodeCapabilityDenied, name, feature.EnvFreshness, freshnessOn),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *sweepArgs) (*toolkit.Result, error) {
			topK, limit := sweepTopK, sweepTokenBudget
			if in.TopK != nil {
				topK = *in.TopK
			}
			if in.TokenBudget != nil {
				limit = *in.TokenBudget
			}
			now := env.Time()
			out := MemorySweepCandidatesOutput{DryRun: true, Now: now.Format(time.RFC3339Nano)}
			err := env.Store.View(ctx, func(tx store.Tx) error {
				var top []decayedFact
				stats, err := store.ScanFacts(tx, store.FactScan{
					Scope: c.Scope(), IncludeSuperseded: true, MaxExamined: freshnessMaxExamined,
				}, func(f *store.Fact) error {
					d := decayOf(env.Decay(), f, now)
					if sweepReason(d) == "" {
						return nil
					}
					pinned, err := store.IsPinned(tx, c.Scope(), f.ID)
					if err != nil || pinned {
						return err
					}
					top = keepTop(top, d, topK, sweepFirst)
					return nil
				})
				if err != nil {
					return err
				}
				out.Examined, out.Complete = stats.Examined, stats.Complete
				out.Rows = []SweepRow{}
				b := budget{Limit: limit}
				for _, d := range top {
					f := d.fact
					row := SweepRow{
						FactID: f.ID, Entity: f.Entity, Key: f.Key, Reason: sweepReason(d), Freshness: d.freshness,
						HorizonClass: f.HorizonClass, AgeHours: roundHours(d.age), SupersededBy: f.SupersededBy,
						StoredAt: f.StoredAt.Format(time.RFC3339Nano),
					}
					if !b.take(freshnessRowCost(row)) {
						break
					}
					out.Rows = append(out.Rows, row)
				}
				out.TotalTokens, out.TruncatedByTokenBudget = b.Used, b.Exceeded
				return nil
			})
			if err != nil {
				return nil, err
			}
			return toolkit.JSONResult(out)
		}),
	}
}

// ---- memory_set_horizon ----

// MemorySetHorizonOutput is what memory_set_horizon returns.
type MemorySetHorizonOutput struct {
	FactID               string `json:"fact_id"`
	HorizonClass         string `json:"horizon_class"`
	OK                   bool   `json:"ok"`
	PreviousHorizonClass string `json:"previous_horizon_class"`
}

type setHorizonArgs struct {
	FactID       string `json:"fact_id" pattern:"^f_[0-9a-f]{32}$"`
	HorizonClass string `json:"horizon_class" schema:"enum=volatile|medium|stable|none" doc:"none never goes stale."`
}

func memorySetHorizon() *toolkit.Tool {
	const name = "memory_set_horizon"
	return &toolkit.Tool{
		Name:        name,
		Description: "Re-classify how fast a fact goes stale, in place.",
		Annotations: toolkit.Annotations{Title: "Set horizon", IdempotentHint: true},
		Out:         toolkit.OutputOf[MemorySetHorizonOutput](),
		Gate:        memFlagGate(toolkit.CodeCapabilityDenied, name, feature.EnvFreshness, freshnessOn),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *setHorizonArgs) (*toolkit.Result, error) {
			if err := needIdentity(name, c); err != nil {
				return nil, err
			}
			var previous string
			err := env.Store.Update(ctx, func(tx store.Tx) error {
				f, err := memCurrentFact(tx, c, in.FactID)
				if err != nil {
					return err
				}
				previous = f.HorizonClass
				return store.SetHorizon(tx, f, in.HorizonClass)
			})
			if err != nil {
				return memFactFailure(name, in.FactID, err)
			}
			return toolkit.JSONResult(MemorySetHorizonOutput{FactID: in.FactID, HorizonClass: in.HorizonClass,
				PreviousHorizonClass: previous, OK: true})
		}),
	}
}

// ---- memory_reverify ----

type reverifyArgs struct {
	FactID string `json:"fact_id" pattern:"^f_[0-9a-f]{32}$"`
}

// MemoryReverifyOutput is what memory_reverify returns.
type MemoryReverifyOutput struct {
	FactID       string `json:"fact_id"`
	ReceiptID    string `json:"receipt_id"`
	ReceiptClass string `json:"receipt_class"`
	ReverifiedAt string `json:"reverified_at"`
}

func memoryReverify() *toolkit.Tool {
	const name = "memory_reverify"
	return &toolkit.Tool{
		Name:        name,
		Description: "Confirm a fact still holds: its decay clock restarts, no new version.",
		Annotations: toolkit.Annotations{Title: "Reverify memory"},
		Out:         toolkit.OutputOf[MemoryReverifyOutput](),
		Gate:        memFlagGate(toolkit.CodeCapabilityDenied, name, feature.EnvFreshness, freshnessOn),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *reverifyArgs) (*toolkit.Result, error) {
			if err := needIdentity(name, c); err != nil {
				return nil, err
			}
			var out MemoryReverifyOutput
			err := env.Store.Update(ctx, func(tx store.Tx) error {
				f, err := memCurrentFact(tx, c, in.FactID)
				if err != nil {
					return err
				}
				now := env.Time()
				if err := store.Reverify(tx, f, now); err != nil {
					return err
				}
				at := now.Format(time.RFC3339Nano)
				payload := reverifyPayload{FactID: f.ID, ReverifiedBy: c.Name(), ReverifiedAt: at, Redacted: f.Private}
				if !f.Private {
					payload.Entity, payload.Key, payload.ValueHash = f.Entity, f.Key, store.ValueHash(f.Value)
				}
				r, err := receipts.Append(tx, env.Signer, c.TenantID(), receiptKindReverify, c.Name(), payload, now)
				if err != nil {
					return err
				}
				out = MemoryReverifyOutput{FactID: f.ID, ReceiptID: r.ID, ReceiptClass: "Reverify", ReverifiedAt: at}
				return nil
			})
			if err != nil {
				return memFactFailure(name, in.FactID, err)
			}
			return toolkit.JSONResult(out)
		}),
	}
}
