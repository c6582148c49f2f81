package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

func TestStoredSessionID(t *testing.T) {
	assert.Equal(t, "__agent_session::alice::s1", store.StoredSessionID("alice", "s1"))
	assert.Equal(t, "s1", store.StoredSessionID("", "s1"))
	s := &store.Session{ID: "x", Owner: "bob"}
	assert.Equal(t, "__agent_session::bob::x", s.StoredID())
}

func TestSessionsPerOwnerAndTenant(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		for _, s := range []store.Session{
			{ID: "a", Tenant: "t1", Owner: "alice", State: json.RawMessage(`{"n":1}`), UpdatedAt: now},
			{ID: "b", Tenant: "t1", Owner: "alice", State: json.RawMessage(`{}`), UpdatedAt: now, Archived: true},
			{ID: "a", Tenant: "t1", Owner: "bob", State: json.RawMessage(`{"n":2}`), UpdatedAt: now},
			{ID: "a", Tenant: "t1", State: json.RawMessage(`{"n":3}`), UpdatedAt: now},
			{ID: "a", Tenant: "t2", Owner: "alice", State: json.RawMessage(`{"n":4}`), UpdatedAt: now},
		} {
			if err := store.PutSession(tx, &s); err != nil {
				return err
			}
		}
		return nil
	}))
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		for owner, want := range map[string]string{"alice": `{"n":1}`, "bob": `{"n":2}`, "": `{"n":3}`} {
			s, err := store.GetSession(tx, store.Scope{Tenant: "t1", Agent: owner}, "a", now)
			require.NoError(t, err)
			assert.JSONEq(t, want, string(s.State))
		}
		_, err := store.GetSession(tx, store.Scope{Tenant: "t2", Agent: "bob"}, "a", now)
		assert.ErrorIs(t, err, store.ErrNotFound)

		l, err := store.ListSessions(tx, store.SessionQuery{Scope: store.Scope{Tenant: "t1", Agent: "alice"}, Limit: 10, Now: now})
		require.NoError(t, err)
		assert.Equal(t, []string{"a"}, l.IDs)
		l, err = store.ListSessions(tx, store.SessionQuery{Scope: store.Scope{Tenant: "t1", Agent: "alice"}, IncludeArchived: true, Limit: 10, Now: now})
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "b"}, l.IDs)
		l, err = store.ListSessions(tx, store.SessionQuery{Scope: store.Scope{Tenant: "t1", Agent: ""}, Limit: 10, Now: now})
		require.NoError(t, err)
		assert.Equal(t, []string{"a"}, l.IDs)
		l, err = store.ListSessions(tx, store.SessionQuery{Scope: store.Scope{Tenant: "t1", Agent: "alice"}, IncludeArchived: true, Limit: 1, Now: now})
		require.NoError(t, err)
		assert.Equal(t, []string{"a"}, l.IDs)
		assert.True(t, l.Truncated)
		return nil
	}))
}

func TestSessionExpiry(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		for i, d := range []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour} {
			if err := store.PutSession(tx, &store.Session{ID: fmt.Sprint("s", i), Tenant: "t", Owner: "alice", State: json.RawMessage(`{}`), UpdatedAt: now, ExpiresAt: at(d)}); err != nil {
				return err
			}
		}
		// An anonymous one and one in another tenant, both due.
		if err := store.PutSession(tx, &store.Session{ID: "anon", Tenant: "t", State: json.RawMessage(`{}`), ExpiresAt: at(time.Hour)}); err != nil {
			return err
		}
		return store.PutSession(tx, &store.Session{ID: "s0", Tenant: "u", Owner: "alice", State: json.RawMessage(`{}`), ExpiresAt: at(time.Hour)})
	}))
	later := now.Add(2 * time.Hour)
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		_, err := store.GetSession(tx, store.Scope{Tenant: "t", Agent: "alice"}, "s0", later)
		assert.ErrorIs(t, err, store.ErrSessionExpired)
		assert.ErrorIs(t, err, store.ErrNotFound)
		l, err := store.ListSessions(tx, store.SessionQuery{Scope: store.Scope{Tenant: "t", Agent: "alice"}, Limit: 10, Now: later})
		require.NoError(t, err)
		assert.Equal(t, []string{"s2"}, l.IDs)
		assert.Equal(t, []string{"s0", "s1"}, l.Expired)

		// Re-saving s1 with a new deadline keeps it alive: the old index entry goes.
		require.NoError(t, store.PutSession(tx, &store.Session{ID: "s1", Tenant: "t", Owner: "alice", State: json.RawMessage(`{}`), ExpiresAt: at(10 * time.Hour)}))
		n, err := store.ReclaimExpiredSessions(tx, "t", later, 10)
		require.NoError(t, err)
		assert.Equal(t, 2, n) // alice's s0 and the anonymous one; tenant u untouched
		_, err = store.GetSession(tx, store.Scope{Tenant: "t", Agent: "alice"}, "s1", later)
		assert.NoError(t, err)
		_, err = store.GetSession(tx, store.Scope{Tenant: "u", Agent: "alice"}, "s0", now)
		assert.NoError(t, err)

		ok, err := store.ReclaimSession(tx, store.Scope{Tenant: "t", Agent: "alice"}, "s2", later) // live: kept
		require.NoError(t, err)
		assert.False(t, ok)
		deleted, err := store.DeleteSession(tx, store.Scope{Tenant: "t", Agent: "alice"}, "s2", later)
		require.NoError(t, err)
		assert.True(t, deleted)
		deleted, err = store.DeleteSession(tx, store.Scope{Tenant: "t", Agent: "alice"}, "s2", later)
		require.NoError(t, err)
		assert.False(t, deleted)
		return nil
	}))
}
