package tools

import (
	"strings"
	"testing"

	"github.com/crux-go/crux/index"
)

func TestSnippet(t *testing.T) {
	terms := func(q string) []index.QueryTerm { qt, _ := index.Query(q); return qt }
	if got := indexWordFold("Xranking, Ranked", "rank"); got != 10 {
		t.Errorf("indexWordFold = %d, want 10 (the word start, not inside Xranking)", got)
	}
	if got := indexWordFold("nothing here", "rank"); got != -1 {
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

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
