package tools_test

// Every tool's real answer against the output schema it declares.

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/examples/memstore"
	"github.com/crux-go/crux/internal/outschema"
	"github.com/crux-go/crux/tools"
)

// compileSchema compiles a JSON Schema document.
func compileSchema(t *testing.T, name string, doc []byte) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	url := "crux:///out/" + name + ".json"
	require.NoError(t, c.AddResource(url, bytes.NewReader(doc)), "%s: %s", name, doc)
	s, err := c.Compile(url)
	require.NoError(t, err, "%s: %s", name, doc)
	return s
}

// parse decodes JSON as the schema library wants it.
func parse(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&v))
	return v
}

// outputTypes are the output types tools.All declares, by tool.
func outputTypes() map[string][]reflect.Type {
	out := map[string][]reflect.Type{}
	for _, tl := range tools.All(nil) {
		out[tl.Name] = tl.OutputTypes()
	}
	return out
}

// checkOutput checks one answer of tool: its structured content is a value
// of one of the tool's output types (or a pointer to one), its JSON
// validates against the exact schema of that type and against the schema
// tools/list declares, and the declared schema refuses it once a property
// it describes has a value of another type.
func checkOutput(t *testing.T, tool string, declared json.RawMessage, types []reflect.Type, res *crux.Result) {
	t.Helper()
	require.NotNil(t, res.StructuredContent, "%s: no structured content", tool)
	dyn := reflect.TypeOf(res.StructuredContent)
	if dyn.Kind() == reflect.Pointer {
		dyn = dyn.Elem()
	}
	require.True(t, slices.Contains(types, dyn), "%s answers a %s; its output types are %v", tool, dyn, types)
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	doc := parse(t, b)
	require.IsType(t, map[string]any{}, doc, "%s: structuredContent must be a JSON object", tool)

	full, err := outschema.Full(dyn)
	require.NoError(t, err)
	fullJSON, err := json.Marshal(full)
	require.NoError(t, err)
	assert.NoError(t, compileSchema(t, tool+"-full", fullJSON).Validate(doc), "%s: exact schema of %s", tool, dyn)

	listed := compileSchema(t, tool, declared)
	assert.NoError(t, listed.Validate(doc), "%s: declared output schema %s", tool, declared)

	// The declared schema says something: each property it types refuses
	// a value of the wrong type.
	var schema struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(declared, &schema))
	obj := doc.(map[string]any)
	for name, p := range schema.Properties {
		if _, ok := obj[name]; !ok || p.Type == nil {
			continue
		}
		bad := maps.Clone(obj)
		bad[name] = wrongValue(p.Type)
		assert.Error(t, listed.Validate(bad), "%s: %s set to %v still validates", tool, name, bad[name])
	}
}

// wrongValue is a value of none of the JSON types typ names.
func wrongValue(typ any) any {
	var ts []string
	switch v := typ.(type) {
	case string:
		ts = []string{v}
	case []any:
		for _, x := range v {
			ts = append(ts, x.(string))
		}
	}
	for _, cand := range []struct {
		typ string
		v   any
	}{{"string", "x"}, {"boolean", true}, {"object", map[string]any{}}, {"array", []any{}}} {
		if !slices.Contains(ts, cand.typ) {
			return cand.v
		}
	}
	return json.Number("1.5")
}

// TestOutputSchemas: every valid call's answer is a value of its tool's
// declared output type and validates against the exact schema of that
// type and against the output schema tools/list declares, which refuses it
// with any described property of the wrong type.
func TestOutputSchemas(t *testing.T) {
	srv, swap, fs := fixtureRig(t)
	listed := map[string]json.RawMessage{}
	for _, tl := range srv.ListTools(context.Background(), alice) {
		listed[tl.Name] = tl.OutputSchema
	}
	types := outputTypes()
	for _, vc := range validCalls {
		t.Run(vc.tool, func(t *testing.T) {
			require.NotEmpty(t, listed[vc.tool], "%s declares no output schema", vc.tool)
			swap.set(fs.restore(t))
			res, err := srv.CallTool(context.Background(), vc.caller, vc.tool, json.RawMessage(fs.fx.expand(vc.args)))
			require.NoError(t, err)
			if vc.isError {
				require.True(t, res.IsError)
				assert.Nil(t, res.StructuredContent, "an isError result carries no structured content")
				return
			}
			require.False(t, res.IsError, "%v", res.Content)
			checkOutput(t, vc.tool, listed[vc.tool], types[vc.tool], res)
		})
	}
}

// TestOutputSchemasFlagOff: the answers tools give while their flag is off
// validate too, and Decode says what they are.
func TestOutputSchemasFlagOff(t *testing.T) {
	srv, err := crux.NewServer(memstore.New(), &crux.Options{Now: func() time.Time { return fixtureTime }})
	require.NoError(t, err)
	defer srv.Close()
	listed := map[string]json.RawMessage{}
	for _, tl := range srv.ListTools(context.Background(), alice) {
		listed[tl.Name] = tl.OutputSchema
	}
	types := outputTypes()
	for _, c := range []struct{ tool, args string }{
		{"artefact_put", `{"content_bytes_base64":"aGVsbG8=","mime_type":"text/plain"}`},
		{"artefact_get", `{"artefact_id":"art_x"}`},
		{"artefact_list", `{}`},
		{"memory_acknowledge_use", `{"turn_id":"t1","fact_ids":["f_1"]}`},
		{"autonomy_contract", `{}`},
		{"receipt_verify", `{"receipt_id":"r_1"}`},
	} {
		t.Run(c.tool, func(t *testing.T) {
			res, err := srv.CallTool(context.Background(), alice, c.tool, json.RawMessage(c.args))
			require.NoError(t, err)
			require.False(t, res.IsError, "%v", res.Content)
			checkOutput(t, c.tool, listed[c.tool], types[c.tool], res)
		})
	}
}

// TestOutputTypesExported: every output type, and every struct type it
// holds, is exported, so that a program can name what Decode gives it.
func TestOutputTypesExported(t *testing.T) {
	seen := map[reflect.Type]bool{}
	var walk func(tool string, t2 reflect.Type)
	walk = func(tool string, ty reflect.Type) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Array || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct || seen[ty] {
			return
		}
		seen[ty] = true
		if ty.Name() != "" {
			assert.True(t, ty.Name()[0] >= 'A' && ty.Name()[0] <= 'Z', "%s: output holds unexported type %s", tool, ty)
		}
		for _, f := range reflect.VisibleFields(ty) {
			if f.IsExported() {
				walk(tool, f.Type)
			}
		}
	}
	for name, ts := range outputTypes() {
		require.NotEmpty(t, ts, name)
		for _, ty := range ts {
			walk(name, ty)
		}
	}
}
