package tools

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// schemaDrift lists where a tool's JSON Schema and the struct its
// arguments decode into disagree: a property with no field (the argument
// would be accepted and silently dropped), a field with no property (it
// could never be set), or a property required in the schema whose field is
// omitempty, or optional whose field is not. A tool whose arguments decode
// into json.RawMessage must declare no properties.
func schemaDrift(schema []byte, args reflect.Type) ([]string, error) {
	var doc struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(schema, &doc); err != nil {
		return nil, err
	}
	optional := map[string]bool{} // JSON field name → tagged omitempty
	if args != reflect.TypeFor[json.RawMessage]() {
		if err := jsonFields(args, optional); err != nil {
			return nil, err
		}
	}
	var problems []string
	for name := range doc.Properties {
		if _, ok := optional[name]; !ok {
			problems = append(problems, fmt.Sprintf("schema property %q has no field in %v", name, args))
		}
	}
	for name, omitempty := range optional {
		if _, ok := doc.Properties[name]; !ok {
			problems = append(problems, fmt.Sprintf("field %q of %v is not a schema property", name, args))
			continue
		}
		switch required := slices.Contains(doc.Required, name); {
		case required && omitempty:
			problems = append(problems, fmt.Sprintf("%q is required but its field is omitempty", name))
		case !required && !omitempty:
			problems = append(problems, fmt.Sprintf("%q is optional but its field is not omitempty", name))
		}
	}
	sort.Strings(problems)
	return problems, nil
}

// jsonFields records the JSON fields of struct type t (a pointer is
// followed; embedded structs contribute their fields) and whether each is
// omitempty.
func jsonFields(t reflect.Type, out map[string]bool) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("%v is not a struct", t)
	}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			if err := jsonFields(f.Type, out); err != nil {
				return err
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = slices.Contains(strings.Split(opts, ","), "omitempty")
	}
	return nil
}

// TestSchemasMatchArgumentStructs keeps every schema in step with its
// argument struct, so no argument can be silently dropped.
func TestSchemasMatchArgumentStructs(t *testing.T) {
	for _, tool := range All(nil) {
		t.Run(tool.Name, func(t *testing.T) {
			problems, err := schemaDrift(tool.Schema, tool.ArgumentType())
			require.NoError(t, err)
			assert.Empty(t, problems)
		})
	}
}

// TestSchemaDriftDetects shows the check failing on each kind of drift.
func TestSchemaDriftDetects(t *testing.T) {
	schema := []byte(`{"type":"object","properties":{"entity":{},"key":{},"top_k":{}},"required":["entity"]}`)
	type good struct {
		Entity string `json:"entity"`
		Key    string `json:"key,omitempty"`
		TopK   *int   `json:"top_k,omitempty"`
	}
	type dropped struct { // top_k removed from the struct
		Entity string `json:"entity"`
		Key    string `json:"key,omitempty"`
	}
	type extra struct {
		good
		Limit int `json:"limit,omitempty"`
	}
	type optionality struct {
		Entity string `json:"entity,omitempty"`
		Key    string `json:"key"`
		TopK   *int   `json:"top_k,omitempty"`
	}
	tests := []struct {
		name string
		args reflect.Type
		want []string
	}{
		{"in step", reflect.TypeFor[good](), nil},
		{"property removed from the struct", reflect.TypeFor[dropped](),
			[]string{`schema property "top_k" has no field in tools.dropped`}},
		{"field not in the schema", reflect.TypeFor[extra](),
			[]string{`field "limit" of tools.extra is not a schema property`}},
		{"optionality", reflect.TypeFor[optionality](),
			[]string{`"entity" is required but its field is omitempty`, `"key" is optional but its field is not omitempty`}},
		{"raw arguments with properties", reflect.TypeFor[json.RawMessage](), []string{
			`schema property "entity" has no field in json.RawMessage`,
			`schema property "key" has no field in json.RawMessage`,
			`schema property "top_k" has no field in json.RawMessage`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := schemaDrift(schema, tt.args)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
