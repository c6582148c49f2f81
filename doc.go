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
// The tools follow the contracts of the reference manual's chapter 12: the
// facts tools (store_fact, query_facts, delete_fact, list_entities,
// get_bootstrap, fact_history) and get_agent_identity. Each description is
// prefixed with its tier marker ([local] or [hosted], package surface) and
// ends with a hint to open a session first. Where the reference silently
// drops a parameter, crux honours it (query_facts' entity_prefix and key,
// get_bootstrap's token_budget); an argument a tool does not declare is an
// error, never ignored, except turn_id and contract, which every tool
// accepts.
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
// # Limits
//
// The arguments of one call are at most 4 MiB of JSON, any single string at
// most 1 MiB and valid UTF-8, entity names and keys at most 1024 bytes
// without control characters. Entities starting with "__" are reserved for
// crux itself.
//
// # Callers and tenants
//
// Every call names its [Caller]. Only an authenticated caller has an
// identity; private facts belong to it and no other caller sees them.
// Facts are partitioned by the caller's tenant.
//
// # Flags
//
// [Flags] holds every feature flag and setting of the reference manual with
// its documented default; [FlagsFromEnv] reads them from the environment
// with each flag's own parsing rule. The library never reads the
// environment by itself: pass the flags in [Options].
//
// # Concurrency
//
// A Server is safe for concurrent use. Writes from concurrent calls are
// coalesced by the store (the bbolt backend commits them in groups, one
// fsync per group), and each call's writes form one transaction.
package crux
