package crux_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/crux-go/crux"
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
	// Output:
	// project:crux language = Go
	// crux: query_facts: top_k: must be an integer (-32602)
}
