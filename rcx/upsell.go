package rcx

// The five metered service scopes, the only capabilities whose refusal
// carries an [UpgradeHint]. They are not MCP tools; they gate
// platform-side compute. Local BM25, graph and dense search are never
// scoped.
const (
	// ScopeDenseRerank: reranking of fused results.
	ScopeDenseRerank = "crux-mcp.dense_rerank"
	// ScopeDenseManaged: hosted embeddings.
	ScopeDenseManaged = "crux-mcp.dense_managed"
	// ScopeExtractEntities: LLM entity extraction.
	ScopeExtractEntities = "crux-mcp.extract_entities"
	// ScopeExtractRelations: LLM relation extraction.
	ScopeExtractRelations = "crux-mcp.extract_relations"
	// ScopeExtractFacts: LLM fact distillation.
	ScopeExtractFacts = "crux-mcp.extract_facts"
)

// UpgradeHintKind is the kind of every [UpgradeHint].
const UpgradeHintKind = "upgrade_available"

// UpgradeHint is the upgrade_hint of a -32030 error's data for a refused
// metered service scope: what the scope unlocks and on which tier.
type UpgradeHint struct {
	// Kind is [UpgradeHintKind].
	Kind string `json:"kind"`
	// Capability is the refused scope.
	Capability string `json:"capability"`
	// Tier is the tier that grants it: "pro" for all five.
	Tier string `json:"tier"`
	// Unlocks says what the scope unlocks.
	Unlocks string `json:"unlocks"`
	// Metering says what is metered.
	Metering string `json:"metering"`
	// StillFree says what stays free.
	StillFree string `json:"still_free"`
	// Deploy says how the service can be deployed.
	Deploy string `json:"deploy"`
}

// MeteredScopes returns the five metered service scopes.
func MeteredScopes() []string {
	return []string{ScopeDenseRerank, ScopeDenseManaged, ScopeExtractEntities, ScopeExtractRelations, ScopeExtractFacts}
}

// UpgradeHintFor returns the upgrade hint for capability, or nil when it is
// not one of the five metered service scopes. A refused tool (sync_pull,
// say) gets no hint: a refusal says it was refused and sells nothing.
//
// The fields and their meaning are those of the CueCrux tool contract; the
// wording names no vendor and no hosted service.
func UpgradeHintFor(capability string) *UpgradeHint {
	var unlocks string
	switch capability {
	case ScopeDenseRerank:
		unlocks = "reranked results (bge-reranker-v2-m3) over your fused matches"
	case ScopeDenseManaged:
		unlocks = "hosted BGE-M3 embeddings for your ingested data"
	case ScopeExtractEntities:
		unlocks = "LLM entity extraction that populates your knowledge graph"
	case ScopeExtractRelations:
		unlocks = "LLM relation extraction that links entities in your graph"
	case ScopeExtractFacts:
		unlocks = "LLM fact distillation from your ingested data"
	default:
		return nil
	}
	return &UpgradeHint{
		Kind:       UpgradeHintKind,
		Capability: capability,
		Tier:       string(TierPro),
		Unlocks:    unlocks,
		Metering:   "metered on platform-side compute only",
		StillFree:  "local BM25, graph and dense search remain fully available, uncapped",
		Deploy:     "available managed or in-boundary",
	}
}
