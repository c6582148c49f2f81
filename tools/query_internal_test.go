package tools

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crux-go/crux/index"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

func TestSnippet(t *testing.T) {
	terms := func(q string) []index.QueryTerm { qt, _ := index.Query(q); return qt }
	if got := indexWordFold("Xranking, Ranked", "rank", -1); got != 10 {
		t.Errorf("indexWordFold = %d, want 10 (the word start, not inside Xranking)", got)
	}
	if got := indexWordFold("nothing here", "rank", -1); got != -1 {
		t.Errorf("indexWordFold = %d, want -1", got)
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

// TestIndexWordFoldMatchesNaive: the search agrees with a byte-by-byte
// one on texts mixing cases, word boundaries and near misses, with and
// without an end bound.
func TestIndexWordFoldMatchesNaive(t *testing.T) {
	naive := func(text, term string, end int) int {
		for at := 0; at+len(term) <= len(text); at++ {
			if end >= 0 && at >= end {
				break
			}
			if (at == 0 || !isWordByte(text[at-1])) && hasPrefixFold(text[at:], term) {
				return at
			}
		}
		return -1
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"r", "R", "a", "A", "n", "k", " ", "x", "é", "-", "rank", "RANK", "Rank"}
	for range 5000 {
		var b strings.Builder
		for range r.IntN(30) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		text := b.String()
		for _, term := range []string{"rank", "ra", "r", "k9"} {
			for _, end := range []int{-1, 0, r.IntN(len(text) + 2)} {
				if got, want := indexWordFold(text, term, end), naive(text, term, end); got != want {
					t.Fatalf("indexWordFold(%q, %q, %d) = %d, want %d", text, term, end, got, want)
				}
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
		if err == nil && again != c.m[segmentKey{"t", uint32(n - 1)}] {
			t.Error("the newest segment was read again, not served from the cache")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.bytes > segmentCacheBytes || len(c.m) < n/4 {
		t.Fatalf("cache holds %d bytes in %d segments", c.bytes, len(c.m))
	}
	if _, ok := c.m[segmentKey{"t", 0}]; ok {
		t.Error("the oldest segment was kept")
	}
}
