package toolkit

import (
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// A treeDecoder fills a tool's argument struct from the tree the arguments
// were decoded into (encoding/json with UseNumber, after checkArguments),
// so that a call's JSON is parsed once. It does what json.Unmarshal would
// do with the same text for the types it knows (strings, booleans,
// integers, floats, pointers, slices, maps with string keys, and structs of
// these, with fields matched by their exact JSON names), and reports false
// for anything else: a value of the wrong type, an integer out of range, a
// key that matches a field only case-insensitively. Then the caller
// decodes the text with json.Unmarshal instead, whose answer (or error)
// is the one the call gets. A type it does not know at all (json.RawMessage,
// interfaces, a json.Unmarshaler) gets no treeDecoder: such tools decode
// with json.Unmarshal every time.
//
// One difference from decoding the text: an object member named twice
// counts once, with its last value, as the schema saw it (json.Unmarshal
// would merge two objects given for one struct field).
type treeDecoder struct {
	fill func(v any, dst reflect.Value) bool
}

// newTreeDecoder returns the treeDecoder of type t, or nil when t holds a
// type it does not know.
func newTreeDecoder(t reflect.Type) *treeDecoder {
	fill := fillerFor(t, map[reflect.Type]bool{})
	if fill == nil {
		return nil
	}
	return &treeDecoder{fill: fill}
}

// decode fills *dst, a pointer to a zero value of the decoder's type, from
// doc. On false, *dst may be partly filled.
func (d *treeDecoder) decode(doc any, dst any) bool {
	return d.fill(doc, reflect.ValueOf(dst).Elem())
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// fillerFor returns the function filling a value of type t, or nil.
// seen guards against recursive types, which it does not handle.
func fillerFor(t reflect.Type, seen map[reflect.Type]bool) func(any, reflect.Value) bool {
	if seen[t] {
		return nil
	}
	pt := reflect.PointerTo(t)
	if t.Implements(unmarshalerType) || pt.Implements(unmarshalerType) ||
		t.Implements(textUnmarshalerType) || pt.Implements(textUnmarshalerType) {
		return nil
	}
	seen[t] = true
	defer delete(seen, t)
	switch t.Kind() {
	case reflect.String:
		return fillString
	case reflect.Bool:
		return fillBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fillInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fillUint
	case reflect.Float32, reflect.Float64:
		return fillFloat
	case reflect.Pointer:
		elem := fillerFor(t.Elem(), seen)
		if elem == nil {
			return nil
		}
		et := t.Elem()
		return func(v any, dst reflect.Value) bool {
			if v == nil {
				dst.SetZero()
				return true
			}
			p := reflect.New(et)
			if !elem(v, p.Elem()) {
				return false
			}
			dst.Set(p)
			return true
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil // []byte is base64 text to encoding/json
		}
		elem := fillerFor(t.Elem(), seen)
		if elem == nil {
			return nil
		}
		return func(v any, dst reflect.Value) bool {
			if v == nil {
				dst.SetZero()
				return true
			}
			list, ok := v.([]any)
			if !ok {
				return false
			}
			s := reflect.MakeSlice(dst.Type(), len(list), len(list))
			for i, x := range list {
				if !elem(x, s.Index(i)) {
					return false
				}
			}
			dst.Set(s)
			return true
		}
	case reflect.Map:
		if t.Key().Kind() != reflect.String || t.Key() != reflect.TypeFor[string]() {
			return nil
		}
		elem := fillerFor(t.Elem(), seen)
		if elem == nil {
			return nil
		}
		et := t.Elem()
		return func(v any, dst reflect.Value) bool {
			if v == nil {
				dst.SetZero()
				return true
			}
			obj, ok := v.(map[string]any)
			if !ok {
				return false
			}
			m := reflect.MakeMapWithSize(dst.Type(), len(obj))
			for k, x := range obj {
				e := reflect.New(et).Elem()
				if !elem(x, e) {
					return false
				}
				m.SetMapIndex(reflect.ValueOf(k), e)
			}
			dst.Set(m)
			return true
		}
	case reflect.Struct:
		return structFiller(t, seen)
	}
	return nil
}

// field is a struct field as encoding/json names it.
type field struct {
	name  string
	index []int
	depth int // 0 for a field of the struct itself, 1 in an embedded struct, ...
	fill  func(any, reflect.Value) bool
}

// structFields returns the fields of struct t as encoding/json sees them:
// the exported ones, by their JSON names, with those of embedded structs
// (not pointers) promoted unless the struct itself has a field of that
// name. It reports false for what it does not handle: a field with the
// string option, an embedded pointer, or two fields of one name at one
// depth (which encoding/json would both ignore).
func structFields(t reflect.Type, seen map[reflect.Type]bool, prefix []int, depth int) ([]field, bool) {
	var fields []field
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		index := append(slices.Clone(prefix), i)
		if f.Anonymous && tag == "" {
			if f.Type.Kind() != reflect.Struct {
				return nil, false
			}
			inner, ok := structFields(f.Type, seen, index, depth+1)
			if !ok {
				return nil, false
			}
			fields = append(fields, inner...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",string,") {
			return nil, false
		}
		if name == "" {
			name = f.Name
		}
		fill := fillerFor(f.Type, seen)
		if fill == nil {
			return nil, false
		}
		fields = append(fields, field{name: name, index: index, depth: depth, fill: fill})
	}
	// The shallowest field of a name wins; two at that depth: not handled.
	var kept []field
	for _, f := range fields {
		dominant := true
		for _, g := range fields {
			if g.name != f.name || slices.Equal(g.index, f.index) {
				continue
			}
			if g.depth == f.depth {
				return nil, false
			}
			if g.depth < f.depth {
				dominant = false
			}
		}
		if dominant {
			kept = append(kept, f)
		}
	}
	return kept, true
}

func structFiller(t reflect.Type, seen map[reflect.Type]bool) func(any, reflect.Value) bool {
	fields, ok := structFields(t, seen, nil, 0)
	if !ok {
		return nil
	}
	return func(v any, dst reflect.Value) bool {
		if v == nil {
			return true // null leaves a struct as it is
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return false
		}
		matched := 0
		for i := range fields {
			f := &fields[i]
			x, ok := obj[f.name]
			if !ok {
				continue
			}
			matched++
			if !f.fill(x, dst.FieldByIndex(f.index)) {
				return false
			}
		}
		if matched == len(obj) {
			return true
		}
		// A key that names no field exactly is ignored, unless it names
		// one case-insensitively, as encoding/json would take it.
		for k := range obj {
			for i := range fields {
				if k != fields[i].name && strings.EqualFold(k, fields[i].name) {
					return false
				}
			}
		}
		return true
	}
}

func fillString(v any, dst reflect.Value) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		dst.SetString(v)
		return true
	}
	return false
}

func fillBool(v any, dst reflect.Value) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		dst.SetBool(v)
		return true
	}
	return false
}

func fillInt(v any, dst reflect.Value) bool {
	switch v := v.(type) {
	case nil:
		return true
	case json.Number:
		n, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || dst.OverflowInt(n) {
			return false
		}
		dst.SetInt(n)
		return true
	}
	return false
}

func fillUint(v any, dst reflect.Value) bool {
	switch v := v.(type) {
	case nil:
		return true
	case json.Number:
		n, err := strconv.ParseUint(string(v), 10, 64)
		if err != nil || dst.OverflowUint(n) {
			return false
		}
		dst.SetUint(n)
		return true
	}
	return false
}

func fillFloat(v any, dst reflect.Value) bool {
	switch v := v.(type) {
	case nil:
		return true
	case json.Number:
		n, err := strconv.ParseFloat(string(v), dst.Type().Bits())
		if err != nil || dst.OverflowFloat(n) {
			return false
		}
		dst.SetFloat(n)
		return true
	}
	return false
}
