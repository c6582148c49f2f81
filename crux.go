package crux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"

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
	catalogue []Tool

	closed atomic.Bool
}

// ErrServerClosed is the cause of the error CallTool returns after Close.
var ErrServerClosed = errors.New("crux: server is closed")

// NewServer returns a server over st. It seeds the bootstrap knowledge that
// get_bootstrap serves into st, once per crux version.
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
	s.env = &tools.Env{Store: st, Now: now, Decay: s.flags.DecayPolicy()}

	set, err := tools.NewSet(all)
	if err != nil {
		return nil, err
	}
	s.set = set
	for _, t := range set.Tools() {
		lt := Tool{
			Name:        t.Name,
			Description: surface.Decorate(t.Name, t.Description, s.flags.AgentPassports),
			InputSchema: t.InputSchema(),
			Annotations: t.Annotations,
		}
		if up, ok := surface.UpgradeFor(t.Name, s.flags.AgentPassports); ok {
			lt.Meta = map[string]any{"crux": map[string]any{"upgrade": up}}
		}
		s.catalogue = append(s.catalogue, lt)
	}
	if err := tools.SeedBootstrap(context.Background(), st, now().UTC(), set.Tools()); err != nil {
		return nil, fmt.Errorf("crux: seeding bootstrap knowledge: %w", err)
	}
	return s, nil
}

// Flags returns the flags the server runs with.
func (s *Server) Flags() Flags { return s.flags }

// ListTools returns the tools c may see, in catalogue order, each
// description marked with its tier. The slices are the caller's own.
func (s *Server) ListTools(ctx context.Context, c Caller) []Tool {
	out := make([]Tool, len(s.catalogue))
	for i, t := range s.catalogue {
		t.InputSchema = append(json.RawMessage(nil), t.InputSchema...)
		out[i] = t
	}
	return out
}

// CallTool runs the tool called name with args (a JSON object; nil means
// no arguments) on behalf of c.
//
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
	defer func() {
		if p := recover(); p != nil {
			s.logger.Error("crux: tool panicked", "tool", name, "panic", p, "stack", string(debug.Stack()))
			res, err = nil, &Error{Code: CodeInternalError, Message: name + ": internal error; nothing was stored"}
		}
	}()
	if refusal, err := s.checkRevocation(ctx, c, name); err != nil || refusal != nil {
		return refusal, s.internal(ctx, name, err)
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
	msg += "; a revoked passport may call only get_passport and get_agent_identity. Call get_passport for details."
	return &Result{Content: []Content{{Type: "text", Text: msg}}, IsError: true}, nil
}

// Close marks the server closed: later calls fail. It does not close the
// store. Close is idempotent.
func (s *Server) Close() error {
	s.closed.Store(true)
	return nil
}
