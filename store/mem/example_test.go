package mem_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"

	"github.com/crux-go/crux"
	"github.com/crux-go/crux/store/mem"
)

// A crux server over memory alone, as a test of code that embeds crux
// makes one: no directory to create or remove, and nothing left behind.
func Example() {
	db := mem.New()
	defer db.Close()
	srv, err := crux.NewServer(db, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	ctx := context.Background()
	planner := crux.Caller{Agent: "planner", Authenticated: true}
	if _, err := srv.CallTool(ctx, planner, "store_fact",
		json.RawMessage(`{"entity":"project:crux","key":"language","value":"Go"}`)); err != nil {
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
	// Output:
	// project:crux language = Go
}
