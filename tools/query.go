package tools

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/crux-go/crux/index"
	"github.com/crux-go/crux/internal/codec"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// Retrieval: query, query_scan and query_expand, over the documents
// ingested per tenant (Ingest; crux ingest).
//
// A tenant's documents are cut into segments, and the tools rank
// segments: a result is one segment, named by its result id
// "<segment_index>:<doc_id>", which query_expand takes back. doc_id is
// exactly the id the document was ingested with.
//
// query ranks segments by BM25 over their terms (k1 0.9, b 0.75; the
// index package says how text becomes terms; the words that only shape a
// question, such as "what" and "did", weigh half), and then:
//
//   - context: a segment rises halfway towards the score of a better
//     neighbour, the segment before or after it in its document, or in
//     the document written before or after its own when their titles are
//     alike (store.ContextShare), so that the turn answering a question
//     ranks near the turn that asks it;
//   - the entity-graph lane: the facts matching the query (as query_facts
//     would find them, for this caller) name entities, and the segments
//     that mention an entity (hold every term of its name), ranked by that
//     entity's place and their BM25 for its name, take a bonus of
//     graphBonus/rank of the best BM25 score: a small one, so that the
//     lane reorders close results and brings in segments BM25 missed, but
//     never puts a segment above one that scores (BM25 and context) more
//     than that bonus higher;
//   - the phrase: each of the best 2·limit segments takes, for every two
//     words that follow each other in the query and in its text in the
//     same order (stop words passed over), half the BM25 weight of the
//     rarer of the two (index.Phrase), and they are sorted again: a
//     segment that says the query's words as the query says them ranks
//     above one that scatters them;
//   - distinct documents first: of the best 2·limit segments, the best of
//     each document come first, the others after them.
//
// Each result lists its lanes (bm25, context, entity_graph), and the
// entities that linked it; the answer lists those facts.
//
// Tenants: tenant_id names the index to search. A caller bound to a
// tenant other than the default one may name only its own (else -32003);
// a caller of the default tenant, such as the local agent that owns the
// data directory, may name any tenant.

// Limits of the retrieval tools.
const (
	queryLimit         = 10   // query's default results
	queryMaxLimit      = 100  // and its largest limit
	queryBudget        = 8000 // query's default token_budget
	scanLimit          = 20   // query_scan's default results
	scanMaxLimit       = 200  // and its largest limit
	scanBudget         = 4000 // query_scan's default token_budget
	expandBudget       = 8000 // query_expand's default token_budget
	expandMaxIDs       = 50   // most result_ids of one query_expand
	maxQueryTerms      = 64   // most distinct terms of a query
	laneDepth          = 50   // results each lane of query ranks before fusion
	graphBonus         = 0.1  // the entity-graph lane's bonus at rank 1, a share of the best BM25 score
	graphFacts         = 8    // facts the entity-graph lane starts from
	graphEntities      = 5    // entities it follows
	snippetBytes       = 160  // longest snippet of a query result
	lowCoverage        = 0.5  // a query whose coverage is below it is recorded for get_gaps
	maxLinkedFactValue = 240  // bytes of a linked fact's value query shows
)

// Lane names, as results list them.
const (
	laneBM25    = "bm25"
	laneContext = "context"
	laneGraph   = "entity_graph"
)

// The lanes of a result the BM25 lane ranked, of one context alone found,
// and of one both did, shared by the results (as lanes[:n:n], so that
// adding a lane copies them).
var (
	bm25Lane        = []string{laneBM25}
	contextLane     = []string{laneContext}
	bm25ContextLane = []string{laneBM25, laneContext}
)

// hitLanes are the lanes of a hit of the BM25 lane.
func hitLanes(h store.DocHit) []string {
	switch {
	case h.Context > 0 && h.Score > 0:
		return bm25ContextLane[:2:2]
	case h.Context > 0:
		return contextLane[:1:1]
	}
	return bm25Lane[:1:1]
}

// The output contract of the retrieval-shaped tools (query, query_scan,
// query_expand, query_facts). It is on by default: their answers carry
// contract "crc-v1" and their kind; a contract argument of legacy, v0,
// none or off (any case) leaves both out.
const (
	crcV1         = "crc-v1"
	crcKindSearch = "search"
	crcKindAddr   = "addressed"
	crcKindFact   = "fact"
)

// declareContract adds to the input schema s of a retrieval-shaped tool
// the output contract its answers carry, of the kind given, under the
// extension keyword x-crux-output-schema.
func declareContract(s map[string]any, kind string) {
	s["x-crux-output-schema"] = map[string]any{"$ref": "urn:crux:output:" + crcV1 + ":" + kind, "contract": crcV1, "kind": kind,
		"when": "unless the contract argument is legacy, v0, none or off"}
}

// AdjustSchema declares query's output contract.
func (queryArgs) AdjustSchema(s map[string]any) { declareContract(s, crcKindSearch) }

// AdjustSchema declares query_scan's output contract.
func (queryScanArgs) AdjustSchema(s map[string]any) { declareContract(s, crcKindSearch) }

// AdjustSchema declares query_expand's output contract.
func (queryExpandArgs) AdjustSchema(s map[string]any) { declareContract(s, crcKindAddr) }

// crcOn reports whether the contract argument leaves CRC-v1 on.
func crcOn(contract string) bool {
	switch strings.ToLower(strings.TrimSpace(contract)) {
	case "legacy", "v0", "none", "off":
		return false
	}
	return true
}

// ContractFields are the contract and kind an answer carries when the
// call asked for an output contract (see the contract argument).
type ContractFields struct {
	Contract string `json:"contract,omitempty"`
	Kind     string `json:"kind,omitempty"`
}

func newCRC(contract, kind string) ContractFields {
	if !crcOn(contract) {
		return ContractFields{}
	}
	return ContractFields{Contract: crcV1, Kind: kind}
}

// tenantFor checks that c may use the index of tenant: a caller of the
// default tenant may name any; another only its own.
func tenantFor(tool string, c toolkit.Caller, tenant string) error {
	switch {
	case tenant == "*":
		return toolkit.InvalidParams(tool, "tenant_id", `must name one tenant, not "*"`)
	case checkName(tool, "tenant_id", tenant) != nil:
		return checkName(tool, "tenant_id", tenant)
	case c.TenantID() != toolkit.DefaultTenant && tenant != c.TenantID():
		return &toolkit.Error{Code: toolkit.CodeForbidden,
			Message: fmt.Sprintf("%s: tenant_id: the caller is bound to tenant %q and may not use tenant %q", tool, c.TenantID(), tenant),
			Data:    &toolkit.ParamError{Param: "tenant_id", Reason: "another tenant's index"}}
	}
	return nil
}

// analyseQuery returns the distinct terms of a query, or the -32602 of a
// query without one.
func analyseQuery(tool, param, query string) ([]index.QueryTerm, error) {
	terms, stops := index.Query(query)
	switch {
	case len(terms) == 0 && len(stops) > 0:
		return nil, toolkit.InvalidParams(tool, param, "holds only common words ("+strings.Join(stops, ", ")+"), which the index does not keep; ask with a word that says what you look for")
	case len(terms) == 0:
		return nil, toolkit.InvalidParams(tool, param, "needs a word of at least two letters or digits")
	case len(terms) > maxQueryTerms:
		return nil, toolkit.InvalidParams(tool, param, fmt.Sprintf("has more than %d distinct words", maxQueryTerms))
	}
	return terms, nil
}

// searchArgs checks the arguments every retrieval tool takes: the tenant
// c names, the text to search for (the argument param) and the limit
// (def when omitted). It returns the text's terms and the limit.
func searchArgs(tool string, c toolkit.Caller, tenant, param, text string, limit *int, def int) ([]index.QueryTerm, int, error) {
	if err := tenantFor(tool, c, tenant); err != nil {
		return nil, 0, err
	}
	qt, err := analyseQuery(tool, param, text)
	if err != nil {
		return nil, 0, err
	}
	if limit != nil {
		def = *limit
	}
	return qt, def, nil
}

// budgetOf is the budget of a token_budget argument, def when omitted.
func budgetOf(tokenBudget, def int) budget {
	if tokenBudget == 0 {
		tokenBudget = def
	}
	return budget{Limit: tokenBudget}
}

func termStrings(qt []index.QueryTerm) []string {
	out := make([]string, len(qt))
	for i, t := range qt {
		out[i] = t.Term
	}
	return out
}

// resultID is the id of a segment as the retrieval tools name it.
func resultID(seg *store.Segment) string { return strconv.Itoa(seg.Index) + ":" + seg.DocID }

// parseResultID splits a result id into segment index and document id.
func parseResultID(id string) (int, string, bool) {
	n, doc, ok := strings.Cut(id, ":")
	if !ok || doc == "" || n == "" || len(n) > 9 || strings.TrimLeft(n, "0123456789") != "" || (len(n) > 1 && n[0] == '0') {
		return 0, "", false
	}
	i, err := strconv.Atoi(n)
	return i, doc, err == nil
}

// skippable reports whether err is a record a listing passes over: gone,
// or unreadable (crux doctor reports it).
func skippable(err error) bool {
	return err != nil && (errors.Is(err, store.ErrNotFound) || errors.As(err, new(*store.CorruptRecordError)))
}

func round4(f float64) float64 { return math.Round(f*1e4) / 1e4 }

// ---- query ----

type queryArgs struct {
	TenantID    string   `json:"tenant_id" schema:"minLength=1"`
	Query       string   `json:"query" schema:"minLength=1"`
	Limit       *int     `json:"limit,omitempty" schema:"default=10;maximum=100;minimum=1"`
	TokenBudget int      `json:"token_budget,omitempty" schema:"minimum=1"`
	MinScore    *float64 `json:"min_score,omitempty" schema:"minimum=0"`
	Contract    string   `json:"contract,omitempty"`
}

// QueryRow is one result of query.
type QueryRow struct {
	ResultID     string   `json:"result_id"`
	Rank         int      `json:"rank"`
	DocID        string   `json:"doc_id"`
	SegmentIndex int      `json:"segment_index"`
	Title        string   `json:"title,omitempty"`
	Score        float64  `json:"score"`       // BM25 of the query; 0 for a segment holding none of its terms
	FusedScore   float64  `json:"fused_score"` // what results are ranked by: score, its context lift, graph bonus and phrase bonus
	Lanes        []string `json:"lanes"`
	Entities     []string `json:"entities,omitempty"` // the entities that linked it
	TokenCount   int      `json:"token_count"`
	Snippet      string   `json:"snippet"`
}

// LinkedFact is a fact of the entity-graph lane.
type LinkedFact struct {
	FactID    string `json:"fact_id"`
	Entity    string `json:"entity"`
	Key       string `json:"key"`
	Value     string `json:"value"`
	Truncated bool   `json:"value_truncated,omitempty"`
}

// QueryCoverage says how much of a query the index knows.
type QueryCoverage struct {
	Score      float64  `json:"score"` // share of the query's terms the index holds
	Gaps       []string `json:"gaps"`  // the query's words whose terms it does not
	BelowFloor int      `json:"below_floor"`
}

// QueryMeta describes how a query ran.
type QueryMeta struct {
	Backend          string `json:"backend"`
	TookMS           int64  `json:"took_ms"` // whole milliseconds
	SegmentsSearched int    `json:"segments_searched"`
}

// QueryOutput is what query returns.
type QueryOutput struct {
	ContractFields
	Results         []QueryRow    `json:"results"`
	Count           int           `json:"count"`
	TotalCandidates int           `json:"total_candidates"`
	Coverage        QueryCoverage `json:"coverage"`
	Facts           []LinkedFact  `json:"facts"`
	TokensReturned  int           `json:"tokens_returned"` // token_count of the results, summed
	BudgetTruncated bool          `json:"budget_truncated"`
	Meta            QueryMeta     `json:"meta"`
}

// fused is a segment on its way through fusion.
type fused struct {
	seq      uint32
	bm25     float64
	score    float64
	lanes    []string
	entities []string
}

func (d *Deps) query() *toolkit.Tool {
	const name = "query"
	return &toolkit.Tool{
		Name:        name,
		Description: "Search a tenant's documents (BM25, entity graph): segments with result_id for query_expand; coverage lists unknown words.",
		Annotations: toolkit.Annotations{Title: "Query documents", ReadOnlyHint: true, IdempotentHint: true}, // its only write records a gap for a low-coverage query
		Out:         toolkit.OutputOf[QueryOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *queryArgs) (*toolkit.Result, error) {
			start := time.Now()
			qt, limit, err := searchArgs(name, c, in.TenantID, "query", in.Query, in.Limit, queryLimit)
			if err != nil {
				return nil, err
			}
			minScore := 0.0
			if in.MinScore != nil && *in.MinScore > 0 {
				// Scores are shown rounded to 4 decimals; a floor keeps
				// every result whose shown score reaches it.
				minScore = *in.MinScore - 0.5e-4
			}
			terms := termStrings(qt) // the graph lane's keywords too, common words left out
			now := env.Time()
			out := QueryOutput{ContractFields: newCRC(in.Contract, crcKindSearch), Results: []QueryRow{}, Facts: []LinkedFact{}}
			err = env.Store.View(ctx, func(tx store.Tx) error {
				store.PrefetchDocSearch(tx, in.TenantID, terms) // read with the graph lane's first reads
				facts, lane, err := graphLane(tx, env, c, in.TenantID, terms, now)
				if err != nil {
					return err
				}
				depth := 2 * limit // distinct documents are picked from twice the limit
				if len(lane) > 0 {
					depth = max(depth, laneDepth)
				}
				also := make([]uint32, len(lane))
				for i, g := range lane {
					also[i] = g.seq
				}
				store.PrefetchSegments(tx, in.TenantID, also) // read with the hits' neighbours
				weights := index.QueryWeights(in.Query, qt)
				res, err := store.SearchDocuments(tx, store.DocQuery{Tenant: in.TenantID, Terms: terms,
					Weights: weights, Limit: depth, MinScore: minScore, Also: also, Context: true})
				if err != nil {
					return err
				}
				out.Coverage = queryCoverage(qt, res.DF, res.BelowFloor)
				out.TotalCandidates = res.Candidates
				out.Meta.SegmentsSearched = res.Stats.Segments
				if res.Stats.Segments == 0 {
					return nil
				}
				all := make([]fused, len(res.Hits), len(res.Hits)+len(lane)) // never grown: order points into it
				order := make([]*fused, len(res.Hits), cap(all))
				best := 0.0 // the best BM25 score, which the graph bonus is a share of
				for i, h := range res.Hits {
					all[i] = fused{seq: h.Seq, bm25: h.Score, score: h.Score + h.Context, lanes: hitLanes(h)}
					order[i] = &all[i]
					best = max(best, h.Score)
				}
				if best == 0 {
					best = 1 // no BM25 hit: the bonus orders the graph lane's segments alone
				}
				var byseq map[uint32]*fused
				if len(lane) > 0 {
					byseq = make(map[uint32]*fused, cap(all))
					for _, f := range order {
						byseq[f.seq] = f
					}
				}
				for i, g := range lane {
					f := byseq[g.seq]
					if f == nil {
						// Ranked by the graph lane alone: its BM25 score, if
						// any, is shown, and a floor applies to it. One that
						// holds a query term and scores under the floor is
						// counted in below_floor already; one that holds
						// none is counted here.
						bm25 := res.AlsoScores[i]
						if bm25 < minScore {
							if bm25 == 0 {
								out.Coverage.BelowFloor++
							}
							continue
						}
						all = append(all, fused{seq: g.seq, bm25: bm25, score: bm25})
						f = &all[len(all)-1]
						byseq[g.seq] = f
						order = append(order, f)
					}
					f.score += graphBonus * best / float64(i+1)
					f.lanes = append(f.lanes, laneGraph)
					f.entities = g.entities
				}
				sortFused(order)
				// The segments the phrase and distinctFirst read first, in one go.
				seqs := make([]uint32, 0, min(2*limit, len(order)))
				for _, f := range order[:cap(seqs)] {
					seqs = append(seqs, f.seq)
				}
				store.PrefetchSegments(tx, in.TenantID, seqs)
				if err := d.rerankPhrase(tx, in.TenantID, in.Query, qt, weights, res, order, limit); err != nil {
					return err
				}
				b := budgetOf(in.TokenBudget, queryBudget)
				finder := newTermFinder(qt)
				out.Results = make([]QueryRow, 0, min(limit, len(order)))
				linked := make(map[string]bool)
				picked, err := d.distinctFirst(tx, in.TenantID, order, limit)
				if err != nil {
					return err
				}
				for _, p := range picked {
					f, seg := p.f, p.seg
					if !b.take(seg.Tokens) {
						break
					}
					out.Results = append(out.Results, QueryRow{
						ResultID: resultID(seg), Rank: len(out.Results) + 1, DocID: seg.DocID, SegmentIndex: seg.Index,
						Title: seg.Title, Score: round4(f.bm25), FusedScore: round4(f.score), Lanes: f.lanes,
						Entities: f.entities, TokenCount: seg.Tokens, Snippet: snippet(seg.Text, finder),
					})
					for _, e := range f.entities {
						linked[e] = true
					}
				}
				out.TokensReturned, out.BudgetTruncated = b.Used, b.Exceeded
				for _, lf := range facts {
					if linked[lf.Entity] {
						out.Facts = append(out.Facts, lf)
					}
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			out.Count = len(out.Results)
			out.Meta.Backend = "bm25+entity_graph"
			out.Meta.TookMS = time.Since(start).Milliseconds()
			if out.Count == 0 || out.Coverage.Score < lowCoverage {
				// Recording the gap must never fail the query.
				_ = saveGap(ctx, env, c, gapQuery{Query: in.Query, Tenant: in.TenantID, Tool: name})
			}
			return toolkit.JSONResult(out)
		}),
	}
}

// rerankPhrase adds to the scores of the best segments of order what
// their text holds of the query's phrase (index.Phrase) and sorts them
// again.
func (d *Deps) rerankPhrase(tx store.Tx, tenant, query string, qt []index.QueryTerm, weights []float64, res store.DocResult, order []*fused, limit int) error {
	n := min(len(order), 2*limit) // the segments distinctFirst reads first
	if n < 2 {
		return nil
	}
	w := make([]float64, len(qt))
	for i := range qt {
		w[i] = index.IDF(res.Stats.Segments, res.DF[i])
		if i < len(weights) && weights[i] > 0 {
			w[i] *= weights[i]
		}
	}
	ph := index.NewPhrase(query, qt, w)
	if ph == nil {
		return nil
	}
	for _, f := range order[:n] {
		seg, err := d.segments.segment(tx, tenant, f.seq)
		if skippable(err) {
			continue
		}
		if err != nil {
			return err
		}
		f.score += ph.Score(seg.Title, seg.Text)
	}
	sortFused(order[:n])
	return nil
}

// pick is a segment query answers with.
type pick struct {
	f   *fused
	seg *store.Segment
}

// distinctFirst picks up to limit of the segments of order (best first,
// those gone or unreadable passed over): the best segment of each
// document first, in order, then the others, in order.
func (d *Deps) distinctFirst(tx store.Tx, tenant string, order []*fused, limit int) ([]pick, error) {
	out := make([]pick, 0, min(limit, len(order)))
	var later []pick
	docs := make(map[string]bool, limit)
	for _, f := range order {
		if len(out) == limit {
			break
		}
		seg, err := d.segments.segment(tx, tenant, f.seq)
		if skippable(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if docs[seg.DocID] {
			later = append(later, pick{f, seg})
			continue
		}
		docs[seg.DocID] = true
		out = append(out, pick{f, seg})
	}
	for _, p := range later {
		if len(out) == limit {
			break
		}
		out = append(out, p)
	}
	return out, nil
}

// sortFused sorts order best first: by fused score, then BM25, then seq.
func sortFused(order []*fused) {
	slices.SortStableFunc(order, func(a, b *fused) int {
		switch {
		case a.score != b.score:
			return cmpDesc(a.score, b.score)
		case a.bm25 != b.bm25:
			return cmpDesc(a.bm25, b.bm25)
		}
		return int(int64(a.seq) - int64(b.seq))
	})
}

func cmpDesc(a, b float64) int {
	if a > b {
		return -1
	}
	return 1
}

// queryCoverage is the coverage of a query whose terms the index holds in
// df[i] segments.
func queryCoverage(qt []index.QueryTerm, df []int, belowFloor int) QueryCoverage {
	cov := QueryCoverage{Gaps: []string{}, BelowFloor: belowFloor}
	known := 0
	for i, t := range qt {
		if i < len(df) && df[i] > 0 {
			known++
			continue
		}
		cov.Gaps = append(cov.Gaps, t.Words...)
	}
	if len(qt) > 0 {
		cov.Score = round4(float64(known) / float64(len(qt)))
	}
	return cov
}

// graphHit is a segment of the entity-graph lane.
type graphHit struct {
	seq      uint32
	entities []string
}

// graphLane returns the facts of the caller in tenant matching the query's
// terms (as query_facts matches keywords), and the segments mentioning
// their entities, ranked: by the entity's place (the best fact first),
// then by the BM25 of its name.
func graphLane(tx store.Tx, env *toolkit.Env, c toolkit.Caller, tenant string, words []string, now time.Time) ([]LinkedFact, []graphHit, error) {
	if len(words) == 0 {
		return nil, nil, nil
	}
	res, err := store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: tenant, Agent: c.Identity()},
		Terms: words, Limit: graphFacts, Rerank: 4 * graphFacts, Now: now, Policy: env.Decay()})
	if err != nil {
		return nil, nil, err
	}
	var facts []LinkedFact
	var entities []string
	for _, r := range res.Facts {
		if store.IsReserved(r.Entity) {
			continue
		}
		v, cut := cutText(r.Value, maxLinkedFactValue)
		facts = append(facts, LinkedFact{FactID: r.ID, Entity: r.Entity, Key: r.Key, Value: v, Truncated: cut})
		if !slices.Contains(entities, r.Entity) && len(entities) < graphEntities {
			entities = append(entities, r.Entity)
		}
	}
	var lane []graphHit
	at := make(map[uint32]int)
	for _, e := range entities {
		qt, _ := index.Query(e)
		if len(qt) == 0 || len(qt) > maxQueryTerms {
			continue
		}
		hits, err := store.SearchDocuments(tx, store.DocQuery{Tenant: tenant, Terms: termStrings(qt), All: true, Limit: laneDepth})
		if err != nil {
			return nil, nil, err
		}
		for _, h := range hits.Hits {
			if i, ok := at[h.Seq]; ok {
				lane[i].entities = append(lane[i].entities, e)
				continue
			}
			if len(lane) < laneDepth {
				at[h.Seq] = len(lane)
				lane = append(lane, graphHit{seq: h.Seq, entities: []string{e}})
			}
		}
	}
	return facts, lane, nil
}

// cutText cuts s to at most n bytes on a UTF-8 boundary, reporting
// whether it did.
func cutText(s string, n int) (string, bool) {
	cut := codec.CutUTF8(s, n)
	return cut, len(cut) < len(s)
}

// snippet is up to snippetBytes of text around the first word that
// starts with one of the query's terms (their stems, so "ranked" and
// "ranking" both show at "rank"), on word boundaries, "…" marking a cut.
// It is found by a search that ignores ASCII case, with no analysis of
// the text.
func snippet(text string, f *termFinder) string {
	if len(text) <= snippetBytes {
		return text
	}
	first := f.index(text)
	start := 0
	if first > snippetBytes/4 {
		start = first - snippetBytes/4
		if i := strings.IndexAny(text[start:first], " \n\t"); i >= 0 {
			start += i + 1
		}
	}
	end := min(len(text), start+snippetBytes)
	if end < len(text) {
		if i := strings.LastIndexAny(text[start:end], " \n\t"); i > snippetBytes/2 {
			end = start + i
		}
	}
	s, _ := cutText(text[start:end], snippetBytes)
	for len(s) > 0 && !utf8.RuneStart(s[0]) { // start began inside a character
		s = s[1:]
	}
	pre, post := "", ""
	if start > 0 {
		pre = "…"
	}
	if end < len(text) {
		post = "…"
	}
	return pre + strings.TrimSpace(s) + post
}

// termFinder finds the first word of a text that starts with one of a
// query's terms, ASCII letters compared without case. The terms are
// lowercase; one with other than ASCII letters and digits is looked for
// as written.
type termFinder struct {
	terms []string
	first [256]bool // the first bytes of the terms, in both cases
}

func newTermFinder(qt []index.QueryTerm) *termFinder {
	f := &termFinder{terms: make([]string, 0, len(qt))}
	for _, t := range qt {
		if t.Term == "" {
			continue
		}
		f.terms = append(f.terms, t.Term)
		c := t.Term[0]
		f.first[c] = true
		if 'a' <= c && c <= 'z' {
			f.first[c-'a'+'A'] = true
		}
	}
	return f
}

// index returns the offset of the first word of text that starts with
// one of the terms, or -1. A word starts where a byte follows none of a
// word (isWordByte), so the text is read once, up to the match.
func (f *termFinder) index(text string) int {
	inWord := false // whether the byte before i is of a word
	for i := 0; i < len(text); i++ {
		c := text[i]
		if f.first[c] && !inWord {
			for _, t := range f.terms {
				if len(text)-i >= len(t) && hasPrefixFold(text[i:], t) {
					return i
				}
			}
		}
		inWord = wordBytes[c]
	}
	return -1
}

// wordBytes holds isWordByte of every byte.
var wordBytes = func() (t [256]bool) {
	for i := range t {
		t[i] = isWordByte(byte(i))
	}
	return t
}()

func isWordByte(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || b >= 0x80
}

// hasPrefixFold reports whether s starts with the lowercase prefix,
// ASCII letters compared without case.
func hasPrefixFold(s, prefix string) bool {
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}

// ---- query_scan ----

type queryScanArgs struct {
	TenantID    string `json:"tenant_id" schema:"minLength=1"`
	Query       string `json:"query" schema:"minLength=1"`
	Limit       *int   `json:"limit,omitempty" schema:"default=20;maximum=200;minimum=1"`
	TokenBudget int    `json:"token_budget,omitempty" schema:"minimum=1"`
	Contract    string `json:"contract,omitempty"`
}

// ScanRow is one result of query_scan: metadata only.
type ScanRow struct {
	ResultID     string  `json:"result_id"`
	Rank         int     `json:"rank"`
	DocID        string  `json:"doc_id"`
	SegmentIndex int     `json:"segment_index"`
	Score        float64 `json:"score"`
	TokenCount   int     `json:"token_count"`
}

// ScanMeta describes how a query_scan ran.
type ScanMeta struct {
	TookMS           int64 `json:"took_ms"` // whole milliseconds
	SegmentsSearched int   `json:"segments_searched"`
}

// QueryScanOutput is what query_scan returns.
type QueryScanOutput struct {
	ContractFields
	Results         []ScanRow `json:"results"`
	Count           int       `json:"count"`
	TotalCandidates int       `json:"total_candidates"`
	TokensReturned  int       `json:"tokens_returned"` // the rows' own tokens (JSON bytes / 4)
	BudgetTruncated bool      `json:"budget_truncated"`
	Meta            ScanMeta  `json:"meta"`
}

func (d *Deps) queryScan() *toolkit.Tool {
	const name = "query_scan"
	return &toolkit.Tool{
		Name:        name,
		Description: "Rank a tenant's document segments for a query, metadata only: pick what to pass to query_expand.",
		Annotations: toolkit.Annotations{Title: "Scan documents", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[QueryScanOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *queryScanArgs) (*toolkit.Result, error) {
			start := time.Now()
			qt, limit, err := searchArgs(name, c, in.TenantID, "query", in.Query, in.Limit, scanLimit)
			if err != nil {
				return nil, err
			}
			b := budgetOf(in.TokenBudget, scanBudget)
			out := QueryScanOutput{ContractFields: newCRC(in.Contract, crcKindSearch), Results: []ScanRow{}}
			err = env.Store.View(ctx, func(tx store.Tx) error {
				res, err := store.SearchDocuments(tx, store.DocQuery{Tenant: in.TenantID, Terms: termStrings(qt),
					Weights: index.QueryWeights(in.Query, qt), Limit: limit})
				if err != nil {
					return err
				}
				out.TotalCandidates, out.Meta.SegmentsSearched = res.Candidates, res.Stats.Segments
				for _, h := range res.Hits {
					seg, err := d.segments.segment(tx, in.TenantID, h.Seq)
					if skippable(err) {
						continue
					}
					if err != nil {
						return err
					}
					row := ScanRow{ResultID: resultID(seg), Rank: len(out.Results) + 1, DocID: seg.DocID,
						SegmentIndex: seg.Index, Score: round4(h.Score), TokenCount: seg.Tokens}
					if !b.take(rowTokens(row)) {
						break
					}
					out.Results = append(out.Results, row)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			out.Count = len(out.Results)
			out.TokensReturned, out.BudgetTruncated = b.Used, b.Exceeded
			out.Meta.TookMS = time.Since(start).Milliseconds()
			return toolkit.JSONResult(out)
		}),
	}
}

// ---- query_expand ----

type queryExpandArgs struct {
	TenantID    string   `json:"tenant_id" schema:"minLength=1"`
	ResultIDs   []string `json:"result_ids" schema:"items.minLength=3;maxItems=50;minItems=1"`
	TokenBudget int      `json:"token_budget,omitempty" schema:"minimum=1"`
	Contract    string   `json:"contract,omitempty"`
}

// ExpandRow is one result of query_expand, with its content.
type ExpandRow struct {
	ResultID     string `json:"result_id"`
	DocID        string `json:"doc_id"`
	SegmentIndex int    `json:"segment_index"`
	Title        string `json:"title,omitempty"`
	Content      string `json:"content"`
	TokenCount   int    `json:"token_count"`
}

// QueryExpandOutput is what query_expand returns.
type QueryExpandOutput struct {
	ContractFields
	Results         []ExpandRow `json:"results"`
	Count           int         `json:"count"`
	TokensReturned  int         `json:"tokens_returned"` // token_count of the results, summed
	BudgetTruncated bool        `json:"budget_truncated"`
	// Omitted lists the result ids the budget left out, in order.
	Omitted []string `json:"omitted,omitempty"`
}

func queryExpand() *toolkit.Tool {
	const name = "query_expand"
	return &toolkit.Tool{
		Name:        name,
		Description: "Full text of result ids from query or query_scan, in order; past token_budget, omitted lists the rest.",
		Annotations: toolkit.Annotations{Title: "Expand results", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[QueryExpandOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *queryExpandArgs) (*toolkit.Result, error) {
			if err := tenantFor(name, c, in.TenantID); err != nil {
				return nil, err
			}
			type ref struct {
				i   int
				doc string
			}
			refs := make([]ref, len(in.ResultIDs))
			for i, id := range in.ResultIDs {
				n, doc, ok := parseResultID(id)
				if !ok {
					return nil, toolkit.InvalidParams(name, fmt.Sprintf("result_ids[%d]", i), fmt.Sprintf(`%q is not a result id "<segment_index>:<doc_id>"`, id))
				}
				refs[i] = ref{n, doc}
			}
			b := budgetOf(in.TokenBudget, expandBudget)
			out := QueryExpandOutput{ContractFields: newCRC(in.Contract, crcKindAddr), Results: []ExpandRow{}}
			err := env.Store.View(ctx, func(tx store.Tx) error {
				for i, r := range refs {
					seg, err := store.DocumentSegment(tx, in.TenantID, r.doc, r.i)
					if errors.Is(err, store.ErrNotFound) {
						return toolkit.InvalidParams(name, fmt.Sprintf("result_ids[%d]", i), fmt.Sprintf("%q is not a segment of a document in tenant %q", in.ResultIDs[i], in.TenantID))
					}
					if err != nil {
						return err
					}
					if !b.take(seg.Tokens) {
						out.Omitted = append(out.Omitted, in.ResultIDs[i])
						continue
					}
					out.Results = append(out.Results, ExpandRow{ResultID: in.ResultIDs[i], DocID: seg.DocID,
						SegmentIndex: seg.Index, Title: seg.Title, Content: seg.Text, TokenCount: seg.Tokens})
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			out.Count = len(out.Results)
			out.TokensReturned, out.BudgetTruncated = b.Used, b.Exceeded
			return toolkit.JSONResult(out)
		}),
	}
}
