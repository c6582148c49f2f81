package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

// scanRecorder is a Tx that records the prefixes its callers scan, by
// bucket.
type scanRecorder struct {
	store.Tx
	scans map[string][]string
}

func (r *scanRecorder) Scan(bucket string, prefix []byte, reverse bool, fn func(k, v []byte) error) error {
	r.scans[bucket] = append(r.scans[bucket], string(prefix))
	return r.Tx.Scan(bucket, prefix, reverse, fn)
}

// Each tenant's fresh postings move to the keyword index on their own: a
// store_fact reads only its own tenant's entries of facts.fresh, never
// another's, and moves them once its tenant has 64 there, whatever the
// other tenants have; queries find every fact, moved or not.
func TestFreshPerTenant(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	put := func(tenant string, from, n int) {
		t.Helper()
		require.NoError(t, db.Update(ctx, func(tx store.Tx) error {
			for i := from; i < from+n; i++ {
				rec := &scanRecorder{Tx: tx, scans: map[string][]string{}}
				if _, _, err := store.PutFact(rec, store.NewFact{Scope: store.Scope{Tenant: tenant}, ID: store.NewFactID(),
					Entity: "e", Key: fmt.Sprintf("k%d", i), Value: fmt.Sprintf("note %d", i), Confidence: 0.5, Now: now}); err != nil {
					return err
				}
				require.NotEmpty(t, rec.scans["facts.fresh"])
				for _, p := range rec.scans["facts.fresh"] {
					require.True(t, strings.HasPrefix(p, tenant+"\x00"), "tenant %s's write scans facts.fresh from %q", tenant, p)
				}
			}
			return nil
		}))
	}
	fresh := func() map[string]int {
		t.Helper()
		n := map[string]int{}
		require.NoError(t, db.View(ctx, func(tx store.Tx) error {
			return tx.Scan("facts.fresh", nil, false, func(k, _ []byte) error {
				tenant, _, _ := strings.Cut(string(k), "\x00")
				n[tenant]++
				return nil
			})
		}))
		return n
	}
	found := func(tenant string) int {
		t.Helper()
		var res store.FactResult
		require.NoError(t, db.View(ctx, func(tx store.Tx) error {
			var err error
			res, err = store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: tenant}, Terms: store.QueryWords("note"),
				Now: now, Policy: store.DefaultDecayPolicy})
			return err
		}))
		return len(res.Facts)
	}
	put("alpha", 0, 40)
	put("beta", 0, 63)
	assert.Equal(t, map[string]int{"alpha": 40, "beta": 63}, fresh(), "103 fresh facts, fewer than 64 of each tenant: none moved")
	put("beta", 63, 1)
	assert.Equal(t, map[string]int{"alpha": 40}, fresh(), "beta's 64th moves beta's, and only them")
	put("alpha", 40, 30)
	assert.Equal(t, map[string]int{"alpha": 6}, fresh(), "alpha's 64th moves alpha's 64; 6 more wait")
	assert.Equal(t, 70, found("alpha"))
	assert.Equal(t, 64, found("beta"))
}
