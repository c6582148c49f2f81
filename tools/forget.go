package tools

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// Scoped forget: memory_forget and memory_forget_dry_run, and the operator
// side, RestoreForget and PurgeForgets.
//
// Decisions where the CueCrux tool contract is silent:
//
//   - A scope selects facts, not chains: current, superseded and deleted
//     versions alike. Forgetting only current facts would leave the values
//     readable in fact_history.
//   - Only facts the caller can see are touched, never reserved entities
//     (starting with "__", which covers every reserved prefix), never another
//     agent's private facts; facts pinned by any agent of the tenant survive
//     unless include_pinned (which lifts only the caller's own pins).
//   - An agent forgets the facts it wrote; another agent's facts in scope
//     are left, and counted, unless the caller is an operator (see
//     forgetQuery). Forget erases values for good once the window ends, so
//     it is not open to every agent as delete_fact (a new version) is.
//   - token_budget counts facts: the first N in scope, oldest first (by
//     stored_at, then fact id): it caps the number of facts the resolver
//     touches. The dry run applies the same cap, so it previews exactly what
//     a forget would do.
//   - A tenant other than the caller's, as the top-level tenant_id or as a
//     tenant_id scope, is refused with -32003 FORBIDDEN: the argument is
//     well-formed, the caller lacks standing in that tenant.
//   - A forget that matches nothing still mints its receipt: the request is
//     on record.
//   - The answers cap what they list, never what is forgotten: the receipt
//     names every fact, the answer the first maxListedForget (and the
//     receipt body only up to maxInlineReceiptBody bytes).
//   - anonymous callers forget what was written anonymously; the receipt
//     names them "anonymous".
//   - Restore and purge are operator functions of the Go API and the crux
//     command, not tools: their receipts name the actor "operator".

// Receipt kinds of the forget lifecycle.
const (
	kindForget         = "forget"          // memory_forget
	kindForgetRestore  = "forget_restore"  // RestoreForget
	kindPermanentPurge = "permanent_purge" // PurgeForgets
)

// operatorActor is the actor of the receipts minted by the operator
// functions (RestoreForget, PurgeForgets), which have no caller.
const operatorActor = "operator"

// forgetWindow is the server's recovery window:
// Flags.ForgetRecoveryWindowDays, at least one day (a zero Flags value
// means one day too).
func forgetWindow(env *toolkit.Env) time.Duration {
	return time.Duration(max(env.Flags.ForgetRecoveryWindowDays, 1)) * 24 * time.Hour
}

// forgetReceipt is the payload of a forget receipt (kind "forget"): the
// fields of the CueCrux forget_v1 receipt, plus what else shaped the
// selection.
type forgetReceipt struct {
	Schema               string            `cbor:"schema" json:"schema"` // ForgetReceiptSchema
	TenantID             string            `cbor:"tenant_id" json:"tenant_id"`
	PassportID           string            `cbor:"passport_id" json:"passport_id"` // the initiating passport
	Reason               string            `cbor:"reason" json:"reason"`
	Scope                store.ForgetScope `cbor:"scope" json:"scope"`
	IncludePinned        bool              `cbor:"include_pinned" json:"include_pinned"`
	TokenBudget          int               `cbor:"token_budget,omitempty" json:"token_budget,omitempty"`
	TokenBudgetCapped    bool              `cbor:"token_budget_capped" json:"token_budget_capped"`
	FactsAffected        []forgottenFactID `cbor:"facts_affected" json:"facts_affected"`
	InitiatedAt          string            `cbor:"initiated_at" json:"initiated_at"`                       // RFC 3339
	RecoveryWindowEndsAt string            `cbor:"recovery_window_ends_at" json:"recovery_window_ends_at"` // RFC 3339
}

// forgetReceiptSchema names the layout of [forgetReceipt].
const forgetReceiptSchema = "crux.receipt.forget.v1"

// forgottenFactID names one forgotten fact in a forget receipt, with the
// BLAKE3 hash (hex) of its value before the forget, never the value.
type forgottenFactID struct {
	FactID                string `cbor:"fact_id" json:"fact_id"`
	PreForgetValueHashHex string `cbor:"pre_forget_value_hash_hex" json:"pre_forget_value_hash_hex"`
	Entity                string `cbor:"entity" json:"entity"` // logical entity
	Key                   string `cbor:"key" json:"key"`
}

// forgetRestoreReceipt is the payload of a restore receipt (kind
// "forget_restore").
type forgetRestoreReceipt struct {
	SourceForgetReceiptID string               `cbor:"source_forget_receipt_id" json:"source_forget_receipt_id"`
	RestoredFactIDs       []string             `cbor:"restored_fact_ids" json:"restored_fact_ids"`
	Adjusted              []store.RestoredFact `cbor:"adjusted,omitempty" json:"adjusted,omitempty"` // facts whose chain moved on meanwhile
	RestoredAt            string               `cbor:"restored_at" json:"restored_at"`
}

// permanentPurgeReceipt is the payload of a purge receipt (kind
// "permanent_purge").
type permanentPurgeReceipt struct {
	SourceForgetReceiptID string   `cbor:"source_forget_receipt_id" json:"source_forget_receipt_id"`
	PurgedFactIDs         []string `cbor:"purged_fact_ids" json:"purged_fact_ids"`
	PurgedAt              string   `cbor:"purged_at" json:"purged_at"`
}

// ---- scope ----

// parseForgetScope checks a scope object as the memory_forget schema does,
// giving the same -32602 messages, then its value by type. The dry run's
// schema declares scope as a bare object, so this is its only check.
func parseForgetScope(tool string, raw json.RawMessage, c toolkit.Caller) (store.ForgetScope, error) {
	var s store.ForgetScope
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return s, toolkit.InvalidParams(tool, "scope", "must be an object")
	}
	for _, name := range []string{"type", "value"} {
		if _, ok := fields[name]; !ok {
			return s, toolkit.InvalidParams(tool, "scope."+name, "is required")
		}
	}
	if json.Unmarshal(fields["type"], &s.Type) != nil || string(fields["type"]) == "null" {
		return s, toolkit.InvalidParams(tool, "scope.type", "must be a string")
	}
	if !slices.Contains(store.ScopeTypes, s.Type) {
		return s, toolkit.InvalidParams(tool, "scope.type", `value must be one of "`+strings.Join(store.ScopeTypes, `", "`)+`"`)
	}
	if json.Unmarshal(fields["value"], &s.Value) != nil || string(fields["value"]) == "null" {
		return s, toolkit.InvalidParams(tool, "scope.value", "must be a string")
	}
	if s.Value == "" {
		return s, toolkit.InvalidParams(tool, "scope.value", "must not be empty")
	}
	extra := make([]string, 0, len(fields))
	for name := range fields {
		if name != "type" && name != "value" {
			extra = append(extra, name)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		return s, toolkit.InvalidParams(tool, "scope."+extra[0], "unknown argument")
	}
	switch s.Type {
	case store.ScopeEntityPrefix, store.ScopeKeyGlob, store.ScopePassportID:
		if err := checkName(tool, "scope.value", s.Value); err != nil {
			return s, err
		}
	case store.ScopeTenantID:
		if s.Value != c.TenantID() {
			return s, forgetForbidden(tool, "scope.value", fmt.Sprintf("tenant %q is not your tenant %q; a forget stays within the caller's tenant", s.Value, c.TenantID()))
		}
	}
	if _, err := store.ParseScope(s, c.TenantID()); err != nil {
		switch s.Type {
		case store.ScopeKeyGlob:
			return s, toolkit.InvalidParams(tool, "scope.value", "must be a valid glob pattern (path.Match syntax: *, ?, [class], \\ escapes)")
		case store.ScopeBeforeTimestamp:
			return s, toolkit.InvalidParams(tool, "scope.value", "must be a valid date-time")
		}
		return s, toolkit.InvalidParams(tool, "scope", err.Error())
	}
	return s, nil
}

// forgetForbidden is the -32003 error for an argument the caller has no standing
// for, with data {param, reason}.
func forgetForbidden(tool, param, reason string) *toolkit.Error {
	return &toolkit.Error{
		Code:    toolkit.CodeForbidden,
		Message: tool + ": " + param + ": " + reason,
		Data:    &toolkit.ParamError{Param: param, Reason: reason},
	}
}

// forgetQuery is what a forget by c (or its dry run) selects, read in tx.
// An operator (a live passport of earned tier trusted or above) forgets
// the facts of every writer in scope. Any other caller forgets only the
// facts it wrote, shared or private (an anonymous caller: those written
// anonymously); the others in scope are counted as others_skipped, so a
// tenant_id or before_timestamp scope cannot wipe the tenant's shared
// memory, and a passport_id scope naming another writer is refused
// (-32003 operator_required) rather than answered with nothing.
func forgetQuery(tx store.Tx, tool string, c toolkit.Caller, scope store.ForgetScope, includePinned bool, limit int) (store.ForgetQuery, error) {
	q := store.ForgetQuery{Scope: c.Scope(), Selector: scope, IncludePinned: includePinned, Limit: limit}
	err := requireOperator(tx, tool, c)
	var refused *toolkit.Error
	switch {
	case err == nil:
		q.AnyWriter = true
		return q, nil
	case !errors.As(err, &refused):
		return q, err
	case scope.Type == store.ScopePassportID && scope.Value != c.Name():
		return q, toolkit.Forbidden(tool, "operator_required", "scope.value: %s's facts are not yours; forgetting another agent's facts needs an operator passport (tier %s or above)",
			scope.Value, store.TierTrusted)
	}
	return q, nil
}

// ---- memory_forget ----

// AdjustSchema declares the shapes scope takes, one per kind of scope: a
// JSON object the handler parses itself (see parseForgetScope).
func (forgetArgs) AdjustSchema(s map[string]any) {
	scope := s["properties"].(map[string]any)["scope"].(map[string]any)
	kinds := []any{"entity_prefix", "key_glob", "passport_id", "before_timestamp", "tenant_id"}
	value := func(kind any) map[string]any {
		if kind == "before_timestamp" {
			return map[string]any{"type": "string", "format": "date-time"}
		}
		return map[string]any{"type": "string", "minLength": 1}
	}
	var oneOf []any
	for _, kind := range slices.SortedFunc(slices.Values(kinds), func(a, b any) int { return strings.Compare(a.(string), b.(string)) }) {
		oneOf = append(oneOf, map[string]any{"title": kind, "required": []any{"type", "value"},
			"properties": map[string]any{"type": map[string]any{"const": kind}, "value": value(kind)}})
	}
	scope["properties"] = map[string]any{"type": map[string]any{"type": "string", "enum": kinds}, "value": value("")}
	scope["required"] = []any{"type", "value"}
	scope["additionalProperties"] = false
	scope["oneOf"] = oneOf
}

type forgetArgs struct {
	Scope         json.RawMessage `json:"scope" schema:"type=object" doc:"key_glob: a path.Match pattern; passport_id: the writer; tenant_id: yours, every fact you see."`
	Reason        string          `json:"reason" schema:"minLength=1"`
	TenantID      string          `json:"tenant_id,omitempty" schema:"minLength=1"`
	TokenBudget   int             `json:"token_budget,omitempty" schema:"minimum=1" doc:"Most facts to forget, oldest first."`
	IncludePinned bool            `json:"include_pinned,omitempty" schema:"default=false"`
}

// Limits of the forget answers. They cap what is listed, never what is
// forgotten.
const (
	// maxListedForget is the most facts memory_forget and
	// memory_forget_dry_run list.
	maxListedForget = 100
	// maxInlineReceiptBody is the largest receipt body (CBOR bytes)
	// memory_forget returns inline.
	maxInlineReceiptBody = 8 << 10
)

// MemoryForgetOutput is what memory_forget returns.
type MemoryForgetOutput struct {
	ForgetReceiptID       string            `json:"forget_receipt_id"`
	FactsAffected         int               `json:"facts_affected"`
	FactIDs               []string          `json:"fact_ids"`  // the first maxListedForget, oldest first
	Truncated             bool              `json:"truncated"` // fact_ids lists fewer than facts_affected
	RecoveryWindowSeconds int64             `json:"recovery_window_seconds"`
	RecoveryWindowEndsAt  string            `json:"recovery_window_ends_at"`
	ReceiptBodyCBORHex    string            `json:"receipt_body_cbor_hex,omitempty"`
	ReceiptBodyBytes      int               `json:"receipt_body_bytes"`
	ReceiptBodyOmitted    bool              `json:"receipt_body_omitted"`
	ReceiptBodyHashHex    string            `json:"receipt_body_hash_hex"`
	Scope                 store.ForgetScope `json:"scope"`
	PassportID            string            `json:"passport_id"`
	TenantID              string            `json:"tenant_id"`
	TokenBudgetCapped     bool              `json:"token_budget_capped"`
	PinnedSkipped         int               `json:"pinned_skipped"`
	OthersSkipped         int               `json:"others_skipped"` // in scope, written by another agent; see forgetQuery
}

// forgetGate answers -32601 while CORECRUXD_FEATURE_SCOPED_FORGET is off,
// with data {feature_flag, enabled: false}, compatible with the CueCrux
// tool contract.
func forgetGate(env *toolkit.Env) (*toolkit.Result, error) {
	if env.Flags.ScopedForget {
		return nil, nil
	}
	return nil, &toolkit.Error{
		Code:    toolkit.CodeMethodNotFound,
		Message: "memory_forget is disabled (set " + feature.EnvScopedForget + "=1 to enable)",
		Data:    map[string]any{"feature_flag": feature.EnvScopedForget, "enabled": false},
	}
}

func memoryForget() *toolkit.Tool {
	const name = "memory_forget"
	return &toolkit.Tool{
		Name:        name,
		Description: "Forget a scope's facts (restorable for CORECRUXD_FORGET_RECOVERY_WINDOW_DAYS, 7, then purged): only yours unless tier trusted. Any agent's pin protects; include_pinned lifts yours. Off if CORECRUXD_FEATURE_SCOPED_FORGET is set but not 1 or true.",
		Annotations: toolkit.Annotations{Title: "Forget facts", DestructiveHint: true},
		Out:         toolkit.OutputOf[MemoryForgetOutput](),
		Gate:        forgetGate,
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *forgetArgs) (*toolkit.Result, error) {
			scope, err := parseForgetScope(name, in.Scope, c)
			if err != nil {
				return nil, err
			}
			tenant := c.TenantID()
			if in.TenantID != "" && in.TenantID != tenant {
				return nil, forgetForbidden(name, "tenant_id", fmt.Sprintf("tenant %q is not your tenant %q; a forget is attributed to the caller's tenant", in.TenantID, tenant))
			}
			if strings.TrimSpace(in.Reason) == "" {
				return nil, toolkit.InvalidParams(name, "reason", "must not be blank")
			}
			now := env.Time()
			window := forgetWindow(env)
			ends := now.Add(window)
			var out MemoryForgetOutput
			err = env.Store.Update(ctx, func(tx store.Tx) error {
				q, err := forgetQuery(tx, name, c, scope, in.IncludePinned, in.TokenBudget)
				if err != nil {
					return err
				}
				sel, err := store.SelectForget(tx, q)
				if err != nil {
					return err
				}
				payload := forgetReceipt{
					Schema: forgetReceiptSchema, TenantID: tenant, PassportID: c.Name(), Reason: in.Reason,
					Scope: scope, IncludePinned: in.IncludePinned, TokenBudget: in.TokenBudget,
					TokenBudgetCapped: sel.Capped, FactsAffected: make([]forgottenFactID, 0, len(sel.Facts)),
					InitiatedAt: now.Format(time.RFC3339Nano), RecoveryWindowEndsAt: ends.Format(time.RFC3339Nano),
				}
				for _, f := range sel.Facts {
					payload.FactsAffected = append(payload.FactsAffected, forgottenFactID{
						FactID: f.ID, PreForgetValueHashHex: store.ValueHash(f.Value), Entity: f.Entity, Key: f.Key,
					})
				}
				r, err := receipts.Append(tx, env.Signer, tenant, kindForget, c.Name(), payload, now)
				if err != nil {
					return err
				}
				err = store.Forget(tx, &store.ForgetRecord{
					ID: r.ID, Tenant: tenant, Passport: c.Name(), Reason: in.Reason, Scope: scope,
					IncludePinned: in.IncludePinned, InitiatedAt: now, WindowEndsAt: ends,
				}, sel.Facts)
				if err != nil {
					return err
				}
				listed := sel.Facts[:min(len(sel.Facts), maxListedForget)]
				out = MemoryForgetOutput{
					ForgetReceiptID: r.ID, FactsAffected: len(sel.Facts), FactIDs: make([]string, 0, len(listed)),
					Truncated:             len(listed) < len(sel.Facts),
					RecoveryWindowSeconds: int64(window / time.Second), RecoveryWindowEndsAt: ends.Format(time.RFC3339Nano),
					ReceiptBodyBytes: len(r.Body), ReceiptBodyOmitted: len(r.Body) > maxInlineReceiptBody,
					ReceiptBodyHashHex: hex.EncodeToString(r.PayloadHash),
					Scope:              scope, PassportID: c.Name(), TenantID: tenant,
					TokenBudgetCapped: sel.Capped, PinnedSkipped: sel.PinnedSkipped, OthersSkipped: sel.OthersSkipped,
				}
				for _, f := range listed {
					out.FactIDs = append(out.FactIDs, f.ID)
				}
				if !out.ReceiptBodyOmitted {
					out.ReceiptBodyCBORHex = hex.EncodeToString(r.Body)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			return toolkit.JSONResult(out)
		}),
	}
}

// ---- memory_forget_dry_run ----

type forgetDryRunArgs struct {
	Scope         json.RawMessage `json:"scope" schema:"type=object"`
	TokenBudget   int             `json:"token_budget,omitempty" schema:"minimum=1" doc:"Lists at most 100."`
	IncludePinned bool            `json:"include_pinned,omitempty" schema:"default=false"`
}

// ForgetDryRunFact is a fact memory_forget_dry_run would forget.
type ForgetDryRunFact struct {
	FactID   string `json:"fact_id"`
	Entity   string `json:"entity"`
	Key      string `json:"key"`
	Version  uint32 `json:"version"`
	StoredAt string `json:"stored_at"`
	Tokens   int    `json:"tokens"`
	Private  bool   `json:"private,omitempty"`
}

// MemoryForgetDryRunOutput is what memory_forget_dry_run returns.
type MemoryForgetDryRunOutput struct {
	Scope             store.ForgetScope  `json:"scope"`
	Count             int                `json:"count"` // every fact selected, listed or not
	Facts             []ForgetDryRunFact `json:"facts_that_would_be_affected"`
	Truncated         bool               `json:"truncated"` // Facts lists fewer than Count
	DryRun            bool               `json:"dry_run"`
	TokenBudgetCapped bool               `json:"token_budget_capped"`
	PinnedSkipped     int                `json:"pinned_skipped"`
	OthersSkipped     int                `json:"others_skipped"` // in scope, written by another agent; see forgetQuery
}

func memoryForgetDryRun() *toolkit.Tool {
	const name = "memory_forget_dry_run"
	return &toolkit.Tool{
		Name:        name,
		Description: "Preview memory_forget, changing nothing: the facts it would forget. Always available.",
		Annotations: toolkit.Annotations{Title: "Preview forget", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[MemoryForgetDryRunOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *forgetDryRunArgs) (*toolkit.Result, error) {
			scope, err := parseForgetScope(name, in.Scope, c)
			if err != nil {
				return nil, err
			}
			var sel *store.ForgetSelection
			err = env.Store.View(ctx, func(tx store.Tx) error {
				q, err := forgetQuery(tx, name, c, scope, in.IncludePinned, in.TokenBudget)
				if err != nil {
					return err
				}
				sel, err = store.SelectForget(tx, q)
				return err
			})
			if err != nil {
				return nil, err
			}
			out := MemoryForgetDryRunOutput{
				Scope: scope, Count: len(sel.Facts), Facts: []ForgetDryRunFact{}, Truncated: true, DryRun: true,
				TokenBudgetCapped: sel.Capped, PinnedSkipped: sel.PinnedSkipped, OthersSkipped: sel.OthersSkipped,
			}
			rc := newRowCap(maxListedForget, out)
			for _, f := range sel.Facts {
				row := ForgetDryRunFact{
					FactID: f.ID, Entity: f.Entity, Key: f.Key, Version: f.Version,
					StoredAt: f.StoredAt.Format(time.RFC3339Nano), Tokens: f.Tokens, Private: f.Private,
				}
				if !rc.take(row) {
					break
				}
				out.Facts = append(out.Facts, row)
			}
			out.Truncated = len(out.Facts) < out.Count
			return toolkit.JSONResult(out)
		}),
	}
}

// ---- operator functions ----

// RestoreReport is what [RestoreForget] did.
type RestoreReport struct {
	ForgetReceiptID  string   `json:"forget_receipt_id"`
	RestoreReceiptID string   `json:"restore_receipt_id"`
	TenantID         string   `json:"tenant_id"`
	RestoredFactIDs  []string `json:"restored_fact_ids"`
	// Adjusted lists the restored facts that did not come back exactly as
	// they were, because their chain gained a current version meanwhile.
	Adjusted             []store.RestoredFact `json:"adjusted"`
	RestoredAt           string               `json:"restored_at"`
	RecoveryWindowEndsAt string               `json:"recovery_window_ends_at"`
}

// RestoreForget restores the forget whose receipt is receiptID: every fact
// it forgot comes back exactly as it was (store.RestoreForget says what
// happens when its chain moved on meanwhile), and a signed receipt of kind
// "forget_restore", naming the forget and the facts, is minted in the same
// transaction. It works only within the recovery window and only once:
// errors wrap store.ErrRecoveryWindowClosed, store.ErrForgetRestored,
// store.ErrForgetPurged, or store.ErrNotFound for an unknown id.
func RestoreForget(ctx context.Context, env *toolkit.Env, receiptID string) (*RestoreReport, error) {
	now := env.Time()
	var rep *RestoreReport
	err := env.Store.Update(ctx, func(tx store.Tx) error {
		rep = nil
		var restoreID string
		rec, restored, err := store.RestoreForget(tx, receiptID, now, func(rec *store.ForgetRecord, restored []store.RestoredFact) (string, error) {
			payload := forgetRestoreReceipt{
				SourceForgetReceiptID: rec.ID, RestoredFactIDs: make([]string, 0, len(restored)),
				RestoredAt: now.Format(time.RFC3339Nano),
			}
			for _, r := range restored {
				payload.RestoredFactIDs = append(payload.RestoredFactIDs, r.ID)
				if r.SupersededBy != "" || r.Retired != "" {
					payload.Adjusted = append(payload.Adjusted, r)
				}
			}
			r, err := receipts.Append(tx, env.Signer, rec.Tenant, kindForgetRestore, operatorActor, payload, now)
			if err != nil {
				return "", err
			}
			restoreID = r.ID
			return r.ID, nil
		})
		if err != nil {
			return err
		}
		rep = &RestoreReport{
			ForgetReceiptID: rec.ID, RestoreReceiptID: restoreID, TenantID: rec.Tenant,
			RestoredFactIDs: make([]string, 0, len(restored)), Adjusted: []store.RestoredFact{},
			RestoredAt: now.Format(time.RFC3339Nano), RecoveryWindowEndsAt: rec.WindowEndsAt.Format(time.RFC3339Nano),
		}
		for _, r := range restored {
			rep.RestoredFactIDs = append(rep.RestoredFactIDs, r.ID)
			if r.SupersededBy != "" || r.Retired != "" {
				rep.Adjusted = append(rep.Adjusted, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("crux: restore forget %s: %w", receiptID, err)
	}
	return rep, nil
}

// PurgeReport is what [PurgeForgets] did.
type PurgeReport struct {
	PurgedAt string         `json:"purged_at"`
	Purged   []PurgedForget `json:"purged"`
	// Compacted reports that the store rewrote its storage without the
	// freed space that held the purged values (store.Compacter).
	Compacted bool `json:"compacted"`
	// CompactionUnsupported reports a store that cannot compact: the purged
	// values are unreachable but their bytes may remain in freed space.
	CompactionUnsupported bool `json:"compaction_unsupported,omitempty"`
}

// PurgedForget is one forget whose values were purged.
type PurgedForget struct {
	ForgetReceiptID       string   `json:"forget_receipt_id"`
	PurgeReceiptID        string   `json:"purge_receipt_id"`
	TenantID              string   `json:"tenant_id"`
	PurgedFactIDs         []string `json:"purged_fact_ids"`
	RecoveryWindowEndedAt string   `json:"recovery_window_ended_at"`
}

// PurgeForgets purges every forget whose recovery window has ended and that
// was not restored: each in a transaction of its own, in which the saved
// values of its facts are removed (store.PurgeForget) and a signed receipt
// of kind "permanent_purge" {source_forget_receipt_id, purged_fact_ids,
// purged_at} is minted. Then, if a purge is waiting for it (also one of an
// earlier call that failed to compact), the store is compacted when it
// implements store.Compacter, so that the values' bytes are gone from the
// medium too. On error the report holds what was done before it.
func PurgeForgets(ctx context.Context, env *toolkit.Env) (*PurgeReport, error) {
	now := env.Time()
	rep := &PurgeReport{PurgedAt: now.Format(time.RFC3339Nano), Purged: []PurgedForget{}}
	var due []string
	if err := env.Store.View(ctx, func(tx store.Tx) error {
		var err error
		due, err = store.DueForgets(tx, now)
		return err
	}); err != nil {
		return rep, fmt.Errorf("crux: purge: %w", err)
	}
	for _, id := range due {
		var pf *PurgedForget
		err := env.Store.Update(ctx, func(tx store.Tx) error {
			pf = nil
			var purgeID string
			var ids []string
			rec, err := store.PurgeForget(tx, id, now, func(rec *store.ForgetRecord, purged []string) (string, error) {
				r, err := receipts.Append(tx, env.Signer, rec.Tenant, kindPermanentPurge, operatorActor, permanentPurgeReceipt{
					SourceForgetReceiptID: rec.ID, PurgedFactIDs: purged, PurgedAt: now.Format(time.RFC3339Nano),
				}, now)
				if err != nil {
					return "", err
				}
				purgeID, ids = r.ID, purged
				return r.ID, nil
			})
			if errors.Is(err, store.ErrForgetPurged) || errors.Is(err, store.ErrForgetRestored) {
				return nil // a concurrent purge or restore got there first
			}
			if err != nil {
				return err
			}
			pf = &PurgedForget{
				ForgetReceiptID: rec.ID, PurgeReceiptID: purgeID, TenantID: rec.Tenant, PurgedFactIDs: ids,
				RecoveryWindowEndedAt: rec.WindowEndsAt.Format(time.RFC3339Nano),
			}
			return nil
		})
		if err != nil {
			return rep, fmt.Errorf("crux: purge forget %s: %w", id, err)
		}
		if pf != nil {
			rep.Purged = append(rep.Purged, *pf)
		}
	}

	var mark string
	if err := env.Store.View(ctx, func(tx store.Tx) error {
		var err error
		mark, err = store.NeedsCompaction(tx)
		return err
	}); err != nil {
		return rep, fmt.Errorf("crux: purge: %w", err)
	}
	if mark == "" {
		return rep, nil
	}
	if c, ok := env.Store.(store.Compacter); ok {
		if err := c.Compact(ctx); err != nil {
			return rep, fmt.Errorf("crux: purge: compacting the store: %w", err)
		}
		rep.Compacted = true
	} else {
		rep.CompactionUnsupported = true
	}
	if err := env.Store.Update(ctx, func(tx store.Tx) error { return store.CompactionDone(tx, mark) }); err != nil {
		return rep, fmt.Errorf("crux: purge: %w", err)
	}
	return rep, nil
}

// ForgetInfo is the state of one forget, as [ForgetStatus] reports it.
type ForgetInfo struct {
	ForgetReceiptID      string            `json:"forget_receipt_id"`
	TenantID             string            `json:"tenant_id"`
	PassportID           string            `json:"passport_id"`
	Reason               string            `json:"reason"`
	Scope                store.ForgetScope `json:"scope"`
	State                string            `json:"state"` // forgotten, restored or purged
	FactIDs              []string          `json:"fact_ids"`
	InitiatedAt          string            `json:"initiated_at"`
	RecoveryWindowEndsAt string            `json:"recovery_window_ends_at"`
	RestoredAt           string            `json:"restored_at,omitempty"`
	RestoreReceiptID     string            `json:"restore_receipt_id,omitempty"`
	PurgedAt             string            `json:"purged_at,omitempty"`
	PurgeReceiptID       string            `json:"purge_receipt_id,omitempty"`
}

// ForgetStatus reads the state of the forget whose receipt is receiptID.
// An unknown id is an error wrapping store.ErrNotFound.
func ForgetStatus(ctx context.Context, env *toolkit.Env, receiptID string) (*ForgetInfo, error) {
	var info *ForgetInfo
	err := env.Store.View(ctx, func(tx store.Tx) error {
		rec, err := store.GetForget(tx, receiptID)
		if err != nil {
			return err
		}
		info = &ForgetInfo{
			ForgetReceiptID: rec.ID, TenantID: rec.Tenant, PassportID: rec.Passport, Reason: rec.Reason,
			Scope: rec.Scope, State: rec.State, FactIDs: make([]string, 0, rec.FactCount),
			InitiatedAt:          rec.InitiatedAt.Format(time.RFC3339Nano),
			RecoveryWindowEndsAt: rec.WindowEndsAt.Format(time.RFC3339Nano),
			RestoreReceiptID:     rec.RestoreReceipt, PurgeReceiptID: rec.PurgeReceipt,
		}
		if rec.RestoredAt != nil {
			info.RestoredAt = rec.RestoredAt.Format(time.RFC3339Nano)
		}
		if rec.PurgedAt != nil {
			info.PurgedAt = rec.PurgedAt.Format(time.RFC3339Nano)
		}
		return store.ForgottenFacts(tx, receiptID, func(ff *store.ForgottenFact) error {
			info.FactIDs = append(info.FactIDs, ff.ID)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("crux: forget %s: %w", receiptID, err)
	}
	return info, nil
}
