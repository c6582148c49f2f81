package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/mcpserver"
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
for a session cookie and spent). Forgets made from the view can be
restored from it while their recovery window lasts. Stops on SIGINT or
SIGTERM.`,
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
			h := web.New(sess, &web.Options{Lookup: once, Operator: uiOperator{sess: sess, tenant: s.caller.TenantID()}, Logger: a.logger})
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

// uiOperator is the web view's Operator over a session: the forgets of
// one tenant (crux forgets list's) and crux forget restore.
type uiOperator struct {
	sess   *session
	tenant string
}

func (o uiOperator) ForgetStatus(ctx context.Context, id string) (*crux.ForgetInfo, error) {
	var ans forgetsAnswer
	if err := o.sess.do(ctx, opForgets, forgetsReq{Tenant: o.tenant, Limit: maxForgets}, &ans); err != nil {
		return nil, err
	}
	for _, f := range ans.Forgets {
		if f.ForgetReceiptID == id {
			return &crux.ForgetInfo{
				ForgetReceiptID: f.ForgetReceiptID, TenantID: f.TenantID, PassportID: f.PassportID, Reason: f.Reason,
				Scope: f.Scope, State: f.State, InitiatedAt: f.InitiatedAt, RecoveryWindowEndsAt: f.RecoveryWindowEndsAt,
				RestoredAt: f.RestoredAt, RestoreReceiptID: f.RestoreReceiptID, PurgedAt: f.PurgedAt, PurgeReceiptID: f.PurgeReceiptID,
				FactIDs: []string{},
			}, nil
		}
	}
	return nil, fmt.Errorf("forget %s: %w", id, store.ErrNotFound)
}

func (o uiOperator) RestoreForget(ctx context.Context, id string) (*crux.RestoreReport, error) {
	var rep crux.RestoreReport
	if err := o.sess.do(ctx, opRestore, restoreReq{Env: o.sess.env, ReceiptID: id}, &rep); err != nil {
		return nil, err
	}
	return &rep, nil
}
