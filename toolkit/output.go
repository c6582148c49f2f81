package toolkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/crux-go/crux/internal/outschema"
)

// anyObject is the output type of a tool whose structured content may be
// any JSON object.
var anyObject = reflect.TypeFor[map[string]any]()

// outputOf is the reflect.Type of T, for a tool descriptor's out field.
func OutputOf[T any]() reflect.Type { return reflect.TypeFor[T]() }

// OutputTypes returns the Go types of the tool's structured content: the
// type of its answers, then, for a tool with a second shape, the type of
// that one: the answer while its feature flag is off (the artefact tools
// and memory_acknowledge_use), or engram_resolve's manifest (no names
// given). A result of the tool that is not an error holds a value of one
// of them (or a pointer to one).
func (t *Tool) OutputTypes() []reflect.Type {
	if t.Alt != nil {
		return []reflect.Type{t.Out, t.Alt}
	}
	if t.Out == nil {
		return nil
	}
	return []reflect.Type{t.Out}
}

// outputSchema is the output schema tools/list declares for t (see
// outschema.Listed).
func outputSchema(t *Tool) (json.RawMessage, error) {
	return outschema.Listed(t.OutputTypes()...)
}

// checkOutputTypes checks that t declares output types that can be JSON
// objects: structs, pointers to structs, or maps with string keys. Their
// schemas are derived later (see Set.OutputSchema), and a test derives
// those of every built-in tool.
func checkOutputTypes(t *Tool) error {
	if t.Out == nil {
		return errors.New("no output type")
	}
	for _, ty := range t.OutputTypes() {
		for ty.Kind() == reflect.Pointer {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct && (ty.Kind() != reflect.Map || ty.Key().Kind() != reflect.String) {
			return fmt.Errorf("output type %s is not a JSON object", ty)
		}
	}
	return nil
}

// OutputSchema returns the output schema of the named tool, as tools/list
// declares it: an object schema naming the properties of its structured
// content with their JSON types (nested objects are not described, and no
// property is required: see the package documentation of crux). It is nil
// for a name the set does not hold, or whose output types give no schema.
// The schemas are derived from the output types on the first call.
func (s *Set) OutputSchema(name string) json.RawMessage {
	i, ok := s.byName[name]
	if !ok {
		return nil
	}
	s.outputOnce.Do(func() {
		s.output = make([]json.RawMessage, len(s.tools))
		for j, t := range s.tools {
			s.output[j], _ = outputSchema(t) // nil on failure; TestAllCompiles derives every built-in one
		}
	})
	return append(json.RawMessage(nil), s.output[i]...)
}
