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

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/postgres"
)

// PostgreSQL restarted (killed, then started: pg_ctl restart -m
// immediate) while writers and readers keep calling: no acknowledged
// write is lost, the calls started during the restart wait for the server
// and succeed, and the only failures are the calls the kill cut in the
// middle: a write whose COMMIT was on its way (reported as of unknown
// outcome, never run again) and a read past its first round trip. It
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
		assert.True(t, errors.Is(err, postgres.ErrCommitUnknown), "a write fails only when its COMMIT was cut: %v", err)
	}
	assert.LessOrEqual(t, len(writeErrs), writers, "at most the writes in flight at the kill fail")
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
