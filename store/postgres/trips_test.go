package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/pgtest"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/postgres"
)

// tripCounter is a pgx tracer counting round trips: each batch sent is
// one, and so is each statement sent alone.
type tripCounter struct{ n atomic.Int64 }

func (c *tripCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *tripCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *tripCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *tripCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *tripCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// The round trips of the tools, counted by a pgx tracer on the store's
// connections: a store_fact alone makes two (its reads with the BEGIN,
// its writes with the COMMIT), three when it retires a current version
// (whose record it reads); 32 concurrent ones, held to one batch, share
// its few round trips; query (documents) and query_facts by keyword make
// two each (the index, then the records it names), and query_facts one
// more for each further 16 candidates it must read to know its result
// (here all 43 facts holding "topic3"). A View's ROLLBACK makes none: it
// goes with the first statements of the next transaction (the connection
// stays parked here for as long as the test runs, so that it always
// does), and costs the next call no round trip either.
func TestToolRoundTrips(t *testing.T) {
	ctx := context.Background()
	schema, _ := pgtest.Schema(t, "crux_test")
	trips := &tripCounter{}
	db, err := postgres.Open(ctx, pgtest.DSN(t), &postgres.Options{Schema: schema, Tracer: trips})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	postgres.SetParkFor(db, time.Hour)
	srv, err := crux.NewServer(db, nil)
	require.NoError(t, err)
	caller := crux.Caller{Agent: "tester", Authenticated: true}
	call := func(name, args string) {
		t.Helper()
		res, err := srv.CallTool(ctx, caller, name, json.RawMessage(args))
		require.NoError(t, err)
		require.False(t, res.IsError, "%s: %s", name, res.Content[0].Text)
	}
	count := func(f func()) int64 {
		postgres.RoundTrips(db) // the rollbacks of earlier Views are done
		before := trips.n.Load()
		f()
		postgres.RoundTrips(db)
		return trips.n.Load() - before
	}
	for i := range 300 {
		call("store_fact", fmt.Sprintf(`{"entity":"project:%d","key":"k","value":"note %d on topic%d","confidence":%g}`, i%40, i, i%7, float64(1+i%97)/100))
	}
	for i := range 12 {
		call("store_fact", fmt.Sprintf(`{"entity":"project:rare%d","key":"k","value":"a rare note %d"}`, i, i))
	}
	_, err = srv.Ingest(ctx, caller.TenantID(), []crux.Document{
		{ID: "a", Text: "PostgreSQL keeps the facts of many machines"},
		{ID: "b", Text: "bbolt keeps the facts of one machine"},
	}, nil)
	require.NoError(t, err)

	got := map[string]int64{}
	got["store_fact"] = count(func() { call("store_fact", `{"entity":"project:new","key":"k","value":"a new note"}`) })
	got["store_fact new version"] = count(func() { call("store_fact", `{"entity":"project:new","key":"k","value":"a newer note"}`) })
	got["store_fact x32"] = count(func() {
		// A first call holds the batch open until the 32 have joined it.
		release := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			assert.NoError(t, db.Update(ctx, func(tx store.Tx) error {
				<-release
				return nil
			}))
		})
		for postgres.Joined(db) < 1 {
			time.Sleep(time.Millisecond)
		}
		defer func() {
			for postgres.Joined(db) < 33 {
				time.Sleep(time.Millisecond)
			}
			close(release)
			wg.Wait()
		}()
		for i := range 32 {
			wg.Go(func() {
				res, err := srv.CallTool(ctx, caller, "store_fact", json.RawMessage(fmt.Sprintf(`{"entity":"project:c%d","key":"k","value":"concurrent %d"}`, i, i)))
				assert.NoError(t, err)
				assert.False(t, res != nil && res.IsError)
			})
		}
	})
	got["query_facts"] = count(func() { call("query_facts", `{"query":"rare"}`) })
	got["query_facts of 43 candidates"] = count(func() { call("query_facts", `{"query":"topic3"}`) })
	got["query"] = count(func() { call("query", fmt.Sprintf(`{"query":"facts of machines","tenant_id":%q}`, caller.TenantID())) })
	t.Logf("round trips: %v", got)
	assert.LessOrEqual(t, got["store_fact"], int64(2), "store_fact")
	assert.LessOrEqual(t, got["store_fact new version"], int64(3), "store_fact of a new version")
	assert.LessOrEqual(t, got["store_fact x32"], int64(3), "32 concurrent store_facts in one batch")
	assert.LessOrEqual(t, got["query_facts"], int64(2), "query_facts: the index, then the records")
	assert.LessOrEqual(t, got["query_facts of 43 candidates"], int64(4), "query_facts: the index, then 3 rounds of candidates")
	assert.LessOrEqual(t, got["query"], int64(2), "query: the index, then the records")
	assert.Equal(t, 1, postgres.Parked(db), "the last View's connection waits, its ROLLBACK owed")
}
