// Package toolkit is what a crux tool is and how one call runs: the tool
// descriptor ([Tool], made with [Bind] or [New]), the caller ([Caller]),
// the result ([Result], [JSONResult]), the protocol errors ([Error],
// [InvalidParams]), the server's dependencies every handler gets ([Env]),
// and the compiled list of tools ([Set]) that runs a call through the
// pipeline every tool shares ([Set.Call]): the caller's names, passport
// revocation, the capability token (a refusal is a signed receipt), the
// tool's feature flag, the arguments (size, UTF-8, the JSON Schema,
// unknown names, decoded into the tool's argument struct), then the
// handler, with panics recovered. Package tools holds crux's own tools;
// package crux wraps a Set and an Env in its Server, which is what most
// programs use.
//
// # Refusals
//
// A call the capability router refuses fails with -32030 and a signed
// refusal receipt, stored in the caller's tenant chain. Identical refusals
// (same tenant, caller name, and refusal: token, capability, backend,
// egress classes, attestations, reason code, receipt class) within
// [RefusalWindow] of the first share its receipt: each answer carries that
// receipt's id, key id and signature, and data.refusal_window says how
// many identical refusals the receipt stands for so far (count, this call
// included) and the window (started_at, the receipt's created_at, and
// ends_at). The count is kept unsigned while the window is open. Once it
// has ended, the window is retired by the next identical refusal, or by
// any refusal in the tenant that mints a receipt (up to 8 ended windows
// each); a window that counted more than one refusal is retired with a
// refusal_summary receipt that signs the count, the window and the last
// refusal's time. A caller looping on a refused tool so stores at most
// two receipts per minute for that tool, however fast it calls; 10,000
// identical refusals within a minute store one receipt. No receipt is
// rewritten or deleted, so the chain stays whole and every receipt
// verifies.
//
// # Arguments
//
// A call's arguments are parsed once. A check compiled from the tool's
// JSON Schema decides whether they pass; the schema library (the
// reference) is consulted only for arguments the check refuses, and its
// explanation is the -32602 the call gets, so the schema stays the
// contract and every refusal reads as it always has. The argument struct
// is then filled from the parsed tree, except for argument types that hold
// raw JSON or decode themselves, which are decoded from the text
// ([Set.Arguments] does all of this without running the tool). Tests
// hold this path to the reference (parse, validate, decode again) over a
// table, the fuzz corpus and arguments generated from every schema.
//
// # Typed outputs
//
// Every tool answers with a Go value of its output type as its structured
// content ([Tool.OutputTypes] names the types), so that a program can read
// a result without parsing its text. The type is also the truth about the
// shape of the answer: the output schema tools/list declares for the tool
// is derived from it ([Set.OutputSchema]). A tool may have a second shape,
// with a type of its own, which the schema admits too.
package toolkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/internal/codec"
	"github.com/crux-go/crux/internal/outschema"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/surface"
)

// JSON-RPC error codes used by crux, named as in the CueCrux tool contract.
const (
	CodeParseError       = -32700 // the request is not valid JSON
	CodeInvalidRequest   = -32600 // the request is not a valid JSON-RPC request
	CodeMethodNotFound   = -32601 // unknown method or tool, or a tool that is switched off
	CodeInvalidParams    = -32602 // an argument is missing, malformed or unknown
	CodeInternalError    = -32603 // a failure inside crux; nothing was written
	CodeCapabilityDenied = -32030 // refused by a capability check or a guard
	CodeForbidden        = -32003 // the caller lacks the standing the tool requires
	CodeConflict         = -32004 // the call conflicts with the stored state
)

// Error is a protocol-level failure: a JSON-RPC error with a code from the
// list above, a message, and optional structured data. Tools that ran but
// failed report it in their [Result] (IsError) instead.
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`

	cause error
}

// WrapError returns an Error with the given code and message whose Unwrap
// is cause.
func WrapError(code int, message string, cause error) *Error {
	return &Error{Code: code, Message: message, cause: cause}
}

func (e *Error) Error() string { return fmt.Sprintf("crux: %s (%d)", e.Message, e.Code) }

// Unwrap returns the internal failure behind the error, if any, else the
// *ParamError of a rejected argument (its Data), so that errors.As finds
// either.
func (e *Error) Unwrap() error {
	if e.cause != nil {
		return e.cause
	}
	if pe, ok := e.Data.(*ParamError); ok {
		return pe
	}
	return nil
}

// ParamError describes a rejected argument, as the data of a -32602 error;
// errors.As finds it in the error CallTool returns.
type ParamError struct {
	Param  string `json:"param"`
	Reason string `json:"reason"`
	// ErrorCode is a machine-readable refinement, such as RESERVED_ENTITY_PREFIX.
	ErrorCode string `json:"error_code,omitempty"`
}

// Error is "<param>: <reason>".
func (p *ParamError) Error() string { return p.Param + ": " + p.Reason }

// invalidParams returns the -32602 error for an argument of tool:
// "<tool>: <param>: <reason>", with data {param, reason}.
func InvalidParams(tool, param, reason string) *Error {
	return &Error{
		Code:    CodeInvalidParams,
		Message: tool + ": " + param + ": " + reason,
		Data:    &ParamError{Param: param, Reason: reason},
	}
}

// forbidden is a -32003 error of tool with data {reason, ...}.
func Forbidden(tool, reason, format string, args ...any) *Error {
	return &Error{Code: CodeForbidden, Message: tool + ": " + fmt.Sprintf(format, args...), Data: map[string]any{"reason": reason}}
}

// anonymous is the name of a caller without an authenticated identity.
const Anonymous = "anonymous"

// DefaultTenant is the tenant of a caller that names none.
const DefaultTenant = "default"

// Caller says who is calling a tool. The transport fills it in: the crux
// command takes the agent from --agent on stdio; an HTTP front end maps a
// bearer token to an agent.
//
// Only an authenticated caller has an identity: every tool treats an
// unauthenticated caller as anonymous, whatever Agent says. anonymous
// callers share the public pool and have no private scope.
type Caller struct {
	Agent         string // the agent's name
	Authenticated bool   // whether the transport vouched for Agent
	Tenant        string // the caller's tenant; "" means DefaultTenant
	// Replica reports that the transport authenticated a sync replica,
	// not an agent: Agent is then the replica's name. Only a replica,
	// authenticated, is served the sync API (crux.Server's SyncIdentity,
	// SyncChanges and SyncPush), and a replica is served nothing else:
	// every tool refuses it (-32003). A bearer token's entry in the token
	// table says which it is (replica::NAME for a replica); an embedder
	// that serves sync in process sets it on the Caller it passes.
	Replica bool
	// Transport is the MCP transport that carried the call, which
	// route_access_matrix describes. No tool decides anything else by it.
	Transport Transport
}

// Transport kinds of [Transport.Kind].
const (
	TransportStdio = "stdio" // MCP over standard input and output
	TransportHTTP  = "http"  // MCP over Streamable HTTP
)

// Transport describes the MCP transport that carried a call, as the
// transport fills it in. The zero value is an in-process call (or one
// whose transport says nothing), which route_access_matrix describes as
// the crux command's stdio.
type Transport struct {
	// Kind is TransportStdio, TransportHTTP or "".
	Kind string
	// Path is the URL path of the HTTP endpoint, such as "/mcp".
	Path string
	// Tokens reports that HTTP requests authenticate with bearer tokens,
	// each mapped to an agent and a tenant.
	Tokens bool
	// Anonymous reports that HTTP requests without a bearer token are
	// served as anonymous callers; when false they are refused with 401.
	Anonymous bool
	// Stateless reports an HTTP transport without sessions: every POST
	// stands alone, and GET and DELETE are refused with 405.
	Stateless bool
}

// MaxCallerNameBytes caps a caller's agent name and tenant: they become
// part of index keys, which a store bounds (bbolt: 32 KiB).
const MaxCallerNameBytes = 256

// Scope is the scope c reads and writes the store in: its tenant and its
// identity.
func (c Caller) Scope() store.Scope { return store.Scope{Tenant: c.TenantID(), Agent: c.Identity()} }

// Validate checks the names a transport put in c. Both names end up in
// stored records, so both must be valid UTF-8 (a record holding invalid
// UTF-8 could not be read back). An agent name is part of the stored name
// of its private entities, so it must not contain "::" or end with ":"
// (either would let two agents' names run together), nor control
// characters; an authenticated agent must not be called "anonymous". A
// tenant must not contain control characters. Each is at most
// MaxCallerNameBytes long.
func (c Caller) Validate() error {
	switch {
	case len(c.Agent) > MaxCallerNameBytes:
		return fmt.Errorf("crux: invalid caller agent name: longer than %d bytes", MaxCallerNameBytes)
	case len(c.Tenant) > MaxCallerNameBytes:
		return fmt.Errorf("crux: invalid caller tenant: longer than %d bytes", MaxCallerNameBytes)
	case !utf8.ValidString(c.Agent):
		return fmt.Errorf("crux: invalid caller agent name %q: it is not valid UTF-8", c.Agent)
	case !utf8.ValidString(c.Tenant):
		return fmt.Errorf("crux: invalid caller tenant %q: it is not valid UTF-8", c.Tenant)
	case strings.Contains(c.Agent, "::") || strings.HasSuffix(c.Agent, ":") || strings.IndexFunc(c.Agent, unicode.IsControl) >= 0:
		return fmt.Errorf(`crux: invalid caller agent name %q: it must not contain "::", end with ":" or contain control characters`, c.Agent)
	case c.Authenticated && c.Agent == Anonymous:
		return fmt.Errorf("crux: invalid caller: an authenticated agent cannot be called %q", Anonymous)
	case strings.IndexFunc(c.Tenant, unicode.IsControl) >= 0:
		return fmt.Errorf("crux: invalid caller tenant %q: it must not contain control characters", c.Tenant)
	}
	return nil
}

// Identity is the caller's authenticated agent name, or "" when anonymous.
func (c Caller) Identity() string {
	if c.Authenticated {
		return c.Agent
	}
	return ""
}

// Name is the caller's identity, or "anonymous".
func (c Caller) Name() string {
	if id := c.Identity(); id != "" {
		return id
	}
	return Anonymous
}

// TenantID is the caller's tenant, DefaultTenant when unset.
func (c Caller) TenantID() string {
	if c.Tenant == "" {
		return DefaultTenant
	}
	return c.Tenant
}

// Content is one item of a result's content: crux returns text items.
type Content struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Result is a tool's MCP result.
type Result struct {
	Content           []Content      `json:"content"`
	StructuredContent any            `json:"structuredContent,omitempty"`
	IsError           bool           `json:"isError,omitempty"`
	Meta              map[string]any `json:"_meta,omitempty"`
	// structuredText is StructuredContent as JSON, when a result whose
	// text says it was made (see jsonResult).
	structuredText string
}

// StructuredJSON returns the result's StructuredContent as JSON, as
// encoding/json writes it, when its one text item is that JSON, as every
// tool answering with its output type makes it: a transport can then
// send the text's bytes as structuredContent instead of encoding the
// output a second time. It reports false for any other result, one whose
// content was changed since among them.
func (r *Result) StructuredJSON() (string, bool) {
	if r.structuredText == "" || len(r.Content) != 1 || r.Content[0].Text != r.structuredText {
		return "", false
	}
	return r.structuredText, true
}

// Annotations are the MCP behaviour hints of a tool. Every tool sets all
// four hints deliberately (a test holds each tool to a table giving the
// reason); over MCP, destructiveHint and openWorldHint are always sent, and
// readOnlyHint and idempotentHint are sent when true (false is their MCP
// default).
//
//   - ReadOnlyHint: the call changes none of the caller's records (facts,
//     sessions, artefacts, passports, receipts, decisions, constraints).
//     A read-only tool may still keep crux's own bookkeeping: query_facts
//     and query record a gap for a query they could not answer (get_gaps
//     lists it); get_session, list_sessions, artefact_get and artefact_list
//     reclaim the expired sessions and artefacts they meet, which no read
//     returns anyway; get_passport records a tier its receipts have
//     earned; any refused call stores a refusal receipt. A client that asks
//     approval for writes need not ask for these.
//   - DestructiveHint (meaningful when not read-only): the call deletes,
//     forgets, revokes or retires something, or collapses several live
//     facts into one, so that data leaves what reads return. Writing a new
//     version of a fact is not destructive: the old one stays in its
//     history.
//   - IdempotentHint (meaningful when not read-only): repeating the call
//     with the same arguments changes nothing more; a call that mints a
//     new receipt or version each time is not idempotent.
//   - OpenWorldHint: the call reaches outside crux's own store. Only the
//     hosted sync tools would; crux ships no client for them.
type Annotations struct {
	Title           string `json:"title,omitempty"`
	ReadOnlyHint    bool   `json:"readOnlyHint"`
	DestructiveHint bool   `json:"destructiveHint"`
	IdempotentHint  bool   `json:"idempotentHint"`
	OpenWorldHint   bool   `json:"openWorldHint"`
}

// Env is what handlers need from the server that runs them. It is fixed
// when the server is created; build it with [NewEnv].
type Env struct {
	// Store is the server's store, as NewEnv wrapped it (store.Reporting)
	// so that every scan reports the unreadable records it skips to
	// ReportCorrupt.
	Store  store.Backend
	Now    func() time.Time
	Signer receipts.Signer // signs every receipt
	Router rcx.Router      // nil: no capability enforcement
	// Flags are the server's feature flags, read once at creation.
	Flags feature.Flags
	// Surface is the tier table resolved under Flags.
	Surface surface.Table
	// intents holds the intent each caller declared with cuecrux_session.
	intents *intentBook
	// Tools names the tools the server serves, in catalogue order: every
	// tool of its set present under its flags.
	Tools []string
	// capabilities holds the capability of each tool of Tools, which
	// Listed asks the router about at every listing.
	capabilities []string
	// descriptions holds the description of each tool of Tools, for
	// reuse_check's catalogue lens.
	descriptions map[string]string
	// Logger receives reports of recovered panics and internal errors,
	// and of the unreadable records scans skipped (see [Env.ReportCorrupt]).
	Logger *slog.Logger
	// corrupt holds the unreadable records already logged.
	corrupt *corruptLog
}

// NewEnv returns the Env of a server serving set over st: now is the clock,
// signer signs receipts, router (nil for none) enforces capability tokens,
// logger (nil to discard) receives internal errors.
func NewEnv(set *Set, st store.Backend, flags feature.Flags, now func() time.Time, signer receipts.Signer,
	router rcx.Router, logger *slog.Logger) *Env {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	names := make([]string, 0, len(set.tools))
	descriptions := make(map[string]string, len(set.tools))
	for _, t := range set.tools {
		if t.Present == nil || t.Present(&flags) {
			names = append(names, t.Name)
			descriptions[t.Name] = t.Description
		}
	}
	e := &Env{
		Now: now, Signer: signer, Router: router, Flags: flags,
		Surface: surface.Resolve(flags.AgentPassports), intents: new(intentBook), Tools: names, descriptions: descriptions, Logger: logger,
		corrupt: &corruptLog{seen: make(map[string]struct{})},
	}
	e.Store = store.Reporting(st, e.ReportCorrupt)
	for _, n := range names {
		e.capabilities = append(e.capabilities, surface.Capability(n))
	}
	return e
}

// maxCorruptLogged bounds the set of unreadable records an Env remembers
// having logged; past it, each further record is logged every time a scan
// meets it.
const maxCorruptLogged = 4096

// corruptLog is the set of unreadable records already logged, by bucket
// and key.
type corruptLog struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// ReportCorrupt logs, once per record for the Env's lifetime, an
// unreadable record that a scan skipped: an error through Logger with its
// bucket, key, id, the index that named it and the cause. The scan itself
// goes on and serves every other record, so this log line is how an
// operator learns of the record; crux doctor lists such records and crux
// doctor --repair removes them. NewEnv wraps the store so that every scan
// reports here.
func (e *Env) ReportCorrupt(err *store.CorruptRecordError) {
	key := err.Bucket + "\x00" + string(err.Key)
	e.corrupt.mu.Lock()
	_, logged := e.corrupt.seen[key]
	if !logged && len(e.corrupt.seen) < maxCorruptLogged {
		e.corrupt.seen[key] = struct{}{}
	}
	e.corrupt.mu.Unlock()
	if logged {
		return
	}
	e.Logger.Error("crux: skipped an unreadable record; crux doctor lists it and crux doctor --repair removes it",
		"bucket", err.Bucket, "key", fmt.Sprintf("%q", err.Key), "id", err.ID, "index", err.Index, "err", err.Err)
}

func (e *Env) Time() time.Time { return e.Now().UTC() }

// RecordIntent records the intent c declared at now (cuecrux_session
// does): the pipeline applies it to c's calls until it expires.
func (e *Env) RecordIntent(c Caller, intent surface.Intent, now time.Time) {
	e.intents.Record(c, intent, now)
}

// Description is the description of the named tool of Tools, "" for
// another name.
func (e *Env) Description(name string) string { return e.descriptions[name] }

// decay is the staleness policy of the decay settings.
func (e *Env) Decay() store.DecayPolicy {
	return store.DecayPolicy{
		VolatileStale: time.Duration(e.Flags.DecayVolatileHours) * time.Hour,
		MediumStale:   time.Duration(e.Flags.DecayMediumDays) * 24 * time.Hour,
		StableStale:   time.Duration(e.Flags.DecayStableDays) * 24 * time.Hour,
	}
}

// capabilityCall is the capability check a call to the named tool makes:
// the tool's capability string, on the local backend. A hosted-gated tool
// asks for the local backend too: crux runs no hosted platform, so a
// refusal receipt never names one.
func (e *Env) CapabilityCall(name string) rcx.Call {
	return rcx.ToolCall(surface.Capability(name), false)
}

// Handler is a tool's implementation after argument checking.
type Handler struct {
	call func(ctx context.Context, env *Env, c Caller, args *arguments) (*Result, error)
	// args is the type the arguments decode into (a struct, or
	// json.RawMessage for a tool built with New); a test keeps each
	// schema in step with it.
	args reflect.Type
	// decode decodes checked arguments into a new value of type args,
	// returned as a pointer (nil for a tool built with New).
	decode func(a *arguments) (any, error)
	// tree reports whether decode fills the struct from the decoded tree
	// (see treeDecoder) rather than decoding the JSON text again.
	tree bool
}

// Tool describes one tool: a literal with its Run made by [Bind], or
// [New]. Its fields are fixed once it is given to [NewSet].
type Tool struct {
	// Name is the tool's name: letters, digits, '_' and '-'.
	Name string
	// Description is what tools/list says the tool does.
	Description string
	// Annotations are the tool's behaviour hints.
	Annotations Annotations
	// Schema is the JSON Schema of the tool's arguments, an object schema.
	// Left empty, NewSet fills in the schema derived from the argument
	// type of Run (see [InputSchemaOf]).
	Schema []byte
	// Out is the Go type of the structured content of the tool's answers;
	// Alt, when set, that of its second shape (see OutputTypes).
	Out, Alt reflect.Type
	// Run is the tool's handler, made by Bind.
	Run Handler
	// Gate, when set, decides before the arguments are checked whether the
	// tool may run under the server's flags: a non-nil result or error is
	// the answer (the tool's own behaviour when its flag is off).
	Gate func(env *Env) (*Result, error)
	// Present, when set, says whether the tool exists under the server's
	// flags: when it reports false the tool is not listed, and a call to it
	// is answered as a call to an unknown tool (-32601).
	Present func(*feature.Flags) bool
}

// New returns a tool descriptor. schema is the JSON Schema of its
// arguments (an object schema; NewSet compiles it); run receives arguments
// that passed it, as JSON. Its structured content may be any JSON object:
// its output type is map[string]any.
func New(name, description string, schema json.RawMessage, ann Annotations,
	run func(ctx context.Context, env *Env, c Caller, args json.RawMessage) (*Result, error)) *Tool {
	if run == nil {
		return &Tool{Name: name, Description: description, Annotations: ann, Schema: schema,
			Out: anyObject, Run: Handler{args: reflect.TypeFor[json.RawMessage]()}}
	}
	call := func(ctx context.Context, env *Env, c Caller, a *arguments) (*Result, error) {
		args, err := a.text()
		if err != nil {
			return nil, InvalidParams(name, "arguments", err.Error())
		}
		return run(ctx, env, c, args)
	}
	return &Tool{Name: name, Description: description, Annotations: ann, Schema: schema,
		Out: anyObject, Run: Handler{call: call, args: reflect.TypeFor[json.RawMessage]()}}
}

// InputSchema is the tool's JSON Schema for its arguments.
// A tool without a Schema has the one derived from its argument type (nil
// if none can be).
func (t *Tool) InputSchema() json.RawMessage {
	if len(t.Schema) == 0 {
		s, _ := InputSchemaOf(t.Run.args) // NewSet reports the error
		return s
	}
	return append(json.RawMessage(nil), t.Schema...)
}

// ArgumentType is the Go type the tool's arguments decode into: the In of
// [Bind], json.RawMessage for a tool built with [New].
func (t *Tool) ArgumentType() reflect.Type { return t.Run.args }

// bind adapts a handler taking typed arguments. The arguments have passed
// schema validation when it runs, so decoding fails only on values JSON
// Schema cannot express (an integer too large for Go's int, say). They are
// decoded from the tree checkArguments made (see treeDecoder); when that
// cannot be done, or for an argument type it does not handle, from the
// JSON text with json.Unmarshal, whose error is the answer.
func Bind[In any](name string, fn func(ctx context.Context, env *Env, c Caller, in *In) (*Result, error)) Handler {
	tree := newTreeDecoder(reflect.TypeFor[In]())
	decode := func(a *arguments) (*In, error) {
		in := new(In)
		if tree != nil && tree.decode(a.doc, in) {
			return in, nil
		}
		return unmarshalArguments[In](name, a)
	}
	call := func(ctx context.Context, env *Env, c Caller, a *arguments) (*Result, error) {
		in, err := decode(a)
		if err != nil {
			return nil, err
		}
		return fn(ctx, env, c, in)
	}
	return Handler{call: call, args: reflect.TypeFor[In](), tree: tree != nil,
		decode: func(a *arguments) (any, error) { return decode(a) }}
}

// unmarshalArguments decodes the JSON text of a into a new In, and turns a
// failure into the -32602 naming the argument.
func unmarshalArguments[In any](name string, a *arguments) (*In, error) {
	args, err := a.text()
	if err != nil {
		return nil, InvalidParams(name, "arguments", err.Error())
	}
	in := new(In)
	if err := json.Unmarshal(args, in); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, InvalidParams(name, te.Field, "must be "+describeGoType(te.Type.Kind().String()))
		}
		return nil, InvalidParams(name, "arguments", err.Error())
	}
	return in, nil
}

// flagGate is a gate that answers with the error mk builds (a new one each
// call: callers may keep or change it) while on reports the flag off.
func FlagGate(on func(*feature.Flags) bool, mk func() *Error) func(env *Env) (*Result, error) {
	return func(env *Env) (*Result, error) {
		if on(&env.Flags) {
			return nil, nil
		}
		return nil, mk()
	}
}

// JSONResult is a result whose text is v as JSON and whose structured
// content is v; v writes its own JSON when it is a [JSONAppender].
// Every nil slice and map of v's top level is sent as an empty one (see
// outschema.Fill), as the tool's output schema says.
func JSONResult(v any) (*Result, error) {
	v = outschema.Fill(v)
	if a, ok := v.(JSONAppender); ok {
		if text, ok := codec.Appended(a.AppendJSON); ok && text != "" {
			return &Result{Content: []Content{{Type: "text", Text: text}}, StructuredContent: v, structuredText: text}, nil
		}
	}
	text, err := codec.MarshalString(v)
	if err != nil {
		return nil, err
	}
	return &Result{Content: []Content{{Type: "text", Text: text}}, StructuredContent: v, structuredText: text}, nil
}

// JSONAppender is an answer that writes its own JSON text: AppendJSON
// appends to b exactly what encoding/json would write for it, but without
// reflection, and reports false when it cannot (b is then dropped and
// encoding/json writes the answer). [JSONResult] uses it for the answers
// a tool gives on every call.
type JSONAppender interface {
	AppendJSON(b []byte) ([]byte, bool)
}

// ErrorResult is a tool failure the model can read.
func ErrorResult(format string, args ...any) *Result {
	return &Result{Content: []Content{{Type: "text", Text: fmt.Sprintf(format, args...)}}, IsError: true}
}
