// Command corpus writes the retrieval benchmark's corpus: one JSONL line
// {"id", "title", "text", "doc_start"} per passage of the Go standard
// library's documentation under GOROOT (see retrieval.GenerateCorpus).
//
//	go run ./cmd/corpus -out testdata/corpus.jsonl
//
// The same Go release gives the same file, byte for byte.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/crux-go/crux/bench/retrieval"
)

func main() {
	out := flag.String("out", filepath.Join("testdata", "corpus.jsonl"), "corpus file to write")
	goroot := flag.String("goroot", "", "GOROOT to read (default: go env GOROOT)")
	internal := flag.Bool("internal", true, "take the internal packages too")
	vendor := flag.Bool("vendor", true, "take the vendored golang.org/x packages under src/vendor too")
	cmd := flag.Bool("cmd", false, "take the packages of the cmd tree too")
	unexported := flag.Bool("unexported", true, "take the documented unexported declarations too")
	maxDecl := flag.Int("max-decl-lines", 30, "cut declarations longer than this many lines")
	flag.Parse()
	log.SetFlags(0)
	if *goroot == "" {
		b, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			log.Fatalf("go env GOROOT: %v", err)
		}
		*goroot = strings.TrimSpace(string(b))
	}
	docs, err := retrieval.GenerateCorpus(*goroot, retrieval.CorpusOptions{
		Internal: *internal, Vendor: *vendor, Cmd: *cmd, Unexported: *unexported, MaxDeclLines: *maxDecl,
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		log.Fatal(err)
	}
	if err := retrieval.WriteJSONL(*out, docs); err != nil {
		log.Fatal(err)
	}
	var bytes int
	for _, d := range docs {
		bytes += len(d.Title) + len(d.Text)
	}
	fmt.Fprintf(os.Stderr, "corpus: %d passages, %.1f MB of text, from %s, to %s\n", len(docs), float64(bytes)/1e6, *goroot, *out)
}
