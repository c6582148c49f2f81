package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Limits of a message check passes on (see "Malformed input" in the
// package documentation).
const (
	// maxDepth bounds the nesting of a message, as the SDK's JSON decoder
	// does (internal/json.checkMaxDepth of go-sdk v1.8.0).
	maxDepth = 1000
	// maxIntegerID bounds the magnitude of a numeric id: 2^53-1, the largest
	// integer the SDK reads exactly (it decodes ids as float64).
	maxIntegerID = 1<<53 - 1
)

// Outcomes of check.
const (
	outcomePass   = iota // hand the line to the SDK
	outcomeAnswer        // answer it with verdict.reply
	outcomeDrop          // a response of the client that the SDK cannot read: drop it
)

// A verdict is check's decision on a line.
type verdict struct {
	outcome int
	call    bool            // pass: a request with an id, which the SDK will answer
	id      any             // pass: the id of the call (int64 or string)
	msg     jsonrpc.Message // pass: the message, as the SDK decodes it
	reply   []byte          // answer: the reply, without newline
	reason  string          // drop: why
}

// message holds the members of a JSON-RPC message object that check reads.
type message struct {
	jsonrpc, id, method, params, result, error json.RawMessage
	dup                                        string // a member named twice, if any
}

// check decides what becomes of one trimmed, non-empty line.
//
//   - Not JSON (a syntax error, a NaN, bytes after the value): -32700, id
//     null.
//   - A batch (an array): not supported in any protocol version. An empty
//     array is answered with one -32600, id null; otherwise the reply is an
//     array with one -32600 per element that is a call (with its id) or is
//     not a message (id null), or, when that leaves none, one -32600 with
//     id null. Nothing in the batch runs.
//   - Nesting deeper than maxDepth, not an object, no "jsonrpc":"2.0", a
//     member named twice, an id that is not a string or an integer of at
//     most 2^53-1 written without fraction or exponent, a "method" that is
//     not a string, "params" that are not an object or an array, or neither
//     "method" nor "result" nor "error": -32600, with the id when it is a
//     string or a number, else null.
//   - A response of the client ("result" or "error", no "method") is never
//     answered: passed on when the SDK can read it, else dropped.
//   - Anything else is passed on, if the SDK reads it as check does (the
//     same kind of message and the same id); else -32600.
func check(line []byte) verdict {
	if err := syntaxError(line); err != nil {
		return answerWith(nil, jsonrpc.CodeParseError, "Parse error: "+err.Error())
	}
	if line[0] == '[' {
		return checkBatch(line)
	}
	if line[0] != '{' {
		return answerWith(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: not a JSON-RPC message object")
	}
	m := readMessage(line)
	id := echoID(m.id)
	if m.dup == "id" {
		id = nil
	}
	if m.method == nil && (m.result != nil || m.error != nil) {
		return checkResponse(line, m)
	}
	if tooDeep(line) {
		return answerWith(id, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: nested deeper than %d levels", maxDepth))
	}
	if m.dup != "" {
		return answerWith(id, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: member %q appears more than once", m.dup))
	}
	if reason := checkVersion(m.jsonrpc); reason != "" {
		return answerWith(id, jsonrpc.CodeInvalidRequest, "Invalid Request: "+reason)
	}
	if m.id != nil {
		if reason := checkID(m.id); reason != "" {
			return answerWith(id, jsonrpc.CodeInvalidRequest, "Invalid Request: "+reason)
		}
	}
	if m.method == nil {
		return answerWith(id, jsonrpc.CodeInvalidRequest, `Invalid Request: no "method" (and not a response: no "result" or "error")`)
	}
	if m.method[0] != '"' {
		return answerWith(id, jsonrpc.CodeInvalidRequest, `Invalid Request: "method" must be a string`)
	}
	if m.params != nil && m.params[0] != '{' && m.params[0] != '[' && string(m.params) != "null" {
		return answerWith(id, jsonrpc.CodeInvalidRequest, `Invalid Request: "params" must be an object or an array`)
	}
	if req, ok := plainRequest(line, m); ok {
		if !req.ID.IsValid() {
			return verdict{outcome: outcomePass, msg: req}
		}
		return verdict{outcome: outcomePass, call: true, id: req.ID.Raw(), msg: req}
	}
	// The SDK must read the line as a request with the same id.
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return answerWith(id, jsonrpc.CodeInvalidRequest, "Invalid Request: "+err.Error())
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.ID.IsValid() != (m.id != nil) || req.ID.IsValid() && req.ID.Raw() != idValue(m.id) {
		return answerWith(id, jsonrpc.CodeInvalidRequest, "Invalid Request: the message cannot be read unambiguously")
	}
	if !req.ID.IsValid() {
		return verdict{outcome: outcomePass, msg: req}
	}
	return verdict{outcome: outcomePass, call: true, id: req.ID.Raw(), msg: req}
}

// plainRequest builds the request of a line that check has found to be a
// well-formed request, from the members it read, when the line is plain:
// valid UTF-8, a method name without escapes and params that are not
// null. For such a line it is the message jsonrpc.DecodeMessage returns
// (a test holds them equal), without the SDK decoder's two passes, each of
// which zeroes a 32 KiB buffer. For any other line it reports false, and
// check asks the SDK's decoder.
func plainRequest(line []byte, m message) (*jsonrpc.Request, bool) {
	if !utf8.Valid(line) || bytes.IndexByte(m.method, '\\') >= 0 || string(m.params) == "null" {
		return nil, false
	}
	// The params are copied: the line may be the reader's buffer.
	req := &jsonrpc.Request{Method: string(m.method[1 : len(m.method)-1]), Params: bytes.Clone(m.params)}
	if m.id != nil {
		var v any = idValue(m.id)
		if n, ok := v.(int64); ok {
			v = float64(n) // as the SDK's decoder reads a number; exact up to 2^53
		}
		id, err := jsonrpc.MakeID(v)
		if err != nil {
			return nil, false
		}
		req.ID = id
	}
	return req, true
}

// checkResponse decides on a response of the client: passed on when the
// SDK reads it as a response with a valid id, else dropped. A response is
// never answered: an error answer to an error response could start an
// endless exchange with a client that answers what it cannot read.
func checkResponse(line []byte, m message) verdict {
	if m.dup != "" {
		return verdict{outcome: outcomeDrop, reason: fmt.Sprintf("member %q appears more than once", m.dup)}
	}
	if reason := checkVersion(m.jsonrpc); reason != "" {
		return verdict{outcome: outcomeDrop, reason: reason}
	}
	if m.id == nil || checkID(m.id) != "" {
		return verdict{outcome: outcomeDrop, reason: "a response without a string or integer id"}
	}
	msg, err := jsonrpc.DecodeMessage(line)
	if err != nil {
		return verdict{outcome: outcomeDrop, reason: err.Error()}
	}
	if resp, ok := msg.(*jsonrpc.Response); !ok || resp.ID.Raw() != idValue(m.id) {
		return verdict{outcome: outcomeDrop, reason: "the message cannot be read unambiguously"}
	}
	return verdict{outcome: outcomePass, msg: msg}
}

// checkBatch answers a batch (see check).
func checkBatch(line []byte) verdict {
	var elems []json.RawMessage
	if err := json.Unmarshal(line, &elems); err != nil || len(elems) == 0 {
		return answerWith(nil, jsonrpc.CodeInvalidRequest, "Invalid Request: an empty batch")
	}
	const msg = "Invalid Request: batches are not supported; send one message per line"
	var replies []json.RawMessage
	for _, e := range elems {
		var id json.RawMessage
		if e[0] == '{' {
			m := readMessage(e)
			switch {
			case m.method == nil && (m.result != nil || m.error != nil):
				continue // a response: never answered
			case m.method != nil && m.id == nil:
				continue // a notification
			case m.dup != "id":
				id = echoID(m.id)
			}
		}
		replies = append(replies, errorReply(id, jsonrpc.CodeInvalidRequest, msg))
	}
	if len(replies) == 0 {
		return answerWith(nil, jsonrpc.CodeInvalidRequest, msg)
	}
	data, err := json.Marshal(replies)
	if err != nil { // cannot happen: every element is a reply built by errorReply
		return answerWith(nil, jsonrpc.CodeInvalidRequest, msg)
	}
	return verdict{outcome: outcomeAnswer, reply: data}
}

// checkVersion returns why a "jsonrpc" member is wrong, or "".
func checkVersion(raw json.RawMessage) string {
	if string(raw) == `"2.0"` {
		return ""
	}
	var v string
	if raw == nil || json.Unmarshal(raw, &v) != nil || v != "2.0" {
		return `"jsonrpc" must be "2.0"`
	}
	return ""
}

// checkID returns why an id is not one the SDK reads exactly, or "". MCP
// forbids null; the SDK reads a number as a float64 and converts it to an
// int64, so only integers of at most 2^53-1, written as such, keep their
// value.
func checkID(raw json.RawMessage) string {
	switch raw[0] {
	case '"':
		return ""
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n > maxIntegerID || n < -maxIntegerID {
			return fmt.Sprintf(`"id" must be a string or an integer of at most %d in magnitude, without fraction or exponent`, int64(maxIntegerID))
		}
		return ""
	}
	return `"id" must be a string or an integer (null is not allowed in MCP)`
}

// idValue is the value of a valid id as jsonrpc.ID.Raw gives it.
func idValue(raw json.RawMessage) any {
	if raw[0] == '"' {
		var s string
		json.Unmarshal(raw, &s)
		return s
	}
	n, _ := strconv.ParseInt(string(raw), 10, 64)
	return n
}

// idText is an id as it appears in a message.
func idText(id any) string {
	data, _ := json.Marshal(id)
	return string(data)
}

// echoID returns an id that may be sent back as it came: a string or a
// number. Other values (null, an object, an array, a boolean) cannot be,
// and give nil (null).
func echoID(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return nil
	}
	switch raw[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return raw
	}
	return nil
}

// readMessage reads the members of a valid JSON object that check looks
// at. Names are compared exactly, after unescaping, as the SDK does. The
// values are slices of obj.
func readMessage(obj []byte) message {
	var m message
	members(obj, func(name, raw []byte) bool {
		key := name
		if bytes.IndexByte(name, '\\') >= 0 {
			quoted := make([]byte, 0, len(name)+2)
			quoted = append(append(append(quoted, '"'), name...), '"')
			var s string
			if json.Unmarshal(quoted, &s) != nil {
				return true
			}
			key = []byte(s)
		}
		var slot *json.RawMessage
		switch string(key) {
		case "jsonrpc":
			slot = &m.jsonrpc
		case "id":
			slot = &m.id
		case "method":
			slot = &m.method
		case "params":
			slot = &m.params
		case "result":
			slot = &m.result
		case "error":
			slot = &m.error
		default:
			return true
		}
		if *slot != nil && m.dup == "" {
			m.dup = string(key)
		}
		*slot = raw
		return true
	})
	return m
}

// prefixID returns the id of a message from the start of its line, when a
// top-level "id" member with a string or number value comes before the
// line is cut off or goes wrong; else nil.
func prefixID(prefix []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	depth := 1
	key := true // at depth 1, the next token is a member name
	for {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		if depth == 1 && key {
			if t == json.Delim('}') {
				return nil
			}
			if t == "id" {
				off := dec.InputOffset()
				v, err := dec.Token()
				if err != nil {
					return nil
				}
				switch v.(type) {
				case float64:
					if dec.InputOffset() >= int64(len(prefix)) {
						return nil // the number may go on past the cut
					}
				case string:
				default:
					return nil
				}
				return echoID(bytes.TrimLeft(prefix[off:dec.InputOffset()], " \t\r\n:"))
			}
			key = false
			continue
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 1 {
			key = true // a value at depth 1 ended
		}
	}
}

// syntaxError reports whether line is one JSON value and nothing else, as
// the SDK's decoder requires, and why not.
func syntaxError(line []byte) error {
	if json.Valid(line) {
		return nil
	}
	var raw json.RawMessage
	err := json.Unmarshal(line, &raw)
	if err == nil {
		err = errors.New("not a JSON value")
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%v (at byte %d)", se, se.Offset)
	}
	return err
}

// tooDeep reports whether a valid JSON text nests deeper than maxDepth,
// counted as the SDK counts it.
func tooDeep(data []byte) bool {
	depth := 0
	inString, escaped := false, false
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > maxDepth {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
}

// answerWith is a verdict that answers with an error reply.
func answerWith(id json.RawMessage, code int64, msg string) verdict {
	return verdict{outcome: outcomeAnswer, reply: errorReply(id, code, msg)}
}

// errorReply is a JSON-RPC error response; a nil id is null.
func errorReply(id json.RawMessage, code int64, msg string) []byte {
	type wireError struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	}
	data, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   wireError       `json:"error"`
	}{"2.0", id, wireError{code, msg}})
	if err != nil { // cannot happen: id is a valid JSON string or number, or nil
		panic("mcpserver: encoding an error reply: " + err.Error())
	}
	return data
}
