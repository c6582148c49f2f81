package toolkit

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stdDecode is what checkArguments did before decodeFlat, and still does
// when decodeFlat declines.
func stdDecode(b []byte) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil || doc == nil || dec.InputOffset() != int64(len(b)) {
		return nil, false
	}
	return doc, true
}

// checkFlat holds decodeFlat to encoding/json on b: when it accepts b,
// encoding/json accepts it too and decodes the same map.
func checkFlat(t *testing.T, b []byte) bool {
	t.Helper()
	got, ok := decodeFlat(b)
	if !ok {
		return false
	}
	want, wok := stdDecode(b)
	require.True(t, wok, "decodeFlat accepted what encoding/json rejects: %q", b)
	if utf8.Valid(b) { // else encoding/json wrote U+FFFD, and checkArguments refuses b either way
		assert.Equal(t, want, got, "%q", b)
	}
	return true
}

func TestDecodeFlat(t *testing.T) {
	accepted := []string{
		`{}`, ` { }`, "\n{\n}", `{"a":"b"}`, `{"a":1,"b":-0.5e+3,"c":true,"d":false,"e":null}`,
		`{"a":"x","a":"y"}`, `{"q":"naïve café ☕"}`, `{"n":0}`, `{"n":-0}`, `{"n":1E9}`, `{"n":12.0}`,
		"{\t\"a\" :\n\"b\" , \"c\":2}",
	}
	for _, s := range accepted {
		assert.True(t, checkFlat(t, []byte(s)), "decodeFlat declined %q", s)
	}
	declined := []string{
		``, ` `, `{} `, `[]`, `"a"`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,}`, `{"a":1}x`, `{"a":1}{}`, `{"a":01}`,
		`{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":+1}`, `{"a":tru}`, `{"a":truex}`, `{"a":nul}`,
		`{"a\"":1}`, `{"a":"\n"}`, `{"a":"\u00e9"}`, "{\"a\":\"\x01\"}", `{"a":{"b":1}}`, `{"a":[1]}`,
		`{"a":"b"`, `{"a":"b}`, `{a:1}`, `{"a":1 "b":2}`, `{"a":NaN}`, `{"a":Infinity}`,
	}
	for _, s := range declined {
		assert.False(t, checkFlat(t, []byte(s)), "decodeFlat accepted %q", s)
	}
}

// TestDecodeFlatCorpus holds decodeFlat to encoding/json on every argument
// text of the fuzz corpus and on random mutations of the accepted ones.
func TestDecodeFlatCorpus(t *testing.T) {
	var inputs [][]byte
	for _, dir := range []string{"../tools/testdata/fuzz/FuzzCallTool", "../tools/testdata/fuzz/FuzzTools"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range files {
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, line := range strings.Split(string(raw), "\n") {
				// Corpus lines are Go literals: []byte("...") or string("...").
				_, lit, ok := strings.Cut(line, "(")
				if !ok || !strings.HasSuffix(lit, ")") {
					continue
				}
				if s, err := strconv.Unquote(strings.TrimSuffix(lit, ")")); err == nil {
					inputs = append(inputs, []byte(s))
				}
			}
		}
	}
	require.NotEmpty(t, inputs)
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "{}[]\":,\\ \t\n-+.0123456789eEtruefalsn\x00\x1f\xff"
	accepted := 0
	for _, in := range inputs {
		if checkFlat(t, in) {
			accepted++
		}
		for range 50 {
			m := bytes.Clone(in)
			if len(m) == 0 {
				break
			}
			switch rng.IntN(3) {
			case 0:
				m[rng.IntN(len(m))] = alphabet[rng.IntN(len(alphabet))]
			case 1:
				i := rng.IntN(len(m))
				m = append(m[:i], m[i+1:]...)
			default:
				i := rng.IntN(len(m) + 1)
				m = append(m[:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, m[i:]...)...)
			}
			checkFlat(t, m)
		}
	}
	assert.Positive(t, accepted, "no corpus input took the flat path")
}
