package mcpserver

import (
	"context"
	"errors"
	"net/http"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/syncremote"
)

// SyncBackend is the optional interface of a [Backend] that serves crux
// sync to other replicas: the serving side of crux.Remote, as
// crux.Server's SyncIdentity, SyncChanges and SyncPush. [Local] returns
// one; an HTTPHandler over a Backend that is one serves the sync requests
// of package syncremote beside the MCP endpoint.
type SyncBackend interface {
	Backend
	// SyncIdentity names the server as a replica, for c.
	SyncIdentity(ctx context.Context, c crux.Caller) (crux.RemoteIdentity, error)
	// SyncChanges answers a page of c's tenant's change log.
	SyncChanges(ctx context.Context, c crux.Caller, req crux.ChangesRequest) (*crux.ChangesResponse, error)
	// SyncPush applies versions c pushes to its tenant.
	SyncPush(ctx context.Context, c crux.Caller, req crux.PushRequest) (*crux.PushResponse, error)
}

func (l local) SyncIdentity(ctx context.Context, c crux.Caller) (crux.RemoteIdentity, error) {
	return l.srv.SyncIdentity(ctx, c)
}

func (l local) SyncChanges(ctx context.Context, c crux.Caller, req crux.ChangesRequest) (*crux.ChangesResponse, error) {
	return l.srv.SyncChanges(ctx, c, req)
}

func (l local) SyncPush(ctx context.Context, c crux.Caller, req crux.PushRequest) (*crux.PushResponse, error) {
	return l.srv.SyncPush(ctx, c, req)
}

// serveSync answers a sync request (path is one of syncremote's) of
// caller c, already checked for Host, Origin and token.
func (h *HTTPHandler) serveSync(w http.ResponseWriter, r *http.Request, sb SyncBackend, c crux.Caller) {
	ctx := r.Context()
	var (
		out any
		err error
	)
	switch r.URL.Path {
	case syncremote.PathIdentity:
		var req struct{}
		if !h.readSync(w, r, &req) {
			return
		}
		out, err = sb.SyncIdentity(ctx, c)
	case syncremote.PathChanges:
		var req crux.ChangesRequest
		if !h.readSync(w, r, &req) {
			return
		}
		out, err = sb.SyncChanges(ctx, c, req)
	case syncremote.PathPush:
		var req crux.PushRequest
		if !h.readSync(w, r, &req) {
			return
		}
		out, err = sb.SyncPush(ctx, c, req)
	default:
		syncremote.WriteError(w, http.StatusNotFound, &crux.Error{Code: crux.CodeMethodNotFound, Message: "sync: no such request: " + quote(r.URL.Path)})
		return
	}
	if err != nil {
		var ce *crux.Error
		if !errors.As(err, &ce) {
			h.logger.Error("crux: sync request failed", "path", r.URL.Path, "agent", c.Agent, "tenant", c.TenantID(), "err", err)
			ce = &crux.Error{Code: crux.CodeInternalError, Message: "sync: internal error; nothing was applied"}
		}
		if ce.Code != crux.CodeInvalidParams {
			h.logger.Warn("crux: sync request refused", "path", r.URL.Path, "agent", c.Agent, "tenant", c.TenantID(), "code", ce.Code, "message", ce.Message)
		}
		syncremote.WriteError(w, 0, ce)
		return
	}
	if err := syncremote.WriteJSON(w, out); err != nil {
		h.logger.Warn("crux: writing a sync answer", "path", r.URL.Path, "err", err)
	}
}

// readSync decodes a sync request's body into v, or answers the error and
// returns false.
func (h *HTTPHandler) readSync(w http.ResponseWriter, r *http.Request, v any) bool {
	status, e := syncremote.ReadRequest(w, r, v)
	if e == nil {
		return true
	}
	h.logger.Warn("crux: HTTP request refused", "status", status, "reason", e.Message, "remote", r.RemoteAddr)
	syncremote.WriteError(w, status, e)
	return false
}
