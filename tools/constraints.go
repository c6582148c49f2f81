package tools

// Constraints, config audit and action enrichment.
//
// Decisions where the CueCrux tool contract is silent:
//
//   - Constraints belong to the caller's tenant: every agent of the tenant
//     declares into, reads and is checked against the same list; no other
//     tenant sees it. A tenant holds at most store.MaxConstraints active
//     constraints (declare_constraint then fails with -32004), so a check is
//     bounded; get_constraints lists at most maxListedConstraints.
//   - Keyword matching: an assertion's content words are its index words
//     (store.Words) minus the stop words below. Its match score is the
//     fraction of them found among the action's words; a word is found when
//     it is equal to an action word or, both being at least four bytes long,
//     one is a prefix of the other ("deploy" finds "deployment"). A
//     constraint matches at a score of at least matchThreshold. The action's
//     words come from action_description, tool_name, the keys and values of
//     tool_parameters and, when tool_name is given, the deterministic
//     enrichment (narrative, operations and consequences).
//   - shell_pattern constraints never match by keywords: their assertion is
//     a Go regular expression (RE2: matching is linear in the input, so no
//     pattern can take super-linear time) matched against the string
//     tool_parameters.command (a string, or an array of strings joined by
//     spaces) when tool_name is bash, sh or shell in any case. A match
//     scores 1.
//   - tenant_id, where accepted, must be the caller's own tenant or
//     omitted: any other value is -32602 naming tenant_id (it is an
//     argument that cannot be honoured, not a question of standing).
//   - audit_config writes a fact under __ops::config-audit, key
//     sha256:<hash>, visible to the whole tenant, and mints a signed
//     config_audit receipt in the same transaction; the fact's
//     source_receipt names it.
//   - enrich_action reads no state except the tenant's relationship
//     constraints, writes nothing and mints no stored receipt: its
//     enrichment_receipt is the BLAKE3 hash of the canonical proposal, so
//     the same input against the same constraints gives byte-identical
//     output.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/crux-go/crux/index"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// Limits and thresholds of the constraint tools.
const (
	// maxShellPatternBytes caps a shell_pattern assertion.
	maxShellPatternBytes = 1024
	// maxListedConstraints caps the constraints get_constraints returns:
	// 100 typical rows keep its answer well under 64 KB.
	maxListedConstraints = 100
	// maxListedMatches is the most matches check_constraints lists.
	maxListedMatches = 100
	// matchThreshold is the lowest keyword match score that counts as a
	// match in check_constraints and enrich_action.
	matchThreshold = 0.5
)

// configAuditEntity is the entity audit_config writes under.
const configAuditEntity = "__ops::config-audit"

// shellTools are the tool names (lowercased) whose command parameter
// shell_pattern constraints are matched against.
var shellTools = []string{"bash", "sh", "shell"}

// stopWords are left out of an assertion's content words: they carry the
// rule's modality ("never", "must not"), not what it is about.
var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "to": true, "of": true, "in": true, "on": true, "for": true, "and": true,
	"or": true, "is": true, "are": true, "be": true, "by": true, "with": true, "at": true, "as": true, "it": true,
	"this": true, "that": true, "from": true, "into": true, "any": true, "all": true, "never": true, "not": true,
	"no": true, "do": true, "don": true, "must": true, "should": true, "shall": true, "always": true, "only": true,
	"without": true, "may": true, "can": true, "cannot": true, "we": true, "you": true,
}

// ConstraintMatch is one constraint an action matched.
type ConstraintMatch struct {
	ConstraintID string  `json:"constraint_id"`
	Assertion    string  `json:"assertion"`
	Severity     string  `json:"severity"`
	MatchScore   float64 `json:"match_score"`
}

// ---- matching ----

// actionWords is the word set of an action, with a sorted copy for prefix
// lookups.
type actionWords struct {
	set    map[string]bool
	sorted []string
}

func newActionWords(texts ...string) *actionWords {
	a := &actionWords{set: make(map[string]bool)}
	for _, t := range texts {
		for _, w := range index.LowerWords(t) {
			a.set[w] = true
		}
	}
	for w := range a.set {
		a.sorted = append(a.sorted, w)
	}
	sort.Strings(a.sorted)
	return a
}

// has reports whether w is found among the action's words (see the
// package notes above for the prefix rule).
func (a *actionWords) has(w string) bool {
	if a.set[w] {
		return true
	}
	if len(w) < 4 {
		return false
	}
	if i := sort.SearchStrings(a.sorted, w); i < len(a.sorted) && strings.HasPrefix(a.sorted[i], w) {
		return true
	}
	for n := 4; n < len(w); n++ {
		if a.set[w[:n]] {
			return true
		}
	}
	return false
}

func contentWords(s string) []string {
	var out []string
	for _, w := range index.LowerWords(s) {
		if !stopWords[w] {
			out = append(out, w)
		}
	}
	return out
}

// keywordScore is the fraction of the assertion's content words the action
// holds, rounded to four decimals.
func keywordScore(assertion string, a *actionWords) float64 {
	ws := contentWords(assertion)
	if len(ws) == 0 {
		return 0
	}
	found := 0
	for _, w := range ws {
		if a.has(w) {
			found++
		}
	}
	return math.Round(float64(found)/float64(len(ws))*10000) / 10000
}

func isShellTool(name string) bool { return slices.Contains(shellTools, strings.ToLower(name)) }

// shellCommand is tool_parameters.command of a shell tool call: a string,
// or an array of strings joined by spaces ("" otherwise).
func shellCommand(toolName string, params any) string {
	m, ok := params.(map[string]any)
	if !ok || !isShellTool(toolName) {
		return ""
	}
	switch v := m["command"].(type) {
	case string:
		return v
	case []any:
		parts := make([]string, 0, len(v))
		for _, x := range v {
			if s, ok := x.(string); ok {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, " ")
	}
	return ""
}

// matchConstraints returns the constraints of cs the action matches, most
// severe first, then by score, then in cs's order.
func matchConstraints(cs []*store.Constraint, a *actionWords, toolName string, params any) []ConstraintMatch {
	command := shellCommand(toolName, params)
	out := []ConstraintMatch{}
	for _, c := range cs {
		score := 0.0
		if c.Type == store.ConstraintShellPattern {
			if command == "" {
				continue
			}
			re, err := regexp.Compile(c.Assertion) // checked at declaration
			if err != nil || !re.MatchString(command) {
				continue
			}
			score = 1
		} else if score = keywordScore(c.Assertion, a); score < matchThreshold {
			continue
		}
		out = append(out, ConstraintMatch{ConstraintID: c.ID, Assertion: c.Assertion, Severity: c.Severity, MatchScore: score})
	}
	slices.SortStableFunc(out, func(x, y ConstraintMatch) int {
		if d := store.SeverityRank(x.Severity) - store.SeverityRank(y.Severity); d != 0 {
			return d
		}
		switch {
		case x.MatchScore > y.MatchScore:
			return -1
		case x.MatchScore < y.MatchScore:
			return 1
		}
		return 0
	})
	return out
}

// activeConstraints reads the tenant's active constraints.
// actionInputs checks the tenant argument of an action tool, decodes its
// tool_parameters and reads the tenant's active constraints.
func actionInputs(ctx context.Context, env *toolkit.Env, c toolkit.Caller, tool, tenant string, raw json.RawMessage) (any, []*store.Constraint, error) {
	if err := checkTenantArg(tool, c, tenant); err != nil {
		return nil, nil, err
	}
	params, err := decodeParams(tool, raw)
	if err != nil {
		return nil, nil, err
	}
	var cs []*store.Constraint
	err = env.Store.View(ctx, func(tx store.Tx) error {
		var err error
		cs, err = activeConstraints(tx, c.TenantID())
		return err
	})
	return params, cs, err
}

func activeConstraints(tx store.Tx, tenant string) ([]*store.Constraint, error) {
	var cs []*store.Constraint
	_, err := store.Constraints(tx, store.ConstraintQuery{Tenant: tenant}, func(c *store.Constraint) error {
		cs = append(cs, c)
		return nil
	})
	return cs, err
}

// checkTenantArg accepts a tenant_id argument only when it is the caller's.
func checkTenantArg(tool string, c toolkit.Caller, tenant string) error {
	if tenant != "" && tenant != c.TenantID() {
		return toolkit.InvalidParams(tool, "tenant_id", "must be your own tenant or omitted")
	}
	return nil
}

// decodeParams decodes tool_parameters keeping numbers exact; absent is {}.
func decodeParams(tool string, raw json.RawMessage) (any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, toolkit.InvalidParams(tool, "tool_parameters", "must be an object")
	}
	return v, nil
}

// flatten lists the keys and scalar values of v, keys in sorted order.
func flatten(v any, out []string) []string {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = flatten(v[k], append(out, k))
		}
	case []any:
		for _, x := range v {
			out = flatten(x, out)
		}
	case string:
		out = append(out, v)
	case json.Number:
		out = append(out, string(v))
	case bool:
		out = append(out, strconv.FormatBool(v))
	}
	return out
}

// ---- declare_constraint ----

type declareConstraintArgs struct {
	ConstraintType string `json:"constraint_type" schema:"enum=boundary|relationship|policy|context_flag|shell_pattern"`
	Assertion      string `json:"assertion" schema:"maxLength=4096;minLength=1"`
	Severity       string `json:"severity,omitempty" schema:"default=medium;enum=critical|high|medium|low"`
}

// DeclareConstraintOutput is what declare_constraint returns: the
// constraint stored and its receipt.
type DeclareConstraintOutput struct {
	Assertion      string `json:"assertion"`
	ConstraintHash string `json:"constraint_hash"`
	ConstraintID   string `json:"constraint_id"`
	ConstraintType string `json:"constraint_type"`
	CreatedAt      string `json:"created_at"`
	ReceiptID      string `json:"receipt_id"`
	Severity       string `json:"severity"`
	Status         string `json:"status"`
}

func declareConstraint() *toolkit.Tool {
	const name = "declare_constraint"
	return &toolkit.Tool{
		Name:        name,
		Description: "Declare a tenant rule for check_constraints (keywords, or an RE2 shell_pattern); critical blocks, high warns.",
		Annotations: toolkit.Annotations{Title: "Declare constraint"},
		Out:         toolkit.OutputOf[DeclareConstraintOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *declareConstraintArgs) (*toolkit.Result, error) {
			if in.Severity == "" {
				in.Severity = store.SeverityMedium
			}
			if in.ConstraintType == store.ConstraintShellPattern {
				if len(in.Assertion) > maxShellPatternBytes {
					return nil, toolkit.InvalidParams(name, "assertion", fmt.Sprintf("a shell_pattern is at most %d bytes", maxShellPatternBytes))
				}
				if _, err := regexp.Compile(in.Assertion); err != nil {
					return nil, toolkit.InvalidParams(name, "assertion", "is not a valid Go regular expression: "+err.Error())
				}
			}
			now, id := env.Time(), store.NewConstraintID()
			var out *store.Constraint
			err := env.Store.Update(ctx, func(tx store.Tx) error {
				k := &store.Constraint{
					ID: id, Tenant: c.TenantID(), Type: in.ConstraintType, Assertion: in.Assertion,
					Severity: in.Severity, DeclaredBy: c.Name(), CreatedAt: now,
				}
				k.Hash = store.ConstraintHash(k.Tenant, k.Type, k.Assertion, k.Severity)
				r, err := receipts.Append(tx, env.Signer, k.Tenant, "constraint", c.Name(), map[string]any{
					"constraint_id": k.ID, "constraint_hash": k.Hash, "constraint_type": k.Type,
					"assertion": k.Assertion, "severity": k.Severity, "status": store.ConstraintActive,
				}, now)
				if err != nil {
					return err
				}
				k.ReceiptID = r.ID
				if err := store.PutConstraint(tx, k); err != nil {
					return err
				}
				out = k
				return nil
			})
			if errors.Is(err, store.ErrConstraintLimit) {
				return nil, &toolkit.Error{Code: toolkit.CodeConflict, Message: fmt.Sprintf("%s: your tenant already holds %d active constraints", name, store.MaxConstraints)}
			}
			if err != nil {
				return nil, err
			}
			return toolkit.JSONResult(DeclareConstraintOutput{
				ConstraintID: out.ID, ConstraintHash: out.Hash, ConstraintType: out.Type,
				Assertion: out.Assertion, Severity: out.Severity, Status: out.Status,
				CreatedAt: out.CreatedAt.Format(time.RFC3339Nano), ReceiptID: out.ReceiptID,
			})
		}),
	}
}

// ---- get_constraints ----

type getConstraintsArgs struct {
	ConstraintType string `json:"constraint_type,omitempty" schema:"enum=boundary|relationship|policy|context_flag"`
	Status         string `json:"status,omitempty" schema:"default=active;enum=active|suspended"`
}

// ConstraintRow is a constraint as get_constraints lists it.
type ConstraintRow struct {
	ConstraintID   string `json:"constraint_id"`
	ConstraintType string `json:"constraint_type"`
	Assertion      string `json:"assertion"`
	Severity       string `json:"severity"`
	Status         string `json:"status"`
	CreatedAt      string `json:"created_at"`
}

// GetConstraintsOutput is what get_constraints returns.
type GetConstraintsOutput struct {
	Constraints []ConstraintRow `json:"constraints"`
	Count       int             `json:"count"`
	Truncated   bool            `json:"truncated"`
}

func getConstraints() *toolkit.Tool {
	const name = "get_constraints"
	return &toolkit.Tool{
		Name:        name,
		Description: "Your tenant's constraints, most severe first; status defaults to active.",
		Annotations: toolkit.Annotations{Title: "Get constraints", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[GetConstraintsOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *getConstraintsArgs) (*toolkit.Result, error) {
			rows := []ConstraintRow{}
			var truncated bool
			err := env.Store.View(ctx, func(tx store.Tx) error {
				rows = rows[:0]
				var err error
				truncated, err = store.Constraints(tx, store.ConstraintQuery{
					Tenant: c.TenantID(), Status: in.Status, Type: in.ConstraintType, Limit: maxListedConstraints,
				}, func(k *store.Constraint) error {
					rows = append(rows, ConstraintRow{
						ConstraintID: k.ID, ConstraintType: k.Type, Assertion: k.Assertion, Severity: k.Severity,
						Status: k.Status, CreatedAt: k.CreatedAt.Format(time.RFC3339Nano),
					})
					return nil
				})
				return err
			})
			if err != nil {
				return nil, err
			}
			listed := []ConstraintRow{}
			rc := newRowCap(0, GetConstraintsOutput{Constraints: listed, Count: len(rows), Truncated: true})
			for _, r := range rows {
				if !rc.take(r) {
					break
				}
				listed = append(listed, r)
			}
			return toolkit.JSONResult(GetConstraintsOutput{Constraints: listed, Count: len(listed), Truncated: truncated || rc.truncated})
		}),
	}
}

// ---- check_constraints ----

type checkConstraintsArgs struct {
	ActionDescription string          `json:"action_description,omitempty"`
	ToolName          string          `json:"tool_name,omitempty" schema:"maxLength=256" doc:"bash, sh or shell: shell_pattern rules match tool_parameters.command."`
	ToolParameters    json.RawMessage `json:"tool_parameters,omitempty" schema:"type=object"`
	TenantID          string          `json:"tenant_id,omitempty"`
}

// CheckConstraintsOutput is what check_constraints returns; enrichment_receipt
// is there when tool_name was given (the action was enriched first).
type CheckConstraintsOutput struct {
	ConstraintsChecked int                `json:"constraints_checked"`
	EnrichmentReceipt  *EnrichmentReceipt `json:"enrichment_receipt,omitempty"`
	MatchedConstraints []ConstraintMatch  `json:"matched_constraints"`
	MatchedCount       int                `json:"matched_count"`
	Truncated          bool               `json:"truncated"`
	Verdict            string             `json:"verdict"`
}

func checkConstraints() *toolkit.Tool {
	const name = "check_constraints"
	return &toolkit.Tool{
		Name:        name,
		Description: "Check a proposed action against the tenant's constraints: block, warn or pass, with the matches.",
		Annotations: toolkit.Annotations{Title: "Check constraints", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[CheckConstraintsOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *checkConstraintsArgs) (*toolkit.Result, error) {
			params, cs, err := actionInputs(ctx, env, c, name, in.TenantID, in.ToolParameters)
			if err != nil {
				return nil, err
			}
			texts := append([]string{in.ActionDescription, in.ToolName}, flatten(params, nil)...)
			var out CheckConstraintsOutput
			if in.ToolName != "" {
				p, err := enrich(c.TenantID(), in.ToolName, params, in.ActionDescription, cs)
				if err != nil {
					return nil, err
				}
				texts = append(texts, p.Narrative, strings.Join(p.StateDiff.Operations, " "), strings.Join(p.Consequences, " "))
				out.EnrichmentReceipt = &p.EnrichmentReceipt
			}
			matched := matchConstraints(cs, newActionWords(texts...), in.ToolName, params)
			verdict := "pass"
			for _, m := range matched {
				if m.Severity == store.SeverityCritical {
					verdict = "block"
					break
				}
				if m.Severity == store.SeverityHigh {
					verdict = "warn"
				}
			}
			out.Verdict, out.ConstraintsChecked, out.MatchedCount = verdict, len(cs), len(matched)
			out.MatchedConstraints, out.Truncated = []ConstraintMatch{}, true
			listed := []ConstraintMatch{}
			rc := newRowCap(maxListedMatches, out)
			for _, m := range matched {
				if !rc.take(m) {
					break
				}
				listed = append(listed, m)
			}
			out.MatchedConstraints, out.Truncated = listed, len(listed) < len(matched)
			return toolkit.JSONResult(out)
		}),
	}
}

// ---- audit_config ----

type auditConfigArgs struct {
	Path    string `json:"path" schema:"maxLength=1024;minLength=1"`
	SHA256  string `json:"sha256" pattern:"^[0-9a-f]{64}$"`
	Auditor string `json:"auditor" schema:"maxLength=1024;minLength=1"`
	Note    string `json:"note,omitempty" schema:"maxLength=8192"`
}

// configAudit is the value of a config-audit fact.
type configAudit struct {
	Path      string `json:"path"`
	SHA256    string `json:"sha256"`
	Auditor   string `json:"auditor"`
	Note      string `json:"note,omitempty"`
	AuditedAt string `json:"audited_at"`
}

// AuditConfigOutput is what audit_config returns: the audit record
// written and its receipt.
type AuditConfigOutput struct {
	AuditedAt string `json:"audited_at"`
	Auditor   string `json:"auditor"`
	FactID    string `json:"fact_id"`
	Path      string `json:"path"`
	ReceiptID string `json:"receipt_id"`
	SHA256    string `json:"sha256"`
	Version   uint32 `json:"version"`
}

func auditConfig() *toolkit.Tool {
	const name = "audit_config"
	return &toolkit.Tool{
		Name:        name,
		Description: "Record that a configuration file was audited, by the SHA-256 of its bytes.",
		Annotations: toolkit.Annotations{Title: "Audit config"}, // each call writes a version and mints a receipt
		Out:         toolkit.OutputOf[AuditConfigOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *auditConfigArgs) (*toolkit.Result, error) {
			if err := checkNames(name, "path", in.Path, "auditor", in.Auditor); err != nil {
				return nil, err
			}
			now := env.Time()
			rec := configAudit{Path: in.Path, SHA256: in.SHA256, Auditor: in.Auditor, Note: in.Note, AuditedAt: now.Format(time.RFC3339Nano)}
			value, err := json.Marshal(rec)
			if err != nil {
				return nil, err
			}
			var f *store.Fact
			var receiptID string
			err = env.Store.Update(ctx, func(tx store.Tx) error {
				r, err := receipts.Append(tx, env.Signer, c.TenantID(), "config_audit", c.Name(), map[string]any{
					"sha256": in.SHA256, "path": in.Path, "auditor": in.Auditor, "note": in.Note,
				}, now)
				if err != nil {
					return err
				}
				f, _, err = store.PutFact(tx, store.NewFact{Scope: c.Scope(),
					Entity: configAuditEntity, Key: "sha256:" + in.SHA256,
					Value: string(value), SourceReceipt: r.ID, Confidence: 1, HorizonClass: store.HorizonNone, Now: now,
				})
				receiptID = r.ID
				return err
			})
			if err != nil {
				return nil, err
			}
			return toolkit.JSONResult(AuditConfigOutput{
				SHA256: in.SHA256, Path: in.Path, Auditor: in.Auditor, AuditedAt: rec.AuditedAt,
				FactID: f.ID, Version: f.Version, ReceiptID: receiptID,
			})
		}),
	}
}

// ---- check_config_audit ----

// ConfigPath names a configuration file by path and the SHA-256 of its
// bytes.
type ConfigPath struct {
	Path   string `json:"path" schema:"maxLength=1024;minLength=1"`
	SHA256 string `json:"sha256" pattern:"^[0-9a-f]{64}$"`
}

type checkConfigAuditArgs struct {
	Paths []ConfigPath `json:"paths" schema:"maxItems=256;minItems=1"`
}

// AuditedConfig is a file check_config_audit found audited.
type AuditedConfig struct {
	Path        string `json:"path"`
	SHA256      string `json:"sha256"`
	AuditedAt   string `json:"audited_at"`
	Auditor     string `json:"auditor"`
	AuditedPath string `json:"audited_path"`
}

// CheckConfigAuditOutput is what check_config_audit returns; content
// summarises it in a sentence.
type CheckConfigAuditOutput struct {
	Audited   []AuditedConfig `json:"audited"`
	Content   string          `json:"content"`
	Unaudited []ConfigPath    `json:"unaudited"`
}

func checkConfigAudit() *toolkit.Tool {
	const name = "check_config_audit"
	return &toolkit.Tool{
		Name:        name,
		Description: "Whether audit_config recorded each {path, sha256} in your tenant (the hash decides).",
		Annotations: toolkit.Annotations{Title: "Check config audit", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[CheckConfigAuditOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *checkConfigAuditArgs) (*toolkit.Result, error) {
			for i, p := range in.Paths {
				if err := checkName(name, "paths."+strconv.Itoa(i)+".path", p.Path); err != nil {
					return nil, err
				}
			}
			audited, unaudited := []AuditedConfig{}, []ConfigPath{}
			err := env.Store.View(ctx, func(tx store.Tx) error {
				audited, unaudited = audited[:0], unaudited[:0]
				for _, p := range in.Paths {
					fs, err := store.History(tx, store.Scope{Tenant: c.TenantID(), Agent: ""}, configAuditEntity, "sha256:"+p.SHA256)
					if err != nil {
						return err
					}
					var rec *configAudit
					for i := len(fs) - 1; i >= 0 && rec == nil; i-- {
						if fs[i].Current() {
							r := new(configAudit)
							if json.Unmarshal([]byte(fs[i].Value), r) == nil {
								rec = r
							}
						}
					}
					if rec == nil {
						unaudited = append(unaudited, p)
						continue
					}
					audited = append(audited, AuditedConfig{Path: p.Path, SHA256: p.SHA256, AuditedAt: rec.AuditedAt,
						Auditor: rec.Auditor, AuditedPath: rec.Path})
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			summary := fmt.Sprintf("%d of %d config files audited", len(audited), len(in.Paths))
			if len(unaudited) > 0 {
				names := make([]string, len(unaudited))
				for i, u := range unaudited {
					names[i] = u.Path
				}
				summary += "; unaudited: " + strings.Join(names, ", ")
			}
			return toolkit.JSONResult(CheckConfigAuditOutput{Audited: audited, Content: summary, Unaudited: unaudited})
		}),
	}
}

// ---- enrich_action ----

type enrichActionArgs struct {
	ToolName          string          `json:"tool_name" schema:"maxLength=256;minLength=1"`
	TenantID          string          `json:"tenant_id,omitempty"`
	ToolParameters    json.RawMessage `json:"tool_parameters,omitempty" schema:"default={};type=object"`
	ActionDescription string          `json:"action_description,omitempty"`
}

func enrichAction() *toolkit.Tool {
	const name = "enrich_action"
	return &toolkit.Tool{
		Name:        name,
		Description: "Describe a proposed tool call, deterministically: narrative, principals, resources, risk, constraints matched.",
		Annotations: toolkit.Annotations{Title: "Enrich action", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[EnrichActionOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *enrichActionArgs) (*toolkit.Result, error) {
			params, cs, err := actionInputs(ctx, env, c, name, in.TenantID, in.ToolParameters)
			if err != nil {
				return nil, err
			}
			p, err := enrich(c.TenantID(), in.ToolName, params, in.ActionDescription, cs)
			if err != nil {
				return nil, err
			}
			return toolkit.JSONResult(p)
		}),
	}
}
