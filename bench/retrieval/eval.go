package retrieval

// The evaluation: several corpora of different kinds (conversations.go,
// cranfield.go and the Go-docs corpus of corpus.go), each measured against
// several systems side by side in one run: recall@k, MRR@k, nDCG@k where
// the judgments are graded, and query latency.

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sort"
	"time"
)

// Question is one query of an evaluation corpus and its judgments.
type Question struct {
	// ID names the question within its corpus (for the per-question
	// detail).
	ID string `json:"id"`
	// Query is the text given to the systems, unedited.
	Query string `json:"query"`
	// Relevant maps the id of each document judged relevant to its gain
	// (> 0): 1 for binary judgments.
	Relevant map[string]float64 `json:"relevant"`
	// Category is the question's kind where the corpus has kinds, else 0.
	Category int `json:"category,omitempty"`
}

// Group is the documents and questions of one tenant: each system gets a
// new, empty index (its own directory) for each group, and a group's
// questions are asked of its own documents only.
type Group struct {
	Name string
	Docs []Doc
	// Facts are the documents as facts (Fact.Key = Doc.ID), for a system
	// that is a FactIngester; nil means DocFacts(Docs).
	Facts     []Fact
	Questions []Question
}

// Corpus is one evaluation corpus.
type Corpus struct {
	Name string
	// Graded says the judgments carry grades, so nDCG is reported.
	Graded bool
	Groups []Group
	// Categories names the question categories, where there are some.
	Categories map[int]string
	// Notes say what a loader noticed about the data (judged ids that are
	// no document, questions left out), for the report.
	Notes []string
}

// Counts are the documents and questions of a corpus.
func (c *Corpus) Counts() (docs, questions int) {
	for _, g := range c.Groups {
		docs += len(g.Docs)
		questions += len(g.Questions)
	}
	return docs, questions
}

// evalOrder is the order in which the evaluation shows the systems.
var evalOrder = []string{"crux", "crux-facts", "crux-docs-facts", "crux-stdio", "crux-facts-stdio", "crux-pg", "crux-facts-pg", "textbook-bm25", "textbook-bm25-nostem", "bleve", "sqlite-fts5"}

// EvalFactories returns every registered system, in the evaluation's
// order: crux's tools (query, query_facts, and query over a tenant that
// holds facts too), the two textbook BM25s, bleve, SQLite FTS5
// (and any other, by name, after them).
func EvalFactories() []Factory {
	all := AllFactories()
	pos := func(name string) int {
		for i, n := range evalOrder {
			if n == name {
				return i
			}
		}
		return len(evalOrder)
	}
	sort.SliceStable(all, func(i, j int) bool { return pos(all[i].Name) < pos(all[j].Name) })
	return all
}

// Judgment is how one result list scores against one question.
type Judgment struct {
	// Recall is the share of the relevant documents among the first k.
	Recall float64 `json:"recall"`
	// RR is 1/rank of the first relevant document, 0 if none is among
	// the first k.
	RR float64 `json:"rr"`
	// NDCG is DCG@k / ideal DCG@k, with DCG = Σ gain(rank i) / log2(i+1).
	NDCG float64 `json:"ndcg"`
	// First is the rank of the first relevant document, 0 if none.
	First int `json:"first_rank"`
}

// Judge scores got (document ids, best first; a repeated id counts once,
// at its first rank) against the relevant documents rel at cutoff k.
func Judge(got []string, rel map[string]float64, k int) Judgment {
	var j Judgment
	if len(rel) == 0 {
		return j
	}
	seen := make(map[string]bool, k)
	found, dcg, rank := 0, 0.0, 0
	for _, id := range got {
		if rank == k {
			break
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		rank++
		g := rel[id]
		if g <= 0 {
			continue
		}
		found++
		dcg += g / math.Log2(float64(rank)+1)
		if j.First == 0 {
			j.First = rank
			j.RR = 1 / float64(rank)
		}
	}
	j.Recall = float64(found) / float64(len(rel))
	gains := make([]float64, 0, len(rel))
	for _, g := range rel {
		gains = append(gains, g)
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(gains)))
	var ideal float64
	for i, g := range gains[:min(k, len(gains))] {
		if g > 0 {
			ideal += g / math.Log2(float64(i)+2)
		}
	}
	if ideal > 0 {
		j.NDCG = dcg / ideal
	}
	return j
}

// Scores are the means of judgments over a set of questions.
type Scores struct {
	Questions int     `json:"questions"`
	Recall    float64 `json:"recall"`
	MRR       float64 `json:"mrr"`
	NDCG      float64 `json:"ndcg"`
	// Missed counts the questions with no relevant document among the
	// first k.
	Missed int `json:"missed"`
}

// Mean averages judgments (each question counting the same).
func Mean(js []Judgment) Scores {
	s := Scores{Questions: len(js)}
	if len(js) == 0 {
		return s
	}
	for _, j := range js {
		s.Recall += j.Recall
		s.MRR += j.RR
		s.NDCG += j.NDCG
		if j.First == 0 {
			s.Missed++
		}
	}
	n := float64(len(js))
	s.Recall, s.MRR, s.NDCG = s.Recall/n, s.MRR/n, s.NDCG/n
	return s
}

// EvalResult is one system's figures on one corpus.
type EvalResult struct {
	Corpus string `json:"corpus"`
	System string `json:"system"`
	K      int    `json:"k"`
	Graded bool   `json:"graded"`
	Scores
	// ByCategory are the scores of each question category (corpora that
	// have categories).
	ByCategory map[int]Scores `json:"by_category,omitempty"`
	// Ingest is the wall time of all the groups' ingests, summed.
	Ingest time.Duration `json:"ingest_ns"`
	// P50 and P95 are over every timed query (questions × reps).
	P50     time.Duration `json:"p50_ns"`
	P95     time.Duration `json:"p95_ns"`
	Samples int           `json:"latency_samples"`
	// ValuesCut counts the facts whose value was cut to store_fact's
	// limit (crux-facts).
	ValuesCut int `json:"values_cut,omitempty"`
}

// Detail is one question as one system answered it.
type Detail struct {
	Group    string   `json:"group"`
	ID       string   `json:"id"`
	Category int      `json:"category,omitempty"`
	Query    string   `json:"query"`
	Got      []string `json:"got"`
	Judgment
	// Ranks maps each relevant document to its rank in Got (0: not among
	// the first k).
	Ranks map[string]int `json:"ranks"`
}

// EvalOptions say how Evaluate measures.
type EvalOptions struct {
	// K is the cutoff and the k passed to Query; zero means 10.
	K int
	// Reps is how many times each question is timed; zero means 3.
	Reps int
	// Dir is where the systems' directories are made ("": the temporary
	// directory).
	Dir string
	// Log, when not nil, receives progress lines.
	Log io.Writer
}

// Evaluate measures each system on the corpus. For each group it makes
// every system anew in a directory of its own and ingests the group's
// documents (a FactIngester its facts); then asks each question once of
// every system and judges the answer (which also warms the systems); then
// times the questions: Reps rounds, each timing every question once on
// every system in turn, the order of the systems rotating between rounds
// and the heap collected before each system's share. It returns one result
// per system, in the order given, and each system's per-question details.
func Evaluate(c *Corpus, systems []Factory, o EvalOptions) ([]EvalResult, [][]Detail, error) {
	if o.K == 0 {
		o.K = 10
	}
	if o.Reps == 0 {
		o.Reps = 3
	}
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	results := make([]EvalResult, len(systems))
	details := make([][]Detail, len(systems))
	judged := make([][]Judgment, len(systems))
	lats := make([][]time.Duration, len(systems))
	for i, f := range systems {
		results[i] = EvalResult{Corpus: c.Name, System: f.Name, K: o.K, Graded: c.Graded}
	}
	for gi := range c.Groups {
		g := &c.Groups[gi]
		err := func() error {
			type live struct {
				sys System
				dir string
			}
			lives := make([]live, len(systems))
			defer func() {
				for _, l := range lives {
					if l.sys != nil {
						l.sys.Close()
					}
					if l.dir != "" {
						os.RemoveAll(l.dir)
					}
				}
			}()
			for i, f := range systems {
				dir, err := os.MkdirTemp(o.Dir, "eval-"+f.Name+"-")
				if err != nil {
					return err
				}
				lives[i].dir = dir
				sys, err := f.New(dir)
				if err != nil {
					return fmt.Errorf("%s: %w", f.Name, err)
				}
				lives[i].sys = sys
				runtime.GC()
				start := time.Now()
				facts := func() []Fact { // the group's facts, or its documents as facts
					if g.Facts != nil {
						return g.Facts
					}
					return DocFacts(g.Docs)
				}
				switch x := sys.(type) {
				case DocFactIngester:
					err = x.IngestDocsFacts(g.Docs, facts())
				case FactIngester:
					err = x.IngestFacts(facts())
				default:
					err = sys.Ingest(g.Docs)
				}
				took := time.Since(start)
				if err != nil {
					return fmt.Errorf("%s: %s: ingest: %w", f.Name, g.Name, err)
				}
				// Let background work (bleve's merges) settle before
				// anything is timed.
				if _, err := sys.SizeOnDisk(); err != nil {
					return fmt.Errorf("%s: size: %w", f.Name, err)
				}
				results[i].Ingest += took
				switch cf := sys.(type) {
				case *CruxFacts:
					results[i].ValuesCut += cf.Cut
				case *CruxDocsFacts:
					results[i].ValuesCut += cf.Cut
				case *cruxFactsStdio:
					results[i].ValuesCut += cf.Cut
				}
				logf("%s/%s: %s: ingest of %d documents in %.2f s", c.Name, g.Name, f.Name, len(g.Docs), took.Seconds())
			}
			for i, l := range lives {
				for _, q := range g.Questions {
					got, err := l.sys.Query(q.Query, o.K)
					if err != nil {
						return fmt.Errorf("%s: question %s %q: %w", systems[i].Name, q.ID, q.Query, err)
					}
					j := Judge(got, q.Relevant, o.K)
					judged[i] = append(judged[i], j)
					ranks := make(map[string]int, len(q.Relevant))
					for id := range q.Relevant {
						ranks[id] = 0
						if r := Rank(got, id); r <= o.K {
							ranks[id] = r
						}
					}
					details[i] = append(details[i], Detail{Group: g.Name, ID: q.ID, Category: q.Category, Query: q.Query,
						Got: got, Judgment: j, Ranks: ranks})
				}
			}
			for rep := range o.Reps {
				for j := range lives {
					i := (j + rep + gi) % len(lives)
					runtime.GC()
					for _, q := range g.Questions {
						start := time.Now()
						if _, err := lives[i].sys.Query(q.Query, o.K); err != nil {
							return fmt.Errorf("%s: question %s: %w", systems[i].Name, q.ID, err)
						}
						lats[i] = append(lats[i], time.Since(start))
					}
				}
			}
			for i := range lives {
				err := lives[i].sys.Close()
				lives[i].sys = nil
				if err != nil {
					return fmt.Errorf("%s: close: %w", systems[i].Name, err)
				}
			}
			return nil
		}()
		if err != nil {
			return nil, nil, fmt.Errorf("%s/%s: %w", c.Name, g.Name, err)
		}
	}
	for i := range results {
		r := &results[i]
		r.Scores = Mean(judged[i])
		if len(c.Categories) > 0 {
			by := map[int][]Judgment{}
			for n, d := range details[i] {
				by[d.Category] = append(by[d.Category], judged[i][n])
			}
			r.ByCategory = map[int]Scores{}
			for cat, js := range by {
				r.ByCategory[cat] = Mean(js)
			}
		}
		r.P50, r.P95, r.Samples = Percentile(lats[i], 50), Percentile(lats[i], 95), len(lats[i])
		logf("%s: %s: recall@%d %.3f, MRR@%d %.3f, nDCG@%d %.3f, p50 %v", c.Name, r.System, o.K, r.Recall, o.K, r.MRR, o.K, r.NDCG, r.P50)
	}
	return results, details, nil
}

// EvalMarkdown writes one corpus's results as a markdown table (system,
// recall, MRR, nDCG where the corpus is graded, p50 and p95 latency,
// ingest time), then, for a corpus with question categories, recall and
// MRR per category.
func EvalMarkdown(w io.Writer, c *Corpus, results []EvalResult) {
	docs, qs := c.Counts()
	k := 10
	if len(results) > 0 {
		k = results[0].K
	}
	fmt.Fprintf(w, "### %s: %d documents in %d group(s), %d questions\n\n", c.Name, docs, len(c.Groups), qs)
	head := "| system | recall@%d | MRR@%d |"
	args := []any{k, k}
	if c.Graded {
		head += " nDCG@%d |"
		args = append(args, k)
	}
	fmt.Fprintf(w, head+" p50 µs | p95 µs | ingest s |\n", args...)
	cols := 6
	if c.Graded {
		cols = 7
	}
	for range cols {
		fmt.Fprint(w, "| --- ")
	}
	fmt.Fprintln(w, "|")
	for _, r := range results {
		fmt.Fprintf(w, "| %s | %.3f | %.3f |", r.System, r.Recall, r.MRR)
		if c.Graded {
			fmt.Fprintf(w, " %.3f |", r.NDCG)
		}
		fmt.Fprintf(w, " %.0f | %.0f | %.2f |\n", us(r.P50), us(r.P95), r.Ingest.Seconds())
	}
	if len(c.Categories) > 0 && len(results) > 0 {
		var cats []int
		for cat := range c.Categories {
			cats = append(cats, cat)
		}
		sort.Ints(cats)
		fmt.Fprintf(w, "\nrecall@%d / MRR@%d by question category:\n\n| category | questions |", k, k)
		for _, r := range results {
			fmt.Fprintf(w, " %s |", r.System)
		}
		fmt.Fprintln(w)
		for range len(results) + 2 {
			fmt.Fprint(w, "| --- ")
		}
		fmt.Fprintln(w, "|")
		for _, cat := range cats {
			fmt.Fprintf(w, "| %d %s | %d |", cat, c.Categories[cat], results[0].ByCategory[cat].Questions)
			for _, r := range results {
				s := r.ByCategory[cat]
				fmt.Fprintf(w, " %.3f / %.3f |", s.Recall, s.MRR)
			}
			fmt.Fprintln(w)
		}
	}
	for _, n := range c.Notes {
		fmt.Fprintf(w, "\n%s", n)
	}
	if len(c.Notes) > 0 {
		fmt.Fprintln(w)
	}
	for _, r := range results {
		if r.ValuesCut > 0 {
			fmt.Fprintf(w, "\n%s: %d fact values cut to store_fact's limit of %d bytes.\n", r.System, r.ValuesCut, maxFactValue)
		}
	}
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// detailLine is one line of WriteDetails: a Detail with the text of the
// documents it names.
type detailLine struct {
	Detail
	// Relevant lists the relevant documents, best grade first, with their
	// rank and the start of their text.
	Relevant []docLine `json:"relevant"`
	// Top lists the documents returned, in rank order.
	Top []docLine `json:"top"`
}

type docLine struct {
	ID   string  `json:"id"`
	Rank int     `json:"rank,omitempty"`
	Gain float64 `json:"gain,omitempty"`
	Text string  `json:"text"`
}

// WriteDetails writes one JSON line per question: what the system
// returned, the rank of each relevant document and the first snippet
// bytes of each document's title and text, for studying failures.
func WriteDetails(w io.Writer, c *Corpus, details []Detail, snippet int) error {
	type key struct{ group, id string }
	docs := map[key]Doc{}
	for _, g := range c.Groups {
		for _, d := range g.Docs {
			docs[key{g.Name, d.ID}] = d
		}
	}
	rel := map[key]map[string]float64{}
	for _, g := range c.Groups {
		for _, q := range g.Questions {
			rel[key{g.Name, q.ID}] = q.Relevant
		}
	}
	text := func(group, id string) string {
		d, ok := docs[key{group, id}]
		if !ok {
			return "(no such document)"
		}
		s := d.Title + " | " + d.Text
		return cutUTF8(s, snippet)
	}
	var lines []detailLine
	for _, d := range details {
		l := detailLine{Detail: d}
		gains := rel[key{d.Group, d.ID}]
		for id, r := range d.Ranks {
			l.Relevant = append(l.Relevant, docLine{ID: id, Rank: r, Gain: gains[id], Text: text(d.Group, id)})
		}
		sort.Slice(l.Relevant, func(i, j int) bool {
			a, b := l.Relevant[i], l.Relevant[j]
			if a.Gain != b.Gain {
				return a.Gain > b.Gain
			}
			return a.ID < b.ID
		})
		for i, id := range d.Got {
			l.Top = append(l.Top, docLine{ID: id, Rank: i + 1, Gain: gains[id], Text: text(d.Group, id)})
		}
		lines = append(lines, l)
	}
	return encodeJSONL(w, lines)
}
