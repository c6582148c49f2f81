package index_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/crux-go/crux/index"
)

func terms(text string) []string {
	var out []string
	index.Terms(text, func(t string) { out = append(out, t) })
	return out
}

func TestTerms(t *testing.T) {
	assert.Equal(t, []string{"databas", "databas", "databas"}, terms("Databases, database; the DATABASE's"))
	assert.Equal(t, []string{"run", "run", "runner"}, terms("running runs a runner"))
	assert.Equal(t, []string{"http2", "straße", "日本語"}, terms("x HTTP2 Straße 日本語 y"), "letters and digits of any script; one-byte runs dropped")
	assert.Empty(t, terms("the of and it"), "stop words")
	assert.Equal(t, []string{"not", "good"}, terms("not good"), "negations are kept")
	long := strings.Repeat("é", 40) // 80 bytes
	got := terms(long)
	assert.LessOrEqual(t, len(got[0]), index.MaxTermBytes)
	assert.Equal(t, []string{"the", "databas"}, index.Words("the databases the"), "Words keeps stop words, once each")
}

func TestQuery(t *testing.T) {
	qt, stops := index.Query("Where are the databases and the Database stored?")
	assert.Equal(t, []string{"are", "the", "and", "the"}, stops)
	assert.Equal(t, []index.QueryTerm{{Term: "where", Words: []string{"where"}}, {Term: "databas", Words: []string{"databases", "database"}},
		{Term: "store", Words: []string{"stored"}}}, qt, "question words are terms")
	_, stops = index.Query("not this, no")
	assert.Equal(t, []string{"this"}, stops, "negations are kept")
}

func TestSegment(t *testing.T) {
	assert.Empty(t, index.Segment(" \n\n\t "))
	assert.Equal(t, []string{"one\n\ntwo"}, index.Segment("one\n\n\ntwo\n"), "short paragraphs pack together")
	assert.Equal(t, []string{"intro", "# Title\nbody", "## Next\nmore"}, index.Segment("intro\n# Title\nbody\n## Next\nmore"), "headings start segments")

	var b strings.Builder
	for i := range 400 {
		b.WriteString("Sentence number ")
		b.WriteString(strings.Repeat("x", i%7+2))
		b.WriteString(". ")
		if i%50 == 49 {
			b.WriteString("\n\n")
		}
	}
	b.WriteString(strings.Repeat("ü", 2000)) // a run with no space at all
	text := b.String()
	segs := index.Segment(text)
	assert.Greater(t, len(segs), 5)
	var words []string
	for _, s := range segs {
		assert.LessOrEqual(t, len(s), index.SegmentBytes)
		assert.NotEmpty(t, s)
		words = append(words, strings.Fields(s)...)
	}
	assert.Equal(t, strings.Join(strings.Fields(text), ""), strings.Join(words, ""), "every character but white space, in order")
}

func TestBM25(t *testing.T) {
	idf := index.IDF(100, 10)
	assert.InDelta(t, math.Log(1+90.5/10.5), idf, 1e-12)
	assert.Greater(t, index.IDF(100, 100), 0.0, "never negative")
	// tf 1 in a segment of average length: idf * 2.2 / 2.2.
	assert.InDelta(t, idf, index.BM25(idf, 1, 50, 50), 1e-12)
	assert.Greater(t, index.BM25(idf, 1, 10, 50), index.BM25(idf, 1, 100, 50), "shorter segments score higher")
	assert.Greater(t, index.BM25(idf, 3, 50, 50), index.BM25(idf, 1, 50, 50))
}

// TestStemConcurrent: Stem, which remembers stems process-wide, gives
// the stems an Analyzer computes, from many goroutines at once and past
// the bound of what it remembers.
func TestStemConcurrent(t *testing.T) {
	words := make([]string, 0, 20000)
	for i := range cap(words) {
		words = append(words, fmt.Sprintf("runnings%d", i), []string{"databases", "ranked", "running", "flies"}[i%4])
	}
	var a index.Analyzer
	want := make([]string, len(words))
	for i, w := range words {
		want[i] = a.Stem(w)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < len(words); i += 3 {
				if got := index.Stem(words[i]); got != want[i] {
					t.Errorf("Stem(%q) = %q, want %q", words[i], got, want[i])
					return
				}
			}
		}()
	}
	wg.Wait()
}

// splitRunes is Split as runs of unicode letters and digits read rune by
// rune, the definition Split's byte-table fast path must keep to.
func splitRunes(text string) []index.Word {
	var out []index.Word
	start := -1
	flush := func(end int) {
		if start >= 0 && end-start >= 2 {
			w := strings.ToLower(text[start:end])
			for len(w) > index.MaxTermBytes {
				_, size := utf8.DecodeLastRuneInString(w)
				w = w[:len(w)-size]
			}
			out = append(out, index.Word{Lower: w, Start: start, End: end})
		}
		start = -1
	}
	for i, r := range text {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		flush(i)
	}
	flush(len(text))
	return out
}

func FuzzSplit(f *testing.F) {
	for _, s := range []string{"", "a", "Hello, World! x2 y", "Dying, lying and TYING under the skies", "naïve café ÉTÉ ß", "日本語のテキスト 123", "a\xffb\xc3(cd", "über-größe_x", strings.Repeat("z", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var got []index.Word
		index.Split(text, func(w index.Word) { got = append(got, w) })
		want := splitRunes(text)
		assert.Equal(t, want, got)

		// SplitStarting counts every word and passes on every word that
		// may stem to one of the terms, or to a longer word starting with
		// one: here the stems of the text's every third word, and a few.
		var starts index.Starts
		terms := []string{"die", "lie", "ti", "x", "sky"}
		for i, w := range want {
			if i%3 == 0 {
				terms = append(terms, index.Stem(w.Lower))
			}
		}
		for _, term := range terms {
			starts.Add(term)
		}
		var some, wantSome []index.Word
		n := index.SplitStarting(text, &starts, func(w index.Word) { some = append(some, w) })
		for _, w := range want {
			stem := index.Stem(w.Lower)
			if slices.ContainsFunc(terms, func(term string) bool { return strings.HasPrefix(stem, term) }) {
				wantSome = append(wantSome, w)
			}
		}
		assert.Subset(t, some, wantSome, "words let through")
		assert.Equal(t, len(want), n)
		assert.Subset(t, want, some)
	})
}

// BenchmarkSplit: a passage of technical English, and the same passage
// read for three terms (the words that may hold them are lowercased and
// passed on).
func BenchmarkSplit(b *testing.B) {
	text := strings.Repeat("The Reader interface wraps the basic Read method. Read reads up to len(p) bytes into p; it returns the number of bytes read (0 <= n <= len(p)) and any error encountered. ", 8)
	b.SetBytes(int64(len(text)))
	b.Run("all", func(b *testing.B) {
		for b.Loop() {
			index.Split(text, func(index.Word) {})
		}
	})
	var starts index.Starts
	for _, t := range []string{"read", "byte", "error"} {
		starts.Add(t)
	}
	b.Run("starting", func(b *testing.B) {
		for b.Loop() {
			index.SplitStarting(text, &starts, func(index.Word) {})
		}
	})
}

func TestQueryWords(t *testing.T) {
	for text, want := range map[string][]string{
		// A question drops the words that only shape it.
		"When did Caroline go to the LGBTQ support group?": {"carolin", "go", "lgbtq", "support", "group"},
		"what did she paint":          {"paint"},
		"Did Melanie paint a sunrise": {"melani", "paint", "sunris"},
		// A keyword query keeps them; stop words go either way.
		"having no specials":        {"have", "no", "special"},
		"zero, making them":         {"zero", "make", "them"},
		"Client Do sends a request": {"client", "do", "send", "request"},
		// Nothing but such words: all of them.
		"what is it?": {"what", "is", "it"},
		"the of":      {"the", "of"},
	} {
		assert.Equal(t, want, index.QueryWords(text), text)
	}
}
