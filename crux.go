package crux

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/surface"
	"github.com/crux-go/crux/tools"
)

// Caller says who is calling: the agent's name, whether the transport
// authenticated it, and its tenant. An unauthenticated caller is anonymous
// to every tool, whatever its Agent says.
type Caller = tools.Caller

// Result is a tool's MCP result: {content, structuredContent?, isError?, _meta?}.
type Result = tools.Result

// Content is one text item of a [Result].
type Content = tools.Content

// Annotations are a tool's MCP behaviour hints (readOnlyHint, destructiveHint, ...).
type Annotations = tools.Annotations

// Tool is a tool as tools/list shows it.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations Annotations     `json:"annotations"`
	Meta        map[string]any  `json:"_meta,omitempty"`
}

// Options configures a [Server]. A nil *Options means all defaults.
type Options struct {
	// Flags are the feature flags and settings. Nil means DefaultFlags();
	// the library never reads the environment itself (the crux command
	// passes FlagsFromEnv(os.Getenv)).
	Flags *Flags
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// Logger receives reports of recovered panics and internal errors. Nil
	// discards them.
	Logger *slog.Logger
	// Signer signs every receipt the server mints (refusals, session
	// plans, ...). Nil means a fresh Ed25519 key held in memory for the
	// server's lifetime, whose public half Server.Keyring returns; to keep
	// receipts verifiable across restarts pass a persistent key, such as
	// receipts.LoadOrCreateKey(dataDir).
	Signer receipts.Signer
	// Router enforces capability tokens: tools/list shows only what it
	// authorises, and calls it refuses fail with -32030 before the tool
	// runs. Nil means no enforcement (fail-open), the documented default
	// for embedders; Server.Enforcing reports it. The crux command always
	// sets one (a free-local token under the data directory's key).
	Router rcx.Router
}

// Server serves the crux tools over a store. It is safe for concurrent use
// by multiple goroutines. It does not own the store: closing the server
// leaves the store open.
type Server struct {
	// fixed at creation
	set       *tools.Set
	env       *tools.Env
	flags     Flags
	logger    *slog.Logger
	catalogue []Tool         // every tool, decorated, in catalogue order
	byName    map[string]int // index into catalogue
	token     *rcx.Info      // the router's token; nil without a router

	closed atomic.Bool
}

// ErrServerClosed is the cause of the error CallTool returns after Close.
var ErrServerClosed = errors.New("crux: server is closed")

// NewServer returns a server over st. It seeds the bootstrap knowledge that
// get_bootstrap serves into st, once per crux version, and purges the
// forgets whose recovery window has ended (see Server.Purge; a failure is
// logged, not returned).
func NewServer(st store.Backend, opts *Options) (*Server, error) {
	return newServer(st, opts, tools.All())
}

func newServer(st store.Backend, opts *Options, all []*tools.Tool) (*Server, error) {
	if st == nil {
		return nil, errors.New("crux: NewServer needs a store")
	}
	if opts == nil {
		opts = &Options{}
	}
	s := &Server{flags: DefaultFlags(), logger: opts.Logger}
	if opts.Flags != nil {
		s.flags = *opts.Flags
	}
	if s.logger == nil {
		s.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	signer := opts.Signer
	if signer == nil {
		_, priv, err := ed25519.GenerateKey(nil)
		if err != nil {
			return nil, err
		}
		signer = receipts.NewEd25519Signer(priv)
	}

	set, err := tools.NewSet(all)
	if err != nil {
		return nil, err
	}
	s.set = set
	s.byName = make(map[string]int)
	var names []string
	for i, t := range set.Tools() {
		s.catalogue = append(s.catalogue, Tool{
			Name:        t.Name,
			Description: surface.Decorate(t.Name, t.Description, s.flags.AgentPassports),
			InputSchema: t.InputSchema(),
			Annotations: t.Annotations,
		})
		s.byName[t.Name] = i
		names = append(names, t.Name)
	}
	if opts.Router != nil {
		info := opts.Router.Info()
		s.token = &info
	}
	s.env = &tools.Env{
		Store: st, Now: now, Decay: s.flags.DecayPolicy(),
		Signer: signer, Router: opts.Router, Intents: new(tools.IntentBook),
		Tools: names, AgentPassports: s.flags.AgentPassports,
		Enabled:              func(flag string) bool { on, _ := s.flags.Enabled(flag); return on },
		ForgetRecoveryWindow: time.Duration(s.flags.ForgetRecoveryWindowDays) * 24 * time.Hour,
	}
	if err := tools.SeedBootstrap(context.Background(), st, now().UTC(), set.Tools()); err != nil {
		return nil, fmt.Errorf("crux: seeding bootstrap knowledge: %w", err)
	}
	s.purgeOnOpen()
	return s, nil
}

// Flags returns the flags the server runs with.
func (s *Server) Flags() Flags { return s.flags }

// Enforcing reports whether calls are checked against a capability token
// (Options.Router is set). Without a router every call is allowed.
func (s *Server) Enforcing() bool { return s.env.Router != nil }

// Keyring returns the public keyring that verifies the receipts this server
// signs.
func (s *Server) Keyring() *receipts.Keyring { return receipts.NewKeyring(s.env.Signer.Public()) }

// ListTools returns the tools c sees, in catalogue order: with a router,
// only those its token authorises, annotated with the token
// (_meta.crux.{filtered_by, token_ref, receipt_class, tier} and
// x-crux-token-ref, x-crux-receipt-class, x-crux-tier in the input schema);
// then narrowed by the tool surface (Flags.ToolSurface; dynamic follows the
// intent c declared with cuecrux_session). Each description starts with its
// tier marker; hosted tools carry _meta.crux.upgrade. Tools left out can
// still be called. The result is the caller's own to modify.
func (s *Server) ListTools(ctx context.Context, c Caller) []Tool {
	names := s.env.Tools
	if s.env.Router != nil {
		names = rcx.FilterAllowed(ctx, s.env.Router, names, s.flags.AgentPassports)
	}
	intent, _ := s.env.Intents.Intent(c, s.env.Now())
	names = surface.Shape(string(s.flags.ToolSurface), names, intent)

	out := make([]Tool, 0, len(names))
	for _, name := range names {
		t := s.catalogue[s.byName[name]]
		t.InputSchema = append(json.RawMessage(nil), t.InputSchema...)
		meta := map[string]any{}
		if up, ok := surface.UpgradeFor(name, s.flags.AgentPassports); ok {
			meta["upgrade"] = up
		}
		if s.token != nil {
			ref := map[string]string{"token_id": s.token.TokenID, "token_hash": s.token.TokenHash}
			meta["filtered_by"] = "rcx-capability-token"
			meta["token_ref"] = ref
			meta["receipt_class"] = s.token.ReceiptClass
			meta["tier"] = s.token.Tier
			t.InputSchema = annotateSchema(t.InputSchema, ref, s.token)
		}
		if len(meta) > 0 {
			t.Meta = map[string]any{"crux": meta}
		}
		out = append(out, t)
	}
	return out
}

// annotateSchema adds the token's x-crux-* keys to a tool's input schema.
func annotateSchema(schema json.RawMessage, ref map[string]string, token *rcx.Info) json.RawMessage {
	var m map[string]any
	if err := json.Unmarshal(schema, &m); err != nil {
		return schema // schemas are validated objects; cannot happen
	}
	m["x-crux-token-ref"] = ref
	m["x-crux-receipt-class"] = token.ReceiptClass
	m["x-crux-tier"] = token.Tier
	b, err := json.Marshal(m)
	if err != nil {
		return schema
	}
	return b
}

// CallTool runs the tool called name with args (a JSON object; nil means
// no arguments) on behalf of c.
//
// A caller whose names are invalid (see Caller.Validate) is refused with
// -32600.
// A protocol-level failure is returned as an *Error: -32601 for an unknown
// tool, -32602 naming the argument for bad input, -32603 for an internal
// failure (a panicking handler included: the server keeps running and the
// store keeps nothing of the call). A tool that ran but failed returns a
// Result with IsError set and a nil error.
func (s *Server) CallTool(ctx context.Context, c Caller, name string, args json.RawMessage) (res *Result, err error) {
	if s.closed.Load() {
		return nil, tools.WrapError(CodeInternalError, ErrServerClosed.Error(), ErrServerClosed)
	}
	if _, ok := s.set.Lookup(name); !ok {
		return nil, &Error{Code: CodeMethodNotFound, Message: "unknown tool: " + name}
	}
	if err := c.Validate(); err != nil {
		return nil, tools.WrapError(CodeInvalidRequest, err.Error(), err)
	}
	defer func() {
		if p := recover(); p != nil {
			s.logger.Error("crux: tool panicked", "tool", name, "panic", p, "stack", string(debug.Stack()))
			res, err = nil, &Error{Code: CodeInternalError, Message: name + ": internal error; nothing was stored"}
		}
	}()
	if refusal, err := s.checkRevocation(ctx, c, name); err != nil || refusal != nil {
		return refusal, s.internal(ctx, name, err)
	}
	if s.env.Router != nil {
		if d := s.env.Router.Decide(ctx, rcx.ToolCall(name, s.flags.AgentPassports)); !d.Authorised {
			return nil, s.refuse(ctx, c, name, d)
		}
	}
	res, err = s.set.Call(ctx, s.env, c, name, args)
	if err == nil {
		return res, nil
	}
	return nil, s.internal(ctx, name, err)
}

// internal returns err as the *Error CallTool reports: unchanged when it is
// one already, else a -32603 wrapping it. A nil err gives nil.
func (s *Server) internal(ctx context.Context, name string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if ctx.Err() == nil {
		s.logger.Error("crux: tool failed", "tool", name, "err", err)
	}
	return tools.WrapError(CodeInternalError, name+": "+err.Error(), err)
}

// refuse records a capability refusal as a signed receipt and returns the
// -32030 error carrying it: the data object of the reference (reason_code,
// mode, token_id, token_hash, stamp, refusal_receipt, upgrade_hint), whose
// refusal_receipt also has the receipt_id, key_id and signature that crux
// verify checks. Should the receipt fail to persist, the call is refused all
// the same and data.receipt_error says why.
func (s *Server) refuse(ctx context.Context, c Caller, name string, d rcx.Decision) error {
	capability := surface.Capability(name)
	refusal := map[string]any{}
	if b, err := json.Marshal(d.RefusalReceipt); err == nil {
		_ = json.Unmarshal(b, &refusal)
	}
	data := map[string]any{
		"reason_code": d.ReasonCode, "mode": d.Mode, "token_id": d.TokenID, "token_hash": d.TokenHash,
		"stamp": d.Stamp, "refusal_receipt": refusal, "upgrade_hint": rcx.UpgradeHintFor(capability),
	}
	var r *receipts.Receipt
	err := s.env.Store.Update(ctx, func(tx store.Tx) error {
		var err error
		r, err = receipts.Append(tx, s.env.Signer, c.TenantID(), "refusal", c.Name(), d.RefusalReceipt, s.env.Now())
		return err
	})
	if err == nil {
		sig, serr := r.SigRecord()
		err = serr
		refusal["receipt_id"] = r.ID
		refusal["key_id"] = sig.KeyID
		refusal["signature"] = hex.EncodeToString(sig.Signature)
	}
	if err != nil {
		s.logger.Error("crux: recording a refusal receipt", "tool", name, "err", err)
		data["receipt_error"] = err.Error()
	}
	return &Error{Code: CodeCapabilityDenied, Message: "RCX capability denied: " + d.ReasonCode, Data: data}
}

// revocationAllowlist are the read-only tools a revoked passport may still
// call.
var revocationAllowlist = map[string]bool{"get_passport": true, "get_agent_identity": true}

// checkRevocation enforces passport revocation (Flags.PassportRevocation):
// a caller whose passport record is revoked may call only the allowlist;
// any other call gets an isError result saying why. It fails open: a caller
// without a passport record is not refused.
func (s *Server) checkRevocation(ctx context.Context, c Caller, name string) (*Result, error) {
	id := c.Identity()
	if !s.flags.PassportRevocation || id == "" || revocationAllowlist[name] {
		return nil, nil
	}
	var p *store.Passport
	err := s.env.Store.View(ctx, func(tx store.Tx) error {
		var err error
		p, err = store.GetPassport(tx, c.TenantID(), id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) || err == nil && !p.Revoked() {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("passport %s was revoked at %s", id, p.RevokedAt.UTC().Format(time.RFC3339))
	if p.RevokeReason != "" {
		msg += " (" + p.RevokeReason + ")"
	}
	var allowed []string
	for _, t := range s.env.Tools {
		if revocationAllowlist[t] {
			allowed = append(allowed, t)
		}
	}
	msg += "; a revoked passport may call only " + strings.Join(allowed, " and ")
	return &Result{Content: []Content{{Type: "text", Text: msg}}, IsError: true}, nil
}

// Close marks the server closed: later calls fail. It does not close the
// store. Close is idempotent.
func (s *Server) Close() error {
	s.closed.Store(true)
	return nil
}
