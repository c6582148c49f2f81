package tools_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/tools"
)

// hint is the MCP behaviour hints a tool must carry, and why.
type hint struct {
	readOnly, destructive, idempotent, openWorld bool
	why                                          string
}

// Shorthands for the table: ro is a read-only tool (idempotent: a repeat
// answers the same), w a write.
var (
	ro = hint{readOnly: true, idempotent: true}
	w  = hint{}
)

func (h hint) because(why string) hint { h.why = why; return h }
func (h hint) idem() hint              { h.idempotent = true; return h }
func (h hint) destroys() hint          { h.destructive = true; return h }
func (h hint) open() hint              { h.openWorld = true; return h }

// wantHints holds one row per tool: the hints tools/list must show and the
// reason for them. A tool whose only writes are crux's own bookkeeping is
// read-only (see toolkit.Annotations).
var wantHints = map[string]hint{
	"cuecrux_session":         w.because("stores a signed plan receipt and the declared intent, which shapes the dynamic surface; each call a new plan"),
	"autonomy_contract":       ro.because("reads the token and the tier table"),
	"reuse_check":             ro.because("ranks documents and the catalogue"),
	"engram_resolve":          ro.because("reads engrams"),
	"query":                   ro.because("its only write is the gap record of a low-coverage query"),
	"query_scan":              ro.because("ranks segments"),
	"query_expand":            ro.because("reads segments"),
	"store_fact":              w.because("each call writes a new version; what it supersedes stays in history"),
	"query_facts":             ro.because("its only write is the gap record of a keyword query that finds nothing"),
	"delete_fact":             w.destroys().idem().because("the fact leaves every read; deleting it again changes nothing"),
	"list_entities":           ro.because("reads the entity index"),
	"get_bootstrap":           ro.because("reads crux's own knowledge"),
	"fact_history":            ro.because("reads version chains"),
	"memory_acknowledge_use":  w.because("each call mints a memory_use receipt"),
	"memory_forget":           w.destroys().because("the scope's facts leave every read, then are purged; each call mints a receipt"),
	"memory_forget_dry_run":   ro.because("previews a forget"),
	"memory_view":             ro.because("reads facts and pins"),
	"memory_edit":             w.because("writes a new version; the old one stays in history"),
	"memory_pin":              w.idem().because("sets a pin of the caller; pinning twice is the same pin"),
	"memory_history":          ro.because("reads version chains"),
	"memory_freshness":        ro.because("reads decay state"),
	"memory_sweep_candidates": ro.because("lists candidates; dry_run is always true"),
	"memory_contradictions":   ro.because("detects and never resolves"),
	"memory_consolidate":      w.destroys().because("several live facts leave current reads for one canonical value; a used consolidation_id is refused"),
	"memory_set_horizon":      w.idem().because("sets the class in place; the same class twice is the same state"),
	"memory_reverify":         w.because("each call mints a reverify receipt and restarts the clock"),
	"artefact_put":            w.idem().because("content addressed: the same bytes are the same artefact"),
	"artefact_get":            ro.because("its only write reclaims an expired artefact"),
	"artefact_list":           ro.because("its only write reclaims expired artefacts"),
	"get_session":             ro.because("its only write reclaims an expired session"),
	"save_session":            w.idem().because("replaces the state with the same state"),
	"session_checkpoint":      w.idem().because("replaces the state with the same checkpoint"),
	"list_sessions":           ro.because("its only write reclaims expired sessions"),
	"delete_session":          w.destroys().idem().because("gone for good; deleting it again changes nothing"),
	"archive_session":         w.idem().because("reversible; archiving twice is the same state"),
	"unarchive_session":       w.idem().because("unarchiving twice is the same state"),
	"route_access_matrix":     ro.because("describes the transports"),
	"execplan_gate":           w.because("each call writes a new version of the gate fact"),
	"auth_posture_audit":      ro.because("describes the server"),
	"egress_policy_check":     ro.because("parses a URL; contacts nothing"),
	"get_gaps":                ro.because("reads gap records"),
	"list_observations":       ro.because("reads observations"),
	"get_observation":         ro.because("reads an observation"),
	"verify_observation":      ro.because("checks a signature"),
	"receipt_verify":          ro.because("checks a receipt offline"),
	"get_agent_identity":      ro.because("reports the caller"),
	"resolve_principal":       ro.because("reads records"),
	"create_handoff":          w.because("each call signs and stores a new package"),
	"accept_handoff":          w.idem().because("a package is accepted once; a repeat is refused and changes nothing"),
	"record_decision":         w.because("append-only: each call a new decision and receipt"),
	"declare_constraint":      w.because("each call a new constraint and receipt"),
	"get_constraints":         ro.because("reads constraints"),
	"check_constraints":       ro.because("matches an action; writes nothing"),
	"audit_config":            w.because("each call writes a new version of the audit record and mints a receipt"),
	"check_config_audit":      ro.because("reads audit records"),
	"enrich_action":           ro.because("deterministic; stores no receipt"),
	"issue_passport":          w.idem().because("an existing passport is returned unchanged"),
	"request_passport_mint":   w.idem().because("a pending request is returned unchanged"),
	"get_passport":            ro.because("its only write records a tier the receipts have earned"),
	"revoke_passport":         w.destroys().idem().because("terminal; a repeat is refused and changes nothing"),
	"passport_split":          w.because("each call creates a passport and copies facts"),
	"passport_merge":          w.destroys().because("the source passport is retired for good"),
	"passport_link_device":    w.because("each call mints a receipt, relinking included"),
	"sync_pull":               w.open().because("writes the remote's versions here, read from another replica"),
	"sync_push":               w.open().because("writes this store's versions to another replica"),
	"sync_status":             ro.because("reads the sync state this store keeps; the remote is not contacted"),
	"output_attest":           w.because("mints an output_attest receipt; each call signs a new manifest"),
	"audit_export_bundle":     w.because("writes a bundle file and mints an audit_export receipt; each call a new one"),
	"update_status":           ro.because("reads build information and a checkout's .git; no network call"),
	"context_custody_audit":   ro.because("scores the server's runtime state"),
}

// TestHints: every tool carries the hints of its row, and every row names
// a tool.
func TestHints(t *testing.T) {
	seen := map[string]bool{}
	for _, tl := range tools.All(nil) {
		want, ok := wantHints[tl.Name]
		if !assert.True(t, ok, "%s has no row in wantHints", tl.Name) {
			continue
		}
		seen[tl.Name] = true
		require.NotEmpty(t, want.why, tl.Name)
		a := tl.Annotations
		got := hint{readOnly: a.ReadOnlyHint, destructive: a.DestructiveHint, idempotent: a.IdempotentHint, openWorld: a.OpenWorldHint, why: want.why}
		assert.Equal(t, want, got, "%s: %s", tl.Name, want.why)
		assert.False(t, a.ReadOnlyHint && a.DestructiveHint, "%s: read-only and destructive", tl.Name)
	}
	for name := range wantHints {
		assert.True(t, seen[name], "wantHints names %s, which is not a tool", name)
	}
}
