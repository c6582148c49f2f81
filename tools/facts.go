package tools

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/crux-go/crux/internal/codec"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// MaxNameBytes caps entity names and keys.
const MaxNameBytes = 1024

// checkName rejects an entity or key that is too long or holds control
// characters (NUL would break the index keys).
func checkName(tool, param, s string) error {
	if len(s) > MaxNameBytes {
		return toolkit.InvalidParams(tool, param, fmt.Sprintf("longer than %d bytes", MaxNameBytes))
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return toolkit.InvalidParams(tool, param, "must not contain control characters")
	}
	return nil
}

// checkPrefixedName applies checkName to a name crux stores as prefix +
// value, and states the limit in terms of the value the caller gave:
// MaxNameBytes less the prefix.
func checkPrefixedName(tool, param, prefix, value string) error {
	if limit := MaxNameBytes - len(prefix); len(value) > limit {
		return toolkit.InvalidParams(tool, param, fmt.Sprintf("longer than %d bytes", limit))
	}
	return checkName(tool, param, value)
}

// checkNames applies checkName to (param, value) pairs.
func checkNames(tool string, pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := checkName(tool, pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// queryTerms splits a keyword query into index words; a query with text but
// no usable word is an error naming the query argument.
func queryTerms(tool, query string) ([]string, error) {
	return checkTerms(tool, query, store.Words(query))
}

// rankingTerms splits a question or keyword query into the index words
// that rank facts by relevance (store.QueryWords: stop words carry no
// weight, nor, in a question, question words); like queryTerms, a query
// with text but no usable word is an error naming the query argument, and
// so is one of more than maxQueryTerms words.
func rankingTerms(tool, query string) ([]string, error) {
	terms, err := checkTerms(tool, query, store.QueryWords(query))
	if len(terms) > maxQueryTerms {
		return nil, toolkit.InvalidParams(tool, "query", fmt.Sprintf("has more than %d distinct words", maxQueryTerms))
	}
	return terms, err
}

// checkTerms returns the terms of query, nil for a blank query, or the
// -32602 of a query with text but no word.
func checkTerms(tool, query string, terms []string) ([]string, error) {
	if strings.TrimSpace(query) == "" {
		return nil, nil
	}
	if len(terms) == 0 {
		return nil, toolkit.InvalidParams(tool, "query", "needs a word of at least two letters or digits")
	}
	return terms, nil
}

// search runs q in a read transaction.
func search(ctx context.Context, st store.Backend, q store.FactQuery) (store.FactResult, error) {
	var res store.FactResult
	err := st.View(ctx, func(tx store.Tx) error {
		var err error
		res, err = store.SearchFacts(tx, q)
		return err
	})
	return res, err
}

// reservedEntity is the -32602 for an argument naming a reserved entity,
// with error_code RESERVED_ENTITY_PREFIX.
func reservedEntity(tool, param, reason string) *toolkit.Error {
	e := toolkit.InvalidParams(tool, param, reason)
	e.Data.(*toolkit.ParamError).ErrorCode = "RESERVED_ENTITY_PREFIX"
	return e
}

// reservedForCrux is the reason of reservedEntity for a write.
const reservedForCrux = "entities starting with " + store.ReservedPrefix + " are reserved for crux"

// ---- store_fact ----

type storeFactArgs struct {
	Entity           string   `json:"entity" schema:"minLength=1"`
	Key              string   `json:"key" schema:"minLength=1"`
	Value            string   `json:"value"`
	SourceReceipt    string   `json:"source_receipt,omitempty"`
	Confidence       *float64 `json:"confidence,omitempty" schema:"default=1;maximum=1;minimum=0"`
	Private          bool     `json:"private,omitempty" schema:"default=false" doc:"Visible to you alone."`
	HorizonClass     string   `json:"horizon_class,omitempty" schema:"enum=volatile|medium|stable|none"`
	FreshnessHorizon string   `json:"freshness_horizon,omitempty" doc:"e.g. 'a few hours', if no horizon_class."`
	Supersedes       []string `json:"supersedes,omitempty" schema:"maxItems=256"`
}

// StoreFactOutput is what store_fact returns: the version written and the
// facts it superseded (besides the previous version of its pair).
type StoreFactOutput struct {
	FactID            string   `json:"fact_id"`
	Entity            string   `json:"entity"`
	Key               string   `json:"key"`
	Version           uint32   `json:"version"`
	SupersededFactIDs []string `json:"superseded_fact_ids"`
	HorizonClass      string   `json:"horizon_class"`
	Private           bool     `json:"private,omitempty"`
}

func storeFact() *toolkit.Tool {
	const name = "store_fact"
	return &toolkit.Tool{
		Name:        name,
		Description: "Write a value under (entity, key) as a new version; fact_history keeps the old. supersedes: ids it retires, all visible to you or nothing is written.",
		Annotations: toolkit.Annotations{Title: "Store fact"},
		Out:         toolkit.OutputOf[StoreFactOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *storeFactArgs) (*toolkit.Result, error) {
			if err := checkNames(name, "entity", in.Entity, "key", in.Key); err != nil {
				return nil, err
			}
			if store.IsReserved(in.Entity) {
				return nil, reservedEntity(name, "entity", reservedForCrux)
			}
			if in.Private && c.Identity() == "" {
				return nil, anonymousRefused(name, "a private fact")
			}
			class := in.HorizonClass
			if class == "" && in.FreshnessHorizon != "" {
				class = store.ParseHorizon(in.FreshnessHorizon)
			}
			conf := 1.0
			if in.Confidence != nil {
				conf = *in.Confidence
			}
			var f *store.Fact
			var retired []string
			err := env.Store.Update(ctx, func(tx store.Tx) error {
				var err error
				f, retired, err = store.PutFact(tx, store.NewFact{Scope: c.Scope(),
					Entity: in.Entity, Key: in.Key,
					Value: in.Value, SourceReceipt: in.SourceReceipt, Confidence: conf,
					Private: in.Private, HorizonClass: class, Supersedes: in.Supersedes,
					Now: env.Time(), // read inside the transaction, so a chain's times follow its versions
				})
				return err
			})
			var se *store.SupersedeError
			if errors.As(err, &se) {
				return nil, toolkit.InvalidParams(name, "supersedes", se.Error())
			}
			if err != nil {
				return nil, err
			}
			if retired == nil {
				retired = []string{}
			}
			return toolkit.JSONResult(StoreFactOutput{
				FactID: f.ID, Entity: f.Entity, Key: f.Key, Version: f.Version,
				SupersededFactIDs: retired, HorizonClass: f.HorizonClass, Private: f.Private,
			})
		}),
	}
}

// ---- query_facts ----

// AdjustSchema declares query_facts' output contract.
func (queryFactsArgs) AdjustSchema(s map[string]any) { declareContract(s, crcKindFact) }

type queryFactsArgs struct {
	Query             string   `json:"query,omitempty" doc:"A question or keywords, stemmed and prefix-matched; common words and a question's what/did ignored."`
	Entity            string   `json:"entity,omitempty" schema:"minLength=1"`
	EntityPrefix      string   `json:"entity_prefix,omitempty" schema:"minLength=1"`
	Key               string   `json:"key,omitempty" schema:"minLength=1"`
	TopK              *int     `json:"top_k,omitempty" schema:"default=10;maximum=1000;minimum=1"`
	TokenBudget       int      `json:"token_budget,omitempty" schema:"minimum=1"`
	IncludeSuperseded bool     `json:"include_superseded,omitempty" schema:"default=false"`
	AsOf              string   `json:"as_of,omitempty"`
	MinEffective      *float64 `json:"min_effective_confidence,omitempty" schema:"maximum=1;minimum=0"`
	Contract          string   `json:"contract,omitempty"`
}

// FactRow is a fact as query_facts returns it.
type FactRow struct {
	FactID              string  `json:"fact_id"`
	Entity              string  `json:"entity"`
	Key                 string  `json:"key"`
	Value               string  `json:"value"`
	Confidence          float64 `json:"confidence"`
	EffectiveConfidence float64 `json:"effective_confidence"`
	HorizonClass        string  `json:"horizon_class"`
	Freshness           string  `json:"freshness"`
	AgeHours            float64 `json:"age_hours"`
	StoredAt            string  `json:"stored_at"`
	Version             uint32  `json:"version"`
	Private             bool    `json:"private,omitempty"`
	SupersededBy        string  `json:"superseded_by,omitempty"`
	// WrittenBy is the agent that stored the fact (see
	// VersionRow.WrittenBy); empty for an anonymous writer.
	WrittenBy string `json:"written_by,omitempty"`
	// Score is what the row ranks by: with a query, its relevance to the
	// query times its effective confidence; without, its effective
	// confidence.
	Score float64 `json:"score"`
	// ValueBytes is the length of the whole value when Value is cut (see
	// factValueCap); fact_history, or a token_budget of a quarter of it,
	// gives the value whole.
	ValueBytes int `json:"value_bytes,omitempty"`
}

// factValueCap is the most bytes of a value a query_facts row carries
// without a token_budget (with one, up to four bytes a token of it): ten
// rows of cut values stay well under 64 KiB. A cut value ends on a UTF-8
// boundary and its row gives value_bytes, the whole value's length.
const factValueCap = 4096

// cutValue cuts the value of row to limit bytes, saying so.
func cutValue(row *FactRow, limit int) {
	if len(row.Value) > limit {
		row.ValueBytes = len(row.Value)
		row.Value = codec.CutUTF8(row.Value, limit)
	}
}

// QueryFactsOutput is what query_facts returns.
type QueryFactsOutput struct {
	ContractFields
	Rows                   []FactRow `json:"rows"`
	Count                  int       `json:"count"`
	FilteredBelowThreshold int       `json:"filtered_below_threshold"`
	TotalTokens            int       `json:"total_tokens"`
	TruncatedByTokenBudget bool      `json:"truncated_by_token_budget"`
	Envelope               *Envelope `json:"envelope,omitempty"`
}

func queryFacts() *toolkit.Tool {
	const name = "query_facts"
	return &toolkit.Tool{
		Name:        name,
		Description: "Find current facts by entity, entity_prefix, key and/or a question or keywords; with a query ranked by relevance (BM25) times confidence (halved when stale), else by confidence; as_of reads the past.",
		Annotations: toolkit.Annotations{Title: "Query facts", ReadOnlyHint: true, IdempotentHint: true}, // its only write records a gap for a keyword query that finds nothing
		Out:         toolkit.OutputOf[QueryFactsOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *queryFactsArgs) (*toolkit.Result, error) {
			if err := checkNames(name, "entity", in.Entity, "entity_prefix", in.EntityPrefix, "key", in.Key); err != nil {
				return nil, err
			}
			now := env.Time()
			q := store.FactQuery{
				Scope:  c.Scope(),
				Entity: in.Entity, EntityPrefix: in.EntityPrefix, Key: in.Key,
				IncludeSuperseded: in.IncludeSuperseded, Limit: 10, Now: now, Policy: env.Decay(),
			}
			if in.TopK != nil {
				q.Limit = *in.TopK
			}
			if in.MinEffective != nil {
				q.MinEffective = *in.MinEffective
			}
			var err error
			if q.Terms, err = rankingTerms(name, in.Query); err != nil {
				return nil, err
			}
			if in.AsOf != "" {
				t, err := time.Parse(time.RFC3339Nano, in.AsOf)
				if err != nil {
					return nil, toolkit.InvalidParams(name, "as_of", "must be an RFC 3339 timestamp such as 2026-01-02T15:04:05Z")
				}
				q.AsOf = t
			}
			res, err := search(ctx, env.Store, q)
			if err != nil {
				return nil, err
			}
			out := QueryFactsOutput{ContractFields: newCRC(in.Contract, crcKindFact), Rows: make([]FactRow, 0, len(res.Facts)),
				FilteredBelowThreshold: res.BelowFloor}
			b := budget{Limit: in.TokenBudget}
			valueCap := factValueCap
			if in.TokenBudget > 0 {
				valueCap = max(valueCap, 4*in.TokenBudget)
			}
			for _, r := range res.Facts {
				row := newFactRow(r, now)
				cutValue(&row, valueCap)
				if !b.take(rowTokens(&row)) {
					break
				}
				out.Rows = append(out.Rows, row)
			}
			out.TotalTokens, out.TruncatedByTokenBudget = b.Used, b.Exceeded
			out.Count = len(out.Rows)
			if in.Query != "" && out.Count == 0 {
				// A gap observation for get_gaps (gaps.go). Recording it
				// must never fail the query: on error the result is returned
				// all the same and the gap is simply not recorded.
				_ = recordGap(ctx, env, c, in)
			}
			if !env.Flags.AuditEnvelope {
				return toolkit.JSONResult(out)
			}
			out.Envelope = readEnvelope(name, res.Facts[:out.Count], now)
			result, err := toolkit.JSONResult(out)
			if err == nil {
				result.Meta = map[string]any{"envelope": out.Envelope}
			}
			return result, err
		}),
	}
}

func newFactRow(r store.RankedFact, now time.Time) FactRow {
	return FactRow{
		FactID: r.ID, Entity: r.Entity, Key: r.Key, Value: r.Value,
		Confidence: r.Confidence, EffectiveConfidence: r.Effective,
		HorizonClass: r.HorizonClass, Freshness: r.Freshness,
		AgeHours: roundHours(now.Sub(r.Anchor())), StoredAt: r.StoredAt.Format(time.RFC3339Nano),
		Version: r.Version, Private: r.Private, SupersededBy: r.SupersededBy, WrittenBy: r.Owner,
		Score: math.Round(r.Score*1e4) / 1e4,
	}
}

func roundHours(d time.Duration) float64 {
	if d < 0 {
		d = 0
	}
	return float64(d.Round(36*time.Second)) / float64(time.Hour) // two decimals
}

// budget admits rows under a token budget: the first row always, then each
// row whose cost still fits. Once one does not fit, no later row is admitted
// and Exceeded is set. A Limit of 0 or less means no budget.
type budget struct {
	Limit    int
	Used     int // tokens of the admitted rows
	Exceeded bool
	rows     int
}

// take reports whether a row of cost tokens is admitted, counting it if so.
func (b *budget) take(cost int) bool {
	if b.Exceeded || b.Limit > 0 && b.rows > 0 && b.Used+cost > b.Limit {
		b.Exceeded = true
		return false
	}
	b.rows++
	b.Used += cost
	return true
}

// rowTokens is the token estimate of one row as it is sent: its JSON
// length divided by four, at least 1.
func rowTokens(v any) int {
	if a, ok := v.(toolkit.JSONAppender); ok {
		b := rowScratch.Get().(*[]byte)
		defer func() {
			if cap(*b) <= 64<<10 { // a row of a long value leaves no long buffer behind
				rowScratch.Put(b)
			}
		}()
		var good bool
		if *b, good = a.AppendJSON((*b)[:0]); good {
			return max(1, len(*b)/4)
		}
	}
	return max(1, codec.MarshalledLen(v)/4)
}

// rowScratch holds the buffers rowTokens writes rows into.
var rowScratch = sync.Pool{New: func() any { return new([]byte) }}

// ---- delete_fact ----

type deleteFactArgs struct {
	FactID string `json:"fact_id" schema:"minLength=1"`
}

// DeleteFactOutput is what delete_fact returns: deleted is false when the
// fact was already deleted.
type DeleteFactOutput struct {
	Deleted bool   `json:"deleted"`
	FactID  string `json:"fact_id"`
}

// FactHistoryOutput is what fact_history returns: a page of a version
// chain.
type FactHistoryOutput = HistoryPage[VersionRow]

func deleteFact() *toolkit.Tool {
	const name = "delete_fact"
	return &toolkit.Tool{
		Name:        name,
		Description: "Soft-delete a fact's current version (-32004 for an older one): gone from every read, kept in fact_history; the previous version does not come back.",
		Annotations: toolkit.Annotations{Title: "Delete fact", DestructiveHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[DeleteFactOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *deleteFactArgs) (*toolkit.Result, error) {
			var deleted bool
			err := env.Store.Update(ctx, func(tx store.Tx) error {
				f, err := store.VisibleFact(tx, c.Scope(), in.FactID)
				if err != nil {
					return err
				}
				if !f.Deleted && f.SupersededBy != "" {
					return notCurrent(tx, f)
				}
				_, deleted, err = store.DeleteFact(tx, c.Scope(), in.FactID, env.Time())
				return err
			})
			var nc *memNotCurrentError
			switch {
			case errors.As(err, &nc):
				return memFactFailure(name, in.FactID, err)
			case errors.Is(err, store.ErrNotFound):
				return toolkit.ErrorResult("fact not found: %s", in.FactID), nil
			case errors.Is(err, store.ErrReserved):
				return nil, toolkit.InvalidParams(name, "fact_id", "belongs to a reserved entity and cannot be deleted")
			case err != nil:
				return nil, err
			}
			return toolkit.JSONResult(DeleteFactOutput{Deleted: deleted, FactID: in.FactID})
		}),
	}
}

// ---- list_entities ----

// Limits of list_entities.
const (
	listEntitiesLimit    = 200  // default names
	listEntitiesMaxLimit = 1000 // largest limit
)

type listEntitiesArgs struct {
	Prefix string `json:"prefix,omitempty" schema:"minLength=1"`
	Limit  *int   `json:"limit,omitempty" schema:"default=200;maximum=1000;minimum=1"`
}

// ListEntitiesOutput is what list_entities returns.
type ListEntitiesOutput struct {
	Entities  []string `json:"entities"`
	Count     int      `json:"count"`     // names that match, listed or not
	Truncated bool     `json:"truncated"` // Entities lists fewer than Count
}

func listEntities() *toolkit.Tool {
	const name = "list_entities"
	return &toolkit.Tool{
		Name:        name,
		Description: "The entities holding a current fact you can see, sorted. When truncated, narrow with prefix.",
		Annotations: toolkit.Annotations{Title: "List entities", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[ListEntitiesOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *listEntitiesArgs) (*toolkit.Result, error) {
			if err := checkName(name, "prefix", in.Prefix); err != nil {
				return nil, err
			}
			limit := listEntitiesLimit
			if in.Limit != nil {
				limit = *in.Limit
			}
			var names []string
			err := env.Store.View(ctx, func(tx store.Tx) error {
				var err error
				names, err = store.ListEntities(tx, c.Scope())
				return err
			})
			if err != nil {
				return nil, err
			}
			out := ListEntitiesOutput{Entities: []string{}}
			for _, n := range names {
				if strings.HasPrefix(n, in.Prefix) {
					out.Count++
				}
			}
			rc := newRowCap(limit, ListEntitiesOutput{Entities: []string{}, Count: out.Count, Truncated: true})
			for _, n := range names {
				if !strings.HasPrefix(n, in.Prefix) {
					continue
				}
				if !rc.take(n) {
					break
				}
				out.Entities = append(out.Entities, n)
			}
			out.Truncated = len(out.Entities) < out.Count
			return toolkit.JSONResult(out)
		}),
	}
}

// ---- fact_history ----

type factHistoryArgs struct {
	Entity string `json:"entity" schema:"minLength=1"`
	Key    string `json:"key" schema:"minLength=1"`
	historyPageArgs
}

// VersionRow is one version of a fact as fact_history returns it.
type VersionRow struct {
	FactID       string  `json:"fact_id"`
	Value        string  `json:"value"`
	Version      uint32  `json:"version"`
	Supersedes   string  `json:"supersedes,omitempty"`
	SupersededBy string  `json:"superseded_by,omitempty"`
	Confidence   float64 `json:"confidence"`
	StoredAt     string  `json:"stored_at"`
	Deleted      bool    `json:"deleted"`
	Private      bool    `json:"private,omitempty"`
	// WrittenBy is the agent that stored the version; for a version a
	// passport split or merge brought here, the passport that holds it
	// now (Origins say where it came from). Empty for an anonymous
	// writer.
	WrittenBy string `json:"written_by,omitempty"`
	// SourceReceipt is the receipt the version was written under, when a
	// tool that mints one wrote it (record_decision does; store_fact
	// mints none).
	SourceReceipt string `json:"source_receipt,omitempty"`
	// Origins are the passport splits and merges that brought the
	// version here, oldest first.
	Origins []store.FactOrigin `json:"origins,omitempty"`
}

func factHistory() *toolkit.Tool {
	const name = "fact_history"
	return &toolkit.Tool{
		Name:        name,
		Description: "Every version of one (entity, key), superseded and deleted included, newest first, paged.",
		Annotations: toolkit.Annotations{Title: "Fact history", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[FactHistoryOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *factHistoryArgs) (*toolkit.Result, error) {
			if err := checkNames(name, "entity", in.Entity, "key", in.Key); err != nil {
				return nil, err
			}
			var out *HistoryPage[VersionRow]
			err := env.Store.View(ctx, func(tx store.Tx) error {
				var err error
				out, err = readHistoryPage(tx, name, c, store.HistoryQuery{Scope: c.Scope(), Entity: in.Entity, Key: in.Key},
					in.historyPageArgs, func(f *store.Fact) VersionRow {
						return VersionRow{
							FactID: f.ID, Value: f.Value, Version: f.Version, Supersedes: f.Supersedes,
							SupersededBy: f.SupersededBy, Confidence: f.Confidence,
							StoredAt: f.StoredAt.Format(time.RFC3339Nano), Deleted: f.Deleted, Private: f.Private,
							WrittenBy: f.Owner, SourceReceipt: f.SourceReceipt, Origins: f.Origins,
						}
					})
				return err
			})
			if err != nil {
				return nil, err
			}
			return toolkit.JSONResult(out)
		}),
	}
}
