// Command stdio is the smallest MCP server over crux: the tools of a
// crux.Server served on standard input and output through the official MCP
// Go SDK, for one agent. The crux command (cmd/crux) is the full version.
//
//	go run ./examples/stdio /tmp/crux-data my-agent
package main

import (
	"context"
	"log"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/mcpserver"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store/bolt"
)

func main() {
	if len(os.Args) != 3 {
		log.Fatal("usage: stdio DATA_DIR AGENT")
	}
	dir, agent := os.Args[1], os.Args[2]
	if err := os.MkdirAll(dir, 0o700); err != nil {
		log.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(dir, "crux.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	signer, err := receipts.LoadOrCreateKey(dir)
	if err != nil {
		log.Fatal(err)
	}
	srv, err := crux.NewServer(db, &crux.Options{Signer: signer})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	// Logs go to stderr (the log package's default): stdout is the protocol.
	if err := mcpserver.ServeStdio(ctx, srv, crux.Caller{Agent: agent, Authenticated: true}); err != nil && ctx.Err() == nil {
		log.Fatal(err)
	}
}
