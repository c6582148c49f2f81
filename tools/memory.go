package tools

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/internal/outschema"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// The memory panel: memory_view, memory_edit, memory_pin and memory_history,
// a consumer's window on the facts it may see.
//
// Decisions where the CueCrux tool contract is silent:
//   - CORECRUXD_FEATURE_MEMORY_PANEL off (=0, false, off or no) fails every
//     panel tool with -32601 "<tool> is disabled (...)" and data
//     {feature_flag, enabled: false}, as memory_forget does when its flag is
//     off, before the arguments are checked.
//   - The panel never shows or touches a reserved entity (one starting with
//     "__"): naming one is a -32602 with error_code RESERVED_ENTITY_PREFIX.
//   - memory_edit, memory_pin (and the freshness writes) need an
//     authenticated caller; an anonymous one (a caller without a passport)
//     gets an isError result saying so.
//   - A fact that does not exist, belongs to another tenant or is another
//     agent's private fact is "not found" (an isError result): the panel
//     does not reveal that it exists.
//   - memory_edit edits the current version only: editing a superseded or
//     deleted fact is a -32004 conflict naming the current version. The
//     editor's own pin moves to the new version; other agents' pins stay
//     where they are (on the old version).
//   - memory_history takes fact_id or {entity, key}, not both, and pages
//     like fact_history: newest first, with limit and cursor.

// Limits of memory_view.
const (
	// memoryViewTopK is memory_view's default number of facts.
	memoryViewTopK = 20
	// memoryViewTokenBudget is memory_view's default token budget.
	memoryViewTokenBudget = 2000
)

func panelOn(f *feature.Flags) bool { return f.MemoryPanel }

// memFlagGate is the -32601 or -32030 a tool answers while its flag is off.
func memFlagGate(code int, tool, flag string, on func(*feature.Flags) bool) func(env *toolkit.Env) (*toolkit.Result, error) {
	return toolkit.FlagGate(on, func() *toolkit.Error {
		data := map[string]any{"feature_flag": flag, "enabled": false}
		if code == toolkit.CodeCapabilityDenied {
			data["reason_code"] = "feature_disabled"
		}
		return &toolkit.Error{Code: code, Message: tool + " is disabled (" + flag + "=0)", Data: data}
	})
}

// PanelFact is a fact as the memory panel shows it. Pinned says whether the
// caller pinned it; other agents' pins never show.
type PanelFact struct {
	ID            string  `json:"id"`
	Entity        string  `json:"entity"`
	Key           string  `json:"key"`
	Value         string  `json:"value"`
	Version       uint32  `json:"version"`
	StoredAt      string  `json:"stored_at"`
	Confidence    float64 `json:"confidence"`
	Pinned        bool    `json:"pinned"`
	SourceReceipt string  `json:"source_receipt"`
	Private       bool    `json:"private,omitempty"`
}

func newPanelFact(f *store.Fact, pinned bool) PanelFact {
	return PanelFact{
		ID: f.ID, Entity: f.Entity, Key: f.Key, Value: f.Value, Version: f.Version,
		StoredAt: f.StoredAt.Format(time.RFC3339Nano), Confidence: f.Confidence, Pinned: pinned,
		SourceReceipt: f.SourceReceipt, Private: f.Private,
	}
}

// Errors the panel's transactions return to their handler, which turns
// them into results.
var errMemDeleted = errors.New("fact deleted")

// memNotCurrentError says a fact was superseded: Current is the version that
// stands now (it may be deleted).
type memNotCurrentError struct {
	Current *store.Fact
}

func (e *memNotCurrentError) Error() string { return "fact superseded by " + e.Current.ID }

// memCurrentFact is store.VisibleFact for a fact that must be current: a deleted
// one is errMemDeleted, a superseded one a *memNotCurrentError.
func memCurrentFact(tx store.Tx, c toolkit.Caller, id string) (*store.Fact, error) {
	f, err := store.VisibleFact(tx, c.Scope(), id)
	switch {
	case err != nil:
		return nil, err
	case f.Deleted:
		return nil, errMemDeleted
	case f.SupersededBy != "":
		return nil, notCurrent(tx, f)
	}
	return f, nil
}

// notCurrent is the *memNotCurrentError of the superseded fact f, naming
// the version that stands now.
func notCurrent(tx store.Tx, f *store.Fact) error {
	cur, err := store.Successor(tx, f)
	if err != nil {
		return err
	}
	return &memNotCurrentError{Current: cur}
}

// memFactFailure turns the errors of store.VisibleFact and memCurrentFact into what
// tool answers; other errors pass through.
func memFactFailure(tool, id string, err error) (*toolkit.Result, error) {
	var nc *memNotCurrentError
	switch {
	case errors.Is(err, store.ErrNotFound):
		return toolkit.ErrorResult("fact not found: %s", id), nil
	case errors.Is(err, store.ErrReserved):
		return nil, reservedEntity(tool, "fact_id", "belongs to a reserved entity (starting with "+store.ReservedPrefix+"), which the memory tools do not touch")
	case errors.Is(err, errMemDeleted):
		return toolkit.ErrorResult("%s: fact %s is deleted", tool, id), nil
	case errors.As(err, &nc):
		msg := fmt.Sprintf("%s: fact %s is not the current version; the current version is %s", tool, id, nc.Current.ID)
		if nc.Current.Deleted {
			msg = fmt.Sprintf("%s: fact %s is not the current version; its latest version %s is deleted", tool, id, nc.Current.ID)
		}
		return nil, &toolkit.Error{Code: toolkit.CodeConflict, Message: msg, Data: map[string]any{
			"fact_id": id, "current_fact_id": nc.Current.ID, "current_deleted": nc.Current.Deleted,
		}}
	}
	return nil, err
}

// ---- memory_view ----

type memoryViewArgs struct {
	Entity      string `json:"entity,omitempty" schema:"minLength=1"`
	Key         string `json:"key,omitempty" schema:"minLength=1"`
	TopK        *int   `json:"top_k,omitempty" schema:"default=20;maximum=500;minimum=1"`
	TokenBudget *int   `json:"token_budget,omitempty" schema:"default=2000;minimum=1"`
}

// MemoryViewOutput is what memory_view returns.
type MemoryViewOutput struct {
	Facts                  []PanelFact `json:"facts"`
	TotalTokens            int         `json:"total_tokens"`
	Returned               int         `json:"returned"`
	TruncatedByTokenBudget bool        `json:"truncated_by_token_budget"`
}

func memoryView() *toolkit.Tool {
	const name = "memory_view"
	return &toolkit.Tool{
		Name:        name,
		Description: "Your current facts as a panel, ranked as query_facts ranks them, marked pinned.",
		Annotations: toolkit.Annotations{Title: "View memories", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[MemoryViewOutput](),
		Gate:        memFlagGate(toolkit.CodeMethodNotFound, name, feature.EnvMemoryPanel, panelOn),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *memoryViewArgs) (*toolkit.Result, error) {
			if err := checkNames(name, "entity", in.Entity, "key", in.Key); err != nil {
				return nil, err
			}
			if store.IsReserved(in.Entity) {
				return nil, reservedEntity(name, "entity", "entities starting with "+store.ReservedPrefix+" are reserved and not shown in the memory panel")
			}
			topK, limit := memoryViewTopK, memoryViewTokenBudget
			if in.TopK != nil {
				topK = *in.TopK
			}
			if in.TokenBudget != nil {
				limit = *in.TokenBudget
			}
			out := MemoryViewOutput{Facts: []PanelFact{}}
			err := env.Store.View(ctx, func(tx store.Tx) error {
				out = MemoryViewOutput{Facts: []PanelFact{}}
				res, err := store.SearchFacts(tx, store.FactQuery{
					Scope: c.Scope(), Entity: in.Entity, Key: in.Key,
					Limit: topK, Now: env.Time(), Policy: env.Decay(),
				})
				if err != nil {
					return err
				}
				b := budget{Limit: limit}
				for _, r := range res.Facts {
					if store.IsReserved(r.Entity) {
						continue // SearchFacts leaves them out already; never show one regardless
					}
					pinned, err := store.IsPinned(tx, c.Scope(), r.ID)
					if err != nil {
						return err
					}
					row := newPanelFact(r.Fact, pinned)
					if !b.take(rowTokens(row)) {
						break
					}
					out.Facts = append(out.Facts, row)
				}
				out.TotalTokens, out.TruncatedByTokenBudget = b.Used, b.Exceeded
				return nil
			})
			if err != nil {
				return nil, err
			}
			out.Returned = len(out.Facts)
			return &toolkit.Result{Content: []toolkit.Content{{Type: "text", Text: viewNarrative(out)}}, StructuredContent: outschema.Fill(out)}, nil
		}),
	}
}

// viewNarrative is memory_view's text: one line per fact.
func viewNarrative(out MemoryViewOutput) string {
	var b strings.Builder
	switch len(out.Facts) {
	case 0:
		b.WriteString("No memories to show.")
	case 1:
		b.WriteString("1 memory:")
	default:
		fmt.Fprintf(&b, "%d memories:", len(out.Facts))
	}
	for _, f := range out.Facts {
		fmt.Fprintf(&b, "\n- %s / %s: %s (version %d, confidence %s, stored %s", f.Entity, f.Key, f.Value,
			f.Version, strconv.FormatFloat(f.Confidence, 'g', -1, 64), f.StoredAt)
		if f.Pinned {
			b.WriteString(", pinned")
		}
		if f.Private {
			b.WriteString(", private")
		}
		fmt.Fprintf(&b, ") [%s]", f.ID)
	}
	if out.TruncatedByTokenBudget {
		fmt.Fprintf(&b, "\nMore facts matched; the token budget stopped the list at %d tokens.", out.TotalTokens)
	}
	return b.String()
}

// ---- memory_edit ----

type memoryEditArgs struct {
	FactID   string `json:"fact_id" pattern:"^f_[0-9a-f]{32}$"`
	NewValue string `json:"new_value"`
	Reason   string `json:"reason,omitempty" schema:"maxLength=1024"`
}

// MemoryEditOutput is what memory_edit returns: the edited version and the
// new one.
type MemoryEditOutput struct {
	OldFactID string    `json:"old_fact_id"`
	NewFact   PanelFact `json:"new_fact"`
	Reason    string    `json:"reason"`
}

// editSourceReceipt is the source_receipt memory_edit gives the new version:
// "memory_edit:<reason>", or "memory_edit" without a reason.
func editSourceReceipt(reason string) string {
	if reason == "" {
		return "memory_edit"
	}
	return "memory_edit:" + reason
}

func memoryEdit() *toolkit.Tool {
	const name = "memory_edit"
	return &toolkit.Tool{
		Name:        name,
		Description: "Correct a fact: new_value becomes its new version, reason recorded, your pin moved.",
		Annotations: toolkit.Annotations{Title: "Edit memory"},
		Out:         toolkit.OutputOf[MemoryEditOutput](),
		Gate:        memFlagGate(toolkit.CodeMethodNotFound, name, feature.EnvMemoryPanel, panelOn),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *memoryEditArgs) (*toolkit.Result, error) {
			if err := needIdentity(name, c); err != nil {
				return nil, err
			}
			var out MemoryEditOutput
			err := env.Store.Update(ctx, func(tx store.Tx) error {
				old, err := memCurrentFact(tx, c, in.FactID)
				if err != nil {
					return err
				}
				nf, _, err := store.PutFact(tx, store.NewFact{Scope: c.Scope(),
					Entity: old.Entity, Key: old.Key, Value: in.NewValue,
					SourceReceipt: editSourceReceipt(in.Reason), Confidence: old.Confidence, Private: old.Private,
					HorizonClass: old.HorizonClass, Now: env.Time(),
				})
				if err != nil {
					return err
				}
				pinned, err := store.IsPinned(tx, c.Scope(), old.ID)
				if err != nil {
					return err
				}
				if pinned { // the pin moves to the new version
					if err := store.SetPin(tx, c.Scope(), old.ID, false); err != nil {
						return err
					}
					if err := store.SetPin(tx, c.Scope(), nf.ID, true); err != nil {
						return err
					}
				}
				out = MemoryEditOutput{OldFactID: old.ID, NewFact: newPanelFact(nf, pinned), Reason: in.Reason}
				return nil
			})
			if err != nil {
				return memFactFailure(name, in.FactID, err)
			}
			return toolkit.JSONResult(out)
		}),
	}
}

// ---- memory_pin ----

// MemoryPinOutput is what memory_pin returns: whether the fact is now
// pinned for the caller.
type MemoryPinOutput struct {
	FactID string `json:"fact_id"`
	Pinned bool   `json:"pinned"`
}

type memoryPinArgs struct {
	FactID string `json:"fact_id" pattern:"^f_[0-9a-f]{32}$"`
	Pinned *bool  `json:"pinned,omitempty" schema:"default=true"`
}

func memoryPin() *toolkit.Tool {
	const name = "memory_pin"
	return &toolkit.Tool{
		Name:        name,
		Description: "Pin (default) or unpin a current fact for you: pinned facts are never sweep candidates and survive memory_forget.",
		Annotations: toolkit.Annotations{Title: "Pin memory", IdempotentHint: true},
		Out:         toolkit.OutputOf[MemoryPinOutput](),
		Gate:        memFlagGate(toolkit.CodeMethodNotFound, name, feature.EnvMemoryPanel, panelOn),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *memoryPinArgs) (*toolkit.Result, error) {
			if err := needIdentity(name, c); err != nil {
				return nil, err
			}
			pinned := in.Pinned == nil || *in.Pinned
			err := env.Store.Update(ctx, func(tx store.Tx) error {
				// A pin protects the current version: pinning a deleted
				// or superseded one is refused, as memory_edit refuses
				// it; unpinning any version is allowed.
				get := memCurrentFact
				if !pinned {
					get = func(tx store.Tx, c toolkit.Caller, id string) (*store.Fact, error) {
						return store.VisibleFact(tx, c.Scope(), id)
					}
				}
				f, err := get(tx, c, in.FactID)
				if err != nil {
					return err
				}
				return store.SetPin(tx, c.Scope(), f.ID, pinned)
			})
			if err != nil {
				return memFactFailure(name, in.FactID, err)
			}
			return toolkit.JSONResult(MemoryPinOutput{FactID: in.FactID, Pinned: pinned})
		}),
	}
}

// ---- memory_history ----

type memoryHistoryArgs struct {
	Entity string `json:"entity,omitempty" schema:"minLength=1"`
	Key    string `json:"key,omitempty" schema:"minLength=1"`
	FactID string `json:"fact_id,omitempty" pattern:"^f_[0-9a-f]{32}$"`
	historyPageArgs
}

// MemoryVersion is one version in memory_history.
type MemoryVersion struct {
	ID            string  `json:"id"`
	Value         string  `json:"value"`
	Version       uint32  `json:"version"`
	StoredAt      string  `json:"stored_at"`
	Supersedes    *string `json:"supersedes"` // null for a chain's first version
	SupersededBy  string  `json:"superseded_by,omitempty"`
	Deleted       bool    `json:"deleted"`
	SourceReceipt string  `json:"source_receipt"`
	Private       bool    `json:"private,omitempty"`
}

// MemoryHistoryOutput is what memory_history returns: a page of a version
// chain.
type MemoryHistoryOutput = HistoryPage[MemoryVersion]

func memoryHistory() *toolkit.Tool {
	const name = "memory_history"
	return &toolkit.Tool{
		Name:        name,
		Description: "Every version of a fact (fact_id, or entity and key), newest first, paged.",
		Annotations: toolkit.Annotations{Title: "Memory history", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[MemoryHistoryOutput](),
		Gate:        memFlagGate(toolkit.CodeMethodNotFound, name, feature.EnvMemoryPanel, panelOn),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *memoryHistoryArgs) (*toolkit.Result, error) {
			byPair := in.Entity != "" || in.Key != ""
			switch {
			case in.FactID != "" && byPair:
				return nil, toolkit.InvalidParams(name, "fact_id", "give either fact_id or entity and key, not both")
			case in.FactID == "" && !byPair:
				return nil, toolkit.InvalidParams(name, "fact_id", "give either fact_id or entity and key")
			case byPair && in.Entity == "":
				return nil, toolkit.InvalidParams(name, "entity", "is required with key")
			case byPair && in.Key == "":
				return nil, toolkit.InvalidParams(name, "key", "is required with entity")
			}
			if err := checkNames(name, "entity", in.Entity, "key", in.Key); err != nil {
				return nil, err
			}
			if store.IsReserved(in.Entity) {
				return nil, reservedEntity(name, "entity", "entities starting with "+store.ReservedPrefix+" are reserved; use fact_history")
			}
			var out *HistoryPage[MemoryVersion]
			err := env.Store.View(ctx, func(tx store.Tx) error {
				q := store.HistoryQuery{Scope: c.Scope(), Entity: in.Entity, Key: in.Key}
				if in.FactID != "" {
					f, err := store.VisibleFact(tx, c.Scope(), in.FactID)
					if err != nil {
						return err
					}
					q.Entity, q.Key, q.Chains = f.Entity, f.Key, store.SharedChain
					if f.Private { // fact_id: its own chain only
						q.Chains = store.PrivateChain
					}
				}
				var err error
				out, err = readHistoryPage(tx, name, c, q, in.historyPageArgs, func(f *store.Fact) MemoryVersion {
					v := MemoryVersion{
						ID: f.ID, Value: f.Value, Version: f.Version, StoredAt: f.StoredAt.Format(time.RFC3339Nano),
						SupersededBy: f.SupersededBy, Deleted: f.Deleted, SourceReceipt: f.SourceReceipt, Private: f.Private,
					}
					if f.Supersedes != "" {
						v.Supersedes = &f.Supersedes
					}
					return v
				})
				return err
			})
			if err != nil {
				return memFactFailure(name, in.FactID, err)
			}
			return toolkit.JSONResult(out)
		}),
	}
}
