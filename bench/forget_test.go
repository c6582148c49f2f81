package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/toolkit"
)

// forgetFacts is the number of facts each forget benchmark selects.
const forgetFacts = 10_000

// forgetBenchServer is a server over a fresh store with fsync on.
func forgetBenchServer(b *testing.B) (*crux.Server, *bolt.DB) {
	b.Helper()
	db, err := bolt.Open(filepath.Join(b.TempDir(), "crux.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	srv, err := crux.NewServer(db, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Close() })
	return srv, db
}

// fillForget writes n facts under entities starting with prefix (100 facts
// per entity, as store_fact by the bench caller would), plus as many facts
// outside the prefix, in durable transactions of 500 facts (bbolt splits
// its nodes only at commit, so one huge transaction would be quadratic).
func fillForget(b *testing.B, db store.Backend, prefix string, n int) {
	b.Helper()
	now := time.Now()
	const chunk = 500
	for start := 0; start < n; start += chunk {
		err := db.Update(context.Background(), func(tx store.Tx) error {
			for i := start; i < min(start+chunk, n); i++ {
				for _, p := range []string{prefix, "keep/" + prefix} {
					_, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: toolkit.DefaultTenant, Agent: caller.Agent},
						Entity: fmt.Sprintf("%sentity-%03d", p, i/100),
						Key:    fmt.Sprintf("key-%05d", i), Value: fmt.Sprintf("value %d of the forget benchmark", i),
						Confidence: 1, Now: now.Add(time.Duration(i)),
					})
					if err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkForgetDryRun10k previews a forget whose scope holds 10,000
// facts, in a store of 20,000.
func BenchmarkForgetDryRun10k(b *testing.B) {
	srv, db := forgetBenchServer(b)
	forgetFacts := scaled(forgetFacts)
	fillForget(b, db, "bulk/", forgetFacts)
	args := []byte(`{"scope":{"type":"entity_prefix","value":"bulk/"}}`)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res := mustCall(b, srv, "memory_forget_dry_run", args)
		var out struct{ Count int }
		if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil || out.Count != forgetFacts {
			b.Fatalf("count %d, %v", out.Count, err)
		}
	}
	b.ReportMetric(float64(forgetFacts)*float64(b.N)/b.Elapsed().Seconds(), "facts/s")
}

// BenchmarkForget10k forgets 10,000 facts in one call (one durable
// transaction with the signed receipt), in a store of 20,000 and more;
// each iteration forgets a fresh set.
func BenchmarkForget10k(b *testing.B) {
	srv, db := forgetBenchServer(b)
	forgetFacts := scaled(forgetFacts)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		b.StopTimer()
		prefix := fmt.Sprintf("bulk-%d/", i)
		i++
		fillForget(b, db, prefix, forgetFacts)
		args := []byte(`{"scope":{"type":"entity_prefix","value":"` + prefix + `"},"reason":"benchmark"}`)
		b.StartTimer()
		res := mustCall(b, srv, "memory_forget", args)
		var out struct {
			FactsAffected int `json:"facts_affected"`
		}
		if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil || out.FactsAffected != forgetFacts {
			b.Fatalf("facts_affected %d, %v", out.FactsAffected, err)
		}
	}
	b.ReportMetric(float64(forgetFacts)*float64(b.N)/b.Elapsed().Seconds(), "facts/s")
}
