package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeFiles creates files under dir, by relative path.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	}
}

func TestIngestFilesAndDelete(t *testing.T) {
	e := env{"CRUX_DATA_DIR": t.TempDir()}
	docs := t.TempDir()
	writeFiles(t, docs, map[string]string{
		"guide/storage.md": "# Storage\n\nFacts live in a bbolt file, synced on every commit.",
		"notes.txt":        "Deploys happen on Tuesdays.",
		".hidden/skip.md":  "never ingested: zeppelin",
		"image.png":        "not text",
		"more/lines.jsonl": `{"id":"kb-1","title":"Refunds","text":"Refunds older than ninety days are rejected."}` + "\n\n" + `{"id":"kb-2","text":"Invoices are sent monthly."}` + "\n",
	})
	r := runCrux(t, e, "", "ingest", "--tenant", "docs", "--compact", docs)
	require.Equal(t, 0, r.code, r.stderr)
	var sum map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sum))
	assert.Equal(t, 4.0, sum["documents"], r.stdout)
	assert.Equal(t, 3.0, sum["files"])
	assert.Equal(t, "docs", sum["tenant"])
	assert.Equal(t, true, sum["compacted"])
	assert.Contains(t, r.stderr, "ingested 4 documents", "plain progress lines off a terminal")

	query := func(q string) []map[string]any {
		out := decodeCall(t, runCrux(t, e, "", "call", "query", `{"tenant_id":"docs","query":"`+q+`"}`).stdout)
		var res []map[string]any
		for _, x := range out.StructuredContent["results"].([]any) {
			res = append(res, x.(map[string]any))
		}
		return res
	}
	res := query("commit synced")
	require.Len(t, res, 1)
	assert.Equal(t, "guide/storage.md", res[0]["doc_id"], "a file's id is its path inside the directory")
	assert.Equal(t, "Storage", res[0]["title"], "its first heading")
	assert.Equal(t, "kb-1", query("refunds")[0]["doc_id"])
	assert.Empty(t, query("zeppelin"), "hidden directories are skipped")

	r = runCrux(t, e, "", "ingest", "--tenant", "docs", "--delete", "kb-1", "nope")
	require.Equal(t, 0, r.code, r.stderr)
	assert.JSONEq(t, `{"tenant":"docs","deleted":["kb-1"]}`, r.stdout)
	assert.Empty(t, query("refunds"))

	// A bad line fails naming the file and line; the batch before it stays.
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte(`{"id":"ok","text":"zebra"}`+"\n"+`{"id":"x","body":"y"}`+"\n"), 0o644))
	r = runCrux(t, e, "", "ingest", "--tenant", "docs", bad)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "bad.jsonl: line 2: not a document")

	r = runCrux(t, e, "", "ingest", "--tenant", "docs")
	assert.Equal(t, 2, r.code, "no arguments is a usage error")
	r = runCrux(t, e, "", "ingest", filepath.Join(docs, "image.png"))
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "reads .txt, .md and .jsonl files")
}

// TestIngestWhileServing: crux ingest forwards its documents to the crux
// serve that owns the directory, whose client then finds them.
func TestIngestWhileServing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var stderr syncBuffer
	cs, _ := startServeAs(t, ctx, dir, "serve", &stderr)
	defer func() { assert.NoError(t, cs.Close(), "stderr: %s", stderr.String()) }()

	docs := t.TempDir()
	var lines []string
	for i := range 1200 { // more than one batch
		lines = append(lines, `{"id":"d-`+strconv.Itoa(i)+`","text":"common words and marker`+strconv.Itoa(i)+`"}`)
	}
	writeFiles(t, docs, map[string]string{"all.jsonl": strings.Join(lines, "\n")})
	cmd := exec.CommandContext(ctx, cruxBinary(t), "ingest", "--data", dir, "--tenant", "kb", filepath.Join(docs, "all.jsonl"))
	cmd.Env = subprocessEnv()
	out, err := cmd.Output()
	require.NoError(t, err, "%s", out)
	var sum map[string]any
	require.NoError(t, json.Unmarshal(out, &sum))
	assert.Equal(t, 1200.0, sum["documents"])

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "query", Arguments: map[string]any{"tenant_id": "kb", "query": "marker777"}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	b, _ := json.Marshal(res.StructuredContent)
	assert.Contains(t, string(b), `"doc_id":"d-777"`)
}
