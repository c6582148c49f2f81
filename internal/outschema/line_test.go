package outschema_test

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/internal/outschema"
)

type lineRow struct {
	ID    string   `json:"id"`
	Tags  []string `json:"tags,omitempty"`
	Inner struct {
		Deep struct {
			Deeper struct {
				X int `json:"x"`
			} `json:"deeper"`
		} `json:"deep"`
	} `json:"inner"`
}

type lineOut struct {
	Rows  []lineRow `json:"rows"`
	Count int       `json:"count"`
	Note  string    `json:"note,omitempty"`
}

type lineOff struct {
	FeatureEnabled bool `json:"feature_enabled"`
}

// TestLine: every property in field order, the optional ones marked,
// arrays and nested objects described to a depth of three, shapes apart.
func TestLine(t *testing.T) {
	got, err := outschema.Line(reflect.TypeFor[lineOut](), reflect.TypeFor[*lineOff]())
	require.NoError(t, err)
	assert.Equal(t, "{rows: [{id, tags?: [string], inner: {deep: {…}}}], count, note?} | {feature_enabled}", got)
}
