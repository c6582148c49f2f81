package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/regfile"
	"github.com/crux-go/crux/memio"
)

// crux export and crux import: memories out of a data directory and into
// one, through the process that owns the store (package memio has the
// format). An export is read a page at a time (opExportMemories, one
// transaction each) and an import applied a batch at a time
// (opImportMemories, one transaction and one receipt each), so both run
// beside crux serve in bounded memory, every request well under the
// socket's message limit.
const (
	opExportMemories = "memories/export" // exportMemoriesReq → crux.MemoryExportPage
	opImportMemories = "memories/import" // importMemoriesReq → memio.BatchResult
)

type (
	exportMemoriesReq struct {
		Env   []string               `json:"env"`
		Query crux.MemoryExportQuery `json:"query"`
	}
	importMemoriesReq struct {
		Env   []string    `json:"env"`
		Batch memio.Batch `json:"batch"`
	}
)

func (h *host) exportMemories(ctx context.Context, req exportMemoriesReq) (any, error) {
	srv, err := h.server(req.Env)
	if err != nil {
		return nil, err
	}
	return srv.ExportMemories(ctx, req.Query)
}

func (h *host) importMemories(ctx context.Context, req importMemoriesReq) (any, error) {
	srv, err := h.server(req.Env)
	if err != nil {
		return nil, err
	}
	return srv.ImportMemories(ctx, &req.Batch)
}

// exportMemories is crux export [--tenant T] [--agent A]: the tenant's
// memories as JSON Lines on standard output, and a count of them on
// standard error.
func exportMemories(a *app, s *setup, tenant, agent string) error {
	ctx := a.ctx
	return s.withSession(ctx, a.logger, func(sess *session) error {
		h := memio.Header{Tenant: tenant, Agent: agent, ExportedAt: time.Now().UTC()}
		st, err := memio.Export(ctx, a.stdout, h, func(ctx context.Context, cursor string) (*crux.MemoryExportPage, error) {
			q := crux.MemoryExportQuery{Tenant: tenant, Agent: agent, Cursor: cursor}
			var page *crux.MemoryExportPage
			err := sess.run(ctx, opExportMemories, exportMemoriesReq{Env: sess.env, Query: q}, &page, func(srv *crux.Server) error {
				var err error
				page, err = srv.ExportMemories(ctx, q)
				return err
			})
			return page, err
		})
		if err != nil {
			return fmt.Errorf("export: %w (what standard output holds is incomplete)", err)
		}
		fmt.Fprintf(a.stderr, "crux: exported %d facts, %d sessions, %d constraints and %d artefacts of tenant %s\n",
			st.Facts, st.Sessions, st.Constraints, st.Artefacts, tenant)
		return nil
	})
}

// newImportCmd returns crux import [--from crux|mcp-memory] [--tenant T]
// FILE|-: every line checked first, then the records in batches to the
// owner; the summary as JSON on standard output.
func newImportCmd(a *app) *cobra.Command {
	var cf *commonFlags
	var from, tenant string
	c := &cobra.Command{
		Use:   "import [--data DIR] [--from crux|mcp-memory] [--tenant T] FILE|-",
		Short: "Import memories: a crux export, or the MCP memory server's JSONL file",
		Long: `Import a crux export (ids, versions and chains kept, into the export's
tenant), or with --from mcp-memory the JSONL file of the reference MCP
memory server (@modelcontextprotocol/server-memory): entity types,
observations and relations become shared facts of tenant T (default:
default). Every line is checked first: a bad line is reported with its
number and nothing is imported. Then the records go in batches, each one
transaction with a signed memory_import receipt (none when the batch wrote
nothing). A record the store holds already is unchanged, one it holds
otherwise is a conflict, left out and counted: importing a file twice
changes nothing. If a batch fails, the batches before it stay imported and
importing the file again completes it. Progress goes to standard error;
the summary, as JSON, to standard output.`,
		RunE: func(c *cobra.Command, pos []string) error {
			s, err := resolveOperator("import", c.Flags(), cf, a.env)
			if err != nil {
				return err
			}
			if len(pos) != 1 {
				return usagef("import takes one file (- for standard input)")
			}
			if from != memio.SourceCrux && from != memio.SourceMCPMemory {
				return usagef("--from takes crux or mcp-memory, not %q", from)
			}
			return importMemories(a, s, pos[0], &memio.ImportOptions{Source: from, Tenant: tenant})
		},
	}
	cf = withOperator(c)
	c.Flags().StringVar(&from, "from", memio.SourceCrux, "the file's `format`: crux (an export) or mcp-memory")
	c.Flags().StringVar(&tenant, "tenant", "", "the `tenant` an mcp-memory file goes to (default: default)")
	_ = c.RegisterFlagCompletionFunc("from", cobra.FixedCompletions([]cobra.Completion{memio.SourceCrux, memio.SourceMCPMemory}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// importMemories imports the file name (- for standard input) with opts.
func importMemories(a *app, s *setup, name string, opts *memio.ImportOptions) (err error) {
	ctx := a.ctx
	file, cleanup, err := importFile(name, a.stdin)
	if err != nil {
		return err
	}
	defer cleanup()
	sess, err := s.join(ctx, a.logger)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := sess.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the store: %w", cerr))
		}
	}()
	bar := newProgress(a.stderr)
	records := 0
	sum, err := memio.Import(ctx, file, opts, func(ctx context.Context, b *memio.Batch) (*memio.BatchResult, error) {
		var res *memio.BatchResult
		err := sess.run(ctx, opImportMemories, importMemoriesReq{Env: sess.env, Batch: *b}, &res, func(srv *crux.Server) error {
			var err error
			res, err = srv.ImportMemories(ctx, b)
			return err
		})
		if err == nil {
			records += len(b.Records) + len(b.Values)
			bar.showImport(records, b.LastLine)
		}
		return res, err
	})
	bar.end()
	if sum != nil && sum.Batches > 0 || err == nil {
		if werr := writeJSON(a.stdout, sum); werr != nil {
			return errors.Join(err, werr)
		}
	}
	if err != nil {
		return fmt.Errorf("import %s: %w", name, err)
	}
	return nil
}

// importFile opens the file to import, which memio.Import reads twice:
// standard input ("-") is copied to a temporary file first.
func importFile(name string, stdin io.Reader) (io.ReadSeeker, func(), error) {
	if name != "-" {
		f, err := regfile.Open(name)
		if err != nil {
			return nil, nil, err
		}
		return f, func() { f.Close() }, nil
	}
	f, err := os.CreateTemp("", "crux-import-*.jsonl")
	if err != nil {
		return nil, nil, fmt.Errorf("a temporary copy of standard input: %w", err)
	}
	cleanup := func() {
		f.Close()
		os.Remove(f.Name())
	}
	if _, err := io.Copy(f, stdin); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("reading standard input: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		cleanup()
		return nil, nil, err
	}
	return f, cleanup, nil
}
