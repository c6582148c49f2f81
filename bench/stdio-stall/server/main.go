// Command server is the MCP stdio server of the stdio-stall benchmark: the
// crux tools on a bbolt store, served on standard input and output, with
// the transport chosen by -stdin:
//
//	guard   mcpserver.StdioTransport, as crux serve and ServeStdio use
//	plain   mcp.IOTransport over standard input, a blocking read(2) with
//	        no workaround
//	poller  mcp.IOTransport over standard input read through the runtime's
//	        network poller: a pipe is reopened from /proc/self/fd/0 with
//	        O_NONBLOCK (a file description of its own, so the flag does not
//	        reach other holders of standard input); Linux only, and only
//	        for a pipe
//
// See ../run.sh for how it is driven.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/mcpserver"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store/bolt"
)

func main() {
	dir := flag.String("data", "", "data directory (required)")
	mode := flag.String("stdin", "guard", "how standard input is read: guard, plain or poller")
	flag.Parse()
	if *dir == "" {
		log.Fatal("server: -data is required")
	}
	t, err := transport(*mode)
	if err != nil {
		log.Fatal(err)
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		log.Fatal(err)
	}
	db, err := bolt.Open(filepath.Join(*dir, "crux.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	signer, err := receipts.LoadOrCreateKey(*dir)
	if err != nil {
		log.Fatal(err)
	}
	srv, err := crux.NewServer(db, &crux.Options{Signer: signer})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	if err := mcpserver.Serve(context.Background(), srv, crux.Caller{Agent: "bench", Authenticated: true}, t, nil); err != nil {
		log.Print(err)
	}
}

// transport returns the transport over standard input and output that
// mode names.
func transport(mode string) (mcp.Transport, error) {
	var in io.ReadCloser
	switch mode {
	case "guard":
		return mcpserver.StdioTransport(os.Stdin, os.Stdout), nil
	case "plain":
		in = os.Stdin
	case "poller":
		var err error
		if in, err = pollableStdin(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("server: unknown -stdin %q", mode)
	}
	return &mcp.IOTransport{Reader: in, Writer: nopWriteCloser{os.Stdout}}, nil
}

// nopWriteCloser is an io.WriteCloser whose Close does nothing.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
