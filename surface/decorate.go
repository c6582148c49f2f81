package surface

import "strings"

// Tier markers, the first word of every description tools/list serves.
const (
	// MarkerLocal marks a [Local] tool.
	MarkerLocal = "[local]"
	// MarkerHosted marks a [HostedGated] tool.
	MarkerHosted = "[hosted]"
)

// SessionTool is the name of the session handshake tool, which agents
// call first.
const SessionTool = "cuecrux_session"

// Marker returns the tier marker of the named tool: [MarkerHosted] for a
// [HostedGated] tool, [MarkerLocal] otherwise (including unknown names).
func (t Table) Marker(name string) string {
	if t.Tier(name) == HostedGated {
		return MarkerHosted
	}
	return MarkerLocal
}

// Decorate returns the description tools/list serves for the named tool.
//
// It puts the tool's tier marker and a space in front of description. A
// description that already starts with the right marker keeps it; one
// that starts with the other tier's marker (for example one decorated
// before agent passports were enabled) has it replaced, so a description
// never contradicts the tool's tier. Decorate is therefore idempotent:
// decorating a decorated description returns it unchanged.
//
// The guidance every tool shares (call cuecrux_session first, ...) is not
// repeated in each description: an MCP server states it once, in its
// initialize instructions (crux.Instructions).
func (t Table) Decorate(name, description string) string {
	marker := t.Marker(name)
	other := MarkerLocal
	if marker == MarkerLocal {
		other = MarkerHosted
	}

	d := description
	switch {
	case strings.HasPrefix(d, marker):
	case strings.HasPrefix(d, other):
		d = marker + d[len(other):]
	case d == "":
		d = marker
	default:
		d = marker + " " + d
	}
	return d
}

// Values of the [Upgrade] object.
const (
	// UpgradeRequires is what a hosted-gated tool requires: a capability
	// token that grants it.
	UpgradeRequires = "rcx_capability_token"

	// DocsBase is the base of crux's documentation links: this package's
	// documentation on pkg.go.dev, followed by an identifier anchor: crux
	// links to its own documentation, which it can keep true, and to no
	// hosted platform's pages.
	DocsBase = "https://pkg.go.dev/github.com/crux-go/crux/surface#"

	// UpgradeDocs is the docs link of every [Upgrade]: the documentation
	// of [HostedGated], which says what a hosted-gated tool needs before it
	// can be called. pkg.go.dev anchors identifiers only, so there is one
	// link for all hosted tools rather than one per tool.
	UpgradeDocs = DocsBase + "HostedGated"
)

// Upgrade is the object served at _meta.crux.upgrade for a hosted-gated
// tool: a signpost saying that the tool exists, what it requires, and where
// to read more.
type Upgrade struct {
	// PlatformAvailable is always true: the tool exists on the hosted tier.
	PlatformAvailable bool `json:"platform_available"`
	// Requires is [UpgradeRequires].
	Requires string `json:"requires"`
	// Docs is [UpgradeDocs].
	Docs string `json:"docs"`
}

// Upgrade returns the _meta.crux.upgrade object of the named tool, and
// false (with a zero Upgrade) when the tool is [Local] and gets none.
func (t Table) Upgrade(name string) (Upgrade, bool) {
	if t.Tier(name) != HostedGated {
		return Upgrade{}, false
	}
	return Upgrade{PlatformAvailable: true, Requires: UpgradeRequires, Docs: UpgradeDocs}, true
}

// Capability strings.
const (
	// CapabilityPrefix prefixes a tool name to form its capability.
	CapabilityPrefix = "crux-mcp."
	// QueryCapability is the one capability shared by query, query_scan
	// and query_expand.
	QueryCapability = "corecrux.query.local"
)

// Capability returns the RCX capability string a call to the named tool is
// checked against: [QueryCapability] for query, query_scan and
// query_expand, and [CapabilityPrefix] + name for every other name, known
// or not.
func Capability(name string) string {
	switch name {
	case "query", "query_scan", "query_expand":
		return QueryCapability
	}
	return CapabilityPrefix + name
}
