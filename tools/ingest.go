package tools

import (
	"context"
	"fmt"

	"github.com/crux-go/crux/index"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/toolkit"
)

// Batches of Ingest: each is one transaction, so an interrupted ingest
// leaves whole documents or none. Large batches keep the index small:
// each batch rewrites the pages of the posting blocks it adds to, and a
// tenant's first batch lays its blocks out in full pages. A write made
// meanwhile waits for the batch's commit at most.
const (
	ingestBatchDocs  = 1 << 15
	ingestBatchBytes = 16 << 20
)

// IngestProgress reports, after each committed batch, the documents
// ingested so far and in all.
type IngestProgress func(done, total int)

// Ingest indexes docs in tenant: each is checked, cut into segments,
// analysed and written with its index entries, replacing the document of
// the same id. Documents are written in batches of one transaction each,
// in order; the analysis of a batch runs while the one before commits. On
// error the batches committed stay, none after; the stats count what was
// written. A document that cannot be indexed fails the call before
// anything of its batch is written, with an error naming it.
func Ingest(ctx context.Context, env *toolkit.Env, tenant string, docs []store.Document, progress IngestProgress) (store.IngestStats, error) {
	var total store.IngestStats
	if err := checkTenantName(tenant); err != nil {
		return total, err
	}
	for i := range docs {
		if err := store.CheckDocument(&docs[i]); err != nil {
			return total, err
		}
	}
	type batch struct {
		docs []store.PreparedDocument
		end  int
	}
	batches := make(chan batch, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		defer close(batches)
		var a index.Analyzer
		var b batch
		size := 0
		for i, d := range docs {
			p, _ := store.PrepareDocument(d, &a) // checked above
			b.docs = append(b.docs, p)
			size += len(d.Text) + len(d.Title)
			if len(b.docs) < ingestBatchDocs && size < ingestBatchBytes && i < len(docs)-1 {
				continue
			}
			b.end = i + 1
			select {
			case batches <- b:
			case <-stop:
				return
			}
			b, size = batch{}, 0
		}
	}()
	for b := range batches {
		var st store.IngestStats
		now := env.Time()
		err := env.Store.Update(ctx, func(tx store.Tx) error {
			var err error
			st, err = store.PutDocuments(tx, tenant, b.docs, now)
			return err
		})
		if err != nil {
			return total, err
		}
		total.Documents += st.Documents
		total.Replaced += st.Replaced
		total.Segments += st.Segments
		total.Tokens += st.Tokens
		if progress != nil {
			progress(b.end, len(docs))
		}
	}
	return total, nil
}

// DeleteDocuments removes the documents ids of tenant, in one
// transaction, and returns the ids that were there.
func DeleteDocuments(ctx context.Context, env *toolkit.Env, tenant string, ids []string) ([]string, error) {
	if err := checkTenantName(tenant); err != nil {
		return nil, err
	}
	var gone []string
	err := env.Store.Update(ctx, func(tx store.Tx) error {
		gone = gone[:0]
		for _, id := range ids {
			ok, err := store.DeleteDocument(tx, tenant, id)
			if err != nil {
				return err
			}
			if ok {
				gone = append(gone, id)
			}
		}
		return nil
	})
	return gone, err
}

// checkTenantName rejects a tenant name crux cannot hold.
func checkTenantName(tenant string) error {
	c := toolkit.Caller{Tenant: tenant}
	if tenant == "" || tenant == "*" {
		return fmt.Errorf("crux: invalid tenant %q", tenant)
	}
	return c.Validate()
}
