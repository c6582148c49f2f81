package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/internal/schemagen"
	"github.com/crux-go/crux/toolkit"
)

// wholeNumbers rewrites, in a tree decoded with UseNumber, every number
// written with a fraction or an exponent whose value as a float64 is a
// whole number no larger than 2^53 as that integer ("5.0" and "5e0" as
// "5"): the schema does not tell them apart, and a call reads them so.
// It reports whether it rewrote any.
func wholeNumbers(v *any) bool {
	changed := false
	switch x := (*v).(type) {
	case json.Number:
		f, err := x.Float64()
		if strings.ContainsAny(string(x), ".eE") && err == nil && f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
			*v = json.Number(strconv.FormatInt(int64(f), 10))
			return true
		}
	case []any:
		for i := range x {
			changed = wholeNumbers(&x[i]) || changed
		}
	case map[string]any:
		for k, m := range x {
			if wholeNumbers(&m) {
				x[k], changed = m, true
			}
		}
	}
	return changed
}

// TestArgumentsMatchTheSchemaLibrary: over arguments generated at random
// from every tool's schema, the set's one-pass check and decode into the
// tool's own argument type (Set.Arguments, what a call does) accepts
// exactly what the schema library accepts, and decodes what json.Unmarshal
// decodes; what either refuses is a -32602.
func TestArgumentsMatchTheSchemaLibrary(t *testing.T) {
	set, err := toolkit.NewSet(All(nil))
	require.NoError(t, err)
	n := 120
	if testing.Short() {
		n = 40
	}
	rng := rand.New(rand.NewPCG(5, 2026))
	for _, tl := range All(nil) {
		var doc map[string]any
		dec := json.NewDecoder(bytes.NewReader(tl.InputSchema()))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&doc))
		// Every tool also takes turn_id and contract, strings.
		props := doc["properties"].(map[string]any)
		for _, name := range []string{"turn_id", "contract"} {
			if props[name] == nil {
				props[name] = map[string]any{"type": "string"}
			}
		}
		b, err := json.Marshal(doc)
		require.NoError(t, err)
		c := jsonschema.NewCompiler()
		c.Draft = jsonschema.Draft2020
		c.AssertFormat = true
		url := "crux:///" + tl.Name + ".json"
		require.NoError(t, c.AddResource(url, bytes.NewReader(b)))
		sch, err := c.Compile(url)
		require.NoError(t, err, tl.Name)
		g := schemagen.New(rng)
		accepted, refused := 0, 0
		for range n {
			args := g.Arguments(doc)
			got, gotErr := set.Arguments(tl.Name, json.RawMessage(args))
			d := json.NewDecoder(strings.NewReader(args))
			d.UseNumber()
			var tree any
			require.NoError(t, d.Decode(&tree), args)
			rewritten := wholeNumbers(&tree)
			if err := sch.Validate(tree); err != nil {
				requireInvalidParams(t, gotErr, "%s(%s): the library refuses (%v)", tl.Name, args, err)
				refused++
				continue
			}
			text := []byte(args)
			if rewritten {
				// Raw JSON fields then hold the members in another order.
				text, err = json.Marshal(tree)
				require.NoError(t, err)
			}
			want := reflect.New(tl.ArgumentType())
			if err := json.Unmarshal(text, want.Interface()); err != nil {
				requireInvalidParams(t, gotErr, "%s(%s): json.Unmarshal refuses (%v)", tl.Name, args, err)
				continue
			}
			require.NoError(t, gotErr, "%s(%s)", tl.Name, args)
			accepted++
			if tl.ArgumentType() == reflect.TypeFor[json.RawMessage]() {
				continue // the text itself, as given
			}
			if rewritten {
				w, err := json.Marshal(want.Interface())
				require.NoError(t, err)
				gb, err := json.Marshal(got)
				require.NoError(t, err)
				require.JSONEq(t, string(w), string(gb), "%s(%s)", tl.Name, args)
			} else {
				require.Equal(t, want.Interface(), got, "%s(%s)", tl.Name, args)
			}
		}
		// The generator must exercise both sides.
		require.Positive(t, accepted, "%s: no generated arguments passed", tl.Name)
		require.Positive(t, refused, "%s: every generated argument passed", tl.Name)
	}
}

// requireInvalidParams fails unless err is a -32602.
func requireInvalidParams(t *testing.T, err error, format string, args ...any) {
	t.Helper()
	var e *toolkit.Error
	msg := fmt.Sprintf(format, args...)
	require.True(t, errors.As(err, &e), "%s: one pass accepts", msg)
	require.Equal(t, toolkit.CodeInvalidParams, e.Code, msg)
}
