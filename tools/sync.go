package tools

import (
	"context"

	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/store"
)

type syncPullArgs struct {
	EntityPrefix string `json:"entity_prefix,omitempty"`
	TenantID     string `json:"tenant_id,omitempty"`
}

type syncPushArgs struct {
	Confirm   bool     `json:"confirm,omitempty"`
	TenantID  string   `json:"tenant_id,omitempty"`
	Allowlist []string `json:"allowlist,omitempty"`
}

// syncTool is sync_pull or sync_push, whose arguments decode into In. crux
// has no client for a hosted sync platform: unconfigured, the tools say so;
// configured, they say that crux does not contact the remote, rather than
// pretend. Either way the arguments are checked and nothing is done with
// them.
func syncTool[In any](name, what string) *Tool {
	return &Tool{
		Name: name,
		Description: what + " Hosted tier: needs a capability token that grants it. crux itself ships no " +
			"sync client, so the call reports that sync is not available rather than pretending to sync.",
		Annotations: Annotations{Title: name, OpenWorldHint: true},
		Output:      "isError result: sync not configured, or not available in crux",
		schema:      schemaFor(name),
		run: bind(name, func(_ context.Context, env *Env, _ Caller, _ *In) (*Result, error) {
			if env.Flags.SyncRemoteURL == "" {
				return errorResult("sync not configured: %s is not set", feature.EnvSyncRemoteURL), nil
			}
			return errorResult("sync not available: crux has no sync client and does not contact %s", feature.EnvSyncRemoteURL), nil
		}),
	}
}

func syncPull() *Tool {
	return syncTool[syncPullArgs]("sync_pull", "Pull shared facts of a hosted tenant into this store.")
}

func syncPush() *Tool {
	return syncTool[syncPushArgs]("sync_push", "Push locally created, non-private facts to a hosted tenant (preview unless confirm).")
}

// Remote is another replica sync_pull and sync_push exchange a tenant's
// shared facts with. The caller's tenant on the remote is the remote's
// business: it is whatever tenant the remote's own authentication maps
// this replica to. Implementations must be safe for concurrent use and
// honour ctx.
//
// The wire shape, for a remote over HTTP: each method is one POST of a
// JSON request to a path under the remote's base URL, with the sync API
// key as a bearer token, answered with a JSON body (or an HTTP error):
//
//	Identity  POST /v1/sync/identity  {}                                    → RemoteIdentity
//	Changes   POST /v1/sync/changes   ChangesRequest {cursor, entity_prefix, limit} → ChangesResponse {facts, cursor, more}
//	Push      POST /v1/sync/push      PushRequest {facts}                   → PushResponse {applied, duplicates, conflicts, rejected}
//
// A fact is a store.SyncFact: {fact_id, entity, key, value,
// source_receipt?, confidence, stored_at (RFC 3339), horizon_class,
// supersedes?, owner?}. crux.Server's SyncIdentity, SyncChanges and
// SyncPush are the serving side; crux.ServerRemote adapts a Server in the
// same process.
type Remote interface {
	// Identity names the remote. Name must be stable: the sync state
	// (cursors, counts) is kept under it.
	Identity(ctx context.Context) (RemoteIdentity, error)
	// Changes returns the versions logged after req.Cursor.
	Changes(ctx context.Context, req ChangesRequest) (*ChangesResponse, error)
	// Push applies req.Facts on the remote, which resolves conflicts as
	// store.ApplySyncFacts does.
	Push(ctx context.Context, req PushRequest) (*PushResponse, error)
}

// RemoteIdentity names a remote replica.
type RemoteIdentity struct {
	// Name is the replica's stable name: for a crux server, "crux:" and
	// the key id of its receipt signer.
	Name string `json:"name"`
	// KeyID is the key id of the replica's receipt signer, when it has one.
	KeyID string `json:"key_id,omitempty"`
	// Tenant is the tenant the replica serves this caller from.
	Tenant string `json:"tenant"`
}

// ChangesRequest asks a remote for the versions logged after Cursor ("" for
// the start) whose entity starts with EntityPrefix, at most Limit of them.
type ChangesRequest struct {
	Cursor       string `json:"cursor"`
	EntityPrefix string `json:"entity_prefix,omitempty"`
	Limit        int    `json:"limit"`
}

// ChangesResponse is a page of a remote's change log: the versions, the
// cursor to ask from next, and whether more follow.
type ChangesResponse struct {
	Facts  []store.SyncFact `json:"facts"`
	Cursor string           `json:"cursor"`
	More   bool             `json:"more"`
}

// PushRequest is a batch of versions for a remote to apply.
type PushRequest struct {
	Facts []store.SyncFact `json:"facts"`
}

// PushResponse is what a remote did with a pushed batch.
type PushResponse = store.SyncApplied
