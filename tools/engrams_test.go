package tools_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store/bolt"
)

// engramServer is a server with engram_resolve on, reading dir.
func engramServer(t *testing.T, dir string) *crux.Server {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	f := crux.DefaultFlags()
	f.EngramMCP = true
	srv, err := crux.NewServer(db, &crux.Options{Flags: &f, EngramDir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return srv
}

func TestEngramResolve(t *testing.T) {
	dir := t.TempDir()
	writeFile := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	writeFile("careful-edit.md", "---\nname: careful-edit\nversion: 1.0\nintent_bucket: code_change\napplicable_why: edits to shared code\n---\nRead the tests before editing.\n")
	writeFile("deep-review.md", "---\nname: deep-review\nversion: 2\nmin_class: frontier\n---\nReview every caller.")
	writeFile("plain.txt", "No front matter: name plain, version 1.")
	writeFile("broken.md", "---\nname: broken\nno closing line")
	srv := engramServer(t, dir)
	ctx := context.Background()
	require.NoError(t, srv.PutEngram(ctx, tenant, crux.Engram{Name: "careful-edit", Version: "1.0", IntentBucket: "code_change", Content: "Stored wins over the file."}))
	require.NoError(t, srv.PutEngram(ctx, tenant, crux.Engram{Name: "deploy", Version: "3", IntentBucket: "ops", Content: "Check the canary first."}))
	require.Error(t, srv.PutEngram(ctx, tenant, crux.Engram{Name: "bad name", Version: "1", Content: "x"}))

	got := call(t, srv, alice, "engram_resolve", `{}`)
	assert.Equal(t, "capable", got["capability_class"], "no model_id")
	var refs []string
	for _, e := range objects(t, got, "engram_manifest") {
		refs = append(refs, e["ref"].(string)+":"+e["source"].(string))
		assert.NotContains(t, e, "content", "the manifest holds no content")
		assert.True(t, strings.HasPrefix(e["prompt_hash"].(string), "blake3:"))
	}
	assert.Equal(t, []string{"careful-edit@1.0:store", "deep-review@2:file", "deploy@3:store", "plain@1:file"}, refs)
	assert.Equal(t, 1.0, got["files_skipped"], "the broken file")
	hash := got["manifest_hash"]
	again := call(t, srv, alice, "engram_resolve", `{}`)
	assert.Equal(t, hash, again["manifest_hash"], "deterministic")

	bucket := call(t, srv, alice, "engram_resolve", `{"intent_bucket":"ops"}`)
	assert.Len(t, objects(t, bucket, "engram_manifest"), 1)

	res := call(t, srv, alice, "engram_resolve", `{"names":["careful-edit@1.0","deep-review@2","nope@1"],"model_id":"claude-haiku-4"}`)
	assert.Equal(t, "fast", res["capability_class"])
	engrams := objects(t, res, "engrams")
	require.Len(t, engrams, 1)
	assert.Equal(t, "Stored wins over the file.", engrams[0]["content"])
	withheld := objects(t, res, "withheld")
	require.Len(t, withheld, 1)
	assert.Equal(t, "deep-review@2", withheld[0]["ref"])
	assert.Equal(t, []any{"nope@1"}, res["missing"])

	res = call(t, srv, alice, "engram_resolve", `{"names":["deep-review@2"],"model_id":"claude-opus-4-5"}`)
	assert.Equal(t, "frontier", res["capability_class"])
	assert.Equal(t, "Review every caller.", objects(t, res, "engrams")[0]["content"])
	assert.NotEmpty(t, res["engram_set_hash"])

	assertInvalidParam(t, callErr(t, srv, alice, "engram_resolve", `{"names":["ok@1","no-version"]}`),
		"engram_resolve", "names[1]", `"no-version" is not name@version`)

	gone, err := srv.DeleteEngram(ctx, tenant, "careful-edit@1.0")
	require.NoError(t, err)
	assert.True(t, gone)
	res = call(t, srv, alice, "engram_resolve", `{"names":["careful-edit@1.0"]}`)
	assert.Equal(t, "Read the tests before editing.", objects(t, res, "engrams")[0]["content"], "the file shows again")
}

func TestEngramResolveFlagAndTenants(t *testing.T) {
	srv, _, _ := newTestServer(t)
	e := callErr(t, srv, alice, "engram_resolve", `{}`)
	assert.Equal(t, crux.CodeCapabilityDenied, e.Code)

	srv = engramServer(t, "")
	acme := crux.Caller{Agent: "ann", Authenticated: true, Tenant: "acme"}
	require.NoError(t, srv.PutEngram(context.Background(), "acme", crux.Engram{Name: "a", Version: "1", Content: "acme only"}))
	assert.Len(t, objects(t, call(t, srv, acme, "engram_resolve", `{}`), "engram_manifest"), 1, "its own tenant by default")
	assert.Empty(t, objects(t, call(t, srv, alice, "engram_resolve", `{}`), "engram_manifest"))
	assert.Len(t, objects(t, call(t, srv, alice, "engram_resolve", `{"tenant_id":"acme"}`), "engram_manifest"), 1)
	assert.Equal(t, crux.CodeForbidden, callErr(t, srv, acme, "engram_resolve", `{"tenant_id":"default"}`).Code)
}

func TestCapabilityClass(t *testing.T) {
	srv := engramServer(t, "")
	for model, want := range map[string]string{
		"claude-3-5-haiku": "fast", "gpt-4o-mini": "fast", "gemini-2.0-flash": "fast", "o3-mini": "fast",
		"claude-opus-4-1": "frontier", "gpt-5": "frontier", "o3": "frontier", "gemini-2.5-pro": "frontier", "gpt5.1": "frontier",
		"claude-sonnet-4-5": "capable", "gpt-4.1": "capable", "llama-3.1-70b": "capable",
	} {
		got := call(t, srv, alice, "engram_resolve", `{"model_id":"`+model+`"}`)
		assert.Equal(t, want, got["capability_class"], model)
	}
}
