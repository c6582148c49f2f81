package crux_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/examples/memstore"
	"github.com/crux-go/crux/tools"
)

// Reading a result as the Go type of its tool, without parsing its text.
func ExampleDecode() {
	srv, err := crux.NewServer(memstore.New(), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ctx := context.Background()
	planner := crux.Caller{Agent: "planner", Authenticated: true}

	res, err := srv.CallTool(ctx, planner, "store_fact",
		json.RawMessage(`{"entity":"project:crux","key":"language","value":"Go"}`))
	if err != nil {
		log.Fatal(err)
	}
	stored, err := crux.Decode[tools.StoreFactOutput](res)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(stored.Entity, stored.Key, "version", stored.Version)

	res, err = srv.CallTool(ctx, planner, "query_facts", json.RawMessage(`{"entity":"project:crux"}`))
	if err != nil {
		log.Fatal(err)
	}
	found, err := crux.Decode[tools.QueryFactsOutput](res)
	if err != nil {
		log.Fatal(err)
	}
	for _, row := range found.Rows {
		fmt.Printf("%s = %s (%s)\n", row.Key, row.Value, row.Freshness)
	}

	// A tool that ran but failed is an error wrapping crux.ErrToolFailed.
	res, err = srv.CallTool(ctx, planner, "delete_fact", json.RawMessage(`{"fact_id":"f_00000000000000000000000000000000"}`))
	if err != nil {
		log.Fatal(err)
	}
	_, err = crux.Decode[tools.DeleteFactOutput](res)
	fmt.Println(err)
	// Output:
	// project:crux language version 1
	// language = Go (fresh)
	// crux: the tool reported a failure: fact not found: f_00000000000000000000000000000000
}
