package tools_test

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store/bolt"
)

// verdicts maps each axis of a scorecard to its verdict.
func verdicts(t *testing.T, out map[string]any) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, group := range []string{"four_questions", "exit_test"} {
		for _, p := range out[group].([]any) {
			pt := p.(map[string]any)
			m[pt["axis"].(string)] = pt["verdict"].(string)
			if _, ok := pt["evidence"]; !ok && out["evidence_trimmed"] != true {
				t.Errorf("%s has no evidence", pt["axis"])
			}
		}
	}
	return m
}

func TestContextCustodyAuditOff(t *testing.T) {
	srv, _, _ := newTestServer(t)
	out := call(t, srv, alice, "context_custody_audit", `{}`)
	assert.Equal(t, false, out["enabled"])
	assert.Contains(t, out["note"], "CRUX_CONTEXT_CUSTODY_AUDIT")
}

// An embedded server with every default: fail-open, an ephemeral key, no
// data directory it knows of.
func TestContextCustodyAuditDefaults(t *testing.T) {
	f := crux.DefaultFlags()
	f.ContextCustodyAudit = true
	srv, _, _ := newTestServer(t, withFlags(f))
	out := call(t, srv, alice, "context_custody_audit", `{}`)
	assert.Equal(t, true, out["enabled"])
	v := verdicts(t, out)
	assert.Equal(t, map[string]string{
		"SEE": "strong", "DO": "weak", "REMEMBER": "unknown", "CHECK": "weak",
		"EXPORT": "partial", "INSPECT": "partial", "REVOKE": "weak", "ROUTE": "weak", "KEEP-LOCAL": "strong", "PROVE": "weak",
	}, v)
	// partial 2 + weak 3×2 = 8 of 12: 1 + 8·4/12 rounded.
	assert.EqualValues(t, 4, out["lock_in_risk"])
	assert.Equal(t, "high", out["lock_in_label"])
	posture := out["trust_posture"].(map[string]any)
	assert.Contains(t, posture["standing_gap"], "DO")
	assert.NotEmpty(t, posture["recommendations"])

	trimmed := call(t, srv, alice, "context_custody_audit", `{"token_budget":50}`)
	assert.Equal(t, true, trimmed["evidence_trimmed"])
	assert.Equal(t, v, verdicts(t, trimmed), "trimming keeps the verdicts")
}

// The crux command's posture: a router, a persistent key in a private data
// directory, revocation and export on.
func TestContextCustodyAuditHardened(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	signer, err := receipts.LoadOrCreateKey(dir)
	require.NoError(t, err)
	db, err := bolt.Open(filepath.Join(dir, "crux.db"), &bolt.Options{NoSync: true})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	f := crux.DefaultFlags()
	f.ContextCustodyAudit, f.PassportRevocation, f.AuditExport, f.ReceiptVerify = true, true, true, true
	tok, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{Tenant: tenant, IssuedAt: time.Now(), Capabilities: crux.FreeLocalCapabilities(f)})
	require.NoError(t, err)
	router, err := rcx.NewRouter(tok, signer.Public(), nil)
	require.NoError(t, err)
	srv, err := crux.NewServer(db, &crux.Options{Flags: &f, Signer: signer, Router: router, DataDir: dir})
	require.NoError(t, err)
	call(t, srv, alice, "store_fact", `{"entity":"e","key":"k","value":"v"}`)

	out := call(t, srv, alice, "context_custody_audit", `{}`)
	v := verdicts(t, out)
	for axis, verdict := range v {
		assert.Equal(t, "strong", verdict, axis)
	}
	assert.EqualValues(t, 1, out["lock_in_risk"])
	assert.Empty(t, out["trust_posture"].(map[string]any)["recommendations"])
	for _, p := range out["four_questions"].([]any) {
		pt := p.(map[string]any)
		switch pt["axis"] {
		case "REMEMBER":
			assert.Contains(t, pt["evidence"], "mode 0700")
		case "CHECK":
			assert.Contains(t, pt["evidence"], filepath.Join(dir, receipts.KeyFileName))
		case "DO":
			assert.Contains(t, pt["evidence"], tok.TokenID)
		case "SEE":
			assert.Contains(t, pt["evidence"], "1 versions")
		}
	}

	// Open the directory to others, and the verdict follows.
	if runtime.GOOS != "windows" {
		require.NoError(t, os.Chmod(dir, 0o755))
		out = call(t, srv, alice, "context_custody_audit", `{}`)
		assert.Equal(t, "weak", verdicts(t, out)["REMEMBER"])
		assert.Contains(t, out["trust_posture"].(map[string]any)["recommendations"], "chmod 700 "+dir+" and 600 the files in it")
	}
}
