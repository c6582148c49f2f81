package crux_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/rcx"
	"github.com/crux-go/crux/receipts"
	"github.com/crux-go/crux/store/bolt"
)

// Embedding crux: open a store, create a server, and call tools in-process.
func Example() {
	dir, err := os.MkdirTemp("", "crux-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := bolt.Open(filepath.Join(dir, "crux.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	srv, err := crux.NewServer(db, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	ctx := context.Background()
	planner := crux.Caller{Agent: "planner", Authenticated: true}
	_, err = srv.CallTool(ctx, planner, "store_fact",
		json.RawMessage(`{"entity":"project:crux","key":"language","value":"Go"}`))
	if err != nil {
		log.Fatal(err)
	}

	res, err := srv.CallTool(ctx, planner, "query_facts", json.RawMessage(`{"query":"language"}`))
	if err != nil {
		log.Fatal(err)
	}
	var out struct {
		Rows []struct{ Entity, Key, Value string }
	}
	if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil {
		log.Fatal(err)
	}
	for _, r := range out.Rows {
		fmt.Printf("%s %s = %s\n", r.Entity, r.Key, r.Value)
	}

	// A bad argument is a protocol error that names it.
	_, err = srv.CallTool(ctx, planner, "query_facts", json.RawMessage(`{"top_k":"ten"}`))
	fmt.Println(err)
	var bad *crux.ParamError
	if errors.As(err, &bad) {
		fmt.Printf("param %s: %s\n", bad.Param, bad.Reason)
	}
	// Output:
	// project:crux language = Go
	// crux: query_facts: top_k: must be an integer (-32602)
	// param top_k: must be an integer
}

// Enforcing a capability token, as the crux command does: a key kept in the
// data directory signs every receipt and the free-local token, and the
// token decides which tools may run. A hosted-tier tool is refused with
// -32030 and a signed refusal receipt.
func Example_capabilityToken() {
	dir, err := os.MkdirTemp("", "crux-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	db, err := bolt.Open(filepath.Join(dir, "crux.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	signer, err := receipts.LoadOrCreateKey(dir)
	if err != nil {
		log.Fatal(err)
	}
	flags := crux.DefaultFlags()
	token, err := rcx.MintFreeLocal(signer, rcx.FreeLocalOptions{
		Tenant:       crux.DefaultTenant,
		Capabilities: crux.FreeLocalCapabilities(flags),
	})
	if err != nil {
		log.Fatal(err)
	}
	router, err := rcx.NewRouter(token, signer.Public(), nil)
	if err != nil {
		log.Fatal(err)
	}
	srv, err := crux.NewServer(db, &crux.Options{Flags: &flags, Signer: signer, Router: router})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	ctx := context.Background()
	planner := crux.Caller{Agent: "planner", Authenticated: true}
	listed := map[string]bool{}
	for _, t := range srv.ListTools(ctx, planner) {
		listed[t.Name] = true
	}
	fmt.Println("enforcing:", srv.Enforcing(), "store_fact listed:", listed["store_fact"], "sync_pull listed:", listed["sync_pull"])

	_, err = srv.CallTool(ctx, planner, "sync_pull", nil)
	var e *crux.Error
	if errors.As(err, &e) {
		receipt := e.Data.(map[string]any)["refusal_receipt"].(map[string]any)
		fmt.Println(e.Code, e.Message, "signed:", receipt["signature"] != "")
	}
	// Output:
	// enforcing: true store_fact listed: true sync_pull listed: false
	// -32030 RCX capability denied: denied:capability_not_permitted signed: true
}
