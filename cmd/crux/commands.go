package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/mcpserver"
)

// maxStdinArgs bounds the arguments crux call reads from standard input.
// crux itself rejects arguments above its own, smaller limit with a -32602
// error; this only keeps a runaway pipe from exhausting memory.
const maxStdinArgs = 64 << 20

// serveCmd is crux serve: MCP over stdin and stdout until the client closes
// stdin (a clean exit) or ctx is cancelled by a signal (also clean). Either
// way, every call read from stdin is answered first (see "Shutting down"
// in the mcpserver documentation). With --http, MCP over Streamable HTTP
// instead, until a signal (see serveHTTP). The store is closed before it
// returns.
func serveCmd(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer, osenv *environment, logger *slog.Logger) (err error) {
	var cf commonFlags
	var hf httpFlags
	fs := newFlagSet("serve", &cf)
	hf.register(fs)
	s, err := resolveNoArgs("serve", fs, &cf, args, osenv)
	if err != nil {
		return err
	}
	hs, err := resolveHTTP(fs, &hf, osenv)
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
		return serveHTTP(ctx, s, hs, sess, logger)
	}
	logger.Info("crux: serving MCP on stdio",
		"db", filepath.Join(s.dir, dbFile), "agent", s.caller.Name(), "authenticated", s.caller.Authenticated,
		"owner", sess.conn.Owner())
	caller := s.caller
	caller.Transport = crux.Transport{Kind: crux.TransportStdio}
	t := mcpserver.StdioTransport(io.NopCloser(stdin), stdout)
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

// toolsCmd is crux tools: the catalogue as the caller sees it.
func toolsCmd(ctx context.Context, args []string, stdout io.Writer, osenv *environment, logger *slog.Logger) error {
	var cf commonFlags
	fs := newFlagSet("tools", &cf)
	asJSON := fs.Bool("json", false, "print the tools/list array as JSON")
	s, err := resolveNoArgs("tools", fs, &cf, args, osenv)
	if err != nil {
		return err
	}
	sess, err := s.join(ctx, logger)
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

	if *asJSON {
		return writeJSON(stdout, list)
	}
	tw := tabwriter.NewWriter(stdout, 0, 8, 2, ' ', 0)
	for _, t := range list {
		first, _, _ := strings.Cut(t.Description, "\n")
		fmt.Fprintf(tw, "%s\t%s\n", t.Name, first)
	}
	return tw.Flush()
}

// callCmd is crux call: one tool call. The result object goes to stdout
// (status 0, also when isError is set); a protocol-level error goes to
// stdout as {"error": {...}} with status 1.
func callCmd(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer, osenv *environment, logger *slog.Logger) error {
	var cf commonFlags
	fs := newFlagSet("call", &cf)
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
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
			raw, err = io.ReadAll(io.LimitReader(stdin, maxStdinArgs+1))
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

	s, err := resolve(fs, &cf, osenv)
	if err != nil {
		return err
	}
	sess, err := s.join(ctx, logger)
	if err != nil {
		return err
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
		return writeJSON(stdout, res)
	case errors.As(callErr, &ce):
		if err := writeJSON(stdout, map[string]*crux.Error{"error": ce}); err != nil {
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
