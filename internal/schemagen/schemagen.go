// Package schemagen generates JSON arguments from a JSON Schema, valid
// and invalid, for tests that hold two ways of checking arguments to the
// same verdict.
package schemagen

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Generator makes JSON values from a schema: mostly valid, each part wrong
// now and then in a way the schema rules out (or nearly does: values at
// and just past every bound).
type Generator struct{ rng *rand.Rand }

// New returns a Generator drawing from rng.
func New(rng *rand.Rand) *Generator { return &Generator{rng: rng} }

// Arguments returns the JSON text of an object generated from sch, an
// object schema decoded with UseNumber.
func (g *Generator) Arguments(sch map[string]any) string { return g.encode(g.object(sch, 0)) }

func (g *Generator) chance(p float64) bool { return g.rng.Float64() < p }

// ordered is a JSON object whose members keep their order.
type ordered []member

type member struct {
	name  string
	value any
}

// rawNumber is a number written as it is.
type rawNumber string

func (g *Generator) value(sch map[string]any, depth int) any {
	if g.chance(0.04) {
		return g.wrong(depth)
	}
	if sub, ok := sch["oneOf"].([]any); ok && g.chance(0.7) {
		// Merge a branch into the schema: its const and format decide.
		branch := sub[g.rng.IntN(len(sub))].(map[string]any)
		merged := map[string]any{}
		for k, v := range sch {
			merged[k] = v
		}
		props := map[string]any{}
		for k, v := range sch["properties"].(map[string]any) {
			props[k] = v
		}
		for k, v := range branch["properties"].(map[string]any) {
			p := map[string]any{}
			for kk, vv := range props[k].(map[string]any) {
				p[kk] = vv
			}
			for kk, vv := range v.(map[string]any) {
				p[kk] = vv
			}
			if p["const"] != nil {
				p["enum"] = []any{p["const"]}
			}
			props[k] = p
		}
		merged["properties"] = props
		delete(merged, "oneOf")
		sch = merged
	}
	if e, ok := sch["enum"].([]any); ok && !g.chance(0.1) {
		return e[g.rng.IntN(len(e))]
	}
	if c, ok := sch["const"]; ok && !g.chance(0.1) {
		return c
	}
	typ, _ := sch["type"].(string)
	if list, ok := sch["type"].([]any); ok {
		typ, _ = list[g.rng.IntN(len(list))].(string)
	}
	switch typ {
	case "string":
		return g.str(sch)
	case "integer", "number":
		return g.number(sch, typ == "integer")
	case "boolean":
		return g.chance(0.5)
	case "array":
		return g.array(sch, depth)
	case "object":
		return g.object(sch, depth)
	case "null":
		return nil
	}
	return g.wrong(depth)
}

func (g *Generator) wrong(depth int) any {
	switch g.rng.IntN(7) {
	case 0:
		return nil
	case 1:
		return g.chance(0.5)
	case 2:
		return rawNumber([]string{"0", "-1", "1.5", "1e3", "7"}[g.rng.IntN(5)])
	case 3:
		return "x"
	case 4:
		if depth < 3 {
			return []any{"a", rawNumber("1")}
		}
		return "y"
	case 5:
		return ordered{{"k", "v"}}
	}
	return ""
}

func (g *Generator) str(sch map[string]any) string {
	if f, _ := sch["format"].(string); f == "date-time" && !g.chance(0.2) {
		return []string{"2026-01-01T00:00:00Z", "2026-12-01T18:00:00.5+02:00"}[g.rng.IntN(2)]
	}
	if p, _ := sch["pattern"].(string); p != "" && !g.chance(0.2) {
		switch p {
		case "^f_[0-9a-f]{32}$":
			return "f_" + strings.Repeat("0a", 16)
		case "^[0-9a-f]{64}$":
			return strings.Repeat("ab", 32)
		}
	}
	minLen, maxLen := -1, -1
	if n, ok := sch["minLength"].(json.Number); ok {
		minLen, _ = strconv.Atoi(string(n))
	}
	if n, ok := sch["maxLength"].(json.Number); ok {
		maxLen, _ = strconv.Atoi(string(n))
	}
	// Lengths at a bound of a megabyte are rarely tried: they are slow.
	atMax := maxLen >= 0 && (maxLen <= 8192 || g.chance(0.05))
	var n int
	switch r := g.rng.IntN(6); {
	case r == 0 && minLen > 0:
		n = minLen - 1
	case r == 1 && atMax:
		n = maxLen
	case r == 2 && atMax:
		n = maxLen + 1
	case r == 3:
		n = 0
	default:
		n = 1 + g.rng.IntN(8)
	}
	// Multibyte characters: lengths count characters, not bytes.
	alphabet := []string{"a", "Z", "é", "字", "-", " ", "😀", "<"}
	var b strings.Builder
	for range n {
		b.WriteString(alphabet[g.rng.IntN(len(alphabet))])
	}
	return b.String()
}

func (g *Generator) number(sch map[string]any, integer bool) rawNumber {
	var edges []string
	for _, kw := range []string{"minimum", "maximum"} {
		if n, ok := sch[kw].(json.Number); ok {
			f, _ := n.Float64()
			edges = append(edges, string(n), strconv.FormatFloat(f-1, 'f', -1, 64), strconv.FormatFloat(f+1, 'f', -1, 64),
				strconv.FormatFloat(f, 'f', 1, 64), strconv.FormatFloat(f, 'e', -1, 64), string(n)+".0000000000000000001",
				strconv.FormatFloat(f-0.5, 'f', -1, 64))
		}
	}
	edges = append(edges, "0", "-0", "1", "5", "5.0", "1e3", "0.25", "1e20", "-7", "9223372036854775807",
		"9223372036854775808", "18446744073709551616", "9007199254740993.0", "2e-5")
	if !integer && g.chance(0.3) {
		return rawNumber(strconv.FormatFloat(g.rng.Float64(), 'f', -1, 64))
	}
	return rawNumber(edges[g.rng.IntN(len(edges))])
}

func (g *Generator) array(sch map[string]any, depth int) []any {
	minItems, maxItems := 0, 4
	if n, ok := sch["minItems"].(json.Number); ok {
		minItems, _ = strconv.Atoi(string(n))
	}
	if n, ok := sch["maxItems"].(json.Number); ok {
		maxItems, _ = strconv.Atoi(string(n))
	}
	var n int
	switch r := g.rng.IntN(8); {
	case r == 0 && minItems > 0:
		n = minItems - 1
	case r == 1:
		n = maxItems
	case r == 2:
		n = maxItems + 1
	default:
		n = minItems + g.rng.IntN(min(4, maxItems-minItems)+1)
	}
	items, _ := sch["items"].(map[string]any)
	out := make([]any, 0, n)
	for len(out) < n {
		switch {
		case items == nil || depth > 4:
			out = append(out, "x")
		case len(out) >= 4:
			// A long array repeats its first items, so that its length,
			// not one more wrong item, is what decides.
			out = append(out, out[len(out)%4])
		default:
			out = append(out, g.value(items, depth+1))
		}
	}
	return out
}

func (g *Generator) object(sch map[string]any, depth int) ordered {
	props, _ := sch["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	var required []string
	list, _ := sch["required"].([]any)
	for _, r := range list {
		required = append(required, r.(string))
	}
	var out ordered
	for _, name := range names {
		if slices.Contains(required, name) {
			if g.chance(0.05) {
				continue // missing
			}
		} else if !g.chance(0.4) {
			continue
		}
		out = append(out, member{name, g.value(props[name].(map[string]any), depth+1)})
	}
	if depth == 0 && g.chance(0.1) {
		out = append(out, member{[]string{"turn_id", "contract"}[g.rng.IntN(2)], g.value(map[string]any{"type": "string"}, depth+1)})
	}
	if g.chance(0.05) {
		out = append(out, member{"unknown_argument", "x"})
	}
	if len(names) > 0 && g.chance(0.03) {
		out = append(out, member{strings.ToUpper(names[g.rng.IntN(len(names))]), "x"})
	}
	g.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// encode writes v as JSON, object members in their order.
func (g *Generator) encode(v any) string {
	var b strings.Builder
	var enc func(v any)
	enc = func(v any) {
		switch v := v.(type) {
		case nil:
			b.WriteString("null")
		case bool:
			b.WriteString(strconv.FormatBool(v))
		case rawNumber:
			b.WriteString(string(v))
		case json.Number:
			b.WriteString(string(v))
		case string:
			q, _ := json.Marshal(v)
			b.Write(q)
		case []any:
			b.WriteByte('[')
			for i, x := range v {
				if i > 0 {
					b.WriteByte(',')
				}
				enc(x)
			}
			b.WriteByte(']')
		case ordered:
			b.WriteByte('{')
			for i, m := range v {
				if i > 0 {
					b.WriteByte(',')
				}
				enc(m.name)
				b.WriteByte(':')
				enc(m.value)
			}
			b.WriteByte('}')
		default:
			panic(fmt.Sprintf("encode %T", v))
		}
	}
	enc(v)
	return b.String()
}
