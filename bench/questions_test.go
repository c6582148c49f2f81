package bench

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crux-go/crux/store/bolt"
)

// BenchmarkQueryFactsQuestions: query_facts asked a question of twelve
// words over 1,400 facts of 150 words each, in process and over the stdio
// transport: long facts and long questions, as a passage corpus gives
// them, where every candidate of a dozen posting lists is scored. The words
// are drawn from 3,000 with a skew (a few in most facts, most in few).
func BenchmarkQueryFactsQuestions(b *testing.B) {
	srv := newServer(b, filepath.Join(b.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	r := rand.New(rand.NewPCG(1, 2))
	words := make([]string, 3000)
	for i := range words {
		words[i] = fmt.Sprintf("w%dx", i)
	}
	text := func(n int) string {
		var sb strings.Builder
		for range n {
			f := r.Float64()
			sb.WriteString(words[int(float64(len(words))*f*f*f)] + " ")
		}
		return sb.String()
	}
	for i := range scaled(1400) {
		args, _ := json.Marshal(map[string]string{"entity": "doc", "key": fmt.Sprint("k", i), "value": text(150)})
		mustCall(b, srv, "store_fact", args)
	}
	questions := make([][]byte, 100)
	for i := range questions {
		questions[i], _ = json.Marshal(map[string]any{"query": text(12), "top_k": 10})
	}
	b.Run("in-process", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			mustCall(b, srv, "query_facts", questions[i%len(questions)])
			i++
		}
	})
	b.Run("stdio", func(b *testing.B) {
		benchStdio(b, srv, func(i int) string {
			return fmt.Sprintf(`{"name":"query_facts","arguments":%s}`, questions[i%len(questions)])
		})
	})
}
