//go:build ignore

// generate writes crux.db.gz, a store in layout format 3 holding documents
// of two tenants, for the upgrade test in store/format_test.go. It must
// run in a checkout of a commit that writes format 3, such as f4dfc62:
//
//	mkdir /tmp/old && git archive f4dfc62 | tar -x -C /tmp/old
//	cp store/testdata/format3/generate.go /tmp/old/
//	go -C /tmp/old run ./generate.go "$PWD/store/testdata/format3"
//
// Format 3 indexed documents without the words its longer stop-word list
// held ("what", "how", "do", "over", ...); the documents here use such
// words, and one is replaced and one deleted so that the index holds
// freed seqs.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store/bolt"
)

func main() {
	out := os.Args[1]
	dir, err := os.MkdirTemp("", "format3-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "crux.db")
	db, err := bolt.Open(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	srv, err := crux.NewServer(db, &crux.Options{Now: func() time.Time { return at }})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	long := strings.Repeat("Filler paragraph about storage engines and pages.\n\n", 40)
	docs := map[string][]crux.Document{
		"acme": {
			{ID: "guide/how-to", Title: "How to rotate keys", Text: "What to do when a key leaks: rotate it over the weekend.\n\n" + long},
			{ID: "guide/why", Title: "Why receipts", Text: "Why every answer carries a receipt, and what it proves."},
			{ID: "guide/old", Title: "Old note", Text: "This note is replaced below."},
			{ID: "guide/gone", Title: "Gone", Text: "This one is deleted."},
		},
		"beta": {
			{ID: "faq", Title: "FAQ", Text: "Where do the facts live? In the data directory, under your own user."},
		},
	}
	for _, tenant := range []string{"acme", "beta"} {
		if _, err := srv.Ingest(ctx, tenant, docs[tenant], nil); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := srv.Ingest(ctx, "acme", []crux.Document{{ID: "guide/old", Title: "Old note", Text: "Replaced: what changed and how."}}, nil); err != nil {
		log.Fatal(err)
	}
	if _, err := srv.DeleteDocuments(ctx, "acme", "guide/gone"); err != nil {
		log.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		log.Fatal(err)
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(raw)
	zw.Close()
	if err := os.WriteFile(filepath.Join(out, "crux.db.gz"), buf.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
