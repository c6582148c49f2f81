// Command listing-tokens reports what the tools/list of crux costs an
// agent, tool by tool: the bytes of each tool as JSON on the wire and an
// approximate token count (bytes / 4, the estimate crux's token budgets
// use), then the totals and the sizes of the initialize result, of
// cuecrux_session {} and of get_bootstrap {}.
//
//	go run ./bench/listing-tokens [-surface full|minimal|dynamic] [-defaults] [-no-token] [-sort]
//
// It serves a crux.Server over MCP stdio framing on in-memory pipes, as
// the crux command does: by default with every tool flag on (the full
// catalogue) and the crux command's free-local capability token.
// -defaults keeps the library's default flags, -no-token serves without
// a token, and -sort orders the tools by size, largest first.
package main

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/examples/memstore"
	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/mcpserver"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
)

func main() {
	surface := flag.String("surface", "full", "tool surface: full, minimal or dynamic")
	defaults := flag.Bool("defaults", false, "keep the library's default flags instead of turning every tool on")
	noToken := flag.Bool("no-token", false, "serve without a capability token")
	bySize := flag.Bool("sort", false, "order tools by size, largest first")
	flag.Parse()
	if err := run(*surface, *defaults, *noToken, *bySize); err != nil {
		log.Fatal(err)
	}
}

// allTools is f with every switch on that adds a tool to the catalogue.
func allTools(f crux.Flags) crux.Flags {
	f.AutonomyContract, f.ReuseCheck, f.EngramMCP, f.MemoryAck = true, true, true, true
	f.Artefacts, f.AgentPassports, f.PassportRevocation, f.PassportMintRequests = true, true, true, true
	f.ReceiptVerify, f.Observe, f.HandoffObservations, f.AuditEnvelope = true, true, true, true
	f.IdentityContinuity = true
	return f
}

func run(surface string, defaults, noToken, bySize bool) error {
	f := crux.DefaultFlags()
	if !defaults {
		f = allTools(f)
	}
	f.ToolSurface = feature.ParseSurface(surface)
	opts := &crux.Options{Flags: &f}
	if !noToken {
		signer := receipts.NewEd25519Signer(ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)))
		tok, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{IssuedAt: time.Now(), Capabilities: crux.FreeLocalCapabilities(f)})
		if err != nil {
			return err
		}
		r, err := rcx.NewRouter(tok, signer.Public(), nil)
		if err != nil {
			return err
		}
		opts.Signer, opts.Router = signer, r
	}
	srv, err := crux.NewServer(memstore.New(), opts)
	if err != nil {
		return err
	}
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		caller := crux.Caller{Agent: "bench", Authenticated: true}
		done <- mcpserver.Serve(ctx, srv, caller, mcpserver.StdioTransport(inR, outW), nil)
		outW.Close()
	}()
	lines := bufio.NewReader(outR)
	exchange := func(req string) ([]byte, error) {
		if _, err := io.WriteString(inW, req+"\n"); err != nil {
			return nil, err
		}
		return lines.ReadBytes('\n')
	}
	init, err := exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"listing-tokens","version":"bench"}}}`)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		return err
	}
	list, err := exchange(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if err != nil {
		return err
	}
	session, err := exchange(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"cuecrux_session","arguments":{}}}`)
	if err != nil {
		return err
	}
	boot, err := exchange(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get_bootstrap","arguments":{}}}`)
	if err != nil {
		return err
	}
	inW.Close()
	if err := <-done; err != nil {
		return err
	}

	var reply struct {
		Result struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(list, &reply); err != nil {
		return fmt.Errorf("tools/list: %w: %s", err, list)
	}
	type row struct {
		name  string
		bytes int
	}
	var rows []row
	sum := 0
	for _, t := range reply.Result.Tools {
		var n struct{ Name string }
		if err := json.Unmarshal(t, &n); err != nil {
			return err
		}
		rows = append(rows, row{n.Name, len(t)})
		sum += len(t)
	}
	if bySize {
		sort.SliceStable(rows, func(i, j int) bool { return rows[i].bytes > rows[j].bytes })
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "tool\tbytes\ttokens\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%d\t%d\t\n", r.name, r.bytes, tokens(r.bytes))
	}
	w.Flush()
	n := len(rows)
	if n == 0 {
		return fmt.Errorf("tools/list listed no tools: %s", list)
	}
	fmt.Printf("\nsurface=%s tools=%d token=%v\n", surface, n, !noToken)
	fmt.Printf("tools/list     %7d B  ~%6d tokens  (tools %d B: %d B, ~%d tokens per tool)\n",
		len(list)-1, tokens(len(list)-1), sum, sum/n, tokens(sum)/n)
	fmt.Printf("initialize     %7d B  ~%6d tokens\n", len(init)-1, tokens(len(init)-1))
	fmt.Printf("cuecrux_session {} %3d B  ~%6d tokens\n", len(session)-1, tokens(len(session)-1))
	fmt.Printf("get_bootstrap {}  %4d B  ~%6d tokens\n", len(boot)-1, tokens(len(boot)-1))
	return nil
}

// tokens is the approximate token count of n bytes of JSON: n / 4,
// rounded up, as crux's token budgets count.
func tokens(n int) int { return (n + 3) / 4 }
