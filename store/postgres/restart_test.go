package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/internal/pgtest"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/postgres"
)

// PostgreSQL restarted (killed, then started: pg_ctl restart -m
// immediate) while writers and readers keep calling: no acknowledged
// write is lost, the calls started during the restart wait for the server
// and succeed, a write whose COMMIT the kill cut learns whether it took
// effect (and runs again if not), and the only failures are reads the
// kill cut past their first round trip. It
// needs a server of its own, which it restarts: $CRUX_TEST_PG_RESTART_DSN
// names it and $CRUX_TEST_PG_RESTART is the shell command that restarts
// it; without them it skips.
func TestServerRestart(t *testing.T) {
	dsn, restart := os.Getenv("CRUX_TEST_PG_RESTART_DSN"), os.Getenv("CRUX_TEST_PG_RESTART")
	if dsn == "" || restart == "" {
		t.Skip("CRUX_TEST_PG_RESTART_DSN and CRUX_TEST_PG_RESTART are not set (a server of the test's own and the command that restarts it)")
	}
	ctx := context.Background()
	var r [6]byte
	_, _ = rand.Read(r[:])
	schema := "crux_restart_" + hex.EncodeToString(r[:])
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	conn.Close(ctx)
	t.Cleanup(func() {
		if conn, err := pgx.Connect(ctx, dsn); err == nil {
			_, _ = conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			conn.Close(ctx)
		}
	})
	db, err := postgres.Open(ctx, dsn, &postgres.Options{Schema: schema})
	require.NoError(t, err)
	defer db.Close()

	const writers, readers = 8, 4
	var (
		stop                   atomic.Bool
		restarted              atomic.Bool
		mu                     sync.Mutex
		acked                  []string
		unknown                []string // ids of writes of unknown outcome
		writeErrs, readErrs    []error
		ackedAfter, readsAfter atomic.Int64
		wg                     sync.WaitGroup
	)
	for w := range writers {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				id := store.NewFactID()
				err := db.Update(ctx, func(tx store.Tx) error {
					_, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: "t"}, ID: id, Entity: fmt.Sprintf("project:w%d", w),
						Key: fmt.Sprintf("k%d", i), Value: "written under restart", Confidence: 1, Now: time.Now()})
					return err
				})
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, id)
					if restarted.Load() {
						ackedAfter.Add(1)
					}
				default:
					writeErrs = append(writeErrs, err)
					unknown = append(unknown, id)
				}
				mu.Unlock()
			}
		})
	}
	for range readers {
		wg.Go(func() {
			for !stop.Load() {
				err := db.View(ctx, func(tx store.Tx) error {
					_, err := store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: "t"}, Terms: []string{"restart"}, Limit: 10})
					return err
				})
				if err != nil {
					mu.Lock()
					readErrs = append(readErrs, err)
					mu.Unlock()
				} else if restarted.Load() {
					readsAfter.Add(1)
				}
			}
		})
	}
	time.Sleep(time.Second)
	out, err := exec.Command("sh", "-c", restart).CombinedOutput()
	require.NoError(t, err, "restarting the server: %s", out)
	restarted.Store(true)
	time.Sleep(2 * time.Second)
	stop.Store(true)
	wg.Wait()

	t.Logf("%d writes acknowledged (%d after the restart), %d failed; %d reads failed, %d after the restart succeeded",
		len(acked), ackedAfter.Load(), len(writeErrs), len(readErrs), readsAfter.Load())
	for _, err := range writeErrs {
		assert.NoError(t, err, "a write fails only when its COMMIT was cut and its outcome stays unknown (errors.Is %v: %v)", postgres.ErrCommitUnknown, errors.Is(err, postgres.ErrCommitUnknown))
	}
	assert.LessOrEqual(t, len(readErrs), readers, "at most the reads in flight at the kill fail")
	assert.Positive(t, ackedAfter.Load(), "writes succeed after the restart")
	assert.Positive(t, readsAfter.Load(), "reads succeed after the restart")

	// Every acknowledged write is there, once.
	lost := 0
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		for _, id := range acked {
			if _, err := store.GetFact(tx, id); errors.Is(err, store.ErrNotFound) {
				lost++
			} else if err != nil {
				return err
			}
		}
		return nil
	}))
	assert.Zero(t, lost, "acknowledged writes lost")
}

// The outcome of a COMMIT whose connection was lost: once the server
// process that ran it has ended, its token is in crux_commits if and only
// if it committed; while the process runs, the outcome is unknown, and
// after the reconnect timeout it is reported so.
func TestCommitOutcome(t *testing.T) {
	ctx := context.Background()
	schema, _ := pgtest.Schema(t, "crux_test")
	db, err := postgres.Open(ctx, pgtest.DSN(t), &postgres.Options{Schema: schema, ReconnectTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	defer db.Close()
	conn, err := pgx.Connect(ctx, pgtest.DSN(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	committed := []byte("a committed token")
	_, err = conn.Exec(ctx, "INSERT INTO "+pgx.Identifier{schema, "crux_commits"}.Sanitize()+" (token) VALUES ($1)", committed)
	require.NoError(t, err)
	const gone = 1<<31 - 7 // no server process has this id

	ok, err := postgres.CommitOutcome(db, gone, committed)
	require.NoError(t, err)
	assert.True(t, ok, "the token is there: committed")
	ok, err = postgres.CommitOutcome(db, gone, []byte("a token never committed"))
	require.NoError(t, err)
	assert.False(t, ok, "no token, and its process has ended: not committed")
	_, err = postgres.CommitOutcome(db, conn.PgConn().PID(), committed)
	require.Error(t, err, "its process still runs: the outcome is not known yet")
	assert.Contains(t, err.Error(), "still runs")
}
