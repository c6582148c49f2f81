package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/c2pa"
)

// TestAttestAndVerifyOutput runs output_attest through crux call, with the
// root CA created in the data directory on first use, and checks the
// manifest with crux verify output: as the saved answer, as the .c2pa
// file, against a tampered asset, another root, and with the receipt it
// binds.
func TestAttestAndVerifyOutput(t *testing.T) {
	dir, root, work := t.TempDir(), t.TempDir(), t.TempDir()
	e := env{"CRUX_AGENT": "tester", "CORECRUXD_FEATURE_C2PA_OUTPUT": "1", "CRUX_ATTEST_ROOT": root}
	asset := filepath.Join(root, "answer.md")
	require.NoError(t, os.WriteFile(asset, []byte("# Answer\n\nThe build is green.\n"), 0o600))

	r := runCrux(t, env{"CRUX_AGENT": "tester"}, "", "call", "--data", dir, "record_decision", `{"action":"ship","rationale":"green"}`)
	require.Equal(t, exitOK, r.code, r.stderr)
	crown := decodeCall(t, r.stdout).StructuredContent["receipt_id"].(string)
	_, err := os.Stat(filepath.Join(dir, c2pa.CACertFileName))
	require.ErrorIs(t, err, os.ErrNotExist, "no CA before a server with output_attest on")

	r = runCrux(t, e, "", "call", "--data", dir, "output_attest", `{"receipt_id":"`+crown+`","content_path":"answer.md","content_type":"text/markdown"}`)
	require.Equal(t, exitOK, r.code, r.stderr)
	out := decodeCall(t, r.stdout)
	require.Nil(t, out.IsError, r.stdout)
	for _, name := range []string{c2pa.CAKeyFileName, c2pa.CACertFileName} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), name)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, c2pa.CACertFileName))
	require.NoError(t, err)

	answer := filepath.Join(work, "answer.json")
	require.NoError(t, os.WriteFile(answer, []byte(r.stdout), 0o600))
	m := out.StructuredContent["manifest"].(map[string]any)
	jumbf, err := base64.StdEncoding.DecodeString(m["manifest_jumbf_base64"].(string))
	require.NoError(t, err)
	sidecar := filepath.Join(work, "answer.md.c2pa")
	require.NoError(t, os.WriteFile(sidecar, jumbf, 0o600))
	b64 := filepath.Join(work, "answer.b64")
	require.NoError(t, os.WriteFile(b64, []byte(m["manifest_jumbf_base64"].(string)+"\n"), 0o600))

	for _, mf := range []string{answer, sidecar, b64} {
		r = runCrux(t, nil, "", "verify", "output", "--data", dir, mf, asset)
		require.Equal(t, exitOK, r.code, "%s: %s", mf, r.stderr)
		var rep outputReport
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
		assert.True(t, rep.OK)
		assert.Equal(t, m["manifest_id"], rep.ManifestLabel)
		assert.Equal(t, crown, rep.Receipt.ReceiptID)
		assert.Equal(t, "text/markdown", rep.Receipt.ContentType)
	}

	// A second attestation, by another process, uses the same root.
	r = runCrux(t, e, "", "call", "--data", dir, "output_attest", `{"receipt_id":"`+crown+`","content_bytes_base64":"aGk="}`)
	require.Equal(t, exitOK, r.code, r.stderr)
	again, err := os.ReadFile(filepath.Join(dir, c2pa.CACertFileName))
	require.NoError(t, err)
	assert.Equal(t, caPEM, again, "the CA is created once")

	// Tampered asset.
	tampered := filepath.Join(work, "tampered.md")
	require.NoError(t, os.WriteFile(tampered, []byte("# Answer\n\nThe build is red.\n"), 0o600))
	r = runCrux(t, nil, "", "verify", "output", "--data", dir, sidecar, tampered)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "DATA_HASH_MISMATCH")

	// Another root.
	other, err := c2pa.NewCA(time.Now())
	require.NoError(t, err)
	otherPEM := filepath.Join(work, "other.pem")
	require.NoError(t, os.WriteFile(otherPEM, other.CertificatePEM(), 0o600))
	r = runCrux(t, nil, "", "verify", "output", "--roots", otherPEM, sidecar, asset)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "CERT_UNTRUSTED")

	// No trust anchors at all.
	r = runCrux(t, nil, "", "verify", "output", "--data", t.TempDir(), sidecar, asset)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "no trust anchors")

	// With the receipt it binds, and with another.
	exported := filepath.Join(work, "crown.json")
	r = runCrux(t, nil, "", "export", "receipt", "--data", dir, crown)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.NoError(t, os.WriteFile(exported, []byte(r.stdout), 0o600))
	r = runCrux(t, nil, "", "verify", "output", "--data", dir, "--receipt", exported, sidecar, asset)
	require.Equal(t, exitOK, r.code, r.stderr)
	attestID := out.StructuredContent["attest_receipt_id"].(string)
	r = runCrux(t, nil, "", "export", "receipt", "--data", dir, attestID)
	require.Equal(t, exitOK, r.code, r.stderr)
	wrong := filepath.Join(work, "attest.json")
	require.NoError(t, os.WriteFile(wrong, []byte(r.stdout), 0o600))
	r = runCrux(t, nil, "", "verify", "output", "--data", dir, "--receipt", wrong, sidecar, asset)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "RECEIPT_MISMATCH")

	// Not a manifest; usage.
	r = runCrux(t, nil, "", "verify", "output", "--data", dir, asset, asset)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "neither a C2PA manifest store")
	r = runCrux(t, nil, "", "verify", "output", "--data", dir, sidecar)
	assert.Equal(t, exitUsage, r.code)
}
