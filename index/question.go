package index

import "strings"

// QuestionWordWeight is the weight [QueryWeights] gives the terms of a
// question that only shape it ("what", "did", "how", "her": the words of
// [IsQuestionWord] the index keeps): they still count, so that a segment
// holding "when" ranks above one without it, but half as much as the
// words that say what the question is about.
const QuestionWordWeight = 0.5

// IsQuestion reports whether text reads as a question: it ends with a
// question mark (white space aside), or its first word asks one, a
// question word (what, when, where, which, who, whom, whose, why, how) or
// an auxiliary verb that opens a yes-no question (do, did, can, is, ...).
// "Client Do sends a request" and "being one field" are not questions by
// this; "Being one field, is it?" is.
func IsQuestion(text string) bool {
	if strings.HasSuffix(strings.TrimSpace(text), "?") {
		return true
	}
	first := ""
	Split(text, func(w Word) {
		if first == "" {
			first = w.Lower
		}
	})
	_, ok := questionOpeners[first]
	return ok
}

// questionOpeners are the first words that make a text a question for
// [IsQuestion].
var questionOpeners = func() map[string]struct{} {
	m := make(map[string]struct{})
	for _, w := range strings.Fields(`what when where which who whom whose why how
		do does did can could would should will shall is are was were has have had am might must`) {
		m[w] = struct{}{}
	}
	return m
}()

// QueryWeights returns the weight of each term of terms ([Query] of
// text) in the ranking of text: [QuestionWordWeight] for a term whose
// words are all question words ([IsQuestionWord]) when text is a
// question ([IsQuestion]) and holds another term, 1 for the others. It
// returns nil when every weight is 1.
func QueryWeights(text string, terms []QueryTerm) []float64 {
	if len(terms) < 2 || !IsQuestion(text) {
		return nil
	}
	var ws []float64
	shaping := 0
	for i, t := range terms {
		if !onlyQuestionWords(t.Words) {
			continue
		}
		if ws == nil {
			ws = make([]float64, len(terms))
			for j := range ws {
				ws[j] = 1
			}
		}
		ws[i] = QuestionWordWeight
		shaping++
	}
	if shaping == len(terms) {
		return nil // a question of question words alone asks by them
	}
	return ws
}

func onlyQuestionWords(words []string) bool {
	for _, w := range words {
		if !IsQuestionWord(w) {
			return false
		}
	}
	return len(words) > 0
}
