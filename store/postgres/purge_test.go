package postgres_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store/postgres"
)

// containsValue reports whether any row of kv, in key or value, holds s.
func containsValue(t *testing.T, db *postgres.DB, s string) bool {
	t.Helper()
	n, err := db.CountRowsHolding(context.Background(), []byte(s))
	require.NoError(t, err)
	return n > 0
}

// A forgotten fact's value is in the database until its recovery window
// ends; then crux purge deletes it, and no row holds it any more.
func TestPurgeRemovesTheValue(t *testing.T) {
	db := openTest(t)
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	srv, err := crux.NewServer(db, &crux.Options{Now: clock})
	require.NoError(t, err)
	defer srv.Close()
	alice := crux.Caller{Agent: "alice", Authenticated: true}
	call := func(tool, args string) map[string]any {
		t.Helper()
		res, err := srv.CallTool(context.Background(), alice, tool, json.RawMessage(args))
		require.NoError(t, err)
		require.False(t, res.IsError, "%v", res.Content)
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(res.Content[0].Text), &out))
		return out
	}
	const secret = "purge-me-7f3c9e1a-the-launch-code-is-0000"
	call("store_fact", `{"entity":"vault","key":"code","value":"`+secret+`"}`)
	call("store_fact", `{"entity":"vault","key":"label","value":"keep me"}`)
	call("memory_forget", `{"scope":{"type":"key_glob","value":"code"},"reason":"rotate"}`)
	require.True(t, containsValue(t, db, secret), "within the window the value is kept for a restore")

	mu.Lock()
	now = now.Add(7*24*time.Hour + time.Second)
	mu.Unlock()
	rep, err := srv.Purge(context.Background())
	require.NoError(t, err)
	require.Len(t, rep.Purged, 1)
	assert.True(t, rep.Compacted, "VACUUM ran")
	assert.False(t, containsValue(t, db, secret), "no row holds the purged value")
	assert.True(t, containsValue(t, db, "keep me"))
}
