package crux

import (
	"context"
	"io"

	"github.com/crux-go/crux/memio"
	"github.com/crux-go/crux/store"
	"github.com/crux-go/crux/tools"
)

// MemoryExportQuery asks [Server.ExportMemories] for one page of an
// export: a tenant, the agent whose private records it holds (none when
// empty), the cursor of the page, and caps on its size.
type MemoryExportQuery = store.MemoryExportQuery

// MemoryExportPage is one page of an export: its records, and the cursor
// of the next page ("" after the last).
type MemoryExportPage = store.MemoryExportPage

// ExportOptions selects what [Server.Export] exports. Nil means the
// shared records of the default tenant.
type ExportOptions struct {
	// Tenant is the tenant to export; "" means DefaultTenant.
	Tenant string
	// Agent adds that agent's private records: its private facts, its
	// sessions and its artefacts' metadata. "" exports shared records only.
	Agent string
}

// ExportMemories returns one page of an export of memories (the format
// and what it holds are described in package memio and in package store):
// each page is read in one transaction of its own, so pages can be served
// to another process one request at a time. Like [Server.Ingest], it is
// the embedding program's own and checks no caller.
func (s *Server) ExportMemories(ctx context.Context, q MemoryExportQuery) (*MemoryExportPage, error) {
	if s.closed.Load() {
		return nil, ErrServerClosed
	}
	if err := s.Prepare(ctx); err != nil {
		return nil, err
	}
	if q.Tenant == "" {
		q.Tenant = DefaultTenant
	}
	return tools.ExportMemories(ctx, s.env, q)
}

// Export writes an export of memories to w (see package memio): a header
// line, then every version of every fact chain, the sessions, the
// constraints and the artefacts' metadata of opts.Tenant, one JSON line
// each, page after page, in bounded memory.
func (s *Server) Export(ctx context.Context, w io.Writer, opts *ExportOptions) (memio.ExportStats, error) {
	var o ExportOptions
	if opts != nil {
		o = *opts
	}
	if o.Tenant == "" {
		o.Tenant = DefaultTenant
	}
	h := memio.Header{Tenant: o.Tenant, Agent: o.Agent, ExportedAt: s.env.Now().UTC()}
	return memio.Export(ctx, w, h, func(ctx context.Context, cursor string) (*store.MemoryExportPage, error) {
		return s.ExportMemories(ctx, MemoryExportQuery{Tenant: o.Tenant, Agent: o.Agent, Cursor: cursor})
	})
}

// ImportMemories applies one batch of an import in one transaction:
// every record is written as exported (ids, versions and chains kept),
// unless the store holds it already (unchanged) or holds something else
// in its place (a conflict, counted and listed; the store's record stays).
// A batch that writes anything mints a signed receipt of kind
// memory_import, by the operator, in the same transaction: its source and
// lines, its counts and the BLAKE3 of the ids it wrote. A batch that
// writes nothing mints none, so importing a file twice changes nothing.
func (s *Server) ImportMemories(ctx context.Context, b *memio.Batch) (*memio.BatchResult, error) {
	if s.closed.Load() {
		return nil, ErrServerClosed
	}
	if err := s.Prepare(ctx); err != nil {
		return nil, err
	}
	return tools.ImportMemories(ctx, s.env, b)
}

// Import imports the file r holds (a crux export, or with
// opts.Source memio.SourceMCPMemory the reference MCP memory server's
// JSONL file) with [memio.Import]: every line is checked before anything
// is written, then the records go in batches to [Server.ImportMemories].
func (s *Server) Import(ctx context.Context, r io.ReadSeeker, opts *memio.ImportOptions) (*memio.ImportSummary, error) {
	return memio.Import(ctx, r, opts, s.ImportMemories)
}
