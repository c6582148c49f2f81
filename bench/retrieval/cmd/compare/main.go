// Command compare runs the retrieval benchmark: it ingests the corpus into
// every system (crux, bleve and the textbook BM25), then measures quality and latency over the
// queries, all in one run, and prints a markdown table.
//
//	go run ./cmd/compare -corpus testdata/corpus.jsonl -queries testdata/queries.jsonl
//
// bench/retrieval.sh makes the corpus and queries first and then runs this.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"

	"github.com/crux-go/crux/bench/retrieval"
)

func main() {
	corpus := flag.String("corpus", filepath.Join("testdata", "corpus.jsonl"), "corpus file (cmd/corpus)")
	queries := flag.String("queries", filepath.Join("testdata", "queries.jsonl"), "queries file (cmd/queries)")
	systems := flag.String("systems", "", "comma-separated systems to run (default: all built in but the optional crux-facts and sqlite-fts5)")
	k := flag.Int("k", 10, "cutoff of recall and MRR")
	reps := flag.Int("reps", 5, "times each query is timed")
	ingestRuns := flag.Int("ingest-runs", 1, "times each system ingests the corpus (the median is reported)")
	dir := flag.String("dir", "", "directory for the systems' files (default: the temporary directory)")
	jsonOut := flag.String("json", "", "also write the results as JSON to this file")
	base := flag.String("base", "bleve", "system the others' latency and size are compared with")
	bleveStore := flag.Bool("bleve-store", true, "bleve stores title and text besides indexing them (crux keeps its documents' text)")
	bleveQuery := flag.String("bleve-query", "all", "how bleve searches: all (match on _all), text (match on text), fields (disjunction of a match per field)")
	cruxCompact := flag.Bool("crux-compact", false, "compact crux's store after the ingest, as crux ingest --compact does")
	cruxLimit := flag.Int("crux-limit", 0, "limit passed to crux's query tool (its results are segments, several of a passage counting once; default: k)")
	flag.Parse()
	log.SetFlags(0)
	retrieval.CruxLimit, retrieval.CruxCompact = *cruxLimit, *cruxCompact
	retrieval.BleveStore = *bleveStore
	retrieval.BleveQuery = *bleveQuery

	docs, err := retrieval.ReadJSONL[retrieval.Doc](*corpus)
	if err != nil {
		log.Fatal(err)
	}
	qs, err := retrieval.ReadJSONL[retrieval.Query](*queries)
	if err != nil {
		log.Fatal(err)
	}
	chosen, err := retrieval.PickFactories(*systems, retrieval.Factories())
	if err != nil {
		log.Fatal(err)
	}

	var textBytes int
	for _, d := range docs {
		textBytes += len(d.Title) + len(d.Text)
	}
	fmt.Fprintf(os.Stderr, "%d passages (%.1f MB of text), %d queries, k=%d, %d timed runs of each query, %d ingest run(s), %s, GOMAXPROCS=%d\n",
		len(docs), float64(textBytes)/1e6, len(qs), *k, *reps, *ingestRuns, runtime.Version(), runtime.GOMAXPROCS(0))
	results, err := retrieval.Run(retrieval.RunOptions{
		Docs: docs, Queries: qs, Systems: chosen, K: *k, Reps: *reps, IngestRuns: *ingestRuns, Dir: *dir, Log: os.Stderr,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d passages, %d queries, %d timed runs of each; bleve: query %s, stores text %v\n\n", len(docs), len(qs), *reps, *bleveQuery, *bleveStore)
	retrieval.Markdown(os.Stdout, results, *base)
	if *jsonOut != "" {
		f, err := os.Create(*jsonOut)
		if err != nil {
			log.Fatal(err)
		}
		setting := map[string]any{
			"passages": len(docs), "queries": len(qs), "k": *k, "reps": *reps, "ingest_runs": *ingestRuns,
			"go": runtime.Version(), "gomaxprocs": runtime.GOMAXPROCS(0), "bleve_store": *bleveStore, "bleve_query": *bleveQuery,
		}
		if err := retrieval.WriteJSON(f, setting, results); err != nil {
			log.Fatal(err)
		}
		if err := f.Close(); err != nil {
			log.Fatal(err)
		}
	}
}
