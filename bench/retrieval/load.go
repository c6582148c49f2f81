package retrieval

// Loaders of the evaluation corpora. The data is read where it lies (the
// evaluation data directory, by default ../shared/eval from the repository
// root); nothing is copied into the project.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// RepoRoot is the root of the crux repository that holds dir: the nearest
// directory at or above dir whose go.mod declares the module
// github.com/crux-go/crux.
func RepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			for line := range bytes.SplitSeq(b, []byte("\n")) {
				if string(bytes.TrimSpace(line)) == "module github.com/crux-go/crux" {
					return d, nil
				}
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no crux repository at or above %s", dir)
		}
	}
}

// DefaultEvalData is the evaluation data directory: $CRUX_EVAL_DATA, else
// ../shared/eval from the root of the repository that holds the working
// directory (a checkout has shared/ beside it).
func DefaultEvalData() string {
	if d := os.Getenv("CRUX_EVAL_DATA"); d != "" {
		return d
	}
	wd, err := os.Getwd()
	if err != nil {
		return filepath.Join("..", "shared", "eval")
	}
	root, err := RepoRoot(wd)
	if err != nil {
		return filepath.Join("..", "shared", "eval")
	}
	return filepath.Join(filepath.Dir(root), "shared", "eval")
}

// ---- conversations ----

// Conversation is one conversation file: sessions of turns between two
// speakers, and questions about them.
type Conversation struct {
	ID       string `json:"conversation_id"`
	SpeakerA string `json:"speaker_a"`
	SpeakerB string `json:"speaker_b"`
	Sessions []struct {
		Session  int    `json:"session"`
		DateTime string `json:"date_time"`
		Turns    []struct {
			DiaID       string `json:"dia_id"`
			Speaker     string `json:"speaker"`
			Text        string `json:"text"`
			BlipCaption string `json:"blip_caption"`
		} `json:"turns"`
	} `json:"sessions"`
	QA []struct {
		Question string `json:"question"`
		// Answer is a string or a number; only its presence matters here.
		Answer   json.RawMessage `json:"answer"`
		Evidence []string        `json:"evidence"`
		Category int             `json:"category"`
	} `json:"qa"`
}

// ConversationCategories names the question categories of the
// conversations that are scored (5, adversarial, is not).
var ConversationCategories = map[int]string{1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}

// ConversationGroup makes the group of one conversation: one memory per
// turn, as a document (id = dia_id, title = "<speaker>, <date_time>", text
// = "<speaker>: <text>" and " [shares <blip_caption>]" when there is one)
// and as a fact (entity = speaker, key = dia_id, value = the same text and
// " (<date_time>)"); the questions of categories 1 to 4 that have evidence,
// each evidence turn relevant with gain 1. bad counts the evidence ids
// that name no turn (they stay among the relevant, so recall counts them
// as missed).
func ConversationGroup(c *Conversation) (g Group, skipped, bad int) {
	g.Name = c.ID
	turns := map[string]bool{}
	for _, s := range c.Sessions {
		for _, t := range s.Turns {
			text := t.Speaker + ": " + t.Text
			if t.BlipCaption != "" {
				text += " [shares " + t.BlipCaption + "]"
			}
			g.Docs = append(g.Docs, Doc{ID: t.DiaID, Title: t.Speaker + ", " + s.DateTime, Text: text})
			g.Facts = append(g.Facts, Fact{Entity: t.Speaker, Key: t.DiaID, Value: text + " (" + s.DateTime + ")"})
			turns[t.DiaID] = true
		}
	}
	for i, q := range c.QA {
		if q.Category < 1 || q.Category > 4 || len(q.Evidence) == 0 {
			skipped++
			continue
		}
		rel := make(map[string]float64, len(q.Evidence))
		for _, e := range q.Evidence {
			rel[e] = 1
			if !turns[e] {
				bad++
			}
		}
		g.Questions = append(g.Questions, Question{ID: fmt.Sprintf("%s/qa%d", c.ID, i), Query: q.Question,
			Relevant: rel, Category: q.Category})
	}
	return g, skipped, bad
}

// LoadConversations reads every *.json conversation file of dir, in name
// order, one group per conversation.
func LoadConversations(dir string) (*Corpus, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("conversations: no *.json file in %s", dir)
	}
	sort.Strings(files)
	c := &Corpus{Name: "conversations", Categories: ConversationCategories}
	var skipped, bad int
	ids := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var conv Conversation
		if err := json.Unmarshal(b, &conv); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if conv.ID == "" {
			conv.ID = filepath.Base(f)
		}
		if other, ok := ids[conv.ID]; ok {
			return nil, fmt.Errorf("%s: conversation %s again (first in %s)", f, conv.ID, other)
		}
		ids[conv.ID] = f
		g, s, n := ConversationGroup(&conv)
		if len(g.Docs) == 0 {
			return nil, fmt.Errorf("%s: no turns", f)
		}
		c.Groups = append(c.Groups, g)
		skipped, bad = skipped+s, bad+n
	}
	c.Notes = append(c.Notes, fmt.Sprintf("%s: %d questions not scored (category 5, or no evidence); %d evidence ids name no turn (counted as not found).",
		dir, skipped, bad))
	return c, nil
}

// ---- cranfield ----

// CranfieldQuery is one query of queries.json: its text and the documents
// judged relevant, each with its code (1 a complete answer … 4 of minimum
// interest).
type CranfieldQuery struct {
	ID       int            `json:"query_id"`
	Text     string         `json:"text"`
	Relevant map[string]int `json:"relevant"`
}

// LoadCranfield reads docs.jsonl and queries.json of dir as one group,
// graded: a document of code c has gain 5 − c (codes outside 1 to 4 are
// left out).
func LoadCranfield(dir string) (*Corpus, error) {
	docs, err := ReadJSONL[Doc](filepath.Join(dir, "docs.jsonl"))
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "queries.json"))
	if err != nil {
		return nil, err
	}
	var qs []CranfieldQuery
	if err := json.Unmarshal(b, &qs); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "queries.json"), err)
	}
	ids := map[string]bool{}
	for _, d := range docs {
		if ids[d.ID] {
			return nil, fmt.Errorf("cranfield: document %s twice", d.ID)
		}
		ids[d.ID] = true
	}
	g := Group{Name: "cranfield", Docs: docs}
	var unjudged, bad int
	for _, q := range qs {
		rel := map[string]float64{}
		for id, code := range q.Relevant {
			if code >= 1 && code <= 4 {
				rel[id] = float64(5 - code)
				if !ids[id] {
					bad++
				}
			}
		}
		if len(rel) == 0 {
			unjudged++
			continue
		}
		g.Questions = append(g.Questions, Question{ID: strconv.Itoa(q.ID), Query: q.Text, Relevant: rel})
	}
	if len(g.Questions) == 0 {
		return nil, errors.New("cranfield: no judged query")
	}
	c := &Corpus{Name: "cranfield", Graded: true, Groups: []Group{g}}
	if unjudged > 0 || bad > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("%s: %d queries without judgments left out; %d judged ids name no document.", dir, unjudged, bad))
	}
	return c, nil
}

// ---- godocs ----

// GodocsCorpus is the Go-docs corpus (cmd/corpus) with its known-item
// queries (cmd/queries) as one group: each query's one relevant passage,
// gain 1.
func GodocsCorpus(docs []Doc, queries []Query) *Corpus {
	g := Group{Name: "godocs", Docs: docs}
	for i, q := range queries {
		g.Questions = append(g.Questions, Question{ID: strconv.Itoa(i), Query: q.Query, Relevant: map[string]float64{q.Want: 1}})
	}
	return &Corpus{Name: "godocs", Groups: []Group{g}}
}
