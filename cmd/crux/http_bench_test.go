package main

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// BenchmarkServeHTTP measures query_facts over 1,000 facts as MCP clients
// meet it, through crux serve over stdio and over Streamable HTTP (with
// sessions and without), each a process owning its own data directory,
// called one at a time by the SDK's client. The p50-µs metric is the
// median latency of a call.
func BenchmarkServeHTTP(b *testing.B) {
	ctx := context.Background()
	bin := cruxBinary(b)
	type target struct {
		name string
		cs   *mcp.ClientSession
	}
	var targets []target

	cmd := exec.Command(bin, "serve", "--data", b.TempDir(), "--agent", "tester")
	cmd.Env = subprocessEnv()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "test"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
	require.NoError(b, err)
	b.Cleanup(func() { cs.Close() })
	targets = append(targets, target{"stdio", cs})

	for _, mode := range []struct {
		name string
		args []string
	}{{"http", nil}, {"http-stateless", []string{"--stateless"}}} {
		cmd := exec.Command(bin, append([]string{"serve", "--data", b.TempDir(), "--http", "127.0.0.1:0"}, mode.args...)...)
		cmd.Env = append(subprocessEnv(), "CRUX_AGENT_TOKENS=tester="+testerToken)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		require.NoError(b, cmd.Start())
		b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		url := waitURL(b, &stderr, nil)
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "test"}, nil).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url,
				HTTPClient: &http.Client{Transport: bearerTransport{testerToken}}}, nil)
		require.NoError(b, err)
		b.Cleanup(func() { cs.Close() })
		targets = append(targets, target{mode.name, cs})
	}

	for _, tg := range targets {
		for i := range 1000 {
			_, err := tg.cs.CallTool(ctx, &mcp.CallToolParams{Name: "store_fact",
				Arguments: map[string]any{"entity": fmt.Sprintf("bench:%d", i%50), "key": "k", "value": fmt.Sprintf("v%d", i)}})
			require.NoError(b, err)
		}
	}
	args := map[string]any{"query": "bench", "top_k": 10}
	for _, tg := range targets {
		b.Run("query_facts/"+tg.name, func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				t0 := time.Now()
				res, err := tg.cs.CallTool(ctx, &mcp.CallToolParams{Name: "query_facts", Arguments: args})
				if err != nil || res.IsError {
					b.Fatal(err, res)
				}
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		})
	}
}
