//go:build ignore

// generate writes crux.db.gz, a store in layout format 9 (keyword postings
// without term frequencies or lengths, entries of facts.fresh without
// them), for the upgrade test in store/format10_test.go. It must run in a
// checkout of a commit that writes format 9, such as b8ae34b:
//
//	mkdir /tmp/old && git archive b8ae34b | tar -x -C /tmp/old
//	cp store/testdata/format9/generate.go /tmp/old/
//	go -C /tmp/old run ./generate.go "$PWD/store/testdata/format9"
//
// The store holds shared and private facts of two tenants in version
// chains (some retired explicitly across entities, some deleted, one
// re-verified, some forgotten so that their originals wait in the forget
// records), of different lengths, some repeating their words, and
// receipt chains of both tenants, all signed with the key of seed 0x01
// 0x02 ... 0x20, at fixed times; the last facts written wait in
// facts.fresh.
package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store/bolt"
)

func main() {
	out := os.Args[1]
	dir, err := os.MkdirTemp("", "format9-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "crux.db")
	db, err := bolt.Open(path, nil)
	if err != nil {
		log.Fatal(err)
	}
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte(i + 1)
	}
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { now = now.Add(time.Second); return now }
	srv, err := crux.NewServer(db, &crux.Options{Signer: receipts.NewEd25519Signer(ed25519.NewKeyFromSeed(seed)), Now: clock})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	call := func(c crux.Caller, name string, args map[string]any) map[string]any {
		b, _ := json.Marshal(args)
		res, err := srv.CallTool(ctx, c, name, b)
		if err != nil {
			log.Fatalf("%s: %v", name, err)
		}
		if res.IsError {
			log.Fatalf("%s: %s", name, res.Content[0].Text)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(res.Content[0].Text), &m); err != nil {
			log.Fatal(err)
		}
		return m
	}
	alice := crux.Caller{Agent: "alice", Authenticated: true}
	bob := crux.Caller{Agent: "bob", Authenticated: true, Tenant: "acme"}
	var ids []string
	for i := range 150 {
		c := alice
		if i%5 == 4 {
			c = bob
		}
		args := map[string]any{
			"entity": fmt.Sprintf("service:%d", i%17), "key": fmt.Sprintf("setting%d", i%4),
			"value":      fmt.Sprintf("value %d of the upgrade fixture, about widget%d%s", i, i%9, strings.Repeat(" and again widget", i%5)),
			"confidence": float64(i%10+1) / 10,
		}
		if i%11 == 3 {
			args["private"] = true
		}
		if i%23 == 7 && len(ids) > 0 && c == alice {
			args["supersedes"] = []string{ids[len(ids)-1]}
		}
		m := call(c, "store_fact", args)
		if c == alice {
			ids = append(ids, m["fact_id"].(string))
		}
	}
	for _, i := range []int{5, 40, 77} {
		call(alice, "delete_fact", map[string]any{"fact_id": ids[i]})
	}
	call(alice, "record_decision", map[string]any{"action": "ship the upgrade", "rationale": "the fixture needs receipts"})
	call(alice, "memory_reverify", map[string]any{"fact_id": ids[100]})
	call(alice, "memory_forget", map[string]any{"scope": map[string]any{"type": "entity_prefix", "value": "service:16"}, "reason": "the fixture keeps forgotten originals"})
	call(bob, "record_decision", map[string]any{"action": "keep acme apart", "rationale": "a second tenant's chain"})
	if err := db.Compact(ctx); err != nil {
		log.Fatal(err)
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		log.Fatal(err)
	}
	var gz bytes.Buffer
	w, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	w.Write(raw)
	w.Close()
	if err := os.WriteFile(filepath.Join(out, "crux.db.gz"), gz.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("crux.db: %d bytes, gzipped %d\n", len(raw), gz.Len())
}
