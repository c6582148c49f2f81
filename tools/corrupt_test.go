package tools_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store"
)

// plantInvalidText rewrites the stored record of fact id so that its text
// marker holds an invalid UTF-8 byte: what an older version of crux wrote
// for an agent name or value that was not UTF-8.
func plantInvalidText(t *testing.T, db store.Backend, id, marker string) {
	t.Helper()
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		v, err := tx.Get("facts", []byte(id))
		require.NoError(t, err)
		require.True(t, bytes.Contains(v, []byte(marker)))
		bad := []byte(marker)
		bad[1] = 0xff
		return tx.Put("facts", []byte(id), bytes.ReplaceAll(v, []byte(marker), bad))
	}))
}

// An unreadable record in the shared pool no longer fails every agent's
// scans: each scan serves the other records, and the server logs the
// record once.
func TestScansServeAroundAnUnreadableRecord(t *testing.T) {
	var logs bytes.Buffer
	srv, _, db := newTestServer(t, withLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	good := storeID(t, srv, alice, `{"entity":"svc","key":"port","value":"port is 8080"}`)
	bad := storeID(t, srv, alice, `{"entity":"svc","key":"host","value":"host BADTEXT"}`)
	plantInvalidText(t, db, bad, "BADTEXT")

	calls := []struct{ tool, args string }{
		{"query_facts", `{}`},
		{"query_facts", `{"query":"host port"}`},
		{"query_facts", `{"entity":"svc"}`},
		{"memory_view", `{}`},
		{"fact_history", `{"entity":"svc","key":"host"}`},
		{"memory_freshness", `{}`},
		{"memory_sweep_candidates", `{}`},
		{"memory_forget_dry_run", `{"scope":{"type":"tenant_id","value":"default"}}`},
		{"memory_contradictions", `{"entity":"svc"}`},
	}
	for _, c := range []crux.Caller{alice, bob, anon} {
		for _, tc := range calls {
			res := result(t, srv, c, tc.tool, tc.args)
			require.False(t, res.IsError, "%s %s: %v", c.Name(), tc.tool, res.Content)
			assert.NotContains(t, res.Content[0].Text, bad, "%s %s", c.Name(), tc.tool)
		}
	}
	assert.Equal(t, []string{"port is 8080"}, values(t, call(t, srv, bob, "query_facts", `{}`)))
	assert.EqualValues(t, 1, call(t, srv, bob, "memory_view", `{}`)["returned"])

	// Writes that read the pair's chain go past it as well.
	call(t, srv, bob, "store_fact", `{"entity":"svc","key":"host","value":"host is db2"}`)
	assert.ElementsMatch(t, []string{"port is 8080", "host is db2"}, values(t, call(t, srv, bob, "query_facts", `{}`)))

	// Logged once, naming the record, for all those scans.
	assert.Equal(t, 1, strings.Count(logs.String(), "skipped an unreadable record"), logs.String())
	assert.Contains(t, logs.String(), "id="+bad)
	assert.Contains(t, logs.String(), "bucket=facts")
	assert.Contains(t, logs.String(), "invalid UTF-8")
	assert.NotContains(t, logs.String(), good)

	// Reading the record itself still fails, saying where it is and what to do.
	e := callErr(t, srv, bob, "delete_fact", `{"fact_id":"`+bad+`"}`)
	assert.Equal(t, crux.CodeInternalError, e.Code)
	assert.Contains(t, e.Message, bad)
	assert.Contains(t, e.Message, "crux doctor")
}
