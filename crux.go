package crux

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/crux-go/crux/c2pa"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/surface"
	"github.com/crux-go/crux/toolkit"
	"github.com/crux-go/crux/tools"
)

// Caller says who is calling: the agent's name, whether the transport
// authenticated it, and its tenant. An unauthenticated caller is anonymous
// to every tool, whatever its Agent says.
type Caller = toolkit.Caller

// Transport describes the MCP transport that carried a call: the
// Transport field of a [Caller], which route_access_matrix reports on.
type Transport = toolkit.Transport

// Kinds of [Transport].
const (
	TransportStdio = toolkit.TransportStdio // MCP over standard input and output
	TransportHTTP  = toolkit.TransportHTTP  // MCP over Streamable HTTP
)

// Result is a tool's MCP result: {content, structuredContent?, isError?, _meta?}.
type Result = toolkit.Result

// Content is one text item of a [Result].
type Content = toolkit.Content

// Annotations are a tool's MCP behaviour hints (readOnlyHint,
// destructiveHint, idempotentHint, openWorldHint). readOnlyHint is true for
// tools whose only writes are crux's own bookkeeping, such as the gap
// record of an unanswered query_facts or the reclaiming of an expired
// session; see [toolkit.Annotations] for what each hint means in crux.
type Annotations = toolkit.Annotations

// Tool is a tool as tools/list shows it.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	// OutputSchema is the JSON Schema of the tool's structuredContent: an
	// object whose properties are named with their JSON types, derived
	// from the tool's Go output type (see [Decode]). It is shallow on
	// purpose, to keep tools/list small: nested objects are not described
	// and no property is required or forbidden, since over MCP an isError
	// result may carry structured content of its own (the error) that
	// clients check against the same schema.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  Annotations     `json:"annotations"`
	Meta         map[string]any  `json:"_meta,omitempty"`
}

// Options configures a [Server]. A nil *Options means all defaults.
type Options struct {
	// Flags are the feature flags and settings. Nil means DefaultFlags();
	// the library never reads the environment itself (the crux command
	// passes FlagsFromEnv(os.Getenv)).
	Flags *Flags
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// Logger receives reports of recovered panics and internal errors, and
	// an error for each stored record that cannot be read, logged once the
	// first time a scan meets and skips it (its bucket, key, id and cause;
	// crux doctor lists and removes such records). Nil discards them.
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
	// EngramDir is a directory of engram files that engram_resolve lists
	// beside the engrams stored with PutEngram (the crux command passes
	// DIR/engrams, or $CRUX_ENGRAM_DIR). Empty means none.
	EngramDir string
	// AttestCA is the root CA whose leaf certificate, certifying Signer's
	// key, signs output_attest's C2PA manifests. Nil means a CA made in
	// memory on first use, for the server's lifetime; to keep manifests
	// verifiable under one trust anchor across restarts pass a persistent
	// one, such as c2pa.LoadOrCreateCA(dataDir, time.Now()).
	AttestCA *c2pa.CA
	// AttestRoot is the directory output_attest's content_path is
	// confined to (opened through os.Root: no "..", no symlink out).
	// Empty means output_attest reads no files.
	AttestRoot string
	// DataDir is the directory the server's data lives in, when it has
	// one (the crux command passes its data directory). audit_export_bundle
	// writes bundles to DataDir/exports unless CORECRUXD_AUDIT_EXPORT_DIR
	// names another directory, and context_custody_audit reports the
	// directory's permissions. Empty means crux knows no data directory.
	DataDir string
	// Remote is the replica sync_pull and sync_push exchange facts with
	// (see [Remote]). Nil means sync is not configured.
	Remote Remote
	// Checkout is a source checkout of crux whose HEAD update_status
	// compares with the commit the running binary was built from. It is
	// read from disk only; crux makes no network call to check for
	// updates. Empty means none.
	Checkout string
}

// Server serves the crux tools over a store. It is safe for concurrent use
// by multiple goroutines. It does not own the store: closing the server
// leaves the store open.
type Server struct {
	// fixed at creation
	set       *toolkit.Set
	env       *toolkit.Env
	catalogue []Tool         // every tool, decorated, in catalogue order
	byName    map[string]int // index into catalogue
	token     *rcx.Info      // the router's token; nil without a router

	// listedOnce makes listed: the input schema ListTools serves for
	// each tool of catalogue, annotated with the token when there is
	// one. Neither the schema nor the token changes after creation, so
	// it is made once rather than at every listing.
	listedOnce sync.Once
	listed     []json.RawMessage

	// prepared is set once Prepare has done its work; prepareMu
	// serialises the Prepare that does it.
	prepareMu sync.Mutex
	prepared  atomic.Bool

	closed atomic.Bool

	// lists holds the tool lists built for ListToolsShared.
	lists listings
}

// ErrServerClosed is the cause of the error CallTool returns after Close.
var ErrServerClosed = errors.New("crux: server is closed")

// DefaultTenant is the tenant of a caller that names none.
const DefaultTenant = toolkit.DefaultTenant

// NewServer returns a server over st, checking opts and st. It refuses a
// store written by a newer crux (store.ErrNewerFormat), and brings a store
// written by an older one to the current layout, so that st, read by the
// server or by the program itself, is never read in a layout this crux does
// not write; a store already at the current format is only read. The other
// writes a server makes of its own accord wait for its first call that uses
// the store, or for [Server.Prepare].
func NewServer(st store.Backend, opts *Options) (*Server, error) {
	return newServer(st, opts)
}

// newServer is NewServer serving extra tools after crux's own.
func newServer(st store.Backend, opts *Options, extra ...*toolkit.Tool) (*Server, error) {
	if st == nil {
		return nil, errors.New("crux: NewServer needs a store")
	}
	if opts == nil {
		opts = &Options{}
	}
	all := append(tools.All(&tools.Deps{
		EngramDir: opts.EngramDir, AttestCA: opts.AttestCA, AttestRoot: opts.AttestRoot,
		DataDir: opts.DataDir, Remote: opts.Remote, Checkout: opts.Checkout,
	}), extra...)
	flags := DefaultFlags()
	if opts.Flags != nil {
		flags = *opts.Flags
	}
	signer := opts.Signer
	if signer == nil {
		eph, err := receipts.GenerateEphemeralKey()
		if err != nil {
			return nil, err
		}
		signer = eph
	}
	set, err := toolkit.NewSet(all)
	if err != nil {
		return nil, err
	}
	s := &Server{set: set, byName: make(map[string]int)}
	s.env = toolkit.NewEnv(set, st, flags, opts.Now, signer, opts.Router, opts.Logger)
	for i, t := range set.Tools() {
		s.catalogue = append(s.catalogue, Tool{
			Name:        t.Name,
			Description: s.env.Surface.Decorate(t.Name, t.Description),
			InputSchema: t.InputSchema(),
			Annotations: t.Annotations,
		})
		s.byName[t.Name] = i
	}
	if opts.Router != nil {
		info := opts.Router.Info()
		s.token = &info
	}
	// A store written by an older crux is brought to the current layout
	// before anything reads it. This write stays in the constructor: the
	// program may read or write st itself as soon as NewServer returns,
	// with the store package, which reads and writes only the current
	// layout; and a store without a format record (a fresh one included)
	// reads as format 1, so writes made to it before its format is
	// recorded would be upgraded again as if they were old. A store at the
	// current format is only read (UpgradeBackend reads first), and one
	// newer than this crux is refused here.
	if _, err := store.UpgradeBackend(context.Background(), st); err != nil {
		return nil, fmt.Errorf("crux: upgrading the store: %w", err)
	}
	return s, nil
}

// Prepare makes the writes a server makes to its store once, before the
// first call that uses the store: it seeds the bootstrap knowledge that
// get_bootstrap serves, once per crux version; counts the receipts of each
// passport, in a store written before crux kept the counts (passport tiers
// read them); and purges the forgets whose recovery window has ended (see
// [Server.Purge]; a failure to purge is logged, not returned, and the purge
// runs for up to 10 minutes whatever ctx allows). On a store that needs
// none of them Prepare only reads.
//
// Every method that uses the store calls Prepare first, so a program need
// not call it; it does to meet these writes and their errors when it
// starts rather than in its first call, as the crux command does. Prepare
// does its work once: after a failure, which it returns (as does the call
// that ran it), the next call tries again. It is safe for concurrent use;
// concurrent first calls wait for one Prepare.
func (s *Server) Prepare(ctx context.Context) error {
	return s.prepare(ctx, true)
}

// prepare is Prepare, purging what is due only when purge is set: Purge
// prepares without it, since it purges everything due itself.
func (s *Server) prepare(ctx context.Context, purge bool) error {
	if s.closed.Load() {
		return ErrServerClosed
	}
	if s.prepared.Load() {
		return nil
	}
	s.prepareMu.Lock()
	defer s.prepareMu.Unlock()
	if s.prepared.Load() {
		return nil
	}
	if err := tools.SeedBootstrap(ctx, s.env.Store, s.env.Now().UTC(), s.set.Tools()); err != nil {
		return fmt.Errorf("crux: seeding bootstrap knowledge: %w", err)
	}
	// Passport tiers read per-passport receipt counts; a store written
	// before they were kept gets them counted, once.
	if err := receipts.BuildActorCountsBackend(ctx, s.env.Store); err != nil {
		return fmt.Errorf("crux: counting receipts per passport: %w", err)
	}
	if purge {
		s.purgeDue()
	}
	s.prepared.Store(true)
	return nil
}

// prepareCall is Prepare for a call that answers protocol errors: a
// failure is the -32603 of an internal failure.
func (s *Server) prepareCall(ctx context.Context) error {
	if err := s.Prepare(ctx); err != nil {
		// An *Error says "crux: " itself.
		return toolkit.WrapError(CodeInternalError, strings.TrimPrefix(err.Error(), "crux: "), err)
	}
	return nil
}

// Flags returns the flags the server runs with.
func (s *Server) Flags() Flags { return s.env.Flags }

// Enforcing reports whether calls are checked against a capability token
// (Options.Router is set). Without a router every call is allowed.
func (s *Server) Enforcing() bool { return s.env.Router != nil }

// Keyring returns the public keyring that verifies the receipts this server
// signs.
func (s *Server) Keyring() *receipts.Keyring { return receipts.NewKeyring(s.env.Signer.Public()) }

// FreeLocalCapabilities returns the capability strings of a free-local
// token for a server running with f: the capability of every local tool
// (issue_passport's only when agent passports are on,
// request_passport_mint's only when mint requests are), then
// rcx.FederationReadCapability. Pass them to rcx.MintFreeLocal.
func FreeLocalCapabilities(f Flags) []string {
	caps := surface.Resolve(f.AgentPassports).LocalCapabilities(f.PassportMintRequests)
	return append(caps, rcx.FederationReadCapability)
}

// ListTools returns the tools c sees, in catalogue order: with a router,
// only those its token authorises, annotated with the token
// (_meta.crux.{filtered_by, token_ref, receipt_class, tier} and
// x-crux-token-ref, x-crux-receipt-class, x-crux-tier in the input schema);
// then narrowed by the tool surface (Flags.ToolSurface; dynamic follows the
// intent c declared with cuecrux_session). Each description starts with its
// tier marker; hosted tools carry _meta.crux.upgrade. Tools left out can
// still be called. The result is the caller's own to modify: a deep copy
// of the list [Server.ListToolsShared] keeps.
func (s *Server) ListTools(ctx context.Context, c Caller) []Tool {
	return cloneTools(s.ListToolsShared(ctx, c))
}

// listedSchema is the input schema ListTools serves for the tool at index i
// of the catalogue: its schema, with the token's x-crux-* keys when the
// server has a router. The caller must not modify it.
func (s *Server) listedSchema(i int) json.RawMessage {
	s.listedOnce.Do(func() {
		s.listed = make([]json.RawMessage, len(s.catalogue))
		for j, t := range s.catalogue {
			s.listed[j] = t.InputSchema
			if s.token != nil {
				ref := map[string]string{"token_id": s.token.TokenID, "token_hash": s.token.TokenHash}
				s.listed[j] = annotateSchema(t.InputSchema, ref, s.token)
			}
		}
	})
	return s.listed[i]
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
// tool, -32602 naming the argument for bad input, -32030 when the router
// refuses the call (with a signed refusal receipt), -32603 for an internal
// failure (a panicking handler included: the server keeps running and the
// store keeps nothing of the call). A tool that ran but failed returns a
// Result with IsError set and a nil error.
func (s *Server) CallTool(ctx context.Context, c Caller, name string, args json.RawMessage) (*Result, error) {
	if s.closed.Load() {
		return nil, toolkit.WrapError(CodeInternalError, "server is closed", ErrServerClosed)
	}
	if err := s.prepareCall(ctx); err != nil {
		return nil, err
	}
	return s.set.Call(ctx, s.env, c, name, args)
}

// Close marks the server closed: later calls fail. It does not close the
// store. Close is idempotent.
func (s *Server) Close() error {
	s.closed.Store(true)
	return nil
}
