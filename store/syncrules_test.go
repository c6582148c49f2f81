package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

// The rules of what a replica may assert, on every backend.

var syncT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// applyFrom applies facts to tenant "t" as received from replica "peer:b"
// with the clock at now.
func applyFrom(t *testing.T, db store.Backend, now time.Time, facts ...store.SyncFact) store.SyncApplied {
	t.Helper()
	var out store.SyncApplied
	update(t, db, func(tx store.Tx) error {
		var err error
		out, err = store.ApplySyncFacts(tx, "t", store.SyncSource{Replica: "peer:b", Now: now}, facts)
		return err
	})
	return out
}

func syncedFact(t *testing.T, db store.Backend, id string) *store.Fact {
	t.Helper()
	var f *store.Fact
	view(t, db, func(tx store.Tx) error {
		var err error
		f, err = store.GetFact(tx, id)
		return err
	})
	return f
}

func syncVersion(id, entity, key, supersedes string, at time.Time) store.SyncFact {
	return store.SyncFact{ID: id, Entity: entity, Key: key, Value: "v " + id, Confidence: 1, StoredAt: at, Supersedes: supersedes, Owner: "alice"}
}

// Every version applied, winner or loser, is owned by the replica that
// sent it, never by the owner it names; the batch passed in is left as
// it was.
func TestApplySyncFactsOwnsWhatItApplies(t *testing.T) {
	onEachBackend(t, func(t *testing.T, db store.Backend) {
		mine := putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: "t", Agent: "alice"}, Entity: "acct", Key: "balance", Value: "100", Now: syncT0})
		batch := []store.SyncFact{
			syncVersion("f_10000000000000000000000000000001", "acct", "balance", mine.ID, syncT0.Add(time.Second)),
			syncVersion("f_10000000000000000000000000000002", "acct", "balance", "", syncT0.Add(-time.Hour)), // loses
		}
		out := applyFrom(t, db, syncT0, batch...)
		require.Equal(t, 2, out.Applied, "%+v", out.Rejected)
		require.Len(t, out.Conflicts, 1)
		for _, v := range batch {
			assert.Equal(t, "sync::peer:b", syncedFact(t, db, v.ID).Owner, v.ID)
			assert.Equal(t, "alice", v.Owner, "the batch is not modified")
		}
		assert.Equal(t, store.SyncOwner("peer:b"), "sync::peer:b")
		assert.Equal(t, "alice", syncedFact(t, db, mine.ID).Owner)
	})
}

// A version stored more than MaxSyncClockSkew after the clock is
// rejected; one at the limit is applied, and a local write that follows
// it with a clock behind it is stored no earlier, its predecessor valid
// until then.
func TestApplySyncFactsRefusesTheFuture(t *testing.T) {
	onEachBackend(t, func(t *testing.T, db store.Backend) {
		mine := putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: "t", Agent: "alice"}, Entity: "acct", Key: "balance", Value: "100", Now: syncT0})
		far := syncVersion("f_20000000000000000000000000000001", "acct", "balance", mine.ID, syncT0.Add(store.MaxSyncClockSkew+time.Nanosecond))
		out := applyFrom(t, db, syncT0, far)
		assert.Equal(t, 0, out.Applied)
		require.Len(t, out.Rejected, 1)
		assert.Contains(t, out.Rejected[0].Reason, "stored_at")
		assert.Contains(t, out.Rejected[0].Reason, "after this replica's clock")

		ahead := syncVersion("f_20000000000000000000000000000002", "acct", "balance", mine.ID, syncT0.Add(store.MaxSyncClockSkew))
		out = applyFrom(t, db, syncT0, ahead)
		require.Equal(t, 1, out.Applied, "%+v", out.Rejected)
		next := putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: "t", Agent: "alice"}, Entity: "acct", Key: "balance", Value: "200", Now: syncT0.Add(time.Minute)})
		assert.Equal(t, ahead.ID, next.Supersedes)
		assert.True(t, next.StoredAt.Equal(ahead.StoredAt), "stored at %s, after %s", next.StoredAt, ahead.StoredAt)
		assert.True(t, next.ValidFrom.Equal(next.StoredAt))
		prev := syncedFact(t, db, ahead.ID)
		require.NotNil(t, prev.ValidTo)
		assert.True(t, prev.ValidTo.Equal(ahead.StoredAt))

		// A write on a clock ahead of the chain keeps its own time.
		later := putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: "t", Agent: "alice"}, Entity: "acct", Key: "balance", Value: "300", Now: syncT0.Add(time.Hour)})
		assert.True(t, later.StoredAt.Equal(syncT0.Add(time.Hour)))
	})
}

// supersedes may name only a shared version of the tenant, of the same
// chain, or one the store does not hold.
func TestApplySyncFactsSupersedesOnlyWhatWasSent(t *testing.T) {
	onEachBackend(t, func(t *testing.T, db store.Backend) {
		private := putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: "t", Agent: "alice"}, Entity: "acct", Key: "pin", Value: "1", Private: true, Now: syncT0})
		other := putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: "u", Agent: "carol"}, Entity: "acct", Key: "balance", Value: "u", Now: syncT0})
		reserved := putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: "t"}, Entity: store.ReservedPrefix + "x", Key: "balance", Value: "r", Now: syncT0})
		shared := putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: "t", Agent: "alice"}, Entity: "acct", Key: "balance", Value: "100", Now: syncT0})
		limit := putFact(t, db, store.NewFact{Scope: store.Scope{Tenant: "t", Agent: "alice"}, Entity: "acct", Key: "limit", Value: "5", Now: syncT0})
		at := syncT0.Add(time.Minute)
		for _, tc := range []struct {
			v    store.SyncFact
			want string
		}{
			{syncVersion("f_30000000000000000000000000000001", "acct", "pin", private.ID, at), "never sent"},
			{syncVersion("f_30000000000000000000000000000002", "acct", "balance", other.ID, at), "never sent"},
			{syncVersion("f_30000000000000000000000000000003", "acct", "balance", other.ID, syncT0.Add(-time.Hour)), "never sent"},
			{syncVersion("f_30000000000000000000000000000004", "acct", "balance", reserved.ID, at), "never sent"},
			{syncVersion("f_30000000000000000000000000000005", "acct", "balance", limit.ID, at), "another entity or key"},
		} {
			out := applyFrom(t, db, syncT0, tc.v)
			assert.Equal(t, 0, out.Applied, tc.v.ID)
			require.Len(t, out.Rejected, 1, tc.v.ID)
			assert.Contains(t, out.Rejected[0].Reason, tc.want, tc.v.ID)
		}
		assert.Empty(t, syncedFact(t, db, shared.ID).SupersededBy, "the shared version stays current")
		assert.Empty(t, syncedFact(t, db, private.ID).SupersededBy)

		// Unknown here: applied by the chain's rules. The shared version
		// followed: applied as its successor.
		out := applyFrom(t, db, syncT0,
			syncVersion("f_30000000000000000000000000000006", "acct", "balance", "f_3fffffffffffffffffffffffffffffff", at),
			syncVersion("f_30000000000000000000000000000007", "acct", "limit", limit.ID, at))
		require.Equal(t, 2, out.Applied, "%+v", out.Rejected)
		require.Len(t, out.Conflicts, 1)
		assert.Equal(t, "f_30000000000000000000000000000007", syncedFact(t, db, limit.ID).SupersededBy)
	})
}

// ApplySyncFacts needs to know who sent the batch and when it is here.
func TestApplySyncFactsNeedsItsSource(t *testing.T) {
	db := openDB(t)
	for _, src := range []store.SyncSource{{Now: syncT0}, {Replica: "peer:b"}} {
		err := db.Update(t.Context(), func(tx store.Tx) error {
			_, err := store.ApplySyncFacts(tx, "t", src, nil)
			return err
		})
		assert.Error(t, err, "%+v", src)
	}
}
