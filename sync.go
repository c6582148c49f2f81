package crux

import "github.com/crux-go/crux/tools"

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
