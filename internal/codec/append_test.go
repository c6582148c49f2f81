package codec

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestAppendStringIsMarshal: AppendString writes what json.Marshal
// writes, for strings of every escape, control characters, HTML, line
// separators, multi-byte characters and invalid UTF-8.
func TestAppendStringIsMarshal(t *testing.T) {
	pieces := []string{"a", "Z", " ", `"`, `\`, "<", ">", "&", "\b", "\f", "\n", "\r", "\t", "\x00", "\x1f", "\x7f",
		"é", "€", "😀", "\u2028", "\u2029", "\xff", "\xe2\x82", "/", "'", "plain text run", "0123456"}
	r := rand.New(rand.NewPCG(1, 1))
	for range 20000 {
		var sb strings.Builder
		for range r.IntN(24) {
			sb.WriteString(pieces[r.IntN(len(pieces))])
		}
		s := sb.String()
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	}
	want, _ := json.Marshal([]string{"x", "<y>"})
	if got := AppendStrings(nil, []string{"x", "<y>"}); string(got) != string(want) {
		t.Errorf("AppendStrings = %s, want %s", got, want)
	}
	if got := AppendStrings(nil, nil); string(got) != "null" {
		t.Errorf("AppendStrings(nil) = %s", got)
	}
}

// TestAppendFloatIsMarshal: AppendFloat writes what json.Marshal writes,
// across magnitudes and the switch to exponents, and refuses NaN and the
// infinities as json.Marshal does.
func TestAppendFloatIsMarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	fs := []float64{0, 1, -1, 0.5, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 123456789, 0.0164, 12.3456, math.MaxFloat64, math.SmallestNonzeroFloat64}
	fs = append(fs, math.Copysign(0, -1), 1e9, 1e9-1e-4, -1e9+1e-4, 999999999.9999, 0.0001, -0.0001, 0.00015)
	for range 20000 {
		fs = append(fs, math.Float64frombits(r.Uint64()), r.NormFloat64()*math.Pow(10, float64(r.IntN(60)-30)),
			// Scores rounded to four decimals (the fast path), and numbers near them.
			math.Round(r.NormFloat64()*math.Pow(10, float64(r.IntN(12)))*1e4)/1e4,
			float64(r.Int64N(1e14)-5e13)/1e4, float64(r.Int64N(1e14))/1e4+1e-9)
	}
	for _, f := range fs {
		want, err := json.Marshal(f)
		got, ok := AppendFloat(nil, f)
		if err != nil {
			if ok {
				t.Fatalf("AppendFloat(%v) accepted what json.Marshal refuses", f)
			}
			continue
		}
		if !ok || string(got) != string(want) {
			t.Fatalf("AppendFloat(%v) = %s, %v; want %s", f, got, ok, want)
		}
	}
}
