package tools

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"time"

	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/surface"
)

// Hardening and audit posture: route_access_matrix, execplan_gate and
// auth_posture_audit.
//
// Decisions taken where the CueCrux tool contract is silent:
//
//   - route_access_matrix describes the transports crux really serves: MCP
//     over stdio, whose methods are initialize, tools/list and tools/call. It
//     invents no HTTP routes.
//   - execplan_gate refuses a slug that already starts with "execplan:"
//     (the contract says the slug comes without it) rather than guessing,
//     and accepts a milestone as "M2" or "gate:M2". commit_sha must be 7 to
//     64 hex digits and is stored lowercased. token_budget is required and
//     recorded in the gate record; the answer is a few dozen tokens and is
//     never trimmed.
//   - auth_posture_audit reports only what crux knows: there is no daemon,
//     and the data directory is known only when the embedder names it
//     (Options.DataDir), so the contract's daemon_loopback_configured and
//     data_dir_configured are left out and a note names the directory or
//     says why it is not known.

// routeAccess is one route of a crux transport and what it requires.
type routeAccess struct {
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
			routes := []routeAccess{
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

type execplanGateArgs struct {
	Slug         string   `json:"slug"`
	Milestone    string   `json:"milestone"`
	Status       string   `json:"status"`
	CommitSHA    string   `json:"commit_sha"`
	TokenBudget  int      `json:"token_budget"`
	TestsPassing *bool    `json:"tests_passing,omitempty"`
	Artifacts    []string `json:"artifacts,omitempty"`
	Notes        string   `json:"notes,omitempty"`
}

// gateRecord is the value of an execplan_gate fact, as JSON.
type gateRecord struct {
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

// execplanPrefix starts the entity of an execution plan's facts, and
// execplanGatePrefix the key of a milestone's gate.
const (
	execplanPrefix     = "execplan:"
	execplanGatePrefix = "gate:"
)

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
				return nil, invalidParams(name, "slug", "must not be empty")
			case strings.HasPrefix(slug, execplanPrefix):
				return nil, invalidParams(name, "slug", "give the slug without the execplan: prefix")
			}
			milestone := strings.TrimPrefix(strings.TrimSpace(in.Milestone), execplanGatePrefix)
			if milestone == "" {
				return nil, invalidParams(name, "milestone", "must name a milestone, such as M2 or gate:M2")
			}
			if !commitSHA.MatchString(in.CommitSHA) {
				return nil, invalidParams(name, "commit_sha", "must be 7 to 64 hexadecimal digits")
			}
			if err := checkPrefixedName(name, "slug", execplanPrefix, slug); err != nil {
				return nil, err
			}
			if err := checkPrefixedName(name, "milestone", execplanGatePrefix, milestone); err != nil {
				return nil, err
			}
			entity, key := execplanPrefix+slug, execplanGatePrefix+milestone
			now := env.now()
			rec := gateRecord{
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
				f, _, err = store.PutFact(tx, store.NewFact{Scope: c.Scope(),
					Entity: entity, Key: key,
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

// authPosture is what auth_posture_audit reports.
type authPosture struct {
	Schema                     string     `json:"schema"`
	CheckedAt                  string     `json:"checked_at"`
	MCPAgent                   string     `json:"mcp_agent"`
	Authenticated              bool       `json:"authenticated"`
	Tenant                     string     `json:"tenant"`
	RCXRouterConfigured        bool       `json:"rcx_router_configured"`
	Token                      *tokenInfo `json:"token,omitempty"`
	AgentPassportsEnabled      bool       `json:"agent_passports_enabled"`
	PassportRevocationEnforced bool       `json:"passport_revocation_enforced"`
	ReceiptSignerKeyID         string     `json:"receipt_signer_key_id"`
	Notes                      []string   `json:"notes"`
	RecommendedChecks          []string   `json:"recommended_checks"`
}

// tokenInfo names the capability token a server enforces.
type tokenInfo struct {
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
			"and knows its data directory only when the embedder names it (the crux command does).",
		Annotations: Annotations{Title: "Auth posture audit", ReadOnlyHint: true, IdempotentHint: true},
		Output: "{schema: crux.auth_posture_audit.v1, checked_at, mcp_agent, authenticated, tenant, rcx_router_configured, " +
			"token?{id, tier}, agent_passports_enabled, passport_revocation_enforced, receipt_signer_key_id, notes: [string], " +
			"recommended_checks: [string]}",
		schema: schemaFor(name),
		run: bind(name, func(ctx context.Context, env *Env, c Caller, _ *struct{}) (*Result, error) {
			p := authPosture{
				Schema: "crux.auth_posture_audit.v1", CheckedAt: env.now().Format(time.RFC3339Nano),
				MCPAgent: c.Name(), Authenticated: c.Identity() != "", Tenant: c.TenantID(),
				RCXRouterConfigured: env.Router != nil, AgentPassportsEnabled: env.Flags.AgentPassports,
				PassportRevocationEnforced: env.Flags.PassportRevocation,
				Notes: []string{
					"crux has no daemon: the CueCrux tool contract's daemon_loopback_configured does not apply",
					"crux does not know its data directory (the embedder owns the store; the crux command keeps it under --data), so data_dir_configured is not reported",
					"HTTP auth mode is not exposed: crux serves MCP over stdio, bound to the process's agent",
				},
				RecommendedChecks: []string{},
			}
			if env.DataDir != "" {
				p.Notes[1] = "the server's data directory is " + env.DataDir + " (context_custody_audit reports its permissions)"
			}
			if env.Signer != nil {
				p.ReceiptSignerKeyID = env.Signer.KeyID()
			}
			if env.Router != nil {
				info := env.Router.Info()
				p.Token = &tokenInfo{ID: info.TokenID, Tier: info.Tier}
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
