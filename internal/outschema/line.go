package outschema

import (
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// lineDepth is how deeply Line describes nested objects; deeper ones are
// written {…}.
const lineDepth = 3

// Line describes in one line the JSON that encoding/json makes of a value
// of each of the types ts, derived from their exact schemas (see Full), the
// shapes separated by " | ": an object as {name, name?, ...} in field
// order, a property that may be left out marked ?, an array as [item], an
// array of scalars as [string] (or [integer], [number], [boolean]), and a
// nested object as {...} of its own, to a depth of three.
func Line(ts ...reflect.Type) (string, error) {
	var parts []string
	for _, t := range ts {
		s, err := Full(t)
		if err != nil {
			return "", err
		}
		var b strings.Builder
		writeLine(&b, s, 0)
		parts = append(parts, b.String())
	}
	return strings.Join(parts, " | "), nil
}

// writeLine writes the one-line description of s.
func writeLine(b *strings.Builder, s *jsonschema.Schema, depth int) {
	types := typesOf(s)
	switch {
	case slices.Contains(types, "object") && len(s.Properties) > 0:
		if depth >= lineDepth {
			b.WriteString("{…}")
			return
		}
		b.WriteByte('{')
		order := s.PropertyOrder
		if len(order) == 0 {
			for name := range s.Properties {
				order = append(order, name)
			}
			slices.Sort(order)
		}
		for i, name := range order {
			p := s.Properties[name]
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(name)
			if !slices.Contains(s.Required, name) {
				b.WriteByte('?')
			}
			if nested(p) {
				b.WriteString(": ")
				writeLine(b, p, depth+1)
			}
		}
		b.WriteByte('}')
	case slices.Contains(types, "array") && s.Items != nil:
		b.WriteByte('[')
		writeLine(b, s.Items, depth)
		b.WriteByte(']')
	case len(types) == 1:
		b.WriteString(types[0])
	default:
		b.WriteString("value")
	}
}

// nested reports whether a property's description says more than its
// name: an object with properties, or an array.
func nested(s *jsonschema.Schema) bool {
	types := typesOf(s)
	return slices.Contains(types, "array") && s.Items != nil || slices.Contains(types, "object") && len(s.Properties) > 0
}

// typesOf is the JSON types s allows, but null.
func typesOf(s *jsonschema.Schema) []string {
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	return slices.DeleteFunc(slices.Clone(types), func(t string) bool { return t == "null" })
}
