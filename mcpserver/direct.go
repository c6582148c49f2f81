package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/codec"
)

// The direct path of a StdioTransport served by Serve: the framer answers
// the common tools/call itself instead of handing it to the SDK. Through
// the SDK a call goes from the framer's pump to the SDK's reader, its
// handler queue, a handler goroutine and the writer, and its result is
// encoded three times (the SDK's CallToolResult.MarshalJSON, which
// re-encodes the structured content, then the JSON-RPC response, which
// compacts the whole result again). On the direct path the pump's
// goroutine runs the call through the adapter (as the SDK's handler does,
// see adapter.run) and writes the response line, encoded once from crux's
// result, under the framer's write lock, while another goroutine goes on
// reading the input (see pumpFrom). Calls still run concurrently, and a
// slow one does not hold up reading.
//
// A tools/call takes the direct path only when the SDK would run it
// through the adapter and send what the adapter returns, unchanged:
//
//   - the session has been initialized (the SDK refuses any other call
//     before initialize);
//   - its params are an object with a "name" that is a string without
//     escapes, and at most "arguments" (an object) and "_meta" (an object)
//     besides, each once;
//   - its _meta does not name protocol version 2026-07-28 or later: the
//     SDK validates such a request's _meta (clientInfo and
//     clientCapabilities) and adds its serverInfo to the result's _meta.
//
// A tools/list takes the direct path when the session has been
// initialized and its params are absent or an empty object: the SDK would
// only pass it to the adapter's middleware. Its answer is the adapter's
// cached listing (see listCache), encoded as the SDK's JSON-RPC layer
// encodes a result.
//
// Every other request goes to the SDK, as does every other method. The
// answer is the SDK's byte for byte (a test sends the same requests down
// both paths): the response to a result the SDK cannot encode is the one
// exception, where the SDK sends nothing and the direct path a -32603.
//
// A direct call counts as a pending call of the framer, as a call handed
// to the SDK does, so the end of the input waits for its answer; it runs
// with the context Serve gives the SDK, which shutting down does not
// cancel; a notifications/cancelled naming its id cancels it (and is still
// handed to the SDK, which cancels nothing then), and so does a failed
// write of the output, as the SDK does with its calls.

// newProtocolVersion is the first protocol version whose requests carry
// their version in _meta (the SDK's protocolVersion20260728).
const newProtocolVersion = "2026-07-28"

// directPath is what the direct path needs: the context calls run in,
// the adapter that runs them and the SDK's session, which knows whether
// the client has initialized it and with which version.
type directPath struct {
	ctx     context.Context
	a       *adapter
	session *mcp.ServerSession
}

// toolCall is a tools/call the direct path takes.
type toolCall struct {
	name    string
	args    json.RawMessage
	version string // the protocol version in _meta, "" if none
}

// callDirect returns the call that answers req, a call with id whose id
// is pending, on the direct path, if it may take it (see above); else nil.
// The call must be run.
func (f *framer) callDirect(id any, req *jsonrpc.Request) func() {
	d := f.direct.Load()
	if d == nil || req.Method != "tools/call" && req.Method != "tools/list" {
		return nil
	}
	p := d.session.InitializeParams()
	if p == nil {
		return nil
	}
	if req.Method == "tools/list" {
		if !noParams(req.Params) {
			return nil
		}
		ctx, cancel := context.WithCancel(d.ctx)
		f.mu.Lock()
		f.calls[id] = cancel
		f.directed++
		f.mu.Unlock()
		f.wg.Add(1)
		return func() { f.runList(ctx, cancel, d.a, id) }
	}
	c, ok := parseToolCall(req.Params)
	if !ok {
		return nil
	}
	if c.version == "" {
		c.version = p.ProtocolVersion
	}
	ctx, cancel := context.WithCancel(d.ctx)
	f.mu.Lock()
	f.calls[id] = cancel
	f.directed++
	f.mu.Unlock()
	f.wg.Add(1)
	return func() { f.runDirect(ctx, cancel, d.a, id, c) }
}

// runDirect runs one direct call and writes its response.
func (f *framer) runDirect(ctx context.Context, cancel context.CancelFunc, a *adapter, id any, c toolCall) {
	defer f.wg.Done()
	defer cancel()
	res, err := a.run(ctx, c.name, c.args, c.version)
	lb := lineBufs.Get().(*lineBuf)
	line := lb.response(a, id, c.name, res, err)
	f.mu.Lock()
	delete(f.calls, id)
	f.mu.Unlock()
	f.replied(id)
	f.writeLine(line)
	lb.put()
}

// runList answers one tools/list on the direct path: the caller's list as
// of the request, from the adapter's cache (see listCache), or the error
// the SDK would send.
func (f *framer) runList(ctx context.Context, cancel context.CancelFunc, a *adapter, id any) {
	defer f.wg.Done()
	defer cancel()
	lb := lineBufs.Get().(*lineBuf)
	var line []byte
	list, err := a.b.ListTools(ctx, a.caller)
	if err == nil {
		var raw []byte
		if raw, err = a.lists.encoded(list); err == nil {
			line = lb.rawResultLine(id, raw)
		} else {
			a.logger.Error("crux: tools/list result not encodable", "err", err)
			line = lb.errorLine(id, crux.CodeInternalError, "tools/list: the result cannot be encoded: "+err.Error(), nil)
		}
	} else {
		line = lb.response(a, id, "tools/list", nil, a.wireError("tools/list", err))
	}
	f.mu.Lock()
	delete(f.calls, id)
	f.mu.Unlock()
	f.replied(id)
	f.writeLine(line)
	lb.put()
}

// noParams reports whether the params of a request are absent or an
// empty object: a tools/list the direct path may take. A list with a
// cursor or a _meta goes to the SDK, which reads them.
func noParams(params json.RawMessage) bool {
	if len(params) == 0 {
		return true
	}
	if params[0] != '{' {
		return false
	}
	empty := true
	members(params, func(_, _ []byte) bool {
		empty = false
		return false
	})
	return empty
}

// cancelDirect cancels the direct call a notifications/cancelled names, if
// there is one. The request is read as the SDK's canceller reads it, which
// cancels nothing when the params cannot be decoded.
func (f *framer) cancelDirect(req *jsonrpc.Request) {
	if req.Method != "notifications/cancelled" {
		return
	}
	f.mu.Lock()
	n := len(f.calls)
	f.mu.Unlock()
	if n == 0 {
		return
	}
	id, ok := cancelTarget(req.Params)
	if !ok {
		return
	}
	f.mu.Lock()
	cancel := f.calls[id]
	f.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// cancelAllDirect cancels every direct call in flight: the output failed,
// so their answers cannot be written.
func (f *framer) cancelAllDirect() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, cancel := range f.calls {
		cancel()
	}
}

// parseToolCall reads the params of a tools/call the direct path may take
// (see above); false means the SDK answers the call.
func parseToolCall(params json.RawMessage) (toolCall, bool) {
	var c toolCall
	if len(params) == 0 || params[0] != '{' {
		return c, false
	}
	ok := true
	seen := 0
	members(params, func(name, v []byte) bool {
		bit := 0
		switch string(name) {
		case "name":
			if v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 || !utf8.Valid(v) {
				ok = false
				return false
			}
			c.name, bit = string(v[1:len(v)-1]), 1
		case "arguments":
			if v[0] != '{' {
				ok = false
				return false
			}
			c.args, bit = json.RawMessage(v), 2
		case "_meta":
			var meta map[string]any
			if v[0] != '{' || json.Unmarshal(v, &meta) != nil {
				ok = false
				return false
			}
			if pv, isString := meta[mcp.MetaKeyProtocolVersion].(string); isString {
				if pv >= newProtocolVersion {
					ok = false
					return false
				}
				c.version = pv
			}
			bit = 4
		default:
			ok = false
			return false
		}
		if seen&bit != 0 {
			ok = false
			return false
		}
		seen |= bit
		return true
	})
	return c, ok && seen&1 != 0
}

// cancelTarget is the id a notifications/cancelled names, as the SDK's
// canceller reads it (into mcp.CancelledParams, member names matched
// exactly, then jsonrpc.MakeID): false when it names none or the SDK
// could not decode the params.
func cancelTarget(params json.RawMessage) (any, bool) {
	if len(params) == 0 || params[0] != '{' {
		return nil, false
	}
	var id any
	ok := true
	members(params, func(name, v []byte) bool {
		switch string(name) {
		case "requestId":
			switch {
			case v[0] == '"':
				id = idValue(v) // params are valid JSON: the string decodes
			case v[0] == '-' || v[0] >= '0' && v[0] <= '9':
				n, err := strconv.ParseFloat(string(v), 64)
				if err != nil {
					ok = false
				}
				id = int64(n) // as jsonrpc.MakeID converts it
			case string(v) == "null":
				id = nil
			default:
				ok = false
			}
		case "reason":
			ok = v[0] == '"' || string(v) == "null"
		case "_meta":
			ok = v[0] == '{' || string(v) == "null"
		}
		return ok
	})
	return id, ok && id != nil
}

// members calls fn with the name (as written, without its quotes) and the
// value of each member of obj, a valid JSON object, in order, until fn
// returns false.
func members(obj []byte, fn func(name, value []byte) bool) {
	i := skipSpace(obj, 1)
	for i < len(obj) && obj[i] == '"' {
		end := stringEnd(obj, i)
		name := obj[i+1 : end-1]
		i = skipSpace(obj, end) // at ':'
		i = skipSpace(obj, i+1) // at the value
		vend := valueEnd(obj, i)
		if !fn(name, obj[i:vend]) {
			return
		}
		i = skipSpace(obj, vend)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
}

// skipSpace returns the index of the first byte of b from i on that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string starting at b[i].
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd returns the index just past the valid JSON value starting at
// b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i // a number, true, false or null
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\r' && b[j] != '\n' {
		j++
	}
	return j
}

// A lineBuf is the buffer of a response line, reused across calls.
type lineBuf struct{ b []byte }

// lineBufs holds the lineBufs of the direct path.
var lineBufs = sync.Pool{New: func() any { return new(lineBuf) }}

// maxLineBuf is the largest buffer a lineBuf keeps for reuse.
const maxLineBuf = 1 << 20

// put returns lb to lineBufs, unless it has grown large.
func (lb *lineBuf) put() {
	if cap(lb.b) <= maxLineBuf {
		lineBufs.Put(lb)
	}
}

// response is the line, newline included, that answers the call id to the
// tool name with what adapter.run returned: the line the SDK sends for the
// same outcome. It is valid until lb is used again.
func (lb *lineBuf) response(a *adapter, id any, name string, res *crux.Result, err error) []byte {
	if err != nil {
		var mnf *methodNotFound
		if errors.As(err, &mnf) {
			// The SDK sends the code and the message, without data (see
			// wireError).
			return lb.errorLine(id, mnf.we.Code, mnf.Error(), nil)
		}
		var we *jsonrpc.Error
		if errors.As(err, &we) { // always so: run returns wireError's errors
			return lb.errorLine(id, we.Code, we.Message, we.Data)
		}
		return lb.errorLine(id, crux.CodeInternalError, err.Error(), nil)
	}
	line, err := lb.resultLine(id, res)
	if err != nil {
		// The SDK would send no answer at all; the client gets one.
		a.logger.Error("crux: tool result not encodable", "tool", name, "err", err)
		return lb.errorLine(id, crux.CodeInternalError, name+": the result cannot be encoded: "+err.Error(), nil)
	}
	return line
}

// resultLine is the response line of a result, as the SDK writes the
// mcp.CallToolResult that sdkResult makes of res: _meta when not empty,
// content (text items), structuredContent when not nil, isError when
// true, each encoded as encoding/json does.
func (lb *lineBuf) resultLine(id any, res *crux.Result) ([]byte, error) {
	b := appendHead(lb.b[:0], id)
	b = append(b, `"result":{`...)
	if res == nil {
		res = &crux.Result{}
	}
	var err error
	if len(res.Meta) > 0 {
		b = append(b, `"_meta":`...)
		if b, err = codec.AppendMarshal(b, res.Meta); err != nil {
			return nil, err
		}
		b = append(b, ',')
	}
	b = append(b, `"content":[`...)
	for i, c := range res.Content {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"text","text":`...)
		b = codec.AppendString(b, c.Text)
		b = append(b, '}')
	}
	b = append(b, ']')
	if js, ok := res.StructuredJSON(); ok {
		b = append(append(b, `,"structuredContent":`...), js...)
	} else if res.StructuredContent != nil {
		b = append(b, `,"structuredContent":`...)
		if b, err = codec.AppendMarshal(b, res.StructuredContent); err != nil {
			return nil, err
		}
	}
	if res.IsError {
		b = append(b, `,"isError":true`...)
	}
	b = append(b, "}}\n"...)
	lb.b = b
	return b, nil
}

// rawResultLine is the line of the response to the call id whose result
// is raw, JSON as the SDK's encoder writes it.
func (lb *lineBuf) rawResultLine(id any, raw []byte) []byte {
	b := appendHead(lb.b[:0], id)
	b = append(b, `"result":`...)
	b = append(b, raw...)
	b = append(b, "}\n"...)
	lb.b = b
	return b
}

// errorLine is the line of a JSON-RPC error response, as the SDK's
// encoder writes it (the message without HTML escaping; data as given,
// compact JSON, left out when nil).
func (lb *lineBuf) errorLine(id any, code int64, msg string, data json.RawMessage) []byte {
	b := appendHead(lb.b[:0], id)
	b = append(b, `"error":{"code":`...)
	b = strconv.AppendInt(b, code, 10)
	b = append(b, `,"message":`...)
	b = append(b, codec.Must(codec.MarshalNoEscape(msg))...)
	if len(data) > 0 {
		b = append(b, `,"data":`...)
		b = append(b, data...)
	}
	b = append(b, "}}\n"...)
	lb.b = b
	return b
}

// appendHead appends the start of a response to the call id (int64 or
// string), up to its result or error member.
func appendHead(b []byte, id any) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	switch id := id.(type) {
	case int64:
		b = strconv.AppendInt(b, id, 10)
	case string:
		b = append(b, codec.Must(codec.MarshalNoEscape(id))...)
	}
	return append(b, ',')
}
