package tools

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"time"

	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// Hardening and audit posture: route_access_matrix, execplan_gate and
// auth_posture_audit.
//
// Decisions taken where the CueCrux tool contract is silent:
//
//   - route_access_matrix describes the transport that carried the call,
//     as the transport reports it in the caller (Caller.Transport): MCP over
//     stdio, whose methods are initialize, tools/list and tools/call, or
//     over Streamable HTTP, whose routes are POST (those methods), GET (the
//     session's stream) and DELETE (the session's end) of its endpoint,
//     with what it asks of a request (a bearer token, or none). A call
//     without a transport (in-process) gets the stdio routes of the crux
//     command. It invents no other routes.
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

func routeAccessMatrix() *toolkit.Tool {
	const name = "route_access_matrix"
	return &toolkit.Tool{
		Name:        name,
		Description: "The routes of this transport, what each requires, and whether a token is enforced.",
		Annotations: toolkit.Annotations{Title: "Route access matrix", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[RouteAccessMatrixOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, _ *struct{}) (*toolkit.Result, error) {
			enforcing := env.Router != nil
			return toolkit.JSONResult(RouteAccessMatrixOutput{Enforcing: enforcing, Routes: transportRoutes(c, enforcing)})
		}),
	}
}

// RouteAccessMatrixOutput is what route_access_matrix returns.
type RouteAccessMatrixOutput struct {
	Enforcing bool          `json:"enforcing"`
	Routes    []RouteAccess `json:"routes"`
}

// ExecplanGateOutput is what execplan_gate returns: the gate fact written.
type ExecplanGateOutput struct {
	CommitSHA string `json:"commit_sha"`
	Entity    string `json:"entity"`
	FactID    string `json:"fact_id"`
	Key       string `json:"key"`
	Status    string `json:"status"`
	Version   uint32 `json:"version"`
}

type execplanGateArgs struct {
	Slug         string   `json:"slug" schema:"minLength=1"`
	Milestone    string   `json:"milestone" schema:"minLength=1" doc:"M2 or gate:M2."`
	Status       string   `json:"status" schema:"enum=passed|failed|blocked|skipped"`
	CommitSHA    string   `json:"commit_sha" schema:"minLength=1"`
	TokenBudget  int      `json:"token_budget" schema:"minimum=1"`
	TestsPassing *bool    `json:"tests_passing,omitempty"`
	Artifacts    []string `json:"artifacts,omitempty" schema:"maxItems=256"`
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

func execplanGate() *toolkit.Tool {
	const name = "execplan_gate"
	return &toolkit.Tool{
		Name:        name,
		Description: "Record a plan's milestone gate as the fact execplan:<slug> gate:<milestone>; again, a new version.",
		Annotations: toolkit.Annotations{Title: "ExecPlan gate"},
		Out:         toolkit.OutputOf[ExecplanGateOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *execplanGateArgs) (*toolkit.Result, error) {
			slug := strings.TrimSpace(in.Slug)
			switch {
			case slug == "":
				return nil, toolkit.InvalidParams(name, "slug", "must not be empty")
			case strings.HasPrefix(slug, execplanPrefix):
				return nil, toolkit.InvalidParams(name, "slug", "give the slug without the execplan: prefix")
			}
			milestone := strings.TrimPrefix(strings.TrimSpace(in.Milestone), execplanGatePrefix)
			if milestone == "" {
				return nil, toolkit.InvalidParams(name, "milestone", "must name a milestone, such as M2 or gate:M2")
			}
			if !commitSHA.MatchString(in.CommitSHA) {
				return nil, toolkit.InvalidParams(name, "commit_sha", "must be 7 to 64 hexadecimal digits")
			}
			if err := checkPrefixedName(name, "slug", execplanPrefix, slug); err != nil {
				return nil, err
			}
			if err := checkPrefixedName(name, "milestone", execplanGatePrefix, milestone); err != nil {
				return nil, err
			}
			entity, key := execplanPrefix+slug, execplanGatePrefix+milestone
			now := env.Time()
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
			return toolkit.JSONResult(ExecplanGateOutput{
				FactID: f.ID, Entity: f.Entity, Key: f.Key, Version: f.Version,
				CommitSHA: rec.CommitSHA, Status: rec.Status,
			})
		}),
	}
}

// AuthPostureAuditOutput is what auth_posture_audit reports.
type AuthPostureAuditOutput struct {
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

func (d *Deps) authPostureAudit() *toolkit.Tool {
	const name = "auth_posture_audit"
	return &toolkit.Tool{
		Name:        name,
		Description: "How this server authenticates and authorises calls: caller, token, passports, revocation, key.",
		Annotations: toolkit.Annotations{Title: "Auth posture audit", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[AuthPostureAuditOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, _ *struct{}) (*toolkit.Result, error) {
			p := AuthPostureAuditOutput{
				Schema: "crux.auth_posture_audit.v1", CheckedAt: env.Time().Format(time.RFC3339Nano),
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
			if d.DataDir != "" {
				p.Notes[1] = "the server's data directory is " + d.DataDir + " (context_custody_audit reports its permissions)"
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
			return toolkit.JSONResult(p)
		}),
	}
}
