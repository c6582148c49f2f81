package crux

import "github.com/crux-go/crux/toolkit"

// Error is a protocol-level failure of a call: a JSON-RPC error with one of
// the codes below, a message, and optional structured data. CallTool and
// the MCP transports return it unchanged. A bad argument is a
// CodeInvalidParams error whose message reads "<tool>: <argument>: <reason>"
// and whose Data is a *ParamError {param, reason}.
//
// An Error wrapping an internal failure unwraps to it, so errors.Is works
// (for example with context.Canceled); a bad argument's Error unwraps to
// its *ParamError, so errors.As finds it.
type Error = toolkit.Error

// ParamError is the argument a CodeInvalidParams [Error] rejects, and why:
// its Data, and what it unwraps to.
type ParamError = toolkit.ParamError

// The JSON-RPC error codes crux returns.
const (
	CodeParseError       = toolkit.CodeParseError       // -32700: the request is not valid JSON
	CodeInvalidRequest   = toolkit.CodeInvalidRequest   // -32600: not a valid JSON-RPC request
	CodeMethodNotFound   = toolkit.CodeMethodNotFound   // -32601: unknown method or tool, or a tool switched off
	CodeInvalidParams    = toolkit.CodeInvalidParams    // -32602: an argument is missing, malformed or unknown
	CodeInternalError    = toolkit.CodeInternalError    // -32603: a failure inside crux; nothing was stored
	CodeCapabilityDenied = toolkit.CodeCapabilityDenied // -32030: refused by a capability check or a guard
	CodeForbidden        = toolkit.CodeForbidden        // -32003: the caller lacks the standing the tool requires
	CodeConflict         = toolkit.CodeConflict         // -32004: the call conflicts with stored state
)
