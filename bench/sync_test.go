package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/receipttest"
	"github.com/crux-go/crux/mcpserver"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/syncremote"
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
		if err := receipttest.Earn(tx, signer, crux.DefaultTenant, caller.Agent, 100, now); err != nil {
			return err
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

// syncTransports are the ways a replica reaches another in the sync
// benchmarks: in the same process (crux.ServerRemote), and over HTTP
// (syncremote's client against mcpserver's handler on a loopback
// httptest server, bearer token and all).
var syncTransports = []struct {
	name   string
	remote func(b *testing.B, srv *crux.Server) crux.Remote
}{
	{"in-process", func(_ *testing.B, srv *crux.Server) crux.Remote {
		return crux.ServerRemote(srv, crux.Caller{Agent: "replica", Authenticated: true, Replica: true})
	}},
	{"http", func(b *testing.B, srv *crux.Server) crux.Remote {
		const token = "bench-replica-token-0123456789"
		tok, err := mcpserver.ParseTokens("replica::replica=" + token)
		if err != nil {
			b.Fatal(err)
		}
		hs := httptest.NewServer(mcpserver.NewHTTPHandler(mcpserver.Local(srv), &mcpserver.HTTPOptions{Tokens: tok}))
		b.Cleanup(hs.Close)
		r, err := syncremote.New(hs.URL, token, nil)
		if err != nil {
			b.Fatal(err)
		}
		return r
	}},
}

// BenchmarkSyncPull: a server pulling 10,000 fact versions from another,
// in the same process and over HTTP, 250 per request, each page applied
// in one durable transaction. facts/s is the pull's throughput.
//
//	go test -run '^$' -bench 'Sync' -benchtime 3x -count 5 ./bench
func BenchmarkSyncPull(b *testing.B) {
	syncFacts := scaled(syncFacts)
	from, _ := syncReplica(b, nil, syncFacts)
	for _, tr := range syncTransports {
		b.Run(tr.name, func(b *testing.B) {
			remote := tr.remote(b, from)
			var total time.Duration
			n := 0
			for b.Loop() {
				b.StopTimer()
				to, _ := syncReplica(b, remote, 0)
				b.StartTimer()
				start := time.Now()
				if got := syncAll(b, to, "sync_pull"); got != syncFacts {
					b.Fatalf("pulled %d versions, want %d", got, syncFacts)
				}
				total += time.Since(start)
				n += syncFacts
			}
			b.ReportMetric(float64(n)/total.Seconds(), "facts/s")
		})
	}
}

// BenchmarkSyncPush: a server pushing 10,000 fact versions written locally
// to another, in the same process and over HTTP, 250 per request, each
// applied by the receiver in one durable transaction.
func BenchmarkSyncPush(b *testing.B) {
	syncFacts := scaled(syncFacts)
	for _, tr := range syncTransports {
		b.Run(tr.name, func(b *testing.B) {
			var total time.Duration
			n := 0
			for b.Loop() {
				b.StopTimer()
				to, _ := syncReplica(b, nil, 0)
				from, _ := syncReplica(b, tr.remote(b, to), syncFacts)
				b.StartTimer()
				start := time.Now()
				if got := syncAll(b, from, "sync_push"); got != syncFacts {
					b.Fatalf("pushed %d versions, want %d", got, syncFacts)
				}
				total += time.Since(start)
				n += syncFacts
			}
			b.ReportMetric(float64(n)/total.Seconds(), "facts/s")
		})
	}
}
