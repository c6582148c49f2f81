package fakellm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/crux-go/crux"
)

// Schemas returns the input schemas of specs by name, for NewScript.
func Schemas(specs []crux.ToolSpec) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(specs))
	for _, s := range specs {
		out[s.Name] = s.InputSchema
	}
	return out
}

// CheckOutcome checks a scripted conversation that ended with answer
// (and err): the fact is in c's memory, the model read the error of its
// bad call, and the answer carries the fact's value.
func CheckOutcome(t testing.TB, s *Script, srv *crux.Server, c crux.Caller, answer string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("the loop failed: %v", err)
	}
	res, err := srv.CallTool(context.Background(), c, "query_facts", json.RawMessage(`{"entity":"`+Entity+`","key":"`+Key+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Rows []struct{ Value string } }
	if err := json.Unmarshal([]byte(res.Content[0].Text), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Rows) != 1 || out.Rows[0].Value != Value {
		t.Errorf("the store holds %+v for %s %s, want one fact %q", out.Rows, Entity, Key, Value)
	}
	if got := s.ErrorRead(); got != BadParam {
		t.Errorf("the model read an error naming %q after its bad call, want %q", got, BadParam)
	}
	if !strings.Contains(answer, Value) {
		t.Errorf("answer %q does not carry %q", answer, Value)
	}
	if got := s.Turns(); got != 4 {
		t.Errorf("the model played %d turns, want 4", got)
	}
}
