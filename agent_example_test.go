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

// An LLM tool-use loop hands the model ToolSpecs and runs each call it asks
// for with Dispatch. A bad argument comes back as text the model can read
// and correct, not as a Go error that ends the loop.
func ExampleServer_Dispatch() {
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
	caller := crux.Caller{Agent: "assistant", Authenticated: true}
	specs, err := srv.ToolSpecs(ctx, caller, "store_fact", "query_facts")
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range specs {
		fmt.Println("tool:", s.Name, json.Valid(s.InputSchema))
	}

	// The model's calls, as its API delivers them.
	calls := []struct{ name, input string }{
		{"store_fact", `{"entity":"project:apollo","key":"deploy_window","value":"Tuesdays"}`},
		{"query_facts", `{"entity":"project:apollo","limit":5}`},
	}
	for _, c := range calls {
		d, err := srv.Dispatch(ctx, caller, c.name, json.RawMessage(c.input))
		if err != nil {
			log.Fatal(err) // an internal failure or a done context
		}
		if d.IsError {
			fmt.Println("error for the model:", d.Text)
		} else {
			fmt.Println("result for the model: JSON", json.Valid([]byte(d.Text)))
		}
	}
	// Output:
	// tool: store_fact true
	// tool: query_facts true
	// result for the model: JSON true
	// error for the model: {"error":{"code":-32602,"data":{"param":"limit","reason":"unknown argument"},"message":"query_facts: limit: unknown argument"}}
}
