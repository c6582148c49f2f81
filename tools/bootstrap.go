package tools

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/crux-go/crux/internal/outschema"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// bootstrapTenant is the tenant holding the bootstrap knowledge. No caller
// has it: Caller.TenantID never returns "".
const bootstrapTenant = ""

//go:embed bootstrap/knowledge.json
var knowledgeJSON []byte

type bootstrapEntry struct{ entity, key, value string }

// bootstrapEntries is the knowledge get_bootstrap serves: the embedded
// docs, patterns and resolutions, and the output contract of each tool in
// one line, derived from its output types (see outschema.Line).
func bootstrapEntries(ts []*toolkit.Tool) ([]bootstrapEntry, error) {
	var k struct {
		Docs        []struct{ Slug, Title, Content string } `json:"docs"`
		Patterns    []struct{ Slug, Title, Content string } `json:"patterns"`
		Resolutions []struct{ Code, Title, Content string } `json:"resolutions"`
	}
	if err := json.Unmarshal(knowledgeJSON, &k); err != nil {
		return nil, fmt.Errorf("tools: bootstrap knowledge: %w", err)
	}
	var out []bootstrapEntry
	for _, d := range k.Docs {
		out = append(out, bootstrapEntry{store.BootstrapPrefix + "doc:" + d.Slug, d.Title, d.Content})
	}
	for _, p := range k.Patterns {
		out = append(out, bootstrapEntry{store.BootstrapPrefix + "pattern:" + p.Slug, p.Title, p.Content})
	}
	for _, r := range k.Resolutions {
		out = append(out, bootstrapEntry{store.BootstrapPrefix + "resolution:" + r.Code, r.Title, r.Content})
	}
	for _, t := range ts {
		line, err := outschema.Line(t.OutputTypes()...)
		if err != nil {
			return nil, fmt.Errorf("%s: output types: %w", t.Name, err)
		}
		out = append(out, bootstrapEntry{store.BootstrapPrefix + "tool-output:" + t.Name, t.Name + " output schema", line})
	}
	return out, nil
}

var bootstrapSentinel = struct{ entity, key string }{store.BootstrapPrefix + "_meta", "seeded"}

// SeedBootstrap writes the bootstrap knowledge for ts into st, once: a
// sentinel fact holds the hash of what was written, so a later call with
// the same knowledge only reads it. When the knowledge changed (a new
// crux version), changed entries get a new version, entries that are gone
// are deleted, and the rest is left alone, all in one transaction.
func SeedBootstrap(ctx context.Context, st store.Backend, now time.Time, ts []*toolkit.Tool) error {
	entries, err := bootstrapEntries(ts)
	if err != nil {
		return err
	}
	h := sha256.New()
	for _, e := range entries {
		fmt.Fprintf(h, "%q %q %q\n", e.entity, e.key, e.value)
	}
	sum := hex.EncodeToString(h.Sum(nil))

	current := func(tx store.Tx) (map[[2]string]*store.Fact, error) {
		res, err := store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: bootstrapTenant}, EntityPrefix: store.BootstrapPrefix, Now: now})
		if err != nil {
			return nil, err
		}
		m := make(map[[2]string]*store.Fact, len(res.Facts))
		for _, r := range res.Facts {
			m[[2]string{r.Entity, r.Key}] = r.Fact
		}
		return m, nil
	}
	seeded := false
	err = st.View(ctx, func(tx store.Tx) error {
		m, err := current(tx)
		if f := m[[2]string{bootstrapSentinel.entity, bootstrapSentinel.key}]; err == nil && f != nil {
			seeded = f.Value == sum
		}
		return err
	})
	if err != nil || seeded {
		return err
	}
	entries = append(entries, bootstrapEntry{bootstrapSentinel.entity, bootstrapSentinel.key, sum})
	return st.Update(ctx, func(tx store.Tx) error {
		have, err := current(tx)
		if err != nil {
			return err
		}
		for _, e := range entries {
			k := [2]string{e.entity, e.key}
			f, ok := have[k]
			delete(have, k)
			if ok && f.Value == e.value {
				continue
			}
			_, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: bootstrapTenant},
				Entity: e.entity, Key: e.key, Value: e.value, Confidence: 1, Now: now,
			})
			if err != nil {
				return err
			}
		}
		for _, f := range have {
			if _, _, err := store.DeleteFact(tx, store.Scope{Tenant: bootstrapTenant, Agent: ""}, f.ID, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// ---- get_bootstrap ----

type getBootstrapArgs struct {
	Topic       string `json:"topic,omitempty" doc:"doc, pattern, resolution or tool-output; omit for all."`
	Query       string `json:"query,omitempty"`
	TokenBudget int    `json:"token_budget,omitempty" schema:"minimum=1" doc:"Default 900 (an answer under 8 KB)."`
}

// BootstrapFact is one entry of crux's own knowledge.
type BootstrapFact struct {
	Entity string `json:"entity"`
	Key    string `json:"key"`
	Value  string `json:"value"`
}

// DefaultBootstrapBudget is get_bootstrap's token_budget when none is
// given: about 3.6 KB of entries, sent as text and as structured content,
// so that the answer stays under 8 KB. A larger token_budget gets more.
const DefaultBootstrapBudget = 900

// maxBootstrapEntries caps one get_bootstrap answer.
const maxBootstrapEntries = 100

// normalizeTopic maps the accepted topic spellings (those of the CueCrux
// tool contract) to the four categories; anything else passes through
// trimmed.
func normalizeTopic(t string) string {
	t = strings.TrimSpace(t)
	switch strings.ToLower(t) {
	case "doc", "docs":
		return "doc"
	case "pattern", "patterns":
		return "pattern"
	case "error", "errors", "resolution", "resolutions":
		return "resolution"
	case "tool", "tool-output", "tool-outputs":
		return "tool-output"
	}
	return t
}

// GetBootstrapOutput is what get_bootstrap returns.
type GetBootstrapOutput struct {
	Facts       []BootstrapFact `json:"facts"`
	TotalTokens int             `json:"total_tokens"`
	Truncated   bool            `json:"truncated"`
}

func getBootstrap() *toolkit.Tool {
	const name = "get_bootstrap"
	return &toolkit.Tool{
		Name:        name,
		Description: "crux's docs, patterns, error resolutions, and each tool's output fields (topic tool-output).",
		Annotations: toolkit.Annotations{Title: "Bootstrap knowledge", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[GetBootstrapOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, _ toolkit.Caller, in *getBootstrapArgs) (*toolkit.Result, error) {
			q := store.FactQuery{Scope: store.Scope{Tenant: bootstrapTenant}, EntityPrefix: store.BootstrapPrefix, Now: env.Time(), Policy: env.Decay()}
			if topic := normalizeTopic(in.Topic); topic != "" {
				q.EntityPrefix += topic + ":"
			}
			var err error
			if q.Terms, err = rankingTerms(name, in.Query); err != nil {
				return nil, err
			}
			res, err := search(ctx, env.Store, q)
			if err != nil {
				return nil, err
			}
			// Entries named by the query (a tool's output contract asked
			// for by the tool's name) come first, then by name.
			named := func(entity string) bool {
				q := strings.TrimSpace(in.Query)
				return q != "" && strings.HasSuffix(entity, ":"+q)
			}
			sort.Slice(res.Facts, func(i, j int) bool {
				a, b := res.Facts[i], res.Facts[j]
				if na, nb := named(a.Entity), named(b.Entity); na != nb {
					return na
				}
				return a.Entity < b.Entity || a.Entity == b.Entity && a.Key < b.Key
			})
			facts := []BootstrapFact{}
			var lines []string
			b := budget{Limit: in.TokenBudget}
			if b.Limit == 0 {
				b.Limit = DefaultBootstrapBudget
			}
			for _, r := range res.Facts {
				if r.Entity == bootstrapSentinel.entity {
					continue
				}
				line := "[" + r.Entity + "] " + r.Key + " = " + r.Value
				if len(facts) == maxBootstrapEntries {
					b.Exceeded = true
					break
				}
				if !b.take(store.EstimateTokens(line)) {
					break
				}
				facts = append(facts, BootstrapFact{r.Entity, r.Key, r.Value})
				lines = append(lines, line)
			}
			text := strings.Join(lines, "\n")
			if len(facts) == 0 {
				text = "no bootstrap knowledge found"
				if in.Topic != "" {
					text = fmt.Sprintf("no bootstrap knowledge for topic '%s'", in.Topic)
				}
			}
			return &toolkit.Result{
				Content:           []toolkit.Content{{Type: "text", Text: text}},
				StructuredContent: GetBootstrapOutput{Facts: facts, TotalTokens: b.Used, Truncated: b.Exceeded},
			}, nil
		}),
	}
}
