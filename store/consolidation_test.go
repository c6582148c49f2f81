package store_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
)

func TestPolarity(t *testing.T) {
	for _, v := range []string{"true", "yes", "y", "on", "enabled", "enable", "active", "complete", "completed",
		"passed", "pass", "approved", "approve", "present", " Enabled. ", "YES!", "(on)"} {
		assert.Equal(t, store.PolarityPositive, store.Polarity(v), v)
	}
	for _, v := range []string{"false", "no", "n", "off", "disabled", "disable", "inactive", "blocked", "failed",
		"fail", "rejected", "reject", "absent", "Disabled", "\"off\""} {
		assert.Equal(t, store.PolarityNegative, store.Polarity(v), v)
	}
	for _, v := range []string{"", "maybe", "is enabled", "not enabled", "1", "0", "enabled_flag", "ok"} {
		assert.Empty(t, store.Polarity(v), v)
	}
}

// put is putFact with the defaults of these tests: confidence 0.5 (below
// the consolidation floor) and the current time.
func put(t *testing.T, db *bolt.DB, n store.NewFact) *store.Fact {
	t.Helper()
	if n.Confidence == 0 {
		n.Confidence = 0.5
	}
	if n.Now.IsZero() {
		n.Now = time.Now()
	}
	return putFact(t, db, n)
}

func getFact(t *testing.T, db *bolt.DB, id string) *store.Fact {
	t.Helper()
	var f *store.Fact
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		var err error
		f, err = store.GetFact(tx, id)
		return err
	}))
	return f
}

// revive makes a superseded fact current again by rewriting its record and
// its entity-index entry (which holds the retirement from format 8), as a
// restore or an import outside PutFact could, leaving its chain with two
// current facts.
func revive(t *testing.T, db *bolt.DB, id string) {
	t.Helper()
	f := getFact(t, db, id)
	f.SupersededBy, f.ValidTo = "", nil
	enc, err := cbor.EncOptions{Time: cbor.TimeRFC3339Nano}.EncMode()
	require.NoError(t, err)
	b, err := enc.Marshal(f)
	require.NoError(t, err)
	entry := binary.BigEndian.AppendUint32([]byte(f.Tenant+"\x00"+f.StoredEntity()+"\x00"+f.Key+"\x00"), f.Version)
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		if err := tx.Put("facts.entity", entry, []byte(id)); err != nil {
			return err
		}
		return tx.Put("facts", []byte(id), b)
	}))
	require.True(t, getFact(t, db, id).Current())
}

func contradictions(t *testing.T, db *bolt.DB, q store.ContradictionQuery) store.ContradictionResult {
	t.Helper()
	if q.Tenant == "" {
		q.Tenant = "t"
	}
	var res store.ContradictionResult
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		var err error
		res, err = store.Contradictions(tx, q)
		return err
	}))
	return res
}

func ids(c store.Contradiction) []string {
	var out []string
	for _, f := range c.Facts {
		out = append(out, f.ID)
	}
	return out
}

func TestContradictionsAcrossScopes(t *testing.T) {
	db := openDB(t)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	shared := put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "svc", Key: "cache", Value: "enabled", Now: t0})
	mine := put(t, db, store.NewFact{Scope: store.Scope{Agent: "alice"}, Entity: "svc", Key: "cache", Value: "Disabled.", Private: true, Now: t0.Add(time.Minute)})
	// Same polarity, another value without a class, and bob's private view: no candidates.
	put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "svc", Key: "tls", Value: "on", Now: t0})
	put(t, db, store.NewFact{Scope: store.Scope{Agent: "alice"}, Entity: "svc", Key: "tls", Value: "yes", Private: true, Now: t0})
	put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "svc", Key: "mode", Value: "fast", Now: t0})
	put(t, db, store.NewFact{Scope: store.Scope{Agent: "alice"}, Entity: "svc", Key: "mode", Value: "off", Private: true, Now: t0})
	put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "svc", Key: "log", Value: "off", Private: true, Now: t0})
	put(t, db, store.NewFact{Scope: store.Scope{Agent: "carol"}, Entity: "svc", Key: "log", Value: "on", Now: t0})

	for name, q := range map[string]store.ContradictionQuery{
		"own private entities": {Scope: store.Scope{Agent: "alice"}},
		"entity":               {Scope: store.Scope{Agent: "alice"}, Entity: "svc"},
		"entity and key":       {Scope: store.Scope{Agent: "alice"}, Entity: "svc", Key: "cache"},
		"prefix":               {Scope: store.Scope{Agent: "alice"}, EntityPrefix: "sv"},
		"key":                  {Scope: store.Scope{Agent: "alice"}, Key: "cache"},
	} {
		res := contradictions(t, db, q)
		require.Len(t, res.Candidates, 1, name)
		c := res.Candidates[0]
		assert.Equal(t, "svc", c.Entity, name)
		assert.Equal(t, "cache", c.Key, name)
		assert.Equal(t, store.PolarityPositive, c.PolarityA, name)
		assert.Equal(t, store.PolarityNegative, c.PolarityB, name)
		assert.Equal(t, []string{shared.ID, mine.ID}, ids(c), name)
		assert.False(t, res.Truncated, name)
		assert.Equal(t, 1, res.Entities, name)
	}

	// Others never see alice's private fact; bob's own private "off" meets carol's shared "on".
	assert.Empty(t, contradictions(t, db, store.ContradictionQuery{Scope: store.Scope{Agent: "carol"}, Entity: "svc"}).Candidates)
	assert.Empty(t, contradictions(t, db, store.ContradictionQuery{Entity: "svc"}).Candidates)
	res := contradictions(t, db, store.ContradictionQuery{Scope: store.Scope{Agent: "bob"}, Key: "log"})
	require.Len(t, res.Candidates, 1)
	assert.Equal(t, "log", res.Candidates[0].Key)
	// Anonymous callers without a filter have nothing to compare.
	res = contradictions(t, db, store.ContradictionQuery{})
	assert.Empty(t, res.Candidates)
	assert.Zero(t, res.Entities)
	// Another tenant sees nothing.
	assert.Empty(t, contradictions(t, db, store.ContradictionQuery{Scope: store.Scope{Tenant: "u", Agent: "alice"}, Entity: "svc"}).Candidates)
}

func TestContradictionsWithinAChain(t *testing.T) {
	db := openDB(t)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	old := put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "flag", Key: "beta", Value: "approved", Now: t0})
	newer := put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "flag", Key: "beta", Value: "rejected", Now: t0.Add(time.Hour)})
	// A superseded version is history, not a contradiction.
	assert.Empty(t, contradictions(t, db, store.ContradictionQuery{Entity: "flag"}).Candidates)
	revive(t, db, old.ID)
	res := contradictions(t, db, store.ContradictionQuery{Entity: "flag"})
	require.Len(t, res.Candidates, 1)
	assert.Equal(t, []string{old.ID, newer.ID}, ids(res.Candidates[0]))
}

func TestContradictionsBounded(t *testing.T) {
	db := openDB(t)
	for i := range 5 {
		e := fmt.Sprintf("e%d", i)
		put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: e, Key: "k", Value: "on"})
		put(t, db, store.NewFact{Scope: store.Scope{Agent: "alice"}, Entity: e, Key: "k", Value: "off", Private: true})
	}
	res := contradictions(t, db, store.ContradictionQuery{Scope: store.Scope{Agent: "alice"}})
	assert.Len(t, res.Candidates, 5)
	assert.Equal(t, 10, res.FactsRead)
	assert.False(t, res.LimitReached)

	res = contradictions(t, db, store.ContradictionQuery{Scope: store.Scope{Agent: "alice"}, Limit: 2})
	assert.Len(t, res.Candidates, 2)
	assert.True(t, res.LimitReached)
	assert.Equal(t, "e0", res.Candidates[0].Entity)

	res = contradictions(t, db, store.ContradictionQuery{Scope: store.Scope{Agent: "alice"}, Limit: 5})
	assert.Len(t, res.Candidates, 5)
	assert.False(t, res.LimitReached, "exactly the limit")

	// The fact budget stops the scan; a half-read entity is not compared.
	res = contradictions(t, db, store.ContradictionQuery{Scope: store.Scope{Agent: "alice"}, MaxFacts: 5})
	assert.True(t, res.Truncated)
	assert.Equal(t, 5, res.FactsRead)
	assert.Len(t, res.Candidates, 2)
	assert.Equal(t, 2, res.Entities)

	var err error
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		_, err = store.Contradictions(tx, store.ContradictionQuery{Scope: store.Scope{Tenant: "t"}, Entity: "a", EntityPrefix: "a"})
		return nil
	}))
	assert.Error(t, err)
}

func consolidate(db *bolt.DB, r store.ConsolidateRequest) (*store.Consolidation, error) {
	if r.Tenant == "" {
		r.Tenant = "t"
	}
	if r.Floor == 0 {
		r.Floor = 0.99
	}
	if r.Confidence == 0 {
		r.Confidence = 1
	}
	if r.Now.IsZero() {
		r.Now = time.Now()
	}
	var c *store.Consolidation
	err := db.Update(context.Background(), func(tx store.Tx) error {
		var err error
		c, err = store.Consolidate(tx, r)
		return err
	})
	return c, err
}

func TestConsolidate(t *testing.T) {
	db := openDB(t)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	a := put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "proj", Key: "status", Value: "blocked", Now: t0})
	b := put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "proj", Key: "status", Value: "active", Now: t0.Add(time.Hour)})
	revive(t, db, a.ID)

	// The current fact must be a target: the canonical version retires it.
	_, err := consolidate(db, store.ConsolidateRequest{Scope: store.Scope{Agent: "alice"}, ID: "c0", Entity: "proj", Key: "status", Value: "active", Targets: []string{a.ID}})
	var te *store.TargetError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, store.TargetUnlisted, te.Reason)
	assert.Equal(t, b.ID, te.FactID)

	c, err := consolidate(db, store.ConsolidateRequest{Scope: store.Scope{Agent: "alice"}, ID: "c1", Entity: "proj", Key: "status",
		Value: "active", Targets: []string{a.ID, b.ID}, Confidence: 0.8, HorizonClass: store.HorizonMedium, Now: t0.Add(2 * time.Hour)})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{a.ID, b.ID}, c.Superseded)
	assert.Equal(t, []string{a.ID, b.ID}, c.Sources)
	assert.Equal(t, store.CanonicalHash("active"), c.CanonicalHash)
	assert.Regexp(t, `^blake3:[0-9a-f]{64}$`, c.CanonicalHash)
	assert.Equal(t, "consolidation:c1", c.Canonical.SourceReceipt)
	assert.Equal(t, uint32(3), c.Canonical.Version)
	assert.Equal(t, 0.8, c.Canonical.Confidence)
	assert.Equal(t, store.HorizonMedium, c.Canonical.HorizonClass)
	assert.False(t, c.Canonical.Private)
	for _, id := range []string{a.ID, b.ID} {
		assert.Equal(t, c.Canonical.ID, getFact(t, db, id).SupersededBy)
	}
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		hist, err := store.History(tx, store.Scope{Tenant: "t", Agent: "alice"}, "proj", "status")
		assert.Len(t, hist, 3, "history preserved")
		got, err2 := store.ConsolidationCanonical(tx, "t", "c1")
		assert.Equal(t, c.Canonical.ID, got)
		return errors.Join(err, err2)
	}))

	// The id is taken now.
	d := put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "x", Key: "k", Value: "v"})
	_, err = consolidate(db, store.ConsolidateRequest{Scope: store.Scope{Agent: "alice"}, ID: "c1", Entity: "x", Key: "k", Value: "w", Targets: []string{d.ID}})
	var ce *store.ConsolidationExistsError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, c.Canonical.ID, ce.CanonicalFactID)
}

func TestConsolidateRefusals(t *testing.T) {
	db := openDB(t)
	live := put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "e", Key: "k", Value: "v1"})
	other := put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "e", Key: "other", Value: "v"})
	linked := put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "e", Key: "linked", Value: "v", SourceReceipt: "r_1"})
	high := put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "e", Key: "high", Value: "v", Confidence: 0.99})
	mine := put(t, db, store.NewFact{Scope: store.Scope{Agent: "alice"}, Entity: "e", Key: "mine", Value: "v", Private: true})
	bobs := put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "e", Key: "bobs", Value: "v", Private: true})
	pinned := put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "e", Key: "pinned", Value: "v"})
	deleted := put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "e", Key: "deleted", Value: "v"})
	old := put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "e", Key: "old", Value: "v1"})
	put(t, db, store.NewFact{Scope: store.Scope{Agent: "bob"}, Entity: "e", Key: "old", Value: "v2"})
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		if err := store.SetPin(tx, store.Scope{Tenant: "t", Agent: "alice"}, pinned.ID, true); err != nil {
			return err
		}
		if err := store.SetPin(tx, store.Scope{Tenant: "t", Agent: "bob"}, other.ID, true); err != nil { // any agent's pin protects
			return err
		}
		_, _, err := store.DeleteFact(tx, store.Scope{Tenant: "t", Agent: "bob"}, deleted.ID, time.Now())
		return err
	}))

	guards := []struct {
		key, id, reason string
		protected       []string
		floor           float64
	}{
		{"k", live.ID, store.GuardProtected, []string{live.ID}, 0},
		{"pinned", pinned.ID, store.GuardPinned, nil, 0},
		{"linked", linked.ID, store.GuardReceiptLinked, nil, 0},
		{"mine", mine.ID, store.GuardPrivate, nil, 0},
		{"high", high.ID, store.GuardHighConfidence, nil, 0},
		{"k", live.ID, store.GuardHighConfidence, nil, 0.5},
		{"other", other.ID, store.GuardPinned, nil, 0},
	}
	for _, g := range guards {
		_, err := consolidate(db, store.ConsolidateRequest{Scope: store.Scope{Agent: "alice"}, ID: "g", Entity: "e", Key: g.key, Value: "x",
			Targets: []string{g.id}, Protected: g.protected, Floor: g.floor})
		var ge *store.GuardError
		require.ErrorAs(t, err, &ge, g.reason)
		assert.Equal(t, g.reason, ge.Reason)
		assert.Equal(t, g.id, ge.FactID)
		assert.NotEmpty(t, ge.Error())
	}

	targets := []struct {
		key    string
		ids    []string
		reason string
		id     string
	}{
		{"k", nil, store.TargetNone, ""},
		{"k", []string{"f_nope"}, store.TargetNotFound, "f_nope"},
		{"bobs", []string{bobs.ID}, store.TargetNotFound, bobs.ID}, // bob's private fact does not exist for alice
		{"deleted", []string{deleted.ID}, store.TargetDeleted, deleted.ID},
		{"old", []string{old.ID}, store.TargetSuperseded, old.ID},
		{"k", []string{other.ID}, store.TargetOutside, other.ID},
		{"k", []string{live.ID, live.ID}, store.TargetDuplicate, live.ID},
		{"k", []string{""}, store.TargetBadID, ""},
	}
	for _, tc := range targets {
		_, err := consolidate(db, store.ConsolidateRequest{Scope: store.Scope{Agent: "alice"}, ID: "t", Entity: "e", Key: tc.key, Value: "x", Targets: tc.ids})
		var te *store.TargetError
		require.ErrorAs(t, err, &te, tc.reason)
		assert.Equal(t, tc.reason, te.Reason)
		assert.Equal(t, tc.id, te.FactID)
		assert.NotEmpty(t, te.Error())
	}
	// Another tenant's fact does not exist here.
	_, err := consolidate(db, store.ConsolidateRequest{Scope: store.Scope{Tenant: "u", Agent: "alice"}, ID: "t", Entity: "e", Key: "k", Value: "x", Targets: []string{live.ID}})
	var te *store.TargetError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, store.TargetNotFound, te.Reason)

	// Nothing was retired by any refusal; bob's pin does not protect from alice.
	assert.True(t, getFact(t, db, live.ID).Current())
	c, err := consolidate(db, store.ConsolidateRequest{Scope: store.Scope{Agent: "alice"}, ID: "ok", Entity: "e", Key: "k", Value: "x", Targets: []string{live.ID}})
	require.NoError(t, err)
	assert.Equal(t, []string{live.ID}, c.Superseded)

	_, err = consolidate(db, store.ConsolidateRequest{ID: "anon", Entity: "e", Key: "other", Value: "x", Targets: []string{other.ID}})
	assert.ErrorIs(t, err, store.ErrInvalidFact)
	_, err = consolidate(db, store.ConsolidateRequest{Scope: store.Scope{Agent: "alice"}, Entity: "e", Key: "other", Value: "x", Targets: []string{other.ID}})
	assert.ErrorIs(t, err, store.ErrInvalidFact)
}
