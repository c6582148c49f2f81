package toolkit

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/surface"
)

// Call runs one call through the pipeline every tool shares, in order:
//
//  1. the tool must exist (-32601 unknown tool), the caller's names be
//     valid (-32600, see [Caller.Validate]) and the caller not be a sync
//     replica (-32003, data.reason "replica_not_agent": a replica
//     credential serves the sync API only);
//  2. a revoked passport may call only the read-only allowlist, when
//     revocation is enforced (an isError result says why);
//  3. with a router, the tool's capability must be granted (-32030, with a
//     signed refusal receipt returned in the error's data: stored, or,
//     for a refusal identical to one within RefusalWindow, shared with it
//     and counted);
//  4. the tool's feature flag (each tool's own answer while it is off);
//  5. the arguments: size and encoding limits, the JSON Schema, unknown
//     names (-32602 naming the argument);
//  6. the handler.
//
// A failure inside crux is a -32603 *Error (logged): a panicking handler
// too, and the store keeps nothing of the call, since each tool writes in
// one transaction. A tool that ran but failed returns a Result with IsError
// set and a nil error.
func (s *Set) Call(ctx context.Context, env *Env, c Caller, name string, args json.RawMessage) (res *Result, err error) {
	i, ok := s.byName[name]
	if !ok || s.tools[i].Present != nil && !s.tools[i].Present(&env.Flags) {
		return nil, &Error{Code: CodeMethodNotFound, Message: "unknown tool: " + name}
	}
	if err := c.Validate(); err != nil {
		return nil, WrapError(CodeInvalidRequest, err.Error(), err)
	}
	if c.Replica {
		return nil, Forbidden(name, "replica_not_agent", "%s is a sync replica, not an agent: a replica credential serves only the sync API (/v1/sync/...); call tools with an agent's token", c.Name())
	}
	defer func() {
		if p := recover(); p != nil {
			env.Logger.Error("crux: tool panicked", "tool", name, "panic", p, "stack", string(debug.Stack()))
			res, err = nil, &Error{Code: CodeInternalError, Message: name + ": internal error; nothing was stored"}
		}
	}()
	res, err = s.call(ctx, env, c, i, args)
	if err == nil {
		return res, nil
	}
	var e *Error
	if errors.As(err, &e) {
		return nil, e
	}
	if ctx.Err() == nil {
		env.Logger.Error("crux: tool failed", "tool", name, "err", err)
	}
	return nil, WrapError(CodeInternalError, name+": "+err.Error(), err)
}

// call runs steps 2 to 6 of Call for the i-th tool.
func (s *Set) call(ctx context.Context, env *Env, c Caller, i int, args json.RawMessage) (*Result, error) {
	t := s.tools[i]
	if refusal, err := checkRevocation(ctx, env, c, t.Name); err != nil || refusal != nil {
		return refusal, err
	}
	if env.Router != nil {
		if d := env.Router.Decide(ctx, env.CapabilityCall(t.Name)); !d.Authorised {
			return nil, refuse(ctx, env, c, t.Name, d)
		}
	}
	if t.Gate != nil {
		if res, err := t.Gate(env); res != nil || err != nil {
			return res, err
		}
	}
	a, err := checkArguments(t.Name, s.schema[i], s.check[i], args)
	if err != nil {
		return nil, err
	}
	return t.Run.call(ctx, env, c, a)
}

// RefusalWindow is how long identical refusals share one stored receipt.
// The first refusal of a caller (its name, in its tenant) for a given
// refusal (token, capability, backend, egress classes, attestations,
// reason code and receipt class) mints a signed refusal receipt and opens
// a window of this length; the identical refusals that follow within it
// are answered with that same receipt and counted, and when the window is
// retired a refusal_summary receipt signs the count (see
// receipts.AppendCoalesced). So a caller looping on a refused tool stores
// at most two receipts a minute for it, however fast it calls.
const RefusalWindow = time.Minute

// refuse records a capability refusal as a signed receipt and returns the
// -32030 error carrying it: the data object of the CueCrux contract
// (reason_code, mode, token_id, token_hash, stamp, refusal_receipt,
// upgrade_hint), whose refusal_receipt also has the receipt_id, key_id and
// signature that crux verify checks, plus refusal_window: the count of
// identical refusals answered with that receipt so far, this one included,
// and the window's started_at (the receipt's created_at) and ends_at (see
// RefusalWindow). Should the receipt fail to persist, the call is refused
// all the same and data.receipt_error says why.
func refuse(ctx context.Context, env *Env, c Caller, name string, d rcx.Decision) error {
	refusal := map[string]any{}
	if b, err := json.Marshal(d.RefusalReceipt); err == nil {
		_ = json.Unmarshal(b, &refusal)
	}
	data := map[string]any{
		"reason_code": d.ReasonCode, "mode": d.Mode, "token_id": d.TokenID, "token_hash": d.TokenHash,
		"stamp": d.Stamp, "refusal_receipt": refusal, "upgrade_hint": rcx.UpgradeHintFor(surface.Capability(name)),
	}
	var co receipts.Coalesced
	err := env.Store.Update(ctx, func(tx store.Tx) error {
		var err error
		co, err = receipts.AppendCoalesced(tx, env.Signer, c.TenantID(), receipts.KindRefusal, c.Name(), d.RefusalReceipt, env.Now(), RefusalWindow)
		return err
	})
	if err == nil {
		sig, serr := co.Receipt.SigRecord()
		err = serr
		refusal["receipt_id"] = co.Receipt.ID
		refusal["key_id"] = sig.KeyID
		refusal["signature"] = hex.EncodeToString(sig.Signature)
		data["refusal_window"] = map[string]any{
			"count":      co.Count,
			"started_at": co.WindowStart.UTC().Format(time.RFC3339Nano),
			"ends_at":    co.WindowEnd.UTC().Format(time.RFC3339Nano),
		}
	}
	if err != nil {
		env.Logger.Error("crux: recording a refusal receipt", "tool", name, "err", err)
		data["receipt_error"] = err.Error()
	}
	return &Error{Code: CodeCapabilityDenied, Message: "RCX capability denied: " + d.ReasonCode, Data: data}
}

// revocationAllowlist are the read-only tools a revoked passport may still
// call.
var revocationAllowlist = map[string]bool{"get_passport": true, "get_agent_identity": true}

// checkRevocation enforces passport revocation (Flags.PassportRevocation):
// a caller whose passport record is revoked may call only the allowlist;
// any other call gets an isError result saying why. It fails open: a caller
// without a passport record is not refused.
func checkRevocation(ctx context.Context, env *Env, c Caller, name string) (*Result, error) {
	id := c.Identity()
	if !env.Flags.PassportRevocation || id == "" || revocationAllowlist[name] {
		return nil, nil
	}
	var p *store.Passport
	err := env.Store.View(ctx, func(tx store.Tx) error {
		var err error
		p, err = store.GetPassport(tx, c.TenantID(), id)
		return err
	})
	if errors.Is(err, store.ErrNotFound) || err == nil && !p.Revoked() {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("passport %s was revoked at %s", id, p.RevokedAt.UTC().Format(time.RFC3339))
	if p.RevokeReason != "" {
		msg += " (" + p.RevokeReason + ")"
	}
	var allowed []string
	for _, t := range env.Tools {
		if revocationAllowlist[t] {
			allowed = append(allowed, t)
		}
	}
	msg += "; a revoked passport may call only " + strings.Join(allowed, " and ")
	return ErrorResult("%s", msg), nil
}

// Listed returns the names of the tools tools/list shows c, in catalogue
// order: with a router, only those whose capability it grants (in any
// mode); then narrowed by the tool surface (Flags.ToolSurface; dynamic
// follows the intent c declared with cuecrux_session). A sync replica
// is listed none: it may call none.
func (e *Env) Listed(ctx context.Context, c Caller) []string {
	if c.Replica {
		return []string{}
	}
	names := e.Tools
	if e.Router != nil {
		allowed := make([]string, 0, len(names))
		// Each decision is of the call CapabilityCall makes, with the
		// capability NewEnv derived; the listing's decisions share one
		// slice of egress classes, which no router modifies.
		base := e.CapabilityCall("")
		for i, n := range names {
			call := base
			if len(e.capabilities) == len(names) {
				call.Capability = e.capabilities[i]
			} else {
				call.Capability = surface.Capability(n)
			}
			if e.Router.Decide(ctx, call).Authorised {
				allowed = append(allowed, n)
			}
		}
		names = allowed
	}
	intent, _ := e.intents.Intent(c, e.Time())
	return surface.Shape(string(e.Flags.ToolSurface), names, intent)
}
