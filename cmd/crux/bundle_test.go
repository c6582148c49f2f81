package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// An audit bundle made by crux call verifies with crux verify bundle,
// offline and with the data directory's keyring; a changed byte or a
// foreign keyring fails with a named code.
func TestVerifyBundle(t *testing.T) {
	dir := t.TempDir()
	e := env{"CORECRUXD_FEATURE_AUDIT_EXPORT": "1"}
	r := runCrux(t, e, "", "call", "--data", dir, "--agent", "tester", "store_fact", `{"entity":"e","key":"k","value":"v"}`)
	require.Equal(t, exitOK, r.code, r.stderr)
	r = runCrux(t, e, "", "call", "--data", dir, "--agent", "tester", "audit_export_bundle", `{"token_budget":100}`)
	require.Equal(t, exitOK, r.code, r.stderr)
	out := decodeCall(t, r.stdout)
	require.Nil(t, out.IsError, r.stdout)
	path := out.StructuredContent["bytes_path"].(string)
	assert.Equal(t, filepath.Join(dir, "exports"), filepath.Dir(path), "exports/ in the data directory by default")
	assert.Equal(t, "persistent", out.StructuredContent["key_class"], "the data directory's key")

	r = runCrux(t, nil, "", "verify", "bundle", path)
	require.Equal(t, exitOK, r.code, r.stderr)
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	assert.Equal(t, "OK", rep["error_code"])
	assert.EqualValues(t, 1, rep["fact_count"])
	assert.Contains(t, r.stderr, "give --keyring")

	kr := runCrux(t, nil, "", "keys", "export", "--data", dir)
	require.Equal(t, exitOK, kr.code, kr.stderr)
	keyring := filepath.Join(t.TempDir(), "keyring.json")
	require.NoError(t, os.WriteFile(keyring, []byte(kr.stdout), 0o600))
	r = runCrux(t, nil, "", "verify", "bundle", "--keyring", keyring, path)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Empty(t, r.stderr)

	other := runCrux(t, nil, "", "keys", "export", "--data", t.TempDir())
	require.NoError(t, os.WriteFile(keyring, []byte(other.stdout), 0o600))
	r = runCrux(t, nil, "", "verify", "bundle", "--keyring", keyring, path)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "KEY_NOT_FOUND")

	data, err := os.ReadFile(path)
	require.NoError(t, err)
	data[len(data)/2] ^= 1
	bad := filepath.Join(t.TempDir(), "bad.tar.zst")
	require.NoError(t, os.WriteFile(bad, data, 0o600))
	r = runCrux(t, nil, "", "verify", "bundle", bad)
	assert.Equal(t, exitFailure, r.code)
	assert.True(t, strings.Contains(r.stderr, "BUNDLE_UNREADABLE") || strings.Contains(r.stderr, "BUNDLE_SEAL_INVALID"), r.stderr)

	r = runCrux(t, nil, "", "verify", "bundle")
	assert.Equal(t, exitUsage, r.code)
}
