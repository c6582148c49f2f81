package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/mcpserver"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// maxStdinArgs bounds the arguments crux call reads from standard input.
// crux itself rejects arguments above its own, smaller limit with a -32602
// error; this only keeps a runaway pipe from exhausting memory.
const maxStdinArgs = 64 << 20

// newServeCmd returns crux serve.
func newServeCmd(a *app) *cobra.Command {
	var cf *commonFlags
	var hf httpFlags
	c := &cobra.Command{
		Use:   "serve [--data DIR] [--agent NAME]",
		Short: "Serve MCP on standard input and output, or over HTTP with --http",
		Annotations: map[string]string{formsAnnotation: "serve --http ADDR [--data DIR] [--tokens FILE] [--anonymous]\n" +
			"                 [--allow-remote] [--stateless] [--max-sessions N]\n" +
			"                 [--max-caller-sessions N] [--max-caller-requests N]\n" +
			"                 [--ui-operator NAME[@TENANT]]... [--ui-trust-forwarded-proto]"},
		Long: `Serve MCP over standard input and output until the client closes standard
input, or on SIGINT or SIGTERM; then stop reading, answer every call already
read, and exit 0. A malformed line is answered with JSON-RPC -32700 or -32600
and serving goes on. Logs go to standard error, at level warn unless
--log-level (or CRUX_LOG_LEVEL) says otherwise. Calls are checked against a
free-local capability token signed with the data directory's key
(DIR/signing.key): hosted-tier tools are not listed and are refused with
-32030 and a signed refusal receipt.

With --http, serve MCP over Streamable HTTP at http://ADDR/mcp instead, until
SIGINT or SIGTERM; then stop accepting connections, answer every request in
flight, and exit 0. ADDR is host:port on loopback (127.0.0.1:8080,
localhost:8080, [::1]:8080; port 0 picks one); the URL is logged on standard
error, "crux: serving MCP over HTTP" url=..., at every log level but error.
Any other address needs --allow-remote and a token table. Each request is
served as the agent and tenant its bearer token maps to in the token table
(--tokens FILE, else $CRUX_AGENT_TOKENS; see crux help), each with its own
tools/list and its own sessions. A request without a token is refused with
401 and WWW-Authenticate: Bearer, unless --anonymous serves it as anonymous;
a wrong token is always refused. With no table every request is anonymous.
On a loopback address the Host header must name a loopback host and an
Origin header, if any, a loopback origin, else 403 (DNS rebinding).
--stateless keeps no sessions: every POST stands alone and GET and DELETE get
405. A session without a request for 30 minutes is closed (its client gets
404 and starts a new one). At most --max-sessions sessions (1000) are held
in all, else 503; at most --max-caller-sessions (100) per caller, past which
the caller's longest-unused session with no request or stream open is
closed (else 429); at most --max-caller-requests (64) requests of a caller
are in flight, the web view's requests counted with its MCP requests, else
429. crux token new makes a token and its table entry.

The web view at http://ADDR/ui/ takes the same tokens. It shows an agent the
receipts it acted in and the forgets it made, and lets it restore only those;
an agent named by --ui-operator NAME[@TENANT] (an agent entry of the token
table; repeatable) is an operator of the view, who sees its tenant's whole
receipt chain, audits it, and sees and restores every forget of its tenant.
An anonymous caller is never an operator and restores no forget. The view's
session cookie is Secure when the request came over TLS; behind a
TLS-terminating proxy that sets X-Forwarded-Proto, --ui-trust-forwarded-proto
makes it Secure when the header says https (set it only when every request
comes through that proxy).`,
		RunE: func(c *cobra.Command, args []string) error {
			if err := noArgs("serve", args); err != nil {
				return err
			}
			return a.serve(c.Flags(), cf, &hf)
		},
	}
	cf = withCommon(c)
	hf.register(c.Flags())
	return c
}

// serve is crux serve: MCP over stdin and stdout until the client closes
// stdin (a clean exit) or the context is cancelled by a signal (also
// clean). Either way, every call read from stdin is answered first (see
// "Shutting down" in the mcpserver documentation). With --http, MCP over
// Streamable HTTP instead, until a signal (see serveHTTP). The store is
// closed before it returns.
func (a *app) serve(fs *pflag.FlagSet, cf *commonFlags, hf *httpFlags) (err error) {
	ctx, logger := a.ctx, a.logger
	s, err := resolve(fs, cf, a.env)
	if err != nil {
		return err
	}
	hs, err := resolveHTTP(fs, hf, a.env)
	if err != nil {
		return err
	}
	sess, err := s.join(ctx, logger)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := sess.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the store: %w", cerr))
		}
	}()

	if hs != nil {
		return serveHTTP(ctx, s, hs, sess, logger, a.announcer())
	}
	logger.Info("crux: serving MCP on stdio",
		"db", filepath.Join(s.dir, dbFile), "agent", s.caller.Name(), "authenticated", s.caller.Authenticated,
		"owner", sess.conn.Owner())
	if terminal(a.stdin) {
		fmt.Fprintln(a.stderr, stdioNote)
	}
	caller := s.caller
	caller.Transport = crux.Transport{Kind: crux.TransportStdio}
	t := mcpserver.StdioTransport(io.NopCloser(a.stdin), a.stdout)
	err = mcpserver.ServeBackend(ctx, sess, caller, t, &mcpserver.Options{Logger: logger})
	switch {
	case err == nil:
		logger.Info("crux: client closed the connection; stopping")
		return nil
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		logger.Info("crux: stopping on signal")
		return nil
	default:
		return fmt.Errorf("serving MCP: %w", err)
	}
}

// stdioNote is what crux serve tells a person who starts it on a terminal,
// where it would otherwise wait without a word.
const stdioNote = "crux serve speaks MCP (JSON-RPC, one message a line) on standard input and output:\n" +
	"an MCP client starts it (see crux help serve). Ctrl-D ends it."

// terminal reports whether the reader or writer rw is a terminal: a file
// that is a character device.
func terminal(rw any) bool {
	f, ok := rw.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// newToolsCmd returns crux tools: the catalogue as the caller sees it.
func newToolsCmd(a *app) *cobra.Command {
	var cf *commonFlags
	var asJSON bool
	c := &cobra.Command{
		Use:   "tools [--data DIR] [--agent NAME] [--json]",
		Short: "List the tools: name and first line of description",
		Long: `List the tools the agent sees (tools/list): name and first line of
description, one a line, or with --json the tools/list array.`,
		RunE: func(c *cobra.Command, args []string) error {
			if err := noArgs("tools", args); err != nil {
				return err
			}
			s, err := resolve(c.Flags(), cf, a.env)
			if err != nil {
				return err
			}
			return a.tools(s, asJSON)
		},
	}
	cf = withCommon(c)
	c.Flags().BoolVar(&asJSON, "json", false, "print the tools/list array as JSON")
	return c
}

func (a *app) tools(s *setup, asJSON bool) error {
	ctx := a.ctx
	sess, err := s.join(ctx, a.logger)
	if err != nil {
		return err
	}
	list, err := sess.ListTools(ctx, s.caller)
	if cerr := sess.close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("closing the store: %w", cerr))
	}
	if err != nil {
		return err
	}

	if asJSON {
		return writeJSON(a.stdout, list)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 8, 2, ' ', 0)
	for _, t := range list {
		first, _, _ := strings.Cut(t.Description, "\n")
		fmt.Fprintf(tw, "%s\t%s\n", t.Name, first)
	}
	return tw.Flush()
}

// newCallCmd returns crux call: one tool call.
func newCallCmd(a *app) *cobra.Command {
	var cf *commonFlags
	c := &cobra.Command{
		Use:   "call [--data DIR] [--agent NAME] TOOL [JSON|-]",
		Short: "Run one tool call and print the MCP result object",
		Long: `Run one tool call with the JSON arguments (default {}; - reads them from
standard input) and print the MCP result object. A protocol-level error
prints {"error":{"code","message","data"}} and exits with status 1; a tool
result with isError exits with status 0. crux tools lists the tools. Without
a store in the data directory, call makes one, and says so on standard
error.`,
		RunE: func(c *cobra.Command, args []string) error {
			return a.call(c.Flags(), cf, args)
		},
	}
	cf = withCommon(c)
	return c
}

// call is crux call. The result object goes to stdout (status 0, also
// when isError is set); a protocol-level error goes to stdout as
// {"error": {...}} with status 1.
func (a *app) call(fs *pflag.FlagSet, cf *commonFlags, pos []string) error {
	ctx := a.ctx
	switch {
	case len(pos) == 0:
		return usagef("call needs a tool name")
	case len(pos) > 2:
		return usagef("call takes a tool name and at most one JSON argument object, got %d arguments", len(pos))
	case pos[0] == "":
		return usagef("call needs a tool name")
	}
	name := pos[0]
	var callArgs json.RawMessage // nil: no arguments, which crux reads as {}
	if len(pos) == 2 {
		raw := []byte(pos[1])
		if pos[1] == "-" {
			var err error
			raw, err = io.ReadAll(io.LimitReader(a.stdin, maxStdinArgs+1))
			if err != nil {
				return fmt.Errorf("reading the arguments from standard input: %w", err)
			}
			if len(raw) > maxStdinArgs {
				return fmt.Errorf("the arguments on standard input are larger than %d bytes", maxStdinArgs)
			}
		}
		if len(bytes.TrimSpace(raw)) > 0 {
			callArgs = raw
		}
	}

	s, err := resolve(fs, cf, a.env)
	if err != nil {
		return err
	}
	path := filepath.Join(s.dir, dbFile)
	_, statErr := os.Stat(path)
	sess, err := s.join(ctx, a.logger)
	if err != nil {
		return err
	}
	if s.storeURL == "" && errors.Is(statErr, os.ErrNotExist) {
		// As serve does, call makes the store it needs; it says so, since
		// the operator commands (crux facts) never make one.
		fmt.Fprintf(a.stderr, "crux: no store at %s: made a new one\n", path)
	}
	res, callErr := sess.CallTool(ctx, s.caller, name, callArgs)
	if err := sess.close(); err != nil {
		return fmt.Errorf("closing the store: %w", err)
	}

	var ce *crux.Error
	switch {
	case callErr == nil:
		if res == nil {
			res = &crux.Result{Content: []crux.Content{}}
		}
		return writeJSON(a.stdout, res)
	case errors.As(callErr, &ce):
		if err := writeJSON(a.stdout, map[string]*crux.Error{"error": ce}); err != nil {
			return err
		}
		return &reportedError{}
	default:
		return callErr
	}
}

// writeJSON writes v to w as indented JSON, without HTML escaping.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
