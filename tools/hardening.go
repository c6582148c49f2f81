package tools

// Hardening and audit posture (§12.15), observability (§12.16) and decisions
// (§12.21).
//
// Decisions taken where the reference manual is silent:
//
//   - route_access_matrix describes the transports crux really serves: MCP
//     over stdio, whose methods are initialize, tools/list and tools/call. It
//     invents no HTTP routes.
//   - execplan_gate refuses a slug that already starts with "execplan:"
//     (the manual says the slug comes without it) rather than guessing, and
//     accepts a milestone as "M2" or "gate:M2". commit_sha must be 7 to 64
//     hex digits and is stored lowercased. token_budget is required and
//     recorded in the gate record; the answer is a few dozen tokens and is
//     never trimmed.
//   - auth_posture_audit reports only what crux knows: no daemon, and no
//     knowledge of its data directory (the embedder owns the store), so the
//     manual's daemon_loopback_configured and data_dir_configured are left
//     out and a note says why.
//   - egress_policy_check parses with net/url: the host is what a client
//     would connect to (userinfo is not the host), "localhost" matches
//     exactly, loopback IPs are 127.0.0.0/8 and ::1 (IPv4-mapped included);
//     0.0.0.0, other IPv6 addresses and numeric forms net.ParseIP does not
//     read (2130706433, 127.1) are not loopback. A target that is not a URL
//     at all is -32602; a URL that breaks the policy is allowed: false with
//     reasons.
//   - Gap observations (get_gaps) are tenant-wide and do not name the agent
//     that asked; one record per distinct query and filters, at most
//     store.MaxGapObservations per tenant (least recently seen evicted).
//   - Decisions are shared facts, visible tenant-wide to every agent, never
//     private: a decision log is a team record. Each has its own key, so one
//     never supersedes another, and clients cannot write, edit or delete
//     reserved entities, so the log is append-only.

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"github.com/crux-go/crux/feature"
	"net"
	"net/url"
	"regexp"
	"strings"
	"time"

	"lukechampine.com/blake3"

	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/surface"
)

// ---- route_access_matrix ----

// RouteAccess is one route of a crux transport and what it requires.
type RouteAccess struct {
	Transport        string   `json:"transport"`
	Route            string   `json:"route"`
	RequiredAnyScope []string `json:"required_any_scope"`
	Enforced         bool     `json:"enforced"`
	PassportBinding  string   `json:"passport_binding"`
	TenantBinding    string   `json:"tenant_binding"`
	Notes            string   `json:"notes"`
}

func routeAccessMatrix() *Tool {
	const name = "route_access_matrix"
	return &Tool{
		Name: name,
		Description: "The routes of crux's own transports and what each requires. crux serves MCP over stdio " +
			"(no HTTP routes): initialize, tools/list and tools/call, bound to the agent the process was started " +
			"for. With a capability token (an RCX router) tools/call needs the called tool's capability and " +
			"tools/list shows only what the token allows; without one nothing is enforced (enforced: false).",
		Annotations: Annotations{Title: "Route access matrix", ReadOnlyHint: true, IdempotentHint: true},
		Output:      "{routes: [{transport, route, required_any_scope: [string], enforced, passport_binding, tenant_binding, notes}], enforcing}",
		schema:      schemaFor(name),
		run: bind(name, func(ctx context.Context, env *Env, c Caller, _ *struct{}) (*Result, error) {
			enforcing := env.Router != nil
			const passport = "the process's agent (--agent or CRUX_AGENT): named means authenticated, unnamed means anonymous"
			const tenant = "the process's tenant (the crux command serves the default tenant)"
			call := []string{}
			callNote := "no capability token: every call is allowed (fail-open); arguments are checked against the tool's schema"
			listNote := "no capability token: every tool is listed"
			if enforcing {
				call = []string{surface.CapabilityPrefix + "<tool>", surface.QueryCapability}
				callNote = "needs the called tool's capability in the token: " + surface.CapabilityPrefix +
					"<tool>, or " + surface.QueryCapability + " for query, query_scan and query_expand; refused with -32030 otherwise"
				listNote = "lists only the tools the token allows"
			}
			routes := []RouteAccess{
				{Transport: "stdio", Route: "initialize", RequiredAnyScope: []string{}, Enforced: false,
					PassportBinding: passport, TenantBinding: tenant, Notes: "protocol handshake; needs no capability"},
				{Transport: "stdio", Route: "tools/list", RequiredAnyScope: []string{}, Enforced: enforcing,
					PassportBinding: passport, TenantBinding: tenant, Notes: listNote},
				{Transport: "stdio", Route: "tools/call", RequiredAnyScope: call, Enforced: enforcing,
					PassportBinding: passport, TenantBinding: tenant, Notes: callNote},
			}
			return jsonResult(map[string]any{"routes": routes, "enforcing": enforcing})
		}),
	}
}

// ---- execplan_gate ----

type execplanGateArgs struct {
	Slug         string   `json:"slug"`
	Milestone    string   `json:"milestone"`
	Status       string   `json:"status"`
	CommitSHA    string   `json:"commit_sha"`
	TokenBudget  int      `json:"token_budget"`
	TestsPassing *bool    `json:"tests_passing"`
	Artifacts    []string `json:"artifacts"`
	Notes        string   `json:"notes"`
}

// GateRecord is the value of an execplan_gate fact, as JSON.
type GateRecord struct {
	Slug         string   `json:"slug"`
	Milestone    string   `json:"milestone"`
	Status       string   `json:"status"`
	CommitSHA    string   `json:"commit_sha"`
	TestsPassing *bool    `json:"tests_passing,omitempty"`
	Artifacts    []string `json:"artifacts"`
	Notes        string   `json:"notes,omitempty"`
	TokenBudget  int      `json:"token_budget"`
	RecordedBy   string   `json:"recorded_by"`
	RecordedAt   string   `json:"recorded_at"`
}

// ExecplanPrefix starts the entity of an execution plan's facts.
const ExecplanPrefix = "execplan:"

var commitSHA = regexp.MustCompile(`^[0-9a-fA-F]{7,64}$`)

func execplanGate() *Tool {
	const name = "execplan_gate"
	return &Tool{
		Name: name,
		Description: "Record a milestone gate of an execution plan as a fact under entity execplan:<slug>, key " +
			"gate:<milestone> (milestone M2 or gate:M2; slug without the execplan: prefix). Recording the same " +
			"milestone again makes a new version that supersedes the previous one (fact_history keeps both). The " +
			"value is the gate record as JSON; the horizon is medium (the execplan: default). commit_sha is 7 to 64 " +
			"hex digits; token_budget (required, > 0) is recorded with the gate; the answer is never trimmed.",
		Annotations: Annotations{Title: "ExecPlan gate"},
		Output:      "{fact_id, entity, key, version, commit_sha, status}",
		schema:      schemaFor(name),
		run: bind(name, func(ctx context.Context, env *Env, c Caller, in *execplanGateArgs) (*Result, error) {
			slug := strings.TrimSpace(in.Slug)
			switch {
			case slug == "":
				return nil, InvalidParams(name, "slug", "must not be empty")
			case strings.HasPrefix(slug, ExecplanPrefix):
				return nil, InvalidParams(name, "slug", "give the slug without the execplan: prefix")
			}
			milestone := strings.TrimPrefix(strings.TrimSpace(in.Milestone), "gate:")
			if milestone == "" {
				return nil, InvalidParams(name, "milestone", "must name a milestone, such as M2 or gate:M2")
			}
			if !commitSHA.MatchString(in.CommitSHA) {
				return nil, InvalidParams(name, "commit_sha", "must be 7 to 64 hexadecimal digits")
			}
			entity, key := ExecplanPrefix+slug, "gate:"+milestone
			if err := checkNames(name, "slug", entity, "milestone", key); err != nil {
				return nil, err
			}
			now := env.now()
			rec := GateRecord{
				Slug: slug, Milestone: milestone, Status: in.Status, CommitSHA: strings.ToLower(in.CommitSHA),
				TestsPassing: in.TestsPassing, Artifacts: in.Artifacts, Notes: in.Notes, TokenBudget: in.TokenBudget,
				RecordedBy: c.Name(), RecordedAt: now.Format(time.RFC3339Nano),
			}
			if rec.Artifacts == nil {
				rec.Artifacts = []string{}
			}
			value, err := json.Marshal(rec)
			if err != nil {
				return nil, err
			}
			var f *store.Fact
			err = env.Store.Update(ctx, func(tx store.Tx) error {
				var err error
				f, _, err = store.PutFact(tx, store.NewFact{
					Tenant: c.TenantID(), Owner: c.Identity(), Entity: entity, Key: key,
					Value: string(value), Confidence: 1, Now: now,
				})
				return err
			})
			if err != nil {
				return nil, err
			}
			return jsonResult(map[string]any{
				"fact_id": f.ID, "entity": f.Entity, "key": f.Key, "version": f.Version,
				"commit_sha": rec.CommitSHA, "status": rec.Status,
			})
		}),
	}
}

// ---- auth_posture_audit ----

// AuthPosture is what auth_posture_audit reports.
type AuthPosture struct {
	Schema                     string     `json:"schema"`
	CheckedAt                  string     `json:"checked_at"`
	MCPAgent                   string     `json:"mcp_agent"`
	Authenticated              bool       `json:"authenticated"`
	Tenant                     string     `json:"tenant"`
	RCXRouterConfigured        bool       `json:"rcx_router_configured"`
	Token                      *TokenInfo `json:"token,omitempty"`
	AgentPassportsEnabled      bool       `json:"agent_passports_enabled"`
	PassportRevocationEnforced bool       `json:"passport_revocation_enforced"`
	ReceiptSignerKeyID         string     `json:"receipt_signer_key_id"`
	Notes                      []string   `json:"notes"`
	RecommendedChecks          []string   `json:"recommended_checks"`
}

// TokenInfo names the capability token a server enforces.
type TokenInfo struct {
	ID   string `json:"id"`
	Tier string `json:"tier"`
}

func authPostureAudit() *Tool {
	const name = "auth_posture_audit"
	return &Tool{
		Name: name,
		Description: "How this server authenticates and authorises calls, truthfully: the calling agent and whether " +
			"the transport authenticated it, whether a capability token is enforced (an RCX router; without one " +
			"every call is allowed), agent passports (CORECRUXD_AGENT_PASSPORTS), passport revocation " +
			"(CRUX_PASSPORT_REVOCATION) and the key that signs receipts, with recommended checks. crux has no daemon " +
			"and does not know its data directory, so it reports neither.",
		Annotations: Annotations{Title: "Auth posture audit", ReadOnlyHint: true, IdempotentHint: true},
		Output: "{schema: crux.auth_posture_audit.v1, checked_at, mcp_agent, authenticated, tenant, rcx_router_configured, " +
			"token?{id, tier}, agent_passports_enabled, passport_revocation_enforced, receipt_signer_key_id, notes: [string], " +
			"recommended_checks: [string]}",
		schema: schemaFor(name),
		run: bind(name, func(ctx context.Context, env *Env, c Caller, _ *struct{}) (*Result, error) {
			p := AuthPosture{
				Schema: "crux.auth_posture_audit.v1", CheckedAt: env.now().Format(time.RFC3339Nano),
				MCPAgent: c.Name(), Authenticated: c.Identity() != "", Tenant: c.TenantID(),
				RCXRouterConfigured: env.Router != nil, AgentPassportsEnabled: env.Flags.AgentPassports,
				PassportRevocationEnforced: env.Flags.PassportRevocation,
				Notes: []string{
					"crux has no daemon: the manual's daemon_loopback_configured does not apply",
					"crux does not know its data directory (the embedder owns the store; the crux command keeps it under --data), so data_dir_configured is not reported",
					"HTTP auth mode is not exposed: crux serves MCP over stdio, bound to the process's agent",
				},
				RecommendedChecks: []string{},
			}
			if env.Signer != nil {
				p.ReceiptSignerKeyID = env.Signer.KeyID()
			}
			if env.Router != nil {
				info := env.Router.Info()
				p.Token = &TokenInfo{ID: info.TokenID, Tier: info.Tier}
				p.Notes = append(p.Notes, "calls are checked against capability token "+info.TokenID+" (tier "+info.Tier+")")
			} else {
				p.Notes = append(p.Notes, "no RCX router: every call is allowed (fail-open)")
				p.RecommendedChecks = append(p.RecommendedChecks,
					"wire an RCX router (crux.Options.Router, as the crux command does with a free-local token) so calls are checked against a capability token")
			}
			if !p.Authenticated {
				p.RecommendedChecks = append(p.RecommendedChecks,
					"run the transport for a named agent (--agent or CRUX_AGENT): anonymous callers share the public pool and have no private scope")
			}
			if !p.PassportRevocationEnforced {
				p.RecommendedChecks = append(p.RecommendedChecks,
					"turn on "+feature.EnvPassportRevocation+" so revoked passports are refused")
			}
			return jsonResult(p)
		}),
	}
}

// ---- egress_policy_check ----

type egressArgs struct {
	Target            string `json:"target"`
	Purpose           string `json:"purpose"`
	AllowLoopbackHTTP *bool  `json:"allow_loopback_http"`
	AllowPlainHTTP    bool   `json:"allow_plain_http"`
}

// EgressDecision is what egress_policy_check reports.
type EgressDecision struct {
	Schema  string   `json:"schema"`
	Target  string   `json:"target"`
	Purpose string   `json:"purpose"`
	Allowed bool     `json:"allowed"`
	Scheme  string   `json:"scheme"`
	Host    string   `json:"host"`
	Reasons []string `json:"reasons"`
}

// CheckEgress applies the egress policy to target: https is allowed; plain
// http only to a loopback host (when allowLoopbackHTTP) or when
// allowPlainHTTP; any other scheme, and a URL without a host, is refused.
// An error means target is not a URL.
func CheckEgress(target string, allowLoopbackHTTP, allowPlainHTTP bool) (EgressDecision, error) {
	d := EgressDecision{Schema: "crux.egress_policy_check.v1", Target: target, Reasons: []string{}}
	u, err := url.Parse(target)
	if err != nil {
		return d, err
	}
	d.Scheme = strings.ToLower(u.Scheme)
	d.Host = strings.ToLower(u.Hostname())
	if u.User != nil {
		d.Reasons = append(d.Reasons, "the URL carries userinfo; the host connected to is "+quoteHost(d.Host)+", not the userinfo")
	}
	loopback := isLoopbackHost(d.Host)
	switch {
	case d.Scheme == "":
		d.Reasons = append(d.Reasons, "no scheme: give an absolute https:// URL")
	case d.Scheme != "https" && d.Scheme != "http":
		d.Reasons = append(d.Reasons, "scheme "+d.Scheme+" is not allowed: only https, and http to loopback")
	case d.Host == "":
		d.Reasons = append(d.Reasons, "the URL has no host")
	case d.Scheme == "https":
		d.Allowed = true
		d.Reasons = append(d.Reasons, "https is allowed")
	case allowPlainHTTP:
		d.Allowed = true
		d.Reasons = append(d.Reasons, "plain http allowed by allow_plain_http")
	case loopback && allowLoopbackHTTP:
		d.Allowed = true
		d.Reasons = append(d.Reasons, "plain http to loopback host "+d.Host+" is allowed")
	case loopback:
		d.Reasons = append(d.Reasons, "plain http to loopback refused: allow_loopback_http is false")
	default:
		d.Reasons = append(d.Reasons, "plain http is allowed only to loopback (localhost, 127.0.0.0/8, ::1) or with allow_plain_http; "+
			quoteHost(d.Host)+" is not loopback")
	}
	return d, nil
}

func quoteHost(h string) string {
	if h == "" {
		return "(none)"
	}
	return h
}

// isLoopbackHost reports whether host (lowercase, without brackets or
// port) is "localhost" exactly or a loopback IP address.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func egressPolicyCheck() *Tool {
	const name = "egress_policy_check"
	return &Tool{
		Name: name,
		Description: "Check an outbound URL against the egress policy: https is allowed; plain http only to a " +
			"loopback host (localhost exactly, 127.0.0.0/8 or ::1; allow_loopback_http, default true) or with " +
			"allow_plain_http (default false); other schemes and URLs without a host are refused. The host is " +
			"parsed as a client would connect to it (http://127.0.0.1@evil.com goes to evil.com; 0.0.0.0 and " +
			"localhost.example.com are not loopback). A target that is not a URL is an invalid argument.",
		Annotations: Annotations{Title: "Egress policy check", ReadOnlyHint: true, IdempotentHint: true},
		Output:      "{schema: crux.egress_policy_check.v1, target, purpose, allowed, scheme, host, reasons: [string]}",
		schema:      schemaFor(name),
		run: bind(name, func(ctx context.Context, env *Env, c Caller, in *egressArgs) (*Result, error) {
			loop := true
			if in.AllowLoopbackHTTP != nil {
				loop = *in.AllowLoopbackHTTP
			}
			if strings.TrimSpace(in.Target) == "" {
				return nil, InvalidParams(name, "target", "must not be empty")
			}
			d, err := CheckEgress(in.Target, loop, in.AllowPlainHTTP)
			if err != nil {
				return nil, InvalidParams(name, "target", "is not a URL: "+err.Error())
			}
			d.Purpose = in.Purpose
			return jsonResult(d)
		}),
	}
}

// ---- get_gaps ----

type getGapsArgs struct {
	Query string `json:"query"`
	Limit *int   `json:"limit"`
}

// GapRow is one gap observation as get_gaps returns it.
type GapRow struct {
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
				Gaps        []GapRow `json:"gaps"`
				TotalTokens int      `json:"total_tokens"`
			}{Gaps: []GapRow{}}
			err = env.Store.View(ctx, func(tx store.Tx) error {
				out.Gaps, out.TotalTokens = out.Gaps[:0], 0
				return store.Gaps(tx, c.TenantID(), func(g *store.Gap) error {
					if len(terms) > 0 && !wordsMatch(gapText(g.Value), terms) {
						return nil
					}
					row := GapRow{Entity: store.GapEntity, Key: g.Key, Value: g.Value,
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

// ---- record_decision ----

// DecisionsPrefix starts the entity of every decision:
// __decisions__::<session_id>.
const DecisionsPrefix = "__decisions__::"

type recordDecisionArgs struct {
	Action       string   `json:"action"`
	Rationale    string   `json:"rationale"`
	Alternatives []string `json:"alternatives"`
	Confidence   *float64 `json:"confidence"`
	SessionID    string   `json:"session_id"`
	ContextRefs  []string `json:"context_refs"`
}

// DecisionContent is what a decision hash covers. Its canonical JSON has
// the keys in this (alphabetical) order, no whitespace, no HTML escaping,
// empty arrays as [] and the confidence in Go's shortest float form.
type DecisionContent struct {
	Action       string   `json:"action"`
	Alternatives []string `json:"alternatives"`
	Confidence   float64  `json:"confidence"`
	ContextRefs  []string `json:"context_refs"`
	Rationale    string   `json:"rationale"`
	SessionID    string   `json:"session_id"`
}

// DecisionHash is the lowercase hex BLAKE3 of d's canonical JSON.
func DecisionHash(d DecisionContent) (string, error) {
	if d.Alternatives == nil {
		d.Alternatives = []string{}
	}
	if d.ContextRefs == nil {
		d.ContextRefs = []string{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return "", err
	}
	sum := blake3.Sum256(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	return hex.EncodeToString(sum[:]), nil
}

// DecisionRecord is the value of a decision fact, as JSON, and the payload
// of its receipt (kind "decision").
type DecisionRecord struct {
	DecisionID   string   `json:"decision_id" cbor:"decision_id"`
	DecisionHash string   `json:"decision_hash" cbor:"decision_hash"`
	FactID       string   `json:"fact_id" cbor:"fact_id"`
	Entity       string   `json:"entity" cbor:"entity"`
	Action       string   `json:"action" cbor:"action"`
	Rationale    string   `json:"rationale" cbor:"rationale"`
	Alternatives []string `json:"alternatives" cbor:"alternatives"`
	Confidence   float64  `json:"confidence" cbor:"confidence"`
	ContextRefs  []string `json:"context_refs" cbor:"context_refs"`
	SessionID    string   `json:"session_id" cbor:"session_id"`
	RecordedBy   string   `json:"recorded_by" cbor:"recorded_by"`
	RecordedAt   string   `json:"recorded_at" cbor:"recorded_at"`
	ReceiptID    string   `json:"receipt_id,omitempty" cbor:"-"`
}

func recordDecision() *Tool {
	const name = "record_decision"
	return &Tool{
		Name: name,
		Description: "Record a decision: action, rationale, alternatives, confidence (0-1, default 1) and context " +
			"references, under session_id (default _default). Append-only: each decision is a new fact under entity " +
			"__decisions__::<session_id> with its own key (its decision_id), so none supersedes another, and clients " +
			"cannot edit or delete it. decision_hash is the BLAKE3 (hex) of the canonical JSON of {action, " +
			"alternatives, confidence, context_refs, rationale, session_id}; a signed receipt (kind decision) is " +
			"minted with it. Decisions are visible to every agent of the tenant: read them with query_facts " +
			"entity_prefix __decisions__::.",
		Annotations: Annotations{Title: "Record decision"},
		Output:      "{decision_id, decision_hash, entity, action, fact_id, receipt_id}",
		schema:      schemaFor(name),
		run: bind(name, func(ctx context.Context, env *Env, c Caller, in *recordDecisionArgs) (*Result, error) {
			if strings.TrimSpace(in.Action) == "" {
				return nil, InvalidParams(name, "action", "must not be empty")
			}
			if strings.TrimSpace(in.Rationale) == "" {
				return nil, InvalidParams(name, "rationale", "must not be empty")
			}
			session := in.SessionID
			if session == "" {
				session = "_default"
			}
			entity := DecisionsPrefix + session
			if err := checkNames(name, "session_id", entity); err != nil {
				return nil, err
			}
			content := DecisionContent{Action: in.Action, Alternatives: in.Alternatives, Confidence: 1,
				ContextRefs: in.ContextRefs, Rationale: in.Rationale, SessionID: session}
			if in.Confidence != nil {
				content.Confidence = *in.Confidence
			}
			if content.Alternatives == nil {
				content.Alternatives = []string{}
			}
			if content.ContextRefs == nil {
				content.ContextRefs = []string{}
			}
			hash, err := DecisionHash(content)
			if err != nil {
				return nil, err
			}
			now := env.now()
			rec := DecisionRecord{
				DecisionID: "dec_" + randomHex(16), DecisionHash: hash, FactID: store.NewFactID(), Entity: entity,
				Action: content.Action, Rationale: content.Rationale, Alternatives: content.Alternatives,
				Confidence: content.Confidence, ContextRefs: content.ContextRefs, SessionID: session,
				RecordedBy: c.Name(), RecordedAt: now.Format(time.RFC3339Nano),
			}
			var receiptID string
			err = env.Store.Update(ctx, func(tx store.Tx) error {
				r, err := receipts.Append(tx, env.Signer, c.TenantID(), "decision", c.Name(), rec, now)
				if err != nil {
					return err
				}
				stored := rec
				stored.ReceiptID = r.ID
				value, err := json.Marshal(stored)
				if err != nil {
					return err
				}
				if _, _, err := store.PutFact(tx, store.NewFact{
					Tenant: c.TenantID(), Owner: c.Identity(), Entity: entity, Key: rec.DecisionID,
					Value: string(value), SourceReceipt: r.ID, Confidence: content.Confidence, Now: now, ID: rec.FactID,
				}); err != nil {
					return err
				}
				receiptID = r.ID
				return nil
			})
			if err != nil {
				return nil, err
			}
			return jsonResult(map[string]any{
				"decision_id": rec.DecisionID, "decision_hash": hash, "entity": entity, "action": rec.Action,
				"fact_id": rec.FactID, "receipt_id": receiptID,
			})
		}),
	}
}
