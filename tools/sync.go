package tools

import (
	"context"

	"github.com/crux-go/crux/feature"
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

// SyncOutput is the output type of sync_pull and sync_push, which have no
// successful answer in crux: every call is an isError result saying why.
type SyncOutput struct{}

// syncTool is sync_pull or sync_push, whose arguments decode into In. crux
// has no client for a hosted sync platform: unconfigured, the tools say so;
// configured, they say that crux does not contact the remote, rather than
// pretend. Either way the arguments are checked and nothing is done with
// them.
func syncTool[In any](name, title, what string) *Tool {
	return &Tool{
		Name:        name,
		Description: what + " Hosted tier. crux ships no sync client: the call says sync is not available.",
		Annotations: Annotations{Title: title, OpenWorldHint: true},
		Output:      "isError result: sync not configured, or not available in crux",
		schema:      schemaFor(name),
		out:         outputOf[SyncOutput](),
		run: bind(name, func(_ context.Context, env *Env, _ Caller, _ *In) (*Result, error) {
			if env.Flags.SyncRemoteURL == "" {
				return errorResult("sync not configured: %s is not set", feature.EnvSyncRemoteURL), nil
			}
			return errorResult("sync not available: crux has no sync client and does not contact %s", feature.EnvSyncRemoteURL), nil
		}),
	}
}

func syncPull() *Tool {
	return syncTool[syncPullArgs]("sync_pull", "Sync pull", "Pull shared facts of a hosted tenant into this store.")
}

func syncPush() *Tool {
	return syncTool[syncPushArgs]("sync_push", "Sync push", "Push locally created, non-private facts to a hosted tenant (preview unless confirm).")
}
