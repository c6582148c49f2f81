package index

import "math"

// The BM25 parameters of documents: term-frequency saturation and length
// normalisation. k1 is below the textbook 1.2, so that a segment saying a
// word again counts little more than one saying it once: segments are
// short, and a repeated word in one says less than another word of the
// query in the next. Facts keep the textbook values (package store).
const (
	K1 = 0.9
	B  = 0.75
)

// IDF is the inverse document frequency of a term held by df of n
// segments: ln(1 + (n - df + 0.5)/(df + 0.5)), never negative.
func IDF(n, df int) float64 {
	return math.Log(1 + (float64(n)-float64(df)+0.5)/(float64(df)+0.5))
}

// BM25 is the score a term of inverse document frequency idf adds to a
// segment of dl terms that holds it tf times, where segments average avgdl
// terms.
func BM25(idf float64, tf, dl int, avgdl float64) float64 {
	if avgdl <= 0 {
		avgdl = 1
	}
	f := float64(tf)
	return idf * f * (K1 + 1) / (f + K1*(1-B+B*float64(dl)/avgdl))
}
