package tools

import (
	"context"
	"encoding/json"

	"github.com/crux-go/crux/feature"
)

// syncTool is sync_pull or sync_push. crux has no client for a hosted sync
// platform: unconfigured, the tools say so as the reference does; configured,
// they say that crux does not contact the remote, rather than pretend.
func syncTool(name, what string) *Tool {
	return &Tool{
		Name: name,
		Description: what + " Hosted tier: needs a capability token that grants it. crux itself ships no " +
			"sync client, so the call reports that sync is not available rather than pretending to sync.",
		Annotations: Annotations{Title: name, OpenWorldHint: true},
		Output:      "isError result: sync not configured, or not available in crux",
		schema:      schemaFor(name),
		run: bind(name, func(_ context.Context, env *Env, _ Caller, _ *json.RawMessage) (*Result, error) {
			if env.Flags.SyncRemoteURL == "" {
				return errorResult("sync not configured: %s is not set", feature.EnvSyncRemoteURL), nil
			}
			return errorResult("sync not available: crux has no sync client and does not contact %s", feature.EnvSyncRemoteURL), nil
		}),
	}
}

func syncPull() *Tool {
	return syncTool("sync_pull", "Pull shared facts of a hosted tenant into this store.")
}

func syncPush() *Tool {
	return syncTool("sync_push", "Push locally created, non-private facts to a hosted tenant (preview unless confirm).")
}
