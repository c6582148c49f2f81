// Command crux serves crux's agent-memory tools to MCP clients over stdio
// or Streamable HTTP, runs single tool calls from the shell, and lets a
// person browse, verify and look after the store.
//
// Install it with
//
//	go install github.com/crux-go/crux/cmd/crux@latest
//
// Usage:
//
//	crux serve [--data DIR] [--agent NAME]
//	crux serve --http ADDR [--data DIR] [--tokens FILE] [--anonymous] [--allow-remote] [--stateless]
//	                 [--max-sessions N] [--max-caller-sessions N] [--max-caller-requests N]
//	                 [--ui-operator NAME[@TENANT]]... [--ui-trust-forwarded-proto]
//	crux token new [--tenant T] AGENT
//	crux tools [--data DIR] [--agent NAME] [--json]
//	crux call  [--data DIR] [--agent NAME] TOOL [JSON|-]
//	crux facts [--data DIR] [--agent NAME] [--entity E] [--query Q] [--limit N] [--json]
//	crux keys export, crux export receipt ID, crux verify receipt|chain|output|bundle ...
//	crux receipts list [--tenant T] [--kind K] [--limit N] [--json]
//	crux forgets list [--tenant T] [--limit N] [--json]
//	crux forget restore RECEIPT_ID, crux purge, crux doctor [--repair]
//	crux ingest [--data DIR] [--tenant T] FILE|DIR...
//	crux version [--json], crux --version
//	crux completion bash|zsh|fish|powershell
//	crux help [COMMAND...]
//
// crux help lists every command with its synopsis, and the environment
// variables, the token table and the exit statuses; crux help COMMAND, or
// crux COMMAND -h, explains one command and its flags. The command line
// is parsed by github.com/spf13/cobra: flags are GNU-style (--data DIR or
// --data=DIR) and may follow the arguments.
//
// serve speaks MCP on standard input and output until the client closes
// standard input or the process gets SIGINT or SIGTERM; either way it
// stops reading, answers every call it has read, and exits 0. A line that
// is not a well-formed JSON-RPC message is answered with -32700 or -32600
// and serving goes on. Logs go to standard error, at the level of
// --log-level (debug, info, warn or error), else $CRUX_LOG_LEVEL, else
// warn for serve, so that an MCP client's log holds only what needs
// attention, and info for the other commands. serve --http serves MCP
// over Streamable HTTP at http://ADDR/mcp instead, each request as the
// agent its bearer token maps to (--tokens FILE or $CRUX_AGENT_TOKENS; see
// crux help and package mcpserver), loopback only unless --allow-remote
// with tokens, until SIGINT or SIGTERM, answering every request in flight
// before it exits 0; it logs the URL it serves at every level but error.
// tools prints the tool catalogue. call runs one tool with the JSON
// arguments given (default {}; - reads them from standard input) and prints
// the MCP result object. facts, receipts list and forgets list print a
// table (JSON with --json), bounded by --limit, and say on standard error
// when more rows match.
//
// Exit status: 0 on success, including a tool result with isError; 1 for a
// tool call's protocol-level error (printed as
// {"error":{"code","message","data"}}) or any other failure (a receipt,
// chain or bundle that does not verify, problems doctor found, a store
// that cannot be opened); 2 for a usage error (an unknown command or flag,
// a wrong argument), printed on standard error with the help command to
// run.
//
// The data lives in DIR/crux.db, where DIR is --data, else $CRUX_DATA_DIR,
// else $XDG_DATA_HOME/crux, else ~/.local/share/crux. Any number of crux
// processes may use one data directory at once (several MCP clients each
// running crux serve, and crux call, verify, purge, ... beside them): the
// first to find no owner opens the store, and the others forward their
// calls to it over the Unix socket DIR/crux.sock (mode 0600), getting the
// answers it would give; when it exits, another takes over without a call
// failing (see package internal/owner). The caller is --agent, else
// $CRUX_AGENT: a named agent is authenticated (the process was started for
// it); without one, calls are anonymous. Feature flags are read from the
// environment: see `go doc github.com/crux-go/crux Flags`.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// gcPercent is the pace of the garbage collector when $GOGC is not set:
// a new cycle starts once the heap has grown by 400% of what the last one
// left live. A serving process keeps little live heap (the store is
// memory-mapped, not on the heap), and every call allocates, so Go's
// default of 100% spent about a quarter of crux serve's CPU time
// collecting; at 400% a call costs about 27% less CPU, and the process
// holds about 20 MB more (crux serve answering 16,000 calls over 10,000
// facts: 5.4 s of CPU against 7.4 s, 61 MB resident against 43 MB).
const gcPercent = 400

// setGC sets the collector's pace to gcPercent unless the environment
// sets GOGC, which the runtime has applied already.
func setGC(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}

func main() {
	setGC(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, a second one kills the process at once.
		<-ctx.Done()
		stop()
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Environ())
	stop()
	os.Exit(code)
}
