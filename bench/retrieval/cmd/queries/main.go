// Command queries writes the retrieval benchmark's known-item queries: one
// JSONL line {"query", "want", "kind"} per query, drawn from the corpus
// that cmd/corpus wrote (see retrieval.GenerateQueries for the method).
//
//	go run ./cmd/queries -corpus testdata/corpus.jsonl -out testdata/queries.jsonl
//
// The same corpus, count and seed give the same file, byte for byte.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/crux-go/crux/bench/retrieval"
)

func main() {
	corpus := flag.String("corpus", filepath.Join("testdata", "corpus.jsonl"), "corpus file to read")
	out := flag.String("out", filepath.Join("testdata", "queries.jsonl"), "queries file to write")
	n := flag.Int("n", 1000, "number of queries")
	seed := flag.Uint64("seed", 1, "seed of the generator")
	flag.Parse()
	log.SetFlags(0)
	docs, err := retrieval.ReadJSONL[retrieval.Doc](*corpus)
	if err != nil {
		log.Fatal(err)
	}
	qs := retrieval.GenerateQueries(docs, retrieval.QueryOptions{N: *n, Seed: *seed})
	if len(qs) < *n {
		log.Printf("queries: only %d of the %d wanted", len(qs), *n)
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := retrieval.WriteJSONL(*out, qs); err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "queries: %d from %d passages (seed %d), to %s\n", len(qs), len(docs), *seed, *out)
}
