package toolkit

import (
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// The arguments of a call are checked against the tool's JSON Schema, the
// contract, on the tree they were decoded into once. The schema library
// (santhosh-tekuri/jsonschema) validates in general and explains failures;
// a check compiled from the same schema decides, much faster and without
// allocating, whether the arguments pass. Only when the check says they do
// not is the library run, and its verdict and explanation are the answer:
// a rejected call gets exactly the library's -32602, and the check cannot
// refuse what the library accepts. That the check accepts nothing the
// library refuses is what TestCheckMatchesSchema proves, over a table and
// over arguments generated at random from every tool's schema.
//
// The check knows the keywords crux's schemas use (type, enum and const of
// strings, format, pattern, minLength, maxLength, minimum, maximum, items,
// minItems, maxItems, properties, required, additionalProperties as a
// boolean, oneOf) and ignores the annotations (description, title,
// default). A schema using any other keyword gets no check: its calls are
// validated by the library alone.

// jsonKind is a bit per JSON Schema type name.
type jsonKind uint8

const (
	kindNull jsonKind = 1 << iota
	kindBoolean
	kindInteger
	kindNumber // a number, integral or not
	kindString
	kindArray
	kindObject
)

var jsonKinds = map[string]jsonKind{
	"null": kindNull, "boolean": kindBoolean, "integer": kindInteger, "number": kindNumber,
	"string": kindString, "array": kindArray, "object": kindObject,
}

// check is one schema, compiled for checkArgs.valid.
type check struct {
	kinds    jsonKind // the types allowed; 0: any
	enum     []string // allowed values, all strings; nil: any
	konst    *string  // the one allowed value, a string; nil: any
	format   func(any) bool
	pattern  *regexp.Regexp
	minLen   int // in characters; -1: none
	maxLen   int
	minimum  *bound
	maximum  *bound
	items    *check
	minItems int // -1: none
	maxItems int
	props    map[string]*check
	required []string
	closed   bool // additionalProperties: false
	oneOf    []*check
}

// bound is a minimum or maximum: exactly, and as the nearest float64.
type bound struct {
	exact *big.Rat
	f     float64
}

// annotations are the keywords the check ignores: they do not constrain.
// Keywords starting with "x-" (crux's own annotations) are ignored too.
var annotations = map[string]bool{"description": true, "title": true, "default": true, "examples": true, "$comment": true}

// compileCheck compiles a schema document (decoded with UseNumber) into a
// check, or fails on a keyword the check does not know.
func compileCheck(doc any) (*check, error) {
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("schema %v is not an object", doc)
	}
	c := &check{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1}
	var err error
	for kw, v := range m {
		switch kw {
		case "type":
			err = c.compileType(v)
		case "enum":
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				return nil, fmt.Errorf("enum %v", v)
			}
			for _, x := range list {
				s, ok := x.(string)
				if !ok {
					return nil, fmt.Errorf("enum of a non-string %v", x)
				}
				c.enum = append(c.enum, s)
			}
		case "const":
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("const of a non-string %v", v)
			}
			c.konst = &s
		case "format":
			name, _ := v.(string)
			if c.format = jsonschema.Formats[name]; c.format == nil {
				return nil, fmt.Errorf("format %v", v)
			}
		case "pattern":
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("pattern %v", v)
			}
			if c.pattern, err = regexp.Compile(s); err != nil {
				return nil, err
			}
		case "minLength":
			c.minLen, err = count(v)
		case "maxLength":
			c.maxLen, err = count(v)
		case "minItems":
			c.minItems, err = count(v)
		case "maxItems":
			c.maxItems, err = count(v)
		case "minimum":
			c.minimum, err = newBound(v)
		case "maximum":
			c.maximum, err = newBound(v)
		case "items":
			c.items, err = compileCheck(v)
		case "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("properties %v", v)
			}
			c.props = make(map[string]*check, len(props))
			for name, p := range props {
				if c.props[name], err = compileCheck(p); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
			}
		case "required":
			list, ok := v.([]any)
			if !ok {
				return nil, fmt.Errorf("required %v", v)
			}
			for _, x := range list {
				s, ok := x.(string)
				if !ok {
					return nil, fmt.Errorf("required %v", v)
				}
				c.required = append(c.required, s)
			}
		case "additionalProperties":
			allowed, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("additionalProperties %v is not a boolean", v)
			}
			c.closed = !allowed
		case "oneOf":
			list, ok := v.([]any)
			if !ok || len(list) == 0 {
				return nil, fmt.Errorf("oneOf %v", v)
			}
			for _, x := range list {
				sub, err := compileCheck(x)
				if err != nil {
					return nil, err
				}
				c.oneOf = append(c.oneOf, sub)
			}
		default:
			if !annotations[kw] && !strings.HasPrefix(kw, "x-") {
				return nil, fmt.Errorf("keyword %q", kw)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", kw, err)
		}
	}
	return c, nil
}

func (c *check) compileType(v any) error {
	var names []any
	switch v := v.(type) {
	case string:
		names = []any{v}
	case []any:
		names = v
	}
	if len(names) == 0 {
		return fmt.Errorf("type %v", v)
	}
	for _, n := range names {
		s, _ := n.(string)
		k, ok := jsonKinds[s]
		if !ok {
			return fmt.Errorf("type %v", v)
		}
		c.kinds |= k
	}
	return nil
}

// count reads a non-negative integer keyword.
func count(v any) (int, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%v is not a number", v)
	}
	i, err := strconv.Atoi(string(n))
	if err != nil || i < 0 {
		return 0, fmt.Errorf("%v is not a count", v)
	}
	return i, nil
}

func newBound(v any) (*bound, error) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, fmt.Errorf("%v is not a number", v)
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return nil, fmt.Errorf("%v is not a number", v)
	}
	f, _ := r.Float64()
	return &bound{exact: r, f: f}, nil
}

// cmp compares the number n with b: -1, 0 or +1. The float64 of n settles
// it unless it equals b's (rounding keeps the order of unequal values);
// then n is compared exactly.
func (b *bound) cmp(n json.Number) int {
	f, err := strconv.ParseFloat(string(n), 64)
	if err == nil && f != b.f {
		if f < b.f {
			return -1
		}
		return 1
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return 1 // not a number: cannot happen on decoded input; fail safe
	}
	return r.Cmp(b.exact)
}

// isInteger reports whether the number n is integral, as JSON Schema
// counts it (5.0 is).
func isInteger(n json.Number) bool {
	if !strings.ContainsAny(string(n), ".eE") {
		return true
	}
	r, ok := new(big.Rat).SetString(string(n))
	return ok && r.IsInt()
}

// valid reports whether v, a value decoded by encoding/json with
// UseNumber, passes c.
func (c *check) valid(v any) bool {
	if c.kinds != 0 && !c.kindOK(v) {
		return false
	}
	if c.konst != nil {
		if s, ok := v.(string); !ok || s != *c.konst {
			return false
		}
	}
	if c.enum != nil {
		if s, ok := v.(string); !ok || !slices.Contains(c.enum, s) {
			return false
		}
	}
	if c.format != nil && !c.format(v) {
		return false
	}
	switch v := v.(type) {
	case string:
		if c.minLen >= 0 || c.maxLen >= 0 {
			n := utf8.RuneCountInString(v)
			if c.minLen >= 0 && n < c.minLen || c.maxLen >= 0 && n > c.maxLen {
				return false
			}
		}
		if c.pattern != nil && !c.pattern.MatchString(v) {
			return false
		}
	case json.Number:
		if c.minimum != nil && c.minimum.cmp(v) < 0 || c.maximum != nil && c.maximum.cmp(v) > 0 {
			return false
		}
	case []any:
		if c.minItems >= 0 && len(v) < c.minItems || c.maxItems >= 0 && len(v) > c.maxItems {
			return false
		}
		if c.items != nil {
			for _, x := range v {
				if !c.items.valid(x) {
					return false
				}
			}
		}
	case map[string]any:
		for _, name := range c.required {
			if _, ok := v[name]; !ok {
				return false
			}
		}
		for name, x := range v {
			p, ok := c.props[name]
			if !ok {
				if c.closed {
					return false
				}
				continue
			}
			if !p.valid(x) {
				return false
			}
		}
	}
	if c.oneOf != nil {
		matched := 0
		for _, sub := range c.oneOf {
			if sub.valid(v) {
				matched++
			}
		}
		if matched != 1 {
			return false
		}
	}
	return true
}

// kindOK reports whether v has one of the types of c.
func (c *check) kindOK(v any) bool {
	var k jsonKind
	switch v := v.(type) {
	case nil:
		k = kindNull
	case bool:
		k = kindBoolean
	case string:
		k = kindString
	case []any:
		k = kindArray
	case map[string]any:
		k = kindObject
	case json.Number:
		if c.kinds&kindNumber != 0 {
			return true
		}
		return c.kinds&kindInteger != 0 && isInteger(v)
	default:
		return false
	}
	return c.kinds&k != 0
}
