package surface_test

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/surface"
)

// contractTool is one row of the tool tables of the CueCrux tool contract: the
// line where the tool's definition starts in the contract's source (which
// fixes catalogue order), its name, its group, and its tier marker with
// agent passports off.
type contractTool struct {
	line    int
	name    string
	section string
	marker  string
}

// contractTools lists the 70 tools of the CueCrux tool contract in the order its
// tables present them. Catalogue (emission) order is the order of their
// definition lines.
var contractTools = []contractTool{
	{163, "cuecrux_session", "Session handshake", "[local]"},
	{169, "autonomy_contract", "Autonomy contract", "[local]"},
	{175, "reuse_check", "Reuse check", "[local]"},
	{199, "engram_resolve", "Engrams: pre-execution overlays", "[local]"},
	{223, "query", "Retrieval", "[local]"},
	{245, "query_scan", "Retrieval", "[local]"},
	{264, "query_expand", "Retrieval", "[local]"},
	{286, "store_fact", "Facts", "[local]"},
	{317, "query_facts", "Facts", "[local]"},
	{347, "delete_fact", "Facts", "[local]"},
	{361, "list_entities", "Facts", "[local]"},
	{372, "get_bootstrap", "Facts", "[local]"},
	{398, "fact_history", "Facts", "[local]"},
	{416, "memory_acknowledge_use", "Acknowledged memory use", "[local]"},
	{453, "output_attest", "Verifiable output receipts", "[local]"},
	{480, "memory_forget", "Scoped forget", "[local]"},
	{514, "memory_forget_dry_run", "Scoped forget", "[local]"},
	{539, "memory_view", "Memory panel", "[local]"},
	{562, "memory_edit", "Memory panel", "[local]"},
	{584, "memory_pin", "Memory panel", "[local]"},
	{604, "memory_history", "Memory panel", "[local]"},
	{625, "memory_freshness", "Freshness and decay", "[local]"},
	{647, "memory_sweep_candidates", "Freshness and decay", "[local]"},
	{723, "memory_set_horizon", "Freshness and decay", "[local]"},
	{743, "memory_reverify", "Freshness and decay", "[local]"},
	{671, "memory_contradictions", "Contradiction surfacing and safe consolidation", "[local]"},
	{693, "memory_consolidate", "Contradiction surfacing and safe consolidation", "[local]"},
	{763, "artefact_put", "Artefacts: deferred output parking", "[local]"},
	{787, "artefact_get", "Artefacts: deferred output parking", "[local]"},
	{807, "artefact_list", "Artefacts: deferred output parking", "[local]"},
	{829, "get_session", "Sessions", "[local]"},
	{845, "save_session", "Sessions", "[local]"},
	{881, "session_checkpoint", "Sessions", "[local]"},
	{907, "list_sessions", "Sessions", "[local]"},
	{918, "delete_session", "Sessions", "[local]"},
	{932, "archive_session", "Sessions", "[local]"},
	{947, "unarchive_session", "Sessions", "[local]"},
	{961, "route_access_matrix", "Hardening and audit posture", "[local]"},
	{971, "execplan_gate", "Hardening and audit posture", "[local]"},
	{993, "auth_posture_audit", "Hardening and audit posture", "[local]"},
	{1003, "egress_policy_check", "Hardening and audit posture", "[local]"},
	{1023, "get_gaps", "Observability", "[local]"},
	{1041, "list_observations", "Session observations", "[local]"},
	{1063, "get_observation", "Session observations", "[local]"},
	{1078, "verify_observation", "Session observations", "[local]"},
	{1097, "receipt_verify", "Receipt verification", "[local]"},
	{1121, "get_agent_identity", "Agent identity", "[local]"},
	{1132, "resolve_principal", "Agent identity", "[local]"},
	{1138, "create_handoff", "Handoff", "[local]"},
	{1170, "accept_handoff", "Handoff", "[local]"},
	{1187, "record_decision", "Decisions", "[local]"},
	{1215, "declare_constraint", "Constraints and action enrichment", "[local]"},
	{1247, "get_constraints", "Constraints and action enrichment", "[local]"},
	{1274, "check_constraints", "Constraints and action enrichment", "[local]"},
	{1309, "audit_config", "Constraints and action enrichment", "[local]"},
	{1349, "check_config_audit", "Constraints and action enrichment", "[local]"},
	{1383, "enrich_action", "Constraints and action enrichment", "[local]"},
	{1420, "audit_export_bundle", "BYO audit trail", "[local]"},
	{1455, "issue_passport", "Passport", "[hosted]"},
	{1476, "request_passport_mint", "Passport", "[local]"},
	{1502, "get_passport", "Passport", "[local]"},
	{1515, "revoke_passport", "Passport", "[local]"},
	{1544, "passport_split", "Identity continuity", "[local]"},
	{1585, "passport_merge", "Identity continuity", "[local]"},
	{1634, "passport_link_device", "Identity continuity", "[local]"},
	{1673, "sync_pull", "Sync and update", "[hosted]"},
	{1695, "sync_push", "Sync and update", "[hosted]"},
	{1717, "sync_status", "Sync and update", "[local]"},
	{1730, "update_status", "Sync and update", "[local]"},
	{1747, "context_custody_audit", "Context-custody audit", "[local]"},
}

// catalogueOrder returns contractTools sorted by definition line.
func catalogueOrder() []contractTool {
	rows := slices.Clone(contractTools)
	slices.SortFunc(rows, func(a, b contractTool) int { return cmp.Compare(a.line, b.line) })
	return rows
}

func TestTableMatchesContract(t *testing.T) {
	want := catalogueOrder()
	require.Len(t, want, 70, "the contract table embedded in this test")

	entries := surface.Entries()
	require.Len(t, entries, 70)
	names := surface.Names()
	require.Len(t, names, 70)

	seen := map[string]bool{}
	for i, e := range entries {
		assert.False(t, seen[e.Name], "duplicate entry %q", e.Name)
		seen[e.Name] = true
		assert.Equal(t, want[i].name, e.Name, "entry %d", i)
		assert.Equal(t, want[i].section, e.Group, "group of %s", e.Name)
		assert.Equal(t, e.Name, names[i], "Names()[%d]", i)
		assert.True(t, surface.Known(e.Name), "Known(%q)", e.Name)

		got, ok := surface.Lookup(e.Name)
		assert.True(t, ok, "Lookup(%q)", e.Name)
		assert.Equal(t, e, got, "Lookup(%q)", e.Name)
	}
	assert.Equal(t, "cuecrux_session", names[0])
}

func TestContractSurfaceColumn(t *testing.T) {
	for _, row := range contractTools {
		assert.Equal(t, row.marker, surface.Resolve(false).Marker(row.name), "Marker(%q, false)", row.name)
	}
}

func TestExactlyThreeHosted(t *testing.T) {
	hosted := func(agentPassports bool) []string {
		var out []string
		for _, n := range surface.Names() {
			if !surface.Resolve(agentPassports).IsLocal(n) {
				out = append(out, n)
			}
		}
		return out
	}
	assert.Equal(t, []string{"issue_passport", "sync_pull", "sync_push"}, hosted(false))
	assert.Equal(t, []string{"sync_pull", "sync_push"}, hosted(true))

	var base, promoted []string
	for _, e := range surface.Entries() {
		if e.Tier == surface.HostedGated {
			base = append(base, e.Name)
		}
		if e.PromotedByAgentPassports {
			promoted = append(promoted, e.Name)
		}
	}
	assert.Equal(t, []string{"issue_passport", "sync_pull", "sync_push"}, base)
	assert.Equal(t, []string{"issue_passport"}, promoted)
}

func TestTableTier(t *testing.T) {
	tests := []struct {
		name           string
		agentPassports bool
		want           surface.Tier
	}{
		{"issue_passport", false, surface.HostedGated},
		{"issue_passport", true, surface.Local},
		{"sync_pull", false, surface.HostedGated},
		{"sync_pull", true, surface.HostedGated},
		{"sync_push", false, surface.HostedGated},
		{"sync_push", true, surface.HostedGated},
		{"sync_status", false, surface.Local},
		{"get_passport", true, surface.Local},
		{"request_passport_mint", false, surface.Local},
		{"cuecrux_session", false, surface.Local},
		{"context_custody_audit", true, surface.Local},
		// Names without an entry default to Local.
		{"list_projects", false, surface.Local},
		{"no_such_tool", true, surface.Local},
		{"", false, surface.Local},
		{"SYNC_PULL", false, surface.Local},
	}
	for _, tt := range tests {
		got := surface.Resolve(tt.agentPassports).Tier(tt.name)
		assert.Equal(t, tt.want, got, "TierOf(%q, %v)", tt.name, tt.agentPassports)
		assert.Equal(t, tt.want == surface.Local, surface.Resolve(tt.agentPassports).IsLocal(tt.name),
			"IsLocal(%q, %v)", tt.name, tt.agentPassports)
	}
}

func TestUnknownNames(t *testing.T) {
	for _, name := range []string{"list_projects", "no_such_tool", "", "Query"} {
		assert.False(t, surface.Known(name), "Known(%q)", name)
		_, ok := surface.Lookup(name)
		assert.False(t, ok, "Lookup(%q)", name)
		assert.Equal(t, surface.MarkerLocal, surface.Resolve(false).Marker(name), "Marker(%q)", name)
		_, ok = surface.Resolve(false).Upgrade(name)
		assert.False(t, ok, "UpgradeFor(%q)", name)
		assert.Equal(t, surface.AffinityNone, surface.AffinityOf(name), "AffinityOf(%q)", name)
	}
}

func TestTierString(t *testing.T) {
	assert.Equal(t, "local", surface.Local.String())
	assert.Equal(t, "hosted", surface.HostedGated.String())
	assert.Equal(t, "Tier(7)", surface.Tier(7).String())
	assert.Equal(t, surface.Local, surface.Tier(0), "the zero Tier is Local")
}

func TestMarker(t *testing.T) {
	tests := []struct {
		name           string
		agentPassports bool
		want           string
	}{
		{"store_fact", false, "[local]"},
		{"issue_passport", false, "[hosted]"},
		{"issue_passport", true, "[local]"},
		{"sync_pull", true, "[hosted]"},
		{"sync_push", false, "[hosted]"},
		{"unknown_tool", false, "[local]"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, surface.Resolve(tt.agentPassports).Marker(tt.name),
			"Marker(%q, %v)", tt.name, tt.agentPassports)
	}
}

func TestDecorate(t *testing.T) {
	tests := []struct {
		label          string
		name           string
		desc           string
		agentPassports bool
		want           string
	}{
		{"local tool", "store_fact", "Store a fact.", false, "[local] Store a fact."},
		{"hosted tool", "sync_pull", "Pull.", false, "[hosted] Pull."},
		{"hosted stays hosted", "sync_push", "Push.", true, "[hosted] Push."},
		{"issue_passport hosted", "issue_passport", "Issue.", false, "[hosted] Issue."},
		{"issue_passport promoted", "issue_passport", "Issue.", true, "[local] Issue."},
		{"session tool", "cuecrux_session", "Open a session.", false, "[local] Open a session."},
		{"unknown tool is local", "custom_tool", "Custom.", false, "[local] Custom."},
		{"marker kept", "store_fact", "[local] Store.", false, "[local] Store."},
		{"marker kept without space", "store_fact", "[local]Store.", false, "[local]Store."},
		{"wrong marker replaced", "issue_passport", "[hosted] Issue.", true, "[local] Issue."},
		{"wrong marker replaced on hosted", "sync_pull", "[local] Pull.", false, "[hosted] Pull."},
		{"no hint appended", "store_fact", "Store.", false, "[local] Store."},
		{"empty description", "store_fact", "", false, "[local]"},
		{"empty session description", "cuecrux_session", "", false, "[local]"},
	}
	for _, tt := range tests {
		t.Run(tt.label, func(t *testing.T) {
			got := surface.Resolve(tt.agentPassports).Decorate(tt.name, tt.desc)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, got, surface.Resolve(tt.agentPassports).Decorate(tt.name, got), "not idempotent")
		})
	}
}

func TestDecorateIdempotentForEveryTool(t *testing.T) {
	for _, name := range surface.Names() {
		for _, agentPassports := range []bool{false, true} {
			once := surface.Resolve(agentPassports).Decorate(name, "Does things.")
			twice := surface.Resolve(agentPassports).Decorate(name, once)
			require.Equal(t, once, twice, "Decorate(%q, %v) twice", name, agentPassports)
			assert.True(t, strings.HasPrefix(once, surface.Resolve(agentPassports).Marker(name)+" "), "marker of %q", name)
			assert.Equal(t, surface.Resolve(agentPassports).Marker(name)+" Does things.", once, "only the marker is added to %q", name)
			assert.Equal(t, 1, strings.Count(once, "[local]")+strings.Count(once, "[hosted]"), "markers in %q", once)
		}
	}
}

func TestSessionTool(t *testing.T) {
	assert.Equal(t, "cuecrux_session", surface.SessionTool)
}

func TestTableUpgrade(t *testing.T) {
	hosted := surface.Upgrade{
		PlatformAvailable: true,
		Requires:          "rcx_capability_token",
		Docs:              "https://pkg.go.dev/github.com/crux-go/crux/surface#HostedGated",
	}
	tests := []struct {
		name           string
		agentPassports bool
		want           surface.Upgrade
		wantOK         bool
	}{
		{"sync_pull", false, hosted, true},
		{"sync_pull", true, hosted, true},
		{"sync_push", true, hosted, true},
		{"issue_passport", false, hosted, true},
		{"issue_passport", true, surface.Upgrade{}, false},
		{"store_fact", false, surface.Upgrade{}, false},
		{"cuecrux_session", true, surface.Upgrade{}, false},
	}
	for _, tt := range tests {
		got, ok := surface.Resolve(tt.agentPassports).Upgrade(tt.name)
		assert.Equal(t, tt.wantOK, ok, "UpgradeFor(%q, %v)", tt.name, tt.agentPassports)
		assert.Equal(t, tt.want, got, "UpgradeFor(%q, %v)", tt.name, tt.agentPassports)
	}

	// Only hosted tools get one.
	for _, name := range surface.Names() {
		_, ok := surface.Resolve(false).Upgrade(name)
		assert.Equal(t, !surface.Resolve(false).IsLocal(name), ok, "UpgradeFor(%q, false)", name)
	}

	b, err := json.Marshal(hosted)
	require.NoError(t, err)
	assert.JSONEq(t, `{"platform_available":true,"requires":"rcx_capability_token",`+
		`"docs":"https://pkg.go.dev/github.com/crux-go/crux/surface#HostedGated"}`, string(b))
	assert.NotContains(t, surface.UpgradeDocs, "cuecrux.com")
}

func TestCapability(t *testing.T) {
	tests := []struct{ name, want string }{
		{"query", "corecrux.query.local"},
		{"query_scan", "corecrux.query.local"},
		{"query_expand", "corecrux.query.local"},
		{"query_facts", "crux-mcp.query_facts"},
		{"store_fact", "crux-mcp.store_fact"},
		{"sync_pull", "crux-mcp.sync_pull"},
		{"cuecrux_session", "crux-mcp.cuecrux_session"},
		{"unknown_tool", "crux-mcp.unknown_tool"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, surface.Capability(tt.name), "Capability(%q)", tt.name)
	}
}

func TestCoreFloor(t *testing.T) {
	want := []string{
		"cuecrux_session", "query", "query_scan", "query_expand", "store_fact",
		"query_facts", "get_bootstrap", "memory_view", "save_session", "get_session",
		"get_agent_identity", "get_passport", "receipt_verify", "sync_status",
		"create_handoff", "accept_handoff",
	}
	floor := surface.CoreFloor()
	assert.Equal(t, want, floor)
	for _, name := range floor {
		assert.True(t, surface.Known(name), "floor tool %q has no entry", name)
		assert.True(t, surface.Resolve(false).IsLocal(name), "floor tool %q is not local", name)
	}
	for _, name := range surface.Names() {
		assert.Equal(t, slices.Contains(want, name), surface.InCoreFloor(name), "InCoreFloor(%q)", name)
	}
	assert.False(t, surface.InCoreFloor("no_such_tool"))
}

// contractAffinities is the tool → affinity mapping of the CueCrux tool
// contract, restricted to its 70 tools. Every other tool has none.
var contractAffinities = map[surface.Affinity][]string{
	surface.AffinityRetrieval: {"query", "query_scan", "query_expand", "get_gaps"},
	surface.AffinityMemory: {
		"store_fact", "query_facts", "delete_fact", "fact_history", "get_bootstrap",
		"list_entities", "memory_view", "memory_edit", "memory_pin", "memory_history",
		"memory_freshness", "memory_forget", "memory_forget_dry_run",
		"memory_sweep_candidates", "memory_set_horizon", "memory_reverify",
		"memory_acknowledge_use", "artefact_put", "artefact_get", "artefact_list",
	},
	surface.AffinitySession: {
		"save_session", "get_session", "list_sessions", "delete_session",
		"archive_session", "unarchive_session", "cuecrux_session",
		"create_handoff", "accept_handoff",
	},
	surface.AffinityAudit: {
		"audit_config", "check_config_audit", "audit_export_bundle", "record_decision",
		"declare_constraint", "get_constraints", "check_constraints",
		"list_observations", "get_observation", "verify_observation",
	},
	surface.AffinityProof: {"receipt_verify", "output_attest"},
}

func TestAffinities(t *testing.T) {
	want := map[string]surface.Affinity{}
	for a, names := range contractAffinities {
		for _, n := range names {
			require.True(t, surface.Known(n), "contract tool %q", n)
			want[n] = a
		}
	}
	for _, e := range surface.Entries() {
		assert.Equal(t, want[e.Name], e.Affinity, "affinity of %s", e.Name)
		assert.Equal(t, e.Affinity, surface.AffinityOf(e.Name), "AffinityOf(%q)", e.Name)
	}
}

func TestIntents(t *testing.T) {
	type biases = map[surface.Affinity]int
	want := map[surface.Intent]biases{
		"audit_review":      {"audit": 30, "proof": 20, "retrieval": 10},
		"document_ingest":   {"memory": 30, "journal": 20, "retrieval": 10},
		"session_review":    {"session": 30, "memory": 20, "journal": 10},
		"compliance_export": {"audit": 30, "proof": 25, "economy": 10},
		"knowledge_query":   {"retrieval": 30, "memory": 20, "session": 5},
	}
	intents := surface.Intents()
	assert.Equal(t, []surface.Intent{
		surface.IntentAuditReview, surface.IntentDocumentIngest, surface.IntentSessionReview,
		surface.IntentComplianceExport, surface.IntentKnowledgeQuery,
	}, intents)
	require.Len(t, intents, len(want))

	all := []surface.Affinity{
		surface.AffinityNone, surface.AffinityRetrieval, surface.AffinityMemory,
		surface.AffinitySession, surface.AffinityAudit, surface.AffinityProof,
		surface.AffinityJournal, surface.AffinityEconomy,
	}
	for _, in := range intents {
		got := biases{}
		prev := 1 << 30
		for _, b := range in.Biases() {
			got[b.Affinity] = b.Weight
			assert.LessOrEqual(t, b.Weight, prev, "%s biases not strongest first", in)
			prev = b.Weight
		}
		assert.Equal(t, want[in], got, "%s.Biases()", in)
		for _, a := range all {
			assert.Equal(t, want[in][a], in.Bias(a), "%s.Bias(%q)", in, a)
		}
	}

	unknown := surface.Intent("refactor")
	assert.Nil(t, unknown.Biases())
	assert.Zero(t, unknown.Bias(surface.AffinityMemory))

	// A tool's score is the bias its affinity gets.
	assert.Equal(t, 30, surface.IntentKnowledgeQuery.Bias(surface.AffinityOf("query")))
	assert.Zero(t, surface.IntentKnowledgeQuery.Bias(surface.AffinityOf("sync_pull")))
}

func TestParseIntent(t *testing.T) {
	tests := []struct {
		in     string
		want   surface.Intent
		wantOK bool
	}{
		{"knowledge_query", surface.IntentKnowledgeQuery, true},
		{"  Audit_Review\n", surface.IntentAuditReview, true},
		{"COMPLIANCE_EXPORT", surface.IntentComplianceExport, true},
		{"", "", false},
		{"   ", "", false},
		{"knowledge query", "", false},
	}
	for _, tt := range tests {
		got, ok := surface.ParseIntent(tt.in)
		assert.Equal(t, tt.wantOK, ok, "ParseIntent(%q)", tt.in)
		if tt.wantOK {
			assert.Equal(t, tt.want, got, "ParseIntent(%q)", tt.in)
		}
	}
}

func TestShapingConstants(t *testing.T) {
	assert.Equal(t, 12, surface.DynamicTopN)
	assert.Equal(t, time.Hour, surface.IntentTTL)
}

func TestMissing(t *testing.T) {
	assert.Nil(t, surface.Missing(surface.Names()))
	assert.Nil(t, surface.Missing(nil))
	assert.Equal(t, []string{"list_projects", "new_tool"},
		surface.Missing([]string{"query", "list_projects", "new_tool", "store_fact", "list_projects"}))
}

func TestAccessorsReturnCopies(t *testing.T) {
	names := surface.Names()
	names[0] = "mutated"
	entries := surface.Entries()
	entries[0].Name = "mutated"
	entries[58].Tier = surface.Local
	floor := surface.CoreFloor()
	floor[0] = "mutated"

	assert.Equal(t, "cuecrux_session", surface.Names()[0])
	assert.Equal(t, "cuecrux_session", surface.Entries()[0].Name)
	assert.Equal(t, "cuecrux_session", surface.CoreFloor()[0])
	assert.Equal(t, surface.HostedGated, surface.Resolve(false).Tier("issue_passport"))
}

func TestShape(t *testing.T) {
	names := surface.Names()
	assert.Equal(t, names, surface.Shape(surface.ModeFull, names, ""))
	assert.Equal(t, names, surface.Shape("weird", names, surface.IntentAuditReview))

	minimal := surface.Shape(surface.ModeMinimal, names, surface.IntentAuditReview)
	assert.Equal(t, surface.CoreFloor(), minimal, "all 70 tools hold the whole floor")
	assert.Equal(t, []string{"store_fact", "query_facts", "get_agent_identity"},
		surface.Shape(surface.ModeMinimal, []string{"get_agent_identity", "delete_fact", "query_facts", "store_fact"}, ""), "floor order, present tools only")

	assert.Equal(t, surface.CoreFloor(), surface.Shape(surface.ModeDynamic, names, ""), "no intent: the floor only")
	dyn := surface.Shape(surface.ModeDynamic, names, surface.IntentAuditReview)
	require.Len(t, dyn, len(surface.CoreFloor())+surface.DynamicTopN)
	extra := dyn[len(surface.CoreFloor()):]
	for _, n := range extra {
		assert.False(t, surface.InCoreFloor(n), n)
		assert.Positive(t, surface.IntentAuditReview.Bias(surface.AffinityOf(n)), n)
	}
	// Audit tools (bias 30) come before proof tools (20).
	assert.Equal(t, surface.AffinityAudit, surface.AffinityOf(extra[0]))
	assert.Equal(t, []string{"store_fact", "query_facts", "get_agent_identity", "delete_fact", "list_entities"},
		surface.Shape(surface.ModeDynamic, []string{"store_fact", "query_facts", "delete_fact", "get_agent_identity", "list_entities"}, surface.IntentSessionReview),
		"floor first; then memory tools (bias 20) in catalogue order")
}

func TestLocalCapabilities(t *testing.T) {
	hosted := []string{"crux-mcp.issue_passport", "crux-mcp.sync_pull", "crux-mcp.sync_push"}
	tests := []struct {
		name                         string
		agentPassports, mintRequests bool
		has, hasNot                  []string
	}{
		{"defaults", false, false,
			[]string{"crux-mcp.store_fact", "corecrux.query.local", "crux-mcp.cuecrux_session", "crux-mcp.sync_status"},
			append([]string{"crux-mcp.request_passport_mint", "crux-mcp.query"}, hosted...)},
		{"agent passports", true, false,
			[]string{"crux-mcp.issue_passport"},
			[]string{"crux-mcp.sync_pull", "crux-mcp.sync_push", "crux-mcp.request_passport_mint"}},
		{"mint requests", false, true,
			[]string{"crux-mcp.request_passport_mint"},
			hosted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := surface.Resolve(tt.agentPassports)
			caps := tab.LocalCapabilities(tt.mintRequests)
			for _, c := range tt.has {
				assert.Contains(t, caps, c)
			}
			for _, c := range tt.hasNot {
				assert.NotContains(t, caps, c)
			}
			// Every local tool of the table is covered, once.
			for _, name := range surface.Names() {
				if name == "request_passport_mint" && !tt.mintRequests {
					continue
				}
				if tab.IsLocal(name) {
					assert.Contains(t, caps, surface.Capability(name), name)
				}
			}
			assert.Equal(t, len(caps), len(slices.Compact(slices.Sorted(slices.Values(caps)))), "no duplicates")
		})
	}
}
