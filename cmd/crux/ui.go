package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/mcpserver"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/web"
)

// newUICmd returns crux ui: the web view of the memory (package web) on
// 127.0.0.1, for the agent named, signed in by a one-time token in the
// URL it prints.
func newUICmd(a *app) *cobra.Command {
	var cf *commonFlags
	var addr string
	c := &cobra.Command{
		Use:   "ui [--data DIR] [--agent NAME] [--addr 127.0.0.1:PORT]",
		Short: "Open the memory in a browser: facts, search, history, corrections",
		Long: `Serve the web view of the memory on a loopback address (default: a free
port on 127.0.0.1), as the agent named by --agent (else $CRUX_AGENT;
anonymous without one): every page is the answer of the tools that agent
calls, and every correction is one of its tool calls. Prints a URL with a
one-time token; opening it signs the browser in (the token is exchanged
for a session cookie and spent). Whoever opens it runs the memory: an
operator of the view, who sees the tenant's whole receipt chain and audits
it, and sees and restores any forget of the tenant while its recovery
window lasts. Stops on SIGINT or SIGTERM.`,
		RunE: func(c *cobra.Command, pos []string) error {
			if err := noArgs("ui", pos); err != nil {
				return err
			}
			if !mcpserver.LoopbackAddr(addr) {
				return usagef("--addr must be a loopback host:port, such as 127.0.0.1:8081, got %q", addr)
			}
			s, err := resolve(c.Flags(), cf, a.env)
			if err != nil {
				return err
			}
			sess, err := s.join(a.ctx, a.logger)
			if err != nil {
				return err
			}
			defer sess.close()
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listening on %s: %w", addr, err)
			}
			token, once := web.OneTimeToken(s.caller)
			// The one-time token is the person's who ran crux ui, who owns
			// the data directory (crux verify chain and crux forget restore
			// are theirs already): an operator of the view.
			h, err := newView(s, sess, web.Options{Lookup: once, TokenInURL: true, Logger: a.logger,
				IsOperator: func(crux.Caller) bool { return true }})
			if err != nil {
				ln.Close()
				return err
			}
			fmt.Fprintf(a.stdout, "crux: the memory of %s, open: http://%s%ssignin?token=%s\n", s.caller.Name(), ln.Addr(), h.Prefix(), token)
			srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ln) }()
			select {
			case err := <-served:
				return err
			case <-a.ctx.Done():
			}
			if err := srv.Shutdown(context.Background()); err != nil {
				return err
			}
			if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cf = withCommon(c)
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:0", "listen on `HOST:PORT`, a loopback address")
	return c
}

// The operations of the web view (package web) that are not tool calls.
const (
	opForgetStatus = "forget/status" // forgetStatusReq → forgetStatusAnswer
	opChainPage    = "chain/page"    // chainPageReq → web.ChainPage
	opHandoffs     = "handoffs/list" // handoffsReq → web.HandoffList
)

type (
	forgetStatusReq struct {
		Env       []string `json:"env"`
		ReceiptID string   `json:"receipt_id"`
	}
	// forgetStatusAnswer is the forget, or nil when there is none.
	forgetStatusAnswer struct {
		Forget *crux.ForgetInfo `json:"forget"`
	}
	handoffsReq struct {
		Tenant string `json:"tenant"`
		Agent  string `json:"agent"`
		Limit  int    `json:"limit"`
	}
	chainPageReq struct {
		Tenant string `json:"tenant"`
		Actor  string `json:"actor,omitempty"`
		Before uint64 `json:"before,omitempty"`
		Limit  int    `json:"limit"`
	}
)

// forgetStatus reads one forget, of any tenant: the view shows it only to
// the agent that made it.
func (h *host) forgetStatus(ctx context.Context, req forgetStatusReq) (any, error) {
	srv, err := h.server(req.Env)
	if err != nil {
		return nil, err
	}
	info, err := srv.ForgetStatus(ctx, req.ReceiptID)
	if errors.Is(err, store.ErrNotFound) {
		return forgetStatusAnswer{}, nil
	}
	if err != nil {
		return nil, err
	}
	return forgetStatusAnswer{Forget: info}, nil
}

// chainPage is a page of a tenant's receipt chain, verified with the data
// directory's key.
func (h *host) chainPage(ctx context.Context, req chainPageReq) (any, error) {
	return web.NewStoreLedger(h.db, receipts.NewKeyring(h.signer.Public()), nil).ChainPage(ctx, req.Tenant, req.Actor, req.Before, req.Limit)
}

// handoffs lists an agent's handoffs.
func (h *host) handoffs(ctx context.Context, req handoffsReq) (any, error) {
	return web.NewStoreLedger(h.db, nil, nil).Handoffs(ctx, req.Tenant, req.Agent, req.Limit)
}

// viewOperator is the web view's Operator over a session: a forget read
// back (crux forgets list's record) and crux forget restore.
type viewOperator struct{ sess *session }

func (o viewOperator) ForgetStatus(ctx context.Context, id string) (*crux.ForgetInfo, error) {
	var ans forgetStatusAnswer
	if err := o.sess.do(ctx, opForgetStatus, forgetStatusReq{Env: o.sess.env, ReceiptID: id}, &ans); err != nil {
		return nil, err
	}
	if ans.Forget == nil {
		return nil, fmt.Errorf("forget %s: %w", id, store.ErrNotFound)
	}
	return ans.Forget, nil
}

func (o viewOperator) RestoreForget(ctx context.Context, id string) (*crux.RestoreReport, error) {
	var rep crux.RestoreReport
	if err := o.sess.do(ctx, opRestore, restoreReq{Env: o.sess.env, ReceiptID: id}, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}

// viewLedger is the web view's Ledger over a session: chain/page, and
// crux verify chain's audit with the keyring kr.
type viewLedger struct {
	sess *session
	kr   json.RawMessage
}

func (l viewLedger) ChainPage(ctx context.Context, tenant, actor string, before uint64, limit int) (*web.ChainPage, error) {
	var p web.ChainPage
	if err := l.sess.do(ctx, opChainPage, chainPageReq{Tenant: tenant, Actor: actor, Before: before, Limit: limit}, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

func (l viewLedger) Forgets(ctx context.Context, tenant string, limit, scan int) (*web.ForgetList, error) {
	var list web.ForgetList // crux forgets list's answer, field for field
	if err := l.sess.do(ctx, opForgets, forgetsReq{Tenant: tenant, Limit: limit, Scan: scan}, &list); err != nil {
		return nil, err
	}
	return &list, nil
}

func (l viewLedger) Handoffs(ctx context.Context, tenant, agent string, limit int) (*web.HandoffList, error) {
	var list web.HandoffList
	if err := l.sess.do(ctx, opHandoffs, handoffsReq{Tenant: tenant, Agent: agent, Limit: limit}, &list); err != nil {
		return nil, err
	}
	return &list, nil
}

func (l viewLedger) AuditChain(ctx context.Context, tenant string) (receipts.ChainAudit, error) {
	var a receipts.ChainAudit
	err := l.sess.do(ctx, opChain, chainReq{Tenant: tenant, Keyring: l.kr}, &a)
	return a, err
}

// newView returns the web view over sess for crux ui and crux serve
// --http, with its operator and ledger (the data directory's key).
func newView(s *setup, sess *session, opts web.Options) (*web.Handler, error) {
	signer, err := s.signer()
	if err != nil {
		return nil, err
	}
	kr, err := json.Marshal(receipts.NewKeyring(signer.Public()))
	if err != nil {
		return nil, err
	}
	opts.Operator, opts.Ledger = viewOperator{sess: sess}, viewLedger{sess: sess, kr: kr}
	return web.New(sess, &opts), nil
}
