package tools_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/surface"
	"github.com/crux-go/crux/toolkit"
	"github.com/crux-go/crux/tools"
)

var update = flag.Bool("update", false, "rewrite the golden schema snapshots in testdata/schemas")

func TestAllCompiles(t *testing.T) {
	set, err := toolkit.NewSet(tools.All(nil))
	require.NoError(t, err)
	assert.Len(t, set.Tools(), len(tools.All(nil)))
	for _, tl := range set.Tools() {
		assert.NotEmpty(t, set.OutputSchema(tl.Name), "%s: no output schema derives from %v", tl.Name, tl.OutputTypes())
	}
}

// The longest description a tool and an argument may have, in bytes: a
// description says what the tool does, when to use it and its one or two
// traps; shared guidance is in crux.Instructions.
const (
	maxDescription    = 250
	maxArgDescription = 100
)

func TestRegistryMetadata(t *testing.T) {
	var names []string
	for _, tl := range tools.All(nil) {
		names = append(names, tl.Name)
		assert.NotEmpty(t, tl.Annotations.Title, "%s has no title", tl.Name)
		assert.False(t, tl.Annotations.ReadOnlyHint && tl.Annotations.DestructiveHint, "%s: read-only and destructive", tl.Name)
		var schema map[string]any
		require.NoError(t, json.Unmarshal(tl.InputSchema(), &schema), tl.Name)
		for _, k := range []string{"oneOf", "anyOf", "allOf"} {
			assert.NotContains(t, schema, k, "%s: top-level %s is not portable across model providers", tl.Name, k)
		}
		assert.Equal(t, false, schema["additionalProperties"], "%s must reject unknown arguments", tl.Name)
		// An argument's description, where it has one, says what its name
		// and the tool's description do not, in few words: tools/list
		// carries it on every turn.
		for name, p := range schema["properties"].(map[string]any) {
			if d, ok := p.(map[string]any)["description"]; ok {
				assert.NotEmpty(t, d, "%s.%s has an empty description", tl.Name, name)
				assert.LessOrEqual(t, len(d.(string)), maxArgDescription, "%s.%s: description too long", tl.Name, name)
			}
		}
		assert.LessOrEqual(t, len(tl.Description), maxDescription, "%s: description too long", tl.Name)
	}
	assert.Empty(t, surface.Missing(names), "every tool needs an entry in the surface table")

	// Catalogue order is the tier table's (the CueCrux tool contract's).
	var order []int
	for _, n := range names {
		for i, s := range surface.Names() {
			if s == n {
				order = append(order, i)
			}
		}
	}
	assert.IsIncreasing(t, order)
}

func TestNewSetRejects(t *testing.T) {
	obj := json.RawMessage(`{"type":"object","properties":{}}`)
	ok := toolkit.New("ok", "fine", obj, toolkit.Annotations{}, nil)
	tests := map[string][]*toolkit.Tool{
		"duplicate":        {tools.All(nil)[0], tools.All(nil)[0]},
		"bad name":         {toolkit.New("bad name", "d", obj, toolkit.Annotations{}, nil)},
		"no description":   {toolkit.New("x", " ", obj, toolkit.Annotations{}, nil)},
		"no handler":       {ok},
		"not object":       {toolkit.New("x", "d", json.RawMessage(`{"type":"string"}`), toolkit.Annotations{}, nil)},
		"invalid json":     {toolkit.New("x", "d", json.RawMessage(`{`), toolkit.Annotations{}, nil)},
		"no properties":    {toolkit.New("x", "d", json.RawMessage(`{"type":"object"}`), toolkit.Annotations{}, nil)},
		"invalid keywords": {toolkit.New("x", "d", json.RawMessage(`{"type":"object","properties":{"a":{"type":"nope"}}}`), toolkit.Annotations{}, nil)},
	}
	for name, ts := range tests {
		_, err := toolkit.NewSet(ts)
		assert.Error(t, err, name)
	}
}

// TestSchemaSnapshots keeps every tool's advertised schemas (input and
// output) under review:
// a change shows up as a diff in testdata/schemas (go test -update rewrites).
func TestSchemaSnapshots(t *testing.T) {
	set, err := toolkit.NewSet(tools.All(nil))
	require.NoError(t, err)
	for _, tl := range set.Tools() {
		var v, out any
		require.NoError(t, json.Unmarshal(tl.InputSchema(), &v))
		require.NoError(t, json.Unmarshal(set.OutputSchema(tl.Name), &out))
		got, err := json.MarshalIndent(map[string]any{"name": tl.Name, "description": tl.Description, "annotations": tl.Annotations,
			"inputSchema": v, "outputSchema": out}, "", "  ")
		require.NoError(t, err)
		got = append(got, '\n')
		path := filepath.Join("testdata", "schemas", tl.Name+".json")
		if *update {
			require.NoError(t, os.WriteFile(path, got, 0o644))
			continue
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err, "missing snapshot; run go test ./tools -update")
		assert.Equal(t, string(want), string(got), "schema of %s changed; run go test ./tools -update and review the diff", tl.Name)
	}
}

func TestCallerIdentity(t *testing.T) {
	assert.Equal(t, "anonymous", toolkit.Caller{}.Name())
	assert.Equal(t, "", toolkit.Caller{Agent: "x"}.Identity())
	assert.Equal(t, "x", toolkit.Caller{Agent: "x", Authenticated: true}.Identity())
	assert.Equal(t, toolkit.DefaultTenant, toolkit.Caller{}.TenantID())
	assert.Equal(t, "t", toolkit.Caller{Tenant: "t"}.TenantID())
	assert.True(t, strings.HasPrefix((&toolkit.Error{Code: -32602, Message: "m"}).Error(), "crux: m"))
}
