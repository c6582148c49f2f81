package tools

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"

	"github.com/crux-go/crux/feature"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/surface"
	"github.com/crux-go/crux/toolkit"
)

// Artefacts: deferred output parking.
//
// Decisions where the CueCrux tool contract is silent or loose:
//   - Ownership is per passport. The stored record is keyed by (tenant,
//     owner, id) and the id is the BLAKE3 content hash, so two passports
//     that park identical bytes get the same id and each holds its own copy
//     (own metadata, own deadline). A repeated put by the same passport
//     refreshes mime_type, tool_origin and the deadline and keeps
//     created_at (created false in the result).
//   - artefact_put needs an authenticated passport; an anonymous caller
//     gets -32003 (FORBIDDEN) saying to connect as a named agent.
//   - Size: at most maxArtefactBytes (3,000,000) decoded bytes, i.e.
//     4,000,000 base64 characters, which fits under MaxArgumentBytes with
//     room for the other arguments. Larger content, empty content and
//     invalid base64 are -32602 naming content_bytes_base64.
//   - token_budget is optional on all three (as their schemas declare) and
//     never ignored: on put it is an admission gate (-32602 when the
//     content's tokens exceed it, nothing stored); on get, content over the
//     budget is withheld and the result says truncated true with the metadata
//     and content_tokens; on list it drops the rows past the budget. A token
//     is 4 base64 characters, rounded up.
//   - artefact_get of an id the caller does not hold but another passport
//     of the tenant does is -32030 with data {artefact_id, reason:
//     "cross_passport"}; an id nobody holds (or that expired) is an isError
//     result "not found".
//   - Client mime types may not start with the reserved prefix "__";
//     artefact_list also filters such entries, which only crux itself
//     can write through package store.
//   - Expired artefacts are reclaimed by the reader that meets them and by
//     a sweep of at most artefactSweepLimit expired artefacts on each put.
const (

	// maxArtefactBytes caps the decoded content of one artefact: 768 KiB,
	// whose base64 is exactly MaxValueBytes.
	maxArtefactBytes = toolkit.MaxValueBytes / 4 * 3
	// defaultArtefactTTL is how long an artefact lives unless ttl_seconds says otherwise.
	defaultArtefactTTL = 7 * 24 * time.Hour
	// maxArtefactTTL is the longest ttl_seconds accepted (0, never, aside).
	maxArtefactTTL = 90 * 24 * time.Hour
	// maxArtefactList caps artefact_list's top_k.
	maxArtefactList = 100

	artefactSweepLimit   = 64
	defaultArtefactList  = 20
	maxArtefactLabelSize = 255
)

// ArtefactInfo is an artefact's metadata as the tools return it.
type ArtefactInfo struct {
	ArtefactID string  `json:"artefact_id"`
	MimeType   string  `json:"mime_type"`
	ToolOrigin string  `json:"tool_origin"`
	SizeBytes  int     `json:"size_bytes"`
	CreatedAt  string  `json:"created_at"`
	ExpiresAt  *string `json:"expires_at"` // null: never expires
}

func newArtefactInfo(a *store.Artefact) ArtefactInfo {
	info := ArtefactInfo{ArtefactID: a.ID, MimeType: a.MimeType, ToolOrigin: a.ToolOrigin, SizeBytes: a.SizeBytes,
		CreatedAt: a.CreatedAt.UTC().Format(time.RFC3339Nano)}
	if a.ExpiresAt != nil {
		s := a.ExpiresAt.UTC().Format(time.RFC3339Nano)
		info.ExpiresAt = &s
	}
	return info
}

// base64Tokens is the token cost of n base64 characters.
func base64Tokens(n int) int { return (n + 3) / 4 }

// artefactsOff answers for a tool while CORECRUXD_FEATURE_ARTEFACTS is off:
// a success that says feature_enabled false; nothing is read or written.
func artefactsOff(tool string) func(env *toolkit.Env) (*toolkit.Result, error) {
	return func(env *toolkit.Env) (*toolkit.Result, error) {
		if env.Flags.Artefacts {
			return nil, nil
		}
		return toolkit.JSONResult(FeatureOffOutput{FeatureFlag: feature.EnvArtefacts, Tool: tool,
			Note: "nothing was done: " + feature.EnvArtefacts + " is off (off by default; set it to 1 to enable)",
		})
	}
}

// FeatureOffOutput is what a tool returns, as a success, while the feature
// flag it needs is off and it does nothing: feature_enabled false, the
// flag, the tool and a note.
type FeatureOffOutput struct {
	FeatureEnabled bool   `json:"feature_enabled"`
	FeatureFlag    string `json:"feature_flag"`
	Note           string `json:"note"`
	Tool           string `json:"tool"`
}

func checkLabel(tool, param, s string) error {
	if len(s) > maxArtefactLabelSize {
		return toolkit.InvalidParams(tool, param, fmt.Sprintf("longer than %d bytes", maxArtefactLabelSize))
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return toolkit.InvalidParams(tool, param, "contains control characters")
	}
	return nil
}

// ---- artefact_put ----

type artefactPutArgs struct {
	Content     string `json:"content_bytes_base64" schema:"maxLength=1048576"`
	MimeType    string `json:"mime_type" schema:"maxLength=255;minLength=1"`
	ToolOrigin  string `json:"tool_origin,omitempty" schema:"maxLength=255"`
	TTLSeconds  *int64 `json:"ttl_seconds,omitempty" schema:"default=604800;maximum=7776000;minimum=0" doc:"Default 7 days, at most 90; 0 never expires."`
	TokenBudget *int   `json:"token_budget,omitempty" schema:"minimum=1" doc:"Larger content is refused (-32602)."`
}

// ArtefactPutOutput is what artefact_put returns.
type ArtefactPutOutput struct {
	ArtefactInfo
	// Created is false when the caller already held these bytes and the put
	// refreshed their metadata and deadline.
	Created bool `json:"created"`
}

func artefactPut() *toolkit.Tool {
	const name = "artefact_put"
	return &toolkit.Tool{
		Name:        name,
		Description: "Park content (base64, at most 768 KiB) as art_<BLAKE3>, for your passport alone. Flag ARTEFACTS.",
		Annotations: toolkit.Annotations{Title: "Park artefact", IdempotentHint: true},
		Out:         toolkit.OutputOf[ArtefactPutOutput](),
		Alt:         toolkit.OutputOf[FeatureOffOutput](),
		Gate:        artefactsOff(name),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *artefactPutArgs) (*toolkit.Result, error) {
			if err := needIdentity(name, c); err != nil {
				return nil, err
			}
			owner := c.Identity()
			if len(in.Content) > base64.StdEncoding.EncodedLen(maxArtefactBytes) {
				return nil, toolkit.InvalidParams(name, "content_bytes_base64", fmt.Sprintf(
					"content is larger than the limit of %d decoded bytes (%d base64 characters)",
					maxArtefactBytes, base64.StdEncoding.EncodedLen(maxArtefactBytes)))
			}
			content, err := base64.StdEncoding.Strict().DecodeString(in.Content)
			if err != nil {
				return nil, toolkit.InvalidParams(name, "content_bytes_base64", "not valid standard base64: "+err.Error())
			}
			if len(content) == 0 {
				return nil, toolkit.InvalidParams(name, "content_bytes_base64", "must not be empty")
			}
			if len(content) > maxArtefactBytes {
				return nil, toolkit.InvalidParams(name, "content_bytes_base64", fmt.Sprintf(
					"content is %d bytes; the limit is %d decoded bytes", len(content), maxArtefactBytes))
			}
			if err := checkLabel(name, "mime_type", in.MimeType); err != nil {
				return nil, err
			}
			if store.IsReserved(in.MimeType) {
				return nil, &toolkit.Error{Code: toolkit.CodeInvalidParams, Message: name + ": mime_type: starts with the reserved prefix " + store.ReservedPrefix,
					Data: &toolkit.ParamError{Param: "mime_type", Reason: "starts with the reserved prefix " + store.ReservedPrefix, ErrorCode: "RESERVED_PREFIX"}}
			}
			if err := checkLabel(name, "tool_origin", in.ToolOrigin); err != nil {
				return nil, err
			}
			ttl := defaultArtefactTTL
			if in.TTLSeconds != nil {
				if *in.TTLSeconds < 0 || *in.TTLSeconds > int64(maxArtefactTTL/time.Second) {
					return nil, toolkit.InvalidParams(name, "ttl_seconds", fmt.Sprintf("must be 0 (never) to %d (90 days)", int64(maxArtefactTTL/time.Second)))
				}
				ttl = time.Duration(*in.TTLSeconds) * time.Second
			}
			if in.TokenBudget != nil {
				if *in.TokenBudget < 1 {
					return nil, toolkit.InvalidParams(name, "token_budget", "must be at least 1")
				}
				if tokens := base64Tokens(len(in.Content)); tokens > *in.TokenBudget {
					return nil, toolkit.InvalidParams(name, "token_budget", fmt.Sprintf(
						"the content is %d tokens, over the budget of %d; nothing was stored", tokens, *in.TokenBudget))
				}
			}
			now := env.Time()
			var out ArtefactPutOutput
			err = env.Store.Update(ctx, func(tx store.Tx) error {
				if _, err := store.SweepArtefacts(tx, now, artefactSweepLimit); err != nil {
					return err
				}
				a, created, err := store.PutArtefact(tx, store.Scope{Tenant: c.TenantID(), Agent: owner}, in.MimeType, in.ToolOrigin, content, ttl, now)
				if err != nil {
					return err
				}
				out = ArtefactPutOutput{ArtefactInfo: newArtefactInfo(a), Created: created}
				return nil
			})
			if err != nil {
				return nil, err
			}
			return toolkit.JSONResult(out)
		}),
	}
}

// ---- artefact_get ----

type artefactGetArgs struct {
	ArtefactID  string `json:"artefact_id" schema:"maxLength=256;minLength=1"`
	TokenBudget *int   `json:"token_budget,omitempty" schema:"minimum=1"`
}

// ArtefactGetOutput is what artefact_get returns.
type ArtefactGetOutput struct {
	ArtefactInfo
	// ContentBase64 is the content, omitted when truncated.
	ContentBase64 *string `json:"content_base64,omitempty"`
	// ContentTokens is the content's cost in tokens (4 base64 characters each).
	ContentTokens int `json:"content_tokens"`
	// Truncated says the content exceeded token_budget and was withheld.
	Truncated bool `json:"truncated"`
}

func artefactGet() *toolkit.Tool {
	const name = "artefact_get"
	return &toolkit.Tool{
		Name:        name,
		Description: "Read back an artefact you parked; past token_budget, metadata only. Flag ARTEFACTS.",
		Annotations: toolkit.Annotations{Title: "Read artefact", ReadOnlyHint: true, IdempotentHint: true}, // its only write reclaims an expired artefact
		Out:         toolkit.OutputOf[ArtefactGetOutput](),
		Alt:         toolkit.OutputOf[FeatureOffOutput](),
		Gate:        artefactsOff(name),
		Run:         toolkit.Bind(name, runArtefactGet),
	}
}

// runArtefactGet runs one artefact_get call.
func runArtefactGet(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *artefactGetArgs) (*toolkit.Result, error) {
	const name = "artefact_get"
	if in.TokenBudget != nil && *in.TokenBudget < 1 {
		return nil, toolkit.InvalidParams(name, "token_budget", "must be at least 1")
	}
	now, scope := env.Time(), c.Scope()
	var (
		a       *store.Artefact
		content []byte
		holders []string
		expired bool
	)
	err := env.Store.View(ctx, func(tx store.Tx) error {
		a, content, holders, expired = nil, nil, nil, false
		var err error
		if scope.Agent != "" {
			a, content, err = store.GetArtefact(tx, scope, in.ArtefactID, now)
		} else {
			err = store.ErrNotFound
		}
		switch {
		case errors.Is(err, store.ErrArtefactExpired):
			expired = true
			return nil // your own copy expired: not found, whoever else holds the bytes
		case errors.Is(err, store.ErrNotFound):
			a = nil
		case err != nil:
			return err
		default:
			return nil
		}
		if scope.Agent == "" {
			return nil // an anonymous caller learns nothing of who holds what
		}
		holders, err = store.ArtefactHolders(tx, scope.Tenant, in.ArtefactID, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	if expired {
		err := env.Store.Update(ctx, func(tx store.Tx) error {
			cur, _, err := store.GetArtefact(tx, scope, in.ArtefactID, now)
			if errors.Is(err, store.ErrArtefactExpired) {
				return store.DeleteArtefact(tx, cur)
			}
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			return err // nil: refreshed meanwhile; stays
		})
		if err != nil {
			return nil, err
		}
	}
	if a == nil || expired {
		if len(holders) > 0 {
			return nil, &toolkit.Error{Code: toolkit.CodeCapabilityDenied,
				Message: name + ": artefact " + in.ArtefactID + " belongs to another passport",
				Data:    map[string]any{"artefact_id": in.ArtefactID, "reason": "cross_passport"}}
		}
		return toolkit.ErrorResult("%s: artefact %s not found (never parked, expired, or not in your tenant)", name, in.ArtefactID), nil
	}
	enc := base64.StdEncoding.EncodeToString(content)
	out := ArtefactGetOutput{ArtefactInfo: newArtefactInfo(a), ContentTokens: base64Tokens(len(enc))}
	if in.TokenBudget != nil && out.ContentTokens > *in.TokenBudget {
		out.Truncated = true
	} else {
		out.ContentBase64 = &enc
	}
	return toolkit.JSONResult(out)
}

// ---- artefact_list ----

type artefactListArgs struct {
	TopK        *int   `json:"top_k,omitempty" schema:"default=20;maximum=100;minimum=1"`
	Scope       string `json:"scope,omitempty" schema:"maxLength=255" doc:"Substring of mime_type or tool_origin."`
	TokenBudget *int   `json:"token_budget,omitempty" schema:"minimum=1"`
}

// ArtefactListOutput is what artefact_list returns.
type ArtefactListOutput struct {
	Artefacts []ArtefactInfo `json:"artefacts"`
	Count     int            `json:"count"`
	// Truncated says token_budget dropped rows.
	Truncated bool      `json:"truncated"`
	Envelope  *Envelope `json:"envelope,omitempty"`
}

// artefactEnvelope is the audit envelope of an artefact_list call: the
// listed artefacts are its memories_used (fact_id holds the artefact id,
// topic its mime type) and artefact_read its predicted effects.
func artefactEnvelope(tool string, arts []ArtefactInfo, created []time.Time, now time.Time) *Envelope {
	e := &Envelope{
		ReceiptsUsed: []string{}, MemoriesUsed: []MemoryUsed{}, PredictedEffects: []Effect{}, Links: map[string]string{},
		AutonomyConsumed: map[string]any{"capability": surface.Capability(tool), "cost_credits": 0, "scope": surface.Capability(tool)},
	}
	for i, a := range arts {
		age := max(0, now.Sub(created[i]).Hours())
		e.MemoriesUsed = append(e.MemoriesUsed, MemoryUsed{FactID: a.ArtefactID, Topic: a.MimeType,
			AgeHours: math.Round(age*100) / 100, AgeDays: math.Round(age/24*100) / 100, Freshness: "live"})
		e.PredictedEffects = append(e.PredictedEffects, Effect{Kind: "artefact_read", Entity: a.ArtefactID})
	}
	return e
}

func artefactList() *toolkit.Tool {
	const name = "artefact_list"
	return &toolkit.Tool{
		Name:        name,
		Description: "Your parked artefacts, newest first, metadata only. Flag ARTEFACTS.",
		Annotations: toolkit.Annotations{Title: "List artefacts", ReadOnlyHint: true, IdempotentHint: true}, // its only write reclaims expired artefacts
		Out:         toolkit.OutputOf[ArtefactListOutput](),
		Alt:         toolkit.OutputOf[FeatureOffOutput](),
		Gate:        artefactsOff(name),
		Run:         toolkit.Bind(name, runArtefactList),
	}
}

// runArtefactList runs one artefact_list call.
func runArtefactList(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *artefactListArgs) (*toolkit.Result, error) {
	const name = "artefact_list"
	topK := defaultArtefactList
	if in.TopK != nil {
		if *in.TopK < 1 || *in.TopK > maxArtefactList {
			return nil, toolkit.InvalidParams(name, "top_k", fmt.Sprintf("must be 1 to %d", maxArtefactList))
		}
		topK = *in.TopK
	}
	if in.TokenBudget != nil && *in.TokenBudget < 1 {
		return nil, toolkit.InvalidParams(name, "token_budget", "must be at least 1")
	}
	if err := checkLabel(name, "scope", in.Scope); err != nil {
		return nil, err
	}
	now, scope := env.Time(), c.Scope()
	var (
		found   []*store.Artefact
		expired []*store.Artefact
	)
	err := env.Store.View(ctx, func(tx store.Tx) error {
		found = nil
		var err error
		expired, err = store.ListArtefacts(tx, scope, now, func(a *store.Artefact) error {
			if store.IsReserved(a.MimeType) {
				return nil
			}
			if in.Scope != "" && !strings.Contains(a.MimeType, in.Scope) && !strings.Contains(a.ToolOrigin, in.Scope) {
				return nil
			}
			found = append(found, a)
			if len(found) >= topK {
				return store.ErrStop
			}
			return nil
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := reclaimExpired(ctx, env, expired, now); err != nil {
		return nil, err
	}
	out := ArtefactListOutput{Artefacts: []ArtefactInfo{}}
	var created []time.Time
	used := 0
	for _, a := range found {
		info := newArtefactInfo(a)
		if in.TokenBudget != nil {
			cost := rowTokens(info)
			if used+cost > *in.TokenBudget {
				out.Truncated = true
				break
			}
			used += cost
		}
		out.Artefacts = append(out.Artefacts, info)
		created = append(created, a.CreatedAt)
	}
	out.Count = len(out.Artefacts)
	if !env.Flags.AuditEnvelope {
		return toolkit.JSONResult(out)
	}
	out.Envelope = artefactEnvelope(name, out.Artefacts, created, now)
	result, err := toolkit.JSONResult(out)
	if err == nil {
		result.Meta = map[string]any{"envelope": out.Envelope}
	}
	return result, err
}

// reclaimExpired deletes the expired artefacts a listing passed over that
// are still expired when read again in the writing transaction; one gone
// since is passed over.
func reclaimExpired(ctx context.Context, env *toolkit.Env, expired []*store.Artefact, now time.Time) error {
	if len(expired) == 0 {
		return nil
	}
	return env.Store.Update(ctx, func(tx store.Tx) error {
		for _, x := range expired {
			cur, _, err := store.GetArtefact(tx, store.Scope{Tenant: x.Tenant, Agent: x.Owner}, x.ID, now)
			if errors.Is(err, store.ErrArtefactExpired) {
				if err := store.DeleteArtefact(tx, cur); err != nil {
					return err
				}
			} else if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		return nil
	})
}
