package outschema_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/internal/outschema"
)

type hexish []byte

func (hexish) MarshalJSON() ([]byte, error) { return []byte(`"00"`), nil }

type schemed []byte

func (schemed) MarshalJSON() ([]byte, error)   { return []byte(`"00"`), nil }
func (schemed) JSONSchema() *jsonschema.Schema { return &jsonschema.Schema{Type: "string"} }

type inner struct {
	A string `json:"a"`
}

type Embedded struct {
	E int `json:"e"`
}

type out struct {
	Embedded
	Name  string            `json:"name"`
	List  []string          `json:"list"`
	Rows  []inner           `json:"rows"`
	Map   map[string]int    `json:"map"`
	Opt   *inner            `json:"opt,omitempty"`
	Null  *inner            `json:"null"`
	Raw   json.RawMessage   `json:"raw"`
	Hash  schemed           `json:"hash"`
	Empty []string          `json:"empty,omitempty"`
	Tags  map[string]string `json:"-"`
}

func TestListed(t *testing.T) {
	got, err := outschema.Listed(reflect.TypeFor[out]())
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"object","properties":{
		"e":{"type":"integer"},
		"name":{"type":"string"},
		"list":{"type":"array","items":{"type":"string"}},
		"rows":{"type":"array"},
		"map":{"type":"object"},
		"opt":{"type":"object"},
		"null":{"type":["null","object"]},
		"raw":{},
		"hash":{"type":"string"},
		"empty":{"type":"array","items":{"type":"string"}}}}`, string(got))

	_, err = outschema.Listed(reflect.TypeFor[string]())
	assert.Error(t, err, "not an object")
	_, err = outschema.Full(reflect.TypeFor[struct {
		H hexish `json:"h"`
	}]())
	assert.ErrorContains(t, err, "no JSONSchema method", "a self-marshalling type must say its schema")

	merged, err := outschema.Listed(reflect.TypeFor[struct {
		A string `json:"a"`
	}](), reflect.TypeFor[struct {
		A int `json:"a"`
		B bool
	}]())
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"object","properties":{"a":{"type":["integer","string"]},"B":{"type":"boolean"}}}`, string(merged))
}

func TestFill(t *testing.T) {
	v := out{Name: "x"}
	filled := outschema.Fill(v).(out)
	assert.NotNil(t, filled.List)
	assert.NotNil(t, filled.Rows)
	assert.NotNil(t, filled.Map)
	assert.Nil(t, v.List, "the value given is not changed")
	assert.Nil(t, filled.Raw, "a self-marshalling slice is left alone")
	b, err := json.Marshal(filled)
	require.NoError(t, err)
	assert.JSONEq(t, `{"e":0,"name":"x","list":[],"rows":[],"map":{},"null":null,"raw":null,"hash":"00"}`, string(b))

	p := &out{List: []string{"a"}}
	fp := outschema.Fill(p).(*out)
	assert.NotSame(t, p, fp)
	assert.Nil(t, p.Rows)
	assert.Equal(t, []string{"a"}, fp.List)
	full := &out{List: []string{}, Rows: []inner{}, Map: map[string]int{}}
	assert.Same(t, full, outschema.Fill(full), "nothing to fill: the same pointer")
	assert.Equal(t, 3, outschema.Fill(3))
}
