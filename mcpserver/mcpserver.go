// Package mcpserver serves a [crux.Server] to MCP clients through the
// official MCP Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// [New] returns an *mcp.Server whose tools are the crux tools a caller may
// see, in crux's catalogue order. The adapter adds nothing of its own to a
// call: crux checks the arguments, runs the tool and shapes the result, and
// the SDK carries it.
//
//	db, err := bolt.Open(filepath.Join(dir, "crux.db"), nil)
//	...
//	srv, err := crux.NewServer(db, nil)
//	...
//	err = mcpserver.ServeStdio(ctx, srv, crux.Caller{Agent: "planner", Authenticated: true})
//
// # How calls map to MCP
//
// tools/list and tools/call are answered from crux directly, so the SDK
// neither validates the arguments nor touches the result: the descriptions,
// input schemas, annotations and _meta of [crux.Server.ListTools] are
// served in its order, and tools/call hands the raw arguments to
// [crux.Server.CallTool]. Because an agent reads tools/list on every turn,
// the list says once what every tool repeats: the capability token that
// filtered it is in the result's _meta.crux rather than in each tool's
// _meta and input schema, every outputSchema is {"type":"object"} (the
// properties of each tool's answer are served by get_bootstrap, topic
// tool-output), no tool has a title (the name is what a client shows
// instead) and a read-only tool has no destructiveHint.
//
// The two error channels of crux keep their meaning on the wire, except
// for bad arguments, whose channel depends on the protocol version:
//
//   - A [crux.Result] becomes the tools/call result: its text content,
//     structuredContent, isError and _meta.
//   - A [*crux.Error] becomes a JSON-RPC error response with the same code,
//     message and data: -32601 for an unknown tool, -32030 for a call the
//     capability token refuses (its data holds the reason code and the
//     signed refusal receipt), -32603 for an internal failure.
//   - A bad argument, the *crux.Error of code -32602 whose message names
//     the argument and whose data is {"param", "reason"}, is a tool
//     execution error from protocol version 2025-11-25 on, as that
//     version asks of input validation failures, so that the model reads
//     the message and corrects its call (a client library may turn a
//     JSON-RPC error into an exception the model never sees). The answer
//     is a tools/call result with isError true, one text item holding the
//     message, and structuredContent
//     {"error": {"code": -32602, "message": ..., "data": {"param", "reason"}}}.
//     A request of an older version (2024-11-05, 2025-03-26, 2025-06-18)
//     gets the JSON-RPC error -32602 with that message and data. The
//     version is the one a 2026-07-28 or later request names in its _meta,
//     else the one its session negotiated. A tools/call without a tool
//     name is a malformed request, not a bad argument: -32602 whatever the
//     version.
//
// In-process, [crux.Server.CallTool] returns the *crux.Error whatever the
// version, and so does a [Backend].
//
// An unknown tool is answered by crux with -32601, where the SDK on its own
// would answer -32602. An error of code -32601 reaches the client with its
// code and message but without data: the SDK's JSON-RPC layer would
// otherwise replace it with its own "method not found" error, and the way
// around that cannot carry data (crux attaches none to -32601).
//
// # Callers
//
// The server returned by New serves every session as the one caller it was
// built for. That suits stdio, where the process is started for one agent.
// Over Streamable HTTP, [NewHTTPHandler] (and [ServeHTTP], which runs it
// with a graceful shutdown) maps each request's bearer token to its caller
// through a [Tokens] table and builds one server and one SDK handler per
// caller, so that each caller's tools/list and sessions are its own; it
// also checks Host and Origin against DNS rebinding. See [HTTPHandler].
//
// The HTTP handler also serves crux sync to other replicas when its
// Backend is a [SyncBackend] (Local is): POST /v1/sync/identity,
// /v1/sync/changes and /v1/sync/push, the server side of package
// syncremote, with the same Host, Origin and token checks as the MCP
// endpoint.
//
// A transport says which it is in the caller's Transport (stdio or http,
// and for HTTP the endpoint and what it asks of a request), which
// route_access_matrix reports; the crux command sets it.
//
// # Malformed input
//
// [StdioTransport] reads one JSON-RPC message per line and checks every
// line before the SDK sees it. The SDK's own transport ends the session,
// without an answer, at the first line it cannot take; a StdioTransport
// answers such a line itself and goes on serving. The answer is a JSON-RPC
// error response on the output, as one line:
//
//   - -32700 (parse error), id null: a line that is not one JSON value and
//     nothing else, such as `{bad json`, a NaN or Infinity literal, a NUL or
//     a second value after the first, a line cut off by the end of the
//     input, or nesting deeper than 10,000 levels (the limit of Go's JSON
//     decoder).
//   - -32600 (invalid request), with the id when it is a string or a number
//     (sent back as it came), else null: a value that is not an object; no
//     "jsonrpc":"2.0"; an id that is null (MCP forbids it), an object, an
//     array or a boolean, or a number that is not an integer of at most
//     2^53-1 in magnitude written without fraction or exponent (the SDK
//     reads ids as float64 and would reply with another id); a "method"
//     that is not a string; "params" that are not an object or an array;
//     neither "method" nor "result" nor "error"; a member named twice;
//     nesting deeper than 1000 levels.
//   - -32600 with the id, if it appears in the first 16 MiB: a line longer
//     than 16 MiB (16,777,216 bytes, not counting the newline). Only its
//     first 16 MiB are held; the rest is read and discarded.
//   - -32600, id null: a call whose id is that of a call still in flight
//     (an answer carrying the id would be taken for the first call's; the
//     SDK would send none).
//   - Batches (a JSON array) are not supported, whatever the protocol
//     version. MCP 2025-06-18 and later have none; earlier versions allowed
//     them, but the SDK ends the session at one bad element. Nothing in a
//     batch runs. The answer is an array holding one -32600 per call in it
//     (with its id) and per element that is not a message (id null);
//     notifications and responses in it get none. An empty array, or one
//     that leaves no such element, gets a single -32600 with id null.
//
// A response of the client ("result" or "error" and no "method") is never
// answered, since an error answer to an unreadable error response could
// start an endless exchange: it is passed on when the SDK can read it
// (with a string or integer id and a well-formed error) and dropped
// otherwise. Blank lines are skipped; a carriage return before the newline
// is allowed. Everything else is passed on, and only if the SDK decodes it
// as the same kind of message with the same id. Each answered or dropped
// line is logged at level WARN to [Options.Logger] by [Serve]. The SDK's
// replies and these answers share the output: each is written whole, with
// one Write of the output, and never interleaves with another.
//
// # Tool calls over stdio
//
// [Serve] over a [StdioTransport] answers a tools/call without the SDK
// when the SDK would only pass it to crux and send back what crux answers:
// the session has been initialized, the params hold a "name" string and
// at most an "arguments" object and a "_meta" object besides, and _meta
// does not name protocol version 2026-07-28 or later (the SDK checks such
// a request's _meta and adds its own serverInfo to the result). The
// transport runs the call and writes its response, encoded once from
// crux's result, where the SDK would hand the call through three
// goroutines and encode the result three times. The response is the one
// the SDK sends, byte for byte, the errors and their mapping by protocol
// version included; the one exception is a result that cannot be encoded
// as JSON, to which the SDK sends no response and the transport a -32603
// error. Such calls run concurrently, as the SDK's do; a
// notifications/cancelled naming one cancels its context, and shutting
// down waits for it as for any other call.
//
// A tools/list without params (or with empty ones) on an initialized
// session is answered the same way: the caller's list is asked of crux at
// each request, and when it is the list of the session's last answer the
// encoded answer is sent again (see "Listing" below). Every other request
// goes to the SDK.
//
// # Listing
//
// A tools/list asks [Backend.ListTools] for the caller's list every time,
// so a token's filtering and the dynamic surface apply as they change. The
// conversion of that list to the answer (the token stated once, the
// compact schemas) and, over stdio, its encoding are kept per server, for
// its one caller, and made again whenever the list differs, tool for tool,
// from the one they were made of: the answer is a function of the list,
// so it is the same, byte for byte, as one made afresh. Over [Local], the
// list is crux.Server.ListToolsShared's, which the crux server keeps built
// for every caller that sees the same tools (at most crux.MaxListings
// lists): a tools/list whose caller sees what it saw at the last one costs
// the server's decision of what it sees and a lookup.
//
// # Shutting down
//
// [Serve] over a [StdioTransport] ends in one of two ways, and in both it
// answers every call it has read:
//
//   - The input ends (the client closes it): no more is read, and once
//     every call read has been answered, Serve returns nil.
//   - ctx is done (for the crux command, SIGINT or SIGTERM): no more is
//     read. Lines already read are still checked and handed on; a line not
//     complete yet is not taken, and neither is whatever a read already in
//     progress returns later (it is abandoned, and may leave a goroutine
//     blocked in it until the input is closed). Every call handed on runs
//     to the end and its reply is written; then Serve returns ctx.Err().
//
// A call that never finishes therefore holds the shutdown (the crux
// command exits at once on a second signal). If a write to the output
// fails, replies can no longer be delivered, and Serve stops without
// waiting for them.
//
// The SDK on its own drops those replies: once its reader has reported the
// end of the input, or once the session is closed because the context of
// Server.Run is done, its JSON-RPC connection refuses every write, and
// calls still running finish without their replies. A StdioTransport
// therefore reports the end of the input to the SDK only when no call is
// unanswered, and Serve runs the SDK with a context that is never done,
// stopping the transport instead. [New] followed by Server.Run keeps the
// SDK's behaviour when its context ends.
//
// # Standard input and the Go runtime
//
// [ServeStdio] and the crux command serve through [StdioTransport], which
// keeps a runtime timer pending when a read of standard input begins and
// while a request is being answered. It works around a race in the Go
// runtime (runtime/proc.go of Go 1.26.8; 1.27.3 has the same code) that can
// hold a reply for up to a minute. crux serve met it twice in about 888,000
// one-at-a-time calls:
//
//  1. reentersyscall checks sched.gcwaiting before it switches the
//     goroutine to _Gsyscall.
//  2. stopTheWorldWithSema sets sched.gcwaiting, then looks once for Ps
//     whose goroutine is in _Gsyscall (setBlockOnExitSyscall). Its wait
//     loop afterwards only calls preemptall, and preemptone skips a
//     goroutine in _Gsyscall.
//  3. A goroutine that enters read(2) on standard input between those two
//     steps is seen by neither side: it blocks in read holding its P, and
//     the stop-the-world (a request handler starting a GC) waits for that P.
//  4. sysmon, which would retake the P (retake), sleeps while
//     sched.gcwaiting is set until the next timer is due, and at most
//     forcegcperiod/2: 60 s.
//
// The reply then comes when the client sends another line, or after up to
// 60 s. A pending timer bounds sysmon's sleep; timers cannot run while the
// world is stopping, so once the timer is due sysmon stops sleeping and
// retakes the P, and the stop completes within about the timer's 10 ms
// period. The timer is a time.AfterFunc: it is in the runtime's timer heap
// as soon as it is set, which a channel timer is not until a goroutine
// blocks on its channel.
//
// The timer is armed when a read of the input begins, before the read's
// system call. While input has arrived that no output has followed, it is
// re-armed every 10 ms, for at most 100 ms after the latest read began. A
// reply stops it, unless a read began less than 100 µs before (that read
// may not have reached its system call). So a server that has answered every
// request runs no timer, and one answering calls back to back keeps
// pushing the same timer back.
//
// The other workaround, reading standard input through the runtime's
// network poller so that no thread blocks in read(2), removes the stalls as
// well, with similar latency. It was not chosen because it needs a
// non-blocking file description: setting O_NONBLOCK on standard input
// changes a description shared with the processes that started the server
// (a shell's terminal, a client's pipe), and reopening /proc/self/fd/0 gives
// a description of its own only for a pipe, only on Linux (a socket cannot
// be reopened so). The timer works for every kind of input on every system
// and changes no file flags.
//
// Measured with bench/stdio-stall/run.sh, which builds the servers with
// runtime/proc.go patched (through go build -overlay) to widen the race
// window and drives one-at-a-time store_fact calls at GOGC=10, counting a
// reply slower than a second as a stall. Without the workaround: 9 to 46
// stalls per 2,000 to 3,000 calls (one left alone replied after 60.0 s).
// With it: no stall in 10,000 calls, for the benchmark's server and for
// crux serve, the slowest reply 25 to 89 ms. Through the poller: no stall in
// 10,000 calls, the slowest reply 89 to 213 ms. Idle for 60 s after its
// last reply, crux serve made 3 to 18 context switches (all threads)
// without the workaround and 2 to 12 with it, in eight runs each.
//
// The workaround can go when the runtime no longer has the race (when
// reentersyscall checks sched.gcwaiting after its switch to _Gsyscall, or
// stopTheWorldWithSema looks for syscalling Ps again while it waits):
// the framing layer of StdioTransport then reads the input and writes the
// output directly. run.sh shows whether a runtime still stalls, as long as
// its patch applies.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crux-go/crux"
)

// DefaultName is the implementation name a server reports when
// [Options.Name] is empty.
const DefaultName = "crux"

// modulePath is the path of the crux module, used to find its version in the
// build information.
const modulePath = "github.com/crux-go/crux"

// Options configures [New]. A nil *Options means all defaults.
type Options struct {
	// Name is the implementation name reported to clients in the initialize
	// handshake. Empty means DefaultName.
	Name string
	// Version is the implementation version reported to clients. Empty
	// means the version of the crux module in the binary's build
	// information, or "(devel)" when there is none.
	Version string
	// Instructions are the instructions sent to clients in the
	// initialize result, the guidance that applies to every tool. Empty
	// means crux.Instructions().
	Instructions string
	// Logger receives the SDK's reports of session activity and the
	// adapter's own. Nil discards them. It must not write to the stream a
	// stdio transport uses for the protocol.
	Logger *slog.Logger
}

// Backend answers tools/list and tools/call on behalf of a caller. [Local]
// makes one of a *crux.Server; the crux command uses another, which
// forwards the calls to the process owning its data directory.
type Backend interface {
	// ListTools returns the tools c sees, as crux.Server.ListTools does.
	// An error fails the tools/list request: an *crux.Error with its
	// code, any other with -32603. The list is the caller's: the backend
	// must not modify it afterwards, since the server keeps the last one
	// to compare the next with (see "Listing" in the package
	// documentation).
	ListTools(ctx context.Context, c crux.Caller) ([]crux.Tool, error)
	// CallTool runs one call, as crux.Server.CallTool does.
	CallTool(ctx context.Context, c crux.Caller, name string, args json.RawMessage) (*crux.Result, error)
}

// Local returns the Backend of srv: its own ListTools and CallTool. Its
// lists are srv.ListToolsShared's, which the server only reads: a
// tools/list of the same tools as the last is answered without building or
// comparing them again.
func Local(srv *crux.Server) Backend { return local{srv} }

// local is the Backend of a *crux.Server.
type local struct{ srv *crux.Server }

func (l local) ListTools(ctx context.Context, c crux.Caller) ([]crux.Tool, error) {
	return l.srv.ListToolsShared(ctx, c), nil
}

func (l local) CallTool(ctx context.Context, c crux.Caller, name string, args json.RawMessage) (*crux.Result, error) {
	return l.srv.CallTool(ctx, c, name, args)
}

// adapter holds what the handlers of one *mcp.Server share.
type adapter struct {
	b      Backend
	caller crux.Caller
	logger *slog.Logger
	lists  listCache // tools/list answers of caller
}

// New returns an MCP server that serves the tools of srv to caller:
// tools/list answers srv.ListTools(ctx, caller) at each request (so a
// capability token's filtering and the dynamic tool surface apply as they
// change), and tools/call runs srv.CallTool on behalf of caller for any
// name, listed or not. See the package documentation for how results and
// errors are mapped. The server does not announce list changes; a client
// sees a changed list when it lists again.
func New(srv *crux.Server, caller crux.Caller, opts *Options) *mcp.Server {
	if srv == nil {
		panic("mcpserver: New needs a crux server")
	}
	return NewBackend(Local(srv), caller, opts)
}

// NewBackend is [New] over any Backend: tools/list answers
// b.ListTools(ctx, caller) and tools/call runs b.CallTool.
func NewBackend(b Backend, caller crux.Caller, opts *Options) *mcp.Server {
	s, _ := newServer(b, caller, opts)
	return s
}

// newServer is NewBackend, and the adapter whose handlers the server runs.
func newServer(b Backend, caller crux.Caller, opts *Options) (*mcp.Server, *adapter) {
	if b == nil {
		panic("mcpserver: NewBackend needs a backend")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Version == "" {
		o.Version = moduleVersion()
	}
	if o.Instructions == "" {
		o.Instructions = crux.Instructions()
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}

	s := mcp.NewServer(&mcp.Implementation{Name: o.Name, Version: o.Version}, &mcp.ServerOptions{
		Instructions: o.Instructions,
		Logger:       logger,
		// Only tools. A non-nil Capabilities also drops the SDK's default
		// "logging" capability, which crux does not use.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: false}},
	})
	a := &adapter{b: b, caller: caller, logger: logger}
	_, a.lists.shared = b.(local)
	s.AddReceivingMiddleware(a.middleware)
	return s, a
}

// Serve runs an MCP server for srv and caller (see [New]) over t until the
// client disconnects or ctx is done. It returns nil when the client closes
// the connection and ctx.Err() when ctx ends the session, after in-flight
// calls have finished.
//
// Over a [StdioTransport], every call read before the end of the input or
// of ctx is answered before Serve returns (see "Shutting down" in the
// package documentation), the lines the framing layer answers are logged
// to [Options.Logger], and most tools/call requests are answered by the
// transport without the SDK (see "Tool calls over stdio"). Over other
// transports, the SDK's session ends when ctx is done, and replies to
// calls still running are lost.
func Serve(ctx context.Context, srv *crux.Server, caller crux.Caller, t mcp.Transport, opts *Options) error {
	if srv == nil {
		panic("mcpserver: Serve needs a crux server")
	}
	return ServeBackend(ctx, Local(srv), caller, t, opts)
}

// ServeBackend is [Serve] over any Backend (see [NewBackend]).
func ServeBackend(ctx context.Context, b Backend, caller crux.Caller, t mcp.Transport, opts *Options) error {
	s, a := newServer(b, caller, opts)
	if st, ok := t.(*stdioTransport); ok {
		if opts != nil {
			st.f.setLogger(opts.Logger)
		}
		return st.serve(ctx, s, a)
	}
	return s.Run(ctx, t)
}

// ServeStdio serves srv to caller over standard input and output (see
// [Serve]), as an MCP client expects from a server it starts as a
// subprocess, through [StdioTransport]. Nothing else may write to standard
// output meanwhile.
func ServeStdio(ctx context.Context, srv *crux.Server, caller crux.Caller) error {
	return Serve(ctx, srv, caller, StdioTransport(os.Stdin, os.Stdout), nil)
}

// sdkTool converts a crux tool to the SDK's description of it: the input
// schema passed through as raw JSON, the compact output schema, no title
// and no destructiveHint on a read-only tool (see listResult).
func sdkTool(t crux.Tool) *mcp.Tool {
	ann := &mcp.ToolAnnotations{
		ReadOnlyHint:   t.Annotations.ReadOnlyHint,
		IdempotentHint: t.Annotations.IdempotentHint,
		OpenWorldHint:  &t.Annotations.OpenWorldHint,
	}
	if !t.Annotations.ReadOnlyHint {
		ann.DestructiveHint = &t.Annotations.DestructiveHint
	}
	return &mcp.Tool{
		OutputSchema: compactOutputSchema,
		Name:         t.Name,
		Description:  t.Description,
		InputSchema:  t.InputSchema,
		Annotations:  ann,
		Meta:         mcp.Meta(t.Meta),
	}
}

// call runs one tool call through crux and converts the outcome. An error
// it returns is the JSON-RPC error of the response (see wireError), except
// that a bad argument is a tool error result for a request of protocol
// version 2025-11-25 or later (see argumentError).
func (a *adapter) call(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	res, err := a.run(ctx, req.Params.Name, req.Params.Arguments, requestVersion(req))
	if err != nil {
		return nil, err
	}
	return sdkResult(res), nil
}

// run runs one tool call through crux for a request of protocol version
// version and returns its result, or the error to send as the JSON-RPC
// error of the response (see wireError); a bad argument is a tool error
// result from version 2025-11-25 on (see argumentError). Both the SDK's
// path (call) and the framer's direct path answer with what it returns.
func (a *adapter) run(ctx context.Context, name string, args json.RawMessage, version string) (*crux.Result, error) {
	res, err := a.b.CallTool(ctx, a.caller, name, args)
	if err != nil {
		if r := a.argumentError(name, err, version); r != nil {
			return r, nil
		}
		return nil, a.wireError(name, err)
	}
	return res, nil
}

// toolErrorVersion is the first protocol version in which a bad argument
// is a tool execution error (an isError result the model reads) rather
// than a JSON-RPC error.
const toolErrorVersion = "2025-11-25"

// requestVersion is the protocol version a tools/call request speaks: the
// version in its _meta (a sessionless request of 2026-07-28 or later
// carries one), else the version its session negotiated, else "" (none
// known, which maps errors as the oldest version does).
func requestVersion(req *mcp.CallToolRequest) string {
	if v, ok := req.Params.Meta[mcp.MetaKeyProtocolVersion].(string); ok && v != "" {
		return v
	}
	if req.Session != nil {
		if p := req.Session.InitializeParams(); p != nil {
			return p.ProtocolVersion
		}
	}
	return ""
}

// argumentError returns the tool error result that stands for err when err
// is a bad argument (a *crux.Error of code -32602) and version is
// toolErrorVersion or later; else nil, and err stays a JSON-RPC error.
// Protocol versions are dates, so they compare as strings.
//
// The result's one text item is the error's message; its
// structuredContent is {"error": {"code", "message", "data"}}, the
// JSON-RPC error object an older session gets, data included.
func (a *adapter) argumentError(name string, err error, version string) *crux.Result {
	var ce *crux.Error
	if version < toolErrorVersion || !errors.As(err, &ce) || ce.Code != crux.CodeInvalidParams {
		return nil
	}
	obj := map[string]any{"code": ce.Code, "message": ce.Message}
	if ce.Data != nil {
		data, merr := json.Marshal(ce.Data)
		if merr != nil {
			a.logger.Error("crux: error data not encodable; sent without it", "tool", name, "code", ce.Code, "err", merr)
		} else {
			obj["data"] = json.RawMessage(data)
		}
	}
	return &crux.Result{
		Content:           []crux.Content{{Type: "text", Text: ce.Message}},
		StructuredContent: map[string]any{"error": obj},
		IsError:           true,
	}
}

// sdkResult converts a crux result to the SDK's.
func sdkResult(res *crux.Result) *mcp.CallToolResult {
	out := &mcp.CallToolResult{Content: []mcp.Content{}}
	if res == nil {
		return out
	}
	for _, c := range res.Content {
		// crux results carry text items only.
		out.Content = append(out.Content, &mcp.TextContent{Text: c.Text})
	}
	out.StructuredContent = res.StructuredContent
	out.IsError = res.IsError
	out.Meta = mcp.Meta(res.Meta)
	return out
}

// wireError converts an error of CallTool to the error the handler returns,
// which the SDK sends as the JSON-RPC error of the response: a *crux.Error
// keeps its code, message and data.
//
// The SDK sends a *jsonrpc.Error returned by a tool handler unchanged (see
// toWireError in its internal/jsonrpc2/messages.go), with one exception:
// the jsonrpc2 connection's processResult treats any error that matches
// jsonrpc2.ErrMethodNotFound, which *jsonrpc.Error's Is method does for
// every error of code -32601, as "this method is not handled" and replaces
// the message with `method not found: "tools/call"`. For code -32601 the
// error is therefore wrapped in a [methodNotFound], which keeps the code and
// crux's message (though not data, which crux does not attach to -32601).
func (a *adapter) wireError(name string, err error) error {
	var ce *crux.Error
	if !errors.As(err, &ce) {
		// CallTool documents only *crux.Error; keep the promise of a
		// JSON-RPC error with a meaningful code for anything else.
		a.logger.Error("crux: tool call failed", "tool", name, "err", err)
		return &jsonrpc.Error{Code: crux.CodeInternalError, Message: name + ": " + err.Error()}
	}
	we := &jsonrpc.Error{Code: int64(ce.Code), Message: ce.Message}
	if ce.Data != nil {
		data, merr := json.Marshal(ce.Data)
		if merr != nil {
			a.logger.Error("crux: error data not encodable; sent without it", "tool", name, "code", ce.Code, "err", merr)
		} else {
			we.Data = data
		}
	}
	if we.Code == jsonrpc.CodeMethodNotFound {
		return &methodNotFound{we}
	}
	return we
}

// methodNotFound carries a -32601 error of crux past the SDK's rewriting of
// method-not-found errors (see wireError). errors.Is finds no sentinel in
// it, so the connection does not take it for an unhandled method; errors.As
// finds the *jsonrpc.Error, so the response keeps its code; and its Error
// text, crux's message, becomes the message of the response.
type methodNotFound struct{ we *jsonrpc.Error }

func (e *methodNotFound) Error() string { return e.we.Message }

// Is reports false for every target, so that the error matches no sentinel
// of the SDK.
func (e *methodNotFound) Is(error) bool { return false }

// As sets a **jsonrpc.Error target to the error to send.
func (e *methodNotFound) As(target any) bool {
	p, ok := target.(**jsonrpc.Error)
	if ok {
		*p = e.we
	}
	return ok
}

// middleware answers tools/list and tools/call from crux rather than from
// the SDK's tool registry, which stays empty: the list is crux's, in its
// catalogue order and as of the request, and every call, to any name, goes
// to crux, which decides how to refuse it (-32601 for an unknown tool,
// where the SDK would answer -32602; -32030 for a tool the token denies).
// The list is one page: crux's catalogue is far below the SDK's page size.
func (a *adapter) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch r := req.(type) {
		case *mcp.CallToolRequest:
			if r.Params == nil {
				return nil, &jsonrpc.Error{Code: crux.CodeInvalidParams, Message: `tools/call requires a "name" parameter`}
			}
			return a.call(ctx, r)
		case *mcp.ListToolsRequest:
			list, err := a.b.ListTools(ctx, a.caller)
			if err != nil {
				return nil, a.wireError("tools/list", err)
			}
			return a.lists.result(list), nil
		}
		return next(ctx, method, req)
	}
}

// moduleVersion is the version of the crux module in the build information.
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if bi.Main.Path == modulePath {
		if bi.Main.Version != "" {
			return bi.Main.Version
		}
		return "(devel)"
	}
	for _, m := range bi.Deps {
		if m.Path == modulePath {
			if m.Replace != nil && m.Replace.Version != "" {
				return m.Replace.Version
			}
			if m.Version != "" {
				return m.Version
			}
		}
	}
	return "(devel)"
}
