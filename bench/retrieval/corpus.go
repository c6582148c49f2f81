package retrieval

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/doc"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// CorpusOptions tune GenerateCorpus.
type CorpusOptions struct {
	// Include, when not nil, keeps only the packages whose import path it
	// accepts (tests use it to build a small corpus).
	Include func(importPath string) bool
	// Internal, Cmd and Vendor also take the internal packages, the cmd
	// tree (the go command, compiler, linker and tools) and the vendored
	// golang.org/x packages.
	Internal, Cmd, Vendor bool
	// Unexported also takes the unexported declarations (doc.AllDecls).
	Unexported bool
	// MaxDeclLines caps the declaration part of a passage; a longer
	// declaration (a struct of many fields, a const block of hundreds of
	// names) is cut there and ends in a line "...". Zero means 30.
	MaxDeclLines int
}

// GenerateCorpus builds the corpus from the documentation of the Go
// standard library under goroot/src: one passage per package overview and
// one per function, type, method and const or var group, as go/doc sees the
// package for linux/amd64 without cgo (fixed, so that the corpus depends on
// the Go release only, not on the machine). By default only the exported
// declarations of the packages outside internal, vendor and cmd are taken;
// opts widen that (cmd/corpus takes the internal and vendored packages and
// the documented unexported declarations too, about 19,000 passages for Go
// 1.26). Directories named testdata or starting with . or _ are skipped, and
// so are commands (package main), blank names and init functions, and
// unexported declarations without a doc comment.
//
// A passage's Text is its declaration as gofmt prints it (function bodies
// and unexported fields left out by go/doc), a blank line, then its doc
// comment; its Title is "package P" or the qualified name ("http.Client.Do").
// Ids are import path and name ("net/http.Client.Do"; a const or var group
// is named by its first name); passages are sorted by id, and ids are
// unique.
func GenerateCorpus(goroot string, opts CorpusOptions) ([]Doc, error) {
	if opts.MaxDeclLines == 0 {
		opts.MaxDeclLines = 30
	}
	src := filepath.Join(goroot, "src")
	ctx := build.Default
	ctx.GOROOT = goroot
	ctx.GOOS, ctx.GOARCH = "linux", "amd64"
	ctx.CgoEnabled = false
	ctx.BuildTags = nil
	ctx.ReleaseTags = build.Default.ReleaseTags

	var dirs []string
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != src && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") ||
			name == "internal" && !opts.Internal || name == "vendor" && !opts.Vendor ||
			path == filepath.Join(src, "cmd") && !opts.Cmd) {
			return filepath.SkipDir
		}
		if path != src {
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	var docs []Doc
	for _, dir := range dirs {
		rel, _ := filepath.Rel(src, dir)
		importPath := filepath.ToSlash(rel)
		if opts.Include != nil && !opts.Include(importPath) {
			continue
		}
		ps, err := packageDocs(&ctx, dir, importPath, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", importPath, err)
		}
		docs = append(docs, ps...)
	}
	sort.Slice(docs, func(i, j int) bool { return docs[i].ID < docs[j].ID })
	for i := 1; i < len(docs); i++ {
		if docs[i].ID == docs[i-1].ID {
			return nil, fmt.Errorf("duplicate passage id %q", docs[i].ID)
		}
	}
	return docs, nil
}

func packageDocs(ctx *build.Context, dir, importPath string, opts CorpusOptions) ([]Doc, error) {
	bp, err := ctx.ImportDir(dir, 0)
	if err != nil {
		var noGo *build.NoGoError
		if errors.As(err, &noGo) {
			return nil, nil
		}
		return nil, err
	}
	if bp.Name == "main" {
		return nil, nil
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	var mode doc.Mode
	if opts.Unexported {
		mode = doc.AllDecls
	}
	p, err := doc.NewFromFiles(fset, files, importPath, mode)
	if err != nil {
		return nil, err
	}

	var out []Doc
	add := func(id, title string, decl ast.Node, text string) {
		name := id[strings.LastIndexByte(id, '.')+1:]
		if name == "_" || name == "init" && decl != nil {
			return
		}
		if !token.IsExported(name) && strings.TrimSpace(text) == "" && decl != nil {
			// An unexported declaration (Unexported) without a doc comment
			// says nothing a reader would search for.
			return
		}
		var d string
		if decl != nil {
			d = printDecl(fset, decl, opts.MaxDeclLines)
		}
		body := d
		start := len(d)
		if text = strings.TrimSpace(text); text != "" {
			if body != "" {
				body += "\n\n"
			}
			start = len(body)
			body += text
		}
		out = append(out, Doc{ID: id, Title: title, Text: body, DocStart: start})
	}
	add(importPath, "package "+importPath, nil, "package "+p.Name+"\n\n"+p.Doc)
	// The package clause is not doc text: the doc starts after it.
	out[0].DocStart = min(len("package "+p.Name+"\n\n"), len(out[0].Text))

	values := func(vs []*doc.Value) {
		for _, v := range vs {
			kind := "const"
			if v.Decl.Tok == token.VAR {
				kind = "var"
			}
			names := v.Names
			if len(names) > 4 {
				names = append(append([]string(nil), names[:4]...), "...")
			}
			add(importPath+"."+v.Names[0], kind+" "+p.Name+"."+strings.Join(names, ", "), v.Decl, v.Doc)
		}
	}
	funcs := func(fs []*doc.Func, recv string) {
		for _, f := range fs {
			name := f.Name
			if recv != "" {
				name = recv + "." + f.Name
			}
			add(importPath+"."+name, p.Name+"."+name, f.Decl, f.Doc)
		}
	}
	values(p.Consts)
	values(p.Vars)
	funcs(p.Funcs, "")
	for _, t := range p.Types {
		add(importPath+"."+t.Name, p.Name+"."+t.Name, t.Decl, t.Doc)
		values(t.Consts)
		values(t.Vars)
		funcs(t.Funcs, "")
		funcs(t.Methods, t.Name)
	}
	return out, nil
}

// printDecl prints a declaration as gofmt would, without comments, cut to
// maxLines lines.
func printDecl(fset *token.FileSet, decl ast.Node, maxLines int) string {
	var buf bytes.Buffer
	cfg := printer.Config{Mode: printer.UseSpaces | printer.TabIndent, Tabwidth: 8}
	if err := cfg.Fprint(&buf, fset, decl); err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if len(lines) > maxLines {
		lines = append(lines[:maxLines], "...")
	}
	return strings.Join(lines, "\n")
}
