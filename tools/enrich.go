package tools

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"lukechampine.com/blake3"

	"github.com/crux-go/crux/index"
	"github.com/crux-go/crux/internal/codec"
	"github.com/crux-go/crux/store"
)

// The action-enrichment engine behind enrich_action: a deterministic
// description of a proposed tool call, built from its name, parameters and
// description alone (and the tenant's relationship constraints), so the
// same input gives byte-identical output.

const (
	// enrichedActionSchema names the shape of an enrichedActionProposal.
	enrichedActionSchema = "crux.enriched_action_proposal.v1"
	// maxEnrichedItems caps affected_principals and affected_resources.
	maxEnrichedItems = 100
)

// ToolCall is the call an EnrichActionOutput describes.
type ToolCall struct {
	ToolName       string `json:"tool_name"`
	ToolParameters any    `json:"tool_parameters"`
}

// AffectedResource is a resource an action touches: kind is file, url or
// entity.
type AffectedResource struct {
	Kind  string `json:"kind"`
	Value string `json:"value"`
}

// StateDiff is what an action is expected to change.
type StateDiff struct {
	// Operations are the kinds of change, sorted: delete, execute, network,
	// read, write, or unknown.
	Operations       []string `json:"operations"`
	ResourcesTouched int      `json:"resources_touched"`
	Reversible       bool     `json:"reversible"`
}

// ConsequenceMetadata classifies an action's risk.
type ConsequenceMetadata struct {
	RiskLevel      string `json:"risk_level"` // low, medium, high or critical
	Destructive    bool   `json:"destructive"`
	Reversible     bool   `json:"reversible"`
	ExternalEgress bool   `json:"external_egress"`
	ExecutesCode   bool   `json:"executes_code"`
	Privileged     bool   `json:"privileged"`
	RequiresReview bool   `json:"requires_review"` // risk high or critical
}

// EnrichmentReceipt binds a proposal: Hash is the BLAKE3 hex of the
// proposal's canonical JSON (keys sorted, no insignificant space) without
// its enrichment_receipt.
type EnrichmentReceipt struct {
	Hash string `json:"hash"`
	Alg  string `json:"alg"`
}

// EnrichActionOutput is enrich_action's deterministic description of a
// proposed tool call.
type EnrichActionOutput struct {
	Schema              string              `json:"schema"`
	TenantID            string              `json:"tenant_id"`
	EnrichmentMode      string              `json:"enrichment_mode"`
	ToolCall            ToolCall            `json:"tool_call"`
	Narrative           string              `json:"narrative"`
	AffectedPrincipals  []string            `json:"affected_principals"`
	AffectedResources   []AffectedResource  `json:"affected_resources"`
	StateDiff           StateDiff           `json:"state_diff"`
	Consequences        []string            `json:"consequences"`
	RelationshipHits    []ConstraintMatch   `json:"relationship_hits"`
	ConsequenceMetadata ConsequenceMetadata `json:"consequence_metadata"`
	EnrichmentReceipt   EnrichmentReceipt   `json:"enrichment_receipt"`
}

var email = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$`)

// verbOps maps a verb (a tool-name word or a shell command) to the kind of
// operation it implies. It is never written after initialisation.
var verbOps = func() map[string]string {
	m := map[string]string{}
	for op, words := range map[string][]string{
		"delete":  {"delete", "remove", "rm", "rmdir", "drop", "truncate", "purge", "destroy", "forget", "unlink", "erase", "wipe", "shred", "kill", "revoke"},
		"write":   {"write", "edit", "create", "update", "put", "store", "set", "save", "insert", "mkdir", "mv", "cp", "move", "copy", "patch", "push", "commit", "append", "upsert", "declare", "record", "tee", "touch", "chmod", "chown", "install", "deploy", "merge", "apply", "archive", "accept"},
		"read":    {"read", "get", "list", "query", "search", "cat", "ls", "view", "find", "grep", "show", "head", "tail", "check", "history", "diff", "status", "resolve"},
		"network": {"curl", "wget", "ssh", "scp", "rsync", "fetch", "http", "request", "send", "upload", "download", "nc", "sync"},
	} {
		for _, w := range words {
			m[w] = op
		}
	}
	return m
}()

var (
	principalKeys = []string{"agent", "target_agent", "passport_id", "principal", "principal_id", "user", "owner",
		"assignee", "author", "actor", "email", "to", "recipient", "recipients", "by_passport", "reviewer"}
	fileKeys   = []string{"path", "file", "file_path", "filepath", "filename", "dir", "directory", "cwd", "target", "source", "destination", "notebook_path"}
	entityKeys = []string{"entity", "entity_id", "entity_prefix", "fact_id", "session_id", "artefact_id", "constraint_id", "handoff_id", "decision_id"}
)

// enrichment collects what enrich finds while walking the parameters.
type enrichment struct {
	principals map[string]bool
	resources  map[AffectedResource]bool
}

func (e *enrichment) token(s string) {
	switch {
	case strings.Contains(s, "://"):
		if u, err := url.Parse(s); err == nil && u.Scheme != "" && u.Host != "" {
			e.resources[AffectedResource{Kind: "url", Value: s}] = true
		}
	case strings.HasPrefix(s, "/") || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") || strings.HasPrefix(s, "~/"):
		e.resources[AffectedResource{Kind: "file", Value: s}] = true
	case email.MatchString(s):
		e.principals[s] = true
	}
}

func (e *enrichment) walk(key string, v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			e.walk(k, x)
		}
	case []any:
		for _, x := range v {
			e.walk(key, x)
		}
	case string:
		k := strings.ToLower(key)
		switch {
		case slices.Contains(principalKeys, k) && v != "":
			e.principals[v] = true
		case slices.Contains(fileKeys, k) && v != "" && !strings.Contains(v, "://"):
			e.resources[AffectedResource{Kind: "file", Value: v}] = true
		case slices.Contains(entityKeys, k) && v != "":
			e.resources[AffectedResource{Kind: "entity", Value: v}] = true
		default:
			if len(v) <= 4096 {
				for _, t := range strings.Fields(v) {
					e.token(strings.Trim(t, `"'(),;`))
				}
			}
		}
	}
}

// shellSplit separates the commands of a shell line.
var shellSplit = regexp.MustCompile(`&&|\|\||[;|\n]`)

// forceFlags make a delete forced or recursive, which makes it critical.
var forceFlags = []string{"-rf", "-fr", "--force", "-f", "--recursive", "-r", "-R"}

// shellEffects reads a shell command line: the operations its commands
// imply (git's subcommand counts too), whether any runs under sudo, and
// whether a delete is forced or recursive. Leading sudo and VAR=value
// words are skipped to find a command's verb.
func shellEffects(command string, ops map[string]bool) (privileged, forced bool) {
	for _, seg := range shellSplit.Split(command, -1) {
		f := strings.Fields(seg)
		for len(f) > 0 && (f[0] == "sudo" || strings.Contains(f[0], "=")) {
			privileged = privileged || f[0] == "sudo"
			f = f[1:]
		}
		if len(f) == 0 {
			continue
		}
		verb := f[0][strings.LastIndexByte(f[0], '/')+1:]
		if op, ok := verbOps[verb]; ok {
			ops[op] = true
		}
		if verb == "git" && len(f) > 1 {
			if op, ok := verbOps[f[1]]; ok {
				ops[op] = true
			}
		}
		if verbOps[verb] == "delete" && slices.ContainsFunc(f[1:], func(a string) bool { return slices.Contains(forceFlags, a) }) {
			forced = true
		}
	}
	return privileged, forced
}

// riskLevel classifies an action: a forced or privileged delete is
// critical, any other delete or privileged command high, a write, network
// access or execution medium, anything else low.
func riskLevel(meta ConsequenceMetadata, ops map[string]bool, forced bool) string {
	switch {
	case meta.Destructive && (forced || meta.Privileged):
		return "critical"
	case meta.Destructive || meta.Privileged:
		return "high"
	case ops["write"] || ops["network"] || ops["execute"]:
		return "medium"
	}
	return "low"
}

// consequenceRules are the consequences enrich states, in order, each
// with the test of when it applies.
var consequenceRules = []struct {
	applies func(m ConsequenceMetadata, ops map[string]bool) bool
	text    string
}{
	{func(m ConsequenceMetadata, _ map[string]bool) bool { return m.Destructive }, "deletes or removes data; this may not be reversible"},
	{func(m ConsequenceMetadata, _ map[string]bool) bool { return m.Privileged }, "runs with elevated privileges (sudo)"},
	{func(m ConsequenceMetadata, _ map[string]bool) bool { return m.ExecutesCode }, "executes a shell command"},
	{func(_ ConsequenceMetadata, ops map[string]bool) bool { return ops["write"] }, "changes stored state"},
	{func(m ConsequenceMetadata, _ map[string]bool) bool { return m.ExternalEgress }, "sends or fetches data over the network"},
	{func(_ ConsequenceMetadata, ops map[string]bool) bool { return ops["read"] && len(ops) == 1 }, "reads only; no state change expected"},
}

// sortedKeys returns m's keys sorted by cmp, at most limit of them, never
// nil.
func sortedKeys[K comparable](m map[K]bool, cmp func(a, b K) int, limit int) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, cmp)
	return out[:min(len(out), limit)]
}

// narrative is the proposal's one-paragraph description.
func narrative(description, toolName, command string, operations []string, risk string, resources, principals int) string {
	var b strings.Builder
	if d := strings.TrimSpace(description); d != "" {
		b.WriteString(strings.TrimRight(d, ".") + ". ")
	}
	fmt.Fprintf(&b, "Call %s", toolName)
	if command != "" {
		if len(command) > 200 {
			command = codec.CutUTF8(command, 200) + "…" // never cut a character in two
		}
		fmt.Fprintf(&b, " running %q", command)
	}
	fmt.Fprintf(&b, "; operations: %s; risk %s", strings.Join(operations, ", "), risk)
	if resources > 0 {
		fmt.Fprintf(&b, "; affects %d resource(s)", resources)
	}
	if principals > 0 {
		fmt.Fprintf(&b, " and %d principal(s)", principals)
	}
	b.WriteString(".")
	return b.String()
}

// enrich builds the proposal for a tool call. It depends only on its
// arguments, so it is deterministic.
func enrich(tenant, toolName string, params any, description string, cs []*store.Constraint) (*EnrichActionOutput, error) {
	e := &enrichment{principals: map[string]bool{}, resources: map[AffectedResource]bool{}}
	e.walk("", params)
	ops := map[string]bool{}
	for _, w := range index.LowerWords(toolName) {
		if op, ok := verbOps[w]; ok {
			ops[op] = true
		}
	}
	meta := ConsequenceMetadata{}
	command, forced := "", false
	if isShellTool(toolName) {
		command = shellCommand(toolName, params)
		ops["execute"], meta.ExecutesCode = true, true
		meta.Privileged, forced = shellEffects(command, ops)
	}
	for r := range e.resources {
		if r.Kind == "url" {
			ops["network"] = true
		}
	}
	resources := sortedKeys(e.resources, func(a, b AffectedResource) int {
		if a.Kind != b.Kind {
			return strings.Compare(a.Kind, b.Kind)
		}
		return strings.Compare(a.Value, b.Value)
	}, maxEnrichedItems)
	principals := sortedKeys(e.principals, strings.Compare, maxEnrichedItems)
	if len(ops) == 0 {
		ops["unknown"] = true
	}
	operations := sortedKeys(ops, strings.Compare, len(ops))

	meta.Destructive, meta.ExternalEgress = ops["delete"], ops["network"]
	meta.Reversible = !meta.Destructive
	meta.RiskLevel = riskLevel(meta, ops, forced)
	meta.RequiresReview = meta.RiskLevel == "high" || meta.RiskLevel == "critical"
	consequences := []string{}
	for _, r := range consequenceRules {
		if r.applies(meta, ops) {
			consequences = append(consequences, r.text)
		}
	}

	p := &EnrichActionOutput{
		Schema: enrichedActionSchema, TenantID: tenant, EnrichmentMode: "local",
		ToolCall:           ToolCall{ToolName: toolName, ToolParameters: params},
		Narrative:          narrative(description, toolName, command, operations, meta.RiskLevel, len(resources), len(principals)),
		AffectedPrincipals: principals, AffectedResources: resources,
		StateDiff:    StateDiff{Operations: operations, ResourcesTouched: len(resources), Reversible: meta.Reversible},
		Consequences: consequences, ConsequenceMetadata: meta,
	}
	var rel []*store.Constraint
	for _, c := range cs {
		if c.Type == store.ConstraintRelationship {
			rel = append(rel, c)
		}
	}
	words := newActionWords(append([]string{description, toolName, p.Narrative}, flatten(params, nil)...)...)
	p.RelationshipHits = matchConstraints(rel, words, toolName, params)
	if len(p.RelationshipHits) > 0 {
		p.Consequences = append(p.Consequences, fmt.Sprintf("touches %d declared relationship(s)", len(p.RelationshipHits)))
	}
	h, err := proposalHash(p)
	if err != nil {
		return nil, err
	}
	p.EnrichmentReceipt = EnrichmentReceipt{Hash: h, Alg: "blake3"}
	return p, nil
}

// proposalHash is the BLAKE3 hex of p's canonical JSON without its
// enrichment_receipt: encoding/json sorts map keys, so re-encoding the
// decoded object sorts every key.
func proposalHash(p *EnrichActionOutput) (string, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return "", err
	}
	delete(m, "enrichment_receipt")
	if b, err = json.Marshal(m); err != nil {
		return "", err
	}
	h := blake3.Sum256(b)
	return hex.EncodeToString(h[:]), nil
}
