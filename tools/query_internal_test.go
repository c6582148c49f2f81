package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/index"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/toolkit"
)

func TestSnippet(t *testing.T) {
	terms := func(q string) *termFinder { qt, _ := index.Query(q); return newTermFinder(qt) }
	if got := terms("rank").index("Xranking, Ranked"); got != 10 {
		t.Errorf("index = %d, want 10 (the word start, not inside Xranking)", got)
	}
	if got := terms("rank").index("nothing here"); got != -1 {
		t.Errorf("index = %d, want -1", got)
	}
	short := "Short text comes back whole."
	if got := snippet(short, terms("text")); got != short {
		t.Errorf("snippet(short) = %q", got)
	}
	long := strings.Repeat("filler words here ", 40) + "The Ranking of segments uses BM25. " + strings.Repeat("tail words ", 40)
	got := snippet(long, terms("ranked"))
	if !strings.Contains(got, "Ranking of segments") || !strings.HasPrefix(got, "…") || !strings.HasSuffix(got, "…") {
		t.Errorf("snippet = %q: want the match, cut on both sides", got)
	}
	if n := len(got); n > snippetBytes+2*len("…") {
		t.Errorf("snippet is %d bytes", n)
	}
	multi := strings.Repeat("é", 300) + " rank"
	if got := snippet(multi, terms("rank")); !strings.HasSuffix(got, "rank") && !strings.HasSuffix(got, "…") || !utf8Valid(got) {
		t.Errorf("snippet of multi-byte text = %q", got)
	}
}

// TestTermFinderMatchesNaive: the search agrees with a byte-by-byte
// one, term by term, on texts mixing cases, word boundaries and near
// misses.
func TestTermFinderMatchesNaive(t *testing.T) {
	naive := func(text string, terms []string) int {
		for at := 0; at < len(text); at++ {
			for _, term := range terms {
				if at+len(term) <= len(text) && (at == 0 || !isWordByte(text[at-1])) && hasPrefixFold(text[at:], term) {
					return at
				}
			}
		}
		return -1
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"r", "R", "a", "A", "n", "k", " ", "x", "é", "-", "9", "rank", "RANK", "Rank", "K9"}
	sets := [][]string{{"rank"}, {"ra"}, {"r"}, {"k9"}, {"xa", "rank"}, {"k", "an", "é"}, {"9", "rank", "ra"}, {}}
	for range 5000 {
		var b strings.Builder
		for range r.IntN(30) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		text := b.String()
		for _, set := range sets {
			qt := make([]index.QueryTerm, len(set))
			for i, term := range set {
				qt[i] = index.QueryTerm{Term: term}
			}
			if got, want := newTermFinder(qt).index(text), naive(text, set); got != want {
				t.Fatalf("index(%q) of %q = %d, want %d", text, set, got, want)
			}
		}
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// TestSegmentCacheBound: the cache forgets the oldest segments once it
// holds segmentCacheBytes, keeps the newest, and answers what the store
// holds.
func TestSegmentCacheBound(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	text := strings.Repeat("word ", 200) // 1000 bytes: one segment each
	n := 2 * segmentCacheBytes / 1000
	var docs []store.PreparedDocument
	var a index.Analyzer
	for i := range n {
		p, err := store.PrepareDocument(store.Document{ID: fmt.Sprint(i), Text: text}, &a)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, p)
	}
	ctx := context.Background()
	if err := db.Update(ctx, func(tx store.Tx) error { _, err := store.PutDocuments(tx, "t", docs, time.Now()); return err }); err != nil {
		t.Fatal(err)
	}
	c := newSegmentCache()
	err = db.View(ctx, func(tx store.Tx) error {
		for i := range n {
			s, err := c.segment(tx, "t", uint32(i))
			if err != nil {
				return err
			}
			if s.DocID != fmt.Sprint(i) {
				t.Fatalf("segment %d is of document %s", i, s.DocID)
			}
		}
		again, err := c.segment(tx, "t", uint32(n-1))
		if err == nil && again != c.m["t"][uint32(n-1)] {
			t.Error("the newest segment was read again, not served from the cache")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.bytes > segmentCacheBytes || len(c.m["t"]) < n/4 {
		t.Fatalf("cache holds %d bytes in %d segments", c.bytes, len(c.m["t"]))
	}
	if _, ok := c.m["t"][0]; ok {
		t.Error("the oldest segment was kept")
	}
}

// TestOutputJSON: the hand-written JSON of query's and query_facts's
// answers is encoding/json's, byte for byte, on answers with every field
// set (found by reflection, so a field added to the types and not to
// AppendJSON fails here), with empty and nil lists, and text that needs
// escaping; and JSONResult writes them so.
func TestOutputJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	texts := []string{"", "plain", `quote " and \ back`, "<b>&amp;</b>", "line\nbreak\ttab", "é€😀", "\u2028", "ctl\x01"}
	var fill func(v reflect.Value)
	fill = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			v.SetString(texts[r.IntN(len(texts))])
		case reflect.Int, reflect.Int64:
			v.SetInt(r.Int64N(1e6) - 10)
		case reflect.Uint32:
			v.SetUint(r.Uint64N(1 << 32))
		case reflect.Float64:
			v.SetFloat([]float64{0, 1, 0.0164, 12.3456, 1e-7, 3e21, r.Float64() * 100}[r.IntN(7)])
		case reflect.Bool:
			v.SetBool(r.IntN(2) == 0)
		case reflect.Pointer: // query_facts's envelope, written by encoding/json
		case reflect.Struct:
			for i := range v.NumField() {
				fill(v.Field(i))
			}
		case reflect.Slice:
			switch r.IntN(4) {
			case 0: // nil
			case 1:
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			default:
				n := 1 + r.IntN(3)
				v.Set(reflect.MakeSlice(v.Type(), n, n))
				for i := range n {
					fill(v.Index(i))
				}
			}
		default:
			t.Fatalf("AppendJSON's test cannot fill a %s", v.Type())
		}
	}
	check := func(o toolkit.JSONAppender) {
		t.Helper()
		fill(reflect.ValueOf(o).Elem())
		want, err := json.Marshal(o)
		require.NoError(t, err)
		got, ok := o.AppendJSON(nil)
		require.True(t, ok)
		require.Equal(t, string(want), string(got))
	}
	for range 3000 {
		check(new(QueryOutput))
		check(new(QueryFactsOutput))
	}
	_, ok := QueryOutput{Results: []QueryRow{{Score: math.NaN()}}}.AppendJSON(nil)
	assert.False(t, ok, "NaN cannot be written")
	_, ok = QueryFactsOutput{Rows: []FactRow{{Score: math.Inf(1)}}}.AppendJSON(nil)
	assert.False(t, ok, "Inf cannot be written")
	_, ok = QueryFactsOutput{Envelope: &Envelope{}}.AppendJSON(nil)
	assert.False(t, ok, "an envelope is written by encoding/json")
}
