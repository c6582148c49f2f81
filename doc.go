// Package crux gives AI agents a trustworthy memory through an MCP tool
// surface, embedded in a Go program.
//
// A program creates a [Server] over a store and calls [Server.ListTools] and
// [Server.CallTool] in-process; the crux command (cmd/crux) serves the same
// surface to any MCP client over stdio.
//
//	db, err := bolt.Open(filepath.Join(dir, "crux.db"), nil)
//	...
//	srv, err := crux.NewServer(db, nil)
//	...
//	caller := crux.Caller{Agent: "planner", Authenticated: true}
//	res, err := srv.CallTool(ctx, caller, "store_fact",
//		json.RawMessage(`{"entity":"project:crux","key":"language","value":"Go"}`))
//
// # Tools
//
// The tools are compatible with the CueCrux tool contract: the
// session handshake (cuecrux_session) and autonomy_contract; reuse_check;
// engram_resolve (overlays stored with [Server.PutEngram] or read from
// [Options].EngramDir);
// retrieval (query, query_scan, query_expand) over the documents
// [Server.Ingest] indexes per tenant; facts
// (store_fact, query_facts, delete_fact, list_entities, get_bootstrap,
// fact_history); acknowledged memory use; output_attest (a C2PA manifest
// binding an artefact to a signed receipt, package c2pa); scoped forget
// and its dry run; the
// memory panel (memory_view, memory_edit, memory_pin, memory_history);
// freshness and decay; contradictions and consolidation; sessions;
// artefacts; handoffs; hardening and get_gaps; session observations
// (list_observations, get_observation, verify_observation, recorded with
// [Server.Observe]); receipt_verify; identity
// (get_agent_identity, resolve_principal); passports (issue_passport,
// request_passport_mint, get_passport, revoke_passport); identity
// continuity for operator passports (passport_split, passport_merge,
// passport_link_device); decisions;
// constraints, config audit and action
// enrichment; audit_export_bundle; sync with a [Remote] (the hosted-tier
// sync_pull and sync_push, and sync_status; [Server.SyncChanges] and
// [Server.SyncPush] are the serving side, [ServerRemote] a remote in the
// same process); update_status; and context_custody_audit. Each description is
// prefixed with its tier marker ([local] or [hosted], package surface) and
// says only what is specific to its tool; the guidance every tool shares
// (open a session first, how answers are bounded, what each error code
// means) is [Instructions], which package mcpserver sends once, in the
// initialize result. Every declared parameter takes
// effect (query_facts' entity_prefix and key, get_bootstrap's
// token_budget included); an argument a tool does not declare is an
// error, never ignored, except turn_id and contract, which every tool
// accepts.
//
// # Typed outputs
//
// A result's StructuredContent is a Go value of the tool's output type,
// exported by package tools (tools.StoreFactOutput for store_fact,
// tools.QueryFactsOutput for query_facts, ...): [Decode] returns it, also
// for a result that came as JSON. Each tool's [Tool].OutputSchema, the
// outputSchema of tools/list, is derived from that type.
//
// # Hints
//
// Every tool carries all four MCP hints ([Annotations]). readOnlyHint is
// true for the tools whose only writes are crux's own bookkeeping: the gap
// record of a query that found nothing (query_facts, query), the reclaiming
// of expired sessions and artefacts (get_session, list_sessions,
// artefact_get, artefact_list), the tier a passport's receipts have earned
// (get_passport), so a client that asks approval for writes does not ask
// for them.
//
// # Errors
//
// A call fails in one of two ways. A protocol-level failure is an [*Error]
// carrying a JSON-RPC code: -32601 for an unknown tool, -32602 for a bad
// argument (the message names it: "query_facts: top_k: must be an
// integer"), -32603 for an internal failure. A tool that ran but could not
// do what was asked returns a [Result] with IsError set, whose text says why.
// A panicking tool becomes -32603; the server keeps running, and since every
// tool writes in one store transaction, nothing of the call is stored.
//
// # Agent loops
//
// A program that runs its own LLM tool-use loop (the Anthropic or OpenAI
// SDK, langchaingo, ...) hands the model [Server.ToolSpecs] (name,
// description and the input schema as ListTools shows it) and runs each
// call the model asks for with [Server.Dispatch]. Dispatch returns the
// text the model reads next and whether it is an error: an unknown tool,
// a bad argument (the JSON error object names it), a refusal by the
// capability token, missing standing or a conflict go back to the model,
// which can correct its call; only an internal failure, an invalid
// caller or a done context end the loop as a Go error. The module
// examples/agents has a loop for each of those three.
//
// # Trust
//
// Every receipt the server mints (a capability refusal, a session plan) is
// signed by [Options.Signer] (package receipts: Ed25519 over a CBOR body,
// BLAKE3-hashed, chained per tenant), stored in the same transaction as the
// change it attests, and verifiable offline with [Server.Keyring].
//
// With [Options.Router] (package rcx: a capability token and the router
// that decides each call by it), tools/list shows only what the token
// grants, annotated with the token, and a call it does not grant fails with
// -32030 "RCX capability denied: <reason_code>" before the tool runs; the
// error data carries the signed refusal receipt. Identical refusals of one
// caller within a minute share one stored receipt and are counted, so a
// caller looping on a refused tool cannot grow the store with every call
// (see package toolkit). Without a router every call
// is allowed (the server fails open), as [Server.Enforcing] reports. The
// crux command always enforces a free-local token signed with the key of
// its data directory. With Flags.PassportRevocation, a caller whose passport
// record is revoked may call only get_passport and get_agent_identity.
//
// # Forgetting
//
// memory_forget soft-deletes a scope of facts and mints a signed Forget
// receipt holding the BLAKE3 hash of each value. An agent forgets the facts
// it wrote; only an operator (a passport of earned tier trusted) forgets
// other agents' shared facts, and nobody forgets another agent's private
// ones. Until the recovery window
// (Flags.ForgetRecoveryWindowDays) ends, an operator can bring them back with
// [Server.RestoreForget]; after it, [Server.Purge] (which a server also
// runs once, before its first call) removes the values physically and
// compacts the store.
//
// # Memories in and out
//
// [Server.Export] writes a tenant's memories as JSON Lines (package memio
// has the format): every version of every fact chain, decisions included,
// the sessions, the constraints and the artefacts' metadata, an agent's
// private records only when the export is for that agent. [Server.Import]
// checks every line of such a file, or of the reference MCP memory
// server's JSONL file, before it writes anything, then writes the records
// in batches of one transaction and one signed memory_import receipt each,
// ids and version chains kept; a record the store holds already is
// unchanged, so importing twice changes nothing. [Server.ExportMemories]
// and [Server.ImportMemories] do the same a page or a batch at a time.
//
// # Tool surface
//
// Flags.ToolSurface narrows tools/list: minimal lists the core floor,
// dynamic the floor and the tools the intent the caller declared with
// cuecrux_session favours. A tool left out can still be called.
//
// # Limits
//
// The arguments of one call are at most 4 MiB of JSON nesting at most 64
// levels deep, any single string value at most 1 MiB and valid UTF-8, any
// number at most 64 characters and within the range of a float64, entity
// names, keys and session ids at most 1024 bytes without control
// characters. Entities starting with "__" are reserved for crux itself. A
// call over a limit is refused with -32602, whose message names the argument
// and the limit, and stores nothing. Tools have limits of their own (the
// size of an artefact, of a session's state, of a handoff package, the
// length of lists, ...): docs/limits.md lists every limit with the refusal
// it gives, and a test hits each at the limit and one past it.
//
// # Callers and tenants
//
// Every call names its [Caller]. Only an authenticated caller has an
// identity; private facts belong to it and no other caller sees them.
// Facts are partitioned by the caller's tenant. A tool that needs an
// identity (a passport, a private fact, a change to a memory) refuses an
// anonymous caller, and a named one no transport vouched for, with one
// answer: -32003, data {reason: "requires_identity", tool}.
//
// A caller with Replica set is a sync replica, not an agent: only it is
// served [Server.SyncIdentity], [Server.SyncChanges] and [Server.SyncPush]
// (an agent is refused with -32003, data.reason "replica_required"), and
// it is refused every tool. The versions it pushes are owned here by the
// replica, never by the agent they name, and are rejected when stored
// more than store.MaxSyncClockSkew past the server's clock or when they
// supersede a version the replica could not have been sent (see
// store.ApplySyncFacts).
//
// # Flags
//
// [Flags] holds every feature flag and setting of the CueCrux tool
// contract with its default (package feature defines them);
// [FlagsFromEnv] reads them from the environment with each flag's own
// parsing rule, and reports values and names that look like mistakes. The
// library never reads the environment by itself: pass the flags in
// [Options]. A server reads its flags once, when it is created.
//
// # Concurrency
//
// A Server is safe for concurrent use. Writes from concurrent calls are
// coalesced by the store (the bbolt backend commits them in groups, one
// fsync per group), and each call's writes form one transaction.
package crux
