// Package bench holds crux's end-to-end benchmarks: the cost of a call
// through crux.Server, durable writes sequentially and from 32 concurrent
// callers, fact queries over a large store, and store_fact and query_facts
// over the stdio transport of crux serve (framing layer and SDK included,
// through in-memory pipes).
//
//	go test -run '^$' -bench . -benchtime 2s ./bench
//
// Query and stdio benchmarks report p50-µs and p99-µs besides ns/op; write
// benchmarks report facts/s. Writes use the production setting (fsync on
// every commit) unless a benchmark says sync=off.
//
// Beside the Go benchmarks: callpath.sh times a crux serve process of this
// tree against an older crux (stdio-latency drives them), and
// peer/mcp-peer-bench.mjs compares crux serve with the reference MCP memory
// server, pgcompare.sh puts the core's benchmarks on PostgreSQL beside
// bbolt's, and retrieval.sh compares crux's document index with bleve and a
// textbook BM25 on passages of the Go standard library's documentation (a
// module of its own, bench/retrieval, so that bleve stays out of crux's
// go.mod); each script's header says how to run it.
package bench

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/toolkit"
)

var caller = crux.Caller{Agent: "bench", Authenticated: true}

func newServer(b *testing.B, path string, opts *bolt.Options) *crux.Server {
	b.Helper()
	db, err := bolt.Open(path, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	srv, err := crux.NewServer(db, nil)
	if err != nil {
		b.Fatal(err)
	}
	return srv
}

func mustCall(b *testing.B, srv *crux.Server, name string, args []byte) *crux.Result {
	res, err := srv.CallTool(context.Background(), caller, name, args)
	if err != nil {
		b.Fatal(err)
	}
	if res.IsError {
		b.Fatal(res.Content[0].Text)
	}
	return res
}

// BenchmarkCallToolOverhead is the cost of the call path itself: lookup,
// argument checks, schema validation, decoding and result shaping around a
// handler that does no I/O; with router=free-local also the capability
// decision under the token the crux command enforces.
func BenchmarkCallToolOverhead(b *testing.B) {
	for _, enforce := range []bool{false, true} {
		b.Run(fmt.Sprintf("router=%v", map[bool]string{false: "none", true: "free-local"}[enforce]), func(b *testing.B) {
			srv := newTokenServer(b, enforce)
			args := []byte(`{}`)
			b.ReportAllocs()
			for b.Loop() {
				mustCall(b, srv, "get_agent_identity", args)
			}
		})
	}
}

// newTokenServer is a server over a fresh store (no fsync), enforcing a
// free-local token, as the crux command does, when enforce is set.
func newTokenServer(b *testing.B, enforce bool) *crux.Server {
	b.Helper()
	db, err := bolt.Open(filepath.Join(b.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	opts := &crux.Options{}
	if enforce {
		_, priv, _ := ed25519.GenerateKey(nil)
		signer := receipts.NewEd25519Signer(priv)
		tok, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{Capabilities: crux.FreeLocalCapabilities(crux.DefaultFlags())})
		if err != nil {
			b.Fatal(err)
		}
		if opts.Router, err = rcx.NewRouter(tok, signer.Public(), nil); err != nil {
			b.Fatal(err)
		}
		opts.Signer = signer
	}
	srv, err := crux.NewServer(db, opts)
	if err != nil {
		b.Fatal(err)
	}
	return srv
}

func storeArgs(i int) []byte {
	return fmt.Appendf(nil, `{"entity":"project:%d","key":"k%d","value":"value %d of the durable write benchmark"}`, i%1000, i%7, i)
}

// BenchmarkStoreFactSequential: one caller, each store_fact durable (fsync)
// before the next starts.
func BenchmarkStoreFactSequential(b *testing.B) {
	srv := newServer(b, filepath.Join(b.TempDir(), "crux.db"), nil)
	i := 0
	start := time.Now()
	for b.Loop() {
		mustCall(b, srv, "store_fact", storeArgs(i))
		i++
	}
	b.ReportMetric(float64(i)/time.Since(start).Seconds(), "facts/s")
}

// BenchmarkStoreFact32Concurrent: 32 callers writing at once; each call
// returns once its fact is durable. The store commits concurrent writes in
// groups, one fsync per group.
func BenchmarkStoreFact32Concurrent(b *testing.B) {
	srv := newServer(b, filepath.Join(b.TempDir(), "crux.db"), nil)
	var n atomic.Int64
	b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0))) // RunParallel starts parallelism × GOMAXPROCS goroutines
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mustCall(b, srv, "store_fact", storeArgs(int(n.Add(1))))
		}
	})
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "facts/s")
}

// corpus builds (once per size) a store of n facts: 10 per entity, and
// value words shared by 100 facts each (topicN) so a keyword query has a
// bounded answer however large the store grows.
var corpora sync.Map

func corpus(b *testing.B, n int) string {
	if p, ok := corpora.Load(n); ok {
		return p.(string)
	}
	if dir := os.Getenv("CRUX_BENCH_CORPUS_DIR"); dir != "" {
		// Kept between runs (see pgcompare.sh): made once, under a
		// temporary name renamed when complete.
		path := filepath.Join(dir, fmt.Sprintf("corpus-%d.db", n))
		if _, err := os.Stat(path); err != nil {
			tmp := path + ".tmp"
			os.Remove(tmp)
			fillCorpusFile(b, tmp, n)
			if err := os.Rename(tmp, path); err != nil {
				b.Fatal(err)
			}
		}
		return path
	}
	dir, err := os.MkdirTemp("", "crux-bench-")
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "crux.db")
	fillCorpusFile(b, path, n)
	corpora.Store(n, path)
	return path
}

// fillCorpusFile makes the bbolt store at path hold the corpus of n facts.
func fillCorpusFile(b *testing.B, path string, n int) {
	db, err := bolt.Open(path, &bolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	fillCorpus(b, db, n, 5000)
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
}

// fillCorpus stores the corpus of n facts (see corpus) into db, perTx
// facts a transaction.
func fillCorpus(b *testing.B, db store.Backend, n, perTx int) {
	// The store format first, as a server would write it on the empty
	// store: else the first server opened on the corpus upgrades it,
	// reindexing every fact.
	if _, err := store.UpgradeBackend(context.Background(), db); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	for start := 0; start < n; start += perTx {
		err := db.Update(context.Background(), func(tx store.Tx) error {
			for i := start; i < min(n, start+perTx); i++ {
				_, _, err := store.PutFact(tx, store.NewFact{Scope: store.Scope{Tenant: toolkit.DefaultTenant},
					Entity: fmt.Sprintf("entity:%d", i/10), Key: fmt.Sprintf("k%d", i%10),
					Value:      fmt.Sprintf("note %d about topic%04d and widget%d", i, i%(n/100), i%5000),
					Confidence: float64(i%100) / 100, Now: now.Add(-time.Duration(i) * time.Second),
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	corpora.Range(func(_, p any) bool { os.RemoveAll(filepath.Dir(p.(string))); return true })
	os.Exit(code)
}

// latencies collects the latency of each call of a benchmark and reports
// their percentiles.
type latencies []time.Duration

// time runs fn and records how long it took.
func (l *latencies) time(fn func()) {
	t0 := time.Now()
	fn()
	*l = append(*l, time.Since(t0))
}

// report reports the median and the 99th percentile, in microseconds.
func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	b.ReportMetric(float64(l[len(l)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(l[len(l)*99/100].Microseconds()), "p99-µs")
}

// benchQuery runs query_facts with args(i) and reports latency percentiles.
func benchQuery(b *testing.B, n int, args func(i int) []byte, wantRows int) {
	benchQueryOn(b, newServer(b, corpus(b, n), &bolt.Options{NoSync: true}), args, wantRows)
}

// benchQueryOn runs query_facts with args(i) on srv and reports latency
// percentiles.
func benchQueryOn(b *testing.B, srv *crux.Server, args func(i int) []byte, wantRows int) {
	var lat latencies
	i := 0
	for b.Loop() {
		var res *crux.Result
		lat.time(func() { res = mustCall(b, srv, "query_facts", args(i)) })
		if i == 0 {
			var out struct{ Rows []json.RawMessage }
			if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil || len(out.Rows) != wantRows {
				b.Fatalf("got %d rows (%v), want %d", len(out.Rows), err, wantRows)
			}
		}
		i++
	}
	lat.report(b)
}

// sizes are the store sizes of the query benchmarks.
func sizes() []int { return []int{scaled(10_000), scaled(100_000)} }

// scaled is n, or under -short a fiftieth of it (at least 200): the smoke
// run of CI (go test -short -bench . -benchtime 1x) checks that every
// benchmark runs, not what it measures, and the fills of full-size stores
// would take most of its time.
func scaled(n int) int {
	if testing.Short() {
		return max(200, n/50)
	}
	return n
}

// BenchmarkQueryFactsByEntity: one entity (10 facts) out of n.
func BenchmarkQueryFactsByEntity(b *testing.B) {
	for _, n := range sizes() {
		b.Run(fmt.Sprintf("facts=%d", n), func(b *testing.B) {
			benchQuery(b, n, func(i int) []byte {
				return fmt.Appendf(nil, `{"entity":"entity:%d"}`, (i*7919)%(n/10))
			}, 10)
		})
	}
}

// BenchmarkQueryFactsByKeyword: a keyword shared by 100 facts out of n,
// top 10 by effective confidence.
func BenchmarkQueryFactsByKeyword(b *testing.B) {
	for _, n := range sizes() {
		b.Run(fmt.Sprintf("facts=%d", n), func(b *testing.B) {
			benchQuery(b, n, func(i int) []byte {
				return fmt.Appendf(nil, `{"query":"topic%04d"}`, (i*7919)%(n/100))
			}, 10)
		})
	}
}

// BenchmarkQueryFactsUnfiltered: the top 10 of the whole store.
func BenchmarkQueryFactsUnfiltered(b *testing.B) {
	for _, n := range sizes() {
		b.Run(fmt.Sprintf("facts=%d", n), func(b *testing.B) {
			benchQuery(b, n, func(int) []byte { return []byte(`{}`) }, 10)
		})
	}
}

// BenchmarkQueryFactsCommonWords: a question whose words are in every fact
// ("note", and the question and stop words "about" and "and"), and one of
// them beside a selective word, at 200,000 facts (and 1,000,000 with
// CRUX_BENCH_MILLION set): an unselective word should cost about what a
// selective one does.
func BenchmarkQueryFactsCommonWords(b *testing.B) {
	ns := []int{scaled(200_000)}
	if os.Getenv("CRUX_BENCH_MILLION") != "" {
		ns = append(ns, 1_000_000)
	}
	for _, n := range ns {
		for _, q := range []string{"note about and", "note about topic0007"} {
			b.Run(fmt.Sprintf("facts=%d/q=%s", n, strings.ReplaceAll(q, " ", "_")), func(b *testing.B) {
				args := fmt.Appendf(nil, `{"query":%q}`, q)
				benchQuery(b, n, func(int) []byte { return args }, 10)
			})
		}
	}
}
