package main

import (
	"context"
	"log/slog"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/syncremote"
)

// Sync in the command: every server the owning process builds gets, as
// its crux.Options.Remote, a syncremote client of CORECRUXD_SYNC_REMOTE_URL
// authenticated by CORECRUXD_SYNC_API_KEY (the flags of the process that
// made the call, as for every flag). crux serve --http serves the other
// side beside /mcp: POST /v1/sync/identity, /v1/sync/changes and
// /v1/sync/push, each request run by the process owning the data
// directory (the ops below), as the replica and tenant of its bearer
// token, which must be a replica's entry of the token table
// (replica::NAME[@TENANT]; crux token new --replica NAME): an agent's
// token is refused there.
//
// The free-local token the command enforces holds no hosted capability,
// so sync_pull and sync_push are refused (-32030) in the command's own
// tools/call whatever the remote; what the remote makes real there is
// sync_status, and serving other replicas, which is not a tool call and
// needs only a replica's token of the table.

// syncRemote returns the sync remote of a server running with flags, or
// nil when sync is not configured: no URL, no API key (the tools then say
// which is missing), or a URL the client refuses, which is logged (never
// with the key).
func syncRemote(flags crux.Flags, logger *slog.Logger) crux.Remote {
	if flags.SyncRemoteURL == "" || !flags.SyncAPIKey.IsSet() {
		return nil
	}
	r, err := syncremote.New(flags.SyncRemoteURL, flags.SyncAPIKey.Reveal(), nil)
	if err != nil {
		logger.Warn("crux: sync is not configured: "+feature.EnvSyncRemoteURL+" cannot be used", "err", err)
		return nil
	}
	return r
}

// syncReq is a sync request forwarded to the owning process: the caller
// (the replica, as its bearer token names it, Replica set) and the
// request.
type syncReq struct {
	Env     []string             `json:"env"`
	Caller  wireCaller           `json:"caller"`
	Changes *crux.ChangesRequest `json:"changes,omitempty"`
	Push    *crux.PushRequest    `json:"push,omitempty"`
}

func (h *host) syncIdentity(ctx context.Context, req syncReq) (any, error) {
	srv, err := h.server(req.Env)
	if err != nil {
		return nil, err
	}
	return srv.SyncIdentity(ctx, req.Caller.caller())
}

func (h *host) syncChanges(ctx context.Context, req syncReq) (any, error) {
	srv, err := h.server(req.Env)
	if err != nil {
		return nil, err
	}
	if req.Changes == nil {
		req.Changes = &crux.ChangesRequest{}
	}
	return srv.SyncChanges(ctx, req.Caller.caller(), *req.Changes)
}

func (h *host) syncPush(ctx context.Context, req syncReq) (any, error) {
	srv, err := h.server(req.Env)
	if err != nil {
		return nil, err
	}
	if req.Push == nil {
		req.Push = &crux.PushRequest{}
	}
	return srv.SyncPush(ctx, req.Caller.caller(), *req.Push)
}

// SyncIdentity serves a replica's identity request, in-process when this
// process holds the store, else through the owner (see
// mcpserver.SyncBackend).
func (ss *session) SyncIdentity(ctx context.Context, c crux.Caller) (crux.RemoteIdentity, error) {
	var out crux.RemoteIdentity
	err := ss.run(ctx, opSyncIdentity, syncReq{Env: ss.env, Caller: toWire(c)}, &out, func(srv *crux.Server) error {
		var err error
		out, err = srv.SyncIdentity(ctx, c)
		return err
	})
	return out, err
}

// SyncChanges serves a page of the change log to a replica (see
// SyncIdentity).
func (ss *session) SyncChanges(ctx context.Context, c crux.Caller, req crux.ChangesRequest) (*crux.ChangesResponse, error) {
	var out *crux.ChangesResponse
	err := ss.run(ctx, opSyncChanges, syncReq{Env: ss.env, Caller: toWire(c), Changes: &req}, &out, func(srv *crux.Server) error {
		var err error
		out, err = srv.SyncChanges(ctx, c, req)
		return err
	})
	return out, err
}

// SyncPush applies a replica's pushed versions (see SyncIdentity).
func (ss *session) SyncPush(ctx context.Context, c crux.Caller, req crux.PushRequest) (*crux.PushResponse, error) {
	var out *crux.PushResponse
	err := ss.run(ctx, opSyncPush, syncReq{Env: ss.env, Caller: toWire(c), Push: &req}, &out, func(srv *crux.Server) error {
		var err error
		out, err = srv.SyncPush(ctx, c, req)
		return err
	})
	return out, err
}
