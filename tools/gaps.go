package tools

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"lukechampine.com/blake3"

	"github.com/crux-go/crux/store"
)

// Observability: get_gaps, and the gap observations empty keyword
// queries of query_facts record.
//
// Gap observations are tenant-wide and do not name the agent that asked;
// one record per distinct query and filters, at most
// store.MaxGapObservations per tenant (least recently seen evicted).

type getGapsArgs struct {
	Query string `json:"query,omitempty"`
	Limit *int   `json:"limit,omitempty"`
}

// gapRow is one gap observation as get_gaps returns it.
type gapRow struct {
	Entity   string `json:"entity"`
	Key      string `json:"key"`
	Value    string `json:"value"`
	StoredAt string `json:"stored_at"`
	Count    int    `json:"count"`
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
}

// recordGap records a keyword query_facts call that returned no rows as a
// gap observation, in its own transaction. It stores the query and its
// filters, not the caller.
func recordGap(ctx context.Context, env *Env, c Caller, in *queryFactsArgs) error {
	g := gapQuery{Query: in.Query, Entity: in.Entity, EntityPrefix: in.EntityPrefix, Key: in.Key,
		AsOf: in.AsOf, IncludeSuperseded: in.IncludeSuperseded, Tool: "query_facts"}
	if in.MinEffective != nil {
		g.MinEffective = *in.MinEffective
	}
	value, err := json.Marshal(g)
	if err != nil {
		return err
	}
	sum := blake3.Sum256(value)
	key := "gap:" + hex.EncodeToString(sum[:8])
	now := env.now()
	return env.Store.Update(ctx, func(tx store.Tx) error {
		_, err := store.RecordGap(tx, c.TenantID(), key, string(value), now)
		return err
	})
}

func getGaps() *Tool {
	const name = "get_gaps"
	return &Tool{
		Name: name,
		Description: "What the memory could not answer: every query_facts call with a keyword query that returned " +
			"no rows is recorded as a gap observation of your tenant (the query and its filters, not who asked; one " +
			"record per distinct query, with a count; at most 1000 kept, least recently seen dropped first). Most " +
			"recently seen first; query keeps the gaps whose text has a word starting with one of its words. Check " +
			"it after a low-coverage query. Retrieval queries are not recorded yet.",
		Annotations: Annotations{Title: "Get gaps", ReadOnlyHint: true, IdempotentHint: true},
		Output:      "{gaps: [{entity, key, value, stored_at, count}], total_tokens}",
		schema:      schemaFor(name),
		run: bind(name, func(ctx context.Context, env *Env, c Caller, in *getGapsArgs) (*Result, error) {
			terms, err := queryTerms(name, in.Query)
			if err != nil {
				return nil, err
			}
			limit := 50
			if in.Limit != nil {
				limit = *in.Limit
			}
			out := struct {
				Gaps        []gapRow `json:"gaps"`
				TotalTokens int      `json:"total_tokens"`
			}{Gaps: []gapRow{}}
			err = env.Store.View(ctx, func(tx store.Tx) error {
				out.Gaps, out.TotalTokens = out.Gaps[:0], 0
				return store.Gaps(tx, c.TenantID(), func(g *store.Gap) error {
					if len(terms) > 0 && !wordsMatch(gapText(g.Value), terms) {
						return nil
					}
					row := gapRow{Entity: store.GapEntity, Key: g.Key, Value: g.Value,
						StoredAt: g.StoredAt.Format(time.RFC3339Nano), Count: g.Count}
					out.Gaps = append(out.Gaps, row)
					out.TotalTokens += rowTokens(row)
					if len(out.Gaps) >= limit {
						return store.ErrStop
					}
					return nil
				})
			})
			if err != nil {
				return nil, err
			}
			return jsonResult(out)
		}),
	}
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
