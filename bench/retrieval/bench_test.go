package retrieval

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// benchData is the corpus and queries of a benchmark run: the files named
// by $RETRIEVAL_CORPUS and $RETRIEVAL_QUERIES, or testdata/corpus.jsonl and
// testdata/queries.jsonl (bench/retrieval.sh makes them); without them the
// benchmark runs on the small corpus of the tests.
func benchData(b *testing.B) ([]Doc, []Query) {
	b.Helper()
	corpus := envOr("RETRIEVAL_CORPUS", filepath.Join("testdata", "corpus.jsonl"))
	queries := envOr("RETRIEVAL_QUERIES", filepath.Join("testdata", "queries.jsonl"))
	if _, err := os.Stat(corpus); err != nil {
		docs := small(b)
		return docs, GenerateQueries(docs, QueryOptions{N: 200, Seed: 1})
	}
	docs, err := ReadJSONL[Doc](corpus)
	if err != nil {
		b.Fatal(err)
	}
	qs, err := ReadJSONL[Query](queries)
	if err != nil {
		b.Fatal(err)
	}
	return docs, qs
}

// cpuTime is the CPU time (user and system) the process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// BenchmarkIngest ingests the whole corpus into a new index of each system
// per iteration, and reports its size on disk.
//
//	go test -run '^$' -bench Ingest -benchtime 3x
func BenchmarkIngest(b *testing.B) {
	docs, _ := benchData(b)
	for _, f := range Factories() {
		b.Run(f.Name, func(b *testing.B) {
			var size int64
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir()
				sys, err := f.New(dir)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := sys.Ingest(docs); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if size, err = sys.SizeOnDisk(); err != nil {
					b.Fatal(err)
				}
				sys.Close()
				b.StartTimer()
			}
			if size >= 0 {
				b.ReportMetric(float64(size)/1e6, "MB")
			}
			b.ReportMetric(float64(len(docs)), "passages")
		})
	}
}

// BenchmarkQuery runs the queries in turn against each system, after one
// ingest, and reports the latency's median and 95th percentile besides
// ns/op, the process's CPU time per query (cpu-µs/op: user and system, of
// every thread, so a garbage collector's work counts; on a machine that
// other processes load, it moves less than the latency), and the quality
// of the first pass over the queries.
//
//	go test -run '^$' -bench Query -benchtime 5000x
func BenchmarkQuery(b *testing.B) {
	docs, qs := benchData(b)
	for _, f := range Factories() {
		b.Run(f.Name, func(b *testing.B) {
			sys, err := f.New(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer sys.Close()
			if err := sys.Ingest(docs); err != nil {
				b.Fatal(err)
			}
			// SizeOnDisk waits for background merges to settle (bleve's), so
			// that they do not run under the timed queries.
			if _, err := sys.SizeOnDisk(); err != nil {
				b.Fatal(err)
			}
			ranks := make([]int, len(qs))
			for i, q := range qs {
				got, err := sys.Query(q.Query, 10)
				if err != nil {
					b.Fatal(err)
				}
				ranks[i] = Rank(got, q.Want)
			}
			quality := Score(ranks, 10)
			lats := make([]time.Duration, 0, 1024)
			i := 0
			cpu := cpuTime(b)
			for b.Loop() {
				start := time.Now()
				if _, err := sys.Query(qs[i%len(qs)].Query, 10); err != nil {
					b.Fatal(err)
				}
				lats = append(lats, time.Since(start))
				i++
			}
			cpu = cpuTime(b) - cpu
			b.ReportMetric(float64(Percentile(lats, 50).Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(max(i, 1)), "cpu-µs/op")
			b.ReportMetric(float64(Percentile(lats, 95).Nanoseconds())/1e3, "p95-µs")
			b.ReportMetric(quality.Recall, "recall@10")
			b.ReportMetric(quality.MRR, "MRR@10")
		})
	}
}
