package tools

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"github.com/stretchr/testify/require"
)

// referenceArguments is how arguments were checked and decoded before the
// one-pass path: the JSON text decoded into a map, then into a tree that
// the schema library validated, then the text (said again when a whole
// number was rewritten) decoded into the argument type with
// json.Unmarshal. The tests below hold the one-pass path to it.
func referenceArguments(tool string, sch *jsonschema.Schema, typ reflect.Type, args json.RawMessage) (any, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = json.RawMessage("{}")
	}
	if len(args) > MaxArgumentBytes {
		return nil, invalidParams(tool, "arguments", fmt.Sprintf("larger than %d bytes", MaxArgumentBytes))
	}
	if nesting(args) > MaxDepth {
		return nil, invalidParams(tool, "arguments", fmt.Sprintf("nested deeper than %d levels", MaxDepth))
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(args, &props); err != nil || props == nil {
		return nil, invalidParams(tool, "arguments", "must be a JSON object")
	}
	if !utf8.Valid(args) || loneSurrogate(args) {
		return nil, invalidParams(tool, badTextPath(props), "is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var doc any
	var err error
	if err = dec.Decode(&doc); err != nil {
		return nil, invalidParams(tool, "arguments", "must be a JSON object")
	}
	if path, reason := checkValues(doc, ""); path != "" {
		return nil, invalidParams(tool, path, reason)
	}
	if integral(doc) {
		if args, err = json.Marshal(doc); err != nil {
			return nil, invalidParams(tool, "arguments", err.Error())
		}
	}
	if err := sch.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			param, reason := explain(ve)
			return nil, invalidParams(tool, param, reason)
		}
		return nil, invalidParams(tool, "arguments", err.Error())
	}
	in := reflect.New(typ)
	if typ == reflect.TypeFor[json.RawMessage]() {
		in.Elem().SetBytes(args)
		return in.Interface(), nil
	}
	if err := json.Unmarshal(args, in.Interface()); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, invalidParams(tool, te.Field, "must be "+describeGoType(te.Type.Kind().String()))
		}
		return nil, invalidParams(tool, "arguments", err.Error())
	}
	return in.Interface(), nil
}

// onePass checks and decodes args the way Set.Call does.
func onePass(s *Set, i int, args json.RawMessage) (any, error) {
	t := s.tools[i]
	a, err := checkArguments(t.Name, s.schema[i], s.check[i], args)
	if err != nil {
		return nil, err
	}
	if t.run.decode == nil { // a tool built with New takes the JSON text
		text, err := a.text()
		return &text, err
	}
	return t.run.decode(a)
}

func testSet(t *testing.T) *Set {
	t.Helper()
	s, err := NewSet(All(nil))
	require.NoError(t, err)
	return s
}

// TestEveryToolHasACheck: every tool's schema compiles into the fast check,
// so no tool is left to the schema library alone; the hot tools also
// decode from the tree.
func TestEveryToolHasACheck(t *testing.T) {
	s := testSet(t)
	var text []string
	for i, tl := range s.tools {
		require.NotNil(t, s.check[i], "%s: schema not compiled into a check", tl.Name)
		if !tl.run.tree {
			text = append(text, tl.Name)
		}
	}
	for _, hot := range []string{"store_fact", "query_facts", "fact_history", "list_entities", "delete_fact"} {
		require.NotContains(t, text, hot, "%s decodes its arguments twice", hot)
	}
	t.Logf("tools whose arguments decode from the JSON text (json.RawMessage, interface or Unmarshaler fields): %s", strings.Join(text, ", "))
}

// sameOutcome requires the one-pass path and the reference to agree on
// args for the i-th tool: both accept, with equal decoded arguments, or
// both reject with the same error. When several arguments are wrong, the
// schema library names one of them in an order that varies from run to
// run (it ranges over a map); the one-pass path asks the same library, so
// its message must be one the reference gives.
func sameOutcome(t *testing.T, s *Set, i int, args string) {
	t.Helper()
	tl := s.tools[i]
	got, gotErr := onePass(s, i, json.RawMessage(args))
	want, wantErr := referenceArguments(tl.Name, s.schema[i], tl.run.args, json.RawMessage(args))
	if (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%s(%s): one pass: %v; reference: %v", tl.Name, args, gotErr, wantErr)
	}
	if gotErr == nil {
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s(%s): one pass decoded %+v; reference %+v", tl.Name, args, reflect.ValueOf(got).Elem(), reflect.ValueOf(want).Elem())
		}
		return
	}
	g, w := errorText(gotErr), errorText(wantErr)
	for try := 0; g != w && try < 2000; try++ {
		_, wantErr = referenceArguments(tl.Name, s.schema[i], tl.run.args, json.RawMessage(args))
		w = errorText(wantErr)
	}
	if g != w {
		t.Fatalf("%s(%s): one pass: %s; reference: %s", tl.Name, args, g, w)
	}
}

func errorText(err error) string {
	var e *Error
	if !errors.As(err, &e) {
		return "not an *Error: " + err.Error()
	}
	b, _ := json.Marshal(e.Data)
	return fmt.Sprintf("%d %s %s", e.Code, e.Message, b)
}

// TestOnePassTable: hand-picked arguments, each decided by the one-pass path
// exactly as by the reference.
func TestOnePassTable(t *testing.T) {
	s := testSet(t)
	cases := map[string][]string{
		"store_fact": {
			`{"entity":"e","key":"k","value":"v"}`, `{"entity":"","key":"k","value":"v"}`, `{"entity":"e","key":"k"}`,
			`{"entity":"e","key":"k","value":"v","confidence":1.0}`, `{"entity":"e","key":"k","value":"v","confidence":1.0000000000000000001}`,
			`{"entity":"e","key":"k","value":"v","confidence":-0}`, `{"entity":"e","key":"k","value":"v","confidence":1e0}`,
			`{"entity":"e","key":"k","value":"v","confidence":"1"}`, `{"entity":"e","key":"k","value":"v","confidence":null}`,
			`{"entity":"e","key":"k","value":"v","supersedes":[]}`, `{"entity":"e","key":"k","value":"v","supersedes":null}`,
			`{"entity":"e","key":"k","value":"v","supersedes":["a",1]}`, `{"entity":"e","key":"k","value":"v","Private":true}`,
			`{"entity":"e","key":"k","value":"v","horizon_class":"stable"}`, `{"entity":"e","key":"k","value":"v","horizon_class":"soon"}`,
			`{"entity":"e","key":"k","value":"v","private":"yes"}`, `{"entity":"e","key":"k","value":"v","turn_id":"t1","contract":"c"}`,
			`{"entity":"e","key":"k","value":"v","turn_id":5}`, `{"entity":null,"key":"k","value":"v"}`, `{"entity":"e","key":"k","value":"v"} x`,
			`{"entity":"e","key":"k","value":"v"}{}`, `[]`, `"x"`, ``, `null`, `  {}  `, `{"entity":"\ud800","key":"k","value":"v"}`,
		},
		"query_facts": {
			`{}`, `{"top_k":5}`, `{"top_k":5.0}`, `{"top_k":5.5}`, `{"top_k":1e3}`, `{"top_k":1e4}`, `{"top_k":0}`, `{"top_k":1001}`,
			`{"top_k":-1}`, `{"top_k":9223372036854775807}`, `{"top_k":9223372036854775808}`, `{"token_budget":9223372036854775808}`,
			`{"token_budget":1e19}`, `{"token_budget":9007199254740993.0}`, `{"min_effective_confidence":0.5}`, `{"min_effective_confidence":1.5}`,
			`{"query":"deploy","top_k":3,"token_budget":1,"as_of":"2026-01-01T00:00:00Z"}`, `{"entity_prefix":""}`, `{"nope":1}`,
			`{"top_k":"ten","nope":1}`, `{"top_k":1e400}`, `{"top_k":` + strings.Repeat("1", 70) + `}`,
		},
		"memory_forget": {
			`{"scope":{"type":"entity_prefix","value":"p"},"reason":"r"}`, `{"scope":{"type":"before_timestamp","value":"2026-01-01T00:00:00Z"},"reason":"r"}`,
			`{"scope":{"type":"before_timestamp","value":"yesterday"},"reason":"r"}`, `{"scope":{"type":"other","value":"p"},"reason":"r"}`,
			`{"scope":{"type":"entity_prefix"},"reason":"r"}`, `{"scope":{"type":"entity_prefix","value":"p","x":1},"reason":"r"}`,
		},
		"memory_pin": {`{"fact_id":"f_0123456789abcdef0123456789abcdef"}`, `{"fact_id":"f_0123"}`},
	}
	for name, list := range cases {
		i, ok := s.byName[name]
		require.True(t, ok, name)
		for _, args := range list {
			sameOutcome(t, s, i, args)
		}
	}
}

// TestOnePassCorpus: the seed corpus of FuzzTools, every input against the
// tool it names and against every tool.
func TestOnePassCorpus(t *testing.T) {
	s := testSet(t)
	files, err := filepath.Glob("../testdata/fuzz/FuzzTools/*")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var vals []string
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "string("); ok {
				u, err := strconv.Unquote(strings.TrimSuffix(v, ")"))
				require.NoError(t, err, f)
				vals = append(vals, u)
			}
		}
		require.GreaterOrEqual(t, len(vals), 2, f)
		for i := range s.tools {
			sameOutcome(t, s, i, vals[1])
		}
	}
}

// TestCheckMatchesSchema: over arguments generated at random from each
// tool's schema, valid and invalid in every way the schemas can tell, the
// fast check accepts exactly what the schema library accepts, and the
// whole one-pass path agrees with the reference.
func TestCheckMatchesSchema(t *testing.T) {
	s := testSet(t)
	n := 160
	if testing.Short() {
		n = 80
	}
	rng := rand.New(rand.NewPCG(17, 2026))
	for i, tl := range s.tools {
		var doc map[string]any
		dec := json.NewDecoder(bytes.NewReader(tl.schema))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&doc))
		g := &generator{rng: rng}
		accepted := 0
		for range n {
			args := g.encode(g.object(doc, 0))
			var tree map[string]any
			d := json.NewDecoder(strings.NewReader(args))
			d.UseNumber()
			require.NoError(t, d.Decode(&tree), args)
			integral(tree)
			want := s.schema[i].Validate(any(tree)) == nil
			if got := s.check[i].valid(tree); got != want {
				t.Fatalf("%s(%s): check says %v, schema %v", tl.Name, args, got, want)
			}
			if want {
				accepted++
			}
			sameOutcome(t, s, i, args)
		}
		// The generator must exercise both sides.
		require.Greater(t, accepted, 0, "%s: no generated arguments passed", tl.Name)
		require.Less(t, accepted, n, "%s: every generated argument passed", tl.Name)
	}
}

// generator makes JSON values from a schema: mostly valid, each part wrong
// now and then in a way the schema rules out (or nearly does: values at
// and just past every bound).
type generator struct{ rng *rand.Rand }

func (g *generator) chance(p float64) bool { return g.rng.Float64() < p }

// ordered is a JSON object whose members keep their order.
type ordered []member

type member struct {
	name  string
	value any
}

// rawNumber is a number written as it is.
type rawNumber string

func (g *generator) value(sch map[string]any, depth int) any {
	if g.chance(0.04) {
		return g.wrong(depth)
	}
	if sub, ok := sch["oneOf"].([]any); ok && g.chance(0.7) {
		// Merge a branch into the schema: its const and format decide.
		branch := sub[g.rng.IntN(len(sub))].(map[string]any)
		merged := map[string]any{}
		for k, v := range sch {
			merged[k] = v
		}
		props := map[string]any{}
		for k, v := range sch["properties"].(map[string]any) {
			props[k] = v
		}
		for k, v := range branch["properties"].(map[string]any) {
			p := map[string]any{}
			for kk, vv := range props[k].(map[string]any) {
				p[kk] = vv
			}
			for kk, vv := range v.(map[string]any) {
				p[kk] = vv
			}
			if p["const"] != nil {
				p["enum"] = []any{p["const"]}
			}
			props[k] = p
		}
		merged["properties"] = props
		delete(merged, "oneOf")
		sch = merged
	}
	if e, ok := sch["enum"].([]any); ok && !g.chance(0.1) {
		return e[g.rng.IntN(len(e))]
	}
	if c, ok := sch["const"]; ok && !g.chance(0.1) {
		return c
	}
	typ, _ := sch["type"].(string)
	if list, ok := sch["type"].([]any); ok {
		typ, _ = list[g.rng.IntN(len(list))].(string)
	}
	switch typ {
	case "string":
		return g.str(sch)
	case "integer", "number":
		return g.number(sch, typ == "integer")
	case "boolean":
		return g.chance(0.5)
	case "array":
		return g.array(sch, depth)
	case "object":
		return g.object(sch, depth)
	case "null":
		return nil
	}
	return g.wrong(depth)
}

func (g *generator) wrong(depth int) any {
	switch g.rng.IntN(7) {
	case 0:
		return nil
	case 1:
		return g.chance(0.5)
	case 2:
		return rawNumber([]string{"0", "-1", "1.5", "1e3", "7"}[g.rng.IntN(5)])
	case 3:
		return "x"
	case 4:
		if depth < 3 {
			return []any{"a", rawNumber("1")}
		}
		return "y"
	case 5:
		return ordered{{"k", "v"}}
	}
	return ""
}

func (g *generator) str(sch map[string]any) string {
	if f, _ := sch["format"].(string); f == "date-time" && !g.chance(0.2) {
		return []string{"2026-01-01T00:00:00Z", "2026-12-01T18:00:00.5+02:00"}[g.rng.IntN(2)]
	}
	if p, _ := sch["pattern"].(string); p != "" && !g.chance(0.2) {
		switch p {
		case "^f_[0-9a-f]{32}$":
			return "f_" + strings.Repeat("0a", 16)
		case "^[0-9a-f]{64}$":
			return strings.Repeat("ab", 32)
		}
	}
	minLen, maxLen := -1, -1
	if n, ok := sch["minLength"].(json.Number); ok {
		minLen, _ = strconv.Atoi(string(n))
	}
	if n, ok := sch["maxLength"].(json.Number); ok {
		maxLen, _ = strconv.Atoi(string(n))
	}
	// Lengths at a bound of a megabyte are rarely tried: they are slow.
	atMax := maxLen >= 0 && (maxLen <= 8192 || g.chance(0.05))
	var n int
	switch r := g.rng.IntN(6); {
	case r == 0 && minLen > 0:
		n = minLen - 1
	case r == 1 && atMax:
		n = maxLen
	case r == 2 && atMax:
		n = maxLen + 1
	case r == 3:
		n = 0
	default:
		n = 1 + g.rng.IntN(8)
	}
	// Multibyte characters: lengths count characters, not bytes.
	alphabet := []string{"a", "Z", "é", "字", "-", " ", "😀", "<"}
	var b strings.Builder
	for range n {
		b.WriteString(alphabet[g.rng.IntN(len(alphabet))])
	}
	return b.String()
}

func (g *generator) number(sch map[string]any, integer bool) rawNumber {
	var edges []string
	for _, kw := range []string{"minimum", "maximum"} {
		if n, ok := sch[kw].(json.Number); ok {
			f, _ := n.Float64()
			edges = append(edges, string(n), strconv.FormatFloat(f-1, 'f', -1, 64), strconv.FormatFloat(f+1, 'f', -1, 64),
				strconv.FormatFloat(f, 'f', 1, 64), strconv.FormatFloat(f, 'e', -1, 64), string(n)+".0000000000000000001",
				strconv.FormatFloat(f-0.5, 'f', -1, 64))
		}
	}
	edges = append(edges, "0", "-0", "1", "5", "5.0", "1e3", "0.25", "1e20", "-7", "9223372036854775807",
		"9223372036854775808", "18446744073709551616", "9007199254740993.0", "2e-5")
	if !integer && g.chance(0.3) {
		return rawNumber(strconv.FormatFloat(g.rng.Float64(), 'f', -1, 64))
	}
	return rawNumber(edges[g.rng.IntN(len(edges))])
}

func (g *generator) array(sch map[string]any, depth int) []any {
	minItems, maxItems := 0, 4
	if n, ok := sch["minItems"].(json.Number); ok {
		minItems, _ = strconv.Atoi(string(n))
	}
	if n, ok := sch["maxItems"].(json.Number); ok {
		maxItems, _ = strconv.Atoi(string(n))
	}
	var n int
	switch r := g.rng.IntN(8); {
	case r == 0 && minItems > 0:
		n = minItems - 1
	case r == 1:
		n = maxItems
	case r == 2:
		n = maxItems + 1
	default:
		n = minItems + g.rng.IntN(min(4, maxItems-minItems)+1)
	}
	items, _ := sch["items"].(map[string]any)
	out := make([]any, 0, n)
	for len(out) < n {
		switch {
		case items == nil || depth > 4:
			out = append(out, "x")
		case len(out) >= 4:
			// A long array repeats its first items, so that its length,
			// not one more wrong item, is what decides.
			out = append(out, out[len(out)%4])
		default:
			out = append(out, g.value(items, depth+1))
		}
	}
	return out
}

func (g *generator) object(sch map[string]any, depth int) ordered {
	props, _ := sch["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	var required []string
	list, _ := sch["required"].([]any)
	for _, r := range list {
		required = append(required, r.(string))
	}
	var out ordered
	for _, name := range names {
		if slices.Contains(required, name) {
			if g.chance(0.05) {
				continue // missing
			}
		} else if !g.chance(0.4) {
			continue
		}
		out = append(out, member{name, g.value(props[name].(map[string]any), depth+1)})
	}
	if depth == 0 && g.chance(0.1) {
		out = append(out, member{[]string{"turn_id", "contract"}[g.rng.IntN(2)], g.value(map[string]any{"type": "string"}, depth+1)})
	}
	if g.chance(0.05) {
		out = append(out, member{"unknown_argument", "x"})
	}
	if len(names) > 0 && g.chance(0.03) {
		out = append(out, member{strings.ToUpper(names[g.rng.IntN(len(names))]), "x"})
	}
	g.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// encode writes v as JSON, object members in their order.
func (g *generator) encode(v any) string {
	var b strings.Builder
	var enc func(v any)
	enc = func(v any) {
		switch v := v.(type) {
		case nil:
			b.WriteString("null")
		case bool:
			b.WriteString(strconv.FormatBool(v))
		case rawNumber:
			b.WriteString(string(v))
		case json.Number:
			b.WriteString(string(v))
		case string:
			q, _ := json.Marshal(v)
			b.Write(q)
		case []any:
			b.WriteByte('[')
			for i, x := range v {
				if i > 0 {
					b.WriteByte(',')
				}
				enc(x)
			}
			b.WriteByte(']')
		case ordered:
			b.WriteByte('{')
			for i, m := range v {
				if i > 0 {
					b.WriteByte(',')
				}
				enc(m.name)
				b.WriteByte(':')
				enc(m.value)
			}
			b.WriteByte('}')
		default:
			panic(fmt.Sprintf("encode %T", v))
		}
	}
	enc(v)
	return b.String()
}

// BenchmarkArguments compares checking and decoding typical arguments of
// the hot tools in one pass with the reference (decoded three times,
// validated by the schema library).
func BenchmarkArguments(b *testing.B) {
	s, err := NewSet(All(nil))
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct{ tool, args string }{
		{"store_fact", `{"entity":"project:42","key":"k3","value":"value 42 of the durable write benchmark","confidence":0.9}`},
		{"query_facts", `{"query":"topic0042","top_k":10}`},
	}
	for _, c := range cases {
		i := s.byName[c.tool]
		args := json.RawMessage(c.args)
		b.Run(c.tool+"/one-pass", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := onePass(s, i, args); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.tool+"/reference", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := referenceArguments(c.tool, s.schema[i], s.tools[i].run.args, args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestCheckSyntheticSchemas: the check agrees with the schema library on
// schemas using its keywords in ways crux's own schemas do not (overlapping
// oneOf branches, type lists, bounds on fractions, open objects), over
// values of every kind.
func TestCheckSyntheticSchemas(t *testing.T) {
	schemas := []string{
		`{"oneOf":[{"type":"integer"},{"type":"number","minimum":2}]}`,
		`{"type":["string","null"],"minLength":2,"maxLength":3}`,
		`{"type":"number","minimum":0.1,"maximum":0.30000000000000004}`,
		`{"type":"integer","maximum":9007199254740993}`,
		`{"type":"object","properties":{"a":{"const":"x"}},"required":["a","b"]}`,
		`{"type":"array","items":{"enum":["p","q"]},"minItems":1,"maxItems":2}`,
		`{"type":"string","pattern":"^a+$","format":"date-time"}`,
		`{"type":"object","additionalProperties":false}`,
		`{"type":"boolean"}`,
	}
	values := []string{
		`null`, `true`, `false`, `0`, `-0`, `1`, `1.0`, `1.5`, `2`, `2.5`, `0.1`, `0.3`, `0.30000000000000004`,
		`0.30000000000000005`, `9007199254740993`, `9007199254740994`, `9007199254740993.0`, `1e300`, `""`, `"a"`,
		`"ab"`, `"abc"`, `"abcd"`, `"字字"`, `"aaa"`, `"2026-01-01T00:00:00Z"`, `[]`, `["p"]`, `["p","q"]`, `["p","q","p"]`,
		`["r"]`, `[1]`, `{}`, `{"a":"x"}`, `{"a":"x","b":1}`, `{"a":"y","b":1}`, `{"c":1}`,
	}
	for i, src := range schemas {
		var doc map[string]any
		dec := json.NewDecoder(strings.NewReader(src))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&doc))
		chk, err := compileCheck(doc)
		require.NoError(t, err, src)
		c := jsonschema.NewCompiler()
		c.Draft = jsonschema.Draft2020
		c.AssertFormat = true
		url := fmt.Sprintf("crux:///synthetic/%d.json", i)
		require.NoError(t, c.AddResource(url, strings.NewReader(src)))
		sch, err := c.Compile(url)
		require.NoError(t, err, src)
		for _, val := range values {
			var v any
			d := json.NewDecoder(strings.NewReader(val))
			d.UseNumber()
			require.NoError(t, d.Decode(&v))
			want := sch.Validate(v) == nil
			require.Equal(t, want, chk.valid(v), "schema %s, value %s", src, val)
		}
	}
}
