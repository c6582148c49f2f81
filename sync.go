package crux

import (
	"context"
	"slices"

	"github.com/crux-go/crux/toolkit"
	"github.com/crux-go/crux/tools"
)

// Remote is another replica sync_pull and sync_push exchange facts with;
// see [tools.Remote] for the contract and the JSON wire shape.
type Remote = tools.Remote

// RemoteIdentity names a remote replica.
type RemoteIdentity = tools.RemoteIdentity

// ChangesRequest asks a remote for a page of its change log.
type ChangesRequest = tools.ChangesRequest

// ChangesResponse is a page of a remote's change log.
type ChangesResponse = tools.ChangesResponse

// PushRequest is a batch of fact versions pushed to a remote.
type PushRequest = tools.PushRequest

// PushResponse is what a remote did with a pushed batch.
type PushResponse = tools.PushResponse

// SyncIdentity names the server as a sync replica, for a replica calling
// as c: "crux:" and its signer's key id, and c's tenant. It is the serving
// side of [Remote.Identity].
//
// SyncIdentity, SyncChanges and SyncPush serve only a replica: c must be
// authenticated with Replica set (-32003 otherwise, data.reason
// "unauthenticated" or "replica_required"). An agent is never a replica,
// for pulling either: the change log pages out the tenant's shared facts
// wholesale, past the passport tiers, capabilities and tool surface that
// gate an agent's tools.
func (s *Server) SyncIdentity(ctx context.Context, c Caller) (RemoteIdentity, error) {
	if s.closed.Load() {
		return RemoteIdentity{}, toolkit.WrapError(CodeInternalError, "server is closed", ErrServerClosed)
	}
	if err := s.prepareCall(ctx); err != nil {
		return RemoteIdentity{}, err
	}
	return tools.ServeSyncIdentity(ctx, s.env, c)
}

// SyncChanges answers a replica calling as c with the versions of c's
// tenant's shared facts logged after req.Cursor. It is the serving side
// of [Remote.Changes]; errors are *Error values (-32602 for a bad cursor
// or limit, -32003 for a caller that is not an authenticated replica).
func (s *Server) SyncChanges(ctx context.Context, c Caller, req ChangesRequest) (*ChangesResponse, error) {
	if s.closed.Load() {
		return nil, toolkit.WrapError(CodeInternalError, "server is closed", ErrServerClosed)
	}
	if err := s.prepareCall(ctx); err != nil {
		return nil, err
	}
	return tools.ServeSyncChanges(ctx, s.env, c, req)
}

// SyncPush applies the versions a replica calling as c pushes to c's
// tenant, resolving conflicts by the rules of store.ApplySyncFacts, which
// also say what a replica may assert: every version applied is attributed
// to the replica, whatever owner it names; one stored more than
// store.MaxSyncClockSkew after the server's clock, or superseding a
// version the replica could not have been sent, is rejected and listed in
// the answer's Rejected with the reason. It is the serving side of
// [Remote.Push].
func (s *Server) SyncPush(ctx context.Context, c Caller, req PushRequest) (*PushResponse, error) {
	if s.closed.Load() {
		return nil, toolkit.WrapError(CodeInternalError, "server is closed", ErrServerClosed)
	}
	if err := s.prepareCall(ctx); err != nil {
		return nil, err
	}
	return tools.ServeSyncPush(ctx, s.env, c, req)
}

// ServerRemote returns a [Remote] over srv in the same process, calling as
// c, which must be a replica (Authenticated and Replica set, as a replica
// token of srv's HTTP endpoint would make it): what a Remote over HTTP
// does against a crux server, without the network. The answers are copied,
// so neither side shares memory with the other.
func ServerRemote(srv *Server, c Caller) Remote { return &serverRemote{srv: srv, c: c} }

type serverRemote struct {
	srv *Server
	c   Caller
}

func (r *serverRemote) Identity(ctx context.Context) (RemoteIdentity, error) {
	return r.srv.SyncIdentity(ctx, r.c)
}

func (r *serverRemote) Changes(ctx context.Context, req ChangesRequest) (*ChangesResponse, error) {
	resp, err := r.srv.SyncChanges(ctx, r.c, req)
	if err != nil {
		return nil, err
	}
	out := *resp
	out.Facts = slices.Clone(resp.Facts)
	return &out, nil
}

func (r *serverRemote) Push(ctx context.Context, req PushRequest) (*PushResponse, error) {
	return r.srv.SyncPush(ctx, r.c, PushRequest{Facts: slices.Clone(req.Facts)})
}
