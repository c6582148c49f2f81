package retrieval

import (
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// QueryOptions tune GenerateQueries.
type QueryOptions struct {
	// N is the number of queries wanted (fewer come back when the corpus
	// has too few usable passages). Zero means 1,000.
	N int
	// Seed seeds the generator; the same corpus and seed give the same
	// queries.
	Seed uint64
	// MinWords and MaxWords bound a phrase's length in words; zero means 3
	// and 6.
	MinWords, MaxWords int
}

// word is one word of a text: its lowercased form and its byte span.
type word struct {
	w          string
	start, end int
}

// words splits s into maximal runs of letters and digits, lowercased.
func words(s string) []word {
	var out []word
	start := -1
	for i, r := range s {
		in := unicode.IsLetter(r) || unicode.IsDigit(r)
		if in && start < 0 {
			start = i
		} else if !in && start >= 0 {
			out = append(out, word{strings.ToLower(s[start:i]), start, i})
			start = -1
		}
	}
	if start >= 0 {
		out = append(out, word{strings.ToLower(s[start:]), start, len(s)})
	}
	return out
}

// queryStop are words a phrase may hold but not begin or end with, and
// that give a phrase no weight: the commonest English function words.
var queryStop = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a an and are as at be by for from has have if in into is it its
		of on or that the then there these this to was were will with which when it's not no
		can may must should than so such but also all any each other their they we you`) {
		queryStop[w] = true
	}
}

// GenerateQueries draws known-item queries from docs. It visits the
// passages that have a doc comment of at least 8 words in an order shuffled
// by the seed, and from each takes at most one query:
//
//  1. the phrase length L is drawn uniformly from [MinWords, MaxWords];
//  2. every run of L consecutive words of the doc comment is a candidate,
//     unless it begins or ends with a stop word, holds a word that names
//     the passage (a component of its id: package, type or function name),
//     or holds a word of one letter;
//  3. each candidate is scored by the mean inverse document frequency of
//     its words, ln(N/df), over the whole corpus (titles and texts): rarer
//     words score higher;
//  4. one is drawn uniformly from the best quarter of the candidates (the
//     best one alone would mostly pick a word found in no other passage,
//     which every system finds);
//  5. it is dropped if its word sequence occurs in any other passage
//     (verbatim, case and punctuation aside), or if it equals an earlier
//     query; otherwise the query is the phrase as written in the doc
//     comment, white space collapsed.
//
// The passage's title words and declaration are never used, so the query
// does not spell out the id.
func GenerateQueries(docs []Doc, opts QueryOptions) []Query {
	if opts.N == 0 {
		opts.N = 1000
	}
	if opts.MinWords == 0 {
		opts.MinWords = 3
	}
	if opts.MaxWords == 0 {
		opts.MaxWords = 6
	}
	// norm[i] is passage i's words joined by single spaces, with a space at
	// each end, for verbatim phrase tests; postings lists, per word, the
	// passages holding it.
	norm := make([]string, len(docs))
	postings := map[string][]int32{}
	for i, d := range docs {
		ws := words(d.Title + "\n" + d.Text)
		var b strings.Builder
		b.WriteByte(' ')
		seen := map[string]bool{}
		for _, w := range ws {
			b.WriteString(w.w)
			b.WriteByte(' ')
			if !seen[w.w] {
				seen[w.w] = true
				postings[w.w] = append(postings[w.w], int32(i))
			}
		}
		norm[i] = b.String()
	}
	n := float64(len(docs))
	idf := func(w string) float64 { return math.Log(n / float64(len(postings[w]))) }

	rng := rand.New(rand.NewPCG(opts.Seed, 0x5eed_c0de))
	order := rng.Perm(len(docs))
	var out []Query
	seenQuery := map[string]bool{}
	for _, i := range order {
		if len(out) >= opts.N {
			break
		}
		d := docs[i]
		body := d.Text[min(d.DocStart, len(d.Text)):]
		ws := words(body)
		L := opts.MinWords + rng.IntN(opts.MaxWords-opts.MinWords+1)
		if len(ws) < 8 || len(ws) < L {
			continue
		}
		names := idWords(d.ID)
		type cand struct {
			at    int
			score float64
		}
		var cands []cand
	windows:
		for s := 0; s+L <= len(ws); s++ {
			win := ws[s : s+L]
			if queryStop[win[0].w] || queryStop[win[L-1].w] {
				continue
			}
			sum := 0.0
			for _, w := range win {
				if names[w.w] || utf8.RuneCountInString(w.w) < 2 {
					continue windows
				}
				if !queryStop[w.w] {
					sum += idf(w.w)
				}
			}
			cands = append(cands, cand{s, sum / float64(L)})
		}
		if len(cands) == 0 {
			continue
		}
		sort.SliceStable(cands, func(a, b int) bool { return cands[a].score > cands[b].score })
		c := cands[rng.IntN((len(cands)+3)/4)]
		win := ws[c.at : c.at+L]

		phrase := " "
		rarest := win[0].w
		for _, w := range win {
			phrase += w.w + " "
			if len(postings[w.w]) < len(postings[rarest]) {
				rarest = w.w
			}
		}
		unique := true
		for _, j := range postings[rarest] {
			if int(j) != i && strings.Contains(norm[j], phrase) {
				unique = false
				break
			}
		}
		q := strings.Join(strings.Fields(body[win[0].start:win[L-1].end]), " ")
		if !unique || seenQuery[strings.ToLower(q)] {
			continue
		}
		seenQuery[strings.ToLower(q)] = true
		out = append(out, Query{Query: q, Want: d.ID, Kind: "phrase"})
	}
	return out
}

// idWords are the lowercased words of an id ("net/http.Client.Do": net,
// http, client, do), which a query must not hold.
func idWords(id string) map[string]bool {
	m := map[string]bool{}
	for _, w := range words(id) {
		m[w.w] = true
	}
	return m
}
