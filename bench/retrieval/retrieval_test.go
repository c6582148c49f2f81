package retrieval

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	smallOnce sync.Once
	smallDocs []Doc
	smallErr  error
)

// smallCorpus is a corpus of a few standard library packages.
func smallCorpus() ([]Doc, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{"strings": true, "bytes": true, "sort": true, "bufio": true, "unicode/utf8": true, "container/list": true}
	return GenerateCorpus(strings.TrimSpace(string(out)), CorpusOptions{
		Include: func(p string) bool { return keep[p] }, Unexported: true,
	})
}

// small is smallCorpus, made once.
func small(t testing.TB) []Doc {
	t.Helper()
	smallOnce.Do(func() { smallDocs, smallErr = smallCorpus() })
	if smallErr != nil {
		t.Fatal(smallErr)
	}
	return smallDocs
}

func TestCorpus(t *testing.T) {
	docs := small(t)
	if len(docs) < 300 {
		t.Fatalf("%d passages from six packages", len(docs))
	}
	byID := map[string]Doc{}
	for i, d := range docs {
		if i > 0 && docs[i-1].ID >= d.ID {
			t.Fatalf("ids not sorted and unique: %q then %q", docs[i-1].ID, d.ID)
		}
		if d.DocStart < 0 || d.DocStart > len(d.Text) {
			t.Fatalf("%s: doc_start %d out of range", d.ID, d.DocStart)
		}
		byID[d.ID] = d
	}
	pkg, ok := byID["strings"]
	if !ok || pkg.Title != "package strings" || !strings.HasPrefix(pkg.Text[pkg.DocStart:], "Package strings implements") {
		t.Errorf("package passage: %+v", pkg)
	}
	m, ok := byID["strings.Builder.WriteString"]
	if !ok {
		t.Fatal("no passage strings.Builder.WriteString")
	}
	if m.Title != "strings.Builder.WriteString" || !strings.HasPrefix(m.Text, "func (b *Builder) WriteString(s string) (int, error)\n\n") ||
		!strings.Contains(m.Text[m.DocStart:], "appends the contents of s") {
		t.Errorf("method passage: %+v", m)
	}
	if strings.Contains(m.Text, "b.copyCheck()") {
		t.Error("method passage holds the function body")
	}
	if _, ok := byID["bytes.ErrTooLarge"]; !ok {
		t.Error("no passage for var bytes.ErrTooLarge")
	}
	if _, ok := byID["sort.insertionSort"]; !ok {
		t.Error("no passage for the documented unexported sort.insertionSort")
	}
	for id := range byID {
		if strings.HasSuffix(id, ".init") || strings.HasSuffix(id, "._") {
			t.Errorf("passage %s", id)
		}
	}

	fresh, err := smallCorpus()
	if err != nil {
		t.Fatal(err)
	}
	if !equalDocs(docs, fresh) {
		t.Error("two corpora from the same GOROOT differ")
	}
}

func equalDocs(a, b []Doc) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestQueries(t *testing.T) {
	docs := small(t)
	qs := GenerateQueries(docs, QueryOptions{N: 150, Seed: 7})
	if len(qs) < 100 {
		t.Fatalf("only %d queries", len(qs))
	}
	again := GenerateQueries(docs, QueryOptions{N: 150, Seed: 7})
	if len(again) != len(qs) {
		t.Fatal("same seed, different query count")
	}
	for i := range qs {
		if qs[i] != again[i] {
			t.Fatalf("same seed, query %d differs: %+v vs %+v", i, qs[i], again[i])
		}
	}
	other := GenerateQueries(docs, QueryOptions{N: 150, Seed: 8})
	if len(other) > 0 && other[0] == qs[0] && other[len(other)-1] == qs[len(qs)-1] {
		t.Error("another seed gave the same queries")
	}

	norm := func(s string) string {
		var b strings.Builder
		b.WriteByte(' ')
		for _, w := range words(s) {
			b.WriteString(w.w + " ")
		}
		return b.String()
	}
	texts := make(map[string]string, len(docs))
	for _, d := range docs {
		texts[d.ID] = norm(d.Title + "\n" + d.Text)
	}
	seen := map[string]bool{}
	for _, q := range qs {
		ws := words(q.Query)
		if len(ws) < 3 || len(ws) > 6 {
			t.Errorf("%q: %d words", q.Query, len(ws))
		}
		if seen[q.Want] {
			t.Errorf("two queries for %s", q.Want)
		}
		seen[q.Want] = true
		p := norm(q.Query)
		for id, text := range texts {
			if strings.Contains(text, p) != (id == q.Want) {
				t.Errorf("%q: in %s: %v (want: %s)", q.Query, id, strings.Contains(text, p), q.Want)
			}
		}
		for w := range idWords(q.Want) {
			for _, qw := range ws {
				if qw.w == w {
					t.Errorf("%q holds %q, a word of its id %s", q.Query, w, q.Want)
				}
			}
		}
	}
}

func TestScore(t *testing.T) {
	q := Score([]int{1, 2, 0, 11, 10}, 10)
	if q.Recall != 0.6 {
		t.Errorf("recall %v, want 0.6", q.Recall)
	}
	if want := (1 + 0.5 + 0.1) / 5; q.MRR < want-1e-12 || q.MRR > want+1e-12 {
		t.Errorf("MRR %v, want %v", q.MRR, want)
	}
	if got := Rank([]string{"a", "b"}, "b"); got != 2 {
		t.Errorf("Rank %d", got)
	}
	ds := []time.Duration{5, 1, 4, 2, 3}
	if Percentile(ds, 50) != 3 || Percentile(ds, 95) != 5 || Percentile(ds, 1) != 1 || Median(ds) != 3 {
		t.Errorf("percentiles of %v: %v %v %v", ds, Percentile(ds, 50), Percentile(ds, 95), Median(ds))
	}
	if Median([]time.Duration{1, 2, 3, 4}) != 2 {
		t.Error("median of an even count")
	}
}

func TestAnalyze(t *testing.T) {
	got := strings.Join(Analyze("The Readers' buffering, io.Reader and ConnectionS"), " ")
	if want := "reader buffer io reader connect"; got != want {
		t.Errorf("Analyze = %q, want %q", got, want)
	}
}

func TestBM25Scores(t *testing.T) {
	x := NewBM25()
	x.Ingest([]Doc{
		{ID: "a", Text: "apple banana"},
		{ID: "b", Text: "apple apple apple cherry"},
		{ID: "c", Text: "durian"},
	})
	got, _ := x.Query("apple", 10)
	if strings.Join(got, ",") != "b,a" {
		t.Errorf("apple: %v", got)
	}
	got, _ = x.Query("cherry durian", 1)
	if strings.Join(got, ",") != "c" {
		t.Errorf("cherry durian, k=1: %v (c is shorter, so ranks first)", got)
	}
	if got, _ := x.Query("the", 10); len(got) != 0 {
		t.Errorf("stop word: %v", got)
	}
}

// TestSystems runs the harness over the small corpus: every system must
// find most known items, and report sensible figures. crux-facts is left
// out: query_facts ranks the facts that hold a word by confidence alone.
func TestSystems(t *testing.T) {
	docs := small(t)
	qs := GenerateQueries(docs, QueryOptions{N: 100, Seed: 1})
	var systems []Factory
	for _, f := range AllFactories() {
		if f.Name != "crux-facts" {
			systems = append(systems, f)
		}
	}
	results, err := Run(RunOptions{Docs: docs, Queries: qs, Systems: systems, Reps: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(systems) || len(systems) < len(Factories())+2 {
		t.Fatalf("%d results for %d systems", len(results), len(systems))
	}
	for _, r := range results {
		t.Logf("%s: recall %.2f MRR %.2f size %d p50 %v", r.System, r.Recall, r.MRR, r.Size, r.P50)
		if r.Recall < 0.8 || r.MRR < 0.5 {
			t.Errorf("%s: recall@10 %.2f, MRR@10 %.2f", r.System, r.Recall, r.MRR)
		}
		if r.Samples != len(qs) || r.P50 <= 0 || r.P95 < r.P50 || r.Ingest <= 0 {
			t.Errorf("%s: figures %+v", r.System, r)
		}
		if r.System == "bleve" && r.Size <= 0 {
			t.Errorf("bleve size %d", r.Size)
		}
	}
	var buf bytes.Buffer
	Markdown(&buf, results, "bleve")
	if !strings.Contains(buf.String(), "| bleve |") || !strings.Contains(buf.String(), "p50 / bleve") {
		t.Errorf("table:\n%s", buf.String())
	}
}

func TestJSONL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.jsonl")
	in := []Query{{Query: "a <b> & c", Want: "x", Kind: "phrase"}, {Query: "d", Want: "y"}}
	if err := WriteJSONL(path, in); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), "a <b> & c") {
		t.Errorf("HTML escaped: %s", b)
	}
	out, err := ReadJSONL[Query](path)
	if err != nil || len(out) != 2 || out[0] != in[0] || out[1] != in[1] {
		t.Errorf("read back %+v, %v", out, err)
	}
}
