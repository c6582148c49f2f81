package tools

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/toolkit"
)

// normalized is a schema as a tree with every required list sorted, so that
// two schemas compare by what they say.
func normalized(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(b, &v))
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if r, ok := v["required"].([]any); ok {
				slices.SortFunc(r, func(a, b any) int { return bytes.Compare([]byte(a.(string)), []byte(b.(string))) })
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return v
}

func TestZZDerivedEqualsFiles(t *testing.T) {
	for _, tl := range All(nil) {
		got, err := toolkit.InputSchemaOf(tl.ArgumentType())
		require.NoError(t, err, tl.Name)
		require.Equal(t, normalized(t, tl.Schema), normalized(t, got), "%s\n%s", tl.Name, got)
	}
}
