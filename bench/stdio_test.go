package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/mcpserver"
	"github.com/crux-go/crux/store/bolt"
)

// stdioSession is an MCP session with a crux server over the stdio
// transport the crux command uses, through in-memory pipes: the framing
// layer, the SDK and the call path all run, in this process.
type stdioSession struct {
	w    *io.PipeWriter
	sc   *bufio.Scanner
	done chan error
}

func newStdioSession(b *testing.B, srv *crux.Server) *stdioSession {
	b.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s := &stdioSession{w: inW, sc: bufio.NewScanner(outR), done: make(chan error, 1)}
	s.sc.Buffer(make([]byte, 64<<10), 16<<20)
	go func() {
		s.done <- mcpserver.Serve(context.Background(), srv, caller, mcpserver.StdioTransport(inR, outW), nil)
		outW.Close()
	}()
	b.Cleanup(func() {
		inW.Close()
		for s.sc.Scan() {
		}
		if err := <-s.done; err != nil {
			b.Error(err)
		}
	})
	s.roundTrip(b, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}`)
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		b.Fatal(err)
	}
	return s
}

// roundTrip sends one request line and returns the reply line.
func (s *stdioSession) roundTrip(b *testing.B, req string) []byte {
	if _, err := io.WriteString(s.w, req+"\n"); err != nil {
		b.Fatal(err)
	}
	if !s.sc.Scan() {
		b.Fatalf("no reply to %s: %v", req, s.sc.Err())
	}
	return s.sc.Bytes()
}

// benchStdio times tools/call requests built by params(i) over a stdio
// session and reports their latency percentiles.
func benchStdio(b *testing.B, srv *crux.Server, params func(i int) string) {
	s := newStdioSession(b, srv)
	var lat latencies
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		var out []byte
		req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":%s}`, i+1, params(i))
		lat.time(func() { out = s.roundTrip(b, req) })
		if i == 0 && !json200(out) {
			b.Fatalf("reply %s", out)
		}
		i++
	}
	lat.report(b)
}

// json200 reports whether a reply line is a result that is not an error.
func json200(line []byte) bool {
	return len(line) > 0 && !bytes.Contains(line, []byte(`"error":`)) && !bytes.Contains(line, []byte(`"isError":true`))
}

// BenchmarkStdioStoreFact: one client writing facts one at a time over the
// stdio transport, into a store of 2,000 facts and growing. sync=off
// leaves out the fsync, so the figure is the CPU of the call path; sync=on
// is the production setting.
func BenchmarkStdioStoreFact(b *testing.B) {
	for _, noSync := range []bool{true, false} {
		b.Run(fmt.Sprintf("sync=%v", map[bool]string{true: "off", false: "on"}[noSync]), func(b *testing.B) {
			srv := newServer(b, filepath.Join(b.TempDir(), "crux.db"), &bolt.Options{NoSync: noSync})
			n := scaled(2000)
			for i := range n {
				mustCall(b, srv, "store_fact", storeArgs(i))
			}
			benchStdio(b, srv, func(i int) string {
				return fmt.Sprintf(`{"name":"store_fact","arguments":%s}`, storeArgs(n+i))
			})
		})
	}
}

// BenchmarkStdioQueryFacts: one client querying by keyword (10 rows of the
// 100 facts sharing a word) over the stdio transport, in a store of 50,000
// facts.
func BenchmarkStdioQueryFacts(b *testing.B) {
	n := scaled(50_000)
	srv := newServer(b, corpus(b, n), &bolt.Options{NoSync: true})
	benchStdio(b, srv, func(i int) string {
		return fmt.Sprintf(`{"name":"query_facts","arguments":{"query":"topic%04d"}}`, (i*7919)%(n/100))
	})
}

// BenchmarkStdioToolsList: one client asking tools/list over the stdio
// transport, as an agent does on every turn, with and without the
// free-local capability token the crux command enforces (which filters
// the list and annotates every tool).
func BenchmarkStdioToolsList(b *testing.B) {
	for _, enforce := range []bool{false, true} {
		b.Run(fmt.Sprintf("router=%v", map[bool]string{false: "none", true: "free-local"}[enforce]), func(b *testing.B) {
			srv := newTokenServer(b, enforce)
			s := newStdioSession(b, srv)
			s.roundTrip(b, `{"jsonrpc":"2.0","id":"warm","method":"tools/list","params":{}}`) // the one-time derivations
			var lat latencies
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				var out []byte
				req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{}}`, i+1)
				lat.time(func() { out = s.roundTrip(b, req) })
				if i == 0 && !json200(out) {
					b.Fatalf("reply %s", out)
				}
				i++
			}
			lat.report(b)
		})
	}
}

// BenchmarkListTools: crux.Server.ListTools in process, the list the MCP
// adapter starts from.
func BenchmarkListTools(b *testing.B) {
	for _, enforce := range []bool{false, true} {
		b.Run(fmt.Sprintf("router=%v", map[bool]string{false: "none", true: "free-local"}[enforce]), func(b *testing.B) {
			srv := newTokenServer(b, enforce)
			srv.ListTools(context.Background(), caller) // the server's one-time derivations
			b.ReportAllocs()
			for b.Loop() {
				if len(srv.ListTools(context.Background(), caller)) == 0 {
					b.Fatal("no tools listed")
				}
			}
		})
	}
}

// BenchmarkHTTPToolsList: one client asking tools/list over Streamable
// HTTP without sessions (the SDK answers it, from the list crux gives the
// adapter), with and without the free-local capability token.
func BenchmarkHTTPToolsList(b *testing.B) {
	for _, enforce := range []bool{false, true} {
		b.Run(fmt.Sprintf("router=%v", map[bool]string{false: "none", true: "free-local"}[enforce]), func(b *testing.B) {
			srv := newTokenServer(b, enforce)
			ts := httptest.NewServer(mcpserver.NewHTTPHandler(mcpserver.Local(srv), &mcpserver.HTTPOptions{Stateless: true, JSONResponse: true}))
			b.Cleanup(ts.Close)
			post := func(id int) []byte {
				req, err := http.NewRequest(http.MethodPost, ts.URL+mcpserver.DefaultHTTPPath,
					strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list","params":{}}`, id)))
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
				resp, err := ts.Client().Do(req)
				if err != nil {
					b.Fatal(err)
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d: %s (%v)", resp.StatusCode, body, err)
				}
				return body
			}
			post(0) // the one-time derivations
			var lat latencies
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				var out []byte
				lat.time(func() { out = post(i + 1) })
				if i == 0 && (!json200(out) || !bytes.Contains(out, []byte(`"tools":[{`))) {
					b.Fatalf("reply %s", out)
				}
				i++
			}
			lat.report(b)
		})
	}
}

// BenchmarkListToolsShared: crux.Server.ListToolsShared in process, the
// list the MCP adapter is given by Local: the list kept for what the
// caller sees, not copied.
func BenchmarkListToolsShared(b *testing.B) {
	for _, enforce := range []bool{false, true} {
		b.Run(fmt.Sprintf("router=%v", map[bool]string{false: "none", true: "free-local"}[enforce]), func(b *testing.B) {
			srv := newTokenServer(b, enforce)
			srv.ListToolsShared(context.Background(), caller) // the server's one-time derivations
			b.ReportAllocs()
			for b.Loop() {
				if len(srv.ListToolsShared(context.Background(), caller)) == 0 {
					b.Fatal("no tools listed")
				}
			}
		})
	}
}
