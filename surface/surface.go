package surface

import (
	"slices"
	"strconv"
)

// Tier is the tier a tool belongs to. The zero value is [Local], which is
// also the tier of every name the table does not list.
type Tier int

const (
	// Local tools run entirely on the caller's own installation and are
	// included in the free-local capability token. Every tool is Local
	// unless the table says otherwise.
	Local Tier = iota

	// HostedGated tools need a hosted platform. They stay in the static
	// catalogue, marked [MarkerHosted] and carrying the [Upgrade] object
	// that [Table.Upgrade] builds, but the free-local capability token never
	// grants their capability, so a server that enforces that token filters
	// them out of tools/list and refuses calls to them (JSON-RPC -32030).
	// To call one, the server must be configured with a capability router
	// whose token grants the tool's [Capability]. A server without a router
	// enforces no tier at all (the documented fail-open default); only the
	// tools' own checks then apply.
	//
	// The built-in hosted-gated tools are issue_passport, sync_pull and
	// sync_push; issue_passport is Local when agent passports are enabled.
	// [UpgradeDocs] points here.
	HostedGated
)

// String returns "local" or "hosted", the words of the tier markers.
func (t Tier) String() string {
	switch t {
	case Local:
		return "local"
	case HostedGated:
		return "hosted"
	default:
		return "Tier(" + strconv.Itoa(int(t)) + ")"
	}
}

// Entry is one row of the tier table.
type Entry struct {
	// Name is the MCP tool name.
	Name string
	// Group is the tool's group in the CueCrux tool contract, such as
	// "Facts" or "Scoped forget".
	Group string
	// Tier is the tool's tier with agent passports disabled.
	Tier Tier
	// PromotedByAgentPassports reports that the tool is [Local] when agent
	// passports are enabled, whatever Tier says. Only issue_passport has it.
	PromotedByAgentPassports bool
	// Affinity is what dynamic surface shaping ranks the tool by;
	// [AffinityNone] means the tool is never surfaced beyond the core floor.
	Affinity Affinity
}

// TierWith returns the entry's tier with agent passports enabled or not.
func (e Entry) TierWith(agentPassports bool) Tier {
	if agentPassports && e.PromotedByAgentPassports {
		return Local
	}
	return e.Tier
}

// table is the tier table: every tool of the CueCrux tool contract in
// catalogue order, the order tools/list serves them in. In that order
// memory_set_horizon and memory_reverify (group "Freshness and decay") sit
// after the two consolidation tools. Affinities are those the CueCrux tool
// contract assigns; tools it does not map have none.
//
// The table is never modified; accessors hand out copies.
var table = [...]Entry{
	{Name: "cuecrux_session", Group: "Session handshake", Affinity: AffinitySession},
	{Name: "autonomy_contract", Group: "Autonomy contract"},
	{Name: "reuse_check", Group: "Reuse check"},
	{Name: "engram_resolve", Group: "Engrams: pre-execution overlays"},
	{Name: "query", Group: "Retrieval", Affinity: AffinityRetrieval},
	{Name: "query_scan", Group: "Retrieval", Affinity: AffinityRetrieval},
	{Name: "query_expand", Group: "Retrieval", Affinity: AffinityRetrieval},
	{Name: "store_fact", Group: "Facts", Affinity: AffinityMemory},
	{Name: "query_facts", Group: "Facts", Affinity: AffinityMemory},
	{Name: "delete_fact", Group: "Facts", Affinity: AffinityMemory},
	{Name: "list_entities", Group: "Facts", Affinity: AffinityMemory},
	{Name: "get_bootstrap", Group: "Facts", Affinity: AffinityMemory},
	{Name: "fact_history", Group: "Facts", Affinity: AffinityMemory},
	{Name: "memory_acknowledge_use", Group: "Acknowledged memory use", Affinity: AffinityMemory},
	{Name: "output_attest", Group: "Verifiable output receipts", Affinity: AffinityProof},
	{Name: "memory_forget", Group: "Scoped forget", Affinity: AffinityMemory},
	{Name: "memory_forget_dry_run", Group: "Scoped forget", Affinity: AffinityMemory},
	{Name: "memory_view", Group: "Memory panel", Affinity: AffinityMemory},
	{Name: "memory_edit", Group: "Memory panel", Affinity: AffinityMemory},
	{Name: "memory_pin", Group: "Memory panel", Affinity: AffinityMemory},
	{Name: "memory_history", Group: "Memory panel", Affinity: AffinityMemory},
	{Name: "memory_freshness", Group: "Freshness and decay", Affinity: AffinityMemory},
	{Name: "memory_sweep_candidates", Group: "Freshness and decay", Affinity: AffinityMemory},
	{Name: "memory_contradictions", Group: "Contradiction surfacing and safe consolidation"},
	{Name: "memory_consolidate", Group: "Contradiction surfacing and safe consolidation"},
	{Name: "memory_set_horizon", Group: "Freshness and decay", Affinity: AffinityMemory},
	{Name: "memory_reverify", Group: "Freshness and decay", Affinity: AffinityMemory},
	{Name: "artefact_put", Group: "Artefacts: deferred output parking", Affinity: AffinityMemory},
	{Name: "artefact_get", Group: "Artefacts: deferred output parking", Affinity: AffinityMemory},
	{Name: "artefact_list", Group: "Artefacts: deferred output parking", Affinity: AffinityMemory},
	{Name: "get_session", Group: "Sessions", Affinity: AffinitySession},
	{Name: "save_session", Group: "Sessions", Affinity: AffinitySession},
	{Name: "session_checkpoint", Group: "Sessions"},
	{Name: "list_sessions", Group: "Sessions", Affinity: AffinitySession},
	{Name: "delete_session", Group: "Sessions", Affinity: AffinitySession},
	{Name: "archive_session", Group: "Sessions", Affinity: AffinitySession},
	{Name: "unarchive_session", Group: "Sessions", Affinity: AffinitySession},
	{Name: "route_access_matrix", Group: "Hardening and audit posture"},
	{Name: "execplan_gate", Group: "Hardening and audit posture"},
	{Name: "auth_posture_audit", Group: "Hardening and audit posture"},
	{Name: "egress_policy_check", Group: "Hardening and audit posture"},
	{Name: "get_gaps", Group: "Observability", Affinity: AffinityRetrieval},
	{Name: "list_observations", Group: "Session observations", Affinity: AffinityAudit},
	{Name: "get_observation", Group: "Session observations", Affinity: AffinityAudit},
	{Name: "verify_observation", Group: "Session observations", Affinity: AffinityAudit},
	{Name: "receipt_verify", Group: "Receipt verification", Affinity: AffinityProof},
	{Name: "get_agent_identity", Group: "Agent identity"},
	{Name: "resolve_principal", Group: "Agent identity"},
	{Name: "create_handoff", Group: "Handoff", Affinity: AffinitySession},
	{Name: "accept_handoff", Group: "Handoff", Affinity: AffinitySession},
	{Name: "record_decision", Group: "Decisions", Affinity: AffinityAudit},
	{Name: "declare_constraint", Group: "Constraints and action enrichment", Affinity: AffinityAudit},
	{Name: "get_constraints", Group: "Constraints and action enrichment", Affinity: AffinityAudit},
	{Name: "check_constraints", Group: "Constraints and action enrichment", Affinity: AffinityAudit},
	{Name: "audit_config", Group: "Constraints and action enrichment", Affinity: AffinityAudit},
	{Name: "check_config_audit", Group: "Constraints and action enrichment", Affinity: AffinityAudit},
	{Name: "enrich_action", Group: "Constraints and action enrichment"},
	{Name: "audit_export_bundle", Group: "BYO audit trail", Affinity: AffinityAudit},
	{Name: "issue_passport", Group: "Passport", Tier: HostedGated, PromotedByAgentPassports: true},
	{Name: "request_passport_mint", Group: "Passport"},
	{Name: "get_passport", Group: "Passport"},
	{Name: "revoke_passport", Group: "Passport"},
	{Name: "passport_split", Group: "Identity continuity"},
	{Name: "passport_merge", Group: "Identity continuity"},
	{Name: "passport_link_device", Group: "Identity continuity"},
	{Name: "sync_pull", Group: "Sync and update", Tier: HostedGated},
	{Name: "sync_push", Group: "Sync and update", Tier: HostedGated},
	{Name: "sync_status", Group: "Sync and update"},
	{Name: "update_status", Group: "Sync and update"},
	{Name: "context_custody_audit", Group: "Context-custody audit"},
}

// index maps a tool name to its position in table. Built once, never
// modified.
var index = func() map[string]int {
	m := make(map[string]int, len(table))
	for i, e := range table {
		m[e.Name] = i
	}
	return m
}()

// Lookup returns the table entry for name and whether there is one.
func Lookup(name string) (Entry, bool) {
	i, ok := index[name]
	if !ok {
		return Entry{}, false
	}
	return table[i], true
}

// Known reports whether name has an explicit entry in the table.
func Known(name string) bool {
	_, ok := index[name]
	return ok
}

// Entries returns a copy of the whole table in catalogue order.
func Entries() []Entry {
	return slices.Clone(table[:])
}

// Names returns the names of all table entries in catalogue order,
// cuecrux_session first.
func Names() []string {
	names := make([]string, len(table))
	for i, e := range table {
		names[i] = e.Name
	}
	return names
}

// Missing returns the names in names that have no explicit table entry, in
// their first-seen order and without duplicates, or nil when every name has
// one. A test of the tool registry calls it with every registered tool name
// so that a tool added without a tier entry fails the build.
func Missing(names []string) []string {
	var missing []string
	for _, n := range names {
		if !Known(n) && !slices.Contains(missing, n) {
			missing = append(missing, n)
		}
	}
	return missing
}

// Table is the tier table resolved for one server: with agent passports
// enabled or not, which moves issue_passport between the tiers. A server
// resolves it once, when it is created; the zero value is the table with
// agent passports disabled. A Table is a small value, safe to copy and to
// use concurrently.
type Table struct {
	agentPassports bool
}

// Resolve returns the tier table with agent passports enabled or not.
func Resolve(agentPassports bool) Table { return Table{agentPassports: agentPassports} }

// Tier returns the tier of the named tool. A name with no table entry is
// [Local]: a new tool never becomes hosted by accident.
func (t Table) Tier(name string) Tier {
	e, ok := Lookup(name)
	if !ok {
		return Local
	}
	return e.TierWith(t.agentPassports)
}

// IsLocal reports whether the named tool is [Local]; see [Table.Tier].
func (t Table) IsLocal(name string) bool { return t.Tier(name) == Local }

// LocalCapabilities returns the capability strings a token must grant for
// every local tool of the table to be callable: the [Capability] of each,
// de-duplicated, in catalogue order. request_passport_mint's is included
// only when mintRequests is set, because that tool exists only then.
// Hosted-gated tools are never included.
func (t Table) LocalCapabilities(mintRequests bool) []string {
	caps := make([]string, 0, len(table))
	seen := make(map[string]bool, len(table))
	for _, e := range table {
		if e.Name == "request_passport_mint" && !mintRequests || !t.IsLocal(e.Name) {
			continue
		}
		if c := Capability(e.Name); !seen[c] {
			seen[c] = true
			caps = append(caps, c)
		}
	}
	return caps
}
