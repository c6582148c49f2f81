package retrieval

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestFitFact(t *testing.T) {
	f, cut := FitFact(Fact{Entity: "line one\nline\ttwo", Key: "k", Value: "v"})
	if cut || f.Entity != "line one line two" || f.Value != "v" {
		t.Errorf("%+v %v", f, cut)
	}
	if f, _ := FitFact(Fact{Entity: " ", Key: "42", Value: "v"}); f.Entity != "42" {
		t.Errorf("empty entity: %+v", f)
	}
	long := strings.Repeat("é", maxFactValue) // 2 bytes each
	f, cut = FitFact(Fact{Entity: strings.Repeat("x", maxFactName+5), Key: "k", Value: "a" + long})
	if !cut || len(f.Value) > maxFactValue || len(f.Value) < maxFactValue-1 || !strings.HasPrefix(f.Value, "aé") ||
		!strings.HasSuffix(f.Value, "é") || len(f.Entity) != maxFactName {
		t.Errorf("cut: value %d bytes, entity %d bytes, cut %v", len(f.Value), len(f.Entity), cut)
	}
}

func TestFTS5Match(t *testing.T) {
	got := FTS5Match(`What's "AND" NOT near(x) -- x: title:y`)
	if want := `"what" OR "s" OR "and" OR "not" OR "near" OR "x" OR "title" OR "y"`; got != want {
		t.Errorf("FTS5Match = %s, want %s", got, want)
	}
	if got := FTS5Match("?? --"); got != "" {
		t.Errorf("no words: %q", got)
	}
}

func TestFTS5(t *testing.T) {
	x, err := NewFTS5(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if err := x.Ingest([]Doc{
		{ID: "a", Title: "apples", Text: "apple banana"},
		{ID: "b", Title: "apples", Text: "apples apple apple cherry"},
		{ID: "c", Title: "NEAR", Text: "durian"},
	}); err != nil {
		t.Fatal(err)
	}
	got, err := x.Query("Apple?", 10)
	if err != nil || strings.Join(got, ",") != "b,a" {
		t.Errorf("apple: %v %v (porter: apples = apple; b holds it more often)", got, err)
	}
	got, err = x.Query(`NEAR(durian) AND "cherry`, 10)
	if err != nil || len(got) != 2 || got[0] == "a" {
		t.Errorf("operators as words: %v %v", got, err)
	}
	if got, err := x.Query("!!", 10); err != nil || len(got) != 0 {
		t.Errorf("no words: %v %v", got, err)
	}
	if n, err := x.SizeOnDisk(); err != nil || n <= 0 {
		t.Errorf("size %d %v", n, err)
	}
}

func TestBM25NoStem(t *testing.T) {
	x := NewBM25NoStem()
	if got := strings.Join(x.analyze("What did Caroline's friends PAINT, and when?"), " "); got != "caroline s friends paint" {
		t.Errorf("analyze = %q", got)
	}
	if got := strings.Join(NewBM25().analyze("What did Caroline's friends PAINT, and when?"), " "); got != "what did carolin s friend paint when" {
		t.Errorf("stemmed analyze = %q", got)
	}
	x.Ingest([]Doc{{ID: "a", Text: "she paints"}, {ID: "b", Text: "she paint"}})
	if got, _ := x.Query("paint", 10); strings.Join(got, ",") != "b" {
		t.Errorf("unstemmed: %v", got)
	}
	if x.Name() != "textbook-bm25-nostem" || NewBM25().Name() != "textbook-bm25" {
		t.Error("names")
	}
}

func TestCruxFacts(t *testing.T) {
	x, err := NewCruxFacts(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if err := x.IngestFacts([]Fact{
		{Entity: "Ann", Key: "D1:1", Value: "Ann: I adopted a puppy (8 May)"},
		{Entity: "Bo", Key: "D1:2", Value: "Bo: I play chess on Sundays (8 May)"},
		{Entity: "", Key: "D1:3", Value: "an untitled one"},
	}); err != nil {
		t.Fatal(err)
	}
	got, err := x.Query("chess", 10)
	if err != nil || strings.Join(got, ",") != "D1:2" {
		t.Errorf("chess: %v %v", got, err)
	}
	got, err = x.Query("puppy chess", 1)
	if err != nil || len(got) != 1 {
		t.Errorf("k=1: %v %v", got, err)
	}
	if got, err := x.Query("? !", 10); err != nil || len(got) != 0 {
		t.Errorf("no words: %v %v", got, err)
	}
}

// The stdio systems rank as the in-process ones do: the same tools, asked
// of a crux serve process built from this checkout.
func TestStdioSystems(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the crux command")
	}
	bin := filepath.Join(t.TempDir(), "crux")
	build := exec.Command("go", "build", "-o", bin, "./cmd/crux")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	RegisterStdio(bin)
	docs := small(t)[:300]
	qs := GenerateQueries(docs, QueryOptions{N: 40, Seed: 3})
	// answers asks name the queries, then refused: refused, it finds
	// nothing.
	answers := func(name, refused string) [][]string {
		t.Helper()
		fs, err := PickFactories(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		sys, err := fs[0].New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer sys.Close()
		if err := sys.Ingest(docs); err != nil {
			t.Fatal(err)
		}
		var out [][]string
		for _, q := range append(qs, Query{Query: refused}) {
			got, err := sys.Query(q.Query, 10)
			if err != nil {
				t.Fatalf("%s: %q: %v", name, q.Query, err)
			}
			out = append(out, got)
		}
		return out
	}
	for _, x := range []struct{ in, stdio, refused string }{
		{"crux", "crux-stdio", "the and of"},
		{"crux-facts", "crux-facts-stdio", "?? !!"},
	} {
		want, got := answers(x.in, x.refused), answers(x.stdio, x.refused)
		found := 0
		for i := range qs {
			if strings.Join(got[i], " ") != strings.Join(want[i], " ") {
				t.Errorf("%s: %q: %v, in process %v", x.stdio, qs[i].Query, got[i], want[i])
			}
			found += len(got[i])
		}
		if found == 0 || len(got[len(qs)]) != 0 {
			t.Errorf("%s: %d answers in all, %v for %q", x.stdio, found, got[len(qs)], x.refused)
		}
	}
}
