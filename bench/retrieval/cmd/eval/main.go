// Command eval measures retrieval quality on several corpora, each against
// several systems side by side, in one run: recall@10, MRR@10, nDCG@10
// where the judgments are graded, and query latency, per corpus and
// system. It prints a markdown table per corpus and can write the figures
// as JSON and, for one corpus and system, each question's answer.
//
//	go run ./cmd/eval -godocs-corpus testdata/corpus.jsonl -godocs-queries testdata/queries.jsonl
//	go run ./cmd/eval -corpora conversations,cranfield -systems crux,textbook-bm25
//	go run ./cmd/eval -corpora conversations -conversations /path/to/other/conversations
//	go run ./cmd/eval -corpora cranfield -detail cranfield/crux -detail-out /tmp/crux.jsonl
//
// bench/eval.sh makes the Go-docs corpus first and then runs this.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/crux-go/crux/bench/retrieval"
)

var corpora = []string{"conversations", "cranfield", "godocs"}

func main() {
	data := flag.String("data", "", "evaluation data directory (default $CRUX_EVAL_DATA, else ../shared/eval from the repository root)")
	convDir := flag.String("conversations", "", "directory of conversation files, *.json (default DATA/conversations)")
	cranDir := flag.String("cranfield", "", "directory of docs.jsonl and queries.json (default DATA/cranfield)")
	godocsCorpus := flag.String("godocs-corpus", filepath.Join("testdata", "corpus.jsonl"), "Go-docs corpus (cmd/corpus; bench/retrieval.sh --paths makes it)")
	godocsQueries := flag.String("godocs-queries", filepath.Join("testdata", "queries.jsonl"), "Go-docs known-item queries (cmd/queries)")
	pick := flag.String("corpora", strings.Join(corpora, ","), "comma-separated corpora to measure")
	systems := flag.String("systems", "", "comma-separated systems (default: all built in)")
	k := flag.Int("k", 10, "cutoff of recall, MRR and nDCG")
	reps := flag.Int("reps", 3, "times each question is timed")
	dir := flag.String("dir", "", "directory for the systems' files (default: the temporary directory)")
	jsonOut := flag.String("json", "", "also write the figures as JSON to this file")
	detail := flag.String("detail", "", "CORPUS/SYSTEM: write each question of that corpus as that system answered it (JSON lines)")
	detailOut := flag.String("detail-out", "", "file for -detail (default testdata/detail-CORPUS-SYSTEM.jsonl)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	cruxBin := flag.String("crux-bin", "", "crux command: with it, crux-stdio and crux-facts-stdio ask crux serve over stdio")
	pgDSN := flag.String("crux-postgres", "", "PostgreSQL database (postgres:// URL): with it, crux-pg and crux-facts-pg ask crux over PostgreSQL, each store in a schema of its own, dropped after")
	cruxLimit := flag.Int("crux-limit", 0, "limit passed to crux's query tool (its results are segments, several of a document counting once; default: k)")
	flag.Parse()
	log.SetFlags(0)
	retrieval.CruxLimit = *cruxLimit
	if *cruxBin != "" {
		retrieval.RegisterStdio(*cruxBin)
	}
	if *pgDSN != "" {
		retrieval.RegisterPostgres(*pgDSN)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}

	if *data == "" {
		*data = retrieval.DefaultEvalData()
	}
	if *convDir == "" {
		*convDir = filepath.Join(*data, "conversations")
	}
	if *cranDir == "" {
		*cranDir = filepath.Join(*data, "cranfield")
	}
	chosen, err := retrieval.PickFactories(*systems, retrieval.EvalFactories())
	if err != nil {
		log.Fatal(err)
	}
	var names []string
	for _, c := range strings.Split(*pick, ",") {
		c = strings.TrimSpace(c)
		if !slices.Contains(corpora, c) {
			log.Fatalf("no corpus %q (%s)", c, strings.Join(corpora, ", "))
		}
		names = append(names, c)
	}
	var detailCorpus, detailSystem string
	if *detail != "" {
		var ok bool
		detailCorpus, detailSystem, ok = strings.Cut(*detail, "/")
		if !ok || !slices.Contains(names, detailCorpus) ||
			!slices.ContainsFunc(chosen, func(f retrieval.Factory) bool { return f.Name == detailSystem }) {
			log.Fatalf("-detail %q: want CORPUS/SYSTEM among the corpora and systems of this run", *detail)
		}
		if *detailOut == "" {
			*detailOut = filepath.Join("testdata", "detail-"+detailCorpus+"-"+detailSystem+".jsonl")
		}
	}

	start := time.Now()
	fmt.Fprintf(os.Stderr, "k=%d, %d timed runs of each question, %s, GOMAXPROCS=%d\n", *k, *reps, runtime.Version(), runtime.GOMAXPROCS(0))
	type corpusOut struct {
		Name      string                 `json:"name"`
		Source    []string               `json:"source"`
		Groups    int                    `json:"groups"`
		Documents int                    `json:"documents"`
		Questions int                    `json:"questions"`
		Graded    bool                   `json:"graded"`
		Notes     []string               `json:"notes,omitempty"`
		Results   []retrieval.EvalResult `json:"results"`
	}
	var outs []corpusOut
	fmt.Printf("k=%d; p50 and p95 over %d timed runs of each question, in process; %s, GOMAXPROCS=%d\n", *k, *reps, runtime.Version(), runtime.GOMAXPROCS(0))
	for _, name := range names {
		var c *retrieval.Corpus
		var src []string
		switch name {
		case "conversations":
			c, err = retrieval.LoadConversations(*convDir)
			src = []string{*convDir}
		case "cranfield":
			c, err = retrieval.LoadCranfield(*cranDir)
			src = []string{*cranDir}
		case "godocs":
			var docs []retrieval.Doc
			var qs []retrieval.Query
			docs, err = retrieval.ReadJSONL[retrieval.Doc](*godocsCorpus)
			if err == nil {
				qs, err = retrieval.ReadJSONL[retrieval.Query](*godocsQueries)
			}
			if err != nil {
				err = fmt.Errorf("%w (bench/eval.sh makes the Go-docs corpus and queries; bench/retrieval.sh --paths prints them)", err)
			}
			c = retrieval.GodocsCorpus(docs, qs)
			src = []string{*godocsCorpus, *godocsQueries}
		}
		if err != nil {
			log.Fatal(err)
		}
		results, details, err := retrieval.Evaluate(c, chosen, retrieval.EvalOptions{K: *k, Reps: *reps, Dir: *dir, Log: os.Stderr})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println()
		retrieval.EvalMarkdown(os.Stdout, c, results)
		docs, qs := c.Counts()
		outs = append(outs, corpusOut{Name: c.Name, Source: src, Groups: len(c.Groups), Documents: docs, Questions: qs,
			Graded: c.Graded, Notes: c.Notes, Results: results})
		if name == detailCorpus {
			i := slices.IndexFunc(chosen, func(f retrieval.Factory) bool { return f.Name == detailSystem })
			if err := writeFile(*detailOut, func(f *os.File) error { return retrieval.WriteDetails(f, c, details[i], 200) }); err != nil {
				log.Fatal(err)
			}
			fmt.Fprintf(os.Stderr, "%s: %d questions as %s answered them in %s\n", c.Name, len(details[i]), detailSystem, *detailOut)
		}
	}
	fmt.Fprintf(os.Stderr, "done in %.0f s\n", time.Since(start).Seconds())
	if *jsonOut != "" {
		setting := map[string]any{"k": *k, "reps": *reps, "crux_limit": *cruxLimit, "go": runtime.Version(), "gomaxprocs": runtime.GOMAXPROCS(0),
			"date": time.Now().UTC().Format(time.RFC3339)}
		err := writeFile(*jsonOut, func(f *os.File) error {
			return retrieval.WriteJSON(f, setting, outs)
		})
		if err != nil {
			log.Fatal(err)
		}
	}
}

func writeFile(path string, write func(*os.File) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
