package memstore_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/examples/memstore"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/storetest"
)

// TestConformance: a backend proves the store contract with one call.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Backend {
		s := memstore.New()
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestServesCrux: the custom store runs a crux server.
func TestServesCrux(t *testing.T) {
	srv, err := crux.NewServer(memstore.New(), nil)
	require.NoError(t, err)
	c := crux.Caller{Agent: "a", Authenticated: true}
	_, err = srv.CallTool(context.Background(), c, "store_fact", json.RawMessage(`{"entity":"e","key":"k","value":"in memory"}`))
	require.NoError(t, err)
	res, err := srv.CallTool(context.Background(), c, "query_facts", json.RawMessage(`{"query":"memory"}`))
	require.NoError(t, err)
	require.Contains(t, res.Content[0].Text, `"value":"in memory"`)
}
