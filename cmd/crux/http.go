package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/regfile"
	"github.com/crux-go/crux/mcpserver"
	"github.com/crux-go/crux/syncremote"
	"github.com/crux-go/crux/web"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// httpFlags are crux serve's flags for MCP over Streamable HTTP.
type httpFlags struct {
	addr        string // --http: the address to listen on; empty: stdio
	tokens      string // --tokens: the token table file
	anonymous   bool   // --anonymous
	allowRemote bool   // --allow-remote
	stateless   bool   // --stateless

	maxSessions, maxCallerSessions, maxCallerRequests int // --max-sessions, --max-caller-sessions, --max-caller-requests

	uiOperators         []string // --ui-operator: token table entries that are operators of the web view
	uiTrustForwardProto bool     // --ui-trust-forwarded-proto
}

// register adds the HTTP flags to fs.
func (hf *httpFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&hf.addr, "http", "", "serve MCP over Streamable HTTP on `ADDR` (host:port) instead of stdio")
	fs.StringVar(&hf.tokens, "tokens", "", "the bearer token table `FILE` (default $CRUX_AGENT_TOKENS)")
	fs.BoolVar(&hf.anonymous, "anonymous", false, "serve requests without a bearer token as anonymous instead of refusing them")
	fs.BoolVar(&hf.allowRemote, "allow-remote", false, "allow --http on an address that is not loopback (needs tokens)")
	fs.BoolVar(&hf.stateless, "stateless", false, "serve HTTP without sessions")
	fs.IntVar(&hf.maxSessions, "max-sessions", mcpserver.DefaultMaxSessions, "HTTP sessions held at once, all callers together (then 503); negative: no bound")
	fs.IntVar(&hf.maxCallerSessions, "max-caller-sessions", mcpserver.DefaultMaxSessionsPerCaller, "HTTP sessions one caller holds at once (then its longest-unused idle one is closed, else 429); negative: no bound")
	fs.IntVar(&hf.maxCallerRequests, "max-caller-requests", mcpserver.DefaultMaxRequestsPerCaller, "HTTP requests of one caller in flight at once, GET streams aside, the web view's included (then 429); negative: no bound")
	fs.StringArrayVar(&hf.uiOperators, "ui-operator", nil, "make the token table's agent `NAME[@TENANT]` an operator of the web view: it sees and audits its tenant's whole receipt chain and restores any forget of its tenant (repeatable)")
	fs.BoolVar(&hf.uiTrustForwardProto, "ui-trust-forwarded-proto", false, "trust X-Forwarded-Proto from a TLS-terminating proxy in front of the server: the web view's session cookie is Secure when it says https")
}

// httpSetup is what crux serve --http resolved from its flags.
type httpSetup struct {
	addr   string
	opts   mcpserver.HTTPOptions
	source string // where the tokens came from, for the log

	operators           map[string]bool // operatorKey of each --ui-operator
	trustForwardedProto bool            // --ui-trust-forwarded-proto
}

// operatorKey identifies an agent of a tenant for --ui-operator.
func operatorKey(c crux.Caller) string { return c.Identity() + "\x00" + c.TenantID() }

// resolveHTTP checks the HTTP flags of fs and reads the token table:
// --tokens FILE, else $CRUX_AGENT_TOKENS. It returns nil when --http was
// not given (and then no other HTTP flag may be).
func resolveHTTP(fs *pflag.FlagSet, hf *httpFlags, osenv *environment) (*httpSetup, error) {
	set := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { set[f.Name] = true })
	if !set["http"] {
		for _, name := range []string{"tokens", "anonymous", "allow-remote", "stateless", "max-sessions", "max-caller-sessions", "max-caller-requests",
			"ui-operator", "ui-trust-forwarded-proto"} {
			if set[name] {
				return nil, usagef("--%s needs --http ADDR", name)
			}
		}
		return nil, nil
	}
	if set["agent"] {
		return nil, usagef("--agent does not apply to --http: each request's bearer token names its agent (--tokens FILE or CRUX_AGENT_TOKENS)")
	}
	if _, _, err := net.SplitHostPort(hf.addr); err != nil {
		return nil, usagef("--http wants host:port, such as 127.0.0.1:8080, got %q", hf.addr)
	}
	for name, n := range map[string]int{"max-sessions": hf.maxSessions, "max-caller-sessions": hf.maxCallerSessions, "max-caller-requests": hf.maxCallerRequests} {
		if n == 0 {
			return nil, usagef("--%s must not be 0 (negative means no bound)", name)
		}
	}
	hs := &httpSetup{addr: hf.addr, opts: mcpserver.HTTPOptions{Anonymous: hf.anonymous, Stateless: hf.stateless,
		MaxSessions: hf.maxSessions, MaxSessionsPerCaller: hf.maxCallerSessions, MaxRequestsPerCaller: hf.maxCallerRequests}}
	var table string
	switch {
	case set["tokens"]:
		if hf.tokens == "" {
			return nil, usagef("--tokens must not be empty")
		}
		b, err := regfile.ReadFile(hf.tokens)
		if err != nil {
			return nil, fmt.Errorf("reading the token table: %w", err)
		}
		table, hs.source = string(b), hf.tokens
	case osenv.getenv("CRUX_AGENT_TOKENS") != "":
		table, hs.source = osenv.getenv("CRUX_AGENT_TOKENS"), "CRUX_AGENT_TOKENS"
	}
	if hs.source != "" {
		tok, err := mcpserver.ParseTokens(table)
		if err != nil {
			return nil, usagef("%s: %s", hs.source, strings.TrimPrefix(err.Error(), "crux: token table: "))
		}
		if tok.Len() == 0 {
			return nil, usagef("%s holds no token", hs.source)
		}
		hs.opts.Tokens = tok
	}
	hs.trustForwardedProto = hf.uiTrustForwardProto
	if len(hf.uiOperators) > 0 {
		if hs.opts.Tokens == nil {
			return nil, usagef("--ui-operator names an agent of the token table, and there is none (--tokens FILE or CRUX_AGENT_TOKENS)")
		}
		agents := map[string]bool{}
		for _, c := range hs.opts.Tokens.Callers() {
			if !c.Replica {
				agents[operatorKey(c)] = true
			}
		}
		hs.operators = map[string]bool{}
		for _, name := range hf.uiOperators {
			agent, tenant, _ := strings.Cut(name, "@")
			c := crux.Caller{Agent: agent, Authenticated: true, Tenant: tenant}
			if agent == "" || strings.HasSuffix(name, "@") || !agents[operatorKey(c)] {
				return nil, usagef("--ui-operator %q is not an agent of the token table %s (want NAME or NAME@TENANT as an entry names it)", name, hs.source)
			}
			hs.operators[operatorKey(c)] = true
		}
	}
	if hf.anonymous && hs.opts.Tokens == nil {
		return nil, usagef("--anonymous needs tokens (--tokens FILE or CRUX_AGENT_TOKENS): without them every request is anonymous already")
	}
	if !mcpserver.LoopbackAddr(hf.addr) {
		if !hf.allowRemote {
			return nil, usagef("--http %s is not a loopback address: serving other machines needs --allow-remote and bearer tokens", hf.addr)
		}
		if hs.opts.Tokens == nil {
			return nil, usagef("--http %s with --allow-remote needs bearer tokens (--tokens FILE or CRUX_AGENT_TOKENS)", hf.addr)
		}
	}
	return hs, nil
}

// serveHTTP is crux serve --http: MCP over Streamable HTTP on hs.addr
// through sess, until ctx is cancelled by a signal; then it stops
// accepting connections, answers every request in flight and returns nil.
// The URL it serves goes to announce, which shows it at the default log
// level.
func serveHTTP(ctx context.Context, s *setup, hs *httpSetup, sess *session, logger, announce *slog.Logger) error {
	if hs.source != "" && hs.source != "CRUX_AGENT_TOKENS" {
		if fi, err := os.Stat(hs.source); err == nil && fi.Mode().Perm()&0o077 != 0 {
			logger.Warn("crux: the token table can be read by other users; it should be mode 0600", "file", hs.source, "mode", fi.Mode().Perm())
		}
	}
	ln, err := net.Listen("tcp", hs.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", hs.addr, err)
	}
	hs.opts.Logger = logger
	// The view counts its requests under --max-caller-requests with the
	// MCP endpoint's, through the handler made once the view is.
	var mh *mcpserver.HTTPHandler
	vo := viewOptions(hs, logger)
	vo.Admit = func(c crux.Caller) (func(), *crux.Error) { return mh.AdmitRequest(c) }
	view, err := newView(s, sess, vo)
	if err != nil {
		ln.Close()
		return err
	}
	hs.opts.Other = view
	mh = mcpserver.NewHTTPHandler(sess, &hs.opts)
	url := "http://" + ln.Addr().String() + mcpserver.DefaultHTTPPath
	auth := "none: every request is anonymous"
	if hs.opts.Tokens != nil {
		auth = fmt.Sprintf("%d bearer tokens from %s", hs.opts.Tokens.Len(), hs.source)
		if hs.opts.Anonymous {
			auth += "; requests without a token are anonymous"
		}
	}
	announce.Info("crux: serving MCP over HTTP", "url", url, "db", filepath.Join(s.dir, dbFile),
		"auth", auth, "stateless", hs.opts.Stateless, "owner", sess.conn.Owner(),
		"sync", "http://"+ln.Addr().String()+syncremote.PathPrefix, "ui", "http://"+ln.Addr().String()+view.Prefix())
	err = mcpserver.ServeHandler(ctx, mh, ln)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		logger.Info("crux: stopping on signal; every request in flight was answered")
		return nil
	}
	return fmt.Errorf("serving MCP over HTTP: %w", err)
}

// viewOptions are the options of the web view crux serve --http serves
// beside MCP: the same token table and the same anonymous callers, so a
// page shows what the token's agent reads with the tools, and a request
// the MCP endpoint refuses for want of a token the view refuses too; the
// agents of --ui-operator are its operators, and it trusts
// X-Forwarded-Proto with --ui-trust-forwarded-proto.
func viewOptions(hs *httpSetup, logger *slog.Logger) web.Options {
	tr := crux.Transport{Kind: crux.TransportHTTP, Path: mcpserver.DefaultHTTPPath, Tokens: hs.opts.Tokens != nil,
		Anonymous: hs.opts.Anonymous || hs.opts.Tokens == nil, Stateless: hs.opts.Stateless}
	o := web.Options{Anonymous: tr.Anonymous, Logger: logger, TrustForwardedProto: hs.trustForwardedProto}
	if ops := hs.operators; len(ops) > 0 {
		o.IsOperator = func(c crux.Caller) bool { return c.Authenticated && !c.Replica && ops[operatorKey(c)] }
	}
	if tok := hs.opts.Tokens; tok != nil {
		o.Lookup = func(t string) (crux.Caller, bool) {
			c, ok := tok.Lookup(t)
			c.Transport = tr
			return c, ok
		}
	}
	return o
}

// newTokenCmd returns crux token new: a fresh bearer token for an agent,
// or for a sync replica, and the token table entry that stands for it.
func newTokenCmd(a *app) *cobra.Command {
	var tenant string
	var replica bool
	newCmd := &cobra.Command{
		Use:   "new [--tenant T] [--replica] NAME",
		Short: "Make a bearer token for an agent, or a sync replica, and its token table entry",
		Long: `Make a bearer token for the agent NAME (of tenant T): print the token, to
give to the MCP client, and its token table entry NAME[@T]=sha256:...,
which holds only the token's SHA-256 digest. crux serve --http reads the
table from --tokens FILE or $CRUX_AGENT_TOKENS.

With --replica, the token is a sync replica's, for another crux server (or
any replica) to sync with this one through /v1/sync/: the entry is
replica::NAME[@T]=sha256:..., and the other side sets it as its
CORECRUXD_SYNC_API_KEY. The sync API takes only a replica's token, and a
replica's token serves nothing but the sync API.`,
		RunE: func(_ *cobra.Command, pos []string) error {
			if len(pos) != 1 {
				return usagef("token new takes one name")
			}
			name := pos[0]
			if strings.HasPrefix(name, "replica::") {
				return usagef("give the replica's name without replica::, and --replica")
			}
			if replica {
				name = "replica::" + name
			}
			if tenant != "" {
				name += "@" + tenant
			}
			b := make([]byte, 32)
			rand.Read(b)
			token := base64.RawURLEncoding.EncodeToString(b)
			entry := name + "=" + mcpserver.TokenDigest(token)
			if _, err := mcpserver.ParseTokens(entry); err != nil {
				return usagef("%s", strings.TrimPrefix(err.Error(), "crux: token table: entry 1 (line 1): "))
			}
			_, err := fmt.Fprintf(a.stdout, "token: %s\nentry: %s\n", token, entry)
			return err
		},
	}
	newCmd.Flags().StringVar(&tenant, "tenant", "", "the `TENANT` of the agent or replica (default: default)")
	newCmd.Flags().BoolVar(&replica, "replica", false, "make a sync replica's token (replica::NAME), not an agent's")
	return parentCmd("token", "Make bearer tokens for crux serve --http", newCmd)
}
