package retrieval

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// RunOptions say what Run measures.
type RunOptions struct {
	Docs    []Doc
	Queries []Query
	// Systems to run; nil means Factories().
	Systems []Factory
	// K is the cutoff of recall and MRR and the k passed to Query; zero
	// means 10.
	K int
	// Reps is how many times each query is timed; zero means 5.
	Reps int
	// IngestRuns is how many times each system ingests the corpus into a
	// new index (the median time is reported); zero means 1.
	IngestRuns int
	// Dir is where the systems' directories are made; "" means the
	// system's temporary directory.
	Dir string
	// Log, when not nil, receives progress lines.
	Log io.Writer
}

// Result is one system's figures.
type Result struct {
	System string `json:"system"`
	// Ingest is the median wall time of IngestRuns ingests of the whole
	// corpus into a new index; IngestRuns lists them all.
	Ingest     time.Duration   `json:"ingest_ns"`
	IngestRuns []time.Duration `json:"ingest_runs_ns"`
	// Size is the size on disk after the last ingest, -1 for in-memory;
	// Used the part of it in use, for a UsedSizer (else -1).
	Size int64 `json:"size_bytes"`
	Used int64 `json:"used_bytes"`
	// P50 and P95 are over all timed queries (len(Queries) × Reps).
	P50     time.Duration `json:"p50_ns"`
	P95     time.Duration `json:"p95_ns"`
	Samples int           `json:"latency_samples"`
	Quality
	// Queries is the number of queries; Missed those whose passage was not
	// among the first K results.
	Queries int `json:"queries"`
	Missed  int `json:"missed"`
}

// Run ingests the corpus into each system, then measures retrieval quality
// (each query once, which also warms the systems) and query latency: Reps
// rounds, each timing every query once on every system in turn, the order
// of the systems rotating from round to round and the heap collected before
// each system's share, so that all systems see the same machine noise.
func Run(o RunOptions) ([]Result, error) {
	if o.K == 0 {
		o.K = 10
	}
	if o.Reps == 0 {
		o.Reps = 5
	}
	if o.IngestRuns == 0 {
		o.IngestRuns = 1
	}
	if o.Systems == nil {
		o.Systems = Factories()
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	type live struct {
		sys  System
		dir  string
		res  *Result
		lats []time.Duration
	}
	var systems []*live
	defer func() {
		for _, l := range systems {
			if l.sys != nil {
				l.sys.Close()
			}
			os.RemoveAll(l.dir)
		}
	}()

	for _, f := range o.Systems {
		res := &Result{System: f.Name, Queries: len(o.Queries), Used: -1}
		for r := range o.IngestRuns {
			dir, err := os.MkdirTemp(o.Dir, "retrieval-"+f.Name+"-")
			if err != nil {
				return nil, err
			}
			sys, err := f.New(dir)
			if err != nil {
				os.RemoveAll(dir)
				return nil, fmt.Errorf("%s: %w", f.Name, err)
			}
			runtime.GC()
			start := time.Now()
			err = sys.Ingest(o.Docs)
			took := time.Since(start)
			if err != nil {
				sys.Close()
				os.RemoveAll(dir)
				return nil, fmt.Errorf("%s: ingest: %w", f.Name, err)
			}
			res.IngestRuns = append(res.IngestRuns, took)
			logf("%s: ingest %d of %d: %d passages in %.2f s", f.Name, r+1, o.IngestRuns, len(o.Docs), took.Seconds())
			if r < o.IngestRuns-1 {
				sys.Close()
				os.RemoveAll(dir)
				continue
			}
			systems = append(systems, &live{sys: sys, dir: dir, res: res})
		}
		res.Ingest = Median(res.IngestRuns)
		start := time.Now()
		size, err := systems[len(systems)-1].sys.SizeOnDisk()
		if err != nil {
			return nil, fmt.Errorf("%s: size: %w", f.Name, err)
		}
		res.Size = size
		if size >= 0 {
			logf("%s: %d bytes on disk, measured in %.1f s", f.Name, size, time.Since(start).Seconds())
		}
	}

	for _, l := range systems {
		ranks := make([]int, len(o.Queries))
		for i, q := range o.Queries {
			got, err := l.sys.Query(q.Query, o.K)
			if err != nil {
				return nil, fmt.Errorf("%s: query %q: %w", l.res.System, q.Query, err)
			}
			ranks[i] = Rank(got, q.Want)
			if ranks[i] == 0 || ranks[i] > o.K {
				l.res.Missed++
			}
		}
		l.res.Quality = Score(ranks, o.K)
		logf("%s: recall@%d %.3f, MRR@%d %.3f", l.res.System, o.K, l.res.Recall, o.K, l.res.MRR)
	}

	for rep := range o.Reps {
		for j := range systems {
			l := systems[(j+rep)%len(systems)]
			runtime.GC()
			for _, q := range o.Queries {
				start := time.Now()
				if _, err := l.sys.Query(q.Query, o.K); err != nil {
					return nil, fmt.Errorf("%s: query %q: %w", l.res.System, q.Query, err)
				}
				l.lats = append(l.lats, time.Since(start))
			}
		}
		logf("latency round %d of %d done", rep+1, o.Reps)
	}
	out := make([]Result, len(systems))
	for i, l := range systems {
		err := l.sys.Close()
		sys := l.sys
		l.sys = nil
		if err != nil {
			return nil, fmt.Errorf("%s: close: %w", l.res.System, err)
		}
		if u, ok := sys.(UsedSizer); ok {
			if l.res.Used, err = u.UsedOnDisk(); err != nil {
				return nil, fmt.Errorf("%s: used size: %w", l.res.System, err)
			}
		}
		l.res.P50 = Percentile(l.lats, 50)
		l.res.P95 = Percentile(l.lats, 95)
		l.res.Samples = len(l.lats)
		out[i] = *l.res
	}
	return out, nil
}

// Markdown writes results as a markdown table, with each system's latency
// and size relative to the system named base when it is among them.
func Markdown(w io.Writer, results []Result, base string) {
	var b *Result
	for i := range results {
		if results[i].System == base {
			b = &results[i]
		}
	}
	k := 10
	if len(results) > 0 {
		k = results[0].K
	}
	head := []string{"system", "ingest s", "size MB", "used MB", "p50 µs", "p95 µs", fmt.Sprintf("recall@%d", k), fmt.Sprintf("MRR@%d", k)}
	if b != nil {
		head = append(head, "p50 / "+base, "size / "+base)
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(head, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat(" --- |", len(head)))
	for _, r := range results {
		size, used := "in memory", "—"
		if r.Size >= 0 {
			size = fmt.Sprintf("%.1f", float64(r.Size)/1e6)
		}
		if r.Used >= 0 {
			used = fmt.Sprintf("%.1f", float64(r.Used)/1e6)
		}
		row := []string{
			r.System,
			fmt.Sprintf("%.2f", r.Ingest.Seconds()),
			size,
			used,
			fmt.Sprintf("%.0f", float64(r.P50.Nanoseconds())/1e3),
			fmt.Sprintf("%.0f", float64(r.P95.Nanoseconds())/1e3),
			fmt.Sprintf("%.3f", r.Recall),
			fmt.Sprintf("%.3f", r.MRR),
		}
		if b != nil {
			row = append(row, fmt.Sprintf("%.2f", float64(r.P50)/float64(b.P50)))
			if r.Size >= 0 && b.Size > 0 {
				row = append(row, fmt.Sprintf("%.2f", float64(r.Size)/float64(b.Size)))
			} else {
				row = append(row, "—")
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
}

// WriteJSON writes results and the run's setting as indented JSON.
func WriteJSON(w io.Writer, setting map[string]any, results any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(map[string]any{"setting": setting, "results": results})
}
