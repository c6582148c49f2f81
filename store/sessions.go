package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Working-memory sessions (save_session and friends) are kept apart from the
// session bindings of cuecrux_session (passports.go). A session belongs to
// an owner within a tenant: an authenticated agent, or "" for the shared
// anonymous space. The primary key is (tenant, owner, logical id), so one
// owner's sessions are one contiguous, sorted range; the expiry index orders
// a tenant's expiring sessions by deadline so reclaiming them never scans.
const (
	bucketMemSessions = "memsessions"        // tenant, owner, id → JSON Session
	bucketMemExpiry   = "memsessions.expiry" // tenant, 0, expiry (8 bytes BE), primary key → primary key
)

// AgentSessionPrefix starts the stored id of an agent's session:
// __agent_session::<agent>::<id>. Anonymous sessions are stored under their
// raw id, which may not start with it.
const AgentSessionPrefix = "__agent_session::"

// ErrSessionExpired reports a session whose deadline has passed. It wraps
// ErrNotFound: an expired session does not exist for its readers.
var ErrSessionExpired = fmt.Errorf("%w: session expired", ErrNotFound)

// Session is one working-memory session.
type Session struct {
	// ID is the logical id the owner uses.
	ID string `json:"session_id"`
	// Tenant and Owner scope the session; Owner is "" for anonymous callers.
	Tenant string `json:"tenant_id"`
	Owner  string `json:"owner,omitempty"`
	// State is the session's JSON object, as written.
	State json.RawMessage `json:"state"`
	// WrittenBy is the authenticated identity of the last writer, "" when
	// that was an anonymous caller.
	WrittenBy string    `json:"written_by,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	// ExpiresAt is the deadline, nil for a session that never expires.
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
	Archived      bool       `json:"archived,omitempty"`
	ArchivedAt    *time.Time `json:"archived_at,omitempty"`
	ArchiveReason string     `json:"archive_reason,omitempty"`
	// ReadOnly marks a session a passport merge moved here from another
	// passport: a reference whose state never changes. It cannot be saved
	// over or deleted ([ErrReadOnlySession]); it can be archived and
	// unarchived, and it still expires at its deadline.
	ReadOnly bool `json:"read_only,omitempty"`
	// Origins records, oldest first, each merge that moved the session.
	Origins []SessionOrigin `json:"origins,omitempty"`
}

// SessionOrigin is one passport merge that moved a session: the passport
// it belonged to, its id there, and the merge receipt.
type SessionOrigin struct {
	Passport  string `json:"passport"`
	SessionID string `json:"session_id"`
	Receipt   string `json:"receipt_id"`
}

// ErrReadOnlySession reports a write to a session a passport merge moved
// (see [Session.ReadOnly]).
var ErrReadOnlySession = errors.New("store: the session is a read-only reference moved by a passport merge")

// StoredSessionID is the stored id of owner's session id:
// __agent_session::<owner>::<id>, or id itself when owner is "".
func StoredSessionID(owner, id string) string {
	if owner == "" {
		return id
	}
	return AgentSessionPrefix + owner + "::" + id
}

// StoredID is the session's stored id (see [StoredSessionID]).
func (s *Session) StoredID() string { return StoredSessionID(s.Owner, s.ID) }

// Expired reports whether the session's deadline is at or before now.
func (s *Session) Expired(now time.Time) bool {
	return s.ExpiresAt != nil && !s.ExpiresAt.After(now)
}

func sessionKey(tenant, owner, id string) []byte { return indexKey(tenant, owner, id) }

func expiryKey(tenant string, at time.Time, primary []byte) []byte {
	k := append([]byte(tenant), 0)
	k = binary.BigEndian.AppendUint64(k, uint64(at.UnixNano()))
	return append(k, primary...)
}

func getSessionRaw(tx Tx, tenant, owner, id string) (*Session, error) {
	if id == "" {
		return nil, ErrNotFound
	}
	v, err := tx.Get(bucketMemSessions, sessionKey(tenant, owner, id))
	if err != nil {
		return nil, err
	}
	s := new(Session)
	if err := json.Unmarshal(v, s); err != nil {
		return nil, fmt.Errorf("store: session %s: %w", id, err)
	}
	return s, nil
}

// GetSession reads owner's session id in tenant. A missing session is
// ErrNotFound; one whose deadline has passed is ErrSessionExpired (which
// is also ErrNotFound) and is left for [ReclaimSession].
func GetSession(tx Tx, sc Scope, id string, now time.Time) (*Session, error) {
	s, err := getSessionRaw(tx, sc.Tenant, sc.Agent, id)
	if err != nil {
		return nil, err
	}
	if s.Expired(now) {
		return nil, ErrSessionExpired
	}
	return s, nil
}

// PutSession writes s, replacing any session with the same tenant, owner
// and id (an expired one included), and keeps the expiry index in step. A
// read-only session may be replaced only by itself with other archive
// fields (archive_session, unarchive_session); any other write to it is
// [ErrReadOnlySession], unless it had expired by s.UpdatedAt, the time of
// the write.
func PutSession(tx Tx, s *Session) error {
	if s.ID == "" {
		return ErrEmptyKey
	}
	key := sessionKey(s.Tenant, s.Owner, s.ID)
	old, err := getSessionRaw(tx, s.Tenant, s.Owner, s.ID)
	if err == nil && old.ReadOnly && !old.Expired(s.UpdatedAt) && !sameReference(old, s) {
		return ErrReadOnlySession
	}
	switch {
	case err == nil && old.ExpiresAt != nil:
		if err := tx.Delete(bucketMemExpiry, expiryKey(s.Tenant, *old.ExpiresAt, key)); err != nil {
			return err
		}
	case err != nil && !errors.Is(err, ErrNotFound):
		return err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the state stays as written
	if err := enc.Encode(s); err != nil {
		return err
	}
	if err := tx.Put(bucketMemSessions, key, bytes.TrimSuffix(b.Bytes(), []byte("\n"))); err != nil {
		return err
	}
	if s.ExpiresAt != nil {
		return tx.Put(bucketMemExpiry, expiryKey(s.Tenant, *s.ExpiresAt, key), key)
	}
	return nil
}

// sameReference reports whether s keeps everything of the read-only
// session old but its archive fields.
func sameReference(old, s *Session) bool {
	if !s.ReadOnly || !bytes.Equal(old.State, s.State) || s.WrittenBy != old.WrittenBy ||
		!s.UpdatedAt.Equal(old.UpdatedAt) || len(s.Origins) != len(old.Origins) {
		return false
	}
	if (s.ExpiresAt == nil) != (old.ExpiresAt == nil) || s.ExpiresAt != nil && !s.ExpiresAt.Equal(*old.ExpiresAt) {
		return false
	}
	for i := range s.Origins {
		if s.Origins[i] != old.Origins[i] {
			return false
		}
	}
	return true
}

// DeleteSession removes owner's session id in tenant. It reports whether a
// live session was removed: deleting a missing or expired one removes
// what is left of it and reports false. A live read-only session is not
// removed: [ErrReadOnlySession].
func DeleteSession(tx Tx, sc Scope, id string, now time.Time) (bool, error) {
	s, err := getSessionRaw(tx, sc.Tenant, sc.Agent, id)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if s.ReadOnly && !s.Expired(now) {
		return false, ErrReadOnlySession
	}
	return !s.Expired(now), removeSession(tx, s)
}

func removeSession(tx Tx, s *Session) error {
	key := sessionKey(s.Tenant, s.Owner, s.ID)
	if s.ExpiresAt != nil {
		if err := tx.Delete(bucketMemExpiry, expiryKey(s.Tenant, *s.ExpiresAt, key)); err != nil {
			return err
		}
	}
	return tx.Delete(bucketMemSessions, key)
}

// ReclaimSession deletes owner's session id in tenant if it has expired by
// now, and reports whether it did. A live session is left alone, so a
// reclaim racing a fresh save loses nothing.
func ReclaimSession(tx Tx, sc Scope, id string, now time.Time) (bool, error) {
	s, err := getSessionRaw(tx, sc.Tenant, sc.Agent, id)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil || !s.Expired(now) {
		return false, err
	}
	return true, removeSession(tx, s)
}

// ReclaimExpiredSessions deletes up to limit sessions of tenant whose
// deadline is at or before now, earliest first, through the expiry index,
// and returns how many it deleted.
func ReclaimExpiredSessions(tx Tx, tenant string, now time.Time, limit int) (int, error) {
	var due [][]byte
	cut := uint64(now.UnixNano())
	p := append([]byte(tenant), 0)
	err := tx.Scan(bucketMemExpiry, p, false, func(k, v []byte) error {
		if len(due) >= limit || len(k) < len(p)+8 || binary.BigEndian.Uint64(k[len(p):]) > cut {
			return ErrStop
		}
		due = append(due, bytes.Clone(v))
		return nil
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, key := range due {
		parts := bytes.SplitN(key, []byte{0}, 3)
		if len(parts) != 3 {
			continue
		}
		ok, err := ReclaimSession(tx, Scope{Tenant: string(parts[0]), Agent: string(parts[1])}, string(parts[2]), now)
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// SessionQuery selects sessions for [ListSessions].
type SessionQuery struct {
	Scope // the owner
	// Prefix keeps the sessions whose logical id starts with it.
	Prefix string
	// IncludeArchived adds archived sessions.
	IncludeArchived bool
	// Limit is the most ids returned (at least 1).
	Limit int
	Now   time.Time
}

// SessionList is what [ListSessions] found.
type SessionList struct {
	// IDs are the logical ids, in ascending byte order.
	IDs []string
	// Truncated says more sessions matched than Limit.
	Truncated bool
	// Expired are the logical ids of matching sessions past their
	// deadline (at most Limit of them), skipped; a writer may reclaim them.
	Expired []string
}

// ListSessions lists the owner's live sessions in tenant in ascending
// order of logical id. For the anonymous owner ("") only ids outside the
// agent namespace are listed.
func ListSessions(tx Tx, q SessionQuery) (SessionList, error) {
	var out SessionList
	limit := max(q.Limit, 1)
	base := append(indexKey(q.Tenant, q.Agent), 0)
	err := tx.Scan(bucketMemSessions, append(bytes.Clone(base), q.Prefix...), false, func(k, v []byte) error {
		id := string(k[len(base):])
		if q.Agent == "" && strings.HasPrefix(id, AgentSessionPrefix) {
			return nil
		}
		var s struct { // the fields a listing needs; the state is skipped
			ExpiresAt *time.Time `json:"expires_at"`
			Archived  bool       `json:"archived"`
		}
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("store: session %s: %w", id, err)
		}
		switch {
		case s.ExpiresAt != nil && !s.ExpiresAt.After(q.Now):
			if len(out.Expired) < limit {
				out.Expired = append(out.Expired, id)
			}
			return nil
		case s.Archived && !q.IncludeArchived:
			return nil
		case len(out.IDs) >= limit:
			out.Truncated = true
			return ErrStop
		}
		out.IDs = append(out.IDs, id)
		return nil
	})
	return out, err
}
