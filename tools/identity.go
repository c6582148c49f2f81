package tools

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// GetAgentIdentityOutput is what get_agent_identity returns: the caller's
// authenticated agent name, or "anonymous".
type GetAgentIdentityOutput struct {
	AgentName string `json:"agent_name"`
}

func getAgentIdentity() *toolkit.Tool {
	const name = "get_agent_identity"
	return &toolkit.Tool{
		Name:        name,
		Description: "Who crux thinks you are: this call's authenticated agent, or anonymous.",
		Annotations: toolkit.Annotations{Title: "Agent identity", ReadOnlyHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[GetAgentIdentityOutput](),
		Run: toolkit.Bind(name, func(_ context.Context, _ *toolkit.Env, c toolkit.Caller, _ *struct{}) (*toolkit.Result, error) {
			return toolkit.JSONResult(GetAgentIdentityOutput{AgentName: c.Name()})
		}),
	}
}

// ---- identity continuity: passport_split, passport_merge, passport_link_device ----
//
// Decisions where the CueCrux tool contract is silent or where crux does
// better than the reference:
//
//   - The three tools need CORECRUXD_FEATURE_IDENTITY_CONTINUITY; while it
//     is off they are listed but answer -32601, with data {feature_flag,
//     enabled: false}.
//   - The caller must hold an operator passport: a live (neither revoked
//     nor retired) passport of its tenant whose earned tier is trusted or
//     above (500 receipts). Anything less is -32003 FORBIDDEN.
//   - Tenants never mix. A passport argument may name its tenant,
//     <tenant>::<name> (agent names cannot hold "::", so this is never a
//     plain name); a tenant other than the caller's is -32003.
//   - A split copies the source's current private facts into the new
//     passport (store.SplitPassport): the inheritance the contract calls a
//     lineage read-through, made once, so that each passport's later
//     writes diverge without two current values meeting in one chain. The
//     new passport is sponsored by the source and starts unverified: a tier
//     is earned by receipts, so an operator cannot mint operators.
//   - A merge moves the source's private facts, sessions, pins and
//     artefacts to the target and retires the source (store.MergePassports).
//     Moved facts keep their ids and links and record where they came from;
//     moved sessions become read-only references.
//   - A device fingerprint is bound to one passport of a tenant; linking it
//     again replaces its capabilities. The capabilities come from a closed
//     list (deviceCapabilities).
//   - Each operation is one transaction with one signed receipt in the
//     tenant's chain. token_budget bounds the answer, never the operation:
//     fixed fields always come back; lists and the inline receipt body take
//     what the budget leaves, and truncated (receipt_body_omitted) says
//     what was cut.

// Receipt kinds and payload schemas of identity continuity.
const (
	kindPassportSplit      = "passport_split"
	kindPassportMerge      = "passport_merge"
	kindPassportLinkDevice = "passport_link_device"

	splitReceiptSchema      = "crux.receipt.passport_split.v1"
	mergeReceiptSchema      = "crux.receipt.passport_merge.v1"
	linkDeviceReceiptSchema = "crux.receipt.passport_link_device.v1"
)

// deviceCapabilities are the capabilities a linked device may be granted.
var deviceCapabilities = []string{"facts:read", "facts:write", "sessions:read", "sessions:write", "artefacts:read", "artefacts:write"}

// defaultDeviceCapabilities is what a device is granted when the call
// names nothing.
var defaultDeviceCapabilities = []string{"facts:read"}

// identityGate answers -32601 while identity continuity is off.
func identityGate(name string) func(env *toolkit.Env) (*toolkit.Result, error) {
	return func(env *toolkit.Env) (*toolkit.Result, error) {
		if env.Flags.IdentityContinuity {
			return nil, nil
		}
		return nil, &toolkit.Error{
			Code:    toolkit.CodeMethodNotFound,
			Message: name + " is disabled (set " + feature.EnvIdentityContinuity + "=1 to enable)",
			Data:    map[string]any{"feature_flag": feature.EnvIdentityContinuity, "enabled": false},
		}
	}
}

// IdentityHelp tells an anonymous caller how to become a named one.
const IdentityHelp = "connect as a named agent: --agent on stdio, a bearer token on HTTP"

// needIdentity is anonymousRefused(tool, "") for an anonymous caller, and
// nil when c has an identity: the check of a tool that needs one.
func needIdentity(tool string, c toolkit.Caller) error {
	if c.Identity() != "" {
		return nil
	}
	return anonymousRefused(tool, "")
}

// anonymousRefused is the one refusal of an anonymous caller by a tool
// that needs an authenticated agent identity, or by one of its arguments
// (what, when not ""): -32003 with data {reason: "requires_identity",
// tool}.
func anonymousRefused(tool, what string) *toolkit.Error {
	if what != "" {
		what = " for " + what
	}
	e := toolkit.Forbidden(tool, "requires_identity", "needs an authenticated agent identity%s; anonymous callers are refused (%s)", what, IdentityHelp)
	e.Data = map[string]any{"reason": "requires_identity", "tool": tool}
	return e
}

// passportArg checks a passport id argument: its size and characters as
// for a caller's agent name, and its tenant when it names one
// (<tenant>::<name>), which must be c's (else -32003). It returns the
// plain passport id.
func passportArg(tool, param, value string, c toolkit.Caller) (string, error) {
	if err := checkName(tool, param, value); err != nil {
		return "", err
	}
	if i := strings.LastIndex(value, "::"); i >= 0 {
		if t := value[:i]; t != c.TenantID() {
			return "", &toolkit.Error{Code: toolkit.CodeForbidden,
				Message: fmt.Sprintf("%s: %s: passport %q is of tenant %q, not of your tenant %q; identity operations never cross tenants",
					tool, param, value[i+2:], t, c.TenantID()),
				Data: map[string]any{"param": param, "reason": "cross_tenant", "tenant_id": t}}
		}
		value = value[i+2:]
	}
	switch {
	case value == "":
		return "", toolkit.InvalidParams(tool, param, "names no passport")
	case len(value) > toolkit.MaxCallerNameBytes:
		return "", toolkit.InvalidParams(tool, param, fmt.Sprintf("longer than %d bytes", toolkit.MaxCallerNameBytes))
	case strings.HasSuffix(value, ":"):
		return "", toolkit.InvalidParams(tool, param, `must not end with ":"`)
	case value == toolkit.Anonymous:
		return "", toolkit.InvalidParams(tool, param, `must not be "anonymous"`)
	}
	return value, nil
}

// requireOperator checks, in tx, that c holds an operator passport: live,
// of its tenant, of earned tier trusted or above. Anything less is -32003.
func requireOperator(tx store.Tx, tool string, c toolkit.Caller) error {
	need := fmt.Sprintf("identity operations need an operator passport (tier %s or above)", store.TierTrusted)
	return requirePassportTier(tx, tool, "operator_required", need, c, store.TierTrusted)
}

// maxLineage bounds the splits ownsPassport follows back.
const maxLineage = 64

// ownsPassport reports whether the agent me owns the passport id of
// tenant: id is me, or a passport split from one me owns (passport_split
// makes a new passport only under a name no agent uses, so the agent
// that split it is the one that holds it). It is store.ErrNotFound when
// id is not me and has no passport.
func ownsPassport(tx store.Tx, tenant, me, id string) (bool, error) {
	for hop := range maxLineage {
		if id == me {
			return true, nil
		}
		p, err := store.GetPassport(tx, tenant, id)
		if errors.Is(err, store.ErrNotFound) && hop > 0 {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if p.ForkedFrom == "" {
			return false, nil
		}
		id = p.ForkedFrom
	}
	return false, nil
}

// identityStateError turns a store refusal of an identity operation into
// the answer: a missing passport is an error result; a revoked, retired or
// taken passport, or a device bound elsewhere, is -32004.
func identityStateError(tool string, err error) (*toolkit.Result, error) {
	var ie *store.IdentityError
	if !errors.As(err, &ie) {
		return nil, err
	}
	if errors.Is(err, store.ErrPassportNotFound) {
		return toolkit.ErrorResult("%s", ie.Error()), nil
	}
	return nil, toolkit.WrapError(toolkit.CodeConflict, tool+": "+ie.Error(), err)
}

// checkReason bounds a reason.
func checkReason(tool, reason string) error {
	if len(reason) > maxPassportReason {
		return toolkit.InvalidParams(tool, "reason", fmt.Sprintf("longer than %d bytes", maxPassportReason))
	}
	return nil
}

// answerBudget is what a token_budget leaves for an answer's optional
// parts once its fixed fields are counted: rows join while they fit, and
// once one does not, none after it does.
type answerBudget struct {
	left   int // bytes of compact JSON
	closed bool
}

// newAnswerBudget is the budget of tokens (JSON bytes / 4, and never more
// than answerBytes) for an answer whose fixed part is fixed.
func newAnswerBudget(tokens int, fixed any) *answerBudget {
	b, _ := json.Marshal(fixed)
	return &answerBudget{left: min(tokens, answerBytes/8)*4 - len(b)}
}

// take reports whether v joins the answer, counting it if so.
func (a *answerBudget) take(v any) bool {
	if a.closed {
		return false
	}
	b, _ := json.Marshal(v)
	if n := len(b) + 1; n <= a.left {
		a.left -= n
		return true
	}
	a.closed = true
	return false
}

// ReceiptBody is the inline receipt body of an identity answer: the CBOR
// as hex when it fits the budget and maxInlineReceiptBody, else omitted.
type ReceiptBody struct {
	CBORHex string `json:"receipt_body_cbor_hex,omitempty"`
	Bytes   int    `json:"receipt_body_bytes"`
	Omitted bool   `json:"receipt_body_omitted"`
	HashHex string `json:"receipt_body_hash_hex"`
}

func inlineBody(r *receipts.Receipt, b *answerBudget) ReceiptBody {
	out := ReceiptBody{Bytes: len(r.Body), HashHex: hex.EncodeToString(r.PayloadHash), Omitted: true}
	if h := hex.EncodeToString(r.Body); len(r.Body) <= maxInlineReceiptBody && b.take(h) {
		out.CBORHex, out.Omitted = h, false
	}
	return out
}

// ---- passport_split ----

type passportSplitArgs struct {
	TargetPassport  string `json:"target_passport" schema:"minLength=1"`
	NewPassportName string `json:"new_passport_name" schema:"minLength=1"`
	TokenBudget     int    `json:"token_budget" schema:"minimum=1" doc:"Caps the answer, never the split."`
	Reason          string `json:"reason,omitempty"`
}

// splitReceipt is the payload of a passport_split receipt.
type splitReceipt struct {
	Schema           string                `cbor:"schema"` // splitReceiptSchema
	TenantID         string                `cbor:"tenant_id"`
	InitiatedBy      string                `cbor:"initiated_by_passport_id"`
	SourcePassportID string                `cbor:"source_passport_id"`
	NewPassportID    string                `cbor:"new_passport_id"`
	Reason           string                `cbor:"reason"`
	InitiatedAt      string                `cbor:"initiated_at"` // RFC 3339
	FactsInherited   []store.InheritedFact `cbor:"facts_inherited"`
}

// PassportSplitOutput is what passport_split returns.
type PassportSplitOutput struct {
	NewPassportID    string                `json:"new_passport_id"`
	SourcePassportID string                `json:"source_passport_id"`
	SplitReceiptID   string                `json:"split_receipt_id"`
	TenantID         string                `json:"tenant_id"`
	FactsInherited   int                   `json:"facts_inherited"`
	Inherited        []store.InheritedFact `json:"inherited"`
	Truncated        bool                  `json:"truncated"`
	ReceiptBody
}

func passportSplit() *toolkit.Tool {
	const name = "passport_split"
	return &toolkit.Tool{
		Name:        name,
		Description: "Fork your passport into a new one with a copy of your private facts. Trusted tier. Flag IDENTITY_CONTINUITY.",
		Annotations: toolkit.Annotations{Title: "Split passport"},
		Out:         toolkit.OutputOf[PassportSplitOutput](),
		Gate:        identityGate(name),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *passportSplitArgs) (*toolkit.Result, error) {
			source, err := passportArg(name, "target_passport", in.TargetPassport, c)
			if err != nil {
				return nil, err
			}
			fresh, err := passportArg(name, "new_passport_name", in.NewPassportName, c)
			if err != nil {
				return nil, err
			}
			if err := checkReason(name, in.Reason); err != nil {
				return nil, err
			}
			if c.Identity() != "" && source != c.Identity() {
				return nil, toolkit.Forbidden(name, "not_own_passport", "you may split only your own passport (%s), not %s", c.Identity(), source)
			}
			tenant, now := c.TenantID(), env.Time()
			var out PassportSplitOutput
			err = env.Store.Update(ctx, func(tx store.Tx) error {
				if err := requireOperator(tx, name, c); err != nil {
					return err
				}
				var r *receipts.Receipt
				res, err := store.SplitPassport(tx, store.SplitRequest{Tenant: tenant, Source: source, New: fresh, Now: now},
					func(res *store.SplitResult) (string, error) {
						var err error
						r, err = receipts.Append(tx, env.Signer, tenant, kindPassportSplit, c.Name(), splitReceipt{
							Schema: splitReceiptSchema, TenantID: tenant, InitiatedBy: c.Name(), SourcePassportID: source,
							NewPassportID: fresh, Reason: in.Reason, InitiatedAt: now.Format(time.RFC3339Nano),
							FactsInherited: nonNil(res.Inherited),
						}, now)
						if err != nil {
							return "", err
						}
						return r.ID, nil
					})
				if err != nil {
					return err
				}
				out = PassportSplitOutput{NewPassportID: fresh, SourcePassportID: source, SplitReceiptID: r.ID, TenantID: tenant,
					FactsInherited: len(res.Inherited), Inherited: []store.InheritedFact{}}
				b := newAnswerBudget(in.TokenBudget, out)
				for _, f := range res.Inherited {
					if !b.take(f) {
						break
					}
					out.Inherited = append(out.Inherited, f)
				}
				out.Truncated = len(out.Inherited) < len(res.Inherited)
				out.ReceiptBody = inlineBody(r, b)
				return nil
			})
			if err != nil {
				return identityStateError(name, err)
			}
			return toolkit.JSONResult(out)
		}),
	}
}

// nonNil is s, or an empty slice for nil, so that a receipt lists none as
// [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// ---- passport_merge ----

type passportMergeArgs struct {
	SourcePassport string `json:"source_passport" schema:"minLength=1"`
	TargetPassport string `json:"target_passport" schema:"minLength=1"`
	ConflictPolicy string `json:"conflict_policy" schema:"enum=prefer_source|prefer_target|error_on_conflict" doc:"error_on_conflict: -32004, nothing changed."`
	TokenBudget    int    `json:"token_budget" schema:"minimum=1" doc:"Caps the answer, never the merge."`
	Reason         string `json:"reason,omitempty"`
}

// mergeReceipt is the payload of a passport_merge receipt: every fact
// version, session, pin and artefact the merge moved.
type mergeReceipt struct {
	Schema           string                `cbor:"schema"` // mergeReceiptSchema
	TenantID         string                `cbor:"tenant_id"`
	InitiatedBy      string                `cbor:"initiated_by_passport_id"`
	SourcePassportID string                `cbor:"source_passport_id"`
	TargetPassportID string                `cbor:"target_passport_id"`
	ConflictPolicy   string                `cbor:"conflict_policy"`
	Conflicts        []store.MergeConflict `cbor:"conflicts"`
	Duplicates       int                   `cbor:"duplicates"`
	Reason           string                `cbor:"reason"`
	InitiatedAt      string                `cbor:"initiated_at"` // RFC 3339
	ChainsMoved      int                   `cbor:"chains_moved"`
	FactsMoved       []store.MovedFact     `cbor:"facts_moved"`
	SessionsMoved    []store.MovedSession  `cbor:"sessions_moved"`
	PinsMoved        []string              `cbor:"pins_moved"`
	ArtefactsMoved   []string              `cbor:"artefacts_moved"`
}

// MergeMoved counts what a merge moved.
type MergeMoved struct {
	Chains    int `json:"chains"`
	Facts     int `json:"facts"`
	Sessions  int `json:"sessions"`
	Pins      int `json:"pins"`
	Artefacts int `json:"artefacts"`
}

// PassportMergeOutput is what passport_merge returns.
type PassportMergeOutput struct {
	MergedPassportID  string                `json:"merged_passport_id"`
	RetiredPassportID string                `json:"retired_passport_id"`
	MergeReceiptID    string                `json:"merge_receipt_id"`
	TenantID          string                `json:"tenant_id"`
	ConflictPolicy    string                `json:"conflict_policy"`
	ConflictsResolved int                   `json:"conflicts_resolved"`
	Duplicates        int                   `json:"duplicates"`
	Moved             MergeMoved            `json:"moved"`
	Conflicts         []store.MergeConflict `json:"conflicts"`
	SessionsRenamed   []store.MovedSession  `json:"sessions_renamed"`
	SessionsRenamedN  int                   `json:"sessions_renamed_count"`
	Truncated         bool                  `json:"truncated"`
	ReceiptBody
}

// maxListedConflicts is the most conflicts a -32004 refusal lists.
const maxListedConflicts = 20

func passportMerge() *toolkit.Tool {
	const name = "passport_merge"
	return &toolkit.Tool{
		Name:        name,
		Description: "Merge a passport you own (yours, or split from it) into another you own: private facts, sessions, pins, artefacts move; it retires. Trusted tier. Flag IDENTITY_CONTINUITY.",
		Annotations: toolkit.Annotations{Title: "Merge passports", DestructiveHint: true},
		Out:         toolkit.OutputOf[PassportMergeOutput](),
		Gate:        identityGate(name),
		Run:         toolkit.Bind(name, runPassportMerge),
	}
}

// runPassportMerge runs one passport_merge call.
func runPassportMerge(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *passportMergeArgs) (*toolkit.Result, error) {
	const name = "passport_merge"
	source, err := passportArg(name, "source_passport", in.SourcePassport, c)
	if err != nil {
		return nil, err
	}
	target, err := passportArg(name, "target_passport", in.TargetPassport, c)
	if err != nil {
		return nil, err
	}
	if err := checkReason(name, in.Reason); err != nil {
		return nil, err
	}
	if source == target {
		return nil, toolkit.InvalidParams(name, "target_passport", "must differ from source_passport")
	}
	tenant, now := c.TenantID(), env.Time()
	var out PassportMergeOutput
	err = env.Store.Update(ctx, func(tx store.Tx) error {
		if err := requireOperator(tx, name, c); err != nil {
			return err
		}
		if err := requireOwnPassports(tx, name, c, source, target); err != nil {
			return err
		}
		var r *receipts.Receipt
		res, err := store.MergePassports(tx, store.MergeRequest{Tenant: tenant, Source: source, Target: target,
			Policy: in.ConflictPolicy, Now: now, MaxSessionID: MaxNameBytes},
			func(res *store.MergeResult) (string, error) {
				var err error
				r, err = receipts.Append(tx, env.Signer, tenant, kindPassportMerge, c.Name(), mergeReceipt{
					Schema: mergeReceiptSchema, TenantID: tenant, InitiatedBy: c.Name(), SourcePassportID: source,
					TargetPassportID: target, ConflictPolicy: in.ConflictPolicy, Conflicts: nonNil(res.Conflicts),
					Duplicates: res.Duplicates, Reason: in.Reason, InitiatedAt: now.Format(time.RFC3339Nano),
					ChainsMoved: res.Chains, FactsMoved: nonNil(res.Facts), SessionsMoved: nonNil(res.Sessions),
					PinsMoved: nonNil(res.Pins), ArtefactsMoved: nonNil(res.Artefacts),
				}, now)
				if err != nil {
					return "", err
				}
				return r.ID, nil
			})
		if err != nil {
			return err
		}
		out = mergeOutput(in, source, target, tenant, res, r)
		return nil
	})
	var ce *store.MergeConflictError
	if errors.As(err, &ce) {
		listed := ce.Conflicts[:min(len(ce.Conflicts), maxListedConflicts)]
		return nil, &toolkit.Error{Code: toolkit.CodeConflict, Message: name + ": " + ce.Error() + "; nothing was merged",
			Data: map[string]any{"conflict_policy": in.ConflictPolicy, "conflicts": listed,
				"conflict_count": len(ce.Conflicts), "truncated": len(listed) < len(ce.Conflicts)}}
	}
	if err != nil {
		return identityStateError(name, err)
	}
	return toolkit.JSONResult(out)
}

// requireOwnPassports refuses a merge unless both passports are the
// caller's: another agent's private facts never change hands without it,
// and a passport of another's is not the caller's to fill. A passport that
// does not exist passes here; the merge says there is no such passport.
func requireOwnPassports(tx store.Tx, name string, c toolkit.Caller, source, target string) error {
	for _, p := range []struct{ param, id string }{{"source_passport", source}, {"target_passport", target}} {
		own, err := ownsPassport(tx, c.TenantID(), c.Identity(), p.id)
		if errors.Is(err, store.ErrNotFound) {
			continue // the merge says there is no such passport
		}
		if err != nil {
			return err
		}
		if !own {
			return toolkit.Forbidden(name, "not_own_passport", "%s %s is not yours: you (%s) may merge only passports you own, "+
				"your own and those split from it", p.param, p.id, c.Identity())
		}
	}
	return nil
}

// mergeOutput is passport_merge's answer for the merge res recorded in
// receipt r: the conflicts and renamed sessions listed within the token
// budget, and the receipt's body inlined when the budget leaves room.
func mergeOutput(in *passportMergeArgs, source, target, tenant string, res *store.MergeResult, r *receipts.Receipt) PassportMergeOutput {
	out := PassportMergeOutput{MergedPassportID: target, RetiredPassportID: source, MergeReceiptID: r.ID, TenantID: tenant,
		ConflictPolicy: in.ConflictPolicy, ConflictsResolved: len(res.Conflicts), Duplicates: res.Duplicates,
		Moved: MergeMoved{Chains: res.Chains, Facts: len(res.Facts), Sessions: len(res.Sessions),
			Pins: len(res.Pins), Artefacts: len(res.Artefacts)},
		Conflicts: []store.MergeConflict{}, SessionsRenamed: []store.MovedSession{}}
	var renamed []store.MovedSession
	for _, s := range res.Sessions {
		if s.From != s.To {
			renamed = append(renamed, s)
		}
	}
	out.SessionsRenamedN = len(renamed)
	b := newAnswerBudget(in.TokenBudget, out)
	for _, cf := range res.Conflicts {
		if !b.take(cf) {
			break
		}
		out.Conflicts = append(out.Conflicts, cf)
	}
	for _, s := range renamed {
		if !b.take(s) {
			break
		}
		out.SessionsRenamed = append(out.SessionsRenamed, s)
	}
	out.Truncated = len(out.Conflicts) < len(res.Conflicts) || len(out.SessionsRenamed) < len(renamed)
	out.ReceiptBody = inlineBody(r, b)
	return out
}

// ---- passport_link_device ----

type passportLinkDeviceArgs struct {
	DeviceFingerprint  string   `json:"device_fingerprint" pattern:"^[0-9a-f]{64}$"`
	TokenBudget        int      `json:"token_budget" schema:"minimum=1"`
	CapabilitiesSubset []string `json:"capabilities_subset,omitempty" schema:"default=[\"facts:read\"];items.enum=facts:read|facts:write|sessions:read|sessions:write|artefacts:read|artefacts:write;maxItems=6;minItems=1" doc:"Default facts:read."`
}

// linkDeviceReceipt is the payload of a passport_link_device receipt.
type linkDeviceReceipt struct {
	Schema               string   `cbor:"schema"` // linkDeviceReceiptSchema
	TenantID             string   `cbor:"tenant_id"`
	PassportID           string   `cbor:"passport_id"`
	DeviceFingerprint    string   `cbor:"device_fingerprint"`
	CapabilitiesSubset   []string `cbor:"capabilities_subset"`
	PreviousCapabilities []string `cbor:"previous_capabilities,omitempty"` // a relink: what the device had
	InitiatedAt          string   `cbor:"initiated_at"`                    // RFC 3339
}

// PassportLinkDeviceOutput is what passport_link_device returns.
type PassportLinkDeviceOutput struct {
	LinkReceiptID        string   `json:"link_receipt_id"`
	PassportID           string   `json:"passport_id"`
	DeviceFingerprint    string   `json:"device_fingerprint"`
	CapabilitiesSubset   []string `json:"capabilities_subset"`
	Relinked             bool     `json:"relinked"`
	PreviousCapabilities []string `json:"previous_capabilities,omitempty"`
	LinkedAt             string   `json:"linked_at"`
	TenantID             string   `json:"tenant_id"`
	ReceiptBody
}

func passportLinkDevice() *toolkit.Tool {
	const name = "passport_link_device"
	return &toolkit.Tool{
		Name:        name,
		Description: "Link a device fingerprint to your passport with capabilities_subset. Trusted tier. Flag IDENTITY_CONTINUITY.",
		Annotations: toolkit.Annotations{Title: "Link device"}, // each call mints a receipt
		Out:         toolkit.OutputOf[PassportLinkDeviceOutput](),
		Gate:        identityGate(name),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *passportLinkDeviceArgs) (*toolkit.Result, error) {
			caps := in.CapabilitiesSubset
			if caps == nil {
				caps = defaultDeviceCapabilities
			}
			seen := make(map[string]bool, len(caps))
			for i, cp := range caps {
				switch {
				case !slices.Contains(deviceCapabilities, cp):
					return nil, toolkit.InvalidParams(name, "capabilities_subset."+strconv.Itoa(i),
						`must be one of "`+strings.Join(deviceCapabilities, `", "`)+`"`)
				case seen[cp]:
					return nil, toolkit.InvalidParams(name, "capabilities_subset."+strconv.Itoa(i), fmt.Sprintf("lists %s twice", cp))
				}
				seen[cp] = true
			}
			if len(in.DeviceFingerprint) != 64 || strings.Trim(in.DeviceFingerprint, "0123456789abcdef") != "" {
				return nil, toolkit.InvalidParams(name, "device_fingerprint", "must be 64 lowercase hex digits")
			}
			id, tenant, now := c.Identity(), c.TenantID(), env.Time()
			var out PassportLinkDeviceOutput
			err := env.Store.Update(ctx, func(tx store.Tx) error {
				if err := requireOperator(tx, name, c); err != nil {
					return err
				}
				var r *receipts.Receipt
				link, prev, err := store.LinkDevice(tx, tenant, id, in.DeviceFingerprint, caps, now,
					func(prev *store.DeviceLink) (string, error) {
						payload := linkDeviceReceipt{Schema: linkDeviceReceiptSchema, TenantID: tenant, PassportID: id,
							DeviceFingerprint: in.DeviceFingerprint, CapabilitiesSubset: caps, InitiatedAt: now.Format(time.RFC3339Nano)}
						if prev != nil {
							payload.PreviousCapabilities = nonNil(prev.Capabilities)
						}
						var err error
						if r, err = receipts.Append(tx, env.Signer, tenant, kindPassportLinkDevice, c.Name(), payload, now); err != nil {
							return "", err
						}
						return r.ID, nil
					})
				if err != nil {
					return err
				}
				out = PassportLinkDeviceOutput{LinkReceiptID: r.ID, PassportID: id, DeviceFingerprint: link.Fingerprint,
					CapabilitiesSubset: link.Capabilities, Relinked: prev != nil, LinkedAt: now.Format(time.RFC3339Nano), TenantID: tenant}
				if prev != nil {
					out.PreviousCapabilities = nonNil(prev.Capabilities)
				}
				out.ReceiptBody = inlineBody(r, newAnswerBudget(in.TokenBudget, out))
				return nil
			})
			if err != nil {
				return identityStateError(name, err)
			}
			return toolkit.JSONResult(out)
		}),
	}
}
