package store

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrInvalidUTF8 reports a string that is not valid UTF-8 on its way into
// a record. Every decoder crux reads records with rejects such text, so a
// record holding it could never be read back: the store refuses to write it
// instead. Callers test with errors.Is; the error is a [*TextError].
var ErrInvalidUTF8 = errors.New("store: text is not valid UTF-8")

// TextError reports a record the store refused to write because one of its
// strings is not valid UTF-8. Nothing of the record was written.
type TextError struct {
	Record string // the record, such as "fact f_…" or "forget r_…"
	Field  string // the offending field by its stored name, such as "owner" or "retires.1"
}

// Error names the record and the field.
func (e *TextError) Error() string {
	return fmt.Sprintf("store: %s: %s is not valid UTF-8; the record was not written", e.Record, e.Field)
}

// Unwrap returns [ErrInvalidUTF8].
func (e *TextError) Unwrap() error { return ErrInvalidUTF8 }

// CheckText returns a [*TextError] naming record and the first string in v
// (a struct, map, slice or pointer to one, searched depth-first; struct
// fields by their cbor, else json, name) that is not valid UTF-8, or nil.
// Map keys are checked too; byte slices hold bytes, not text, and are not.
func CheckText(record string, v any) error {
	if field, ok := invalidText(reflect.ValueOf(v), ""); ok {
		if field == "" {
			field = "the value"
		}
		return &TextError{Record: record, Field: field}
	}
	return nil
}

// invalidText returns the path of the first string in v that is not valid
// UTF-8, and whether there is one.
func invalidText(v reflect.Value, path string) (string, bool) {
	switch v.Kind() {
	case reflect.String:
		return path, !utf8.ValidString(v.String())
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return "", false
		}
		return invalidText(v.Elem(), path)
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			if p, bad := invalidText(v.Field(i), joinPath(path, fieldName(f))); bad {
				return p, true
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return "", false // bytes, not text
		}
		for i := range v.Len() {
			if p, bad := invalidText(v.Index(i), joinPath(path, strconv.Itoa(i))); bad {
				return p, true
			}
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			k := it.Key()
			if k.Kind() == reflect.String && !utf8.ValidString(k.String()) {
				return joinPath(path, strconv.Quote(k.String())), true
			}
			name := fmt.Sprint(k.Interface())
			if p, bad := invalidText(it.Value(), joinPath(path, name)); bad {
				return p, true
			}
		}
	}
	return "", false
}

// fieldName is the name a struct field is stored under: its cbor tag, else
// its json tag, else its Go name.
func fieldName(f reflect.StructField) string {
	for _, tag := range []string{"cbor", "json"} {
		if name, _, _ := strings.Cut(f.Tag.Get(tag), ","); name != "" && name != "-" {
			return name
		}
	}
	return f.Name
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
