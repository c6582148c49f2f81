package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/pgtest"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/postgres"
)

// The core's benchmarks on PostgreSQL, beside the bbolt ones of
// bench_test.go: run both in one go test invocation to compare them.
//
//	CRUX_TEST_POSTGRES=postgres://postgres@127.0.0.1:5432/test \
//	CRUX_BENCH_PG_FACTS=100000 go test -run '^$' -bench 'StoreFact|QueryFactsByKeyword|Postgres' ./bench
//
// They skip without CRUX_TEST_POSTGRES (and fail without it in CI). The query corpus has
// $CRUX_BENCH_PG_FACTS facts (default 10,000, so that a one-iteration run
// stays short; filling 100,000 takes a few minutes). pgcompare.sh runs
// them beside the bbolt ones, round after round, over 100,000 facts, and
// prints medians and ratios.

// pgStore opens a store in a fresh schema of the benchmark database (see
// pgtest.Schema).
func pgStore(b *testing.B) *postgres.DB {
	db, _ := pgMeteredStore(b)
	return db
}

// pgMeteredStore is pgStore with a meter of the CPU time of the server
// backends serving it (nil when the server's processes cannot be read).
func pgMeteredStore(b *testing.B) (*postgres.DB, *cpuMeter) {
	b.Helper()
	schema, _ := pgtest.Schema(b, "crux_bench")
	dsn, app := pgDSN(b, pgtest.DSN(b), "")
	db, err := postgres.Open(context.Background(), dsn, &postgres.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db, newCPUMeter(b, dsn, app)
}

func pgServer(b *testing.B, db store.Backend) *crux.Server {
	b.Helper()
	srv, err := crux.NewServer(db, nil)
	if err != nil {
		b.Fatal(err)
	}
	return srv
}

// BenchmarkPostgresStoreFactSequential: one caller, each store_fact
// committed before the next starts.
func BenchmarkPostgresStoreFactSequential(b *testing.B) {
	db, cpu := pgMeteredStore(b)
	srv := pgServer(b, db)
	i := 0
	start := time.Now()
	for b.Loop() {
		mustCall(b, srv, "store_fact", storeArgs(i))
		i++
	}
	b.ReportMetric(float64(i)/time.Since(start).Seconds(), "facts/s")
	cpu.report(b, int64(i))
}

// BenchmarkPostgresStoreFact32Concurrent: 32 callers writing at once; the
// store runs concurrent calls in shared serializable transactions (group
// commit), one COMMIT per batch.
func BenchmarkPostgresStoreFact32Concurrent(b *testing.B) {
	db, cpu := pgMeteredStore(b)
	srv := pgServer(b, db)
	var n atomic.Int64
	b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			mustCall(b, srv, "store_fact", storeArgs(int(n.Add(1))))
		}
	})
	b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "facts/s")
	cpu.report(b, n.Load())
}

// BenchmarkPostgresStoreFactStores: 32 callers on 1 or 4 stores of one
// database (4 stores: as 4 crux serve --store processes, each with its
// own pool and group commit, 8 callers each), all writing at once. Nothing
// that serialises the stores' transactions should make 4 slower than 1.
func BenchmarkPostgresStoreFactStores(b *testing.B) {
	for _, stores := range []int{1, 4} {
		b.Run(fmt.Sprintf("stores=%d", stores), func(b *testing.B) {
			schema, _ := pgtest.Schema(b, "crux_bench")
			dsn, app := pgDSN(b, pgtest.DSN(b), "")
			srvs := make([]*crux.Server, stores)
			for i := range srvs {
				db, err := postgres.Open(context.Background(), dsn, &postgres.Options{Schema: schema})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { db.Close() })
				srvs[i] = pgServer(b, db)
			}
			cpu := newCPUMeter(b, dsn, app)
			var n, callers atomic.Int64
			b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0)))
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				srv := srvs[int(callers.Add(1))%stores]
				for pb.Next() {
					mustCall(b, srv, "store_fact", storeArgs(int(n.Add(1))))
				}
			})
			b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "facts/s")
			cpu.report(b, n.Load())
		})
	}
}

// BenchmarkPostgresQueryFactsByKeyword: as BenchmarkQueryFactsByKeyword,
// over a PostgreSQL store of $CRUX_BENCH_PG_FACTS facts.
func BenchmarkPostgresQueryFactsByKeyword(b *testing.B) {
	n := scaled(10_000)
	if v := os.Getenv("CRUX_BENCH_PG_FACTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			b.Fatalf("CRUX_BENCH_PG_FACTS=%q: want a number of at least 100", v)
		}
	}
	b.Run(fmt.Sprintf("facts=%d", n), func(b *testing.B) {
		db := pgCorpus(b, n)
		benchQueryOn(b, pgServer(b, db), func(i int) []byte {
			return fmt.Appendf(nil, `{"query":"topic%04d"}`, (i*7919)%(n/100))
		}, 10)
	})
}

// pgCorpus opens a store holding the corpus of n facts (see corpus): in a
// fresh schema, or, when $CRUX_BENCH_PG_CORPUS names a schema, in that one,
// filled by the first run that needs it and kept for the next ones (see
// pgcompare.sh, which drops it at the end).
func pgCorpus(b *testing.B, n int) *postgres.DB {
	b.Helper()
	schema := os.Getenv("CRUX_BENCH_PG_CORPUS")
	if schema == "" {
		db := pgStore(b)
		fillPgCorpus(b, db, n)
		return db
	}
	schema = fmt.Sprintf("%s_%d", schema, n)
	db, err := postgres.Open(context.Background(), pgtest.DSN(b), &postgres.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	// A marker, written once the fill has committed, says the corpus is whole.
	const markBucket = "bench_corpus"
	mark := []byte("facts")
	var have bool
	err = db.View(context.Background(), func(tx store.Tx) error {
		v, err := tx.Get(markBucket, mark)
		have = err == nil && string(v) == strconv.Itoa(n)
		if errors.Is(err, store.ErrNotFound) {
			err = nil
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	if !have {
		fillPgCorpus(b, db, n)
		err := db.Update(context.Background(), func(tx store.Tx) error {
			return tx.Put(markBucket, mark, []byte(strconv.Itoa(n)))
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// fillPgCorpus fills db with the corpus of n facts, then runs VACUUM
// ANALYZE on it, as autovacuum would on a deployment: the PostgreSQL
// servers of CI run without it, and without statistics the planner reads
// a range of keys by fetching and sorting it all.
func fillPgCorpus(b *testing.B, db *postgres.DB, n int) {
	b.Helper()
	fillCorpus(b, db, n, 1000)
	if err := db.Compact(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPostgresQueryDocuments: as BenchmarkQueryDocuments (query, four-word
// phrases of the passages, over 20,000 of them), on a PostgreSQL store.
func BenchmarkPostgresQueryDocuments(b *testing.B) {
	srv := pgServer(b, pgStore(b))
	docs := passages(scaled(20_000))
	if _, err := srv.Ingest(context.Background(), "bench", docs, nil); err != nil {
		b.Fatal(err)
	}
	b.Run("query", func(b *testing.B) {
		var lat latencies
		i := 0
		for b.Loop() {
			args, _ := json.Marshal(map[string]any{"tenant_id": "bench", "query": phrase(docs[(i*7919)%len(docs)], i)})
			lat.time(func() { mustCall(b, srv, "query", args) })
			i++
		}
		lat.report(b)
	})
}
