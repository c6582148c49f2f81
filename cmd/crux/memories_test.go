package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// callStructured runs crux call and returns its structured content with
// the fields computed from the time of the call removed: age_hours and
// effective_confidence (which decays with age) differ between two calls
// made a moment apart. The library's test compares them too, on one clock.
func callStructured(t *testing.T, dir, agent, tool, args string) string {
	t.Helper()
	r := runCrux(t, nil, "", "call", "--data", dir, "--agent", agent, tool, args)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	out := decodeCall(t, r.stdout)
	require.Nil(t, out.IsError, "%s", r.stdout)
	if rows, ok := out.StructuredContent["rows"].([]any); ok {
		for _, row := range rows {
			delete(row.(map[string]any), "age_hours")
			delete(row.(map[string]any), "effective_confidence")
		}
	}
	b, err := json.Marshal(out.StructuredContent)
	require.NoError(t, err)
	return string(b)
}

func TestExportImportCommands(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	for _, c := range []struct{ agent, args string }{
		{"alice", `{"entity":"e","key":"k","value":"one"}`},
		{"alice", `{"entity":"e","key":"k","value":"two"}`},
		{"bob", `{"entity":"f","key":"k","value":"bob's"}`},
		{"alice", `{"entity":"mine","key":"k","value":"private","private":true}`},
	} {
		r := runCrux(t, nil, "", "call", "--data", src, "--agent", c.agent, "store_fact", c.args)
		require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	}
	exp := runCrux(t, nil, "", "export", "--data", src, "--agent", "alice")
	require.Equal(t, 0, exp.code, "stderr: %s", exp.stderr)
	assert.Contains(t, exp.stderr, "exported 4 facts")
	file := filepath.Join(t.TempDir(), "memories.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(exp.stdout), 0o600))

	imp := runCrux(t, nil, "", "import", "--data", dst, file)
	require.Equal(t, 0, imp.code, "stderr: %s", imp.stderr)
	lines := strings.Count(exp.stdout, "\n")
	assert.Regexp(t, fmt.Sprintf(`crux: imported \d+ records, to line %d\n`, lines), imp.stderr, "progress")
	var sum struct {
		Facts    map[string]int `json:"facts"`
		Receipts []string       `json:"receipts"`
	}
	require.NoError(t, json.Unmarshal([]byte(imp.stdout), &sum), imp.stdout)
	assert.Equal(t, 4, sum.Facts["imported"])
	require.Len(t, sum.Receipts, 1)
	v := runCrux(t, nil, "", "verify", "receipt", "--data", dst, sum.Receipts[0])
	assert.Equal(t, 0, v.code, "stdout: %s stderr: %s", v.stdout, v.stderr)

	for _, c := range []struct{ agent, tool, args string }{
		{"alice", "query_facts", `{"include_superseded":true}`},
		{"bob", "query_facts", `{"include_superseded":true}`},
		{"alice", "fact_history", `{"entity":"e","key":"k"}`},
		{"alice", "fact_history", `{"entity":"mine","key":"k"}`},
		{"alice", "list_entities", `{}`},
		{"bob", "list_entities", `{}`},
	} {
		assert.Equal(t, callStructured(t, src, c.agent, c.tool, c.args), callStructured(t, dst, c.agent, c.tool, c.args), "%s %s as %s", c.tool, c.args, c.agent)
	}

	// Twice, from standard input: nothing changes.
	again := runCrux(t, nil, exp.stdout, "import", "--data", dst, "-")
	require.Equal(t, 0, again.code, "stderr: %s", again.stderr)
	require.NoError(t, json.Unmarshal([]byte(again.stdout), &sum))
	assert.Equal(t, 0, sum.Facts["imported"])
	assert.Equal(t, 4, sum.Facts["unchanged"])
	assert.Empty(t, sum.Receipts)

	// Export without --agent leaves the private fact out.
	shared := runCrux(t, nil, "", "export", "--data", src)
	assert.Contains(t, shared.stderr, "exported 3 facts")
	assert.NotContains(t, shared.stdout, `"private"`)

	// Usage.
	assert.Equal(t, exitUsage, runCrux(t, nil, "", "import", "--data", dst).code)
	assert.Equal(t, exitUsage, runCrux(t, nil, "", "import", "--data", dst, "--agent", "a", file).code)
	assert.Equal(t, exitUsage, runCrux(t, nil, "", "import", "--data", dst, "--from", "csv", file).code)
	assert.Equal(t, exitUsage, runCrux(t, nil, "", "export", "--data", dst, "extra").code)
}

func TestImportBadLineImportsNothing(t *testing.T) {
	dst := t.TempDir()
	file := filepath.Join(t.TempDir(), "bad.jsonl")
	lines := exportLines(3)
	lines = append(lines[:3], append([]string{`{"type":"fact","fact":{"id":"nope"}}`}, lines[3:]...)...)
	require.NoError(t, os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o600))
	r := runCrux(t, nil, "", "import", "--data", dst, file)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "line 4: ")
	assert.Empty(t, r.stdout)
	assert.Equal(t, `{"count":0,"entities":[],"truncated":false}`, callStructured(t, dst, "alice", "list_entities", `{}`))
}

func TestImportMCPMemoryCommand(t *testing.T) {
	dst := t.TempDir()
	r := runCrux(t, nil, "", "import", "--data", dst, "--from", "mcp-memory", "--tenant", "kg", filepath.Join("..", "..", "memio", "testdata", "mcp-memory.jsonl"))
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	assert.Contains(t, r.stdout, `"tenant": "kg"`)
	assert.Contains(t, r.stdout, `"imported": 11`)
}

// exportLines is a hand-made export of n shared facts, each its own chain,
// its header first.
func exportLines(n int) []string {
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	out := []string{`{"format":"crux-memories","version":1,"tenant":"default","exported_at":"2026-03-02T00:00:00Z"}`}
	for i := range n {
		ts := at.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano)
		out = append(out, fmt.Sprintf(`{"type":"fact","fact":{"id":"f_%032x","tenant":"default","entity":"bulk","key":"k%d",`+
			`"value":"value number%d","confidence":1,"stored_at":%q,"tokens":4,"version":1,"horizon_class":"medium","valid_from":%q}}`,
			i+1, i, i, ts, ts))
	}
	return out
}

// TestImportWhileServing imports, in batches, into a directory another
// process owns: the owner applies every batch.
func TestImportWhileServing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var stderr syncBuffer
	cs, _ := startServeAs(t, ctx, dir, "serve", &stderr)
	defer func() { assert.NoError(t, cs.Close(), "stderr: %s", stderr.String()) }()

	file := filepath.Join(t.TempDir(), "bulk.jsonl")
	require.NoError(t, os.WriteFile(file, []byte(strings.Join(exportLines(2500), "\n")+"\n"), 0o600))
	cmd := exec.CommandContext(ctx, cruxBinary(t), "import", "--data", dir, file)
	cmd.Env = subprocessEnv()
	out, err := cmd.Output()
	require.NoError(t, err, "%s", out)
	var sum struct {
		Facts    map[string]int `json:"facts"`
		Batches  int            `json:"batches"`
		Receipts []string       `json:"receipts"`
	}
	require.NoError(t, json.Unmarshal(out, &sum), "%s", out)
	assert.Equal(t, 2500, sum.Facts["imported"])
	assert.Equal(t, 3, sum.Batches)
	assert.Len(t, sum.Receipts, 3)

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "query_facts", Arguments: map[string]any{"query": "number1777"}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	b, _ := json.Marshal(res.StructuredContent)
	assert.Contains(t, string(b), `"key":"k1777"`)
}
