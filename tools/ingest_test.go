package tools_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/store/bolt"
	"github.com/crux-go/crux/store/storetest"
)

// TestIngestInterrupted: an ingest that fails at any point of its
// transactions leaves whole documents or none: the batches committed
// before the failure, every document of them with all its segments and
// postings, and nothing of the rest.
func TestIngestInterrupted(t *testing.T) {
	docs := make([]crux.Document, 1100) // three batches
	for i := range docs {
		docs[i] = crux.Document{ID: fmt.Sprintf("d%04d", i), Text: fmt.Sprintf("shared words and marker%dq", i)}
	}
	open := func(t *testing.T) (*bolt.DB, *storetest.Faulty, *crux.Server) {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "crux.db"), &bolt.Options{NoSync: true})
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		f := storetest.NewFaulty(db)
		srv, err := crux.NewServer(f, nil)
		require.NoError(t, err)
		t.Cleanup(func() { srv.Close() })
		return db, f, srv
	}
	_, f, srv := open(t)
	f.Arm(0)
	_, err := srv.Ingest(context.Background(), "t", docs, nil)
	require.NoError(t, err)
	total := f.Ops() // the operations of a whole ingest
	faults := []int{1, 2, 3, total - 1, total}
	for k := 1; k < 16; k++ {
		faults = append(faults, total*k/16+k)
	}
	for _, at := range faults {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			db, f, srv := open(t)
			f.Arm(at)
			st, err := srv.Ingest(context.Background(), "t", docs, nil)
			require.Error(t, err)
			assert.Zero(t, st.Documents%512, "whole batches: %d documents", st.Documents)
			require.NoError(t, db.View(context.Background(), func(tx store.Tx) error {
				stats, err := store.ReadDocStats(tx, "t")
				require.NoError(t, err)
				assert.Equal(t, st.Documents, stats.Documents)
				assert.Equal(t, st.Documents, stats.Segments)
				for i, d := range docs {
					seg, err := store.DocumentSegment(tx, "t", d.ID, 0)
					res, serr := store.SearchDocuments(tx, store.DocQuery{Tenant: "t", Terms: []string{fmt.Sprintf("marker%dq", i)}, Limit: 1})
					require.NoError(t, serr)
					if i < st.Documents {
						require.NoError(t, err, d.ID)
						assert.Equal(t, d.Text, seg.Text)
						assert.Len(t, res.Hits, 1, "%s is indexed", d.ID)
					} else {
						assert.ErrorIs(t, err, store.ErrNotFound, d.ID)
						assert.Empty(t, res.Hits, "%s has no postings", d.ID)
					}
				}
				return nil
			}))
		})
	}
}
