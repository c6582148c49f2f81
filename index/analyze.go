// Package index is crux's text analysis and ranking: how text becomes
// index terms, how documents are cut into segments, and the BM25 formula
// the retrieval tools rank segments with. It keeps no state and knows
// nothing of storage; package store writes what it produces.
//
// # Terms
//
// Text is split into maximal runs of Unicode letters and digits;
// each run is lowercased, runs shorter than two bytes are dropped,
// and what remains is cut to [MaxTermBytes] and stemmed with the English
// Snowball (Porter2) stemmer, so that "databases", "database" and
// "database's" are one term. [Terms] then drops English stop words ("the",
// "of", ... : [IsStop]) for the document index, where they carry no
// ranking weight and would make up a third of every posting list; [Words]
// keeps them, for short texts such as facts, where every word may be the
// one a caller asks by.
//
// # Segments
//
// [Segment] cuts a document into segments of at most [SegmentBytes]
// bytes at paragraph boundaries (blank lines; a Markdown heading starts a
// new paragraph), then at sentence ends, then at spaces. Retrieval ranks
// segments, so a long document is found by its relevant part.
//
// # Ranking
//
// [BM25] is Okapi BM25 with k1 = 0.9 and b = 0.75 and the
// non-negative idf ln(1 + (N - df + 0.5)/(df + 0.5)).
package index

import (
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"

	"github.com/crux-go/crux/internal/codec"
)

// MaxTermBytes is the longest term; longer runs are cut to it (on a
// UTF-8 boundary) before stemming.
const MaxTermBytes = 64

// stopWords are the English stop words [Terms] drops: the 33 words of the
// classic Lucene English list (the default of most search engines) but
// the negations "no" and "not", which crux keeps. A longer list (one of
// 127 words, with "what", "how", "over", "do", ...) measured worse on the
// retrieval benchmark of bench/retrieval: recall@10 0.967 and MRR@10 0.857
// against 0.980 and 0.890 with this one, since questions and technical
// text lean on such words.
var stopWords = func() map[string]struct{} {
	m := make(map[string]struct{})
	for _, w := range strings.Fields(`a an and are as at be but by for if in into is it of on or such that
		the their then there these they this to was will with`) {
		m[w] = struct{}{}
	}
	return m
}()

// IsStop reports whether the lowercased word w is a stop word.
func IsStop(w string) bool {
	_, ok := stopWords[w]
	return ok
}

// isWordRune reports whether r belongs to a word.
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// Word is one word of a text as [Split] finds it: its lowercased form
// (cut to MaxTermBytes) and its byte offsets in the text.
type Word struct {
	Lower      string
	Start, End int
}

// Split calls fn for every word of text, in order: each maximal run of
// letters and digits at least two bytes long.
func Split(text string, fn func(w Word)) { SplitStarting(text, nil, fn) }

// SplitStarting is Split calling fn only for the words that starts lets
// through (every word when starts is nil), and returns the number of
// words of text. It spares lowercasing and stemming the words a caller
// looking for a few terms would pass over.
func SplitStarting(text string, starts *Starts, fn func(w Word)) int {
	n, i := 0, 0
	for i < len(text) {
		// Past the bytes between words, then to the end of the word.
		for i < len(text) && byteClass[text[i]] == classOther {
			i++
		}
		if i == len(text) {
			break
		}
		if byteClass[text[i]] == classMulti {
			if r, size := utf8.DecodeRuneInString(text[i:]); !isWordRune(r) {
				i += size
				continue
			}
		}
		start := i
		for i < len(text) {
			for i < len(text) && byteClass[text[i]] == classWord {
				i++
			}
			if i == len(text) || byteClass[text[i]] == classOther {
				break
			}
			r, size := utf8.DecodeRuneInString(text[i:])
			if !isWordRune(r) {
				break
			}
			i += size
		}
		if i-start < 2 {
			continue
		}
		n++
		if starts == nil || starts.lets(text[start], text[start+1]) {
			emit(text, start, i, fn)
		}
	}
	return n
}

// Starts is a set of terms as [SplitStarting] reads it: the beginnings of
// the words whose stem can be one of them or start with one. Stemming
// changes the end of a word, never its first two bytes but for three
// words ("dying", "lying" and "tying" stem to "die", "lie" and "tie"), so
// a word is let through when its first two bytes, lowercased, begin a
// term, or it starts with a byte past ASCII (whose lowercase may be
// longer). The zero value lets no word through.
type Starts struct {
	one [256]bool            // terms of one byte (or starting past ASCII): the words starting with it
	two [1 << 16 / 64]uint64 // bit a<<8|b: the terms starting with the bytes a, b
}

// Add adds term, a stem, to s.
func (s *Starts) Add(term string) {
	if term == "" {
		return
	}
	if len(term) == 1 || term[1] >= utf8.RuneSelf {
		s.one[term[0]] = true
		return
	}
	s.set(term[0], term[1])
	if term[1] == 'i' {
		switch term[0] {
		case 'd', 'l', 't':
			s.set(term[0], 'y')
		}
	}
}

func (s *Starts) set(a, b byte) { s.two[int(a)<<2|int(b)>>6] |= 1 << (b & 63) }

// Lets reports whether the word or stem w may hold a term of s: it is
// one byte long, or lets lets its first two bytes through.
func (s *Starts) Lets(w []byte) bool { return len(w) < 2 || s.lets(w[0], w[1]) }

// lets reports whether a word whose first two bytes are a and b may stem
// to a term of s or to a longer word starting with one.
func (s *Starts) lets(a, b byte) bool {
	if a >= utf8.RuneSelf || b >= utf8.RuneSelf {
		return true
	}
	a, b = asciiLower[a], asciiLower[b]
	return s.one[a] || s.two[int(a)<<2|int(b)>>6]&(1<<(b&63)) != 0
}

// The classes of a byte of UTF-8 text for Split: an ASCII byte between
// words, an ASCII letter or digit, or a byte of a multi-byte character.
const (
	classOther = iota
	classWord
	classMulti
)

// byteClass is each byte's class (see isWordRune for the ASCII ones).
var byteClass = func() (t [256]uint8) {
	for c := range 256 {
		switch {
		case c >= utf8.RuneSelf:
			t[c] = classMulti
		case isWordRune(rune(c)):
			t[c] = classWord
		}
	}
	return t
}()

// asciiLower is each byte lowercased when it is an ASCII capital.
var asciiLower = func() (t [256]byte) {
	for c := range 256 {
		t[c] = byte(c)
		if 'A' <= c && c <= 'Z' {
			t[c] += 'a' - 'A'
		}
	}
	return t
}()

// emit calls fn with the word text[start:end].
func emit(text string, start, end int, fn func(Word)) {
	w := text[start:end]
	if !isLowerASCII(w) {
		w = strings.ToLower(w)
	}
	w = codec.CutUTF8(w, MaxTermBytes)
	fn(Word{Lower: w, Start: start, End: end})
}

func isLowerASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 0x80 || 'A' <= c && c <= 'Z' {
			return false
		}
	}
	return true
}

// Stem returns the term of the lowercased word w: its English stem.
// Stems are remembered process-wide (up to maxSharedStems words), since
// queries and facts repeat their words; Stem is safe for concurrent use.
func Stem(w string) string {
	sharedStems.RLock()
	s, ok := sharedStems.m[w]
	sharedStems.RUnlock()
	if ok {
		return s
	}
	s = stem(w)
	sharedStems.Lock()
	if sharedStems.m == nil || len(sharedStems.m) >= maxSharedStems {
		sharedStems.m = make(map[string]string, 1024)
	}
	sharedStems.m[strings.Clone(w)] = s
	sharedStems.Unlock()
	return s
}

// sharedStems are the stems [Stem] remembers.
var sharedStems struct {
	sync.RWMutex
	m map[string]string
}

// maxSharedStems bounds the stems [Stem] remembers; past it they are
// forgotten and remembered again.
const maxSharedStems = 1 << 14

// stem is the English stem of w, computed.
func stem(w string) string {
	if s := english.Stem(w, true); s != "" {
		return s
	}
	return w
}

// An Analyzer turns text into terms as the package functions do, and
// remembers the stems it computed, the costliest step of analysis, for
// the text it analyses next: a batch of documents repeats its words. The
// zero value is ready to use; an Analyzer is not safe for concurrent use.
type Analyzer struct {
	stems map[string]string
}

// maxCachedStems bounds an Analyzer's memory; past it the cache is
// emptied and starts again.
const maxCachedStems = 1 << 16

// Stem is [Stem], remembered by the Analyzer itself (no lock taken).
func (a *Analyzer) Stem(w string) string {
	if s, ok := a.stems[w]; ok {
		return s
	}
	s := stem(w)
	if a.stems == nil || len(a.stems) >= maxCachedStems {
		a.stems = make(map[string]string, 1024)
	}
	a.stems[strings.Clone(w)] = s
	return s
}

// Terms calls fn with the term of every word of text that is not a stop
// word, in order, repeats included.
func (a *Analyzer) Terms(text string, fn func(term string)) {
	Split(text, func(w Word) {
		if !IsStop(w.Lower) {
			fn(a.Stem(w.Lower))
		}
	})
}

// Terms is [Analyzer.Terms] without a cache.
func Terms(text string, fn func(term string)) { new(Analyzer).Terms(text, fn) }

// Words returns the distinct terms of text, stop words included, in order
// of first appearance.
func Words(text string) []string { return distinct(text, Stem) }

// QueryWords returns the distinct terms of a question or keyword query
// that carry its meaning: those of [Words] less the stop words, and, when
// text reads as a question ([IsQuestion]), less the words that only shape
// it ("what", "did", "who", "her": [IsQuestionWord]). In a keyword query
// those words are what it looks for ("having no specials", "zero, making
// them"). A query made only of words it drops keeps them all, so that
// it still asks for something.
func QueryWords(text string) []string {
	drop := IsStop
	if IsQuestion(text) {
		drop = IsQuestionWord
	}
	var out, all []string
	seen := make(map[string]bool) // term → it carries meaning
	Split(text, func(w Word) {
		t := Stem(w.Lower)
		meaning, ok := seen[t]
		if !ok {
			all = append(all, t)
		}
		if !meaning && !drop(w.Lower) {
			out = append(out, t)
			meaning = true
		}
		seen[t] = meaning
	})
	if len(out) == 0 {
		return all
	}
	return out
}

// questionWords are the words [QueryWords] drops from a question besides
// the stop words: question words, auxiliary verbs and pronouns. Modal "may" is kept (the
// month), as are the negations.
var questionWords = func() map[string]struct{} {
	m := make(map[string]struct{})
	for _, w := range strings.Fields(`what when where which who whom whose why how
		do does did done doing have has had having am were been being
		can could would should shall might must
		i me my mine myself you your yours yourself we us our ours he him his himself
		she her hers herself its itself them themselves
		about from any some ever`) {
		m[w] = struct{}{}
	}
	return m
}()

// IsQuestionWord reports whether the lowercased word w only shapes a
// question: a stop word ([IsStop]) or one of the question words,
// auxiliaries and pronouns [QueryWords] drops.
func IsQuestionWord(w string) bool {
	if IsStop(w) {
		return true
	}
	_, ok := questionWords[w]
	return ok
}

// LowerWords returns the distinct words of text as [Split] finds them,
// lowercased but not stemmed, in order of first appearance: for matching
// text against fixed word lists, and for showing words to people.
func LowerWords(text string) []string { return distinct(text, nil) }

// distinct returns the distinct words of text, each mapped through norm
// when it is not nil.
func distinct(text string, norm func(string) string) []string {
	var out []string
	var seen map[string]struct{} // once out is longer than distinctScan; until then out is searched
	Split(text, func(w Word) {
		t := w.Lower
		if norm != nil {
			t = norm(t)
		}
		switch {
		case seen != nil:
			if _, ok := seen[t]; ok {
				return
			}
			seen[t] = struct{}{}
		case slices.Contains(out, t):
			return
		case len(out) == distinctScan:
			seen = make(map[string]struct{}, 2*distinctScan)
			for _, o := range out {
				seen[o] = struct{}{}
			}
			seen[t] = struct{}{}
		}
		out = append(out, t)
	})
	return out
}

// distinctScan is how many distinct words distinct finds by searching the
// list of those it found before a set takes over: a short text, such as a
// fact's, then costs no map.
const distinctScan = 32

// QueryTerm is one distinct term of a query and the words it came from.
type QueryTerm struct {
	Term  string
	Words []string // the query's words (lowercased) with this term, in order
}

// Query returns the distinct terms of a query, in order of first
// appearance, and the stop words it dropped.
func Query(text string) (terms []QueryTerm, stops []string) {
	at := make(map[string]int)
	Split(text, func(w Word) {
		if IsStop(w.Lower) {
			stops = append(stops, w.Lower)
			return
		}
		t := Stem(w.Lower)
		i, ok := at[t]
		if !ok {
			i = len(terms)
			at[t] = i
			terms = append(terms, QueryTerm{Term: t})
		}
		if !contains(terms[i].Words, w.Lower) {
			terms[i].Words = append(terms[i].Words, w.Lower)
		}
	})
	return terms, stops
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
