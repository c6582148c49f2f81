package store_test

import (
	"context"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"lukechampine.com/blake3"

	"github.com/crux-go/crux/store"
)

func TestArtefactID(t *testing.T) {
	h := blake3.Sum256([]byte("hello"))
	assert.Equal(t, "art_"+hex.EncodeToString(h[:]), store.ArtefactID([]byte("hello")))
	assert.Equal(t, store.ArtefactID([]byte("hello")), store.ArtefactID([]byte("hello")))
	assert.NotEqual(t, store.ArtefactID([]byte("hello")), store.ArtefactID([]byte("hello!")))
}

func TestArtefactsPerOwnerRefreshAndList(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var first, again, bobs *store.Artefact
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		var err error
		var created bool
		first, created, err = store.PutArtefact(tx, store.Scope{Tenant: "t1", Agent: "alice"}, "text/plain", "a", []byte("x"), time.Hour, now)
		require.NoError(t, err)
		assert.True(t, created)
		again, created, err = store.PutArtefact(tx, store.Scope{Tenant: "t1", Agent: "alice"}, "text/markdown", "b", []byte("x"), 0, now.Add(time.Minute))
		require.NoError(t, err)
		assert.False(t, created, "same owner, same bytes: a refresh")
		bobs, created, err = store.PutArtefact(tx, store.Scope{Tenant: "t1", Agent: "bob"}, "text/plain", "", []byte("x"), time.Hour, now)
		require.NoError(t, err)
		assert.True(t, created, "another owner holds its own copy")
		_, _, err = store.PutArtefact(tx, store.Scope{Tenant: "t1", Agent: "alice"}, "text/plain", "", []byte("y"), time.Hour, now.Add(2*time.Minute))
		return err
	}))
	assert.Equal(t, first.ID, again.ID)
	assert.Equal(t, first.ID, bobs.ID)
	assert.Equal(t, first.CreatedAt, again.CreatedAt, "created_at kept")
	assert.Nil(t, again.ExpiresAt, "ttl 0: never expires")
	assert.Equal(t, "text/markdown", again.MimeType)

	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		a, b, err := store.GetArtefact(tx, store.Scope{Tenant: "t1", Agent: "alice"}, first.ID, now.Add(48*time.Hour))
		require.NoError(t, err)
		assert.Equal(t, []byte("x"), b)
		assert.Equal(t, "b", a.ToolOrigin)
		_, _, err = store.GetArtefact(tx, store.Scope{Tenant: "t2", Agent: "alice"}, first.ID, now)
		assert.ErrorIs(t, err, store.ErrNotFound, "tenants are apart")
		holders, err := store.ArtefactHolders(tx, "t1", first.ID, now)
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"alice", "bob"}, holders)
		var ids []string
		_, err = store.ListArtefacts(tx, store.Scope{Tenant: "t1", Agent: "alice"}, now, func(a *store.Artefact) error {
			ids = append(ids, a.ID)
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, []string{store.ArtefactID([]byte("y")), first.ID}, ids, "newest first")
		return nil
	}))
}

func TestArtefactExpiryAndSweep(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		for _, c := range []string{"a", "b", "c"} {
			if _, _, err := store.PutArtefact(tx, store.Scope{Tenant: "t1", Agent: "alice"}, "text/plain", "", []byte(c), time.Hour, now); err != nil {
				return err
			}
		}
		_, _, err := store.PutArtefact(tx, store.Scope{Tenant: "t1", Agent: "alice"}, "text/plain", "", []byte("keep"), 0, now)
		return err
	}))
	later := now.Add(2 * time.Hour)
	require.NoError(t, db.View(ctx, func(tx store.Tx) error {
		a, _, err := store.GetArtefact(tx, store.Scope{Tenant: "t1", Agent: "alice"}, store.ArtefactID([]byte("a")), later)
		assert.True(t, errors.Is(err, store.ErrArtefactExpired) && errors.Is(err, store.ErrNotFound))
		assert.NotNil(t, a)
		n := 0
		expired, err := store.ListArtefacts(tx, store.Scope{Tenant: "t1", Agent: "alice"}, later, func(*store.Artefact) error { n++; return nil })
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		assert.Len(t, expired, 3)
		return nil
	}))
	require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
		n, err := store.SweepArtefacts(tx, later, 2)
		require.NoError(t, err)
		assert.Equal(t, 2, n, "bounded")
		n, err = store.SweepArtefacts(tx, later, 10)
		require.NoError(t, err)
		assert.Equal(t, 1, n)
		n, err = store.SweepArtefacts(tx, later, 10)
		require.NoError(t, err)
		assert.Equal(t, 0, n)
		holders, err := store.ArtefactHolders(tx, "t1", store.ArtefactID([]byte("a")), now)
		require.NoError(t, err)
		assert.Empty(t, holders, "reclaimed records are gone")
		_, _, err = store.GetArtefact(tx, store.Scope{Tenant: "t1", Agent: "alice"}, store.ArtefactID([]byte("keep")), later.Add(1000*time.Hour))
		return err
	}))
}
