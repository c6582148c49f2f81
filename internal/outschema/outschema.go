// Package outschema derives the JSON Schemas of tool outputs from the Go
// types the tools return, with github.com/google/jsonschema-go.
//
// A tool's structured content is a Go value marshalled with encoding/json,
// so its Go type is the truth about its shape. [Full] is the exact schema
// of a type (every property, required unless omitempty, no additional
// properties); [Listed] is the compact schema tools/list carries.
//
// The schema library infers a schema from a type's fields, which is wrong
// for a type that marshals itself. A type that implements json.Marshaler
// or encoding.TextMarshaler must therefore say what it marshals to, with a
// method JSONSchema() *jsonschema.Schema (time.Time, json.RawMessage and
// []byte are known here); Full fails for one that does not, so a new such
// type cannot give a schema that lies.
package outschema

import (
	"encoding"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// Schemer is implemented by a type that marshals itself: its JSONSchema is
// the schema of what it marshals to.
type Schemer interface {
	JSONSchema() *jsonschema.Schema
}

var (
	schemerType   = reflect.TypeFor[Schemer]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
	textType      = reflect.TypeFor[encoding.TextMarshaler]()
)

// known are the schemas of standard types that marshal themselves (the
// schema library knows the first four too).
func known() map[reflect.Type]*jsonschema.Schema {
	str := func() *jsonschema.Schema { return &jsonschema.Schema{Type: "string"} }
	return map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[time.Time]():       str(),
		reflect.TypeFor[slog.Level]():      str(),
		reflect.TypeFor[big.Int]():         str(),
		reflect.TypeFor[big.Float]():       str(),
		reflect.TypeFor[big.Rat]():         str(),
		reflect.TypeFor[json.RawMessage](): {}, // any JSON value
		reflect.TypeFor[[]byte]():          str(),
	}
}

// typeSchemas collects the schemas of the self-marshalling types reachable
// from t, failing for one that does not say its schema.
func typeSchemas(t reflect.Type) (map[reflect.Type]*jsonschema.Schema, error) {
	out := known()
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type, path string) error
	walk = func(t reflect.Type, path string) error {
		if seen[t] {
			return nil
		}
		seen[t] = true
		if _, ok := out[t]; ok {
			return nil
		}
		if t.Implements(schemerType) || reflect.PointerTo(t).Implements(schemerType) && t.Kind() != reflect.Pointer {
			out[t] = reflect.Zero(t).Interface().(Schemer).JSONSchema()
			if out[t] == nil {
				return fmt.Errorf("outschema: %s (%s): JSONSchema returned nil", t, path)
			}
			return nil
		}
		if t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface &&
			(t.Implements(marshalerType) || t.Implements(textType) ||
				reflect.PointerTo(t).Implements(marshalerType) || reflect.PointerTo(t).Implements(textType)) {
			return fmt.Errorf("outschema: %s (%s) marshals itself but has no JSONSchema method", t, path)
		}
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			return walk(t.Elem(), path+"[]")
		case reflect.Map:
			return walk(t.Elem(), path+"{}")
		case reflect.Struct:
			for _, f := range reflect.VisibleFields(t) {
				if !f.IsExported() && !f.Anonymous {
					continue
				}
				if err := walk(f.Type, path+"."+f.Name); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(t, t.String()); err != nil {
		return nil, err
	}
	return out, nil
}

// Full returns the exact schema of the JSON that encoding/json makes of a
// value of type t: the schema library's inference, with the schemas of
// self-marshalling types (see the package documentation).
func Full(t reflect.Type) (*jsonschema.Schema, error) {
	ts, err := typeSchemas(t)
	if err != nil {
		return nil, err
	}
	return jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: ts})
}

// Listed returns the schema tools/list declares for a tool whose
// structured content has one of the types ts (each a struct, or a pointer
// to one): an object whose properties are those of every type, each with
// its JSON type and, for an array of scalars, the type of its items. It is
// deliberately shallow, to keep tools/list small: the properties of nested
// objects are not described, and neither the top level nor a nested
// object forbids other properties. It lists no required properties
// either: over MCP, an isError result may carry its own structured content
// (the error), which clients check against the same schema. A type that
// nil in Go (a nil slice or map) is written as null, so a nested one
// allows null; a property of the top level does not, because [Fill] makes
// every top-level slice and map non-nil before the value is sent.
func Listed(ts ...reflect.Type) (json.RawMessage, error) {
	props := map[string]any{}
	var order []string
	for _, t := range ts {
		full, err := Full(t)
		if err != nil {
			return nil, err
		}
		if full.Type != "object" && !slices.Equal(full.Types, []string{"null", "object"}) {
			return nil, fmt.Errorf("outschema: %s is not a JSON object", t)
		}
		filled := fillable(t)
		required := map[string]bool{}
		for _, name := range full.Required {
			required[name] = true
		}
		for _, name := range full.PropertyOrder {
			p := full.Properties[name]
			prop := map[string]any{}
			if typ := typeOf(p); typ != nil {
				// An omitempty field is left out rather than written as
				// null; Fill makes top-level slices and maps non-nil.
				if filled[name] || !required[name] {
					typ = withoutNull(typ)
				}
				prop["type"] = typ
			}
			if p.Items != nil {
				if it := typeOf(p.Items); it != nil && scalar(it) {
					prop["items"] = map[string]any{"type": it}
				}
			}
			if prev, ok := props[name]; ok {
				props[name] = merge(prev.(map[string]any), prop)
				continue
			}
			props[name] = prop
			order = append(order, name)
		}
	}
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i, name := range order {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		v, err := json.Marshal(props[name])
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteString(`}}`)
	return json.RawMessage(b.String()), nil
}

// typeOf is the JSON type of s as Listed writes it: a string, a list of
// strings, or nil for any type.
func typeOf(s *jsonschema.Schema) any {
	switch {
	case s.Type != "":
		return s.Type
	case len(s.Types) > 0:
		return s.Types
	}
	return nil
}

// scalar reports whether typ names only JSON scalar types: the items of an
// array are described when they are scalars, not when they are objects or
// arrays (whose shape the schema leaves open).
func scalar(typ any) bool {
	for _, t := range types(typ) {
		if t == "object" || t == "array" {
			return false
		}
	}
	return true
}

// merge is the property schema that admits what either a or b admits.
func merge(a, b map[string]any) map[string]any {
	ta, tb := types(a["type"]), types(b["type"])
	if ta == nil || tb == nil {
		return map[string]any{} // one of them admits anything
	}
	out := map[string]any{}
	all := slices.Clone(ta)
	for _, t := range tb {
		if !slices.Contains(all, t) {
			all = append(all, t)
		}
	}
	slices.Sort(all)
	if len(all) == 1 {
		out["type"] = all[0]
	} else {
		out["type"] = all
	}
	if ia, ib := a["items"], b["items"]; ia != nil && ib != nil && fmt.Sprint(ia) == fmt.Sprint(ib) {
		out["items"] = ia
	}
	return out
}

func types(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []string:
		return v
	}
	return nil
}

// withoutNull is typ without "null".
func withoutNull(typ any) any {
	ts, ok := typ.([]string)
	if !ok {
		return typ
	}
	ts = slices.DeleteFunc(slices.Clone(ts), func(s string) bool { return s == "null" })
	if len(ts) == 1 {
		return ts[0]
	}
	return ts
}

// fields are the exported fields of struct type t (through a pointer) that
// encoding/json writes at the top level, by JSON name.
func fields(t reflect.Type) map[string]reflect.StructField {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	out := map[string]reflect.StructField{}
	if t.Kind() != reflect.Struct {
		return out
	}
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous && f.Type.Kind() == reflect.Struct {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		out[name] = f
	}
	return out
}

// fillCache holds fillFields' answer per type.
var fillCache sync.Map // reflect.Type → []reflect.StructField

// fillFields are the fields of the struct type t that Fill fills: its
// top-level slices and maps, but omitempty ones and those that write
// their own JSON. They are worked out once per type.
func fillFields(t reflect.Type) []reflect.StructField {
	if v, ok := fillCache.Load(t); ok {
		return v.([]reflect.StructField)
	}
	var out []reflect.StructField
	for _, f := range fields(t) {
		k := f.Type.Kind()
		if k != reflect.Slice && k != reflect.Map || f.Type.Implements(marshalerType) {
			continue
		}
		if _, opts, _ := strings.Cut(f.Tag.Get("json"), ","); strings.Contains(","+opts+",", ",omitempty,") {
			continue // left out when nil or empty, never null
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b reflect.StructField) int { return slices.Compare(a.Index, b.Index) })
	v, _ := fillCache.LoadOrStore(t, out)
	return v.([]reflect.StructField)
}

// fillable are the JSON names of the top-level slices and maps of t, which
// Fill makes non-nil.
func fillable(t reflect.Type) map[string]bool {
	out := map[string]bool{}
	for name, f := range fields(t) {
		if k := f.Type.Kind(); (k == reflect.Slice || k == reflect.Map) && !f.Type.Implements(marshalerType) {
			out[name] = true
		}
	}
	return out
}

// Fill returns v with every nil slice and map among the fields of its top
// level (except omitempty ones, which are left out) replaced by an empty
// one, so that the JSON of each is [] or {}, never null. v is a struct or a pointer to one (anything else is returned
// as it is); v itself is not changed: a struct is copied, and a pointer is
// replaced by a pointer to a copy when a field needs filling.
func Fill(v any) any {
	rv := reflect.ValueOf(v)
	ptr := rv.Kind() == reflect.Pointer
	if ptr {
		if rv.IsNil() {
			return v
		}
		rv = rv.Elem()
	}
	if rv.Kind() != reflect.Struct {
		return v
	}
	var cp reflect.Value
	for _, f := range fillFields(rv.Type()) {
		k := f.Type.Kind()
		fv, err := rv.FieldByIndexErr(f.Index)
		if err != nil || !fv.IsNil() {
			continue // behind a nil embedded pointer, or set
		}
		if !cp.IsValid() {
			cp = reflect.New(rv.Type()).Elem()
			cp.Set(rv)
		}
		dst := cp.FieldByIndex(f.Index)
		if k == reflect.Slice {
			dst.Set(reflect.MakeSlice(f.Type, 0, 0))
		} else {
			dst.Set(reflect.MakeMap(f.Type))
		}
	}
	switch {
	case !cp.IsValid():
		return v
	case ptr:
		return cp.Addr().Interface()
	}
	return cp.Interface()
}
