package tools

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"lukechampine.com/blake3"

	"github.com/crux-go/crux/index"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// Observability: get_gaps, and the gap observations empty keyword
// queries of query_facts record.
//
// A gap observation belongs to the agent that asked (anonymous callers
// share one log): get_gaps shows an agent its own records and words, and
// of the tenant's only counts (records, distinct words), never a word of
// another agent's, nor how often another agent asked a word. Each text of a record is cut to maxGapTextBytes. The store keeps
// at most store.MaxGapsPerAgent records per agent and
// store.MaxGapObservations per tenant (least recently seen evicted).

// Limits of the gap observations and of get_gaps.
const (
	// maxGapTextBytes is the most bytes of a query, or of one of its
	// filters, a gap record keeps.
	maxGapTextBytes = 512
	// gapsLimit is get_gaps' default number of records.
	gapsLimit = 50
	// maxGapSummaryTerms is the most terms the tenant summary lists.
	maxGapSummaryTerms = 50
)

type getGapsArgs struct {
	Query string `json:"query,omitempty"`
	Limit *int   `json:"limit,omitempty" schema:"default=50;maximum=200;minimum=1"`
}

// GapRow is one gap observation as get_gaps returns it.
type GapRow struct {
	Entity   string `json:"entity"`
	Key      string `json:"key"`
	Value    string `json:"value"`
	StoredAt string `json:"stored_at"`
	Count    int    `json:"count"`
}

// GapTerm is one normalised word of the caller's unanswered queries, and
// how many of them held it.
type GapTerm struct {
	Term  string `json:"term"`
	Count int    `json:"count"`
}

// GapSummary is the tenant's gaps, summarised so that no other agent's
// query text shows: the tenant's counts, and the caller's own words.
type GapSummary struct {
	Records       int       `json:"records"`        // gap records of the tenant, every agent's
	DistinctTerms int       `json:"distinct_terms"` // distinct query words of the tenant's records, every agent's
	Terms         []GapTerm `json:"terms"`          // the caller's words, most asked first, at most maxGapSummaryTerms
	OwnTerms      int       `json:"own_terms"`      // the caller's distinct words that match, listed or not
	Truncated     bool      `json:"truncated"`      // Terms lists fewer than OwnTerms
}

// GetGapsOutput is what get_gaps returns.
type GetGapsOutput struct {
	Gaps          []GapRow   `json:"gaps"`
	Count         int        `json:"count"`     // the caller's records that match, listed or not
	Truncated     bool       `json:"truncated"` // Gaps lists fewer than Count
	TotalTokens   int        `json:"total_tokens"`
	TenantSummary GapSummary `json:"tenant_summary"`
}

// gapQuery is the value of a gap observation: what query_facts was asked.
type gapQuery struct {
	Query             string `json:"query"`
	Entity            string `json:"entity,omitempty"`
	EntityPrefix      string `json:"entity_prefix,omitempty"`
	Key               string `json:"key,omitempty"`
	AsOf              string `json:"as_of,omitempty"`
	IncludeSuperseded bool   `json:"include_superseded,omitempty"`
	MinEffective      any    `json:"min_effective_confidence,omitempty"`
	Tool              string `json:"tool"`
	// Tenant is the document index a query searched, when not the caller's.
	Tenant string `json:"tenant,omitempty"`
	// Truncated says a text above was cut to maxGapTextBytes.
	Truncated bool `json:"truncated,omitempty"`
}

// cutGapText cuts s to maxGapTextBytes on a UTF-8 boundary, reporting
// whether it did.
func cutGapText(s string) (string, bool) { return cutText(s, maxGapTextBytes) }

// recordGap records a keyword query_facts call that returned no rows as a
// gap observation of the caller, in its own transaction. It stores the
// query and its filters, each cut to maxGapTextBytes.
func recordGap(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *queryFactsArgs) error {
	g := gapQuery{IncludeSuperseded: in.IncludeSuperseded, Tool: "query_facts"}
	for _, f := range []struct {
		dst *string
		src string
	}{{&g.Query, in.Query}, {&g.Entity, in.Entity}, {&g.EntityPrefix, in.EntityPrefix}, {&g.Key, in.Key}, {&g.AsOf, in.AsOf}} {
		var cut bool
		*f.dst, cut = cutGapText(f.src)
		g.Truncated = g.Truncated || cut
	}
	if in.MinEffective != nil {
		g.MinEffective = *in.MinEffective
	}
	return saveGap(ctx, env, c, g)
}

// saveGap records g as a gap observation of c, in its own transaction;
// its query is cut to maxGapTextBytes here if the caller did not.
func saveGap(ctx context.Context, env *toolkit.Env, c toolkit.Caller, g gapQuery) error {
	var cut bool
	g.Query, cut = cutGapText(g.Query)
	g.Truncated = g.Truncated || cut
	value, err := json.Marshal(g)
	if err != nil {
		return err
	}
	sum := blake3.Sum256(value)
	key := "gap:" + hex.EncodeToString(sum[:8])
	now := env.Time()
	return env.Store.Update(ctx, func(tx store.Tx) error {
		_, err := store.RecordGap(tx, c.Scope(), key, string(value), now)
		return err
	})
}

func getGaps() *toolkit.Tool {
	const name = "get_gaps"
	return &toolkit.Tool{
		Name:        name,
		Description: "Your query_facts keyword queries that found nothing, and their words, with counts; the tenant's counts only.",
		Annotations: toolkit.Annotations{Title: "Get gaps", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[GetGapsOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *getGapsArgs) (*toolkit.Result, error) {
			terms, err := queryTerms(name, in.Query)
			if err != nil {
				return nil, err
			}
			limit := gapsLimit
			if in.Limit != nil {
				limit = *in.Limit
			}
			var out GetGapsOutput
			err = env.Store.View(ctx, func(tx store.Tx) error {
				out = GetGapsOutput{Gaps: []GapRow{}}
				var err error
				if out.TenantSummary, err = summariseGaps(tx, c.Scope(), terms); err != nil {
					return err
				}
				empty := out
				empty.Truncated, empty.Count, empty.TotalTokens = true, store.MaxGapsPerAgent, 1<<20
				rc := newRowCap(limit, empty)
				return store.Gaps(tx, c.Scope(), func(g *store.Gap) error {
					if len(terms) > 0 && !wordsMatch(gapText(g.Value), terms) {
						return nil
					}
					out.Count++
					row := GapRow{Entity: store.GapEntity, Key: g.Key, Value: g.Value,
						StoredAt: g.StoredAt.Format(time.RFC3339Nano), Count: g.Count}
					if rc.take(row) {
						out.Gaps = append(out.Gaps, row)
						out.TotalTokens += rowTokens(row)
					}
					return nil
				})
			})
			if err != nil {
				return nil, err
			}
			out.Truncated = len(out.Gaps) < out.Count
			return toolkit.JSONResult(out)
		}),
	}
}

// summariseGaps summarises the gaps of scope's tenant for scope's agent:
// the tenant's records and distinct query words, counted over every
// agent's records, and how many times the agent's own records asked each
// of their words; with terms, only the words starting with one of them.
// Terms filter the agent's words alone, so that no filter probes another
// agent's.
func summariseGaps(tx store.Tx, scope store.Scope, terms []string) (GapSummary, error) {
	sum := GapSummary{Terms: []GapTerm{}}
	queryWords := func(g *store.Gap) []string {
		var q gapQuery
		if json.Unmarshal([]byte(g.Value), &q) != nil {
			return nil
		}
		return index.LowerWords(q.Query)
	}
	distinct := map[string]bool{}
	err := store.TenantGaps(tx, scope.Tenant, func(g *store.Gap) error {
		sum.Records++
		for _, w := range queryWords(g) {
			distinct[w] = true
		}
		return nil
	})
	if err != nil {
		return sum, err
	}
	sum.DistinctTerms = len(distinct)
	counts := map[string]int{}
	err = store.Gaps(tx, scope, func(g *store.Gap) error {
		for _, w := range queryWords(g) {
			if len(terms) == 0 || wordsMatch(w, terms) {
				counts[w] += g.Count
			}
		}
		return nil
	})
	if err != nil {
		return sum, err
	}
	for w, n := range counts {
		sum.Terms = append(sum.Terms, GapTerm{Term: w, Count: n})
	}
	slices.SortFunc(sum.Terms, func(a, b GapTerm) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Term, b.Term)
	})
	sum.OwnTerms = len(sum.Terms)
	if len(sum.Terms) > maxGapSummaryTerms {
		sum.Terms, sum.Truncated = sum.Terms[:maxGapSummaryTerms], true
	}
	return sum, nil
}

// gapText is the searchable text of a gap value: its query and filters.
func gapText(value string) string {
	var g gapQuery
	if json.Unmarshal([]byte(value), &g) != nil {
		return value
	}
	return strings.Join([]string{g.Query, g.Entity, g.EntityPrefix, g.Key}, " ")
}

// wordsMatch reports whether a word of text starts with one of terms.
func wordsMatch(text string, terms []string) bool {
	for _, w := range store.Words(text) {
		for _, t := range terms {
			if strings.HasPrefix(w, t) {
				return true
			}
		}
	}
	return false
}
