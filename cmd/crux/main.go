// Command crux serves crux's agent-memory tools to MCP clients over stdio
// and runs single tool calls from the shell.
//
// Usage:
//
//	crux serve [--data DIR] [--agent NAME]
//	crux serve --http ADDR [--data DIR] [--tokens FILE] [--anonymous] [--allow-remote] [--stateless]
//	crux token new [--tenant T] AGENT
//	crux tools [--data DIR] [--agent NAME] [--json]
//	crux call  [--data DIR] [--agent NAME] TOOL [JSON|-]
//	crux doctor [--data DIR] [--repair]
//	crux ingest [--data DIR] [--tenant T] FILE|DIR...
//	crux help
//
// serve speaks MCP on standard input and output until the client closes
// standard input or the process gets SIGINT or SIGTERM; either way it
// stops reading, answers every call it has read, and exits 0. A line that
// is not a well-formed JSON-RPC message is answered with -32700 or -32600
// and serving goes on. Logs go to standard error. serve --http serves MCP
// over Streamable HTTP at http://ADDR/mcp instead, each request as the
// agent its bearer token maps to (--tokens FILE or $CRUX_AGENT_TOKENS; see
// crux help and package mcpserver), loopback only unless --allow-remote
// with tokens, until SIGINT or SIGTERM, answering every request in flight
// before it exits 0. token new makes a bearer token and its table entry.
// tools prints the tool catalogue. call runs one tool with the JSON
// arguments given (default {}; - reads them from standard input) and prints
// the MCP result object; a protocol-level error is printed as
// {"error":{"code","message","data"}} and exits with status 1. doctor
// lists the records of the store that cannot be read, by bucket and key,
// and with --repair removes the unreadable facts and the index entries
// naming them; it exits with status 1 while problems remain. ingest indexes
// text, Markdown and JSONL files as documents for the retrieval tools. A usage error
// exits with status 2. crux help lists every command.
//
// The data lives in DIR/crux.db, where DIR is --data, else $CRUX_DATA_DIR,
// else $XDG_DATA_HOME/crux, else ~/.local/share/crux. Any number of crux
// processes may use one data directory at once (several MCP clients each
// running crux serve, and crux call, verify, purge, ... beside them): the
// first to find no owner opens the store, and the others forward their
// calls to it over the Unix socket DIR/crux.sock (mode 0600), getting the
// answers it would give; when it exits, another takes over without a call
// failing (see package internal/owner). The caller is --agent, else
// $CRUX_AGENT: a named agent is
// authenticated (the process was started for it); without one, calls are
// anonymous. Feature flags are read from the environment: see
// `go doc github.com/crux-go/crux Flags`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
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
