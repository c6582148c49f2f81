package store_test

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux/store"
)

// plantInvalidText rewrites the stored record of fact id in place so that
// the text marker holds an invalid UTF-8 byte, as an older version that let
// such text through would have written it.
func plantInvalidText(t *testing.T, db store.Backend, id, marker string) {
	t.Helper()
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		v, err := tx.Get("facts", []byte(id))
		if err != nil {
			return err
		}
		bad := []byte(marker)
		bad[1] = 0xff
		require.True(t, bytes.Contains(v, []byte(marker)))
		return tx.Put("facts", []byte(id), bytes.ReplaceAll(v, []byte(marker), bad))
	}))
}

// reports collects what the scans of a Reporting backend report.
type reports struct {
	mu   sync.Mutex
	errs []*store.CorruptRecordError
}

func (r *reports) add(e *store.CorruptRecordError) {
	r.mu.Lock()
	r.errs = append(r.errs, e)
	r.mu.Unlock()
}

// ids are the distinct record ids reported, sorted.
func (r *reports) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	set := map[string]bool{}
	for _, e := range r.errs {
		set[e.ID] = true
	}
	var out []string
	for id := range set {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func TestScansSkipUnreadableRecords(t *testing.T) {
	raw := openDB(t)
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	shared := store.Scope{Tenant: "t"}
	alice := store.Scope{Tenant: "t", Agent: "alice"}
	good := putFact(t, raw, store.NewFact{Scope: shared, Entity: "svc", Key: "port", Value: "port is 8080", Now: now})
	bad := putFact(t, raw, store.NewFact{Scope: shared, Entity: "svc", Key: "host", Value: "host BADTEXT", Now: now.Add(time.Second)})
	good2 := putFact(t, raw, store.NewFact{Scope: alice, Entity: "svc", Key: "host", Value: "is enabled", Private: true, Now: now})
	plantInvalidText(t, raw, bad.ID, "BADTEXT")

	// Without a reporter every read of the record fails, and it is typed.
	var ce *store.CorruptRecordError
	err := raw.View(context.Background(), func(tx store.Tx) error { _, err := store.GetFact(tx, bad.ID); return err })
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "facts", ce.Bucket)
	assert.Equal(t, []byte(bad.ID), ce.Key)
	assert.Equal(t, bad.ID, ce.ID)
	assert.Contains(t, err.Error(), "invalid UTF-8")
	assert.Contains(t, err.Error(), "crux doctor")

	var rep reports
	db := store.Reporting(raw, rep.add)
	_, compacts := db.(store.Compacter)
	assert.True(t, compacts, "a Reporting bolt backend still compacts")
	ids := func(fs []*store.Fact) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.ID)
		}
		sort.Strings(out)
		return out
	}
	ranked := func(rs []store.RankedFact) []*store.Fact {
		var out []*store.Fact
		for _, r := range rs {
			out = append(out, r.Fact)
		}
		return out
	}
	want := ids([]*store.Fact{good, good2})
	scans := map[string]func(tx store.Tx) ([]*store.Fact, error){
		"SearchFacts unfiltered": func(tx store.Tx) ([]*store.Fact, error) {
			res, err := store.SearchFacts(tx, store.FactQuery{Scope: alice, Now: now})
			return ranked(res.Facts), err
		},
		"SearchFacts by entity": func(tx store.Tx) ([]*store.Fact, error) {
			res, err := store.SearchFacts(tx, store.FactQuery{Scope: alice, Entity: "svc", Now: now})
			return ranked(res.Facts), err
		},
		"SearchFacts by words": func(tx store.Tx) ([]*store.Fact, error) {
			res, err := store.SearchFacts(tx, store.FactQuery{Scope: alice, Terms: []string{"is", "host"}, Now: now})
			return ranked(res.Facts), err
		},
		"ScanFacts": func(tx store.Tx) ([]*store.Fact, error) {
			var out []*store.Fact
			_, err := store.ScanFacts(tx, store.FactScan{Scope: alice}, func(f *store.Fact) error { out = append(out, f); return nil })
			return out, err
		},
		"ScanFacts by key": func(tx store.Tx) ([]*store.Fact, error) {
			var out []*store.Fact
			_, err := store.ScanFacts(tx, store.FactScan{Scope: alice, Key: "host"}, func(f *store.Fact) error { out = append(out, f); return nil })
			return append(out, good), err
		},
		"History": func(tx store.Tx) ([]*store.Fact, error) {
			out, err := store.History(tx, alice, "svc", "host")
			return append(out, good), err
		},
		"SelectForget": func(tx store.Tx) ([]*store.Fact, error) {
			sel, err := store.SelectForget(tx, store.ForgetQuery{Scope: alice, AnyWriter: true, Selector: store.ForgetScope{Type: store.ScopeTenantID, Value: "t"}})
			if err != nil {
				return nil, err
			}
			return sel.Facts, nil
		},
		"Contradictions": func(tx store.Tx) ([]*store.Fact, error) {
			_, err := store.Contradictions(tx, store.ContradictionQuery{Scope: alice, Entity: "svc"})
			return []*store.Fact{good, good2}, err
		},
	}
	for name, scan := range scans {
		t.Run(name, func(t *testing.T) {
			rep.errs = nil
			var got []*store.Fact
			require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
				var err error
				got, err = scan(tx)
				return err
			}))
			assert.Equal(t, want, ids(got))
			assert.Equal(t, []string{bad.ID}, rep.ids(), "the unreadable record is reported")
			for _, e := range rep.errs {
				assert.Equal(t, "facts", e.Bucket)
				assert.NotEmpty(t, e.Index, "a scan names the index that led to it")
			}
		})
	}

	// A new version of the pair goes past it too (it reads the chain).
	rep.errs = nil
	require.NoError(t, db.Update(context.Background(), func(tx store.Tx) error {
		f, _, err := store.PutFact(tx, store.NewFact{Scope: shared, Entity: "svc", Key: "host", Value: "host is db2", Confidence: 1, Now: now.Add(time.Hour)})
		assert.EqualValues(t, 2, f.Version)
		return err
	}))
	assert.Equal(t, []string{bad.ID}, rep.ids())
}

func TestDanglingIndexEntryIsReported(t *testing.T) {
	raw := openDB(t)
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	good := putFact(t, raw, store.NewFact{Scope: store.Scope{Tenant: "t"}, Entity: "e", Key: "a", Value: "x", Now: now})
	gone := putFact(t, raw, store.NewFact{Scope: store.Scope{Tenant: "t"}, Entity: "e", Key: "b", Value: "y", Now: now})
	require.NoError(t, raw.Update(context.Background(), func(tx store.Tx) error { return tx.Delete("facts", []byte(gone.ID)) }))

	var rep reports
	db := store.Reporting(raw, rep.add)
	require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
		res, err := store.SearchFacts(tx, store.FactQuery{Scope: store.Scope{Tenant: "t"}, Now: now})
		require.Len(t, res.Facts, 1)
		assert.Equal(t, good.ID, res.Facts[0].ID)
		return err
	}))
	require.Len(t, rep.errs, 1)
	assert.True(t, errors.Is(rep.errs[0], store.ErrMissingRecord))
	assert.Equal(t, "facts.rank", rep.errs[0].Index)
	assert.Equal(t, gone.ID, rep.errs[0].ID)
}
