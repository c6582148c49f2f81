package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/internal/pgtest"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/postgres"
	"github.com/crux-go/crux/store/storetest"
)

// The identity-continuity rules run on every backend: bbolt always, and
// PostgreSQL when $CRUX_TEST_POSTGRES names a server.

var idT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// identityBackends are the backends the identity tests run on.
func identityBackends(t *testing.T) map[string]func(t *testing.T) store.Backend {
	out := map[string]func(t *testing.T) store.Backend{
		"bolt": func(t *testing.T) store.Backend { return openDB(t) },
		// Every Update runs twice, the first time rolled back, as a retried
		// transaction does: the operations keep nothing from a first run.
		"bolt-twice": func(t *testing.T) store.Backend { return storetest.Twice(openDB(t)) },
	}
	if os.Getenv("CRUX_TEST_POSTGRES") != "" || os.Getenv("CI") != "" {
		out["postgres"] = func(t *testing.T) store.Backend {
			schema, _ := pgtest.Schema(t, "crux_store")
			db, err := postgres.Open(context.Background(), pgtest.DSN(t), &postgres.Options{Schema: schema})
			require.NoError(t, err)
			t.Cleanup(func() { db.Close() })
			return db
		}
	}
	return out
}

// onEachBackend runs fn on a fresh store of every backend.
func onEachBackend(t *testing.T, fn func(t *testing.T, db store.Backend)) {
	for name, open := range identityBackends(t) {
		t.Run(name, func(t *testing.T) { fn(t, open(t)) })
	}
}

func update(t *testing.T, db store.Backend, fn func(tx store.Tx) error) {
	t.Helper()
	require.NoError(t, db.Update(context.Background(), fn))
}

func view(t *testing.T, db store.Backend, fn func(tx store.Tx) error) {
	t.Helper()
	require.NoError(t, db.View(context.Background(), fn))
}

func issue(t *testing.T, db store.Backend, ids ...string) {
	t.Helper()
	update(t, db, func(tx store.Tx) error {
		for _, id := range ids {
			if err := store.PutPassport(tx, &store.Passport{PrincipalID: id, Tenant: "t", Tier: store.TierUnverified,
				Category: "work", IssuedAt: idT0}); err != nil {
				return err
			}
		}
		return nil
	})
}

// private writes agent's private fact at idT0 plus minutes.
func private(t *testing.T, db store.Backend, agent, entity, key, value string, minutes int) *store.Fact {
	t.Helper()
	return putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: "t", Agent: agent}, Entity: entity, Key: key,
		Value: value, Private: true, Now: idT0.Add(time.Duration(minutes) * time.Minute)})
}

// current maps entity/key to value for the current facts agent sees of
// its own private space.
func currentPrivate(t *testing.T, db store.Backend, agent string) map[string]string {
	t.Helper()
	out := map[string]string{}
	view(t, db, func(tx store.Tx) error {
		res, err := store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: "t", Agent: agent}, Now: idT0.Add(time.Hour)})
		for _, f := range res.Facts {
			if f.Private {
				out[f.Entity+"/"+f.Key] = f.Value
			}
		}
		return err
	})
	return out
}

func history(t *testing.T, db store.Backend, agent, entity, key string) []*store.Fact {
	t.Helper()
	var out []*store.Fact
	view(t, db, func(tx store.Tx) error {
		var err error
		out, err = store.History(tx, store.Scope{Tenant: "t", Agent: agent}, entity, key)
		return err
	})
	return out
}

func noProblems(t *testing.T, db store.Backend) {
	t.Helper()
	view(t, db, func(tx store.Tx) error {
		problems, err := store.Diagnose(tx)
		assert.Empty(t, problems)
		return err
	})
}

func passport(t *testing.T, db store.Backend, id string) *store.Passport {
	t.Helper()
	var p *store.Passport
	view(t, db, func(tx store.Tx) error {
		var err error
		p, err = store.GetPassport(tx, "t", id)
		return err
	})
	return p
}

// keyword returns the values of the facts agent finds with the keyword.
func keyword(t *testing.T, db store.Backend, agent, word string) []string {
	t.Helper()
	var out []string
	view(t, db, func(tx store.Tx) error {
		res, err := store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: "t", Agent: agent},
			Terms: store.Words(word), IncludeSuperseded: true, Now: idT0.Add(time.Hour)})
		for _, f := range res.Facts {
			out = append(out, f.Value)
		}
		return err
	})
	sort.Strings(out)
	return out
}

func split(db store.Backend, source, fresh string) (*store.SplitResult, error) {
	var res *store.SplitResult
	err := db.Update(context.Background(), func(tx store.Tx) error {
		var err error
		res, err = store.SplitPassport(tx, store.SplitRequest{Tenant: "t", Source: source, New: fresh, Now: idT0.Add(time.Hour)},
			func(*store.SplitResult) (string, error) { return "r_split_" + fresh, nil })
		return err
	})
	return res, err
}

func TestSplitPassport(t *testing.T) {
	onEachBackend(t, func(t *testing.T, db store.Backend) {
		issue(t, db, "alice", "bob")
		v1 := private(t, db, "alice", "project", "editor", "vim", 1)
		v2 := private(t, db, "alice", "project", "editor", "helix", 2)
		gone := private(t, db, "alice", "project", "old", "deleted soon", 3)
		update(t, db, func(tx store.Tx) error {
			_, _, err := store.DeleteFact(tx, store.Scope{Tenant: "t", Agent: "alice"}, gone.ID, idT0.Add(4*time.Minute))
			return err
		})
		putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: "t", Agent: "alice"}, Entity: "shared", Key: "k", Value: "everyone", Now: idT0})
		before := history(t, db, "alice", "project", "editor")

		res, err := split(db, "alice", "alice-2")
		require.NoError(t, err)
		require.Len(t, res.Inherited, 1, "only current private facts are inherited")
		inh := res.Inherited[0]
		assert.Equal(t, v2.ID, inh.FromFactID)
		assert.Equal(t, "project", inh.Entity)
		assert.Equal(t, "editor", inh.Key)

		p := passport(t, db, "alice-2")
		assert.Equal(t, "alice", p.ForkedFrom)
		assert.Equal(t, "alice", p.SponsorID)
		assert.Equal(t, "r_split_alice-2", p.ForkReceipt)
		assert.Equal(t, store.TierUnverified, p.Tier)
		assert.Equal(t, "work", p.Category)
		view(t, db, func(tx store.Tx) error {
			l, err := store.PassportLineage(tx, "t", "alice")
			require.Len(t, l, 1)
			assert.Equal(t, store.LineageLink{Kind: store.LinkSplitInto, Passport: "alice-2", Receipt: "r_split_alice-2", At: idT0.Add(time.Hour)}, l[0])
			return err
		})

		// The copy: version 1, same value and times, its origin naming the fact copied.
		h := history(t, db, "alice-2", "project", "editor")
		require.Len(t, h, 1)
		c := h[0]
		assert.Equal(t, inh.FactID, c.ID)
		assert.Equal(t, uint32(1), c.Version)
		assert.Equal(t, "helix", c.Value)
		assert.Equal(t, v2.StoredAt, c.StoredAt)
		assert.Empty(t, c.Supersedes)
		assert.Equal(t, []store.FactOrigin{{Op: store.OriginSplit, Receipt: "r_split_alice-2", Passport: "alice", FactID: v2.ID, Version: 2}}, c.Origins)
		// Its history is reached through the origin: the source's chain is untouched.
		assert.Equal(t, before, history(t, db, "alice", "project", "editor"))
		assert.Equal(t, v1.ID, history(t, db, "alice", "project", "editor")[0].ID)
		assert.Equal(t, map[string]string{"project/editor": "helix"}, currentPrivate(t, db, "alice-2"))
		assert.Equal(t, []string{"helix"}, keyword(t, db, "alice-2", "helix"))

		// Writes diverge.
		private(t, db, "alice-2", "project", "editor", "emacs", 70)
		assert.Equal(t, map[string]string{"project/editor": "emacs"}, currentPrivate(t, db, "alice-2"))
		assert.Equal(t, map[string]string{"project/editor": "helix"}, currentPrivate(t, db, "alice"))
		private(t, db, "alice", "project", "theme", "dark", 71)
		assert.NotContains(t, currentPrivate(t, db, "alice-2"), "project/theme")
		noProblems(t, db)

		// Refusals: a taken name (a passport, or an agent's records), a
		// missing or revoked source. Nothing is written.
		_, err = split(db, "alice", "bob")
		assert.ErrorIs(t, err, store.ErrPassportExists)
		private(t, db, "carol", "x", "y", "carol's", 5)
		_, err = split(db, "alice", "carol")
		assert.ErrorIs(t, err, store.ErrPassportExists)
		assert.EqualError(t, err, "the name carol is in use: an agent of that name holds records in tenant t")
		_, err = split(db, "zed", "zed-2")
		assert.ErrorIs(t, err, store.ErrPassportNotFound)
		assert.EqualError(t, err, "no passport zed in tenant t")
		revoked := passport(t, db, "bob")
		revoked.RevokedAt = &idT0
		update(t, db, func(tx store.Tx) error { return store.PutPassport(tx, revoked) })
		_, err = split(db, "bob", "bob-2")
		assert.ErrorIs(t, err, store.ErrPassportRevoked)

		// A failing receipt leaves nothing behind.
		err = db.Update(context.Background(), func(tx store.Tx) error {
			_, err := store.SplitPassport(tx, store.SplitRequest{Tenant: "t", Source: "alice", New: "alice-3", Now: idT0},
				func(*store.SplitResult) (string, error) { return "", errors.New("no signer") })
			return err
		})
		require.EqualError(t, err, "no signer")
		view(t, db, func(tx store.Tx) error {
			_, err := store.GetPassport(tx, "t", "alice-3")
			assert.ErrorIs(t, err, store.ErrNotFound)
			return nil
		})
		assert.Empty(t, currentPrivate(t, db, "alice-3"))
	})
}

// mergeFixture is the store of a merge of alice into bob: what each held.
type mergeFixture struct {
	aliceA1, aliceA2, aliceB, aliceC, aliceD, aliceE, bobA, bobC, shared *store.Fact
}

func fillMerge(t *testing.T, db store.Backend) *mergeFixture {
	t.Helper()
	issue(t, db, "alice", "bob", "olga")
	f := &mergeFixture{}
	f.aliceA1 = private(t, db, "alice", "p", "a", "alpha one", 1)
	f.aliceA2 = private(t, db, "alice", "p", "a", "alpha two", 2)
	f.aliceB = private(t, db, "alice", "p", "b", "only alice", 3)
	f.aliceC = private(t, db, "alice", "p", "c", "same value", 4)
	f.aliceD = private(t, db, "alice", "p", "d", "deleted", 5)
	f.aliceE = private(t, db, "alice", "p", "e", "forgotten", 6)
	f.bobA = private(t, db, "bob", "p", "a", "bob's alpha", 7)
	f.bobC = private(t, db, "bob", "p", "c", "same value", 8)
	private(t, db, "bob", "q", "z", "bob only", 9)
	f.shared = putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: "t", Agent: "alice"}, Entity: "s", Key: "k", Value: "shared", Now: idT0})
	alice := store.Scope{Tenant: "t", Agent: "alice"}
	update(t, db, func(tx store.Tx) error {
		if _, _, err := store.DeleteFact(tx, alice, f.aliceD.ID, idT0.Add(10*time.Minute)); err != nil {
			return err
		}
		return store.Forget(tx, &store.ForgetRecord{ID: "r_forget", Tenant: "t", Passport: "alice", Reason: "test",
			Scope:       store.ForgetScope{Type: store.ScopeEntityPrefix, Value: "p"},
			InitiatedAt: idT0.Add(11 * time.Minute), WindowEndsAt: idT0.Add(7 * 24 * time.Hour)}, []*store.Fact{f.aliceE})
	})
	exp := idT0.Add(48 * time.Hour)
	update(t, db, func(tx store.Tx) error {
		for _, s := range []*store.Session{
			{ID: "s1", Tenant: "t", Owner: "alice", State: []byte(`{"n":1}`), WrittenBy: "alice", UpdatedAt: idT0},
			{ID: "s2", Tenant: "t", Owner: "alice", State: []byte(`{"n":2}`), WrittenBy: "alice", UpdatedAt: idT0, ExpiresAt: &exp},
			{ID: "s1", Tenant: "t", Owner: "bob", State: []byte(`{"bob":1}`), WrittenBy: "bob", UpdatedAt: idT0},
		} {
			if err := store.PutSession(tx, s); err != nil {
				return err
			}
		}
		for _, id := range []string{f.shared.ID, f.aliceB.ID} {
			if err := store.SetPin(tx, alice, id, true); err != nil {
				return err
			}
		}
		if _, _, err := store.PutArtefact(tx, alice, "text/plain", "test", []byte("common"), 3*time.Hour, idT0); err != nil {
			return err
		}
		if _, _, err := store.PutArtefact(tx, store.Scope{Tenant: "t", Agent: "bob"}, "text/plain", "test", []byte("common"), 0, idT0); err != nil {
			return err
		}
		_, _, err := store.PutArtefact(tx, alice, "text/plain", "test", []byte("alice's own"), 2*time.Hour, idT0)
		return err
	})
	return f
}

func merge(db store.Backend, source, target, policy string) (*store.MergeResult, error) {
	var res *store.MergeResult
	err := db.Update(context.Background(), func(tx store.Tx) error {
		var err error
		res, err = store.MergePassports(tx, store.MergeRequest{Tenant: "t", Source: source, Target: target, Policy: policy,
			Now: idT0.Add(time.Hour), MaxSessionID: 1024},
			func(*store.MergeResult) (string, error) { return "r_merge", nil })
		return err
	})
	return res, err
}

// chainRow is a fact version as the reconstruction compares it.
type chainRow struct {
	ID, Value, Supersedes, SupersededBy string
	Version                             uint32
	Deleted                             bool
}

func rows(fs []*store.Fact) []chainRow {
	var out []chainRow
	for _, f := range fs {
		out = append(out, chainRow{ID: f.ID, Value: f.Value, Supersedes: f.Supersedes, SupersededBy: f.SupersededBy, Version: f.Version, Deleted: f.Deleted})
	}
	return out
}

func TestMergePassports(t *testing.T) {
	onEachBackend(t, func(t *testing.T, db store.Backend) {
		f := fillMerge(t, db)
		// alice's private chains as they stand, to reconstruct after the merge.
		chains := map[string][]chainRow{}
		for _, k := range []string{"a", "b", "c", "d"} {
			chains["p/"+k] = rows(history(t, db, "alice", "p", k))
		}

		res, err := merge(db, "alice", "bob", store.PreferTarget)
		require.NoError(t, err)
		assert.Equal(t, []store.MergeConflict{{Entity: "p", Key: "a", SourceFactID: f.aliceA2.ID, TargetFactID: f.bobA.ID,
			Resolution: store.PreferTarget, ChosenFactID: f.bobA.ID}}, res.Conflicts)
		assert.Equal(t, 1, res.Duplicates, "p/c holds the same value on both sides")
		assert.Equal(t, 5, res.Chains)
		assert.Len(t, res.Facts, 6)
		assert.Equal(t, []store.MovedSession{{From: "s1", To: "s1@alice"}, {From: "s2", To: "s2"}}, res.Sessions)
		assert.ElementsMatch(t, []string{f.shared.ID, f.aliceB.ID}, res.Pins)
		assert.Len(t, res.Artefacts, 2)

		// bob holds everything; the target's value stays current where they conflicted.
		assert.Equal(t, map[string]string{"p/a": "bob's alpha", "p/b": "only alice", "p/c": "same value", "q/z": "bob only"},
			currentPrivate(t, db, "bob"))
		assert.Empty(t, currentPrivate(t, db, "alice"), "the source's private space is empty")
		assert.Equal(t, []string{"alpha one", "alpha two", "bob's alpha"}, keyword(t, db, "bob", "alpha"),
			"moved facts are in bob's keyword index, superseded ones included")
		assert.Empty(t, keyword(t, db, "alice", "alpha"))
		view(t, db, func(tx store.Tx) error {
			res, err := store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: "t", Agent: "bob"}, Key: "b", Now: idT0.Add(time.Hour)})
			require.NoError(t, err)
			require.Len(t, res.Facts, 1, "the key index finds the moved chain")
			assert.Equal(t, "only alice", res.Facts[0].Value)
			res, err = store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: "t", Agent: "alice"}, Key: "b", Now: idT0.Add(time.Hour)})
			require.NoError(t, err)
			assert.Empty(t, res.Facts)
			ents, err := store.ListEntities(tx, store.Scope{Tenant: "t", Agent: "bob"})
			assert.Equal(t, []string{"p", "q", "s"}, ents)
			return err
		})

		// The joined chain: bob's version, then alice's after it, each naming where it came from.
		h := history(t, db, "bob", "p", "a")
		require.Len(t, h, 3)
		byID := map[string]*store.Fact{}
		for _, x := range h {
			byID[x.ID] = x
		}
		a1, a2, ba := byID[f.aliceA1.ID], byID[f.aliceA2.ID], byID[f.bobA.ID]
		assert.Equal(t, uint32(1), ba.Version)
		assert.Equal(t, uint32(2), a1.Version)
		assert.Equal(t, uint32(3), a2.Version)
		assert.Equal(t, f.aliceA1.ID, a2.Supersedes, "links are kept")
		assert.Equal(t, f.bobA.ID, a2.SupersededBy, "prefer_target: alice's current value is superseded by bob's")
		assert.True(t, ba.Current())
		assert.Equal(t, []store.FactOrigin{{Op: store.OriginMerge, Receipt: "r_merge", Passport: "alice", Version: 2}}, a2.Origins)
		assert.Equal(t, "bob", a2.Owner)

		// The shared fact is untouched, and still names its writer.
		view(t, db, func(tx store.Tx) error {
			s, err := store.GetFact(tx, f.shared.ID)
			assert.Equal(t, "alice", s.Owner)
			assert.False(t, s.Private)
			assert.Empty(t, s.Origins)
			return err
		})

		// History is reconstructable: from the retired passport to the
		// receipt, and from each moved fact's origin back to alice's chains.
		src := passport(t, db, "alice")
		require.True(t, src.Retired())
		assert.Equal(t, "bob", src.RetiredInto)
		assert.Equal(t, "r_merge", src.RetireReceipt)
		rebuilt := map[string][]chainRow{}
		for _, k := range []string{"a", "b", "c", "d"} {
			for _, x := range history(t, db, "bob", "p", k) {
				i := slices.IndexFunc(x.Origins, func(o store.FactOrigin) bool { return o.Receipt == src.RetireReceipt })
				if i < 0 {
					continue
				}
				o := x.Origins[i]
				require.Equal(t, "alice", o.Passport)
				r := chainRow{ID: x.ID, Value: x.Value, Supersedes: x.Supersedes, SupersededBy: x.SupersededBy, Version: o.Version, Deleted: x.Deleted}
				if r.SupersededBy == f.bobA.ID || r.SupersededBy == f.bobC.ID {
					r.SupersededBy = "" // the merge's own resolution
				}
				rebuilt["p/"+k] = append(rebuilt["p/"+k], r)
			}
		}
		for k, rs := range rebuilt {
			sort.Slice(rs, func(i, j int) bool { return rs[i].Version < rs[j].Version })
			rebuilt[k] = rs
		}
		assert.Equal(t, chains, rebuilt)
		var moved []string
		for _, m := range res.Facts {
			moved = append(moved, fmt.Sprintf("%s/%s %d→%d %v", m.Entity, m.Key, m.FromVersion, m.ToVersion, m.Forgotten))
		}
		assert.Equal(t, []string{"p/a 1→2 false", "p/a 2→3 false", "p/b 1→1 false", "p/c 1→2 false", "p/d 1→1 false", "p/e 1→1 true"}, moved)
		view(t, db, func(tx store.Tx) error {
			l, err := store.PassportLineage(tx, "t", "bob")
			assert.Equal(t, []store.LineageLink{{Kind: store.LinkMergedFrom, Passport: "alice", Receipt: "r_merge", At: idT0.Add(time.Hour)}}, l)
			return err
		})

		// Sessions: read-only references in bob's space; bob's own s1 untouched.
		bob := store.Scope{Tenant: "t", Agent: "bob"}
		view(t, db, func(tx store.Tx) error {
			own, err := store.GetSession(tx, bob, "s1", idT0.Add(time.Hour))
			require.NoError(t, err)
			assert.JSONEq(t, `{"bob":1}`, string(own.State))
			assert.False(t, own.ReadOnly)
			ref, err := store.GetSession(tx, bob, "s1@alice", idT0.Add(time.Hour))
			require.NoError(t, err)
			assert.JSONEq(t, `{"n":1}`, string(ref.State))
			assert.True(t, ref.ReadOnly)
			assert.Equal(t, []store.SessionOrigin{{Passport: "alice", SessionID: "s1", Receipt: "r_merge"}}, ref.Origins)
			s2, err := store.GetSession(tx, bob, "s2", idT0.Add(time.Hour))
			require.NoError(t, err)
			assert.Equal(t, idT0.Add(48*time.Hour), *s2.ExpiresAt, "the deadline moves with it")
			list, err := store.ListSessions(tx, store.SessionQuery{Scope: store.Scope{Tenant: "t", Agent: "alice"}, Limit: 10, Now: idT0})
			assert.Empty(t, list.IDs)
			return err
		})
		err = db.Update(context.Background(), func(tx store.Tx) error {
			return store.PutSession(tx, &store.Session{ID: "s2", Tenant: "t", Owner: "bob", State: []byte(`{}`), UpdatedAt: idT0.Add(2 * time.Hour)})
		})
		assert.ErrorIs(t, err, store.ErrReadOnlySession)
		err = db.Update(context.Background(), func(tx store.Tx) error {
			_, err := store.DeleteSession(tx, bob, "s2", idT0.Add(2*time.Hour))
			return err
		})
		assert.ErrorIs(t, err, store.ErrReadOnlySession)
		update(t, db, func(tx store.Tx) error { // archiving keeps it a reference
			s, err := store.GetSession(tx, bob, "s2", idT0.Add(2*time.Hour))
			if err != nil {
				return err
			}
			s.Archived = true
			return store.PutSession(tx, s)
		})
		update(t, db, func(tx store.Tx) error { // once expired, the id is free again
			return store.PutSession(tx, &store.Session{ID: "s2", Tenant: "t", Owner: "bob", State: []byte(`{}`), UpdatedAt: idT0.Add(49 * time.Hour)})
		})

		// Pins and artefacts.
		view(t, db, func(tx store.Tx) error {
			for _, id := range []string{f.shared.ID, f.aliceB.ID} {
				p, err := store.IsPinned(tx, bob, id)
				require.NoError(t, err)
				assert.True(t, p)
				p, err = store.IsPinned(tx, store.Scope{Tenant: "t", Agent: "alice"}, id)
				require.NoError(t, err)
				assert.False(t, p)
			}
			common, _, err := store.GetArtefact(tx, bob, store.ArtefactID([]byte("common")), idT0.Add(time.Hour))
			require.NoError(t, err)
			assert.Nil(t, common.ExpiresAt, "bob's copy never expired, and still does not")
			own, content, err := store.GetArtefact(tx, bob, store.ArtefactID([]byte("alice's own")), idT0.Add(time.Hour))
			require.NoError(t, err)
			assert.Equal(t, "alice's own", string(content))
			assert.Equal(t, "bob", own.Owner)
			holders, err := store.ArtefactHolders(tx, "t", store.ArtefactID([]byte("common")), idT0.Add(time.Hour))
			assert.Equal(t, []string{"bob"}, holders)
			return err
		})
		noProblems(t, db)

		// The forgotten fact comes back into bob's chain.
		_, err = forgetRestore(db, "r_forget", idT0.Add(2*time.Hour))
		require.NoError(t, err)
		assert.Equal(t, "forgotten", currentPrivate(t, db, "bob")["p/e"])
		assert.NotContains(t, currentPrivate(t, db, "alice"), "p/e")
		noProblems(t, db)

		// A retired passport takes part in nothing more.
		_, err = merge(db, "alice", "olga", store.PreferTarget)
		assert.ErrorIs(t, err, store.ErrPassportRetired)
		_, err = merge(db, "olga", "alice", store.PreferTarget)
		assert.ErrorIs(t, err, store.ErrPassportRetired)
		_, err = split(db, "alice", "alice-2")
		assert.ErrorIs(t, err, store.ErrPassportRetired)
	})
}

func TestMergePreferSource(t *testing.T) {
	onEachBackend(t, func(t *testing.T, db store.Backend) {
		f := fillMerge(t, db)
		res, err := merge(db, "alice", "bob", store.PreferSource)
		require.NoError(t, err)
		require.Len(t, res.Conflicts, 1)
		assert.Equal(t, f.aliceA2.ID, res.Conflicts[0].ChosenFactID)
		assert.Equal(t, "alpha two", currentPrivate(t, db, "bob")["p/a"])
		assert.Equal(t, "same value", currentPrivate(t, db, "bob")["p/c"])
		view(t, db, func(tx store.Tx) error {
			old, err := store.GetFact(tx, f.bobA.ID)
			assert.Equal(t, f.aliceA2.ID, old.SupersededBy)
			assert.Equal(t, idT0.Add(time.Hour), *old.ValidTo)
			c, err2 := store.GetFact(tx, f.aliceC.ID)
			assert.Equal(t, f.bobC.ID, c.SupersededBy, "equal values: the target's stays current")
			return errors.Join(err, err2)
		})
		noProblems(t, db)
	})
}

func TestMergeErrorOnConflict(t *testing.T) {
	onEachBackend(t, func(t *testing.T, db store.Backend) {
		f := fillMerge(t, db)
		before := currentPrivate(t, db, "alice")
		called := false
		err := db.Update(context.Background(), func(tx store.Tx) error {
			_, err := store.MergePassports(tx, store.MergeRequest{Tenant: "t", Source: "alice", Target: "bob",
				Policy: store.ErrorOnConflict, Now: idT0.Add(time.Hour)},
				func(*store.MergeResult) (string, error) { called = true; return "r", nil })
			return err
		})
		var ce *store.MergeConflictError
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, []store.MergeConflict{{Entity: "p", Key: "a", SourceFactID: f.aliceA2.ID, TargetFactID: f.bobA.ID}}, ce.Conflicts)
		assert.EqualError(t, err, `conflict on (entity "p", key "a"): both passports hold a current value`)
		assert.False(t, called, "no receipt for a refused merge")
		assert.Equal(t, before, currentPrivate(t, db, "alice"))
		assert.False(t, passport(t, db, "alice").Retired())

		// Without a conflict the policy lets the merge through.
		update(t, db, func(tx store.Tx) error {
			_, _, err := store.DeleteFact(tx, store.Scope{Tenant: "t", Agent: "bob"}, f.bobA.ID, idT0.Add(20*time.Minute))
			return err
		})
		_, err = merge(db, "alice", "bob", store.ErrorOnConflict)
		require.NoError(t, err)
		assert.Equal(t, "alpha two", currentPrivate(t, db, "bob")["p/a"])
	})
}

func TestMergeRefusals(t *testing.T) {
	onEachBackend(t, func(t *testing.T, db store.Backend) {
		issue(t, db, "alice", "bob")
		_, err := merge(db, "alice", "alice", store.PreferTarget)
		assert.Error(t, err)
		_, err = merge(db, "alice", "zed", store.PreferTarget)
		assert.ErrorIs(t, err, store.ErrPassportNotFound)
		_, err = merge(db, "alice", "bob", "prefer_nobody")
		assert.Error(t, err)
		// A merge of a passport with nothing private moves nothing and retires it.
		res, err := merge(db, "alice", "bob", store.PreferTarget)
		require.NoError(t, err)
		assert.Zero(t, res.Chains)
		assert.True(t, passport(t, db, "alice").Retired())
	})
}

func TestMergeSessionRenames(t *testing.T) {
	onEachBackend(t, func(t *testing.T, db store.Backend) {
		issue(t, db, "al", "bob")
		long := strings.Repeat("x", 30)
		update(t, db, func(tx store.Tx) error {
			for _, s := range []struct{ owner, id string }{
				{"al", "s"}, {"al", "s@al"}, {"bob", "s"}, {"bob", "s@al"}, {"al", long}, {"bob", long},
			} {
				if err := store.PutSession(tx, &store.Session{ID: s.id, Tenant: "t", Owner: s.owner, State: []byte(`{}`), UpdatedAt: idT0}); err != nil {
					return err
				}
			}
			return nil
		})
		var res *store.MergeResult
		update(t, db, func(tx store.Tx) error {
			var err error
			res, err = store.MergePassports(tx, store.MergeRequest{Tenant: "t", Source: "al", Target: "bob",
				Policy: store.PreferTarget, Now: idT0, MaxSessionID: 30}, func(*store.MergeResult) (string, error) { return "r", nil })
			return err
		})
		assert.Equal(t, []store.MovedSession{
			{From: "s", To: "s@al~2"},
			{From: "s@al", To: "s@al@al"},
			{From: long, To: strings.Repeat("x", 27) + "@al"},
		}, res.Sessions)
	})
}

func TestLinkDevice(t *testing.T) {
	onEachBackend(t, func(t *testing.T, db store.Backend) {
		issue(t, db, "alice", "bob")
		fpr := strings.Repeat("ab", 32)
		link := func(passport, fpr string, caps ...string) (*store.DeviceLink, *store.DeviceLink, error) {
			var l, prev *store.DeviceLink
			err := db.Update(context.Background(), func(tx store.Tx) error {
				var err error
				l, prev, err = store.LinkDevice(tx, "t", passport, fpr, caps, idT0, func(*store.DeviceLink) (string, error) { return "r_" + passport, nil })
				return err
			})
			return l, prev, err
		}
		l, prev, err := link("alice", fpr, "facts:read")
		require.NoError(t, err)
		assert.Nil(t, prev)
		assert.Equal(t, []string{"facts:read"}, l.Capabilities)
		l, prev, err = link("alice", fpr, "facts:read", "sessions:write")
		require.NoError(t, err)
		require.NotNil(t, prev)
		assert.Equal(t, []string{"facts:read"}, prev.Capabilities)
		assert.Equal(t, []string{"facts:read", "sessions:write"}, l.Capabilities)
		_, _, err = link("bob", fpr, "facts:read")
		assert.ErrorIs(t, err, store.ErrDeviceLinked)
		assert.EqualError(t, err, "device "+fpr+" is linked to passport alice; a device belongs to one passport")
		_, _, err = link("zed", fpr)
		assert.ErrorIs(t, err, store.ErrPassportNotFound)
		for i := range store.MaxDevicesPerPassport {
			_, _, err := link("bob", fmt.Sprintf("%064x", i))
			require.NoError(t, err)
		}
		_, _, err = link("bob", fmt.Sprintf("%064x", 999))
		assert.ErrorIs(t, err, store.ErrTooManyDevices)
		view(t, db, func(tx store.Tx) error {
			ls, err := store.DeviceLinks(tx, "t", "alice")
			require.Len(t, ls, 1)
			assert.Equal(t, "r_alice", ls[0].Receipt)
			ls, err2 := store.DeviceLinks(tx, "t", "bob")
			assert.Len(t, ls, store.MaxDevicesPerPassport)
			return errors.Join(err, err2)
		})
	})
}
