package tools_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/receipttest"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/tools"
)

// exportServer is a test server with audit export on, writing to dir.
func exportServer(t *testing.T, dir string) (*crux.Server, *clock, *bolt.DB) {
	t.Helper()
	f := crux.DefaultFlags()
	f.AuditExport = true
	f.AuditExportDir = dir
	return newTestServer(t, withFlags(f))
}

// readBundle reads the bundle a call wrote and checks that it verifies
// with the server's keyring.
func readBundle(t *testing.T, srv *crux.Server, out map[string]any) *receipts.Bundle {
	t.Helper()
	path := out["bytes_path"].(string)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.EqualValues(t, len(data), out["bytes"])
	rep := receipts.VerifyBundle(data, srv.Keyring(), time.Now())
	require.True(t, rep.OK(), "%s: %s", rep.ErrorCode, rep.ErrorMessage)
	b, err := receipts.ReadBundle(data)
	require.NoError(t, err)
	return b
}

func TestAuditExportBundle(t *testing.T) {
	dir := t.TempDir()
	srv, clk, _ := exportServer(t, dir)
	first := call(t, srv, alice, "store_fact", `{"entity":"project:crux","key":"lang","value":"Go"}`)
	clk.Advance(time.Minute)
	call(t, srv, alice, "store_fact", `{"entity":"project:crux","key":"lang","value":"Go 1.26"}`)
	call(t, srv, alice, "store_fact", `{"entity":"project:crux","key":"secret","value":"mine","private":true}`)
	gone := call(t, srv, bob, "store_fact", `{"entity":"other","key":"k","value":"deleted later"}`)
	call(t, srv, bob, "delete_fact", `{"fact_id":"`+gone["fact_id"].(string)+`"}`)
	call(t, srv, alice, "record_decision", `{"action":"ship","rationale":"ready"}`)
	clk.Advance(time.Minute)

	out := call(t, srv, alice, "audit_export_bundle", `{"token_budget":1000}`)
	b := readBundle(t, srv, out)
	assert.Equal(t, dir, filepath.Dir(out["bytes_path"].(string)))
	assert.Equal(t, "audit-"+out["bundle_id"].(string)+".tar.zst", filepath.Base(out["bytes_path"].(string)))
	if runtime.GOOS != "windows" {
		fi, err := os.Stat(out["bytes_path"].(string))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	}
	var values []string
	for _, e := range b.Events {
		values = append(values, e.Value)
	}
	assert.Equal(t, []string{"Go", "Go 1.26"}, values, "both versions, oldest first; no private, deleted or reserved fact")
	assert.Equal(t, first["fact_id"], b.Events[0].FactID)
	assert.Equal(t, b.Events[0].FactID, b.Events[1].Supersedes)
	assert.EqualValues(t, 2, out["fact_count"])
	assert.Equal(t, false, out["facts_truncated"])
	assert.Equal(t, receipts.KeyClassEphemeral, out["key_class"], "the server made its own key")
	kinds := []string{}
	for _, r := range b.Receipts {
		kinds = append(kinds, r.Kind)
	}
	assert.Contains(t, kinds, "decision")
	assert.EqualValues(t, len(b.Receipts), out["receipt_count"])
	assert.Equal(t, b.Manifest.SignatureB64, out["manifest_signature_b64"])

	// The export minted a receipt; the next bundle carries it.
	id := out["export_receipt_id"].(string)
	clk.Advance(time.Minute)
	next := readBundle(t, srv, call(t, srv, alice, "audit_export_bundle", `{"token_budget":1000}`))
	found := false
	for _, r := range next.Receipts {
		if r.ID == id {
			found = true
			assert.Equal(t, "audit_export", r.Kind)
		}
	}
	assert.True(t, found, "the first export's receipt is in the second bundle")

	// The budget cuts the facts, oldest first, and says so.
	cut := call(t, srv, alice, "audit_export_bundle", `{"token_budget":1}`)
	assert.EqualValues(t, 1, cut["fact_count"])
	assert.EqualValues(t, 2, cut["facts_in_window"])
	assert.Equal(t, true, cut["facts_truncated"])
	assert.Equal(t, "Go", readBundle(t, srv, cut).Events[0].Value)

	// A window and a prefix.
	since := start.Add(30 * time.Second).Format(time.RFC3339)
	win := readBundle(t, srv, call(t, srv, alice, "audit_export_bundle", `{"token_budget":1000,"since_ts":"`+since+`","scope":{"entity_prefix":"project:"}}`))
	require.Len(t, win.Events, 1)
	assert.Equal(t, "Go 1.26", win.Events[0].Value)
	none := call(t, srv, alice, "audit_export_bundle", `{"token_budget":1000,"scope":{"entity_prefix":"nothing:"}}`)
	assert.EqualValues(t, 0, none["fact_count"])
}

func TestAuditExportBundleErrors(t *testing.T) {
	srv, _, _ := newTestServer(t)
	e := callErr(t, srv, alice, "audit_export_bundle", `{"token_budget":10}`)
	assert.Equal(t, crux.CodeCapabilityDenied, e.Code, "off by default")

	srv, _, _ = exportServer(t, t.TempDir())
	e = callErr(t, srv, alice, "audit_export_bundle", `{}`)
	assert.Equal(t, crux.CodeInvalidParams, e.Code)
	assert.Contains(t, e.Message, "token_budget")
	for args, param := range map[string]string{
		`{"token_budget":0}`:                                                                     "token_budget",
		`{"token_budget":5,"since_ts":"yesterday"}`:                                              "since_ts",
		`{"token_budget":5,"until_ts":"2026-13-01T00:00:00Z"}`:                                   "until_ts",
		`{"token_budget":5,"since_ts":"2026-03-02T00:00:00Z","until_ts":"2026-03-01T00:00:00Z"}`: "since_ts",
		`{"token_budget":5,"scope":{"nope":true}}`:                                               "scope",
	} {
		e := callErr(t, srv, alice, "audit_export_bundle", args)
		assert.Equal(t, crux.CodeInvalidParams, e.Code, args)
		assert.Contains(t, e.Message, param, args)
	}
	e = callErr(t, srv, alice, "audit_export_bundle", `{"token_budget":5,"scope":{"include_reserved":true}}`)
	assert.Equal(t, crux.CodeForbidden, e.Code, "reserved entities need an operator")

	// Nowhere to write.
	f := crux.DefaultFlags()
	f.AuditExport = true
	srv, _, _ = newTestServer(t, withFlags(f))
	assert.Contains(t, toolError(t, srv, alice, "audit_export_bundle", `{"token_budget":5}`), "CORECRUXD_AUDIT_EXPORT_DIR")
}

// Without CORECRUXD_AUDIT_EXPORT_DIR bundles go to exports/ in the data
// directory.
func TestAuditExportBundleDataDir(t *testing.T) {
	data := t.TempDir()
	db, err := bolt.Open(filepath.Join(data, "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	f := crux.DefaultFlags()
	f.AuditExport = true
	srv, err := crux.NewServer(db, &crux.Options{Flags: &f, DataDir: data})
	require.NoError(t, err)
	out := call(t, srv, alice, "audit_export_bundle", `{"token_budget":5}`)
	assert.Equal(t, filepath.Join(data, "exports"), filepath.Dir(out["bytes_path"].(string)))
	assert.Equal(t, receipts.KeyClassEphemeral, out["key_class"], "a server without a signer makes an ephemeral key")
	readBundle(t, srv, out)
}

// An operator may add crux's reserved entities; private facts stay out.
func TestAuditExportBundleReserved(t *testing.T) {
	f := crux.DefaultFlags()
	f.AuditExport, f.AuditExportDir = true, t.TempDir()
	signer := newSigner(t)
	srv, clk, db := newTestServer(t, withFlags(f), withSigner(signer))
	call(t, srv, alice, "record_decision", `{"action":"ship","rationale":"ready"}`)
	call(t, srv, alice, "store_fact", `{"entity":"e","key":"k","value":"mine","private":true}`)
	clk.Advance(time.Second) // until_ts defaults to now, exclusive
	e := callErr(t, srv, alice, "audit_export_bundle", `{"token_budget":1000,"scope":{"include_reserved":true}}`)
	assert.Equal(t, crux.CodeForbidden, e.Code)
	assert.Contains(t, e.Message, "scope.include_reserved needs a passport of tier trusted")
	call(t, srv, alice, "issue_passport", `{}`)
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		return receipttest.Earn(tx, signer, tenant, "alice", 500, start) // signed by the server's key
	}))
	out := call(t, srv, alice, "audit_export_bundle", `{"token_budget":100000,"scope":{"include_reserved":true}}`)
	b := readBundle(t, srv, out)
	assert.Equal(t, true, out["scope"].(map[string]any)["include_reserved"])
	var decisions, private int
	for _, ev := range b.Events {
		if strings.HasPrefix(ev.Entity, "__decisions__::") {
			decisions++
		}
		if ev.Value == "mine" {
			private++
		}
	}
	assert.Equal(t, 1, decisions)
	assert.Zero(t, private)
}

// The export directory is bounded: at tools.MaxExportBundles bundles an
// export is refused, writing nothing and minting no receipt; once those
// bundles are older than tools.ExportRetention, the next export removes
// them and is written.
func TestAuditExportBundleDirectoryIsBounded(t *testing.T) {
	dir := t.TempDir()
	srv, clk, db := exportServer(t, dir)
	var planted []string
	for i := range tools.MaxExportBundles {
		p := filepath.Join(dir, fmt.Sprintf("audit-planted-%d.tar.zst", i))
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o600))
		require.NoError(t, os.Chtimes(p, clk.Now(), clk.Now()))
		planted = append(planted, p)
	}
	before := receiptCount(t, db)
	msg := toolError(t, srv, alice, "audit_export_bundle", `{"token_budget":5}`)
	assert.Contains(t, msg, fmt.Sprintf("holds %d bundles", tools.MaxExportBundles))
	assert.Contains(t, msg, "an operator may collect bundles from the directory sooner")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, tools.MaxExportBundles, "nothing written")
	assert.Equal(t, before, receiptCount(t, db), "no receipt for a bundle not written")

	clk.Advance(tools.ExportRetention)
	out := call(t, srv, alice, "audit_export_bundle", `{"token_budget":5}`)
	readBundle(t, srv, out)
	for _, p := range planted {
		assert.NoFileExists(t, p)
	}
}
