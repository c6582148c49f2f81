package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/owner"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store/bolt"
	"github.com/spf13/pflag"
)

// dbFile is the name of the store in the data directory.
const dbFile = "crux.db"

// environment is the process environment as the command reads it: its
// variables, and the feature flags read from them once.
type environment struct {
	vars     map[string]string
	flags    crux.Flags
	warnings []crux.FlagWarning // what looked like a mistake in the flags
}

// commandVariables are the CRUX_* variables the command reads itself.
// CRUX_AGENT_TOKENS is among them: it holds secrets and changes no
// server's behaviour, so it is never sent to the owning process.
var commandVariables = []string{"CRUX_DATA_DIR", "CRUX_AGENT", "CRUX_STORE", "CRUX_ENGRAM_DIR", "CRUX_AGENT_TOKENS", "CRUX_ATTEST_ROOT",
	"CRUX_UPDATE_CHECKOUT", "CRUX_LOG_LEVEL"}

// newEnvironment reads environ, NAME=value entries as os.Environ returns
// them; the first entry of a name wins, as with os.Getenv.
func newEnvironment(environ []string) *environment {
	e := &environment{vars: make(map[string]string, len(environ))}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := e.vars[k]; !dup {
			e.vars[k] = v
		}
	}
	e.flags, e.warnings = crux.FlagsFromEnv(environ, commandVariables...)
	return e
}

// flagVars returns the variables that may change a server's behaviour
// (see flagVariable), as NAME=value entries.
func (e *environment) flagVars() []string {
	var out []string
	for k, v := range e.vars {
		if flagVariable(k) && !slices.Contains(commandVariables, k) {
			out = append(out, k+"="+v)
		}
	}
	sort.Strings(out)
	return out
}

// getenv returns the value of the variable k, or "" when it is unset.
func (e *environment) getenv(k string) string { return e.vars[k] }

// dataDir returns the data directory: flagDir when the --data flag was
// given, else $CRUX_DATA_DIR, else $XDG_DATA_HOME/crux (an XDG_DATA_HOME
// that is not an absolute path is ignored, as the XDG specification says),
// else ~/.local/share/crux. It does not create it.
func dataDir(flagDir string, flagSet bool, getenv func(string) string) (string, error) {
	if flagSet {
		if flagDir == "" {
			return "", usagef("--data must not be empty")
		}
		return filepath.Clean(flagDir), nil
	}
	if d := getenv("CRUX_DATA_DIR"); d != "" {
		return filepath.Clean(d), nil
	}
	if d := getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "crux"), nil
	}
	home := getenv("HOME")
	if home == "" && runtime.GOOS == "windows" {
		home = getenv("USERPROFILE")
	}
	if home == "" {
		return "", errors.New("no data directory: give --data, or set CRUX_DATA_DIR, XDG_DATA_HOME or HOME")
	}
	return filepath.Join(home, ".local", "share", "crux"), nil
}

// callerFor returns the caller the command acts for: the --agent flag when
// given (an empty one means anonymous), else $CRUX_AGENT. A named agent is
// authenticated, since the process was started for it; no name means an
// anonymous, unauthenticated caller.
func callerFor(flagAgent string, flagSet bool, getenv func(string) string) crux.Caller {
	agent := flagAgent
	if !flagSet {
		agent = getenv("CRUX_AGENT")
	}
	agent = strings.TrimSpace(agent)
	if agent == "" {
		return crux.Caller{}
	}
	return crux.Caller{Agent: agent, Authenticated: true}
}

// setup is what a command that serves the tools has resolved from its
// flags and the environment.
type setup struct {
	dir      string
	caller   crux.Caller
	flags    crux.Flags
	env      []string // the flag variables the flags were read from
	storeURL string   // a postgres:// store (--store, $CRUX_STORE); empty: DIR/crux.db
	keyFile  string   // the signing key (--key); empty: DIR/signing.key
	// engramDir is the directory of engram files ($CRUX_ENGRAM_DIR, else
	// DIR/engrams); the owning process's is the one its tools read.
	engramDir string
	// attestRoot is output_attest's content root ($CRUX_ATTEST_ROOT, made
	// absolute; empty: none); the owning process's is the one used.
	attestRoot string
	// checkout is the source checkout update_status compares the binary
	// with ($CRUX_UPDATE_CHECKOUT; empty for none).
	checkout string
}

// resolve applies the common flags of fs (registered into cf) and the
// environment. An agent name that crux would refuse on every call (see
// crux.Caller.Validate: not UTF-8, "::" in it, ...) is a usage error, so a
// serve with such a name stops at once instead of refusing each call.
func resolve(fs *pflag.FlagSet, cf *commonFlags, osenv *environment) (*setup, error) {
	set := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { set[f.Name] = true })
	dir, err := dataDir(cf.data, set["data"], osenv.getenv)
	if err != nil {
		return nil, err
	}
	caller := callerFor(cf.agent, set["agent"], osenv.getenv)
	if err := caller.Validate(); err != nil {
		return nil, usagef("%s", strings.TrimPrefix(err.Error(), "crux: "))
	}
	storeURL := cf.store
	if !set["store"] {
		storeURL = osenv.getenv("CRUX_STORE")
	}
	if storeURL != "" && !strings.HasPrefix(storeURL, "postgres://") && !strings.HasPrefix(storeURL, "postgresql://") {
		return nil, usagef("--store must be a postgres:// URL, got %q (without it the store is DIR/%s)", storeURL, dbFile)
	}
	if set["key"] && cf.key == "" {
		return nil, usagef("--key must not be empty")
	}
	engramDir := osenv.getenv("CRUX_ENGRAM_DIR")
	if engramDir == "" {
		engramDir = filepath.Join(dir, "engrams")
	}
	attestRoot := osenv.getenv("CRUX_ATTEST_ROOT")
	if attestRoot != "" {
		if attestRoot, err = filepath.Abs(attestRoot); err != nil {
			return nil, fmt.Errorf("CRUX_ATTEST_ROOT: %w", err)
		}
	}
	return &setup{dir: dir, caller: caller, flags: osenv.flags, env: osenv.flagVars(), storeURL: storeURL, keyFile: cf.key,
		engramDir: engramDir, attestRoot: attestRoot, checkout: osenv.getenv("CRUX_UPDATE_CHECKOUT")}, nil
}

// lockedError reports that another process holds the store and does not
// share it.
type lockedError struct {
	path string
	err  error // wraps bolt.ErrLocked
}

func (e *lockedError) Error() string {
	return fmt.Sprintf("the database %s is locked by another process that does not share it "+
		"(a crux older than the shared data directory, or another program); "+
		"stop that process, or use another data directory with --data", e.path)
}

func (e *lockedError) Unwrap() error { return e.err }

// joinTimeout is how long a command tries to reach the process owning its
// data directory, or to become it, before it gives up. A process that
// holds the store without sharing it holds it for this long at least.
var joinTimeout = 5 * time.Second

// session is a command's access to its store: through the process that
// owns the data directory, which may be this one (see host.go), or, for a
// PostgreSQL store, directly.
type session struct {
	conn  conn
	env   []string       // this process's flag variables, sent with each operation
	lists forwardedLists // the last tools/list of each caller, when forwarding (listing.go)
}

// conn runs a session's operations: an *owner.Conn, or direct.
type conn interface {
	Do(ctx context.Context, op string, req json.RawMessage) (json.RawMessage, error)
	Local(fn func(owner.Host) error) (bool, error)
	Owner() bool
	Close() error
}

// direct runs the operations on a host of this process's own: the store is
// a database, which every process opens for itself.
type direct struct{ h *host }

func (d direct) Do(ctx context.Context, op string, req json.RawMessage) (json.RawMessage, error) {
	return d.h.Handle(ctx, op, req)
}

func (d direct) Local(fn func(owner.Host) error) (bool, error) { return true, fn(d.h) }

func (d direct) Owner() bool { return true }

func (d direct) Close() error { return d.h.Close() }

// join returns the command's session on the data directory, creating the
// directory (mode 0700) when needed. When no process owns the store, this
// one opens it and owns it until the session is closed.
func (s *setup) join(ctx context.Context, logger *slog.Logger) (*session, error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the data directory: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if s.storeURL != "" {
		// A database serves every process itself: no owner.
		h, err := openHost(ctx, s, logger)
		if err != nil {
			return nil, err
		}
		return &session{conn: direct{h}, env: s.env}, nil
	}
	conn, err := owner.Join(ctx, s.dir, owner.Options{
		Open:        func() (owner.Host, error) { return openHost(ctx, s, logger) },
		Busy:        func(err error) bool { return errors.Is(err, bolt.ErrLocked) },
		JoinTimeout: joinTimeout,
		Logger:      logger,
	})
	if errors.Is(err, bolt.ErrLocked) {
		return nil, &lockedError{path: filepath.Join(s.dir, dbFile), err: err}
	}
	if err != nil {
		return nil, err
	}
	return &session{conn: conn, env: s.env}, nil
}

// close ends the session; an owner hands the store over.
func (ss *session) close() error { return ss.conn.Close() }

// withSession runs fn with a session on the data directory's existing
// store (an operator command never creates an empty one), and closes it.
func (s *setup) withSession(ctx context.Context, logger *slog.Logger, fn func(*session) error) (err error) {
	if s.storeURL == "" {
		if _, err := existingStore(s.dir); err != nil {
			return err
		}
	}
	sess, err := s.join(ctx, logger)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := sess.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the store: %w", cerr))
		}
	}()
	return fn(sess)
}

// do runs the operation op with the request req and decodes its answer
// into res. A *crux.Error of the operation comes back as a *crux.Error
// with the same code, message and data; an owner that ended before
// answering, or does not answer (owner.NotAnsweringError), is a -32603
// *crux.Error saying so.
func (ss *session) do(ctx context.Context, op string, req, res any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	out, err := ss.conn.Do(ctx, op, b)
	var we *owner.Error
	var na *owner.NotAnsweringError
	switch {
	case errors.Is(err, owner.ErrOwnerGone):
		return &crux.Error{Code: crux.CodeInternalError, Message: owner.ErrOwnerGone.Error()}
	case errors.As(err, &na):
		return &crux.Error{Code: crux.CodeInternalError, Message: na.Error()}
	case errors.As(err, &we) && we.Code != 0:
		ce := &crux.Error{Code: we.Code, Message: we.Message}
		if we.Data != nil {
			ce.Data = we.Data
		}
		return ce
	case errors.As(err, &we):
		return errors.New(we.Message)
	case err != nil:
		return err
	}
	return json.Unmarshal(out, res)
}

// local runs fn on this process's own crux server for the session's flags
// when this process holds the store, and reports whether it did.
func (ss *session) local(fn func(srv *crux.Server) error) (bool, error) {
	return ss.conn.Local(func(h owner.Host) error {
		srv, err := h.(*host).server(ss.env)
		if err != nil {
			return err
		}
		return fn(srv)
	})
}

// run runs fn on this process's crux server when this process holds the
// store, and else sends the operation op with req to the owner, decoding
// its answer into res (see do).
func (ss *session) run(ctx context.Context, op string, req, res any, fn func(srv *crux.Server) error) error {
	local, err := ss.local(fn)
	if !local {
		err = ss.do(ctx, op, req, res)
	}
	return err
}

// ListTools is tools/list, in-process when this process holds the store,
// else through the owner (see mcpserver.Backend). The list is shared (the
// server's, or the last one forwarded to the caller) and must not be
// modified.
func (ss *session) ListTools(ctx context.Context, c crux.Caller) ([]crux.Tool, error) {
	var list []crux.Tool
	if local, err := ss.local(func(srv *crux.Server) error {
		list = srv.ListToolsShared(ctx, c)
		return nil
	}); local {
		return list, err
	}
	return ss.forwardedList(ctx, c)
}

// CallTool is tools/call, in-process when this process holds the store,
// else through the owner (see mcpserver.Backend). A forwarded answer keeps
// its structured content and _meta as the JSON the owner encoded, so it is
// byte for byte the owner's.
func (ss *session) CallTool(ctx context.Context, c crux.Caller, name string, args json.RawMessage) (*crux.Result, error) {
	var res *crux.Result
	if local, err := ss.local(func(srv *crux.Server) error {
		var err error
		res, err = srv.CallTool(ctx, c, name, args)
		return err
	}); local {
		return res, err
	}
	var wire struct {
		callAnswer
		Meta map[string]json.RawMessage `json:"_meta,omitempty"`
	}
	if err := ss.do(ctx, opCall, callReq{Env: ss.env, Caller: toWire(c), Name: name, Args: args}, &wire); err != nil {
		return nil, err
	}
	res = &crux.Result{Content: wire.Content, IsError: wire.IsError, Meta: rawMap(wire.Meta)}
	if wire.TextIsStructured {
		res.Content = []crux.Content{{Type: "text", Text: string(wire.StructuredContent)}}
	}
	if res.Content == nil {
		res.Content = []crux.Content{}
	}
	if wire.StructuredContent != nil {
		res.StructuredContent = wire.StructuredContent
	}
	return res, nil
}

// rawMap is m with each value as its JSON, or nil for an empty m.
func rawMap(m map[string]json.RawMessage) map[string]any {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// signer loads the signing key: --key FILE (which must exist), else the
// data directory's, created once.
func (s *setup) signer() (*receipts.Ed25519Signer, error) {
	if s.keyFile != "" {
		k, err := receipts.LoadKey(s.keyFile)
		if err != nil {
			return nil, fmt.Errorf("loading the signing key %s: %w", s.keyFile, err)
		}
		return k, nil
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the data directory: %w", err)
	}
	k, err := receipts.LoadOrCreateKey(s.dir)
	if err != nil {
		return nil, fmt.Errorf("loading the signing key: %w", err)
	}
	return k, nil
}
