package toolkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// A tool's input schema is derived from its argument struct, the one
// place both are written:
//
//   - each field is a property named as encoding/json names it (an
//     embedded struct without a JSON name lends its fields), in the
//     struct's order; a field without omitempty or omitzero is required,
//     unless its schema tag says optional;
//   - its type gives the property's type: string, boolean, integer (any
//     Go integer), number (float32, float64), array (a slice; its items
//     from the element type), object (a struct, closed to other
//     properties, or a map); json.RawMessage and interfaces give no type;
//   - the tag schema:"k=v;k=v;..." adds keywords: minLength, maxLength,
//     minimum, maximum, minItems, maxItems, default (a JSON value, or a
//     string), enum (strings separated by |), type (for a field whose Go
//     type gives none), and items.K for the keyword K of an array's
//     items; the flag optional makes a field without omitempty optional;
//   - the tag pattern:"..." is the property's pattern, and doc:"..." its
//     description;
//   - a struct type implementing [SchemaAdjuster] changes its derived
//     schema last, for what tags cannot say (a oneOf, an extension).

// SchemaAdjuster is implemented by an argument type (or a struct type
// within one) whose derived input schema needs what struct tags cannot
// say. AdjustSchema changes the schema derived for the type in place.
type SchemaAdjuster interface {
	AdjustSchema(schema map[string]any)
}

var adjusterType = reflect.TypeFor[SchemaAdjuster]()

// InputSchemaOf derives the JSON Schema of arguments of type t, a struct
// (or a pointer to one), as a tool built with [Bind] declares it when its
// Schema is empty.
func InputSchemaOf(t reflect.Type) (json.RawMessage, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("arguments of type %s: not a struct", t)
	}
	s, err := typeSchema(t, map[reflect.Type]bool{})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := writeSchema(&b, s); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// keywordOrder is the order keywords are written in; others follow,
// sorted.
var keywordOrder = []string{"type", "title", "description", "const", "enum", "format", "pattern", "minLength", "maxLength",
	"minimum", "maximum", "default", "items", "minItems", "maxItems", "properties", "required", "additionalProperties", "oneOf"}

// propertyOrder is the key of a derived object schema under which the
// names of its properties are kept in their struct order ([]string); it is
// not written.
const propertyOrder = "\x00order"

// writeSchema writes s as JSON with its keywords in keywordOrder and its
// properties in their struct order (see propertyOrder), the properties not
// named there after them, sorted.
func writeSchema(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case map[string]any:
		return writeObject(b, v, keywordOrder, v[propertyOrder], true)
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeSchema(b, x); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		q, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.Write(q)
	}
	return nil
}

// writeObject writes the JSON object m, the members named in first in
// that order, then the others sorted, but for propertyOrder. When m is a
// schema, its properties member is written in the order order holds
// ([]string, or nil); the members of a properties object are schemas.
func writeObject(b *bytes.Buffer, m map[string]any, first []string, order any, schema bool) error {
	names := slices.Clone(first)
	var rest []string
	for k := range m {
		if k != propertyOrder && !slices.Contains(first, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	b.WriteByte('{')
	n := 0
	for _, k := range append(names, rest...) {
		x, ok := m[k]
		if !ok {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		q, _ := json.Marshal(k)
		b.Write(q)
		b.WriteByte(':')
		var err error
		if props, ok := x.(map[string]any); ok && schema && k == "properties" {
			names, _ := order.([]string)
			err = writeObject(b, props, names, nil, false)
		} else {
			err = writeSchema(b, x)
		}
		if err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// typeSchema is the schema of a value of type t.
func typeSchema(t reflect.Type, seen map[reflect.Type]bool) (map[string]any, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	s := map[string]any{}
	switch {
	case t == rawMessageType || t.Kind() == reflect.Interface:
		// any JSON value
	case t.Kind() == reflect.String:
		s["type"] = "string"
	case t.Kind() == reflect.Bool:
		s["type"] = "boolean"
	case t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64:
		s["type"] = "integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		s["type"] = "number"
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		items, err := typeSchema(t.Elem(), seen)
		if err != nil {
			return nil, err
		}
		s["type"], s["items"] = "array", items
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		s["type"] = "object"
	case t.Kind() == reflect.Struct:
		if seen[t] {
			return nil, fmt.Errorf("%s: recursive argument type", t)
		}
		seen[t] = true
		defer delete(seen, t)
		p := map[string]any{}
		var order []string
		var required []any
		if err := schemaFields(t, p, &order, &required, seen); err != nil {
			return nil, err
		}
		s["type"], s["properties"], s[propertyOrder], s["additionalProperties"] = "object", p, order, false
		if len(required) > 0 {
			s["required"] = required
		}
	default:
		return nil, fmt.Errorf("arguments of type %s: no JSON Schema type", t)
	}
	if t.Kind() == reflect.Struct && (t.Implements(adjusterType) || reflect.PointerTo(t).Implements(adjusterType)) {
		reflect.New(t).Interface().(SchemaAdjuster).AdjustSchema(s)
	}
	return s, nil
}

// schemaFields adds the properties of struct t's fields to p, and the
// names of the required ones to required.
func schemaFields(t reflect.Type, p map[string]any, order *[]string, required *[]any, seen map[reflect.Type]bool) error {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" && opts == "" {
			continue
		}
		if f.Anonymous && name == "" {
			et := f.Type
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				if err := schemaFields(et, p, order, required, seen); err != nil {
					return err
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" || !hasTag {
			name = f.Name
		}
		s, err := typeSchema(f.Type, seen)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t, f.Name, err)
		}
		optional, err := fieldKeywords(s, f.Tag)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t, f.Name, err)
		}
		if _, dup := p[name]; dup {
			return fmt.Errorf("%s: two fields named %q", t, name)
		}
		*order = append(*order, name)
		p[name] = s
		omit := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		if !omit && !optional {
			*required = append(*required, name)
		}
	}
	return nil
}

// intKeywords are the keywords whose values are integers.
var intKeywords = map[string]bool{"minLength": true, "maxLength": true, "minItems": true, "maxItems": true}

// fieldKeywords adds the keywords of a field's schema, pattern and doc tags
// to s, and reports whether the schema tag says optional.
func fieldKeywords(s map[string]any, tag reflect.StructTag) (optional bool, err error) {
	if d, ok := tag.Lookup("doc"); ok {
		s["description"] = d
	}
	if pat, ok := tag.Lookup("pattern"); ok {
		s["pattern"] = pat
	}
	spec, ok := tag.Lookup("schema")
	if !ok {
		return false, nil
	}
	for _, kv := range strings.Split(spec, ";") {
		if kv == "optional" {
			optional = true
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return false, fmt.Errorf("schema tag %q: %q is not key=value", spec, kv)
		}
		dst := s
		if sub, ok := strings.CutPrefix(k, "items."); ok {
			items, _ := s["items"].(map[string]any)
			if items == nil {
				return false, fmt.Errorf("schema tag %q: items of a field that is not an array", spec)
			}
			dst, k = items, sub
		}
		switch {
		case k == "enum":
			var vals []any
			for _, e := range strings.Split(v, "|") {
				vals = append(vals, e)
			}
			dst[k] = vals
		case k == "type":
			dst[k] = v
		case intKeywords[k]:
			n, err := strconv.Atoi(v)
			if err != nil {
				return false, fmt.Errorf("schema tag %q: %s must be an integer", spec, k)
			}
			dst[k] = n
		case k == "minimum" || k == "maximum" || k == "default":
			var x any
			d := json.NewDecoder(strings.NewReader(v))
			d.UseNumber()
			if err := d.Decode(&x); err != nil || d.More() {
				if k != "default" {
					return false, fmt.Errorf("schema tag %q: %s must be a number", spec, k)
				}
				x = v // a string
			}
			dst[k] = x
		default:
			return false, fmt.Errorf("schema tag %q: unknown keyword %q", spec, k)
		}
	}
	return optional, nil
}
