package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/internal/regfile"
	"github.com/crux-go/crux/store"
	"github.com/spf13/cobra"
)

// crux ingest: documents into a tenant's retrieval index, from files.
//
// A text or Markdown file (.txt, .text, .md, .markdown) is one document:
// its id is its path as given on the command line, or, for a file found
// in a directory argument, its path relative to that directory (slashes
// on every system); its title is its first Markdown "# " heading, else
// its file name. A .jsonl file holds one document per line,
// {"id", "title"?, "text"}. Directories are walked for such files,
// skipping names that start with a dot. Documents go to the process that
// owns the store in batches of one transaction each (whole documents or
// none), so crux ingest runs beside crux serve on the same directory.

// ingestBatch bounds one batch: one operation and one transaction, the
// size of Server.Ingest's own batches (large batches keep the index
// small; see there).
const (
	ingestBatchDocs  = 1 << 15
	ingestBatchBytes = 16 << 20
)

type (
	ingestReq struct {
		Env    []string        `json:"env"`
		Tenant string          `json:"tenant"`
		Docs   []crux.Document `json:"docs"`
	}
	deleteDocsReq struct {
		Env    []string `json:"env"`
		Tenant string   `json:"tenant"`
		IDs    []string `json:"ids"`
	}
	deleteDocsAnswer struct {
		Deleted []string `json:"deleted"`
	}
	compactReq struct {
		Env []string `json:"env"`
	}
)

func (h *host) ingest(ctx context.Context, req ingestReq) (any, error) {
	srv, err := h.server(req.Env)
	if err != nil {
		return nil, err
	}
	return srv.Ingest(ctx, req.Tenant, req.Docs, nil)
}

func (h *host) deleteDocs(ctx context.Context, req deleteDocsReq) (any, error) {
	srv, err := h.server(req.Env)
	if err != nil {
		return nil, err
	}
	gone, err := srv.DeleteDocuments(ctx, req.Tenant, req.IDs...)
	return deleteDocsAnswer{Deleted: gone}, err
}

func (h *host) compact(ctx context.Context, req compactReq) (any, error) {
	srv, err := h.server(req.Env)
	if err != nil {
		return nil, err
	}
	return struct{}{}, srv.Compact(ctx)
}

// ingestSummary is what crux ingest prints.
type ingestSummary struct {
	Tenant string `json:"tenant"`
	crux.IngestStats
	Files     int  `json:"files"`
	Compacted bool `json:"compacted,omitempty"`
}

// newIngestCmd returns crux ingest --tenant T FILE|DIR... and crux ingest
// --tenant T --delete ID...
func newIngestCmd(a *app) *cobra.Command {
	var cf *commonFlags
	var f ingestFlags
	c := &cobra.Command{
		Use:         "ingest [--data DIR] [--tenant T] [--compact] FILE|DIR...",
		Annotations: map[string]string{formsAnnotation: "ingest [--data DIR] [--tenant T] --delete ID..."},
		Short:       "Index text, Markdown and JSONL files as documents for query, query_scan and query_expand",
		Long: `Index documents for query, query_scan and query_expand in tenant T
(default: default). A .txt or .md file is one document, its id the path as
given (or, inside a directory argument, relative to it) and its title its
first "# " heading; a .jsonl file holds one document per line, {"id",
"title", "text"}. Directories are walked, skipping names that start with a
dot. Ingesting an id again replaces the document. Documents are written in
batches of one transaction each, so an interrupted ingest leaves whole
documents; progress goes to standard error, and a JSON summary to standard
output. --compact then rewrites the store without the pages the batches
replaced (a bulk ingest leaves about one copy of the index's pages free); it
holds every other call for as long as that takes. --delete removes the
documents with the ids given.`,
		RunE: func(c *cobra.Command, pos []string) error {
			s, err := resolveOperator("ingest", c.Flags(), cf, a.env)
			if err != nil {
				return err
			}
			return ingest(a.ctx, s, f, pos, a.stdout, a.stderr, a.logger)
		},
	}
	cf = withOperator(c)
	c.Flags().StringVar(&f.tenant, "tenant", crux.DefaultTenant, "the `TENANT` whose index the documents go to")
	c.Flags().BoolVar(&f.del, "delete", false, "remove the documents whose ids are the arguments")
	c.Flags().BoolVar(&f.compact, "compact", false, "compact the store afterwards")
	return c
}

// ingestFlags are the flags of crux ingest.
type ingestFlags struct {
	tenant       string
	del, compact bool
}

// ingest is crux ingest.
func ingest(ctx context.Context, s *setup, f ingestFlags, pos []string, stdout, stderr io.Writer, logger *slog.Logger) (err error) {
	tenant, del, compact := f.tenant, f.del, f.compact
	if len(pos) == 0 {
		return usagef("ingest takes files or directories (or, with --delete, document ids)")
	}
	sess, err := s.join(ctx, logger)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := sess.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("closing the store: %w", cerr))
		}
	}()
	if del {
		var ans deleteDocsAnswer
		err := sess.run(ctx, opDeleteDocs, deleteDocsReq{Env: sess.env, Tenant: tenant, IDs: pos}, &ans, func(srv *crux.Server) error {
			var err error
			ans.Deleted, err = srv.DeleteDocuments(ctx, tenant, pos...)
			return err
		})
		if err != nil {
			return err
		}
		if ans.Deleted == nil {
			ans.Deleted = []string{}
		}
		return writeJSON(stdout, map[string]any{"tenant": tenant, "deleted": ans.Deleted})
	}

	files, err := ingestFiles(pos)
	if err != nil {
		return err
	}
	sum := ingestSummary{Tenant: tenant, Files: len(files)}
	bar := newProgress(stderr)
	var batch []crux.Document
	size, done, filesDone := 0, 0, 0
	send := func() error {
		if len(batch) == 0 {
			return nil
		}
		var st crux.IngestStats
		err := sess.run(ctx, opIngest, ingestReq{Env: sess.env, Tenant: tenant, Docs: batch}, &st, func(srv *crux.Server) error {
			var err error
			st, err = srv.Ingest(ctx, tenant, batch, nil)
			return err
		})
		if err != nil {
			return err
		}
		sum.Documents += st.Documents
		sum.Replaced += st.Replaced
		sum.Segments += st.Segments
		sum.Tokens += st.Tokens
		done += len(batch)
		bar.show(filesDone, len(files), done, sum.Segments)
		batch, size = batch[:0], 0
		return nil
	}
	for _, f := range files {
		err := readDocuments(f, func(d crux.Document) error {
			if err := store.CheckDocument(&d); err != nil {
				return err
			}
			batch = append(batch, d)
			size += len(d.Text) + len(d.Title)
			if len(batch) >= ingestBatchDocs || size >= ingestBatchBytes {
				return send()
			}
			return nil
		})
		if err != nil {
			bar.end()
			return fmt.Errorf("%s: %w (the %d documents before it are ingested)", f.path, err, done)
		}
		filesDone++
		if bar.terminal {
			bar.show(filesDone, len(files), done, sum.Segments)
		}
	}
	err = send()
	bar.end()
	if err != nil {
		return err
	}
	if compact {
		err := sess.run(ctx, opCompact, compactReq{Env: sess.env}, &struct{}{}, func(srv *crux.Server) error { return srv.Compact(ctx) })
		if err != nil && !errors.Is(err, crux.ErrCompactUnsupported) {
			return fmt.Errorf("compacting the store: %w", err)
		}
		sum.Compacted = err == nil
	}
	return writeJSON(stdout, sum)
}

// ingestFile is a file to read documents from, and the id of a text file.
type ingestFile struct {
	path string
	id   string
}

// ingestExt reports whether crux ingest reads files named so.
func ingestExt(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".txt", ".text", ".md", ".markdown", ".jsonl":
		return true
	}
	return false
}

// ingestFiles lists the files of the arguments, in order (a directory's
// files sorted).
func ingestFiles(args []string) ([]ingestFile, error) {
	var out []ingestFile
	for _, a := range args {
		fi, err := os.Stat(a)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			if !fi.Mode().IsRegular() {
				return nil, fmt.Errorf("%s is not a regular file (mode %s): crux ingest reads files and directories", a, fi.Mode())
			}
			if !ingestExt(a) {
				return nil, fmt.Errorf("%s: crux ingest reads .txt, .md and .jsonl files", a)
			}
			out = append(out, ingestFile{path: a, id: filepath.ToSlash(a)})
			continue
		}
		var found []ingestFile
		err = filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p != a && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type().IsRegular() && ingestExt(p) {
				rel, err := filepath.Rel(a, p)
				if err != nil {
					return err
				}
				found = append(found, ingestFile{path: p, id: filepath.ToSlash(rel)})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		slices.SortFunc(found, func(x, y ingestFile) int { return strings.Compare(x.id, y.id) })
		out = append(out, found...)
	}
	return out, nil
}

// readDocuments calls fn with each document of f.
func readDocuments(f ingestFile, fn func(crux.Document) error) error {
	file, err := regfile.Open(f.path)
	if err != nil {
		return err
	}
	defer file.Close()
	if strings.ToLower(filepath.Ext(f.path)) != ".jsonl" {
		b, err := io.ReadAll(io.LimitReader(file, store.MaxDocTextBytes+1))
		if err != nil {
			return err
		}
		text := string(b)
		return fn(crux.Document{ID: f.id, Title: documentTitle(f.path, text), Text: text})
	}
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 0, 64<<10), store.MaxDocTextBytes+64<<10)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var d crux.Document
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			return fmt.Errorf("line %d: not a document {\"id\", \"title\", \"text\"}: %w", line, err)
		}
		if err := fn(d); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading lines: %w", err)
	}
	return nil
}

// documentTitle is a text file's first Markdown "# " heading, else its
// file name.
func documentTitle(path, text string) string {
	for line := range strings.Lines(text) {
		if t, ok := strings.CutPrefix(strings.TrimSpace(line), "# "); ok {
			if t = strings.TrimSpace(t); t != "" && len(t) <= store.MaxDocTitleBytes {
				return t
			}
		}
	}
	return filepath.Base(path)
}

// progress shows how far an ingest or an import got: a bar or a line
// redrawn in place on a terminal, else a line per batch (an import's at
// most one a second).
type progress struct {
	w        io.Writer
	terminal bool
	shown    bool
	last     time.Time // of the last line written off a terminal
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, terminal: terminal(w)}
}

func (p *progress) show(files, totalFiles, docs, segments int) {
	p.shown = true
	if !p.terminal {
		fmt.Fprintf(p.w, "crux: ingested %d documents (%d segments) from %d of %d files\n", docs, segments, files, totalFiles)
		return
	}
	const width = 30
	n := width
	if totalFiles > 0 {
		n = width * files / totalFiles
	}
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d files, %d documents, %d segments", strings.Repeat("#", n), strings.Repeat(".", width-n),
		files, totalFiles, docs, segments)
}

// showImport shows how many records an import applied, and the line of
// the file it reached.
func (p *progress) showImport(records, line int) {
	if !p.terminal {
		if now := time.Now(); now.Sub(p.last) >= time.Second {
			p.last = now
			fmt.Fprintf(p.w, "crux: imported %d records, to line %d\n", records, line)
		}
		return
	}
	p.shown = true
	fmt.Fprintf(p.w, "\rcrux: imported %d records, to line %d", records, line)
}

func (p *progress) end() {
	if p.terminal && p.shown {
		fmt.Fprintln(p.w)
	}
}
