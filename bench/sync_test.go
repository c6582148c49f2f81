package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

// syncFacts is how many fact versions the sync benchmarks move.
const syncFacts = 10000

// syncReplica opens a store (fsync on) with a server over it whose caller
// holds an established passport, syncing with remote.
func syncReplica(b *testing.B, remote crux.Remote, facts int) (*crux.Server, store.Backend) {
	b.Helper()
	db, err := bolt.Open(filepath.Join(b.TempDir(), "crux.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	signer, err := receipts.GenerateEphemeralKey()
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	err = db.Update(context.Background(), func(tx store.Tx) error {
		if err := store.PutPassport(tx, &store.Passport{PrincipalID: caller.Agent, Tenant: crux.DefaultTenant,
			Tier: store.TierUnverified, IssuedAt: now}); err != nil {
			return err
		}
		for range 100 {
			if _, err := receipts.Append(tx, signer, crux.DefaultTenant, "decision", caller.Agent, map[string]int{"n": 1}, now); err != nil {
				return err
			}
		}
		for i := range facts {
			if _, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: crux.DefaultTenant, Agent: caller.Agent},
				Entity: fmt.Sprintf("project:%d", i%1000), Key: fmt.Sprintf("k%d", i), Value: fmt.Sprintf("value %d of the sync benchmark", i),
				Confidence: 1, Now: now}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := crux.NewServer(db, &crux.Options{Signer: signer, Remote: remote})
	if err != nil {
		b.Fatal(err)
	}
	return srv, db
}

// syncAll calls tool (sync_pull, or sync_push with confirm) until nothing
// more remains, and returns the versions moved.
func syncAll(b *testing.B, srv *crux.Server, tool string) int {
	b.Helper()
	args, field := []byte(`{}`), "facts_pulled"
	if tool == "sync_push" {
		args, field = []byte(`{"confirm":true}`), "facts_pushed"
	}
	moved := 0
	for {
		res := mustCall(b, srv, tool, args)
		var out map[string]any
		if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil {
			b.Fatal(err)
		}
		moved += int(out[field].(float64))
		if out["more"] != true {
			return moved
		}
	}
}

// BenchmarkSyncPull: a server pulling 10,000 fact versions from another in
// the same process (crux.ServerRemote), 250 per request, each page applied
// in one durable transaction. facts/s is the pull's throughput.
//
//	go test -run '^$' -bench 'Sync' -benchtime 3x -count 5 ./bench
func BenchmarkSyncPull(b *testing.B) {
	from, _ := syncReplica(b, nil, syncFacts)
	var total time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		to, _ := syncReplica(b, crux.ServerRemote(from, crux.Caller{Agent: "replica", Authenticated: true}), 0)
		b.StartTimer()
		start := time.Now()
		if got := syncAll(b, to, "sync_pull"); got != syncFacts {
			b.Fatalf("pulled %d versions, want %d", got, syncFacts)
		}
		total += time.Since(start)
		n += syncFacts
	}
	b.ReportMetric(float64(n)/total.Seconds(), "facts/s")
}

// BenchmarkSyncPush: a server pushing 10,000 fact versions written locally
// to another in the same process, 250 per request, each applied by the
// receiver in one durable transaction.
func BenchmarkSyncPush(b *testing.B) {
	var total time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		to, _ := syncReplica(b, nil, 0)
		from, _ := syncReplica(b, crux.ServerRemote(to, crux.Caller{Agent: "replica", Authenticated: true}), syncFacts)
		b.StartTimer()
		start := time.Now()
		if got := syncAll(b, from, "sync_push"); got != syncFacts {
			b.Fatalf("pushed %d versions, want %d", got, syncFacts)
		}
		total += time.Since(start)
		n += syncFacts
	}
	b.ReportMetric(float64(n)/total.Seconds(), "facts/s")
}
