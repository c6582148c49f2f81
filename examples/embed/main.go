// Command embed shows crux embedded in a Go program: a bbolt store, a
// server with a persistent signing key and the free-local capability token,
// and tool calls made in-process.
//
//	go run ./examples/embed
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store/bolt"
)

func main() {
	dir, err := os.MkdirTemp("", "crux-embed-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := bolt.Open(filepath.Join(dir, "crux.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	// A key kept in the data directory signs every receipt; the free-local
	// token it signs decides which tools may run.
	signer, err := receipts.LoadOrCreateKey(dir)
	if err != nil {
		log.Fatal(err)
	}
	token, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{Tenant: crux.DefaultTenant, Capabilities: crux.FreeLocalCapabilities(crux.DefaultFlags())})
	if err != nil {
		log.Fatal(err)
	}
	router, err := rcx.NewRouter(token, signer.Public(), nil)
	if err != nil {
		log.Fatal(err)
	}
	srv, err := crux.NewServer(db, &crux.Options{Signer: signer, Router: router})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	ctx := context.Background()
	me := crux.Caller{Agent: "planner", Authenticated: true}
	do := func(tool, args string) *crux.Result {
		res, err := srv.CallTool(ctx, me, tool, json.RawMessage(args))
		if err != nil {
			fmt.Printf("%s: %v\n", tool, err)
			return nil
		}
		return res
	}

	do("store_fact", `{"entity":"project:crux","key":"language","value":"Go"}`)
	do("store_fact", `{"entity":"project:crux","key":"store","value":"bbolt, fsync on every commit"}`)
	if res := do("query_facts", `{"entity":"project:crux"}`); res != nil {
		fmt.Println(res.Content[0].Text)
	}
	// A hosted-tier tool is refused by the token, with a signed receipt.
	do("sync_pull", `{}`)
	fmt.Println("enforcing:", srv.Enforcing(), "tools listed:", len(srv.ListTools(ctx, me)))
}
