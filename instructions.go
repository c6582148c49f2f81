package crux

import "github.com/crux-go/crux/surface"

// instructions is the guidance every tool shares; see Instructions.
const instructions = "crux is a memory for agents: facts, sessions, documents and signed receipts. " +
	"Guidance for every tool:\n" +
	"- Call " + surface.SessionTool + " first, with your intent: its signed plan lists the tools you may call " +
	"here, in which mode and tier, and those you may not, with why. Plan from it instead of discovering limits " +
	"by failing.\n" +
	"- Facts are values under (entity, key). A write is a new version that supersedes the previous one; " +
	"fact_history keeps every version. Private facts are visible to their writer alone; entities starting " +
	"with __ are crux's own.\n" +
	"- Answers are bounded: lists are capped and say count and truncated; token_budget (a token is about 4 " +
	"bytes of JSON) trims rows but always keeps the first; histories come a page at a time: pass next_cursor " +
	"back as cursor, with the same other arguments.\n" +
	"- Errors: a bad argument is named with the rule it breaks (-32602): fix it and call again, nothing was " +
	"written. -32030: refused by the capability token (data.refusal_receipt: its signed receipt) or a guard " +
	"(data says which); -32601 an unknown tool or one switched off; -32003: you lack the identity, tier or " +
	"ownership it needs (data.reason); -32004 a conflict with what is stored. isError: the tool ran and failed.\n" +
	"- Anonymous callers have no private scope and no passport: tools needing an identity refuse them (-32003 " +
	"requires_identity).\n" +
	"- \"Flag X\" in a description: the tool works while the operator turns CORECRUXD_FEATURE_X on (X itself when " +
	"written in full); off, it says so: feature_enabled false or one of the errors above.\n" +
	"- Unknown arguments are refused (-32602); turn_id and contract are accepted by every tool. tenant_id defaults " +
	"to yours. A tool that changes a fact by fact_id takes its current version only (-32004 otherwise).\n" +
	"- Over MCP each outputSchema is {type: object}; get_bootstrap topic tool-output names each tool's fields.\n" +
	"- Read-only tools may keep crux's own bookkeeping: a query that finds nothing is recorded for get_gaps, " +
	"and expired sessions and artefacts are reclaimed.\n" +
	"- Every receipt is Ed25519-signed and chained per tenant; `crux verify receipt` checks one offline. With " +
	"CORECRUXD_FEATURE_AUDIT_ENVELOPE on, answers that draw on facts carry an audit envelope.\n" +
	"- get_bootstrap serves crux's documentation, what each error means, and every tool's output contract."

// Instructions returns the guidance that applies to every tool, for the
// instructions an MCP server sends in its initialize result (mcpserver
// sends it by default): call cuecrux_session first, how facts are
// versioned, how answers are bounded, what each error code means, and
// what read-only tools may still record. Tool descriptions carry only
// what is specific to each tool, so that tools/list does not repeat this
// once per tool.
func Instructions() string { return instructions }
