package retrieval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/pgtest"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/store/postgres"
	"github.com/crux-go/crux/tools"
)

// The recall checks give the same results on PostgreSQL as on bbolt
// because the rankings are the same: each group of the conversations (the
// evaluation's, read where they lie; left out when absent) and of a small
// Go-docs corpus is ingested into crux over bbolt and over PostgreSQL, as
// documents (for query) and as facts (for query_facts), and every question
// must get the same rows from both, in the same order, with the same
// scores. Both servers share one fixed clock, so that the facts' ages,
// which weigh their scores, do not differ by when each store was written.
func TestPostgresRankingsMatchBolt(t *testing.T) {
	dsn := pgtest.DSN(t)
	var groups []Group
	conv, err := LoadConversations(filepath.Join(DefaultEvalData(), "conversations"))
	switch {
	case err == nil:
		groups = append(groups, conv.Groups...)
	case errors.Is(err, fs.ErrNotExist) || len(conv.Groups) == 0:
		t.Logf("no conversations (%v): the Go-docs corpus only", err)
	default:
		t.Fatal(err)
	}
	docs := small(t)
	g := Group{Name: "godocs", Docs: docs}
	for i, q := range GenerateQueries(docs, QueryOptions{N: 200, Seed: 1}) {
		g.Questions = append(g.Questions, Question{ID: fmt.Sprint(i), Query: q.Query})
	}
	groups = append(groups, g)

	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	opts := func() *crux.Options { return &crux.Options{Now: func() time.Time { return now }} }
	open := func(t *testing.T, pg bool) store.Backend {
		t.Helper()
		if pg {
			schema, _ := pgtest.Schema(t, "crux_recall")
			db, err := postgres.Open(context.Background(), dsn, &postgres.Options{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			return db
		}
		db, err := bolt.Open(filepath.Join(t.TempDir(), fmt.Sprint(time.Now().UnixNano())), &bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	var questions, rows int
	for _, g := range groups {
		t.Run(g.Name, func(t *testing.T) {
			facts := g.Facts
			if facts == nil {
				facts = DocFacts(g.Docs)
			}
			var answers [2][]string // bbolt's, PostgreSQL's: one line per question and tool
			for i, pg := range []bool{false, true} {
				d, err := newCruxOn(open(t, pg), opts())
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				f, err := newCruxFactsOn(open(t, pg), opts())
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if err := d.Ingest(g.Docs); err != nil {
					t.Fatal(err)
				}
				if err := f.IngestFacts(facts); err != nil {
					t.Fatal(err)
				}
				for _, q := range g.Questions {
					answers[i] = append(answers[i], queryRows(t, d, q.Query), queryFactRows(t, f, q.Query))
				}
			}
			differ := 0
			for j := range answers[0] {
				if answers[0][j] != answers[1][j] {
					if differ++; differ <= 5 {
						t.Errorf("question %q, %s:\n  bbolt      %s\n  PostgreSQL %s", g.Questions[j/2].Query,
							[]string{"query", "query_facts"}[j%2], answers[0][j], answers[1][j])
					}
				}
				if answers[0][j] != "" {
					rows++
				}
			}
			if differ > 0 {
				t.Errorf("%d of %d answers differ", differ, len(answers[0]))
			}
			questions += len(g.Questions)
		})
	}
	t.Logf("%d questions in %d groups, %d non-empty answers of query and query_facts", questions, len(groups), rows)
	if rows < questions {
		t.Errorf("only %d non-empty answers to %d questions: the comparison compares little", rows, questions)
	}
}

// queryRows is the query tool's answer to q, one row after the other:
// document, segment, scores.
func queryRows(t *testing.T, x *Crux, q string) string {
	t.Helper()
	args, _ := json.Marshal(queryArgs(q, 10))
	res, err := x.srv.CallTool(context.Background(), x.caller, "query", args)
	if refusedAs(err, queryRefused) {
		return ""
	}
	if err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	out, err := crux.Decode[tools.QueryOutput](res)
	if err != nil {
		t.Fatalf("query %q: %v", q, err)
	}
	s := ""
	for _, r := range out.Results {
		s += fmt.Sprintf("%s#%d %.9g %.9g; ", r.DocID, r.SegmentIndex, r.Score, r.FusedScore)
	}
	return s
}

// queryFactRows is query_facts' answer to q, one row after the other: key
// (the document the fact stands for), score.
func queryFactRows(t *testing.T, x *CruxFacts, q string) string {
	t.Helper()
	args, _ := json.Marshal(queryFactsArgs{Query: q, TopK: 10})
	res, err := x.srv.CallTool(context.Background(), x.caller, "query_facts", args)
	if refusedAs(err, factsRefused) {
		return ""
	}
	if err != nil {
		t.Fatalf("query_facts %q: %v", q, err)
	}
	out, err := crux.Decode[tools.QueryFactsOutput](res)
	if err != nil {
		t.Fatalf("query_facts %q: %v", q, err)
	}
	s := ""
	for _, r := range out.Rows {
		s += fmt.Sprintf("%s %.9g; ", r.Key, r.Score)
	}
	return s
}
