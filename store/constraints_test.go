package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

func putConstraint(t *testing.T, db store.Backend, c *store.Constraint) error {
	t.Helper()
	return db.Update(context.Background(), func(tx store.Tx) error { return store.PutConstraint(tx, c) })
}

func listConstraints(t *testing.T, db store.Backend, q store.ConstraintQuery) ([]string, bool) {
	t.Helper()
	var ids []string
	var truncated bool
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		var err error
		truncated, err = store.Constraints(tx, q, func(c *store.Constraint) error { ids = append(ids, c.ID); return nil })
		return err
	}))
	return ids, truncated
}

func TestConstraintsOrderAndFilters(t *testing.T) {
	db := openDB(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(id, typ, sev string, at int) {
		require.NoError(t, putConstraint(t, db, &store.Constraint{ID: id, Tenant: "t", Type: typ, Assertion: id, Severity: sev, CreatedAt: t0.Add(time.Duration(at) * time.Second)}))
	}
	mk("c_low", store.ConstraintPolicy, store.SeverityLow, 0)
	mk("c_high2", store.ConstraintBoundary, store.SeverityHigh, 3)
	mk("c_high1", store.ConstraintPolicy, store.SeverityHigh, 1)
	mk("c_crit", store.ConstraintShellPattern, store.SeverityCritical, 2)
	require.NoError(t, putConstraint(t, db, &store.Constraint{ID: "c_other", Tenant: "u", Type: store.ConstraintPolicy, Severity: store.SeverityCritical}))

	ids, truncated := listConstraints(t, db, store.ConstraintQuery{Tenant: "t"})
	assert.Equal(t, []string{"c_crit", "c_high1", "c_high2", "c_low"}, ids)
	assert.False(t, truncated)
	ids, _ = listConstraints(t, db, store.ConstraintQuery{Tenant: "t", Type: store.ConstraintPolicy})
	assert.Equal(t, []string{"c_high1", "c_low"}, ids)
	ids, truncated = listConstraints(t, db, store.ConstraintQuery{Tenant: "t", Limit: 2})
	assert.Equal(t, []string{"c_crit", "c_high1"}, ids)
	assert.True(t, truncated)

	// Suspending moves a constraint out of the active list, and back.
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		c, err := store.SetConstraintStatus(tx, "t", "c_crit", store.ConstraintSuspended)
		if err == nil {
			assert.Equal(t, store.ConstraintSuspended, c.Status)
		}
		return err
	}))
	ids, _ = listConstraints(t, db, store.ConstraintQuery{Tenant: "t"})
	assert.Equal(t, []string{"c_high1", "c_high2", "c_low"}, ids)
	ids, _ = listConstraints(t, db, store.ConstraintQuery{Tenant: "t", Status: store.ConstraintSuspended})
	assert.Equal(t, []string{"c_crit"}, ids)
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		_, err := store.SetConstraintStatus(tx, "t", "c_crit", store.ConstraintActive)
		return err
	}))
	ids, _ = listConstraints(t, db, store.ConstraintQuery{Tenant: "t"})
	assert.Equal(t, []string{"c_crit", "c_high1", "c_high2", "c_low"}, ids)

	err := db.Update(context.Background(), func(tx store.Tx) error {
		_, err := store.SetConstraintStatus(tx, "t", "c_missing", store.ConstraintSuspended)
		return err
	})
	assert.ErrorIs(t, err, store.ErrNotFound)
}

func TestConstraintValidationAndHash(t *testing.T) {
	db := openDB(t)
	for _, c := range []*store.Constraint{
		{Tenant: "t", Type: "rule", Severity: store.SeverityLow},
		{Tenant: "t", Type: store.ConstraintPolicy, Severity: "urgent"},
		{Tenant: "t", Type: store.ConstraintPolicy, Severity: store.SeverityLow, Status: "deleted"},
	} {
		assert.ErrorIs(t, putConstraint(t, db, c), store.ErrInvalidConstraint)
	}
	c := &store.Constraint{Tenant: "t", Type: store.ConstraintPolicy, Assertion: "a", Severity: store.SeverityLow}
	require.NoError(t, putConstraint(t, db, c))
	assert.Regexp(t, `^c_[0-9a-f]{32}$`, c.ID)
	assert.Equal(t, store.ConstraintActive, c.Status)
	assert.Equal(t, store.ConstraintHash("t", store.ConstraintPolicy, "a", store.SeverityLow), c.Hash)
	assert.Len(t, c.Hash, 64)
	assert.NotEqual(t, c.Hash, store.ConstraintHash("u", store.ConstraintPolicy, "a", store.SeverityLow))
}

func TestConstraintLimit(t *testing.T) {
	db := openDB(t)
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		for i := 0; i < store.MaxConstraints; i++ {
			if err := store.PutConstraint(tx, &store.Constraint{Tenant: "t", Type: store.ConstraintPolicy, Assertion: "a", Severity: store.SeverityLow}); err != nil {
				return err
			}
		}
		return nil
	}))
	err := putConstraint(t, db, &store.Constraint{Tenant: "t", Type: store.ConstraintPolicy, Severity: store.SeverityLow})
	assert.True(t, errors.Is(err, store.ErrConstraintLimit), "%v", err)
	// A suspended one may still be stored, and another tenant is not affected.
	require.NoError(t, putConstraint(t, db, &store.Constraint{Tenant: "t", Type: store.ConstraintPolicy, Severity: store.SeverityLow, Status: store.ConstraintSuspended}))
	require.NoError(t, putConstraint(t, db, &store.Constraint{Tenant: "u", Type: store.ConstraintPolicy, Severity: store.SeverityLow}))
}
