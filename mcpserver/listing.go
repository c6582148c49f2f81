package mcpserver

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crux-go/crux"
)

// An agent reads tools/list on every turn, so the list crux sends over MCP
// says once what [crux.Server.ListTools] repeats on every tool:
//
//   - The capability token that filtered the list (_meta.crux.filtered_by,
//     token_ref, receipt_class and tier on each tool, and the same as
//     x-crux-token-ref, x-crux-receipt-class and x-crux-tier in each input
//     schema) is stated in the _meta.crux of the tools/list result, and
//     left out of the tools. A tool whose token keys differ from the
//     others' (no crux server lists such tools) keeps its own.
//   - Each tool's outputSchema is {"type":"object"}: every structuredContent
//     crux sends is a JSON object, and the names and JSON types of its
//     properties are served by get_bootstrap (topic tool-output) and
//     declared in full by crux.Server.ListTools for a program that
//     embeds crux.
//   - No input schema says "additionalProperties": false at its top level:
//     crux refuses an unknown argument of any tool (-32602 naming it, only
//     turn_id and contract are accepted everywhere), which the server
//     instructions say once.
//   - No tool has a title: a title is for display only, and a client
//     without one shows the tool's name. crux.Server.ListTools keeps them.
//   - A read-only tool carries no destructiveHint, which MCP defines only
//     for tools that are not read-only.

// tokenKeys are the keys of a tool's _meta.crux that describe the
// capability token, and schemaTokenKeys the input schema keys that repeat
// them.
var (
	tokenKeys       = []string{"filtered_by", "token_ref", "receipt_class", "tier"}
	schemaTokenKeys = []string{"x-crux-token-ref", "x-crux-receipt-class", "x-crux-tier"}
)

// compactOutputSchema is the outputSchema of every tool over MCP.
var compactOutputSchema = json.RawMessage(`{"type":"object"}`)

// A listCache holds the tools/list result an adapter last answered and the
// crux list it was made of. Its caller's list is asked of the Backend at
// every tools/list (a token's filtering and the dynamic tool surface
// apply as they change); when it is the list of the last answer, tool for
// tool, the answer is made again from the tools that answer held rather
// than converted anew. The answer is a function of the list alone, so it
// is what listResult would make, byte for byte; and since an adapter
// serves one caller through one Backend, no caller is ever answered with
// another's list.
//
// A shared cache trusts the slices its Backend returns never to change
// (Local's are crux.Server.ListToolsShared's): a list that is the very
// slice of the last answer (the same first element and length) is that
// list, and is not compared tool for tool.
type listCache struct {
	mu     sync.Mutex
	shared bool        // the Backend's lists are never modified, by anyone
	src    []crux.Tool // with shared, the slice the Backend returned last
	list   []crux.Tool // a copy of the slice the Backend returned
	tools  []*mcp.Tool // listResult(list).Tools
	meta   mcp.Meta    // listResult(list).Meta
	raw    []byte      // the result as the SDK encodes it, once the direct path has asked
}

// result is the tools/list result for list, from the cache when list is
// the list it holds.
func (lc *listCache) result(list []crux.Tool) *mcp.ListToolsResult {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.update(list)
	// A result of its own for every request: the SDK writes into a
	// result's _meta (serverInfo, for the newest protocol versions) and
	// its result type, so neither the result nor its _meta map is shared.
	// The tools are only read.
	return &mcp.ListToolsResult{Tools: slices.Clone(lc.tools), Meta: maps.Clone(lc.meta)}
}

// encoded is the tools/list result for list encoded as the SDK's JSON-RPC
// layer encodes a result (encoding/json without HTML escaping), from the
// cache when list is the list it holds. It is shared: the caller must not
// modify it.
func (lc *listCache) encoded(list []crux.Tool) ([]byte, error) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	lc.update(list)
	if lc.raw == nil {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(&mcp.ListToolsResult{Tools: lc.tools, Meta: maps.Clone(lc.meta)}); err != nil {
			return nil, err
		}
		lc.raw = bytes.TrimRight(buf.Bytes(), "\n")
	}
	return lc.raw, nil
}

// update makes the cache hold list, converting it unless it holds it
// already. lc.mu must be held.
func (lc *listCache) update(list []crux.Tool) {
	if lc.tools != nil && lc.shared && sameSlice(list, lc.src) {
		return
	}
	if lc.tools == nil || !sameTools(list, lc.list) {
		res := listResult(list)
		lc.list, lc.tools, lc.meta, lc.raw = slices.Clone(list), res.Tools, res.Meta, nil
	}
	if lc.shared {
		lc.src = list
	}
}

// sameSlice reports whether a and b are one slice: not empty, the same
// length, the same first element.
func sameSlice(a, b []crux.Tool) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}

// sameTools reports whether a and b list the same tools alike, each field
// equal.
func sameTools(a, b []crux.Tool) bool {
	return slices.EqualFunc(a, b, func(x, y crux.Tool) bool {
		return x.Name == y.Name && x.Description == y.Description &&
			bytes.Equal(x.InputSchema, y.InputSchema) && bytes.Equal(x.OutputSchema, y.OutputSchema) &&
			x.Annotations == y.Annotations && sameValue(x.Meta, y.Meta)
	})
}

// sameValue reports whether a and b are deeply equal, as reflect.DeepEqual
// does, taking the maps and strings of a tool's _meta without reflection.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case map[string]string:
		y, ok := b.(map[string]string)
		return ok && (x == nil) == (y == nil) && maps.Equal(x, y)
	}
	return reflect.DeepEqual(a, b)
}

// listResult is the tools/list result for list: the tools in its order,
// with what they all share stated once (see above).
func listResult(list []crux.Tool) *mcp.ListToolsResult {
	res := &mcp.ListToolsResult{Tools: make([]*mcp.Tool, 0, len(list))}
	shared := sharedToken(list)
	if shared != nil {
		res.Meta = mcp.Meta{"crux": shared}
	}
	for _, t := range list {
		if shared != nil {
			t = withoutToken(t)
		}
		t.InputSchema = dropKeys(t.InputSchema, closed)
		res.Tools = append(res.Tools, sdkTool(t))
	}
	return res
}

// tokenOf is the token part of t's _meta.crux, or nil without one.
func tokenOf(t crux.Tool) map[string]any {
	meta, _ := t.Meta["crux"].(map[string]any)
	out := map[string]any{}
	for _, k := range tokenKeys {
		if v, ok := meta[k]; ok {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// sharedToken is the token part of _meta.crux that every tool of list
// carries alike, or nil when there is none or the tools disagree.
func sharedToken(list []crux.Tool) map[string]any {
	if len(list) == 0 {
		return nil
	}
	first := tokenOf(list[0])
	if first == nil {
		return nil
	}
	want, err := json.Marshal(first)
	if err != nil {
		return nil
	}
	for _, t := range list[1:] {
		got, err := json.Marshal(tokenOf(t))
		if err != nil || !bytes.Equal(got, want) {
			return nil
		}
	}
	return first
}

// withoutToken is t without the token keys of its _meta.crux and input
// schema. It leaves t's maps and schema as they were.
func withoutToken(t crux.Tool) crux.Tool {
	meta, _ := t.Meta["crux"].(map[string]any)
	rest := maps.Clone(meta)
	for _, k := range tokenKeys {
		delete(rest, k)
	}
	t.Meta = maps.Clone(t.Meta)
	if len(rest) > 0 {
		t.Meta["crux"] = rest
	} else {
		delete(t.Meta, "crux")
	}
	if len(t.Meta) == 0 {
		t.Meta = nil
	}
	t.InputSchema = dropKeys(t.InputSchema, func(k string, _ json.RawMessage) bool {
		return slices.Contains(schemaTokenKeys, k)
	})
	return t
}

// closed reports whether a schema key and value are "additionalProperties":
// false.
func closed(k string, v json.RawMessage) bool {
	return k == "additionalProperties" && string(bytes.TrimSpace(v)) == "false"
}

// dropKeys is the JSON object schema without the top-level keys that drop
// reports, the others in their order. A schema that is not an object is
// returned as it is.
func dropKeys(schema json.RawMessage, drop func(key string, v json.RawMessage) bool) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(schema))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return schema
	}
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return schema
		}
		key, ok := tok.(string)
		var v json.RawMessage
		if !ok || dec.Decode(&v) != nil {
			return schema
		}
		if drop(key, v) {
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		kb, _ := json.Marshal(key)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}
