package retrieval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestJudge(t *testing.T) {
	bin := map[string]float64{"a": 1, "b": 1, "c": 1}
	for _, tc := range []struct {
		name             string
		got              []string
		rel              map[string]float64
		k                int
		recall, rr, ndcg float64
		first            int
	}{
		// a at 1, b at 3 of three relevant: DCG 1 + 1/log2(4) = 1.5,
		// ideal 1 + 1/log2(3) + 1/log2(4).
		{"binary", []string{"a", "x", "b", "y"}, bin, 10, 2.0 / 3, 1, 1.5 / (1 + 1/math.Log2(3) + 0.5), 1},
		// b at rank 3 is past the cutoff 2.
		{"cutoff", []string{"x", "a", "b"}, bin, 2, 1.0 / 3, 0.5, (1 / math.Log2(3)) / (1 + 1/math.Log2(3)), 2},
		// a repeated id counts once, at its first rank: a is at rank 2.
		{"repeats", []string{"x", "x", "a"}, bin, 10, 1.0 / 3, 0.5, (1 / math.Log2(3)) / (1 + 1/math.Log2(3) + 0.5), 2},
		{"none", []string{"x", "y"}, bin, 10, 0, 0, 0, 0},
		{"empty answer", nil, bin, 10, 0, 0, 0, 0},
		{"no judgments", []string{"a"}, map[string]float64{}, 10, 0, 0, 0, 0},
		// graded: b (gain 1) first, a (gain 4) second: DCG 1 + 4/log2(3),
		// ideal 4 + 1/log2(3).
		{"graded", []string{"b", "a"}, map[string]float64{"a": 4, "b": 1}, 10, 1, 1, (1 + 4/math.Log2(3)) / (4 + 1/math.Log2(3)), 1},
		{"ideal order", []string{"a", "b"}, map[string]float64{"a": 4, "b": 1}, 10, 1, 1, 1, 1},
		// twelve relevant, all in the first ten: recall 10/12, nDCG 1 (the
		// ideal list is cut at ten too).
		{"more relevant than k", strings.Fields("r0 r1 r2 r3 r4 r5 r6 r7 r8 r9 r10 r11"),
			map[string]float64{"r0": 1, "r1": 1, "r2": 1, "r3": 1, "r4": 1, "r5": 1, "r6": 1, "r7": 1, "r8": 1, "r9": 1, "r10": 1, "r11": 1},
			10, 10.0 / 12, 1, 1, 1},
	} {
		j := Judge(tc.got, tc.rel, tc.k)
		if !near(j.Recall, tc.recall) || !near(j.RR, tc.rr) || !near(j.NDCG, tc.ndcg) || j.First != tc.first {
			t.Errorf("%s: %+v, want recall %.4f rr %.4f ndcg %.4f first %d", tc.name, j, tc.recall, tc.rr, tc.ndcg, tc.first)
		}
	}
}

func TestMean(t *testing.T) {
	s := Mean([]Judgment{{Recall: 1, RR: 1, NDCG: 1, First: 1}, {Recall: 0.5, RR: 0.25, NDCG: 0.5, First: 4}, {}})
	if s.Questions != 3 || !near(s.Recall, 0.5) || !near(s.MRR, 1.25/3) || !near(s.NDCG, 0.5) || s.Missed != 1 {
		t.Errorf("Mean = %+v", s)
	}
	if s := Mean(nil); s.Questions != 0 || s.Recall != 0 {
		t.Errorf("Mean(nil) = %+v", s)
	}
}

// tinyConversation is a conversation file in the evaluation's format.
const tinyConversation = `{
 "conversation_id": "t1", "speaker_a": "Ann", "speaker_b": "Bo",
 "sessions": [
  {"session": 1, "date_time": "1:00 pm on 8 May, 2023", "turns": [
   {"dia_id": "D1:1", "speaker": "Ann", "text": "I adopted a puppy called Biscuit yesterday."},
   {"dia_id": "D1:2", "speaker": "Bo", "text": "Lovely! Look at my garden.", "blip_caption": "a photo of red tulips"}
  ]},
  {"session": 2, "date_time": "9:30 am on 2 June, 2023", "turns": [
   {"dia_id": "D2:1", "speaker": "Ann", "text": "Biscuit chewed my violin case."},
   {"dia_id": "D2:2", "speaker": "Bo", "text": "I started pottery classes on Tuesday."}
  ]}
 ],
 "qa": [
  {"question": "What is the name of Ann's puppy?", "answer": "Biscuit", "evidence": ["D1:1"], "category": 4},
  {"question": "Which flowers grow in Bo's garden?", "answer": 2023, "evidence": ["D1:2"], "category": 1},
  {"question": "What did Biscuit chew, and when did Ann adopt the puppy?", "answer": "x", "evidence": ["D2:1", "D1:1", "D9:9"], "category": 2},
  {"question": "What did Bo say about cats?", "adversarial_answer": "nothing", "evidence": ["D2:2"], "category": 5},
  {"question": "When did Bo start pottery?", "answer": "Tuesday", "evidence": [], "category": 2}
 ]
}`

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadConversations(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.json"), tinyConversation)
	writeFile(t, filepath.Join(dir, "b.json"), strings.Replace(tinyConversation, `"t1"`, `"t2"`, 1))
	writeFile(t, filepath.Join(dir, "notes.txt"), "not a conversation")
	c, err := LoadConversations(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "conversations" || c.Graded || len(c.Groups) != 2 || c.Groups[0].Name != "t1" || c.Groups[1].Name != "t2" {
		t.Fatalf("corpus %+v", c)
	}
	g := c.Groups[0]
	if len(g.Docs) != 4 || len(g.Facts) != 4 {
		t.Fatalf("%d docs, %d facts", len(g.Docs), len(g.Facts))
	}
	wantDoc := Doc{ID: "D1:2", Title: "Bo, 1:00 pm on 8 May, 2023", Text: "Bo: Lovely! Look at my garden. [shares a photo of red tulips]"}
	if g.Docs[1] != wantDoc {
		t.Errorf("doc %+v, want %+v", g.Docs[1], wantDoc)
	}
	if g.Docs[2].Text != "Ann: Biscuit chewed my violin case." || g.Docs[2].Title != "Ann, 9:30 am on 2 June, 2023" {
		t.Errorf("doc %+v", g.Docs[2])
	}
	wantFact := Fact{Entity: "Bo", Key: "D1:2", Value: "Bo: Lovely! Look at my garden. [shares a photo of red tulips] (1:00 pm on 8 May, 2023)"}
	if g.Facts[1] != wantFact {
		t.Errorf("fact %+v, want %+v", g.Facts[1], wantFact)
	}
	// Category 5 and the question without evidence are not scored.
	if len(g.Questions) != 3 {
		t.Fatalf("%d questions: %+v", len(g.Questions), g.Questions)
	}
	q := g.Questions[2]
	if q.ID != "t1/qa2" || q.Category != 2 || q.Query != "What did Biscuit chew, and when did Ann adopt the puppy?" ||
		len(q.Relevant) != 3 || q.Relevant["D2:1"] != 1 || q.Relevant["D9:9"] != 1 {
		t.Errorf("question %+v", q)
	}
	if len(c.Notes) != 1 || !strings.Contains(c.Notes[0], "4 questions not scored") || !strings.Contains(c.Notes[0], "2 evidence ids name no turn") {
		t.Errorf("notes %q", c.Notes)
	}

	writeFile(t, filepath.Join(dir, "c.json"), tinyConversation)
	if _, err := LoadConversations(dir); err == nil || !strings.Contains(err.Error(), "again") {
		t.Errorf("two files of one conversation: %v", err)
	}
	if _, err := LoadConversations(t.TempDir()); err == nil {
		t.Error("no error for a directory without conversations")
	}
}

func TestLoadCranfield(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "docs.jsonl"), `{"id":"1","title":"lift of wings","text":"lift of wings . wings in a slipstream"}
{"id":"2","title":"","text":"heat transfer in hypersonic flow"}
{"id":"3","title":"boundary layers","text":"boundary layers on flat plates"}
`)
	writeFile(t, filepath.Join(dir, "queries.json"), `[
 {"query_id": 1, "text": "wing lift in slipstream", "relevant": {"1": 1, "3": 4, "2": 7}},
 {"query_id": 2, "text": "nothing judged", "relevant": {}},
 {"query_id": 3, "text": "hypersonic heat", "relevant": {"2": 2, "9": 3}}
]`)
	c, err := LoadCranfield(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Graded || len(c.Groups) != 1 || len(c.Groups[0].Docs) != 3 {
		t.Fatalf("corpus %+v", c)
	}
	qs := c.Groups[0].Questions
	if len(qs) != 2 || qs[0].ID != "1" || qs[1].ID != "3" {
		t.Fatalf("questions %+v", qs)
	}
	// Gain 5 - code; a code outside 1..4 is no judgment.
	if r := qs[0].Relevant; len(r) != 2 || r["1"] != 4 || r["3"] != 1 {
		t.Errorf("gains %v", r)
	}
	if r := qs[1].Relevant; len(r) != 2 || r["2"] != 3 || r["9"] != 2 {
		t.Errorf("gains %v", r)
	}
	if len(c.Notes) != 1 || !strings.Contains(c.Notes[0], "1 queries without judgments") || !strings.Contains(c.Notes[0], "1 judged ids name no document") {
		t.Errorf("notes %q", c.Notes)
	}
}

func TestGodocsCorpus(t *testing.T) {
	c := GodocsCorpus([]Doc{{ID: "a"}, {ID: "b"}}, []Query{{Query: "q", Want: "b"}})
	if c.Graded || len(c.Groups) != 1 || len(c.Groups[0].Questions) != 1 {
		t.Fatalf("%+v", c)
	}
	if q := c.Groups[0].Questions[0]; q.Query != "q" || len(q.Relevant) != 1 || q.Relevant["b"] != 1 {
		t.Errorf("%+v", q)
	}
}

func TestRepoRoot(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "go.mod"), "module github.com/crux-go/crux\n\ngo 1.26\n")
	writeFile(t, filepath.Join(root, "bench", "retrieval", "go.mod"), "module github.com/crux-go/crux/bench/retrieval\n")
	sub := filepath.Join(root, "bench", "retrieval", "cmd")
	os.MkdirAll(sub, 0o755)
	got, err := RepoRoot(sub)
	if err != nil || got != root {
		t.Errorf("RepoRoot = %q, %v; want %q", got, err, root)
	}
	if _, err := RepoRoot(t.TempDir()); err == nil {
		t.Error("a directory outside any crux repository has a root")
	}
	t.Setenv("CRUX_EVAL_DATA", "/some/where")
	if d := DefaultEvalData(); d != "/some/where" {
		t.Errorf("DefaultEvalData = %q", d)
	}
}

// TestEvaluate runs every system over the tiny conversation, twice (two
// groups), and checks the figures that do not depend on a system's
// ranking, and those that any keyword system must get.
func TestEvaluate(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.json"), tinyConversation)
	writeFile(t, filepath.Join(dir, "b.json"), strings.Replace(tinyConversation, `"t1"`, `"t2"`, 1))
	c, err := LoadConversations(dir)
	if err != nil {
		t.Fatal(err)
	}
	systems := EvalFactories()
	if len(systems) != len(AllFactories()) || systems[0].Name != "crux" || systems[1].Name != "crux-facts" {
		t.Fatalf("systems %v", systems)
	}
	results, details, err := Evaluate(c, systems, EvalOptions{Reps: 2, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(systems) || len(details) != len(systems) {
		t.Fatalf("%d results, %d details", len(results), len(details))
	}
	for i, r := range results {
		if r.System != systems[i].Name || r.Corpus != "conversations" || r.K != 10 || r.Questions != 6 || r.Samples != 12 || r.P50 <= 0 {
			t.Errorf("%s: %+v", r.System, r)
		}
		if len(details[i]) != 6 || details[i][0].Group != "t1" || details[i][3].Group != "t2" {
			t.Errorf("%s: details %+v", r.System, details[i])
		}
		if cat := r.ByCategory; len(cat) != 3 || cat[4].Questions != 2 || cat[1].Questions != 2 || cat[2].Questions != 2 {
			t.Errorf("%s: categories %+v", r.System, cat)
		}
		// The third question's evidence: D2:1 and D1:1 are found by any
		// keyword system, D9:9 is no turn, so recall is at most 2/3.
		if d := details[i][2]; d.Recall > 2.0/3+1e-9 || d.Ranks["D9:9"] != 0 || len(d.Ranks) != 3 {
			t.Errorf("%s: %+v", r.System, d)
		}
		if r.System == "crux-facts" {
			continue // it ranks by confidence alone, not by the words
		}
		// "What is the name of Ann's puppy?" finds D1:1 first, "Which flowers
		// grow in Bo's garden?" finds D1:2 (its caption is part of it).
		if d := details[i][0]; d.First != 1 || d.Ranks["D1:1"] != 1 {
			t.Errorf("%s: puppy: %+v", r.System, d)
		}
		if d := details[i][1]; d.First == 0 {
			t.Errorf("%s: garden: %+v", r.System, d)
		}
		if d := details[i][2]; d.Ranks["D2:1"] == 0 || d.Ranks["D1:1"] == 0 || !near(d.Recall, 2.0/3) {
			t.Errorf("%s: chew: %+v", r.System, d)
		}
	}

	var buf bytes.Buffer
	EvalMarkdown(&buf, c, results)
	table := buf.String()
	for _, want := range []string{"### conversations: 8 documents in 2 group(s), 6 questions", "| crux |", "| sqlite-fts5 |",
		"| 4 single-hop | 2 |", "evidence ids name no turn"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "nDCG") {
		t.Errorf("nDCG for binary judgments:\n%s", table)
	}
	c.Graded = true
	buf.Reset()
	EvalMarkdown(&buf, c, results)
	if !strings.Contains(buf.String(), "| nDCG@10 |") {
		t.Errorf("no nDCG for a graded corpus:\n%s", buf.String())
	}

	buf.Reset()
	if err := WriteDetails(&buf, c, details[0], 30); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	n := 0
	for sc.Scan() {
		var l detailLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			if len(l.Relevant) != 3 || l.Relevant[2].ID != "D9:9" || l.Relevant[2].Text != "(no such document)" {
				t.Errorf("detail relevant %+v", l.Relevant)
			}
			for _, r := range l.Relevant {
				if r.ID == "D2:1" && (r.Rank == 0 || !strings.HasPrefix(r.Text, "Ann, 9:30 am on 2 June, 2023 |")) {
					t.Errorf("detail %+v", r)
				}
			}
		}
		if len(l.Top) != len(l.Got) {
			t.Errorf("detail top %+v", l.Top)
		}
		n++
	}
	if n != 6 {
		t.Errorf("%d detail lines", n)
	}
}
