package toolkit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Limits on arguments, checked before a handler runs.
const (
	// MaxArgumentBytes caps the JSON arguments of one call.
	MaxArgumentBytes = 4 << 20
	// MaxValueBytes caps any single string value in the arguments.
	MaxValueBytes = 1 << 20
	// MaxDepth caps how deeply objects and arrays nest in the arguments;
	// the arguments object itself is level 1.
	MaxDepth = 64
	// MaxNumberChars caps how long a number in the arguments is written;
	// its value must also be within the range of a float64.
	MaxNumberChars = 64
)

// commonArguments are accepted by every tool in addition to its own:
// turn_id (an opaque per-host turn identifier) and contract (an output
// contract name). Tools that do not use them ignore them.
var commonArguments = []string{"turn_id", "contract"}

// Set is a compiled list of tools, ready to run calls. It is immutable and
// safe for concurrent use.
type Set struct {
	tools  []*Tool
	byName map[string]int
	schema []*jsonschema.Schema
	// output holds each tool's output schema (see outputSchema), derived
	// on first use: deriving them all takes about 10 ms, which a server
	// that is never asked for its list does not pay.
	outputOnce sync.Once
	output     []json.RawMessage
	// check holds each schema compiled for checkArguments' fast path
	// (see check.go); nil for a schema it cannot compile.
	check []*check
}

var toolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// NewSet checks the tools (unique valid names, a description, an object
// schema, an output type that is a JSON object) and compiles their
// schemas; a tool without a Schema gets the one derived from its argument
// type.
func NewSet(ts []*Tool) (*Set, error) {
	s := &Set{tools: ts, byName: make(map[string]int, len(ts))}
	for i, t := range ts {
		if !toolName.MatchString(t.Name) {
			return nil, fmt.Errorf("toolkit: invalid tool name %q", t.Name)
		}
		if _, dup := s.byName[t.Name]; dup {
			return nil, fmt.Errorf("toolkit: duplicate tool %q", t.Name)
		}
		if strings.TrimSpace(t.Description) == "" || t.Run.call == nil {
			return nil, fmt.Errorf("toolkit: %s: missing description or handler", t.Name)
		}
		if len(t.Schema) == 0 {
			schema, err := InputSchemaOf(t.Run.args)
			if err != nil {
				return nil, fmt.Errorf("toolkit: %s: %w", t.Name, err)
			}
			t.Schema = schema
		}
		sch, chk, err := compileSchema(t)
		if err != nil {
			return nil, fmt.Errorf("toolkit: %s: %w", t.Name, err)
		}
		if err := checkOutputTypes(t); err != nil {
			return nil, fmt.Errorf("toolkit: %s: %w", t.Name, err)
		}
		s.byName[t.Name] = i
		s.schema = append(s.schema, sch)
		s.check = append(s.check, chk)
	}
	return s, nil
}

// compileSchema compiles t's schema, with the common arguments added to the
// properties it accepts: for the schema library, and as the fast check of
// check.go (nil when the schema uses a keyword the check does not know).
func compileSchema(t *Tool) (*jsonschema.Schema, *check, error) {
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(t.Schema))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, nil, fmt.Errorf("schema: %w", err)
	}
	if doc["type"] != "object" {
		return nil, nil, errors.New(`schema: type must be "object"`)
	}
	props, ok := doc["properties"].(map[string]any)
	if !ok {
		return nil, nil, errors.New("schema: properties must be an object")
	}
	for _, name := range commonArguments {
		if _, ok := props[name]; !ok {
			props[name] = map[string]any{"type": "string"}
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, err
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	url := "crux:///tools/" + t.Name + ".json"
	if err := c.AddResource(url, bytes.NewReader(b)); err != nil {
		return nil, nil, err
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, nil, err
	}
	chk, err := compileCheck(doc)
	if err != nil {
		chk = nil // the library alone validates this tool's arguments
	}
	return sch, chk, nil
}

// Tools returns the tools in order.
func (s *Set) Tools() []*Tool { return s.tools }

// Lookup returns the tool called name.
func (s *Set) Lookup(name string) (*Tool, bool) {
	i, ok := s.byName[name]
	if !ok {
		return nil, false
	}
	return s.tools[i], true
}

// arguments are a call's arguments once checkArguments has passed them:
// the JSON text, and the tree it was decoded into, once.
type arguments struct {
	// raw is the text as given, trimmed; "{}" when none was given.
	raw json.RawMessage
	// doc is raw decoded with UseNumber, whole numbers written with a
	// fraction or an exponent rewritten as integers (see integral).
	doc map[string]any
	// rewritten reports whether integral rewrote a number of doc, so that
	// raw no longer says what doc does.
	rewritten bool
}

// text returns the arguments as JSON text that says what doc does: raw,
// or doc marshalled again when a whole number was rewritten (JSON Schema
// counts 5.0 as an integer; Go's decoder does not, so 5.0 is said as 5 for
// what the schema accepts to decode).
func (a *arguments) text() (json.RawMessage, error) {
	if !a.rewritten {
		return a.raw, nil
	}
	return json.Marshal(a.doc)
}

// Arguments checks args against the named tool's schema and decodes them
// as a call to the tool does before its handler runs, without running
// it: the answer is a pointer to a new value of the tool's ArgumentType,
// or the error the call would get (-32602 naming the argument, -32601 for
// a tool the set does not hold).
func (s *Set) Arguments(name string, args json.RawMessage) (any, error) {
	i, ok := s.byName[name]
	if !ok {
		return nil, &Error{Code: CodeMethodNotFound, Message: "unknown tool: " + name}
	}
	t := s.tools[i]
	a, err := checkArguments(t.Name, s.schema[i], s.check[i], args)
	if err != nil {
		return nil, err
	}
	if t.Run.decode == nil { // a tool built with New takes the JSON text
		text, err := a.text()
		return &text, err
	}
	return t.Run.decode(a)
}

// checkArguments applies the size and encoding limits and the schema, on
// the arguments decoded once. The compiled check chk (nil for none) decides
// quickly whether they pass; if it says they do not, or there is none, the
// schema library decides and explains (see check.go).
func checkArguments(tool string, sch *jsonschema.Schema, chk *check, args json.RawMessage) (*arguments, error) {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = json.RawMessage("{}")
	}
	if len(args) > MaxArgumentBytes {
		return nil, InvalidParams(tool, "arguments", fmt.Sprintf("larger than %d bytes", MaxArgumentBytes))
	}
	if nesting(args) > MaxDepth {
		return nil, InvalidParams(tool, "arguments", fmt.Sprintf("nested deeper than %d levels", MaxDepth))
	}
	doc, ok := decodeFlat(args)
	if !ok {
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil || doc == nil || dec.InputOffset() != int64(len(args)) {
			return nil, InvalidParams(tool, "arguments", "must be a JSON object")
		}
	}
	if !utf8.Valid(args) || LoneSurrogate(args) {
		var props map[string]json.RawMessage
		_ = json.Unmarshal(args, &props)
		return nil, InvalidParams(tool, badTextPath(props), "is not valid UTF-8")
	}
	if path, reason := checkValues(doc, ""); path != "" {
		return nil, InvalidParams(tool, path, reason)
	}
	a := &arguments{raw: args, doc: doc, rewritten: integral(doc)}
	if chk != nil && chk.valid(doc) {
		return a, nil
	}
	if err := sch.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			param, reason := explain(ve)
			return nil, InvalidParams(tool, param, reason)
		}
		return nil, InvalidParams(tool, "arguments", err.Error())
	}
	return a, nil
}

// nesting returns how deeply objects and arrays nest in the JSON text b
// (0 for a scalar), counting brackets outside strings; it does not need b
// to be valid.
func nesting(b []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// checkValues walks the decoded arguments for oversized strings and for
// numbers too long or out of range (the schema
// validator would spend seconds on a number of a million digits, and fail
// on one whose exponent is in the millions). It returns the path of the
// first bad value and why.
func checkValues(v any, path string) (string, string) {
	switch v := v.(type) {
	case json.Number:
		if len(v) > MaxNumberChars {
			return path, fmt.Sprintf("a number longer than %d characters", MaxNumberChars)
		}
		if !float64Range(string(v)) {
			return path, "a number out of range"
		}
	case string:
		if len(v) > MaxValueBytes {
			return path, fmt.Sprintf("longer than %d bytes", MaxValueBytes)
		}
	case map[string]any:
		for k, x := range v {
			if p, r := checkValues(x, join(path, k)); p != "" {
				return p, r
			}
		}
	case []any:
		for i, x := range v {
			if p, r := checkValues(x, join(path, strconv.Itoa(i))); p != "" {
				return p, r
			}
		}
	}
	return "", ""
}

// loneSurrogate reports whether the JSON text b holds a \u escape of a
// UTF-16 surrogate that is not half of a pair (a high surrogate directly
// followed by the escape of a low one). Such an escape stands for no
// character: JSON decoding turns it into U+FFFD, silently changing the
// text, so crux refuses it as it refuses invalid UTF-8 bytes. Outside
// strings valid JSON has no backslash, so b is scanned as a whole.
func LoneSurrogate(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		r, ok := escapedRune(b, i)
		if !ok {
			i++ // a one-character escape such as \" or \\
			continue
		}
		i += 5
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return true // a low surrogate with no high one before it
		case r >= 0xD800 && r <= 0xDBFF:
			lo, ok := escapedRune(b, i+1)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
	}
	return false
}

// escapedRune decodes the \uXXXX escape at b[i:], if there is one.
func escapedRune(b []byte, i int) (rune, bool) {
	if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16)
	return rune(n), err == nil
}

// badTextPath names the argument that holds invalid UTF-8 bytes or an
// unpaired surrogate escape: the path of the offending string (a value or
// an object key) when it can be told apart from a genuine U+FFFD, else the
// top-level argument, else "arguments".
func badTextPath(props map[string]json.RawMessage) string {
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		raw := props[name]
		if utf8.Valid(raw) && !LoneSurrogate(raw) {
			continue
		}
		if bytes.Contains(raw, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(raw), []byte(`\ufffd`)) {
			return name // a genuine U+FFFD too: the replaced one cannot be told apart
		}
		var v any
		if json.Unmarshal(raw, &v) == nil {
			if p := replacedText(v, name); p != "" {
				return p
			}
		}
		return name
	}
	for _, name := range names {
		if strings.ContainsRune(name, utf8.RuneError) {
			return name // the name itself: decoding replaced what was wrong in it
		}
	}
	return "arguments"
}

// replacedText returns the path of the first string in v, an object key or
// a value, holding U+FFFD (object keys in sorted order).
func replacedText(v any, path string) string {
	switch v := v.(type) {
	case string:
		if strings.ContainsRune(v, utf8.RuneError) {
			return path
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if strings.ContainsRune(k, utf8.RuneError) {
				return join(path, k)
			}
			if p := replacedText(v[k], join(path, k)); p != "" {
				return p
			}
		}
	case []any:
		for i, x := range v {
			if p := replacedText(x, join(path, strconv.Itoa(i))); p != "" {
				return p
			}
		}
	}
	return ""
}

// float64Range reports whether the JSON number n is within the range of a
// float64: finite, and not so small that it rounds to zero unless it is
// zero.
func float64Range(n string) bool {
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return false
	}
	if f == 0 {
		mantissa, _, _ := strings.Cut(strings.ToLower(n), "e")
		return strings.Trim(mantissa, "-0.") == ""
	}
	return true
}

// integral rewrites, in place, every number in v written with a fraction or
// an exponent whose value is a whole number of at most 2^53 (5.0, 1e3) as
// that integer. It reports whether it rewrote any.
func integral(v any) bool {
	changed := false
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if n, ok := wholeNumber(x); ok {
				v[k], changed = n, true
			} else if integral(x) {
				changed = true
			}
		}
	case []any:
		for i, x := range v {
			if n, ok := wholeNumber(x); ok {
				v[i], changed = n, true
			} else if integral(x) {
				changed = true
			}
		}
	}
	return changed
}

func wholeNumber(x any) (json.Number, bool) {
	n, ok := x.(json.Number)
	if !ok || !strings.ContainsAny(string(n), ".eE") {
		return "", false
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return "", false
	}
	return json.Number(strconv.FormatInt(int64(f), 10)), true
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// explain turns a schema validation error into an argument path and a
// reason a model can act on, such as ("top_k", "must be an integer").
func explain(ve *jsonschema.ValidationError) (param, reason string) {
	leaf := ve
	for len(leaf.Causes) > 0 {
		leaf = leaf.Causes[0]
	}
	param = strings.ReplaceAll(strings.TrimPrefix(leaf.InstanceLocation, "/"), "/", ".")
	msg := leaf.Message
	kw := leaf.KeywordLocation[strings.LastIndexByte(leaf.KeywordLocation, '/')+1:]
	switch kw {
	case "required":
		// missing properties: 'a', 'b'
		return join(param, firstQuoted(msg)), "is required"
	case "additionalProperties":
		return join(param, firstQuoted(msg)), "unknown argument"
	case "type":
		// expected integer, but got string
		want := strings.TrimPrefix(strings.SplitN(msg, ",", 2)[0], "expected ")
		var parts []string
		for _, t := range strings.Split(want, " or ") {
			parts = append(parts, describeJSONType(t))
		}
		reason = "must be " + strings.Join(parts, " or ")
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
		// must be >= 0 but found -1; the limit may print as 3.1536e+07
		reason = strings.SplitN(msg, " but found", 2)[0]
		if i := strings.LastIndexByte(reason, ' '); i >= 0 {
			if f, err := strconv.ParseFloat(reason[i+1:], 64); err == nil {
				reason = reason[:i+1] + strconv.FormatFloat(f, 'f', -1, 64)
			}
		}
	case "minLength":
		if strings.HasPrefix(msg, "length must be >= 1,") {
			reason = "must not be empty"
		} else {
			reason = strings.SplitN(msg, ",", 2)[0]
		}
	case "maxLength":
		// length must be <= 255, but got 256 (a length in characters)
		reason = "longer than " + firstNumber(msg) + " characters"
	case "maxItems":
		// maximum 256 items required, but found 257 items
		reason = "more than " + firstNumber(msg) + " items"
	case "minItems":
		reason = strings.SplitN(msg, ", but", 2)[0]
	case "format":
		reason = "must be a valid " + strings.Trim(msg[strings.LastIndexByte(msg, ' ')+1:], "'")
	default:
		reason = msg
	}
	if param == "" {
		param = "arguments"
	}
	return param, reason
}

// firstNumber returns the first run of digits in s.
func firstNumber(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r >= '0' && r <= '9' })
	if i < 0 {
		return s
	}
	j := strings.IndexFunc(s[i:], func(r rune) bool { return r < '0' || r > '9' })
	if j < 0 {
		return s[i:]
	}
	return s[i : i+j]
}

func firstQuoted(s string) string {
	i := strings.IndexByte(s, '\'')
	if i < 0 {
		return s
	}
	j := strings.IndexByte(s[i+1:], '\'')
	if j < 0 {
		return s[i+1:]
	}
	return s[i+1 : i+1+j]
}

func describeJSONType(t string) string {
	switch t {
	case "integer", "object", "array":
		return "an " + t
	case "null":
		return "null"
	}
	return "a " + t
}

func describeGoType(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"):
		return "an integer in range"
	case strings.HasPrefix(kind, "float"):
		return "a number"
	}
	return "a valid " + kind
}
