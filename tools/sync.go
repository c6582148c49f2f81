package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// Sync and update: sync_pull, sync_push, sync_status (update_status is in
// update_status.go).
//
// A server exchanges its tenants' shared facts with a [Remote]: another
// replica, such as another crux server. The rules by which versions are
// numbered, sent and applied, conflicts included, are store's (see
// store.SyncFact and store.ApplySyncFacts); this file holds the tools and
// the serving side ([ServeSyncChanges], [ServeSyncPush]).
//
// Decisions taken where the CueCrux tool contract is silent:
//
//   - Without a Remote (crux.Options.Remote) sync is not configured and
//     sync_pull and sync_push answer an error result saying so;
//     sync_status still reports what the store holds. Its remote_url is
//     the Remote's own when it has a URL method (as syncremote's client
//     has), else CORECRUXD_SYNC_REMOTE_URL; either without user
//     information or query.
//   - A remote that refuses the exchange (a *Error of code -32003 or
//     -32030 from the Remote, such as a bad API key) makes the call fail
//     with the same code, data.reason "remote_refused" and the remote's
//     error under data.remote; any other failure of the remote is an
//     error result, and sync_status reports it.
//   - Both tools sync the caller's tenant; tenant_id, when given, must be
//     it (another tenant is -32003). sync_pull needs a passport of tier
//     basic or above, sync_push established or above (-32003 otherwise,
//     for anonymous callers too).
//   - sync_pull honours entity_prefix: only those entities are pulled, and
//     the remote's cursor is kept per prefix (at most store.MaxPullCursors
//     prefixes per remote).
//   - sync_push pushes the versions of the change log after the push
//     cursor that were written here: versions that came by sync are never
//     pushed back, deleted ones are passed over, and private facts and
//     reserved entities never enter the log. allowlist entries are *,
//     facts or collection:facts (everything) and entity:<prefix>; crux
//     syncs facts only, so other entries (constraints, plans, ...) are
//     -32602. A version the allowlist leaves out holds the push cursor
//     where it is, so a later push with a wider allowlist still sends it;
//     versions after it that were pushed are sent again then, and the
//     remote counts them as duplicates.
//   - Without confirm, sync_push previews: it asks the remote only for its
//     identity (the push cursor is kept per remote) and pushes nothing.
//   - The serving side ([ServeSyncIdentity], [ServeSyncChanges],
//     [ServeSyncPush]) serves a replica only: a Caller with Replica set,
//     which a replica's entry of the token table makes. An agent is
//     refused (-32003, data.reason "replica_required"), for pulling too:
//     the change log pages out every shared fact of the tenant past the
//     tiers, capabilities and tool surface that gate an agent's reads,
//     and its identity answer is the first step of an exchange. A replica
//     is refused every tool.
//   - What a replica sends, pushed to this server or pulled from a remote,
//     is held to what it may assert (store.ApplySyncFacts): it is owned
//     here by the replica, not by the owner it names; a stored_at more
//     than store.MaxSyncClockSkew past this server's clock, or a
//     supersedes naming a version it could not have been sent, is
//     rejected and listed in rejected with the reason.
//   - One call moves at most MaxSyncFacts versions, in pages of
//     syncPage, each page applied in its own transaction; more: true says
//     that more remain. The remote is contacted outside any transaction.

// Bounds of sync.
const (
	// MaxSyncFacts caps the versions one sync_pull or sync_push moves.
	MaxSyncFacts = 1000
	// syncPage is how many versions one request to the remote carries.
	syncPage = 250
	// MaxSyncPageBytes bounds a page of versions in its JSON wire form,
	// one request's or one answer's: 8 MiB. A page holds fewer versions
	// than asked for rather than more bytes, but always one version,
	// which may be larger (a value is at most 1 MiB, up to six times that
	// once escaped). A transport that bounds its bodies must take 16 MiB.
	MaxSyncPageBytes = 8 << 20
	// maxSyncPages caps the requests one sync_pull makes, however few
	// versions each page brings (a rare entity_prefix).
	maxSyncPages = 2 * MaxSyncFacts / syncPage
	// maxSyncScan caps the change-log entries one call reads.
	maxSyncScan = 10000
	// maxSyncListed caps the conflicts and previewed facts an answer
	// lists.
	maxSyncListed = 32
	// maxSyncStates caps the remotes sync_status lists.
	maxSyncStates = 16
)

type syncPullArgs struct {
	EntityPrefix string `json:"entity_prefix,omitempty" schema:"minLength=1"`
	TenantID     string `json:"tenant_id,omitempty" schema:"minLength=1"`
}

type syncPushArgs struct {
	Confirm   bool     `json:"confirm,omitempty" schema:"default=false"`
	TenantID  string   `json:"tenant_id,omitempty" schema:"minLength=1"`
	Allowlist []string `json:"allowlist,omitempty" schema:"items.minLength=1;maxItems=64;minItems=1" doc:"*, facts, collection:facts or entity:<prefix>."`
}

// SyncConflict is a conflict as the sync tools report it: which side's
// version was kept.
type SyncConflict struct {
	Entity       string `json:"entity"`
	Key          string `json:"key"`
	LocalFactID  string `json:"local_fact_id"`
	RemoteFactID string `json:"remote_fact_id"`
	Kept         string `json:"kept"` // local or remote
}

// notConfigured is the answer of a sync tool on a server without a Remote.
func notConfigured(env *toolkit.Env) *toolkit.Result {
	switch {
	case env.Flags.SyncRemoteURL == "":
		return toolkit.ErrorResult("sync not configured: %s is not set", feature.EnvSyncRemoteURL)
	case !env.Flags.SyncAPIKey.IsSet():
		return toolkit.ErrorResult("sync not configured: %s is set but %s is not", feature.EnvSyncRemoteURL, feature.EnvSyncAPIKey)
	}
	return toolkit.ErrorResult("sync not configured: %s is set, but this server has no remote client to reach it "+
		"(the crux command makes one for an http or https URL; an embedder passes crux.Options.Remote)", feature.EnvSyncRemoteURL)
}

// syncTenant checks tenant_id against the caller's tenant.
func syncTenant(tool, tenantID string, c toolkit.Caller) error {
	if err := checkName(tool, "tenant_id", tenantID); err != nil {
		return err
	}
	if tenantID != "" && tenantID != c.TenantID() {
		return toolkit.Forbidden(tool, "cross_tenant", "tenant_id %q is not your tenant %q; sync never crosses tenants", tenantID, c.TenantID())
	}
	return nil
}

// requireTier checks, in tx, that c holds a live passport of its tenant of
// earned tier need or above, for what (the tool, or what of it needs the
// tier). Anything less is -32003.
func requireTier(tx store.Tx, tool, what string, c toolkit.Caller, need string) error {
	what = fmt.Sprintf("%s needs a passport of tier %s or above", what, need)
	return requirePassportTier(tx, tool, "tier_required", what, c, need)
}

// requirePassportTier checks, in tx, that c holds a live passport of its
// tenant of earned tier need or above; anything less is -32003 of reason
// (passport_revoked or passport_retired for such a passport), its message
// ending in what: why the tier is needed.
func requirePassportTier(tx store.Tx, tool, reason, what string, c toolkit.Caller, need string) error {
	id, tenant := c.Identity(), c.TenantID()
	if err := needIdentity(tool, c); err != nil {
		return err
	}
	p, err := store.GetPassport(tx, tenant, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return toolkit.Forbidden(tool, reason, "%s has no passport in tenant %s; %s", id, tenant, what)
	case err != nil:
		return err
	case p.Revoked():
		return toolkit.Forbidden(tool, "passport_revoked", "your passport %s was revoked; %s", id, what)
	case p.Retired():
		return toolkit.Forbidden(tool, "passport_retired", "your passport %s was retired into %s by a merge; %s", id, p.RetiredInto, what)
	}
	tier, s, err := earnedTier(tx, tenant, id)
	if err != nil {
		return err
	}
	if store.TierRank(tier) < store.TierRank(need) {
		e := toolkit.Forbidden(tool, reason, "your passport %s is of %s; %s", id, tierShortfall(tier, s), what)
		e.Data = map[string]any{"reason": reason, "tier": tier, "required_tier": need}
		return e
	}
	return nil
}

// remoteName asks the remote for its identity.
func (d *Deps) remoteName(ctx context.Context) (RemoteIdentity, error) {
	id, err := d.Remote.Identity(ctx)
	if err != nil {
		return id, err
	}
	if id.Name == "" || strings.ContainsRune(id.Name, 0) || len(id.Name) > toolkit.MaxCallerNameBytes {
		return id, fmt.Errorf("the remote named itself %q, which is not a usable replica name", id.Name)
	}
	return id, nil
}

// recordSyncError keeps a failed exchange's error in the sync state. A
// failure to record it is logged, not returned: the call already failed.
func recordSyncError(ctx context.Context, env *toolkit.Env, remote, tenant string, failure error) {
	now := env.Time()
	err := env.Store.Update(ctx, func(tx store.Tx) error {
		st, err := store.GetSyncState(tx, remote, tenant)
		if err != nil {
			return err
		}
		st.LastError, st.LastErrorAt = failure.Error(), &now
		return store.PutSyncState(tx, st)
	})
	if err != nil {
		env.Logger.Error("crux: recording a sync failure", "remote", remote, "err", err)
	}
}

// remoteFailure is the error result of a call whose remote failed.
func remoteFailure(tool string, err error) *toolkit.Result {
	return toolkit.ErrorResult("%s: the remote failed: %v", tool, err)
}

// remoteRefusal is the error of a call the remote refused: when err is an
// *Error of code -32003 or -32030 (the remote does not accept this
// replica's credentials or standing), the same code, with the remote's
// message and data under data.remote. Any other failure is nil: the
// caller reports it as a failed exchange (remoteFailure).
func remoteRefusal(tool string, err error) *toolkit.Error {
	var e *toolkit.Error
	if !errors.As(err, &e) || (e.Code != toolkit.CodeForbidden && e.Code != toolkit.CodeCapabilityDenied) {
		return nil
	}
	return &toolkit.Error{Code: e.Code, Message: tool + ": the remote refused the exchange: " + e.Message,
		Data: map[string]any{"reason": "remote_refused", "remote": map[string]any{"code": e.Code, "message": e.Message, "data": e.Data}}}
}

// syncPages cuts batch into the pages sync_push sends: at most syncPage
// versions and MaxSyncPageBytes each (a larger version alone).
func syncPages(batch []store.SyncFact) [][]store.SyncFact {
	var pages [][]store.SyncFact
	start, size := 0, 0
	for i := range batch {
		n := batch[i].WireSize()
		if i > start && (i-start == syncPage || size+n > MaxSyncPageBytes) {
			pages = append(pages, batch[start:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(batch) {
		pages = append(pages, batch[start:])
	}
	return pages
}

// redactURL is u without the user information and query a URL may carry
// (a credential belongs in CORECRUXD_SYNC_API_KEY, never in an answer).
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(not a URL)"
	}
	if p.User == nil && p.RawQuery == "" && p.Fragment == "" {
		return u
	}
	p.User, p.RawQuery, p.Fragment, p.ForceQuery = nil, "", "", false
	return p.String() + " (credentials removed)"
}

func (d *Deps) syncPull() *toolkit.Tool {
	const name = "sync_pull"
	return &toolkit.Tool{
		Name:        name,
		Description: "Pull your tenant's shared facts from the sync remote since the last pull; of concurrent versions the later wins. Tier basic.",
		Annotations: toolkit.Annotations{Title: "Sync pull", OpenWorldHint: true},
		Out:         toolkit.OutputOf[SyncPullOutput](),
		Run:         toolkit.Bind(name, d.runSyncPull),
	}
}

// syncRemote is how sync_pull and sync_push begin once their arguments
// are checked (name is the calling tool's): with the sync remote's
// identity, or with the result or error that ends the call: crux runs
// with no remote, c is below tier, or the remote refuses or cannot be
// reached.
func (d *Deps) syncRemote(ctx context.Context, env *toolkit.Env, c toolkit.Caller, name, tier string) (RemoteIdentity, *toolkit.Result, error) {
	if d.Remote == nil {
		return RemoteIdentity{}, notConfigured(env), nil
	}
	if err := env.Store.View(ctx, func(tx store.Tx) error { return requireTier(tx, name, name, c, tier) }); err != nil {
		return RemoteIdentity{}, nil, err
	}
	id, err := d.remoteName(ctx)
	if err != nil {
		if e := remoteRefusal(name, err); e != nil {
			return id, nil, e
		}
		return id, remoteFailure(name, err), nil
	}
	return id, nil, nil
}

// remoteError ends a sync_pull or sync_push (tool name) whose request to
// remote failed with err: the failure is recorded in tenant's sync state,
// and the call answers the remote's refusal as its error, or else a
// failure result whose text ends with note.
func remoteError(ctx context.Context, env *toolkit.Env, name, remote, tenant string, err error, note string) (*toolkit.Result, error) {
	recordSyncError(ctx, env, remote, tenant, err)
	if e := remoteRefusal(name, err); e != nil {
		return nil, e
	}
	res := remoteFailure(name, err)
	res.Content[0].Text += note
	return res, nil
}

// runSyncPull runs one sync_pull call.
func (d *Deps) runSyncPull(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *syncPullArgs) (*toolkit.Result, error) {
	const name = "sync_pull"
	if err := syncTenant(name, in.TenantID, c); err != nil {
		return nil, err
	}
	if err := checkName(name, "entity_prefix", in.EntityPrefix); err != nil {
		return nil, err
	}
	if store.IsReserved(in.EntityPrefix) {
		return nil, reservedEntity(name, "entity_prefix", "entities starting with "+store.ReservedPrefix+" are not synced")
	}
	id, res, err := d.syncRemote(ctx, env, c, name, store.TierBasic)
	if res != nil || err != nil {
		return res, err
	}
	tenant := c.TenantID()
	var st *store.SyncState
	if err := env.Store.View(ctx, func(tx store.Tx) error {
		st, err = store.GetSyncState(tx, id.Name, tenant)
		return err
	}); err != nil {
		return nil, err
	}
	cursor, known := st.PullCursors[in.EntityPrefix]
	if !known && len(st.PullCursors) >= store.MaxPullCursors {
		return nil, toolkit.InvalidParams(name, "entity_prefix", fmt.Sprintf("the remote already has cursors for %d prefixes, the most crux keeps; pull with one of them or without entity_prefix", store.MaxPullCursors))
	}
	out := SyncPullOutput{Remote: id.Name, TenantID: tenant, EntityPrefix: in.EntityPrefix}
	listed := newSyncListed()
	pulled, dups, nconf, more := 0, 0, 0, false
	for moved, pages := 0, 0; moved < MaxSyncFacts && pages < maxSyncPages; pages++ {
		limit := min(syncPage, MaxSyncFacts-moved)
		resp, err := d.Remote.Changes(ctx, ChangesRequest{Cursor: cursor, EntityPrefix: in.EntityPrefix, Limit: limit})
		if err == nil && len(resp.Facts) > limit {
			err = fmt.Errorf("the remote sent %d versions, more than the %d asked for", len(resp.Facts), limit)
		}
		if err != nil {
			note := ""
			if pulled+dups > 0 {
				note = fmt.Sprintf(" (%d versions were pulled before it failed; the cursor keeps them)", pulled+dups)
			}
			return remoteError(ctx, env, name, id.Name, tenant, err, note)
		}
		applied, s, err := applyPulled(ctx, env, id.Name, tenant, in.EntityPrefix, resp)
		if err != nil {
			return nil, err
		}
		st = s
		pulled, dups, nconf = pulled+applied.Applied, dups+applied.Duplicates, nconf+len(applied.Conflicts)
		listed.add(&applied, true)
		moved += len(resp.Facts)
		more = resp.More
		if !resp.More || resp.Cursor == cursor {
			cursor = resp.Cursor
			break
		}
		cursor = resp.Cursor
	}
	out.FactsPulled, out.Duplicates, out.ConflictCount = pulled, dups, nconf
	out.Conflicts, out.Rejected, out.Cursor, out.More = listed.conflicts, listed.rejected, cursor, more
	out.TotalPullCount, out.CollectionCursorCount = st.PullCount, len(st.PullCursors)
	return toolkit.JSONResult(out)
}

// syncListed is the conflicts and refused versions a sync answer lists,
// at most maxSyncListed of each, in the order the pages came.
type syncListed struct {
	conflicts []SyncConflict
	rejected  []store.SyncRejected
}

func newSyncListed() syncListed {
	return syncListed{conflicts: []SyncConflict{}, rejected: []store.SyncRejected{}}
}

// add lists the conflicts and refusals of one page, as seen from here: a
// pulled page was applied here, so its existing version is the local one;
// a pushed page was applied by the remote, so its existing version is the
// remote's.
func (l *syncListed) add(page *store.SyncApplied, pulled bool) {
	existing, incoming := "local", "remote"
	if !pulled {
		existing, incoming = "remote", "local"
	}
	for _, cf := range page.Conflicts {
		if len(l.conflicts) < maxSyncListed {
			kept := incoming
			if cf.Kept == "existing" {
				kept = existing
			}
			local, remote := cf.Existing, cf.Incoming
			if !pulled {
				local, remote = cf.Incoming, cf.Existing
			}
			l.conflicts = append(l.conflicts, SyncConflict{Entity: cf.Entity, Key: cf.Key, LocalFactID: local, RemoteFactID: remote, Kept: kept})
		}
	}
	for _, r := range page.Rejected {
		if len(l.rejected) < maxSyncListed {
			l.rejected = append(l.rejected, r)
		}
	}
}

// applyPulled stores one page of versions pulled from remote and, in the
// same transaction, moves the prefix's pull cursor past them and adds
// their counts to the sync state it returns.
func applyPulled(ctx context.Context, env *toolkit.Env, remote, tenant, prefix string, resp *ChangesResponse) (store.SyncApplied, *store.SyncState, error) {
	var applied store.SyncApplied
	var st *store.SyncState
	now := env.Time()
	err := env.Store.Update(ctx, func(tx store.Tx) error {
		var err error
		if applied, err = store.ApplySyncFacts(tx, tenant, store.SyncSource{Replica: remote, Now: now}, resp.Facts); err != nil {
			return err
		}
		s, err := store.GetSyncState(tx, remote, tenant)
		if err != nil {
			return err
		}
		s.PullCursors[prefix] = resp.Cursor
		s.LastPullAt = &now
		s.PullCount += uint64(applied.Applied)
		s.ConflictCount += uint64(len(applied.Conflicts))
		st = s
		return store.PutSyncState(tx, s)
	})
	return applied, st, err
}

// pushFilter is a parsed allowlist: nil prefixes means everything.
type pushFilter struct {
	all      bool
	prefixes []string
}

func (p pushFilter) allows(entity string) bool {
	if p.all {
		return true
	}
	for _, pre := range p.prefixes {
		if strings.HasPrefix(entity, pre) {
			return true
		}
	}
	return false
}

// parseAllowlist reads sync_push's allowlist.
func parseAllowlist(tool string, list []string, given bool) (pushFilter, error) {
	if !given {
		return pushFilter{all: true}, nil
	}
	var f pushFilter
	for i, e := range list {
		param := fmt.Sprintf("allowlist.%d", i)
		switch {
		case e == "*" || e == "facts" || e == "collection:facts":
			f.all = true
		case strings.HasPrefix(e, "entity:") && len(e) > len("entity:"):
			pre := strings.TrimPrefix(e, "entity:")
			if err := checkName(tool, param, pre); err != nil {
				return f, err
			}
			f.prefixes = append(f.prefixes, pre)
		default:
			return f, toolkit.InvalidParams(tool, param, fmt.Sprintf("%q is not *, facts, collection:facts or entity:<prefix>; crux syncs facts only", e))
		}
	}
	return f, nil
}

func (d *Deps) syncPush() *toolkit.Tool {
	const name = "sync_push"
	return &toolkit.Tool{
		Name:        name,
		Description: "Push your tenant's shared fact versions written since the last push; without confirm, a preview. Tier established.",
		Annotations: toolkit.Annotations{Title: "Sync push", OpenWorldHint: true},
		Out:         toolkit.OutputOf[SyncPushOutput](),
		Alt:         toolkit.OutputOf[SyncPushPreviewOutput](),
		Run:         toolkit.Bind(name, d.runSyncPush),
	}
}

// runSyncPush runs one sync_push call.
func (d *Deps) runSyncPush(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *syncPushArgs) (*toolkit.Result, error) {
	const name = "sync_push"
	if err := syncTenant(name, in.TenantID, c); err != nil {
		return nil, err
	}
	filter, err := parseAllowlist(name, in.Allowlist, in.Allowlist != nil)
	if err != nil {
		return nil, err
	}
	id, res, err := d.syncRemote(ctx, env, c, name, store.TierEstablished)
	if res != nil || err != nil {
		return res, err
	}
	tenant := c.TenantID()
	scan, err := scanPush(ctx, env, id.Name, tenant, filter)
	if err != nil {
		return nil, err
	}
	if !in.Confirm {
		return scan.preview(id.Name, tenant)
	}
	listed := newSyncListed()
	pushed, dups, nconf, sent := 0, 0, 0, 0
	for _, page := range syncPages(scan.batch) {
		resp, err := d.Remote.Push(ctx, PushRequest{Facts: page})
		if err != nil {
			note := ""
			if sent > 0 {
				note = fmt.Sprintf(" (%d versions were sent before it failed; the next push sends them again and the remote counts them as duplicates)", sent)
			}
			return remoteError(ctx, env, name, id.Name, tenant, err, note)
		}
		sent += len(page)
		pushed, dups, nconf = pushed+resp.Applied, dups+resp.Duplicates, nconf+len(resp.Conflicts)
		listed.add(resp, false)
	}
	st, err := recordPush(ctx, env, id.Name, tenant, scan.advance, pushed, nconf)
	if err != nil {
		return nil, err
	}
	return toolkit.JSONResult(SyncPushOutput{Remote: id.Name, TenantID: tenant, More: scan.more, SkippedSynced: scan.skippedSynced,
		SkippedDeleted: scan.skippedDeleted, SkippedNotAllowlisted: scan.skippedAllow, Mode: "push", FactsPushed: pushed, Duplicates: dups, ConflictCount: nconf, Conflicts: listed.conflicts,
		Rejected: listed.rejected, PushCursor: st.PushCursor, TotalPushCount: st.PushCount})
}

// pushScan is what sync_push found to send: the versions past the push
// cursor (at most MaxSyncFacts), how far the cursor may advance over
// them, and what it passed over.
type pushScan struct {
	state                                       *store.SyncState
	batch                                       []store.SyncFact
	advance                                     uint64
	skippedSynced, skippedDeleted, skippedAllow int
	more                                        bool
}

// scanPush reads the tenant's shared versions past the push cursor for
// remote: synced and deleted versions are passed over, and the cursor
// stops before the first version filter does not allow, so that a later
// push with a wider allowlist still sends it.
func scanPush(ctx context.Context, env *toolkit.Env, remote, tenant string, filter pushFilter) (pushScan, error) {
	var p pushScan
	err := env.Store.View(ctx, func(tx store.Tx) error {
		var err error
		if p.state, err = store.GetSyncState(tx, remote, tenant); err != nil {
			return err
		}
		p.advance = p.state.PushCursor
		blocked := false
		last, remain, err := store.SyncPending(tx, tenant, p.state.PushCursor, maxSyncScan, func(seq uint64, f *store.Fact, synced bool) bool {
			switch {
			case synced:
				p.skippedSynced++
			case f.Deleted:
				p.skippedDeleted++
			case !filter.allows(f.Entity):
				p.skippedAllow++
				blocked = true
				return true
			default:
				if len(p.batch) == MaxSyncFacts {
					return false
				}
				p.batch = append(p.batch, store.ToSyncFact(f))
			}
			if !blocked {
				p.advance = seq
			}
			return true
		})
		if !blocked {
			p.advance = last
		}
		p.more = remain
		return err
	})
	return p, err
}

// preview is sync_push's answer without confirm: what a push would send,
// and a hash of the ids it would send.
func (scan pushScan) preview(remote, tenant string) (*toolkit.Result, error) {
	h := sha256.New()
	listed := []SyncFactRef{}
	for _, f := range scan.batch {
		h.Write([]byte(f.ID + "\n"))
		if len(listed) < maxSyncListed {
			listed = append(listed, SyncFactRef{FactID: f.ID, Entity: f.Entity, Key: f.Key})
		}
	}
	return toolkit.JSONResult(SyncPushPreviewOutput{Remote: remote, TenantID: tenant, More: scan.more, SkippedSynced: scan.skippedSynced,
		SkippedDeleted: scan.skippedDeleted, SkippedNotAllowlisted: scan.skippedAllow, Mode: "preview", WouldPromote: len(scan.batch), Facts: listed, PreviewHash: hex.EncodeToString(h.Sum(nil)),
		PushCursor: scan.state.PushCursor, TotalPushCount: scan.state.PushCount})
}

// recordPush moves the push cursor for remote to advance (never back) and
// adds a push's counts to the sync state it returns.
func recordPush(ctx context.Context, env *toolkit.Env, remote, tenant string, advance uint64, pushed, nconf int) (*store.SyncState, error) {
	now := env.Time()
	var st *store.SyncState
	err := env.Store.Update(ctx, func(tx store.Tx) error {
		s, err := store.GetSyncState(tx, remote, tenant)
		if err != nil {
			return err
		}
		if advance > s.PushCursor {
			s.PushCursor = advance
		}
		s.LastPushAt = &now
		s.PushCount += uint64(pushed)
		s.ConflictCount += uint64(nconf)
		st = s
		return store.PutSyncState(tx, s)
	})
	return st, err
}

// SyncPullOutput is what sync_pull returns.
type SyncPullOutput struct {
	CollectionCursorCount int                  `json:"collection_cursor_count"`
	ConflictCount         int                  `json:"conflict_count"`
	Conflicts             []SyncConflict       `json:"conflicts"`
	Cursor                string               `json:"cursor"`
	Duplicates            int                  `json:"duplicates"`
	EntityPrefix          string               `json:"entity_prefix"`
	FactsPulled           int                  `json:"facts_pulled"`
	More                  bool                 `json:"more"`
	Rejected              []store.SyncRejected `json:"rejected"`
	Remote                string               `json:"remote"`
	TenantID              string               `json:"tenant_id"`
	TotalPullCount        uint64               `json:"total_pull_count"`
}

// SyncFactRef names a version sync_push would push.
type SyncFactRef struct {
	Entity string `json:"entity"`
	FactID string `json:"fact_id"`
	Key    string `json:"key"`
}

// SyncPushPreviewOutput is what sync_push returns without confirm: what
// it would push.
type SyncPushPreviewOutput struct {
	Facts       []SyncFactRef `json:"facts"`
	Mode        string        `json:"mode"` // preview
	More        bool          `json:"more"`
	PreviewHash string        `json:"preview_hash"`
	PushCursor  uint64        `json:"push_cursor"`
	Remote      string        `json:"remote"`
	// The versions passed over: pushed or pulled by sync before, deleted,
	// or outside the allowlist.
	SkippedDeleted        int    `json:"skipped_deleted"`
	SkippedNotAllowlisted int    `json:"skipped_not_allowlisted"`
	SkippedSynced         int    `json:"skipped_synced"`
	TenantID              string `json:"tenant_id"`
	TotalPushCount        uint64 `json:"total_push_count"`
	WouldPromote          int    `json:"would_promote"`
}

// SyncPushOutput is what sync_push returns with confirm.
type SyncPushOutput struct {
	ConflictCount int                  `json:"conflict_count"`
	Conflicts     []SyncConflict       `json:"conflicts"`
	Duplicates    int                  `json:"duplicates"`
	FactsPushed   int                  `json:"facts_pushed"`
	Mode          string               `json:"mode"` // push
	More          bool                 `json:"more"`
	PushCursor    uint64               `json:"push_cursor"`
	Rejected      []store.SyncRejected `json:"rejected"`
	Remote        string               `json:"remote"`
	// The versions passed over, as in SyncPushPreviewOutput.
	SkippedDeleted        int    `json:"skipped_deleted"`
	SkippedNotAllowlisted int    `json:"skipped_not_allowlisted"`
	SkippedSynced         int    `json:"skipped_synced"`
	TenantID              string `json:"tenant_id"`
	TotalPushCount        uint64 `json:"total_push_count"`
}

// SyncStatusOutput is what sync_status returns.
type SyncStatusOutput struct {
	APIKeyConfigured      bool               `json:"api_key_configured"`
	BackgroundSyncEnabled bool               `json:"background_sync_enabled"` // always false: crux syncs only when asked
	Configured            bool               `json:"configured"`
	LocalChangeCount      uint64             `json:"local_change_count"`
	Mode                  string             `json:"mode"`
	Notes                 []string           `json:"notes"`
	RemoteURL             string             `json:"remote_url"`
	Remotes               []SyncStatusRemote `json:"remotes"`
	RemotesTruncated      bool               `json:"remotes_truncated"`
	TenantID              string             `json:"tenant_id"`
}

// SyncStatusRemote is one remote as sync_status reports it.
type SyncStatusRemote struct {
	*store.SyncState
	PendingPush      int  `json:"pending_push"`
	PendingTruncated bool `json:"pending_truncated"`
	Failing          bool `json:"failing"`
}

func (d *Deps) syncStatus() *toolkit.Tool {
	const name = "sync_status"
	return &toolkit.Tool{
		Name:        name,
		Description: "Where sync stands for your tenant, from this store: remote, cursors, last pull and push, pending.",
		Annotations: toolkit.Annotations{Title: "Sync status", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[SyncStatusOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, _ *struct{}) (*toolkit.Result, error) {
			tenant := c.TenantID()
			out := SyncStatusOutput{Configured: d.Remote != nil, RemoteURL: redactURL(env.Flags.SyncRemoteURL),
				APIKeyConfigured: env.Flags.SyncAPIKey.IsSet(), TenantID: tenant}
			if u, ok := d.Remote.(interface{ URL() string }); ok {
				out.RemoteURL = redactURL(u.URL()) // what the remote client reaches, which an embedder sets
			}
			remotes := []SyncStatusRemote{}
			var head uint64
			truncated := false
			err := env.Store.View(ctx, func(tx store.Tx) error {
				var err error
				if head, err = store.SyncCount(tx, tenant); err != nil {
					return err
				}
				states, more, err := store.SyncStates(tx, tenant, maxSyncStates)
				if err != nil {
					return err
				}
				truncated = more
				for _, s := range states {
					r := SyncStatusRemote{SyncState: s}
					_, r.PendingTruncated, err = store.SyncPending(tx, tenant, s.PushCursor, maxSyncScan, func(_ uint64, f *store.Fact, synced bool) bool {
						if !synced && !f.Deleted {
							r.PendingPush++
						}
						return true
					})
					if err != nil {
						return err
					}
					last := s.LastPullAt
					if s.LastPushAt != nil && (last == nil || s.LastPushAt.After(*last)) {
						last = s.LastPushAt
					}
					r.Failing = s.LastErrorAt != nil && (last == nil || s.LastErrorAt.After(*last))
					remotes = append(remotes, r)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			mode := "local-only"
			if d.Remote != nil {
				mode = "manual sync"
				for _, r := range remotes {
					if r.Failing {
						mode = "degraded"
					}
				}
			}
			notes := []string{"crux has no background sync: nothing moves until sync_pull or sync_push is called"}
			if d.Remote == nil && env.Flags.SyncRemoteURL != "" {
				notes = append(notes, strings.TrimPrefix(notConfigured(env).Content[0].Text, "sync not configured: "))
			}
			out.Mode, out.LocalChangeCount, out.Remotes, out.RemotesTruncated, out.Notes = mode, head, remotes, truncated, notes
			return toolkit.JSONResult(out)
		}),
	}
}

// ServeSyncChanges answers a replica's request for env's change log, on
// behalf of c, which must be an authenticated replica (an agent is
// refused, see serveCheck): the versions of c's tenant logged after
// req.Cursor, at most req.Limit (1 to MaxSyncFacts) of them.
func ServeSyncChanges(ctx context.Context, env *toolkit.Env, c toolkit.Caller, req ChangesRequest) (*ChangesResponse, error) {
	if err := serveCheck(c); err != nil {
		return nil, err
	}
	if req.Limit < 1 || req.Limit > MaxSyncFacts {
		return nil, toolkit.InvalidParams("sync/changes", "limit", fmt.Sprintf("must be 1 to %d", MaxSyncFacts))
	}
	after, err := store.ParseSyncCursor(req.Cursor)
	if err != nil {
		return nil, toolkit.InvalidParams("sync/changes", "cursor", err.Error())
	}
	resp := &ChangesResponse{}
	err = env.Store.View(ctx, func(tx store.Tx) error {
		facts, next, more, err := store.SyncChanges(tx, c.TenantID(), after, req.EntityPrefix, req.Limit, MaxSyncPageBytes, maxSyncScan)
		resp.Facts, resp.Cursor, resp.More = facts, store.FormatSyncCursor(next), more
		return err
	})
	if err != nil {
		return nil, err
	}
	if resp.Facts == nil {
		resp.Facts = []store.SyncFact{}
	}
	return resp, nil
}

// ServeSyncPush applies a replica's pushed versions to c's tenant, c being
// an authenticated replica, at most MaxSyncFacts of them, in one
// transaction, by the rules of store.ApplySyncFacts: each version applied
// is owned here by the replica (store.SyncOwner of "peer:" and its name),
// and one stored too far in the future or superseding a version the
// replica could not have been sent is rejected, listed with the reason.
func ServeSyncPush(ctx context.Context, env *toolkit.Env, c toolkit.Caller, req PushRequest) (*PushResponse, error) {
	if err := serveCheck(c); err != nil {
		return nil, err
	}
	if len(req.Facts) > MaxSyncFacts {
		return nil, toolkit.InvalidParams("sync/push", "facts", fmt.Sprintf("more than %d versions", MaxSyncFacts))
	}
	var out store.SyncApplied
	src := store.SyncSource{Replica: "peer:" + c.Identity(), Now: env.Time()}
	err := env.Store.Update(ctx, func(tx store.Tx) error {
		var err error
		out, err = store.ApplySyncFacts(tx, c.TenantID(), src, req.Facts)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ServeSyncIdentity names env as a replica: "crux:" and its signer's key id.
func ServeSyncIdentity(ctx context.Context, env *toolkit.Env, c toolkit.Caller) (RemoteIdentity, error) {
	if err := serveCheck(c); err != nil {
		return RemoteIdentity{}, err
	}
	return RemoteIdentity{Name: "crux:" + env.Signer.KeyID(), KeyID: env.Signer.KeyID(), Tenant: c.TenantID()}, nil
}

// ReplicaHelp says how to make a replica credential, for the errors that
// ask for one.
const ReplicaHelp = "a token table entry replica::NAME[@TENANT]=CREDENTIAL, which crux token new --replica NAME makes " +
	"(an embedder serving sync in process sets Caller.Replica)"

// serveCheck refuses a caller of the sync API that is not an
// authenticated replica: anonymous is -32003 with data.reason
// "unauthenticated", an agent -32003 with "replica_required". Every
// request of the sync API, identity and changes included, takes a
// replica: an agent's token authorises its tools, with their passport
// tiers, capabilities and tool surface, and none of that applies to the
// sync API, which pages out and takes in the tenant's shared facts
// wholesale. A replica has no passport: it is revoked by removing its
// entry from the token table.
func serveCheck(c toolkit.Caller) error {
	if err := c.Validate(); err != nil {
		return &toolkit.Error{Code: toolkit.CodeInvalidRequest, Message: err.Error()}
	}
	if c.Identity() == "" {
		return &toolkit.Error{Code: toolkit.CodeForbidden, Message: "sync: a replica must be an authenticated caller; the sync API needs a replica credential: " + ReplicaHelp,
			Data: map[string]any{"reason": "unauthenticated"}}
	}
	if !c.Replica {
		return &toolkit.Error{Code: toolkit.CodeForbidden, Message: fmt.Sprintf("sync: %s is an agent, not a replica; the sync API needs a replica credential: %s", c.Identity(), ReplicaHelp),
			Data: map[string]any{"reason": "replica_required"}}
	}
	return nil
}

// Remote is another replica sync_pull and sync_push exchange a tenant's
// shared facts with. The caller's tenant on the remote is the remote's
// business: it is whatever tenant the remote's own authentication maps
// this replica to. Implementations must be safe for concurrent use and
// honour ctx.
//
// The wire shape, for a remote over HTTP: each method is one POST of a
// JSON request to a path under the remote's base URL, with the sync API
// key as a bearer token (on a crux server, a replica's token:
// replica::NAME in its token table), answered with a JSON body (or an
// HTTP error):
//
//	Identity  POST /v1/sync/identity  {}                                    → RemoteIdentity
//	Changes   POST /v1/sync/changes   ChangesRequest {cursor, entity_prefix, limit} → ChangesResponse {facts, cursor, more}
//	Push      POST /v1/sync/push      PushRequest {facts}                   → PushResponse {applied, duplicates, conflicts, rejected}
//
// A fact is a store.SyncFact: {fact_id, entity, key, value,
// source_receipt?, confidence, stored_at (RFC 3339), horizon_class,
// supersedes?, owner?}; the receiving side owns what it applies itself
// and checks stored_at and supersedes (see store.ApplySyncFacts).
// crux.Server's SyncIdentity, SyncChanges and
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
