package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
)

// BenchmarkForwarding measures what forwarding a call to the owning
// process costs: get_agent_identity (almost no work of its own) and
// query_facts over 1,000 facts, each called on the owner's crux.Server
// in-process (directly, and on a goroutine of its own, as a transport
// such as the MCP SDK's runs each request) and forwarded from another
// session over the owner socket. Each answer is encoded to JSON, as a
// transport sends it. Forwarded less in-process is the forwarding
// overhead.
func BenchmarkForwarding(b *testing.B) {
	ctx := context.Background()
	h, fwd := ownedHost(b, nil)
	srv, err := h.server(nil)
	require.NoError(b, err)
	c := crux.Caller{Agent: "bench", Authenticated: true}
	for i := range 1000 {
		_, err := srv.CallTool(ctx, c, "store_fact", json.RawMessage(fmt.Sprintf(`{"entity":"bench:%d","key":"k","value":"v%d"}`, i%50, i)))
		require.NoError(b, err)
	}
	for _, call := range []struct{ tool, args string }{
		{"get_agent_identity", `{}`},
		{"query_facts", `{"query":"bench","top_k":10}`},
	} {
		args := json.RawMessage(call.args)
		for _, via := range []struct {
			name string
			call func() (*crux.Result, error)
		}{
			{"in-process", func() (*crux.Result, error) { return srv.CallTool(ctx, c, call.tool, args) }},
			{"in-process-goroutine", func() (*crux.Result, error) {
				type outcome struct {
					res *crux.Result
					err error
				}
				ch := make(chan outcome, 1)
				go func() { r, err := srv.CallTool(ctx, c, call.tool, args); ch <- outcome{r, err} }()
				o := <-ch
				return o.res, o.err
			}},
			{"forwarded", func() (*crux.Result, error) { return fwd.CallTool(ctx, c, call.tool, args) }},
		} {
			b.Run(call.tool+"/"+via.name, func(b *testing.B) {
				for b.Loop() {
					res, err := via.call()
					if err != nil {
						b.Fatal(err)
					}
					if _, err := json.Marshal(res); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkServeForwarding measures forwarding between processes, as MCP
// clients meet it: two crux serve processes on one data directory, the
// first owning it; query_facts over 1,000 facts through each one's stdio.
// Both pay for stdio and the call; the second also for forwarding, so the
// difference of their p50 is what forwarding adds.
func BenchmarkServeForwarding(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	bin := cruxBinary(b)
	var sessions []*mcp.ClientSession
	for _, agent := range []string{"owner", "forwarder"} {
		cmd := exec.Command(bin, "serve", "--data", dir, "--agent", agent)
		cmd.Env = subprocessEnv()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "test"}, nil).
			Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
		require.NoError(b, err)
		b.Cleanup(func() { cs.Close() })
		sessions = append(sessions, cs)
	}
	for i := range 1000 {
		_, err := sessions[0].CallTool(ctx, &mcp.CallToolParams{Name: "store_fact",
			Arguments: map[string]any{"entity": fmt.Sprintf("bench:%d", i%50), "key": "k", "value": fmt.Sprintf("v%d", i)}})
		require.NoError(b, err)
	}
	args := map[string]any{"query": "bench", "top_k": 10}
	for i, name := range []string{"owner", "forwarded"} {
		b.Run(name, func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := sessions[i].CallTool(ctx, &mcp.CallToolParams{Name: "query_facts", Arguments: args}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		})
	}
}

// BenchmarkForwardedToolsList measures tools/list as a session of the
// crux command asks its backend for it: on the owner's crux.Server
// in-process, and from a second session, forwarded over the owner socket
// and decoded.
func BenchmarkForwardedToolsList(b *testing.B) {
	ctx := context.Background()
	h, fwd := ownedHost(b, nil)
	srv, err := h.server(nil)
	require.NoError(b, err)
	c := crux.Caller{Agent: "bench", Authenticated: true}
	for _, via := range []struct {
		name string
		list func() ([]crux.Tool, error)
	}{
		{"in-process", func() ([]crux.Tool, error) { return srv.ListTools(ctx, c), nil }},
		{"forwarded", func() ([]crux.Tool, error) { return fwd.ListTools(ctx, c) }},
	} {
		b.Run(via.name, func(b *testing.B) {
			if _, err := via.list(); err != nil { // the one-time derivations
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				list, err := via.list()
				if err != nil || len(list) == 0 {
					b.Fatal(len(list), err)
				}
			}
		})
	}
}
