package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store/bolt"
)

// forgetFact stores value and forgets it through crux call, returning the
// forget receipt id.
func forgetFact(t *testing.T, dir, value string) string {
	t.Helper()
	r := runCrux(t, nil, "", "call", "--data", dir, "--agent", "tester", "store_fact",
		`{"entity":"vault","key":"code","value":"`+value+`"}`)
	require.Equal(t, exitOK, r.code, r.stderr)
	r = runCrux(t, nil, "", "call", "--data", dir, "--agent", "tester", "memory_forget",
		`{"scope":{"type":"entity_prefix","value":"vault"},"reason":"test"}`)
	require.Equal(t, exitOK, r.code, r.stderr)
	out := decodeCall(t, r.stdout)
	require.Nil(t, out.Error)
	id, _ := out.StructuredContent["forget_receipt_id"].(string)
	require.NotEmpty(t, id)
	return id
}

func TestForgetRestoreCommand(t *testing.T) {
	dir := t.TempDir()
	id := forgetFact(t, dir, "restore-me")
	r := runCrux(t, nil, "", "call", "--data", dir, "query_facts", `{}`)
	assert.NotContains(t, r.stdout, "restore-me")

	r = runCrux(t, nil, "", "forget", "restore", "--data", dir, id)
	require.Equal(t, exitOK, r.code, r.stderr)
	var rep crux.RestoreReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	assert.Equal(t, id, rep.ForgetReceiptID)
	assert.Len(t, rep.RestoredFactIDs, 1)
	r = runCrux(t, nil, "", "call", "--data", dir, "query_facts", `{}`)
	assert.Contains(t, r.stdout, "restore-me")

	// The restore receipt verifies offline with the data directory's key.
	r = runCrux(t, nil, "", "verify", "receipt", "--data", dir, rep.RestoreReceiptID)
	assert.Equal(t, exitOK, r.code, r.stderr)

	// Only once.
	r = runCrux(t, nil, "", "forget", "restore", "--data", dir, id)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "was restored at")
	assert.Empty(t, r.stdout)

	r = runCrux(t, nil, "", "forget", "restore", "--data", dir, "r_unknown")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "no forget r_unknown")
}

// serverInThePast opens the store of dir (created if need be; opts as
// bolt.Open takes them) and returns a server over it whose clock stands ten
// days ago, signing with the data directory's key, so that the recovery
// window of any forget it makes has ended now. closeAll closes the server
// and the store.
func serverInThePast(t *testing.T, dir string, opts *bolt.Options) (srv *crux.Server, closeAll func()) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o700))
	db, err := bolt.Open(filepath.Join(dir, dbFile), opts)
	require.NoError(t, err)
	signer, err := receipts.LoadOrCreateKey(dir)
	require.NoError(t, err)
	then := time.Now().Add(-10 * 24 * time.Hour)
	srv, err = crux.NewServer(db, &crux.Options{Signer: signer, Now: func() time.Time { return then }})
	require.NoError(t, err)
	return srv, func() { srv.Close(); db.Close() }
}

// forgetInThePast makes a forget ten days ago in the store of dir, so that
// its recovery window has ended now.
func forgetInThePast(t *testing.T, dir, secret string) string {
	t.Helper()
	srv, closeAll := serverInThePast(t, dir, nil)
	defer closeAll()
	ctx := context.Background()
	tester := crux.Caller{Agent: "tester", Authenticated: true}
	_, err := srv.CallTool(ctx, tester, "store_fact", json.RawMessage(`{"entity":"vault","key":"code","value":"`+secret+`"}`))
	require.NoError(t, err)
	res, err := srv.CallTool(ctx, tester, "memory_forget", json.RawMessage(`{"scope":{"type":"entity_prefix","value":"vault"},"reason":"test"}`))
	require.NoError(t, err)
	var out struct {
		ID string `json:"forget_receipt_id"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Content[0].Text), &out))
	return out.ID
}

// purgeFileContains reports whether the store file of dir holds s.
func purgeFileContains(t *testing.T, dir, s string) bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, dbFile))
	require.NoError(t, err)
	return bytes.Contains(b, []byte(s))
}

func TestPurgeCommand(t *testing.T) {
	dir := t.TempDir()
	const secret = "cli-purge-secret-4411"
	id := forgetInThePast(t, dir, secret)
	require.True(t, purgeFileContains(t, dir, secret))

	r := runCrux(t, nil, "", "purge", "--data", dir)
	require.Equal(t, exitOK, r.code, r.stderr)
	var rep crux.PurgeReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Len(t, rep.Purged, 1, r.stdout)
	assert.Equal(t, id, rep.Purged[0].ForgetReceiptID)
	assert.Len(t, rep.Purged[0].PurgedFactIDs, 1)
	assert.True(t, rep.Compacted)
	assert.False(t, purgeFileContains(t, dir, secret), "the purged value is gone from the file")

	r = runCrux(t, nil, "", "verify", "receipt", "--data", dir, rep.Purged[0].PurgeReceiptID)
	assert.Equal(t, exitOK, r.code, r.stderr)
	r = runCrux(t, nil, "", "forget", "restore", "--data", dir, id)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "was purged at")

	// Nothing left to purge.
	r = runCrux(t, nil, "", "purge", "--data", dir)
	require.Equal(t, exitOK, r.code, r.stderr)
	rep = crux.PurgeReport{}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	assert.Empty(t, rep.Purged)
	assert.False(t, rep.Compacted)
}

func TestForgetCommandUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"forget without restore", []string{"forget", "r_1"}, `"restore"`},
		{"restore without id", []string{"forget", "restore", "--data", dir}, "one forget receipt id"},
		{"restore two ids", []string{"forget", "restore", "--data", dir, "r_1", "r_2"}, "one forget receipt id"},
		{"restore as an agent", []string{"forget", "restore", "--data", dir, "--agent", "a", "r_1"}, "--agent does not apply"},
		{"purge arguments", []string{"purge", "--data", dir, "now"}, "now"},
		{"purge as an agent", []string{"purge", "--data", dir, "--agent", "a"}, "--agent does not apply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCrux(t, nil, "", tc.args...)
			assert.Equal(t, exitUsage, r.code)
			assert.Empty(t, r.stdout)
			assert.Contains(t, r.stderr, tc.want)
		})
	}
	for _, args := range [][]string{{"purge", "--data", dir}, {"forget", "restore", "--data", dir, "r_1"}} {
		r := runCrux(t, nil, "", args...)
		assert.Equal(t, exitFailure, r.code)
		assert.Contains(t, r.stderr, "no store at")
		assert.NoFileExists(t, filepath.Join(dir, dbFile), "an operator command never creates a store")
	}
	r := runCrux(t, nil, "", "help")
	assert.Contains(t, r.stdout, "crux forget restore [--data DIR] RECEIPT_ID")
	assert.Contains(t, r.stdout, "crux purge [--data DIR]")
}
