package store_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

// gapKeys are the keys of s's own gaps, most recently seen first.
func gapKeys(t *testing.T, db store.Backend, s store.Scope) []string {
	t.Helper()
	var keys []string
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		n, err := store.GapCount(tx, s)
		require.NoError(t, err)
		err = store.Gaps(tx, s, func(g *store.Gap) error {
			assert.Equal(t, s.Agent, g.Agent)
			keys = append(keys, g.Key)
			return nil
		})
		assert.Len(t, keys, n, "GapCount counts them")
		return err
	}))
	return keys
}

// tenantGapKeys are the agent/key of every gap of tenant, most recently seen first.
func tenantGapKeys(t *testing.T, db store.Backend, tenant string) []string {
	t.Helper()
	var keys []string
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		return store.TenantGaps(tx, tenant, func(g *store.Gap) error {
			keys = append(keys, g.Agent+"/"+g.Key)
			return nil
		})
	}))
	return keys
}

func recordGap(t *testing.T, db store.Backend, s store.Scope, key string, at time.Time) *store.Gap {
	t.Helper()
	var g *store.Gap
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		var err error
		g, err = store.RecordGap(tx, s, key, `{"query":"`+key+`"}`, at)
		return err
	}))
	return g
}

func TestRecordGap(t *testing.T) {
	db := openDB(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	alice, bob, anon := store.Scope{Tenant: "t", Agent: "alice"}, store.Scope{Tenant: "t", Agent: "bob"}, store.Scope{Tenant: "t"}
	recordGap(t, db, alice, "a", t0)
	recordGap(t, db, alice, "b", t0.Add(time.Second))
	recordGap(t, db, bob, "a", t0.Add(3*time.Second))
	recordGap(t, db, anon, "c", t0.Add(4*time.Second))
	recordGap(t, db, store.Scope{Tenant: "u", Agent: "alice"}, "a", t0)
	g := recordGap(t, db, alice, "a", t0.Add(2*time.Second))
	assert.Equal(t, 2, g.Count)
	assert.Equal(t, t0, g.FirstSeen)
	assert.Equal(t, "alice", g.Agent)
	assert.Equal(t, []string{"a", "b"}, gapKeys(t, db, alice), "most recently seen first")
	assert.Equal(t, []string{"a"}, gapKeys(t, db, bob), "each agent its own")
	assert.Equal(t, []string{"c"}, gapKeys(t, db, anon), "anonymous callers share one log")
	assert.Equal(t, []string{"a"}, gapKeys(t, db, store.Scope{Tenant: "u", Agent: "alice"}), "tenants are separate")
	assert.Equal(t, []string{"/c", "bob/a", "alice/a", "alice/b"}, tenantGapKeys(t, db, "t"))

	require.Error(t, db.Update(context.Background(), func(tx store.Tx) error {
		_, err := store.RecordGap(tx, alice, "", "", t0)
		return err
	}))
}

func TestRecordGapBoundedPerAgent(t *testing.T) {
	db := openDB(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	alice, anon := store.Scope{Tenant: "t", Agent: "alice"}, store.Scope{Tenant: "t"}
	recordGap(t, db, alice, "mine", t0)
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		for i := range store.MaxGapsPerAgent + 3 {
			if _, err := store.RecordGap(tx, anon, fmt.Sprintf("k%04d", i), "v", t0.Add(time.Duration(i+1)*time.Second)); err != nil {
				return err
			}
		}
		return nil
	}))
	keys := gapKeys(t, db, anon)
	require.Len(t, keys, store.MaxGapsPerAgent)
	assert.Equal(t, fmt.Sprintf("k%04d", store.MaxGapsPerAgent+2), keys[0])
	assert.Equal(t, "k0003", keys[len(keys)-1], "the three least recently seen were evicted")
	assert.Equal(t, []string{"mine"}, gapKeys(t, db, alice), "a flood of anonymous gaps leaves alice's alone")
	assert.Len(t, tenantGapKeys(t, db, "t"), store.MaxGapsPerAgent+1)
}

func TestRecordGapBoundedPerTenant(t *testing.T) {
	db := openDB(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	agents := store.MaxGapObservations/store.MaxGapsPerAgent + 1
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		for i := range agents * store.MaxGapsPerAgent {
			s := store.Scope{Tenant: "t", Agent: fmt.Sprint("agent", i%agents)}
			if _, err := store.RecordGap(tx, s, fmt.Sprintf("k%04d", i), "v", t0.Add(time.Duration(i)*time.Second)); err != nil {
				return err
			}
		}
		return nil
	}))
	keys := tenantGapKeys(t, db, "t")
	require.Len(t, keys, store.MaxGapObservations)
	last := agents*store.MaxGapsPerAgent - 1
	assert.Equal(t, fmt.Sprintf("agent%d/k%04d", last%agents, last), keys[0])
	first := last - store.MaxGapObservations + 1
	assert.Equal(t, fmt.Sprintf("agent%d/k%04d", first%agents, first), keys[len(keys)-1], "the tenant's least recently seen were evicted")
	total := 0
	for i := range agents {
		total += len(gapKeys(t, db, store.Scope{Tenant: "t", Agent: fmt.Sprint("agent", i)}))
	}
	assert.Equal(t, store.MaxGapObservations, total, "each agent's count follows the evictions")
}

func TestRecordGapDropsTheTenantWideLog(t *testing.T) {
	db := openDB(t)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Records of the layout before gaps belonged to agents.
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		for _, tenant := range []string{"t", "u"} {
			for i, key := range []string{"gap:1", "gap:2"} {
				tk := binary.BigEndian.AppendUint64(append([]byte(tenant), 0), ^uint64(t0.Add(time.Duration(i)).UnixNano()))
				require.NoError(t, tx.Put("ops.gaps.time", append(tk, key...), nil))
				require.NoError(t, tx.Put("ops.gaps", []byte(tenant+"\x00"+key), []byte(`{"query":"secret"}`)))
			}
			require.NoError(t, tx.Put("ops.gaps.n", []byte(tenant), binary.BigEndian.AppendUint64(nil, 2)))
		}
		return nil
	}))
	recordGap(t, db, store.Scope{Tenant: "t", Agent: "alice"}, "a", t0)
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		for _, b := range []string{"ops.gaps", "ops.gaps.time", "ops.gaps.n"} {
			var inT, inU int
			require.NoError(t, tx.Scan(b, nil, false, func(k, _ []byte) error {
				if k[0] == 't' {
					inT++
				} else {
					inU++
				}
				return nil
			}))
			assert.Zero(t, inT, "%s: tenant t's old records are gone", b)
			assert.NotZero(t, inU, "%s: tenant u's stay until it records a gap", b)
		}
		return nil
	}))
}
