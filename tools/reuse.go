package tools

import (
	"context"
	"slices"
	"strings"

	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/index"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// reuse_check: "does this already exist?" for a one-line description of
// what a caller is about to build. Two sources answer, each bounded by
// limit:
//
//   - retrieval: the tenant's document segments ranked by BM25 for the
//     description, as query_scan ranks them;
//   - capabilities, the features lens: the tools this server serves, and
//     the features recorded as facts under entities "feature:<id>" (keys
//     name, system, maturity, files — comma- or newline-separated —,
//     description; any other key's value counts as text), ranked by how
//     many of the description's terms they share (overlap_terms). A
//     capability needs two shared terms, or one when the description has
//     at most two.
//
// The verdict is reuse-candidate-found when either source has a
// candidate, else nothing-found.

// Limits of reuse_check.
const (
	reuseLimit    = 5   // default candidates per source
	reuseMaxLimit = 20  // largest limit
	reuseFeatures = 200 // most feature facts read
	featurePrefix = "feature:"
)

type reuseCheckArgs struct {
	TenantID    string   `json:"tenant_id" schema:"minLength=1"`
	Description string   `json:"description" schema:"minLength=1"`
	Limit       *int     `json:"limit,omitempty" schema:"default=5;maximum=20;minimum=1"`
	MinScore    *float64 `json:"min_score,omitempty" schema:"minimum=0"`
}

// ReuseRetrieval is a document segment reuse_check found.
type ReuseRetrieval struct {
	ResultID        string  `json:"result_id"`
	Rank            int     `json:"rank"`
	DocID           string  `json:"doc_id"`
	Score           float64 `json:"score"`
	DocLengthTokens int     `json:"doc_length_tokens"`
}

// ReuseCapability is a tool or stored feature reuse_check found.
type ReuseCapability struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	System       string   `json:"system"`
	Maturity     string   `json:"maturity"`
	Files        []string `json:"files"`
	OverlapTerms []string `json:"overlap_terms"`
}

// ReuseCheckOutput is what reuse_check returns.
type ReuseCheckOutput struct {
	Schema               string            `json:"schema"`
	Verdict              string            `json:"verdict"`
	RetrievalCandidates  []ReuseRetrieval  `json:"retrieval_candidates"`
	CapabilityCandidates []ReuseCapability `json:"capability_candidates"`
	Guidance             string            `json:"guidance"`
}

func (d *Deps) reuseCheck() *toolkit.Tool {
	const name = "reuse_check"
	return &toolkit.Tool{
		Name:        name,
		Description: "Before building something, check it does not exist: ranks documents, tools and feature facts. Flag REUSE_CHECK.",
		Annotations: toolkit.Annotations{Title: "Reuse check", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[ReuseCheckOutput](),
		Gate:        memFlagGate(toolkit.CodeCapabilityDenied, name, feature.EnvReuseCheck, func(f *feature.Flags) bool { return f.ReuseCheck }),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *reuseCheckArgs) (*toolkit.Result, error) {
			qt, limit, err := searchArgs(name, c, in.TenantID, "description", in.Description, in.Limit, reuseLimit)
			if err != nil {
				return nil, err
			}
			q := store.DocQuery{Tenant: in.TenantID, Terms: termStrings(qt), Limit: limit}
			if in.MinScore != nil {
				q.MinScore = *in.MinScore
			}
			out := ReuseCheckOutput{Schema: "crux.reuse_check.v1", RetrievalCandidates: []ReuseRetrieval{},
				CapabilityCandidates: []ReuseCapability{}}
			var features []featureText
			err = env.Store.View(ctx, func(tx store.Tx) error {
				res, err := store.SearchDocuments(tx, q)
				if err != nil {
					return err
				}
				for _, h := range res.Hits {
					seg, err := d.segments.segment(tx, in.TenantID, h.Seq)
					if skippable(err) {
						continue
					}
					if err != nil {
						return err
					}
					d, err := store.GetDocument(tx, in.TenantID, seg.DocID)
					if skippable(err) {
						continue
					}
					if err != nil {
						return err
					}
					tokens := d.Tokens
					out.RetrievalCandidates = append(out.RetrievalCandidates, ReuseRetrieval{ResultID: resultID(seg),
						Rank: len(out.RetrievalCandidates) + 1, DocID: seg.DocID, Score: round4(h.Score), DocLengthTokens: tokens})
				}
				features, err = featureFacts(tx, env, c, in.TenantID)
				return err
			})
			if err != nil {
				return nil, err
			}
			out.CapabilityCandidates = capabilityCandidates(env, qt, features, limit)
			if len(out.RetrievalCandidates)+len(out.CapabilityCandidates) > 0 {
				out.Verdict = "reuse-candidate-found"
				out.Guidance = "Read the candidates before building: query_expand gives a document candidate's text, and a " +
					"capability candidate names the tool or feature to extend instead of starting anew."
			} else {
				out.Verdict = "nothing-found"
				out.Guidance = "Nothing in this tenant's documents or features resembles the description; if you build it, " +
					"record it with store_fact under feature:<id> so the next reuse_check finds it."
			}
			return toolkit.JSONResult(out)
		}),
	}
}

// featureText is one feature of the features lens, from its facts.
type featureText struct {
	id, name, system, maturity string
	files                      []string
	text                       []string // every value, for the overlap
}

// featureFacts reads the current feature facts c sees in tenant, grouped
// by entity, at most reuseFeatures facts.
func featureFacts(tx store.Tx, env *toolkit.Env, c toolkit.Caller, tenant string) ([]featureText, error) {
	res, err := store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: tenant, Agent: c.Identity()},
		EntityPrefix: featurePrefix, Limit: reuseFeatures, Now: env.Time(), Policy: env.Decay()})
	if err != nil {
		return nil, err
	}
	var out []featureText
	at := map[string]int{}
	for _, r := range res.Facts {
		i, ok := at[r.Entity]
		if !ok {
			i = len(out)
			at[r.Entity] = i
			out = append(out, featureText{id: r.Entity, name: strings.TrimPrefix(r.Entity, featurePrefix), files: []string{}})
		}
		f := &out[i]
		switch r.Key {
		case "name":
			f.name = r.Value
		case "system":
			f.system = r.Value
		case "maturity":
			f.maturity = r.Value
		case "files":
			for _, p := range strings.FieldsFunc(r.Value, func(r rune) bool { return r == ',' || r == '\n' }) {
				if p = strings.TrimSpace(p); p != "" && len(f.files) < 20 {
					f.files = append(f.files, p)
				}
			}
		}
		f.text = append(f.text, r.Key+" "+r.Value)
	}
	for i := range out {
		out[i].text = append(out[i].text, out[i].id, out[i].name)
	}
	return out, nil
}

// capabilityCandidates ranks the served tools and the features by the
// query terms they share, most first, then by id.
func capabilityCandidates(env *toolkit.Env, qt []index.QueryTerm, features []featureText, limit int) []ReuseCapability {
	need := 2
	if len(qt) <= 2 {
		need = 1
	}
	var a index.Analyzer
	overlap := func(texts ...string) []string {
		have := map[string]bool{}
		for _, t := range texts {
			a.Terms(strings.NewReplacer("_", " ", ":", " ").Replace(t), func(term string) { have[term] = true })
		}
		var words []string
		for _, t := range qt {
			if have[t.Term] {
				words = append(words, t.Words[0])
			}
		}
		return words
	}
	var cands []ReuseCapability
	for _, name := range env.Tools {
		if o := overlap(name, env.Description(name)); len(o) >= need {
			cands = append(cands, ReuseCapability{ID: "tool:" + name, Name: name, System: "crux", Maturity: "served",
				Files: []string{}, OverlapTerms: o})
		}
	}
	for _, f := range features {
		if o := overlap(f.text...); len(o) >= need {
			cands = append(cands, ReuseCapability{ID: f.id, Name: f.name, System: f.system, Maturity: f.maturity,
				Files: f.files, OverlapTerms: o})
		}
	}
	slices.SortStableFunc(cands, func(x, y ReuseCapability) int {
		if len(x.OverlapTerms) != len(y.OverlapTerms) {
			return len(y.OverlapTerms) - len(x.OverlapTerms)
		}
		return strings.Compare(x.ID, y.ID)
	})
	if len(cands) > limit {
		cands = cands[:limit]
	}
	if cands == nil {
		cands = []ReuseCapability{}
	}
	return cands
}
