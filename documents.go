package crux

import (
	"context"
	"errors"

	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/tools"
)

// Document is a text for the retrieval tools (query, query_scan,
// query_expand): an id unique in its tenant, an optional title, and its
// text, at most 8 MiB.
type Document = store.Document

// IngestStats counts what [Server.Ingest] wrote.
type IngestStats = store.IngestStats

// IngestProgress is called by [Server.Ingest] after each committed batch
// with the documents ingested so far and in all.
type IngestProgress = tools.IngestProgress

// Ingest indexes docs in tenant's document index: each is cut into
// segments of about 300 tokens at paragraph boundaries, analysed (words
// lowercased and stemmed, common English words left out) and written with
// its index entries, replacing the document of the same id. The documents
// are written in batches, each one transaction: an interrupted ingest
// leaves whole documents or none, the batches before the failure stay
// written, and the stats count them. A document that cannot be indexed
// (an empty or overlong id, text that is not UTF-8) fails the call before
// anything is written, with an error naming it.
//
// Ingest is the embedding program's own: it checks no caller. The
// retrieval tools check their callers' tenants.
func (s *Server) Ingest(ctx context.Context, tenant string, docs []Document, progress IngestProgress) (IngestStats, error) {
	if s.closed.Load() {
		return IngestStats{}, ErrServerClosed
	}
	if err := s.Prepare(ctx); err != nil {
		return IngestStats{}, err
	}
	return tools.Ingest(ctx, s.env, tenant, docs, progress)
}

// DeleteDocuments removes the documents ids from tenant's index, in one
// transaction, and returns the ids that were there.
func (s *Server) DeleteDocuments(ctx context.Context, tenant string, ids ...string) ([]string, error) {
	if s.closed.Load() {
		return nil, ErrServerClosed
	}
	if err := s.Prepare(ctx); err != nil {
		return nil, err
	}
	return tools.DeleteDocuments(ctx, s.env, tenant, ids)
}

// ErrCompactUnsupported is the error of [Server.Compact] on a store that
// cannot compact (its backend does not implement store.Compacter).
var ErrCompactUnsupported = errors.New("crux: the store cannot compact")

// Compact rewrites the store without the space it has freed, where the
// backend can (the bbolt backend rewrites its file; see store.Compacter),
// and fails with ErrCompactUnsupported where it cannot. A bulk ingest
// leaves behind the pages its later batches replaced; compacting after it
// gives the file back its size. Calls made meanwhile wait for it.
func (s *Server) Compact(ctx context.Context) error {
	if s.closed.Load() {
		return ErrServerClosed
	}
	c, ok := s.env.Store.(store.Compacter)
	if !ok {
		return ErrCompactUnsupported
	}
	return c.Compact(ctx)
}
