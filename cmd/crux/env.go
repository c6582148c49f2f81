package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store/bolt"
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
var commandVariables = []string{"CRUX_DATA_DIR", "CRUX_AGENT"}

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
	dir    string
	caller crux.Caller
	flags  crux.Flags
}

// resolve applies the common flags of fs (registered into cf) and the
// environment. An agent name that crux would refuse on every call (see
// crux.Caller.Validate: not UTF-8, "::" in it, ...) is a usage error, so a
// serve with such a name stops at once instead of refusing each call.
func resolve(fs *flag.FlagSet, cf *commonFlags, osenv *environment) (*setup, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	dir, err := dataDir(cf.data, set["data"], osenv.getenv)
	if err != nil {
		return nil, err
	}
	caller := callerFor(cf.agent, set["agent"], osenv.getenv)
	if err := caller.Validate(); err != nil {
		return nil, usagef("%s", strings.TrimPrefix(err.Error(), "crux: "))
	}
	return &setup{dir: dir, caller: caller, flags: osenv.flags}, nil
}

// resolveNoArgs parses the flags of a command that takes no positional
// arguments and resolves them (see resolve).
func resolveNoArgs(name string, fs *flag.FlagSet, cf *commonFlags, args []string, osenv *environment) (*setup, error) {
	pos, err := parseArgs(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) > 0 {
		return nil, usagef("%s takes no arguments, got %q", name, pos[0])
	}
	return resolve(fs, cf, osenv)
}

// lockedError reports that another process holds the store.
type lockedError struct {
	path string
	err  error // wraps bolt.ErrLocked
}

func (e *lockedError) Error() string {
	return fmt.Sprintf("the database %s is locked by another process (is a crux serve running on it?); "+
		"stop that process, or use another data directory with --data", e.path)
}

func (e *lockedError) Unwrap() error { return e.err }

// open creates the data directory if needed (mode 0700), opens the store in
// it and returns a crux server over it. close releases both.
func (s *setup) open(logger *slog.Logger) (srv *crux.Server, close func() error, err error) {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("creating the data directory: %w", err)
	}
	path := filepath.Join(s.dir, dbFile)
	db, err := bolt.Open(path, nil)
	if errors.Is(err, bolt.ErrLocked) {
		return nil, nil, &lockedError{path: path, err: err}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("opening the database: %w", err)
	}
	signer, router, err := s.trust()
	if err != nil {
		return nil, nil, errors.Join(err, db.Close())
	}
	flags := s.flags
	srv, err = crux.NewServer(db, &crux.Options{Flags: &flags, Logger: logger, Signer: signer, Router: router})
	if err != nil {
		return nil, nil, errors.Join(err, db.Close())
	}
	return srv, func() error { return errors.Join(srv.Close(), db.Close()) }, nil
}

// trust loads the data directory's signing key (created once, mode 0600)
// and mints the free-local capability token under it, which the server
// enforces: hosted-gated tools are absent from tools/list and refused when
// called.
func (s *setup) trust() (*receipts.Ed25519Signer, rcx.Router, error) {
	signer, err := receipts.LoadOrCreateKey(s.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("loading the signing key: %w", err)
	}
	tok, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{
		Tenant:       crux.DefaultTenant,
		Capabilities: crux.FreeLocalCapabilities(s.flags),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("minting the free-local token: %w", err)
	}
	router, err := rcx.NewRouter(tok, signer.Public(), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("building the router: %w", err)
	}
	return signer, router, nil
}
