package toolkit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/crux-go/crux/internal/schemagen"
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
		return nil, InvalidParams(tool, "arguments", fmt.Sprintf("larger than %d bytes", MaxArgumentBytes))
	}
	if nesting(args) > MaxDepth {
		return nil, InvalidParams(tool, "arguments", fmt.Sprintf("nested deeper than %d levels", MaxDepth))
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(args, &props); err != nil || props == nil {
		return nil, InvalidParams(tool, "arguments", "must be a JSON object")
	}
	if !utf8.Valid(args) || LoneSurrogate(args) {
		return nil, InvalidParams(tool, badTextPath(props), "is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var doc any
	var err error
	if err = dec.Decode(&doc); err != nil {
		return nil, InvalidParams(tool, "arguments", "must be a JSON object")
	}
	if path, reason := checkValues(doc, ""); path != "" {
		return nil, InvalidParams(tool, path, reason)
	}
	if integral(doc) {
		if args, err = json.Marshal(doc); err != nil {
			return nil, InvalidParams(tool, "arguments", err.Error())
		}
	}
	if err := sch.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			param, reason := explain(ve)
			return nil, InvalidParams(tool, param, reason)
		}
		return nil, InvalidParams(tool, "arguments", err.Error())
	}
	in := reflect.New(typ)
	if typ == reflect.TypeFor[json.RawMessage]() {
		in.Elem().SetBytes(args)
		return in.Interface(), nil
	}
	if err := json.Unmarshal(args, in.Interface()); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, InvalidParams(tool, te.Field, "must be "+describeGoType(te.Type.Kind().String()))
		}
		return nil, InvalidParams(tool, "arguments", err.Error())
	}
	return in.Interface(), nil
}

// onePass checks and decodes args the way Set.Call does.
func onePass(s *Set, i int, args json.RawMessage) (any, error) {
	return s.Arguments(s.tools[i].Name, args)
}

// Argument types shaped like those of crux's hot tools (package tools holds
// the real ones, and its own test holds them to the schema library), so
// that the one-pass path is compared with the reference on typed
// arguments here too: pointers, slices, booleans and raw JSON.
type (
	factArgs struct {
		Entity           string   `json:"entity"`
		Key              string   `json:"key"`
		Value            string   `json:"value"`
		SourceReceipt    string   `json:"source_receipt,omitempty"`
		Confidence       *float64 `json:"confidence,omitempty"`
		Private          bool     `json:"private,omitempty"`
		HorizonClass     string   `json:"horizon_class,omitempty"`
		FreshnessHorizon string   `json:"freshness_horizon,omitempty"`
		Supersedes       []string `json:"supersedes,omitempty"`
	}
	queryArgs struct {
		Query             string   `json:"query,omitempty"`
		Entity            string   `json:"entity,omitempty"`
		EntityPrefix      string   `json:"entity_prefix,omitempty"`
		Key               string   `json:"key,omitempty"`
		TopK              *int     `json:"top_k,omitempty"`
		TokenBudget       int      `json:"token_budget,omitempty"`
		IncludeSuperseded bool     `json:"include_superseded,omitempty"`
		AsOf              string   `json:"as_of,omitempty"`
		MinEffective      *float64 `json:"min_effective_confidence,omitempty"`
		Contract          string   `json:"contract,omitempty"`
	}
	forgetArgs struct {
		Scope         json.RawMessage `json:"scope"`
		Reason        string          `json:"reason"`
		TenantID      string          `json:"tenant_id,omitempty"`
		TokenBudget   int             `json:"token_budget,omitempty"`
		IncludePinned bool            `json:"include_pinned,omitempty"`
	}
	pinArgs struct {
		FactID string `json:"fact_id"`
		Pinned *bool  `json:"pinned,omitempty"`
	}
)

// typedTool is a tool of the test set taking typed arguments.
func typedTool[In any](name string, schema []byte) *Tool {
	return &Tool{Name: name, Description: name, Schema: schema, Out: anyObject,
		Run: Bind(name, func(context.Context, *Env, Caller, *In) (*Result, error) { return nil, nil })}
}

// testSet is a set of a tool for every input schema crux's tools declare
// (read from package tools' snapshot of them): store_fact, query_facts,
// memory_forget and memory_pin with argument types like theirs, the
// others taking their arguments as JSON text.
func testSet(t testing.TB) *Set {
	t.Helper()
	files, err := filepath.Glob("../tools/testdata/schemas/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var all []*Tool
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var snap struct {
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		require.NoError(t, json.Unmarshal(b, &snap), f)
		schema := []byte(snap.InputSchema)
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		var tl *Tool
		switch name {
		case "store_fact":
			tl = typedTool[factArgs](name, schema)
		case "query_facts":
			tl = typedTool[queryArgs](name, schema)
		case "memory_forget":
			tl = typedTool[forgetArgs](name, schema)
		case "memory_pin":
			tl = typedTool[pinArgs](name, schema)
		default:
			tl = New(name, name, schema, Annotations{}, func(context.Context, *Env, Caller, json.RawMessage) (*Result, error) { return nil, nil })
		}
		all = append(all, tl)
	}
	s, err := NewSet(all)
	require.NoError(t, err)
	return s
}

// TestEveryToolHasACheck: every tool's schema compiles into the fast check,
// so no tool is left to the schema library alone; the typed arguments
// of the hot tools decode from the tree.
func TestEveryToolHasACheck(t *testing.T) {
	s := testSet(t)
	for i, tl := range s.tools {
		require.NotNil(t, s.check[i], "%s: schema not compiled into a check", tl.Name)
	}
	for _, hot := range []string{"store_fact", "query_facts", "memory_pin"} {
		require.True(t, s.tools[s.byName[hot]].Run.tree, "%s decodes its arguments twice", hot)
	}
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
	want, wantErr := referenceArguments(tl.Name, s.schema[i], tl.Run.args, json.RawMessage(args))
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
		_, wantErr = referenceArguments(tl.Name, s.schema[i], tl.Run.args, json.RawMessage(args))
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
	files, err := filepath.Glob("../tools/testdata/fuzz/FuzzTools/*")
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
		dec := json.NewDecoder(bytes.NewReader(tl.Schema))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&doc))
		g := schemagen.New(rng)
		accepted := 0
		for range n {
			args := g.Arguments(doc)
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

// BenchmarkArguments compares checking and decoding typical arguments of
// the hot tools in one pass with the reference (decoded three times,
// validated by the schema library).
func BenchmarkArguments(b *testing.B) {
	s := testSet(b)
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
				if _, err := referenceArguments(c.tool, s.schema[i], s.tools[i].Run.args, args); err != nil {
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
