package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/crux-go/crux/internal/codec"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// Sessions are an agent's working memory: one JSON object per
// session id. They are per agent: an authenticated caller's session id is
// stored as __agent_session::<agent>::<id> and only that agent sees it; an
// anonymous caller's is stored under the raw id, in a space every anonymous
// caller of the tenant shares and no authenticated agent sees. Tenants are
// separate. Session ids starting with __agent_session:: are refused, so an
// anonymous caller can never name an agent's session.
//
// Expiry: ttl_seconds (0 = never, at most maxSessionTTL) sets a deadline
// on each save. A session past it is gone for every tool; it is deleted
// when a tool comes across it (get, list, delete) and every save or
// checkpoint reclaims up to [sessionReclaimBatch] expired sessions of its
// tenant in the same transaction.
//
// Archive status is kept by saves and checkpoints: only unarchive_session
// brings a session back to the default listing. Session tools mint no
// receipts: the CueCrux receipt format has no receipt kind for them.

// Limits of the session tools.
const (
	// maxSessionStateBytes caps a session's state as compact JSON.
	maxSessionStateBytes = 1 << 20
	// maxSessionTTL is the longest ttl_seconds accepted.
	maxSessionTTL = 365 * 24 * time.Hour
	// maxListedSessions is the most ids list_sessions returns; it reports
	// truncated when more match.
	maxListedSessions = 1000
	// checkpointSchema names the state session_checkpoint stores.
	checkpointSchema = "crux.session_checkpoint.v1"
)

// sessionReclaimBatch is how many expired sessions one write reclaims.
const sessionReclaimBatch = 64

// checkSessionID rejects a session id checkName refuses or one in the
// reserved agent namespace.
func checkSessionID(tool, id string) error {
	if err := checkName(tool, "session_id", id); err != nil {
		return err
	}
	if strings.HasPrefix(id, store.AgentSessionPrefix) {
		return toolkit.InvalidParams(tool, "session_id", "ids starting with "+store.AgentSessionPrefix+" are reserved for crux")
	}
	return nil
}

// sessionTokens estimates the tokens of a JSON text: bytes / 4, at least 1.
func sessionTokens(b []byte) int { return max(1, len(b)/4) }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// checkTTL enforces maxSessionTTL. (The schema does not carry it as a
// maximum: its message would print the bound as 3.1536e+07.)
func checkTTL(tool string, ttl int64) error {
	if ttl > int64(maxSessionTTL/time.Second) {
		return toolkit.InvalidParams(tool, "ttl_seconds", fmt.Sprintf("must be <= %d (365 days)", int64(maxSessionTTL/time.Second)))
	}
	return nil
}

// expiry turns ttl_seconds into a deadline (nil: never).
func expiry(now time.Time, ttl int64) *time.Time {
	if ttl <= 0 {
		return nil
	}
	t := now.Add(time.Duration(ttl) * time.Second)
	return &t
}

// writeSession stores state as owner's session id, keeping its archive
// status, and reclaims expired sessions of the tenant, in one transaction.
func writeSession(ctx context.Context, env *toolkit.Env, c toolkit.Caller, id string, state []byte, ttl int64) (*store.Session, error) {
	now := env.Time()
	base := store.Session{
		ID: id, Tenant: c.TenantID(), Owner: c.Identity(), State: state,
		WrittenBy: c.Identity(), UpdatedAt: now, ExpiresAt: expiry(now, ttl),
	}
	var s *store.Session
	err := env.Store.Update(ctx, func(tx store.Tx) error {
		q := base // fn may run again: start from the same record each time
		if _, err := store.ReclaimExpiredSessions(tx, q.Tenant, now, sessionReclaimBatch); err != nil {
			return err
		}
		old, err := store.GetSession(tx, store.Scope{Tenant: q.Tenant, Agent: q.Owner}, id, now)
		switch {
		case err == nil:
			q.Archived, q.ArchivedAt, q.ArchiveReason = old.Archived, old.ArchivedAt, old.ArchiveReason
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		if err := store.PutSession(tx, &q); err != nil {
			return err
		}
		s = &q
		return nil
	})
	return s, err
}

// SaveSessionOutput is what save_session returns: the session written.
type SaveSessionOutput struct {
	SessionID string `json:"session_id"`
	UpdatedAt string `json:"updated_at"`
	ExpiresAt string `json:"expires_at,omitempty"`
}

// SessionCheckpointOutput is what session_checkpoint returns: the session
// written, the size of the state stored and what was cut to fit the
// budget (field: entries or texts cut).
type SessionCheckpointOutput struct {
	SaveSessionOutput
	TotalTokens int            `json:"total_tokens"`
	Trimmed     map[string]int `json:"trimmed,omitempty"`
}

func writeOut(s *store.Session) SaveSessionOutput {
	out := SaveSessionOutput{SessionID: s.ID, UpdatedAt: stamp(s.UpdatedAt)}
	if s.ExpiresAt != nil {
		out.ExpiresAt = stamp(*s.ExpiresAt)
	}
	return out
}

// sessionNotFound is get/archive/unarchive's answer for a session that does
// not exist, or no longer does.
func sessionNotFound(id string) *toolkit.Result {
	return toolkit.ErrorResult("session not found: %s", id)
}

// sessionReadOnly is the answer to a write to a read-only session.
func sessionReadOnly(id string) *toolkit.Result {
	return toolkit.ErrorResult("session %s is a read-only reference a passport merge moved here: it cannot be saved over "+
		"or deleted; save under another id", id)
}

// ---- get_session ----

type sessionIDArgs struct {
	SessionID string `json:"session_id" schema:"minLength=1"`
}

// GetSessionOutput is a session as get_session returns it.
type GetSessionOutput struct {
	SessionID     string          `json:"session_id"`
	State         json.RawMessage `json:"state"`
	UpdatedAt     string          `json:"updated_at"`
	TotalTokens   int             `json:"total_tokens"`
	Archived      bool            `json:"archived"`
	ArchivedAt    string          `json:"archived_at,omitempty"`
	ArchiveReason string          `json:"archive_reason,omitempty"`
	ExpiresAt     string          `json:"expires_at,omitempty"`
	WrittenBy     string          `json:"written_by,omitempty"`
	// ReadOnly and MergedFrom describe a session a passport merge moved
	// here: each merge that moved it, oldest first.
	ReadOnly   bool                  `json:"read_only,omitempty"`
	MergedFrom []store.SessionOrigin `json:"merged_from,omitempty"`
}

func getSession() *toolkit.Tool {
	const name = "get_session"
	return &toolkit.Tool{
		Name:        name,
		Description: "Read one of your sessions (sessions are per agent). Missing or expired: isError.",
		Annotations: toolkit.Annotations{Title: "Get session", ReadOnlyHint: true, IdempotentHint: true}, // its only write reclaims an expired session
		Out:         toolkit.OutputOf[GetSessionOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *sessionIDArgs) (*toolkit.Result, error) {
			if err := checkSessionID(name, in.SessionID); err != nil {
				return nil, err
			}
			scope, now := c.Scope(), env.Time()
			var s *store.Session
			err := env.Store.View(ctx, func(tx store.Tx) error {
				var err error
				s, err = store.GetSession(tx, scope, in.SessionID, now)
				return err
			})
			if errors.Is(err, store.ErrSessionExpired) {
				err = env.Store.Update(ctx, func(tx store.Tx) error {
					_, err := store.ReclaimSession(tx, scope, in.SessionID, now)
					return err
				})
				if err == nil {
					return sessionNotFound(in.SessionID), nil
				}
			}
			switch {
			case errors.Is(err, store.ErrNotFound):
				return sessionNotFound(in.SessionID), nil
			case err != nil:
				return nil, err
			}
			out := GetSessionOutput{
				SessionID: s.ID, State: s.State, UpdatedAt: stamp(s.UpdatedAt), TotalTokens: sessionTokens(s.State),
				Archived: s.Archived, ArchiveReason: s.ArchiveReason, WrittenBy: s.WrittenBy,
				ReadOnly: s.ReadOnly, MergedFrom: s.Origins,
			}
			if s.ArchivedAt != nil {
				out.ArchivedAt = stamp(*s.ArchivedAt)
			}
			if s.ExpiresAt != nil {
				out.ExpiresAt = stamp(*s.ExpiresAt)
			}
			return toolkit.JSONResult(out)
		}),
	}
}

// ---- save_session ----

type saveSessionArgs struct {
	SessionID  string          `json:"session_id" schema:"minLength=1"`
	State      json.RawMessage `json:"state" schema:"type=object"`
	TTLSeconds int64           `json:"ttl_seconds,omitempty" schema:"default=0;minimum=0" doc:"0: never expires."`
}

func saveSession() *toolkit.Tool {
	const name = "save_session"
	return &toolkit.Tool{
		Name:        name,
		Description: "Save one of your sessions: state (a JSON object) replaces the previous one verbatim.",
		Annotations: toolkit.Annotations{Title: "Save session", IdempotentHint: true},
		Out:         toolkit.OutputOf[SaveSessionOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *saveSessionArgs) (*toolkit.Result, error) {
			if err := checkSessionID(name, in.SessionID); err != nil {
				return nil, err
			}
			if err := checkTTL(name, in.TTLSeconds); err != nil {
				return nil, err
			}
			var state bytes.Buffer
			if err := json.Compact(&state, in.State); err != nil {
				return nil, toolkit.InvalidParams(name, "state", "must be a JSON object")
			}
			if state.Len() > maxSessionStateBytes {
				return nil, toolkit.InvalidParams(name, "state", fmt.Sprintf("larger than %d bytes as compact JSON", maxSessionStateBytes))
			}
			s, err := writeSession(ctx, env, c, in.SessionID, state.Bytes(), in.TTLSeconds)
			if errors.Is(err, store.ErrReadOnlySession) {
				return sessionReadOnly(in.SessionID), nil
			}
			if err != nil {
				return nil, err
			}
			return toolkit.JSONResult(writeOut(s))
		}),
	}
}

// ---- session_checkpoint ----

type checkpointArgs struct {
	SessionID        string            `json:"session_id" schema:"minLength=1"`
	TokenBudget      int               `json:"token_budget" schema:"minimum=1" doc:"Cap on the stored checkpoint."`
	Objective        string            `json:"objective,omitempty"`
	CurrentMilestone string            `json:"current_milestone,omitempty"`
	Decisions        []json.RawMessage `json:"decisions,omitempty"`
	OpenQuestions    []json.RawMessage `json:"open_questions,omitempty"`
	FilesTouched     []string          `json:"files_touched,omitempty"`
	CommandsRun      []string          `json:"commands_run,omitempty"`
	TestStatus       json.RawMessage   `json:"test_status,omitempty"`
	NextAction       string            `json:"next_action,omitempty"`
	TTLSeconds       int64             `json:"ttl_seconds,omitempty" schema:"default=0;minimum=0"`
}

// checkpoint is the state session_checkpoint stores (schema
// crux.session_checkpoint.v1). Fields not given are left out. Trimmed
// maps each field cut to fit the token budget to what was cut: entries
// dropped from a list (oldest first), bytes cut from the end of a text, 1
// for a dropped test_status.
type checkpoint struct {
	Schema           string            `json:"schema"`
	Objective        string            `json:"objective,omitempty"`
	CurrentMilestone string            `json:"current_milestone,omitempty"`
	Decisions        []json.RawMessage `json:"decisions,omitempty"`
	OpenQuestions    []json.RawMessage `json:"open_questions,omitempty"`
	FilesTouched     []string          `json:"files_touched,omitempty"`
	CommandsRun      []string          `json:"commands_run,omitempty"`
	TestStatus       json.RawMessage   `json:"test_status,omitempty"`
	NextAction       string            `json:"next_action,omitempty"`
	Trimmed          map[string]int    `json:"trimmed,omitempty"`
}

// fit trims cp until its JSON takes at most budget tokens (bytes / 4):
// list entries from the front, commands_run first, then files_touched,
// open_questions and decisions; then test_status; then the longest of
// objective, current_milestone and next_action, cut at a rune boundary.
// It returns the JSON, or the tokens the smallest checkpoint needs when
// even that does not fit.
func (cp *checkpoint) fit(budget int) ([]byte, int, error) {
	b, err := codec.MarshalNoEscape(cp)
	if err != nil {
		return nil, 0, err
	}
	limit := budget*4 + 3 // the most bytes whose estimate is within budget
	note := func(field string, n int) error {
		if cp.Trimmed == nil {
			cp.Trimmed = map[string]int{}
		}
		cp.Trimmed[field] += n
		b, err = codec.MarshalNoEscape(cp)
		return err
	}
	lists := []struct {
		field string
		n     func() int
		size  func(i int) int
		drop  func(k int)
	}{
		{"commands_run", func() int { return len(cp.CommandsRun) }, func(i int) int { return jsonLen(cp.CommandsRun[i]) },
			func(k int) { cp.CommandsRun = cp.CommandsRun[k:] }},
		{"files_touched", func() int { return len(cp.FilesTouched) }, func(i int) int { return jsonLen(cp.FilesTouched[i]) },
			func(k int) { cp.FilesTouched = cp.FilesTouched[k:] }},
		{"open_questions", func() int { return len(cp.OpenQuestions) }, func(i int) int { return len(cp.OpenQuestions[i]) },
			func(k int) { cp.OpenQuestions = cp.OpenQuestions[k:] }},
		{"decisions", func() int { return len(cp.Decisions) }, func(i int) int { return len(cp.Decisions[i]) },
			func(k int) { cp.Decisions = cp.Decisions[k:] }},
	}
	for _, l := range lists {
		for len(b) > limit && l.n() > 0 {
			excess, k, cut := len(b)-limit, 0, 0
			for k < l.n() && cut < excess {
				cut += l.size(k) + 1
				k++
			}
			l.drop(k)
			if err := note(l.field, k); err != nil {
				return nil, 0, err
			}
		}
	}
	if len(b) > limit && cp.TestStatus != nil {
		cp.TestStatus = nil
		if err := note("test_status", 1); err != nil {
			return nil, 0, err
		}
	}
	texts := []struct {
		field string
		s     *string
	}{{"objective", &cp.Objective}, {"current_milestone", &cp.CurrentMilestone}, {"next_action", &cp.NextAction}}
	for len(b) > limit {
		longest := -1
		for i, t := range texts {
			if *t.s != "" && (longest < 0 || len(*t.s) > len(*texts[longest].s)) {
				longest = i
			}
		}
		if longest < 0 {
			return nil, sessionTokens(b), nil
		}
		s := *texts[longest].s
		n := len(codec.CutUTF8(s, max(0, len(s)-(len(b)-limit))))
		*texts[longest].s = s[:n]
		if err := note(texts[longest].field, len(s)-n); err != nil {
			return nil, 0, err
		}
	}
	return b, 0, nil
}

func jsonLen(s string) int {
	b, _ := codec.MarshalNoEscape(s)
	return len(b)
}

func sessionCheckpoint() *toolkit.Tool {
	const name = "session_checkpoint"
	return &toolkit.Tool{
		Name:        name,
		Description: "Save a session from typed fields (objective, decisions, next_action...), cut to token_budget oldest first.",
		Annotations: toolkit.Annotations{Title: "Session checkpoint", IdempotentHint: true},
		Out:         toolkit.OutputOf[SessionCheckpointOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *checkpointArgs) (*toolkit.Result, error) {
			if err := checkSessionID(name, in.SessionID); err != nil {
				return nil, err
			}
			if err := checkTTL(name, in.TTLSeconds); err != nil {
				return nil, err
			}
			if in.TokenBudget <= 0 { // the schema says so too; keep the rule where the value is used
				return nil, toolkit.InvalidParams(name, "token_budget", "must be greater than 0")
			}
			cp := checkpoint{
				Schema: checkpointSchema, Objective: in.Objective, CurrentMilestone: in.CurrentMilestone,
				FilesTouched: in.FilesTouched, CommandsRun: in.CommandsRun, NextAction: in.NextAction,
			}
			for _, src := range []struct {
				from []json.RawMessage
				to   *[]json.RawMessage
			}{{in.Decisions, &cp.Decisions}, {in.OpenQuestions, &cp.OpenQuestions}} {
				for _, raw := range src.from {
					var b bytes.Buffer
					if err := json.Compact(&b, raw); err != nil {
						return nil, err
					}
					*src.to = append(*src.to, b.Bytes())
				}
			}
			if in.TestStatus != nil {
				var b bytes.Buffer
				if err := json.Compact(&b, in.TestStatus); err != nil {
					return nil, err
				}
				cp.TestStatus = b.Bytes()
			}
			state, need, err := cp.fit(in.TokenBudget)
			switch {
			case err != nil:
				return nil, err
			case state == nil:
				return nil, toolkit.InvalidParams(name, "token_budget", fmt.Sprintf("too small: a checkpoint needs at least %d tokens", need))
			case len(state) > maxSessionStateBytes:
				return nil, toolkit.InvalidParams(name, "token_budget", fmt.Sprintf("lets the checkpoint exceed %d bytes; lower it", maxSessionStateBytes))
			}
			s, err := writeSession(ctx, env, c, in.SessionID, state, in.TTLSeconds)
			if errors.Is(err, store.ErrReadOnlySession) {
				return sessionReadOnly(in.SessionID), nil
			}
			if err != nil {
				return nil, err
			}
			return toolkit.JSONResult(SessionCheckpointOutput{SaveSessionOutput: writeOut(s), TotalTokens: sessionTokens(state), Trimmed: cp.Trimmed})
		}),
	}
}

// ---- list_sessions ----

// ListSessionsOutput is what list_sessions returns: session ids, sorted.
type ListSessionsOutput struct {
	Count     int      `json:"count"`
	Sessions  []string `json:"sessions"`
	Truncated bool     `json:"truncated"`
}

// DeleteSessionOutput is what delete_session returns: deleted is false when
// there was no such session.
type DeleteSessionOutput struct {
	Deleted   bool   `json:"deleted"`
	SessionID string `json:"session_id"`
}

// ArchiveSessionOutput is what archive_session returns.
type ArchiveSessionOutput struct {
	Archived    bool   `json:"archived"`
	ArchivedAt  string `json:"archived_at"`
	Reason      string `json:"reason,omitempty"`
	SessionID   string `json:"session_id"`
	WasArchived bool   `json:"was_archived"`
}

// UnarchiveSessionOutput is what unarchive_session returns: archived is
// always false.
type UnarchiveSessionOutput struct {
	Archived    bool   `json:"archived"`
	SessionID   string `json:"session_id"`
	WasArchived bool   `json:"was_archived"`
}

type listSessionsArgs struct {
	IncludeArchived bool   `json:"include_archived,omitempty" schema:"default=false"`
	Prefix          string `json:"prefix,omitempty"`
}

func listSessions() *toolkit.Tool {
	const name = "list_sessions"
	return &toolkit.Tool{
		Name:        name,
		Description: "Your session ids, sorted; archived ones with include_archived.",
		Annotations: toolkit.Annotations{Title: "List sessions", ReadOnlyHint: true, IdempotentHint: true}, // its only write reclaims expired sessions
		Out:         toolkit.OutputOf[ListSessionsOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *listSessionsArgs) (*toolkit.Result, error) {
			if err := checkNames(name, "prefix", in.Prefix); err != nil {
				return nil, err
			}
			q := store.SessionQuery{
				Scope: c.Scope(), Prefix: in.Prefix,
				IncludeArchived: in.IncludeArchived, Limit: maxListedSessions, Now: env.Time(),
			}
			var res store.SessionList
			err := env.Store.View(ctx, func(tx store.Tx) error {
				var err error
				res, err = store.ListSessions(tx, q)
				return err
			})
			if err != nil {
				return nil, err
			}
			if len(res.Expired) > 0 {
				err = env.Store.Update(ctx, func(tx store.Tx) error {
					for _, id := range res.Expired {
						if _, err := store.ReclaimSession(tx, q.Scope, id, q.Now); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					return nil, err
				}
			}
			ids := []string{}
			rc := newRowCap(0, map[string]any{"sessions": ids, "count": len(res.IDs), "truncated": true})
			for _, id := range res.IDs {
				if !rc.take(id) {
					break
				}
				ids = append(ids, id)
			}
			return toolkit.JSONResult(ListSessionsOutput{Sessions: ids, Count: len(ids), Truncated: res.Truncated || rc.truncated})
		}),
	}
}

// ---- delete_session ----

func deleteSession() *toolkit.Tool {
	const name = "delete_session"
	return &toolkit.Tool{
		Name:        name,
		Description: "Delete one of your sessions for good; archive_session is reversible.",
		Annotations: toolkit.Annotations{Title: "Delete session", DestructiveHint: true, IdempotentHint: true},
		Out:         toolkit.OutputOf[DeleteSessionOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *sessionIDArgs) (*toolkit.Result, error) {
			if err := checkSessionID(name, in.SessionID); err != nil {
				return nil, err
			}
			var deleted bool
			err := env.Store.Update(ctx, func(tx store.Tx) error {
				var err error
				deleted, err = store.DeleteSession(tx, c.Scope(), in.SessionID, env.Time())
				return err
			})
			if errors.Is(err, store.ErrReadOnlySession) {
				return sessionReadOnly(in.SessionID), nil
			}
			if err != nil {
				return nil, err
			}
			return toolkit.JSONResult(DeleteSessionOutput{Deleted: deleted, SessionID: in.SessionID})
		}),
	}
}

// ---- archive_session, unarchive_session ----

type archiveArgs struct {
	SessionID string `json:"session_id" schema:"minLength=1"`
	Reason    string `json:"reason,omitempty" schema:"maxLength=1024"`
}

// setArchived archives (with reason) or unarchives owner's session in one
// transaction and returns it as stored, with whether it was archived
// before. A missing or expired session is store.ErrNotFound.
func setArchived(ctx context.Context, env *toolkit.Env, c toolkit.Caller, id string, archived bool, reason string) (*store.Session, bool, error) {
	var s *store.Session
	var was bool
	now := env.Time()
	err := env.Store.Update(ctx, func(tx store.Tx) error {
		cur, err := store.GetSession(tx, c.Scope(), id, now)
		if err != nil {
			return err
		}
		was = cur.Archived
		cur.Archived, cur.ArchivedAt, cur.ArchiveReason = archived, nil, ""
		if archived {
			cur.ArchivedAt, cur.ArchiveReason = &now, reason
		}
		s = cur
		return store.PutSession(tx, cur)
	})
	return s, was, err
}

func archiveSession() *toolkit.Tool {
	const name = "archive_session"
	return &toolkit.Tool{
		Name:        name,
		Description: "Hide a session from list_sessions; get_session still reads it; unarchive_session undoes it.",
		Annotations: toolkit.Annotations{Title: "Archive session", IdempotentHint: true},
		Out:         toolkit.OutputOf[ArchiveSessionOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *archiveArgs) (*toolkit.Result, error) {
			if err := checkSessionID(name, in.SessionID); err != nil {
				return nil, err
			}
			s, was, err := setArchived(ctx, env, c, in.SessionID, true, in.Reason)
			switch {
			case errors.Is(err, store.ErrNotFound):
				return sessionNotFound(in.SessionID), nil
			case err != nil:
				return nil, err
			}
			return toolkit.JSONResult(ArchiveSessionOutput{SessionID: s.ID, Archived: true, ArchivedAt: stamp(*s.ArchivedAt),
				WasArchived: was, Reason: s.ArchiveReason})
		}),
	}
}

func unarchiveSession() *toolkit.Tool {
	const name = "unarchive_session"
	return &toolkit.Tool{
		Name:        name,
		Description: "Bring an archived session back into list_sessions.",
		Annotations: toolkit.Annotations{Title: "Unarchive session", IdempotentHint: true},
		Out:         toolkit.OutputOf[UnarchiveSessionOutput](),
		Run: toolkit.Bind(name, func(ctx context.Context, env *toolkit.Env, c toolkit.Caller, in *sessionIDArgs) (*toolkit.Result, error) {
			if err := checkSessionID(name, in.SessionID); err != nil {
				return nil, err
			}
			s, was, err := setArchived(ctx, env, c, in.SessionID, false, "")
			switch {
			case errors.Is(err, store.ErrNotFound):
				return sessionNotFound(in.SessionID), nil
			case err != nil:
				return nil, err
			}
			return toolkit.JSONResult(UnarchiveSessionOutput{SessionID: s.ID, WasArchived: was})
		}),
	}
}
