package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store/bolt"
)

// The document index on a synthetic corpus: passages of words drawn from a
// Zipf-distributed vocabulary of 30,000 words (a few very common, most
// rare, as in prose), 20 to 200 words each, deterministic. bench/retrieval
// measures the same tools on a real corpus against bleve.

// passages returns n synthetic passages.
func passages(n int) []crux.Document {
	r := rand.New(rand.NewPCG(7, 11))
	zipf := rand.NewZipf(r, 1.1, 2, 29_999)
	docs := make([]crux.Document, n)
	var b strings.Builder
	for i := range docs {
		b.Reset()
		for w := range 20 + r.IntN(180) {
			if w > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "w%dq", zipf.Uint64())
		}
		docs[i] = crux.Document{ID: fmt.Sprintf("doc/%05d", i), Title: fmt.Sprintf("passage %d", i), Text: b.String()}
	}
	return docs
}

// documentServer is a server whose tenant "bench" holds n passages.
func documentServer(b *testing.B, n int) (*crux.Server, []crux.Document) {
	srv := newServer(b, filepath.Join(b.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	docs := passages(n)
	if _, err := srv.Ingest(context.Background(), "bench", docs, nil); err != nil {
		b.Fatal(err)
	}
	return srv, docs
}

// phrase is a query of four consecutive words of doc.
func phrase(doc crux.Document, i int) string {
	w := strings.Fields(doc.Text)
	at := i % (len(w) - 3)
	return strings.Join(w[at:at+4], " ")
}

// BenchmarkIngest: 20,000 passages into an empty index, fsync on, as crux
// ingest writes them.
func BenchmarkIngest(b *testing.B) {
	docs := passages(scaled(20_000))
	for b.Loop() {
		b.StopTimer()
		srv := newServer(b, filepath.Join(b.TempDir(), "crux.db"), nil)
		b.StartTimer()
		if _, err := srv.Ingest(context.Background(), "bench", docs, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(docs))*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
}

// BenchmarkQueryDocuments: query and query_scan in-process, four-word
// phrases of the passages, over 20,000 passages.
func BenchmarkQueryDocuments(b *testing.B) {
	srv, docs := documentServer(b, scaled(20_000))
	for _, tool := range []string{"query", "query_scan"} {
		b.Run(tool, func(b *testing.B) {
			var lat latencies
			i := 0
			for b.Loop() {
				args, _ := json.Marshal(map[string]any{"tenant_id": "bench", "query": phrase(docs[(i*7919)%len(docs)], i)})
				lat.time(func() { mustCall(b, srv, tool, args) })
				i++
			}
			lat.report(b)
		})
	}
}

// BenchmarkStdioQuery: query over the stdio transport, as
// BenchmarkQueryDocuments.
func BenchmarkStdioQuery(b *testing.B) {
	srv, docs := documentServer(b, scaled(20_000))
	benchStdio(b, srv, func(i int) string {
		args, _ := json.Marshal(map[string]any{"tenant_id": "bench", "query": phrase(docs[(i*7919)%len(docs)], i)})
		return fmt.Sprintf(`{"name":"query","arguments":%s}`, args)
	})
}
