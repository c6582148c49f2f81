package crux

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// ErrToolFailed is the error [Decode] returns (wrapped, with the result's
// text) for a result with IsError set: the tool ran and reported a failure.
var ErrToolFailed = errors.New("crux: the tool reported a failure")

// ErrFeatureOff is the error [Decode] returns (wrapped, with the answer's
// note) for the answer a tool gives while the feature flag it needs is
// off (artefact_put, artefact_get, artefact_list, memory_acknowledge_use):
// a success that did nothing and has another shape. Decode into
// tools.FeatureOffOutput or tools.MemoryAcknowledgeUseOffOutput to read it
// instead.
var ErrFeatureOff = errors.New("crux: the tool's feature flag is off")

// Decode returns the structured content of res as a T, the output type of
// the tool that answered (tools.StoreFactOutput for store_fact, and so on;
// toolkit.Tool.OutputTypes names each tool's), so that a program
// reads a result without parsing its text.
//
// In-process, the structured content is already a T (or a *T) and is
// returned as it is, sharing its slices and maps with res. Otherwise (a
// result decoded from JSON, as a process forwarding to another gets one)
// it is converted through JSON; fields T does not know are ignored.
//
// A result with IsError set gives an error wrapping [ErrToolFailed] with
// the result's text; a tool's feature-off answer, one wrapping
// [ErrFeatureOff]; a result without structured content, or whose content
// does not decode into T, an error saying so.
func Decode[T any](res *Result) (T, error) {
	var zero T
	switch {
	case res == nil:
		return zero, errors.New("crux: Decode: no result")
	case res.IsError:
		return zero, fmt.Errorf("%w: %s", ErrToolFailed, resultText(res))
	case res.StructuredContent == nil:
		return zero, errors.New("crux: Decode: the result has no structured content")
	}
	switch v := res.StructuredContent.(type) {
	case T:
		return v, nil
	case *T:
		if v != nil {
			return *v, nil
		}
	}
	var b []byte
	switch v := res.StructuredContent.(type) {
	case json.RawMessage:
		b = v
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return zero, fmt.Errorf("crux: Decode: %w", err)
		}
	}
	if !hasJSONField(reflect.TypeFor[T](), "feature_flag") {
		var off struct {
			FeatureEnabled *bool  `json:"feature_enabled"`
			FeatureFlag    string `json:"feature_flag"`
			Note           string `json:"note"`
		}
		if json.Unmarshal(b, &off) == nil && off.FeatureEnabled != nil && !*off.FeatureEnabled && off.FeatureFlag != "" {
			return zero, fmt.Errorf("%w: %s", ErrFeatureOff, off.Note)
		}
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return zero, fmt.Errorf("crux: Decode into %T: %w", zero, err)
	}
	return out, nil
}

// hasJSONField reports whether struct type t (through pointers) has a
// field that encoding/json names name.
func hasJSONField(t reflect.Type, name string) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return false
	}
	for _, f := range reflect.VisibleFields(t) {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name || tag == "" && f.Name == name {
			return true
		}
	}
	return false
}
