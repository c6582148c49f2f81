// Package surface is crux's tool-surface table: which tier each built-in
// MCP tool belongs to, how its description is marked in tools/list, the
// _meta.crux.upgrade object attached to hosted tools, the RCX capability
// string each tool is checked against, and the data that dynamic surface
// shaping ranks tools by.
//
// The package is a leaf. It knows nothing of MCP, storage or tokens; the
// tools package and the crux server read it. Everything here is a pure
// function of its arguments and safe for concurrent use.
//
// # Tiers
//
// There are two tiers, [Local] and [HostedGated]. Exactly three of the
// built-in tools are hosted-gated: issue_passport, sync_pull and sync_push.
// issue_passport moves to [Local] when agent passports are enabled
// (Flags.AgentPassports, environment variable CORECRUXD_AGENT_PASSPORTS); it
// is the only tool whose tier depends on a flag. sync_pull and sync_push
// never move.
//
// The table (see [Entries]) has an explicit entry for every one of the 70
// tools of the CueCrux tool contract, in catalogue order. [Missing] lets a
// test elsewhere fail when a registered tool has no entry, so the table
// cannot silently go partial. A name that is not in the table is
// nevertheless treated as [Local]: an unlisted tool can never become paid
// by accident, so the table fails in the user's favour.
//
// Tiers are a product-honesty property, not a security boundary. Hosted
// tools stay listed, marked [MarkerHosted] and carrying an [Upgrade] object,
// so an agent can see why it cannot call them. Whether a call is refused is
// decided by the capability router the server is configured with; a server
// without a router enforces nothing (the documented fail-open default).
//
// # Descriptions
//
// [Decorate] turns a tool's plain description into the one tools/list
// serves: the tier marker ([MarkerLocal] or [MarkerHosted]) first, then the
// description. Decorate is idempotent.
//
// # Capabilities
//
// [Capability] names the RCX capability a tool is checked against:
// "crux-mcp.<name>", except that query, query_scan and query_expand share
// [QueryCapability], as in the CueCrux tool contract, so a grant of one is a
// grant of all three.
//
// # Surface shaping
//
// [CoreFloor], [Intents], [Intent.Bias], [AffinityOf], [DynamicTopN] and
// [IntentTTL] are the inputs of the "minimal" and "dynamic" tools/list
// modes: the floor is always listed first; in dynamic mode each other tool
// scores the bias the caller's last cuecrux_session intent (recorded within
// [IntentTTL]) gives its affinity, and the best [DynamicTopN] with a
// positive score are appended after the floor.
// Shaping only narrows what is listed; a shaped-out tool can still be called
// by name.
package surface
