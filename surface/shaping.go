package surface

import (
	"slices"
	"strings"
	"time"
)

// Affinity is the kind of work a tool serves, which dynamic surface shaping
// matches against the caller's intent.
type Affinity string

// The affinities. Journal and economy carry intent biases but no built-in
// tool has them.
const (
	// AffinityNone: the tool is never surfaced beyond the core floor.
	AffinityNone Affinity = ""
	// AffinityRetrieval: document retrieval and coverage gaps.
	AffinityRetrieval Affinity = "retrieval"
	// AffinityMemory: facts, the memory panel, freshness, forgetting and
	// artefacts.
	AffinityMemory Affinity = "memory"
	// AffinitySession: sessions, the handshake and handoffs.
	AffinitySession Affinity = "session"
	// AffinityAudit: decisions, constraints, config audit, observations
	// and audit export.
	AffinityAudit Affinity = "audit"
	// AffinityProof: receipt verification and output attestation.
	AffinityProof Affinity = "proof"
	// AffinityJournal is biased by some intents; no built-in tool has it.
	AffinityJournal Affinity = "journal"
	// AffinityEconomy is biased by some intents; no built-in tool has it.
	AffinityEconomy Affinity = "economy"
)

// AffinityOf returns the named tool's affinity, or [AffinityNone] for a
// tool without one or without a table entry.
func AffinityOf(name string) Affinity {
	e, _ := Lookup(name)
	return e.Affinity
}

// Intent is one of the five cuecrux_session intents that carry weight in
// dynamic surface shaping. Any other intent text is accepted by
// cuecrux_session but shapes nothing.
type Intent string

// The five intents, in the CueCrux tool contract's order.
const (
	// IntentAuditReview favours audit, then proof, then retrieval tools.
	IntentAuditReview Intent = "audit_review"
	// IntentDocumentIngest favours memory, then journal, then retrieval.
	IntentDocumentIngest Intent = "document_ingest"
	// IntentSessionReview favours session, then memory, then journal.
	IntentSessionReview Intent = "session_review"
	// IntentComplianceExport favours audit, then proof, then economy.
	IntentComplianceExport Intent = "compliance_export"
	// IntentKnowledgeQuery favours retrieval, then memory, then session.
	IntentKnowledgeQuery Intent = "knowledge_query"
)

// Intents returns the five intents that carry weight, in table order.
func Intents() []Intent {
	return []Intent{
		IntentAuditReview,
		IntentDocumentIngest,
		IntentSessionReview,
		IntentComplianceExport,
		IntentKnowledgeQuery,
	}
}

// ParseIntent maps free intent text, as passed to cuecrux_session, to one
// of the five intents. Surrounding space and letter case are ignored. It
// returns false for any other text, including blank text.
func ParseIntent(s string) (Intent, bool) {
	i := Intent(strings.ToLower(strings.TrimSpace(s)))
	return i, i.Biases() != nil
}

// Bias is the score an intent gives every tool of one affinity.
type Bias struct {
	// Affinity is the affinity the bias applies to.
	Affinity Affinity
	// Weight is the score each tool of that affinity gets.
	Weight int
}

// Biases returns the intent's affinity biases, strongest first, or nil when
// the intent is not one of the five.
func (i Intent) Biases() []Bias {
	switch i {
	case IntentAuditReview:
		return []Bias{{AffinityAudit, 30}, {AffinityProof, 20}, {AffinityRetrieval, 10}}
	case IntentDocumentIngest:
		return []Bias{{AffinityMemory, 30}, {AffinityJournal, 20}, {AffinityRetrieval, 10}}
	case IntentSessionReview:
		return []Bias{{AffinitySession, 30}, {AffinityMemory, 20}, {AffinityJournal, 10}}
	case IntentComplianceExport:
		return []Bias{{AffinityAudit, 30}, {AffinityProof, 25}, {AffinityEconomy, 10}}
	case IntentKnowledgeQuery:
		return []Bias{{AffinityRetrieval, 30}, {AffinityMemory, 20}, {AffinitySession, 5}}
	}
	return nil
}

// Bias returns the weight the intent gives affinity a: 0 when the intent
// does not bias it, when a is [AffinityNone], or when the intent is not one
// of the five.
func (i Intent) Bias(a Affinity) int {
	if a == AffinityNone {
		return 0
	}
	for _, b := range i.Biases() {
		if b.Affinity == a {
			return b.Weight
		}
	}
	return 0
}

// Dynamic surface shaping parameters.
const (
	// DynamicTopN is how many non-floor tools dynamic mode lists at most:
	// those with a positive score, best first, ties in catalogue order.
	DynamicTopN = 12

	// IntentTTL is how long an intent recorded by cuecrux_session keeps
	// shaping the caller's tools/list.
	IntentTTL = time.Hour
)

// coreFloor is the core floor, in order. Never modified.
var coreFloor = [...]string{
	"cuecrux_session",
	"query",
	"query_scan",
	"query_expand",
	"store_fact",
	"query_facts",
	"get_bootstrap",
	"memory_view",
	"save_session",
	"get_session",
	"get_agent_identity",
	"get_passport",
	"receipt_verify",
	"sync_status",
	"create_handoff",
	"accept_handoff",
}

// CoreFloor returns the 16 tools that minimal and dynamic surface modes
// always list, first and in this order. The slice is the caller's.
func CoreFloor() []string {
	return slices.Clone(coreFloor[:])
}

// InCoreFloor reports whether the named tool is in [CoreFloor].
func InCoreFloor(name string) bool {
	return slices.Contains(coreFloor[:], name)
}

// The tool surface modes of CORECRUXD_TOOL_SURFACE.
const (
	ModeFull    = "full"    // every tool
	ModeMinimal = "minimal" // the core floor only
	ModeDynamic = "dynamic" // the core floor, then the tools the caller's intent favours
)

// Shape narrows a tool list (names, in catalogue order) for a surface mode.
// Full, and any unknown mode, returns names unchanged. Minimal returns the
// core-floor tools present in names, in floor order. Dynamic returns those
// and then up to DynamicTopN other tools of names whose affinity the intent
// biases, strongest first (ties in catalogue order); with no intent, only
// the floor. Shaping only narrows what is listed: a tool shaped out can still
// be called by name.
func Shape(mode string, names []string, intent Intent) []string {
	if mode != ModeMinimal && mode != ModeDynamic {
		return names
	}
	present := make(map[string]bool, len(names))
	for _, n := range names {
		present[n] = true
	}
	var out []string
	for _, n := range coreFloor {
		if present[n] {
			out = append(out, n)
		}
	}
	if mode == ModeMinimal {
		return out
	}
	type scored struct {
		name  string
		score int
	}
	var cands []scored
	for _, n := range names {
		if s := intent.Bias(AffinityOf(n)); s > 0 && !InCoreFloor(n) {
			cands = append(cands, scored{n, s})
		}
	}
	slices.SortStableFunc(cands, func(a, b scored) int { return b.score - a.score })
	for i := 0; i < len(cands) && i < DynamicTopN; i++ {
		out = append(out, cands[i].name)
	}
	return out
}
