// Package fakellm fakes the chat APIs of LLM vendors for the agent
// examples' tests: an httptest server speaking a vendor's wire format plays
// a scripted model that uses crux as its memory. Nothing leaves the
// machine.
//
// The script, one tool call per turn:
//
//  1. store_fact: the fact Entity/Key = Value;
//  2. query_facts with an argument the tool does not take (limit);
//  3. having read the error that names it, query_facts again without it;
//  4. answer with the value read from that result.
//
// The script checks what the model would read at each turn and reports a
// mismatch with t.Errorf; each server also checks the vendor's own
// framing (tool call ids, error flags).
package fakellm

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// The fact the scripted model stores and recalls.
const (
	Entity = "project:apollo"
	Key    = "deploy_window"
	Value  = "Tuesdays 14:00-16:00 UTC"
	// BadParam is the argument of the bad call, which query_facts does not
	// take.
	BadParam = "limit"
	// Prompt is the user's message of the scripted conversation.
	Prompt = "Remember that apollo deploys on Tuesdays 14:00-16:00 UTC, then tell me when it deploys."
)

// Call is a tool call the scripted model asks for.
type Call struct {
	ID    string // the call's id, call_1 for the first
	Name  string
	Input string // JSON arguments
}

// Result is a tool result as the fake server received it.
type Result struct {
	ID      string // the id of the call it answers
	Content string
	// IsError is the vendor's error flag; Flagged says the vendor has one.
	IsError, Flagged bool
}

// Script is the scripted model. It is safe for concurrent use.
type Script struct {
	t testing.TB
	// Schemas are the input schemas the tools must arrive with, by name.
	Schemas map[string]json.RawMessage

	mu        sync.Mutex
	turns     int    // requests answered
	errorRead string // the param of the error the model read at turn 3
	answer    string
}

// NewScript returns a script that expects the tools whose input schemas
// are given.
func NewScript(t testing.TB, schemas map[string]json.RawMessage) *Script {
	return &Script{t: t, Schemas: schemas}
}

// Tools checks the tool definitions of a request: every expected tool,
// with its schema passed through unchanged.
func (s *Script) Tools(got map[string]json.RawMessage) {
	s.t.Helper()
	for name, want := range s.Schemas {
		g, ok := got[name]
		if !ok {
			s.t.Errorf("request lacks tool %s", name)
			continue
		}
		if !jsonEqual(g, want) {
			s.t.Errorf("tool %s arrived with schema\n%s\nwant the one crux lists\n%s", name, g, want)
		}
	}
}

// Next returns the model's next move given the tool results of the
// conversation so far, in order: a tool call, or (with a nil call) the
// final answer.
func (s *Script) Next(results []Result) (*Call, string) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns++
	for i, r := range results {
		if want := callID(i); r.ID != want {
			s.t.Errorf("tool result %d answers call %q, want %q", i, r.ID, want)
		}
		bad := i == 1
		if r.Flagged && r.IsError != bad {
			s.t.Errorf("tool result %d: error flag %v, want %v (content %s)", i, r.IsError, bad, r.Content)
		}
	}
	call := func(name, input string) (*Call, string) {
		return &Call{ID: callID(len(results)), Name: name, Input: input}, ""
	}
	switch len(results) {
	case 0:
		return call("store_fact", fmt.Sprintf(`{"entity":%q,"key":%q,"value":%q}`, Entity, Key, Value))
	case 1:
		return call("query_facts", fmt.Sprintf(`{"entity":%q,%q:5}`, Entity, BadParam))
	case 2:
		var e struct {
			Error struct {
				Code    int
				Message string
				Data    struct{ Param, Reason string }
			}
		}
		if err := json.Unmarshal([]byte(results[1].Content), &e); err != nil || e.Error.Code != -32602 || e.Error.Data.Param != BadParam {
			s.t.Errorf("the bad call reached the model as %q, want a -32602 error naming %s", results[1].Content, BadParam)
		} else {
			s.errorRead = e.Error.Data.Param
		}
		return call("query_facts", fmt.Sprintf(`{"entity":%q,"key":%q}`, Entity, Key))
	default:
		var out struct {
			Rows []struct{ Entity, Key, Value string }
		}
		if err := json.Unmarshal([]byte(results[len(results)-1].Content), &out); err != nil || len(out.Rows) == 0 {
			s.t.Errorf("query_facts answered %q, want rows", results[len(results)-1].Content)
			s.answer = "I could not find it."
		} else {
			s.answer = "Apollo deploys " + out.Rows[0].Value + "."
		}
		return nil, s.answer
	}
}

// ErrorRead is the argument named by the error the model read after its
// bad call, "" if it read none.
func (s *Script) ErrorRead() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.errorRead
}

// Turns is the number of model turns played.
func (s *Script) Turns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turns
}

func callID(i int) string { return fmt.Sprintf("call_%d", i+1) }

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// checkPrompt reports a conversation whose first user message is not the
// prompt.
func (s *Script) checkPrompt(first string) {
	s.t.Helper()
	if !strings.Contains(first, Prompt) {
		s.t.Errorf("the conversation starts with %q, want the prompt", first)
	}
}
