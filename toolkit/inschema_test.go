package toolkit

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type pageArgs struct {
	Limit  int    `json:"limit,omitempty" schema:"minimum=1;maximum=1000;default=100"`
	Cursor string `json:"cursor,omitempty" schema:"minLength=1"`
}

type derivedArgs struct {
	Entity string   `json:"entity" schema:"minLength=1" doc:"Who it is about; e.g. a, b."`
	Kind   string   `json:"kind,omitempty" schema:"enum=x|y;default=x"`
	Hash   string   `json:"hash,omitempty" pattern:"^[0-9a-f]{64}$"`
	Score  *float64 `json:"score,omitempty" schema:"minimum=0;maximum=1"`
	Tags   []string `json:"tags,omitempty" schema:"maxItems=3;items.minLength=1;default=[\"a\"]"`
	Flag   bool     `json:"flag" schema:"optional"`
	Body   any      `json:"body,omitempty" schema:"type=object"`
	Nested struct {
		N uint8 `json:"n"`
	} `json:"nested"`
	pageArgs
	hidden int //lint:ignore U1000 present to show an unexported field is left out of the schema
	Skip   int `json:"-"`
}

func (derivedArgs) AdjustSchema(s map[string]any) { s["x-test"] = true }

// TestInputSchemaOf: a struct's schema, keyword by keyword, properties in
// the struct's order, required unless omitempty or optional.
func TestInputSchemaOf(t *testing.T) {
	got, err := InputSchemaOf(reflect.TypeFor[*derivedArgs]())
	require.NoError(t, err)
	assert.Equal(t, `{"type":"object","properties":{`+
		`"entity":{"type":"string","description":"Who it is about; e.g. a, b.","minLength":1},`+
		`"kind":{"type":"string","enum":["x","y"],"default":"x"},`+
		`"hash":{"type":"string","pattern":"^[0-9a-f]{64}$"},`+
		`"score":{"type":"number","minimum":0,"maximum":1},`+
		`"tags":{"type":"array","default":["a"],"items":{"type":"string","minLength":1},"maxItems":3},`+
		`"flag":{"type":"boolean"},`+
		`"body":{"type":"object"},`+
		`"nested":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false},`+
		`"limit":{"type":"integer","minimum":1,"maximum":1000,"default":100},`+
		`"cursor":{"type":"string","minLength":1}},`+
		`"required":["entity","nested"],"additionalProperties":false,"x-test":true}`, string(got))
}

// TestInputSchemaOfRefuses: what cannot be a schema is an error, naming
// the field.
func TestInputSchemaOfRefuses(t *testing.T) {
	for name, typ := range map[string]reflect.Type{
		"not a struct": reflect.TypeFor[[]string](),
		"channel": reflect.TypeFor[struct {
			C chan int `json:"c"`
		}](),
		"unknown keyword": reflect.TypeFor[struct {
			A string `json:"a" schema:"minLen=1"`
		}](),
		"not key=value": reflect.TypeFor[struct {
			A string `json:"a" schema:"minLength"`
		}](),
		"integer keyword": reflect.TypeFor[struct {
			A string `json:"a" schema:"maxLength=x"`
		}](),
		"number keyword": reflect.TypeFor[struct {
			A int `json:"a" schema:"minimum=low"`
		}](),
		"items of a string": reflect.TypeFor[struct {
			A string `json:"a" schema:"items.minLength=1"`
		}](),
		"two fields one name": reflect.StructOf([]reflect.StructField{
			{Name: "A", Type: reflect.TypeFor[string](), Tag: `json:"a"`},
			{Name: "B", Type: reflect.TypeFor[string](), Tag: `json:"a"`},
		}),
	} {
		_, err := InputSchemaOf(typ)
		assert.Error(t, err, name)
	}
}

// TestInputSchemaOfPropertyNamedProperties: an argument called properties
// is a property like any other, its schema written as a schema.
func TestInputSchemaOfPropertyNamedProperties(t *testing.T) {
	got, err := InputSchemaOf(reflect.TypeFor[struct {
		Properties []string `json:"properties" schema:"maxItems=2"`
	}]())
	require.NoError(t, err)
	assert.Equal(t, `{"type":"object","properties":{"properties":{"type":"array","items":{"type":"string"},"maxItems":2}},`+
		`"required":["properties"],"additionalProperties":false}`, string(got))
}
